//! When each Service of a namespace first showed `status.loadBalancer.ingress`, as a watch on
//! Services saw it: the controller phase's clock. A watch costs the bench one list and one
//! watch request (the bench's own, not counted), however many Services it times, where
//! polling would cost a request per look.
//!
//! The watch runs as a task on the control plane's runtime and stamps each event as it
//! arrives, so the times do not depend on when the bench next looks.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};

use crate::lab::Bench;

/// Between two looks at the stamps while one Service is awaited (the bench's own loop, no
/// request; the stamp itself is taken by the watch task, so this only delays the next trial).
const LOOK_EVERY: Duration = Duration::from_millis(2);
/// Between two looks while many are awaited (kept rare: the controller measured shares the
/// two cores).
const LOOK_MANY_EVERY: Duration = Duration::from_millis(100);

/// What the watch has seen so far.
#[derive(Debug, Default)]
struct Seen {
    /// Service name to the moment of its first event (the API server and the watch alone,
    /// no controller involved: the floor under every ingress time).
    first: HashMap<String, Instant>,
    /// Service name to the moment it first showed an ingress address.
    ingress: HashMap<String, Instant>,
    /// Services that exist now (added, not yet deleted).
    present: HashSet<String>,
    /// Watch errors (each followed by the watcher's own backoff and relist).
    errors: u64,
}

/// A running watch on one namespace's Services; stopped when dropped.
pub(crate) struct IngressWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

fn has_ingress(svc: &Service) -> bool {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

impl IngressWatch {
    /// Starts watching namespace `ns` and waits until the watch has its first list.
    pub(crate) fn start(bench: &Bench, ns: &str) -> Result<Self, String> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let api: Api<Service> = Api::namespaced(bench.kube.clone(), ns);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let task_seen = Arc::clone(&seen);
        let task = bench.lab.cp().runtime().handle().spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                let mut seen = task_seen.lock().unwrap_or_else(PoisonError::into_inner);
                match event {
                    Ok(Event::Apply(svc) | Event::InitApply(svc)) => {
                        let name = svc.metadata.name.clone().unwrap_or_default();
                        if has_ingress(&svc) {
                            seen.ingress.entry(name.clone()).or_insert(now);
                        }
                        seen.first.entry(name.clone()).or_insert(now);
                        seen.present.insert(name);
                    }
                    Ok(Event::Delete(svc)) => {
                        let name = svc.metadata.name.clone().unwrap_or_default();
                        seen.present.remove(&name);
                        // A later Service of the same name is timed afresh.
                        seen.ingress.remove(&name);
                        seen.first.remove(&name);
                    }
                    Ok(Event::Init) => {}
                    Ok(Event::InitDone) => {
                        let _ = ready_tx.send(());
                    }
                    Err(_) => seen.errors += 1,
                }
            }
        });
        if ready_rx.recv_timeout(Duration::from_secs(30)).is_err() {
            task.abort();
            return Err(format!("the watch on Services in {ns} never listed"));
        }
        Ok(Self { seen, task })
    }

    fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// When `name` first showed an ingress, waiting up to `limit` for it.
    pub(crate) fn wait_for(&self, name: &str, limit: Duration) -> Option<Instant> {
        let end = Instant::now() + limit;
        loop {
            if let Some(at) = self.with(|s| s.ingress.get(name).copied()) {
                return Some(at);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(LOOK_EVERY);
        }
    }

    /// When the watch first saw `name` (while it exists).
    pub(crate) fn first_seen(&self, name: &str) -> Option<Instant> {
        self.with(|s| s.first.get(name).copied())
    }

    /// Waits up to `limit` until none of `names` exists any more; whether that happened.
    pub(crate) fn wait_gone(&self, names: &[String], limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            if self.with(|s| names.iter().all(|n| !s.present.contains(n))) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(LOOK_MANY_EVERY);
        }
    }

    /// The ingress stamps of `names` seen so far.
    pub(crate) fn stamps(&self, names: &[String]) -> Vec<Instant> {
        self.with(|s| {
            names
                .iter()
                .filter_map(|n| s.ingress.get(n).copied())
                .collect()
        })
    }

    /// Waits up to `limit` until every one of `names` has shown an ingress; their stamps
    /// (fewer than `names` when the bound ran out).
    pub(crate) fn wait_all(&self, names: &[String], limit: Duration) -> Vec<Instant> {
        let end = Instant::now() + limit;
        loop {
            let stamps = self.stamps(names);
            if stamps.len() == names.len() || Instant::now() >= end {
                return stamps;
            }
            std::thread::sleep(LOOK_MANY_EVERY);
        }
    }

    /// Watch errors so far (the watcher relists after each).
    pub(crate) fn errors(&self) -> u64 {
        self.with(|s| s.errors)
    }
}

impl Drop for IngressWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
