//! What a speaker writes back, as MetalLB's does: one `ServiceL2Status` per announcing node
//! and Service, and a `nodeAssigned` Event on the Service when this node starts announcing.
//!
//! The runner's notices arrive synchronously ([`StatusSink::notice`]) and never wait: each
//! becomes the newest wish for its Service in a map (so the backlog is bounded by the number
//! of Services, and a wish replaces an older one not yet written), and an Event in a bounded
//! queue (dropped and counted when full).
//!
//! - [`reconcile`]: the decisions, pure: wishes against this node's statuses as its watch
//!   shows them, one operation per Service, bounded in flight, backoff per Service.
//! - `writer`: the task that runs them: a watch of this node's ServiceL2Status objects (label
//!   `metallb.io/node=<node>`, as MetalLB's status controller filters), and the writes.
//! - `events`: the Event queue and its workers (`nodeAssigned`, and `vigilOwnerMoved` when
//!   an IP moved here from another node).
//! - [`sweep`]: a lost node's statuses, removed by the survivors (its own writer is gone
//!   with its host).

mod events;
pub mod reconcile;
pub mod sweep;
mod writer;

use crate::cached::CachedService;
use crate::source::{Shared, Stores};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::Store;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::Notify;
use vigil_speaker::StatusSink;
use vigil_speaker::core::{Action, Member};
use vigil_speaker::observe::SourceCounters;

/// Where the sink is writing: the API client and this speaker's names.
#[derive(Clone)]
pub struct Target {
    /// The client.
    pub client: kube::Client,
    /// MetalLB's namespace (the statuses live there).
    pub namespace: String,
    /// This node.
    pub node: String,
    /// This speaker's Pod (`--pod-name`): the owner of its statuses, so they go with it.
    pub pod: Option<String>,
}

/// The speaker's [`StatusSink`] in Kubernetes mode.
#[derive(Debug)]
pub struct K8sSink {
    wishes: Arc<Wishes>,
    events: events::Queue,
    shared: Shared,
    announced: AnnouncedVips,
    sweeps: Arc<sweep::Sweeps>,
    node: String,
}

impl K8sSink {
    /// Starts the status writer and the Event workers; their counters go to `counters`
    /// (shown in `/metrics`).
    pub fn start(
        target: Target,
        shared: Shared,
        stores: &Stores,
        counters: &SourceCounters,
    ) -> Self {
        Self::start_with(
            target,
            shared,
            stores.services.clone(),
            stores.pods.clone(),
            counters,
        )
    }

    /// [`K8sSink::start`] with the two stores it reads given one by one: Services (for the
    /// Events' references) and Pods (its own Pod, the owner of its statuses).
    pub fn start_with(
        target: Target,
        shared: Shared,
        services: Store<CachedService>,
        pods: Store<Pod>,
        counters: &SourceCounters,
    ) -> Self {
        let counters = counters.status_writes().clone();
        counters.set_running();
        let wishes = Arc::new(Wishes::default());
        let sweeps = Arc::new(sweep::Sweeps::default());
        tokio::spawn(sweep::run(
            kube::Api::namespaced(target.client.clone(), &target.namespace),
            shared.clone(),
            Arc::clone(&sweeps),
            counters.clone(),
        ));
        let node = target.node.clone();
        let events = events::Queue::start(
            target.client.clone(),
            target.node.clone(),
            services,
            counters.clone(),
        );
        tokio::spawn(
            writer::Writer::new(target, shared.clone(), pods, counters).run(Arc::clone(&wishes)),
        );
        Self {
            wishes,
            events,
            shared,
            announced: AnnouncedVips::default(),
            sweeps,
            node,
        }
    }
}

impl StatusSink for K8sSink {
    fn notice(&mut self, action: &Action) {
        let (services, vip, announced) = match action {
            Action::Announced { vip, services, .. } => (services, *vip, true),
            Action::Withdrawn { vip, services, .. } => (services, *vip, false),
            _ => return,
        };
        for service in services {
            self.shared.set_announced(service, vip, announced);
            let (now, started) = self.announced.set(service, vip, announced);
            self.wishes.put(service, now);
            if started {
                self.events.node_assigned(service);
            }
        }
    }

    fn ownership_changed(&mut self, change: &vigil_speaker::core::OwnershipChange) {
        self.events.owner_moved(change);
    }

    fn members(&mut self, members: &[Member]) {
        self.sweeps.view(&self.node, members);
    }
}

/// The VIPs announced from here, per Service: a Service keeps its status while any of its
/// VIPs is announced (a dual-stack Service's two VIPs come and go one notice each).
#[derive(Debug, Default)]
struct AnnouncedVips {
    by_service: HashMap<String, BTreeSet<IpAddr>>,
}

impl AnnouncedVips {
    /// Records one notice; answers whether the Service is announced now, and whether that
    /// just started (the `nodeAssigned` Event's moment).
    fn set(&mut self, service: &str, vip: IpAddr, announced: bool) -> (bool, bool) {
        let was = self.by_service.contains_key(service);
        if announced {
            self.by_service
                .entry(service.to_string())
                .or_default()
                .insert(vip);
        } else if let Some(vips) = self.by_service.get_mut(service) {
            vips.remove(&vip);
            if vips.is_empty() {
                self.by_service.remove(service);
            }
        }
        let now = self.by_service.contains_key(service);
        (now, now && !was)
    }
}

/// The runner's newest word per Service (`true`: announced), not yet taken by the writer.
#[derive(Debug, Default)]
struct Wishes {
    pending: Mutex<HashMap<String, bool>>,
    changed: Notify,
}

impl Wishes {
    fn put(&self, service: &str, announced: bool) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(service.to_string(), announced);
        self.changed.notify_one();
    }

    fn take(&self) -> HashMap<String, bool> {
        std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn len(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_stays_announced_while_any_of_its_vips_is_and_starts_once() {
        let mut a = AnnouncedVips::default();
        let (v4, v6): (IpAddr, IpAddr) = (
            "198.18.0.10".parse().unwrap(),
            "2001:db8::10".parse().unwrap(),
        );
        assert_eq!(a.set("default/web", v4, true), (true, true));
        assert_eq!(a.set("default/web", v6, true), (true, false));
        assert_eq!(a.set("default/web", v4, false), (true, false));
        assert_eq!(a.set("default/web", v6, false), (false, false));
        assert_eq!(a.set("default/web", v6, false), (false, false));
        assert_eq!(a.set("default/web", v6, true), (true, true));
    }
}
