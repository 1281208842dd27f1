//! Working inside the lab's network namespaces from the lab process itself: a thread that has
//! joined a namespace with `setns` opens its sockets there (a namespace is per thread), so
//! asking a speaker for `/status` on its loopback or asking ARP questions from the client needs
//! no helper process.

use nix::sched::{CloneFlags, setns};
use std::fs::File;
use std::io;
use std::path::Path;

/// Moves the calling thread into the network namespace `ns` (as made by `ip netns add`).
pub fn enter(ns: &str) -> io::Result<()> {
    let file = File::open(Path::new("/run/netns").join(ns))
        .map_err(|e| io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?;
    setns(&file, CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("setns into {ns}: {e}")))
}

/// Runs `f` on a thread inside the network namespace `ns` and returns what it returns.
pub fn run_in<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| enter(ns).map(|()| f()));
        match worker.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
