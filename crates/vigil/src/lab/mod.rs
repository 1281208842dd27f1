//! `vigil lab`: a failover demonstration in network namespaces, in one command (as root).
//!
//! It builds N hosts and a client on a bridge of their own, starts `vigil standalone` on every
//! host with encrypted gossip, waits until the cluster agrees on the VIP's owner and the
//! client hears it, makes the owner fail, reports how long the client's questions went
//! unanswered, and tears it all down (also on Ctrl-C, errors and panics).
//!
//! - [`cluster`]: the namespaces, configurations and speakers, owned by a guard;
//! - [`probe`]: the client's ARP/NDP questions and the outage read out of the answers;
//! - [`netns`]: running code inside a namespace;
//! - [`signals`]: Ctrl-C and SIGTERM turned into an orderly teardown;
//! - [`demo`]: the steps, printed as they go;
//! - [`kept`]: `--down` and `--watch` for a lab left running with `--keep`;
//! - [`kubernetes`]: `--kubernetes`, the same demonstration with a real API server, `vigil
//!   speaker` on every host and `vigil controller` allocating the IP.

mod cluster;
mod demo;
mod kept;
mod kubernetes;
mod probe;
mod signals;

use clap::{Parser, ValueEnum};
use nix::sys::signal::Signal;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// The help text's long description.
pub const LONG_ABOUT: &str = "\
Run a failover lab in network namespaces and watch the VIP move (as root).

Builds N hosts and a client on a bridge in a namespace of its own (198.18.0.0/24 and
2001:db8::/64; nothing outside the lab is touched), writes each host's configuration and a
fresh gossip key, starts `vigil standalone` on every host, waits until they agree on who owns
the VIPs 198.18.0.100 and 2001:db8::100 and the client hears the owner, then makes the owner
fail. The client asks for the VIPs every 10 ms (ARP and neighbour solicitation) and the lab
prints how long the questions went unanswered and which host answers now. Then everything is
torn down, also on Ctrl-C.

Scenarios:
  host-loss  the owner's host vanishes: its link goes down on the bridge
  freeze     the owner's speaker is frozen with SIGSTOP (a hung host)
  crash      the owner's speaker is killed with SIGKILL
  graceful   the owner's speaker is stopped with SIGTERM (it leaves the cluster)
  api-down   (--kubernetes only) the API server is stopped first, then the owner's host
             vanishes; the API server comes back afterwards
  none       no failure: build, settle and show the cluster (useful with --keep)

With --kubernetes, a real kube-apiserver and etcd (vigil-testenv, built by
`conformance/build.sh testenv`; found in VIGIL_GO_BIN_DIR or the checkout's
conformance/.build/bin) run on a lab host of their own, with vigil's CRDs and RBAC
(deploy/kubernetes/base, built in). `vigil controller` gives a dual-stack Service an IPv4 and
an IPv6 address from an IPAddressPool and `vigil speaker` runs on every host, each program as
its ServiceAccount. The lab prints the pool, the Service and its ServiceL2Status as `kubectl
get` would (the API server's own tables), then fails the owner.

Examples:
  vigil lab                          3 hosts, host loss, fast profile
  vigil lab --scenario crash --nodes 5
  vigil lab --profile lan            Go memberlist's LAN timing, for comparison
  vigil lab --scenario none --keep   leave a healthy lab running to poke at
  vigil lab --watch                  follow who answers for the VIP in a kept lab
  vigil lab --down                   tear a kept lab down
  vigil lab --kubernetes --scenario crash
                                     the same with a real API server, vigil speaker and
                                     vigil controller (scripts/lab.sh --kubernetes builds
                                     what it needs)";

/// The namespace prefix unless `--prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "vigil-lab";

/// Run a failover lab in network namespaces and watch the VIP move (as root).
#[derive(Debug, Parser)]
pub struct Args {
    /// How many hosts run a speaker (2 to 16).
    #[arg(long, short = 'n', default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=16))]
    pub nodes: u8,

    /// How the owner fails.
    #[arg(long, short = 's', value_enum, default_value_t = Scenario::HostLoss)]
    pub scenario: Scenario,

    /// The gossip timing profile of every speaker.
    #[arg(long, short = 'p', value_enum, default_value_t = LabProfile::Fast)]
    pub profile: LabProfile,

    /// Leave the lab running at the end and print how to poke at it and how to remove it.
    #[arg(long)]
    pub keep: bool,

    /// Namespace prefix: the lab's namespaces are PREFIX-br, PREFIX-client, PREFIX-host-N and
    /// its files are in /tmp/PREFIX (letters, digits and '-', at most 24 characters).
    #[arg(long, default_value = DEFAULT_PREFIX, value_parser = parse_prefix)]
    pub prefix: String,

    /// Tear down the lab with this prefix (one left by --keep or by a killed run) and exit.
    #[arg(long, conflicts_with_all = ["keep", "watch", "nodes", "scenario", "profile"])]
    pub down: bool,

    /// Follow, from the client, which host answers for the VIPs of the running lab with this
    /// prefix (until Ctrl-C, at most 10 minutes).
    #[arg(long, conflicts_with_all = ["keep", "nodes", "scenario", "profile"])]
    pub watch: bool,

    /// Kubernetes mode: a real API server in the lab, `vigil speaker` on every host and `vigil
    /// controller` allocating the Service's IP (needs vigil-testenv; see above).
    #[arg(long, conflicts_with_all = ["keep", "down", "watch"])]
    pub kubernetes: bool,
}

/// How the owner fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// The owner's host vanishes: its link goes down on the bridge.
    HostLoss,
    /// The owner's speaker is frozen with SIGSTOP (a hung host: its kernel still runs).
    Freeze,
    /// The owner's speaker is killed with SIGKILL.
    Crash,
    /// The owner's speaker is stopped with SIGTERM and leaves the cluster.
    Graceful,
    /// (--kubernetes) The API server is stopped, then the owner's host vanishes.
    ApiDown,
    /// No failure: build, settle and show the cluster.
    None,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Self::HostLoss => "host-loss",
            Self::Freeze => "freeze",
            Self::Crash => "crash",
            Self::Graceful => "graceful",
            Self::ApiDown => "api-down",
            Self::None => "none",
        }
    }
}

/// The gossip timing profiles (see `vigil sim --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabProfile {
    /// vigil's: sub-second detection.
    Fast,
    /// Go memberlist's DefaultLANConfig.
    Lan,
    /// Go memberlist's DefaultWANConfig (detection takes tens of seconds).
    Wan,
    /// Go memberlist's DefaultLocalConfig.
    Local,
}

impl LabProfile {
    fn name(self) -> &'static str {
        match self {
            Self::Fast => "fast",
            Self::Lan => "lan",
            Self::Wan => "wan",
            Self::Local => "local",
        }
    }

    /// How long a takeover may take before the lab gives up: generous bounds above each
    /// profile's worst-case detection for a handful of nodes.
    fn takeover_limit(self) -> Duration {
        Duration::from_secs(match self {
            Self::Fast => 20,
            Self::Lan | Self::Local => 60,
            Self::Wan => 240,
        })
    }
}

/// A namespace prefix: short enough for namespace names, and only characters that need no
/// quoting anywhere.
fn parse_prefix(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 24 {
        return Err("must be 1 to 24 characters".into());
    }
    if !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') || s.starts_with('-') {
        return Err("only letters, digits and '-' (not first)".into());
    }
    Ok(s.to_string())
}

/// Why the lab stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Ctrl-C or SIGTERM.
    Interrupted(Signal),
    /// Something failed; the message says what.
    Failed(String),
}

impl Stop {
    fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

impl From<&str> for Stop {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<String> for Stop {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

/// `Err(Stop::Interrupted)` once Ctrl-C or SIGTERM arrived.
fn check_interrupt() -> Result<(), Stop> {
    signals::received().map_or(Ok(()), |s| Err(Stop::Interrupted(s)))
}

/// Sleeps `d` unless interrupted.
fn pause(d: Duration) -> Result<(), Stop> {
    check_interrupt()?;
    std::thread::sleep(d);
    check_interrupt()
}

/// Runs `vigil lab`.
pub fn run(args: Args) -> ExitCode {
    if let Err(e) = preflight(&args) {
        eprintln!("vigil lab: {e}");
        return ExitCode::from(2);
    }
    if args.down {
        return kept::down(&args.prefix);
    }
    if let Err(e) = signals::install(&args.prefix) {
        eprintln!("vigil lab: {e}");
        return ExitCode::FAILURE;
    }
    let result = if args.watch {
        kept::watch(&args.prefix)
    } else if args.kubernetes {
        kubernetes::demo(&args)
    } else {
        demo::demo(&args)
    };
    // A Ctrl-C at a terminal also reaches the short-lived `ip` commands the lab runs, which may
    // then fail: after a signal, any stop is the signal's doing.
    let result = match (result, signals::received()) {
        (Err(Stop::Failed(_)), Some(signal)) => Err(Stop::Interrupted(signal)),
        (result, _) => result,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Interrupted(signal)) => {
            if args.watch {
                return ExitCode::SUCCESS;
            }
            eprintln!("vigil lab: stopped by {signal}; the lab is torn down");
            ExitCode::from(130)
        }
        Err(Stop::Failed(message)) => {
            eprintln!("vigil lab: {message}");
            if !args.watch {
                eprintln!("vigil lab: the lab is torn down");
            }
            ExitCode::FAILURE
        }
    }
}

/// What must hold before anything is made: root, `ip`, and (unless tearing down or watching)
/// no lab already there under the same prefix.
fn preflight(args: &Args) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("needs root to create network namespaces (try sudo)".into());
    }
    match Command::new("ip")
        .arg("-V")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("`ip` not found: install iproute2 (apt-get install iproute2)".into());
        }
        Err(e) => return Err(format!("cannot run `ip`: {e}")),
    }
    if args.down || args.watch {
        return Ok(());
    }
    if args.scenario == Scenario::ApiDown && !args.kubernetes {
        return Err(
            "--scenario api-down needs --kubernetes (standalone mode has no API server)".into(),
        );
    }
    let stale = cluster::namespaces_with(&args.prefix)?;
    let dir = cluster::work_dir(&args.prefix);
    if !stale.is_empty() || dir.exists() {
        let what = if stale.is_empty() {
            format!("{} exists", dir.display())
        } else {
            format!("namespaces {} exist", stale.join(", "))
        };
        return Err(format!(
            "a lab with prefix {p:?} is already there ({what}; from --keep or a killed run): \
             remove it with `vigil lab --down --prefix {p}`, or pick another --prefix",
            p = args.prefix
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let mut full = vec!["lab"];
        full.extend_from_slice(args);
        Args::try_parse_from(full)
    }

    #[test]
    fn defaults_are_three_hosts_losing_one_on_the_fast_profile() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.nodes, 3);
        assert_eq!(a.scenario, Scenario::HostLoss);
        assert_eq!(a.profile, LabProfile::Fast);
        assert_eq!(a.prefix, DEFAULT_PREFIX);
        assert!(!a.keep && !a.down && !a.watch && !a.kubernetes);
    }

    #[test]
    fn kubernetes_takes_the_scenarios_and_refuses_keep_down_and_watch() {
        let a = parse(&["--kubernetes", "--scenario", "api-down", "-n", "4"]).unwrap();
        assert!(a.kubernetes);
        assert_eq!((a.scenario, a.nodes), (Scenario::ApiDown, 4));
        assert_eq!(a.scenario.name(), "api-down");
        for other in ["--keep", "--down", "--watch"] {
            assert!(parse(&["--kubernetes", other]).is_err(), "{other}");
        }
    }

    #[test]
    fn node_counts_outside_two_to_sixteen_are_refused() {
        for bad in ["0", "1", "17", "300"] {
            let e = parse(&["--nodes", bad]).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("2..=16"), "{e}");
        }
        for bad in ["-3", "three", ""] {
            assert!(parse(&["--nodes", bad]).is_err(), "{bad}");
        }
        assert_eq!(parse(&["--nodes", "2"]).unwrap().nodes, 2);
        assert_eq!(parse(&["-n", "16"]).unwrap().nodes, 16);
    }

    #[test]
    fn scenarios_and_profiles_parse_by_name() {
        let a = parse(&["--scenario", "graceful", "--profile", "lan"]).unwrap();
        assert_eq!(
            (a.scenario, a.profile),
            (Scenario::Graceful, LabProfile::Lan)
        );
        assert_eq!(parse(&["-s", "crash"]).unwrap().scenario, Scenario::Crash);
        assert_eq!(parse(&["-s", "freeze"]).unwrap().scenario, Scenario::Freeze);
        assert_eq!(
            parse(&["-s", "host-loss"]).unwrap().scenario,
            Scenario::HostLoss
        );
        assert!(parse(&["--scenario", "meteor"]).is_err());
        assert!(parse(&["--profile", "turbo"]).is_err());
        // Every profile name the lab offers is one the configuration file accepts.
        for p in LabProfile::value_variants() {
            assert!(p.name().parse::<vigil_gossip::Profile>().is_ok(), "{p:?}");
        }
    }

    #[test]
    fn prefixes_are_short_and_plain() {
        assert_eq!(parse(&["--prefix", "lab-2"]).unwrap().prefix, "lab-2");
        for bad in ["", "-x", "a b", "a/b", "x;rm", "abcdefghijklmnopqrstuvwxyz"] {
            assert!(parse(&["--prefix", bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn down_and_watch_take_no_lab_options() {
        assert!(parse(&["--down"]).unwrap().down);
        assert!(parse(&["--down", "--prefix", "x"]).is_ok());
        assert!(parse(&["--down", "--keep"]).is_err());
        assert!(parse(&["--down", "--nodes", "4"]).is_err());
        assert!(parse(&["--down", "--watch"]).is_err());
        assert!(parse(&["--watch", "--scenario", "crash"]).is_err());
        assert!(parse(&["--watch", "--prefix", "x"]).unwrap().watch);
    }
}
