//! `vigil standalone --config FILE`: the speaker without Kubernetes, configured from a YAML
//! file, like keepalived with N nodes sharing many VIPs.
//!
//! - [`config`]: the file and its validation (every error names its field);
//! - [`speaker`]: the election over the gossip view, and what changed (pure);
//! - [`health`]: health checks whose results go out in gossip metadata;
//! - [`daemon`]: the loop wiring gossip, election and announcer, reloads and signals;
//! - [`local_address`]: the VIPs this node owns held on a host device (`announce.local_address`);
//! - [`http`], [`metrics`], [`state`]: `/metrics`, `/healthz`, `/readyz`, `/status`.

pub mod config;
pub mod daemon;
pub mod health;
pub mod http;
pub mod local_address;
pub mod metrics;
pub mod speaker;
pub mod state;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run the speaker from a YAML file: gossip with the other nodes, elect an owner for every
/// VIP as MetalLB does, answer ARP/NDP for the VIPs this node owns.
///
/// Logs are JSON lines on stderr. SIGHUP, or a change to the file, reloads it; a bad file is
/// rejected and the old one stays in force. SIGTERM or SIGINT leave the cluster and stop.
#[derive(Debug, Parser)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The configuration file (see deploy/standalone.example.yaml).
    #[arg(long, short = 'c')]
    pub config: PathBuf,

    /// Log filter: error, warn, info, debug, trace, or a tracing directive.
    #[arg(long, default_value = "info")]
    pub log_level: String,

    /// Validate the file, print the result and exit.
    #[arg(long)]
    pub check: bool,
}

/// The host name, the default node name.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Runs `vigil standalone`.
pub fn run(args: Args) -> ExitCode {
    let default_name = host_name();
    let config = match config::Config::load(&args.config, default_name.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vigil standalone: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "{}: ok (node {}, {} service(s))",
            args.config.display(),
            config.node.name,
            config.services.len()
        );
        return ExitCode::SUCCESS;
    }
    let filter = match tracing_subscriber::EnvFilter::try_new(&args.log_level) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("vigil standalone: --log-level {:?}: {e}", args.log_level);
            return ExitCode::from(2);
        }
    };
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vigil standalone: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(daemon::run(args.config, config, default_name)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(event = "failed", error = %e, "vigil standalone failed");
            eprintln!("vigil standalone: {e}");
            ExitCode::FAILURE
        }
    }
}
