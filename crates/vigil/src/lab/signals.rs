//! Ctrl-C and SIGTERM for `vigil lab`: they must tear the lab down, not kill the process where it
//! stands. Handlers (tokio's, on a thread of their own) raise a flag; the lab's loops check it
//! between steps and unwind, so the lab's `Drop` kills the speakers and deletes the namespaces.
//! A second signal while that is under way exits at once, with the command that finishes the
//! job.
//!
//! Handlers rather than a blocked mask and `sigwait`: a blocked mask would be inherited by the
//! speakers through `ip netns exec`, and then they would ignore their SIGTERM.

use nix::sys::signal::Signal;
use std::sync::atomic::{AtomicI32, Ordering};
use tokio::signal::unix::{SignalKind, signal};

/// The signal received, 0 while none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// Installs the handlers (before this returns) and starts the thread that takes the signals.
pub(super) fn install(prefix: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut int, mut term) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ))
        })
        .map_err(|e| format!("cannot handle SIGINT/SIGTERM: {e}"))?;
    let prefix = prefix.to_string();
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(move || {
            runtime.block_on(async move {
                loop {
                    let signal = tokio::select! {
                        Some(()) = int.recv() => Signal::SIGINT,
                        Some(()) = term.recv() => Signal::SIGTERM,
                        else => return,
                    };
                    if RECEIVED.swap(signal as i32, Ordering::SeqCst) != 0 {
                        eprintln!(
                            "\nvigil lab: {signal} again: exiting now; finish the teardown with \
                             `vigil lab --down --prefix {prefix}`"
                        );
                        std::process::exit(130);
                    }
                    eprintln!("\nvigil lab: {signal}: stopping");
                }
            });
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// The signal that asked the lab to stop, if one did.
pub(super) fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Signal::try_from(n).ok(),
    }
}
