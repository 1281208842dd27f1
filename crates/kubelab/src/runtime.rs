//! A tokio runtime whose sockets are opened inside a lab's network namespace.
//!
//! A network namespace belongs to a thread, not to a process: a thread that has joined one
//! with `setns` opens its sockets there. The test process stays in the root namespace, so the
//! runtime's worker and blocking threads join the lab's namespace as they start, and
//! [`LabRuntime::block_on`] drives its future from a short-lived thread that has joined it
//! too (a kube client connects inside the future of the request, on whichever thread polls
//! it). Nothing is added to the root namespace.

use std::fs::File;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;

use nix::sched::{CloneFlags, setns};

/// Moves the calling thread into the network namespace held open by `netns`.
fn join(netns: &File, name: &str) -> io::Result<()> {
    setns(netns, CloneFlags::CLONE_NEWNET)
        .map_err(|e| io::Error::other(format!("setns into {name}: {e}")))
}

/// A multi-threaded tokio runtime living in one network namespace (as made by
/// `ip netns add`).
#[derive(Debug)]
pub struct LabRuntime {
    runtime: tokio::runtime::Runtime,
    netns: Arc<File>,
    ns: String,
}

impl LabRuntime {
    /// Builds the runtime for namespace `ns` (two worker threads: the machine is shared).
    pub fn new(ns: &str) -> io::Result<Self> {
        let netns = Arc::new(
            File::open(Path::new("/run/netns").join(ns))
                .map_err(|e| io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?,
        );
        let for_threads = Arc::clone(&netns);
        let name = ns.to_string();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("kubelab-{ns}"))
            .enable_all()
            // A thread that failed to join would open its sockets in the root namespace;
            // better to stop the test than to let it talk to the wrong network.
            .on_thread_start(move || {
                if let Err(e) = join(&for_threads, &name) {
                    panic!("kubelab runtime thread: {e}");
                }
            })
            .build()?;
        Ok(Self {
            runtime,
            netns,
            ns: ns.to_string(),
        })
    }

    /// The namespace this runtime lives in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// Runs `fut` to completion on this runtime, polled from a thread inside the namespace.
    /// Tasks it spawns run on the runtime's threads, also inside.
    pub fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        std::thread::scope(|scope| {
            let driver = scope.spawn(|| {
                join(&self.netns, &self.ns).unwrap_or_else(|e| panic!("kubelab block_on: {e}"));
                self.runtime.block_on(fut)
            });
            match driver.join() {
                Ok(output) => output,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// A handle for spawning tasks (they run inside the namespace).
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.runtime.handle()
    }
}
