//! vigil's one binary: the command line and one module per subcommand under [`cmd`].
//!
//! `main.rs` only calls [`run`]. Each subcommand is a module in `cmd/` with an `Args` struct
//! (clap derive) and a `run(args) -> ExitCode`.

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::process::ExitCode;

pub mod agent;
pub mod cmd;
#[cfg(feature = "lab")]
pub mod lab;

/// vigil: Layer-2 load-balancer IPs for bare-metal clusters, failing over in well under a
/// second, with hashicorp/memberlist-compatible gossip.
#[derive(Debug, Parser)]
#[command(name = "vigil", version, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a bare gossip member that announces nothing: joins a memberlist cluster (Go or
    /// vigil nodes), prints events as JSON lines, serves /members, /metrics and /healthz (its
    /// admin POST routes only with --admin-token-file).
    #[command(long_about = agent::LONG_ABOUT)]
    Agent(Box<cmd::agent::Args>),
    /// Run a gossip scenario on the deterministic simulator (thousands of nodes, virtual
    /// time) and print detection latency, false positives, traffic and simulator speed.
    #[command(long_about = cmd::sim::LONG_ABOUT)]
    Sim(cmd::sim::Args),
    /// Run the speaker from a YAML file (no Kubernetes): gossip, elect an owner per VIP as
    /// MetalLB does, answer ARP/NDP for the VIPs this node owns.
    Standalone(cmd::standalone::Args),
    /// Ask the local daemon for the members and which node owns each VIP.
    Status(cmd::status::Args),
    /// Write a new gossip keyring file with a random key.
    Keygen(cmd::keygen::Args),
    /// Run a failover lab in network namespaces and watch the VIP move (as root): N hosts
    /// running `vigil standalone` and a client; the owner fails and the client measures the
    /// outage.
    #[cfg(feature = "lab")]
    #[command(long_about = cmd::lab::LONG_ABOUT)]
    Lab(cmd::lab::Args),
    /// Run the speaker in Kubernetes mode, a drop-in for MetalLB's L2 speaker (MetalLB's
    /// flags and METALLB_* environment; Go-style `-flag` accepted).
    Speaker(cmd::speaker::Args),
    /// Allocate LoadBalancer IPs from MetalLB's IPAddressPools, a drop-in for MetalLB's
    /// controller (leader election on a Lease).
    Controller(cmd::controller::Args),
}

/// The program names that run a subcommand directly, as a multi-call binary does: MetalLB's
/// images run `/speaker` and `/controller` with only `args` (its manifests) or with
/// `command: [/speaker]` (its chart), so vigil's images link both names to this binary.
pub const PROGRAM_NAMES: [&str; 2] = ["speaker", "controller"];

/// `args` with the subcommand its program name stands for put in front of the flags: `speaker
/// --port=9120` (the binary called through a link named `speaker`) becomes `vigil speaker
/// --port=9120`. Any other name leaves `args` as they are.
pub fn dispatch_program_name(mut args: Vec<OsString>) -> Vec<OsString> {
    let name = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .filter(|n| PROGRAM_NAMES.contains(n))
        .map(str::to_string);
    if let Some(name) = name {
        args[0] = OsString::from("vigil");
        args.insert(1, OsString::from(name));
    }
    args
}

/// Parses the command line and runs the subcommand.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let mut args = dispatch_program_name(args.into_iter().map(Into::into).collect());
    if args
        .get(1)
        .is_some_and(|a| a == "speaker" || a == "controller")
    {
        // MetalLB's speaker and controller are Go programs: their manifests may pass
        // `-flag=value`.
        let words = args
            .split_off(2)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned());
        args.extend(
            vigil_k8s::settings::go_style_args(words)
                .into_iter()
                .map(OsString::from),
        );
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Agent(args) => cmd::agent::run(*args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Standalone(args) => cmd::standalone::run(args),
        Command::Status(args) => cmd::status::run(args),
        Command::Keygen(args) => cmd::keygen::run(args),
        #[cfg(feature = "lab")]
        Command::Lab(args) => cmd::lab::run(args),
        Command::Speaker(args) => cmd::speaker::run(args),
        Command::Controller(args) => cmd::controller::run(args),
    }
}
