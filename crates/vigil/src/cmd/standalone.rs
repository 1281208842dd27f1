//! `vigil standalone --config FILE`: parses the arguments and runs `vigil_standalone` (the
//! file's side) over `vigil_speaker` (the speaker shared with every mode). Signals are
//! handled here: SIGTERM or SIGINT is the speaker's shutdown; SIGHUP is the file watch's.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

pub use vigil_standalone::{config, host_name};

/// The status document `/status` serves (for `vigil status` and `vigil lab`).
pub mod state {
    pub use vigil_speaker::observe::state::*;
}

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

    /// Validate the file (every error in it), print the result and exit.
    #[arg(long)]
    pub check: bool,
}

/// Runs `vigil standalone`.
pub fn run(args: Args) -> ExitCode {
    let default_name = host_name();
    let config = match config::Config::load(&args.config, default_name.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            for line in e.to_string().lines() {
                eprintln!("vigil standalone: {line}");
            }
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
        let shutdown = super::shutdown_signal().map_err(|e| format!("signals: {e}"))?;
        vigil_standalone::run(args.config, config, default_name, shutdown).await
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
