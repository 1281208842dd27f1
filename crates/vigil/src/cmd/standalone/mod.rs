//! `vigil standalone --config FILE`: the speaker without Kubernetes, configured from a YAML
//! file, like keepalived with N nodes sharing many VIPs.
//!
//! The speaker itself is `vigil_speaker::run` (shared with every mode); this module is the
//! file's side of it:
//!
//! - [`config`]: the file and its validation (every error names its field), and its split
//!   into the speaker's restart-only settings and desired state;
//! - [`source`]: the file/SIGHUP watch as a stream of snapshots, the keyring file as a stream
//!   of key lists, and the health checks' flips;
//! - [`health`]: health checks whose results go out in gossip metadata;
//! - [`state`]: the status document (re-exported from the speaker, for `vigil status`).

pub mod config;
pub mod health;
pub mod source;

/// The status document `/status` serves (for `vigil status` and `vigil lab`).
pub mod state {
    pub use vigil_speaker::observe::state::*;
}

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
    let speaker = async move {
        let settings = config.settings();
        let source = source::start(args.config, config, default_name)?;
        let shutdown = shutdown_signal().map_err(|e| format!("signals: {e}"))?;
        vigil_speaker::run(settings, source, (), shutdown)
            .await
            .map_err(|e| e.to_string())
    };
    match runtime.block_on(speaker) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(event = "failed", error = %e, "vigil standalone failed");
            eprintln!("vigil standalone: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM or SIGINT: the speaker hands over, leaves and stops.
fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
