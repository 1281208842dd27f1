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
        let signals = terminate_or_interrupt().map_err(|e| format!("signals: {e}"))?;
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

/// A future that completes on the first SIGTERM or SIGINT (handlers installed now).
fn terminate_or_interrupt() -> std::io::Result<impl Future<Output = ()>> {
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
