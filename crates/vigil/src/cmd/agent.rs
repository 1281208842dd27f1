//! `vigil agent`: a bare gossip member that announces nothing ([`crate::agent`]). This module
//! only reads the settings, builds the runtime and turns SIGTERM/SIGINT into the agent's
//! shutdown.

pub use crate::agent::Args;

use crate::agent::Settings;
use std::process::ExitCode;

/// Runs the agent until SIGTERM or SIGINT.
pub fn run(args: Args) -> ExitCode {
    let settings = match Settings::from_args(args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("vigil agent: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vigil agent: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        let signals = super::shutdown_signal().map_err(|e| format!("signals: {e}"))?;
        crate::agent::run(settings, signals).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vigil agent: {e}");
            ExitCode::FAILURE
        }
    }
}
