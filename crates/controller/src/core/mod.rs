//! The allocator as a sans-IO core: one owner of the `lb::pool::Allocator`, of what it has
//! asked to be written, and of the pool configuration it works with. Watch events and write
//! results go in; writes (Service status, pool status, events) come out of
//! [`AllocatorCore::poll_write`]. No clock, no client, no task: the driver
//! ([`crate::driver`]) feeds it and carries its writes out.
//!
//! Why its decisions are those of MetalLB's controller run one Service at a time:
//! - Every convergence happens here, in input order, on the Service as this core last knows
//!   it. A Service whose status write is still waiting or under way is converged on the
//!   status that write will leave ([`Tracked::target`]), as if it had already landed; so the
//!   writes may be carried out concurrently and late without changing a decision.
//! - At most one write per Service is out at a time; a newer wanted status waits for it and
//!   replaces what was waiting. Every write carries the resourceVersion of the Service it
//!   was made from, so a Service changed meanwhile fails with a conflict, and the newer
//!   version the watch then delivers is converged again.
//! - A successful write's result is what this core keeps as the Service until the watch
//!   delivers that same version; what the watch delivers before it is older (a watch gives
//!   one object's versions in order) and ignored, so a lagging watch never converges a
//!   Service on a status older than this core's own write.
//! - An IP the allocator handed out stays held until the Service is converged again or
//!   deleted, so a failed write never frees it for anyone else.
//!
//! When every Service is looked at again is MetalLB's (`controller/main.go:SetBalancer`,
//! `service_controller_reload.go:reprocessAll`): after a pool configuration change
//! ([`config::ConfigView`]), after an allocated Service is deleted, after a Service's
//! allocation key (backend key and sharing key) changes, and after a Service loses its IPs
//! while they are still in a pool. A pass goes through every Service in MetalLB's order,
//! those carrying more IPs first (ties by namespace and name, where MetalLB takes its cache's
//! map order), and passes again while any Service in it asks for another.
//!
//! At start (and when the pools first form a valid configuration) the allocator is rebuilt
//! from every Service's current ingress in MetalLB's restart order, so a new leader keeps
//! every allocation, and then every Service is passed over once.

mod config;
mod decide;
pub mod pool_status;
#[cfg(test)]
mod tests;
mod tracked;
mod writes;

pub use decide::MAX_PASSES;
pub use writes::{Write, WriteId, WriteResult};

use crate::events::ServiceEvent;
use crate::service;
use config::ConfigView;
use k8s_openapi::api::core::v1::Service;
use pool_status::PoolStatusWrites;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use tracked::{Tracked, wanted};
use vigil_lb::pool::{Allocator, Labels, StatusCounters};
use vigil_metallb::crd::IPAddressPool;

/// The allocator core.
#[derive(Debug)]
pub struct AllocatorCore {
    lb_class: Option<String>,
    services: BTreeMap<String, Tracked>,
    pool_objects: Vec<IPAddressPool>,
    namespaces: BTreeMap<String, Labels>,
    /// The last valid configuration.
    view: Option<ConfigView>,
    /// Why the pools as cached now are not valid (MetalLB's ConfigurationState message).
    config_error: Option<String>,
    /// `None` until the Services are listed and the pools form a valid configuration: then
    /// nothing is touched (MetalLB's controller waits the same way).
    alloc: Option<Allocator>,
    services_listed: bool,
    pool_writes: PoolStatusWrites,
    /// Pool status writes to hand out.
    pool_queue: VecDeque<(String, StatusCounters)>,
    /// Pools whose status write is under way, with the counters written.
    pools_in_flight: BTreeMap<String, StatusCounters>,
    /// The counters may differ from some pool's status.
    pools_dirty: bool,
    /// Services whose wanted status may need a write.
    write_queue: VecDeque<String>,
    queued: BTreeSet<String>,
    events: VecDeque<(Arc<Service>, ServiceEvent)>,
}

impl AllocatorCore {
    /// A core for the Services of `lb_class` (`None`: Services without a class).
    pub fn new(lb_class: Option<String>) -> Self {
        Self {
            lb_class,
            services: BTreeMap::new(),
            pool_objects: Vec::new(),
            namespaces: BTreeMap::new(),
            view: None,
            config_error: None,
            alloc: None,
            services_listed: false,
            pool_writes: PoolStatusWrites::default(),
            pool_queue: VecDeque::new(),
            pools_in_flight: BTreeMap::new(),
            pools_dirty: false,
            write_queue: VecDeque::new(),
            queued: BTreeSet::new(),
            events: VecDeque::new(),
        }
    }

    /// Why the pools last given to [`Self::handle_config`] are not valid, if they are not.
    pub fn config_error(&self) -> Option<&str> {
        self.config_error.as_deref()
    }

    /// The IPs the allocator holds for `key`.
    pub fn allocation(&self, key: &str) -> Option<&[IpAddr]> {
        Some(self.alloc.as_ref()?.allocation(key)?.ips.as_slice())
    }

    /// Whether the allocator works (the Services listed, the pools valid once).
    pub fn is_allocating(&self) -> bool {
        self.alloc.is_some()
    }

    /// The allocator, once it works (read for the metrics).
    pub fn allocator(&self) -> Option<&Allocator> {
        self.alloc.as_ref()
    }

    /// Every Service, as a (re)list delivered them. The first list starts the allocator; a
    /// later one replaces what the watch said: a Service missing from it is deleted, and
    /// every Service is passed over once.
    pub fn handle_services_listed(&mut self, list: impl IntoIterator<Item = Arc<Service>>) {
        let mut listed = BTreeMap::new();
        for svc in list {
            listed.insert(service::key(&svc), svc);
        }
        let gone: Vec<String> = self
            .services
            .keys()
            .filter(|k| !listed.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            self.forget(&key);
        }
        for (key, svc) in listed {
            let t = self
                .services
                .entry(key)
                .or_insert_with(|| Tracked::new(Arc::clone(&svc)));
            // A list is read after the writes it may lag behind were answered only in
            // rare races; the resourceVersion precondition catches those.
            t.saw(&svc);
            t.svc = svc;
            t.unechoed = None;
        }
        let first = !self.services_listed;
        self.services_listed = true;
        if first {
            self.start();
        } else {
            self.reprocess();
        }
    }

    /// A Service added or changed.
    pub fn handle_service(&mut self, svc: Arc<Service>) {
        let key = service::key(&svc);
        match self.services.get_mut(&key) {
            Some(t) => {
                if let Some(written) = &t.unechoed {
                    if !at_or_after(svc.metadata.resource_version.as_deref(), written) {
                        // Older than this core's last write to it.
                        return;
                    }
                    t.unechoed = None;
                }
                t.saw(&svc);
                t.svc = svc;
            }
            None => {
                self.services.insert(key.clone(), Tracked::new(svc));
            }
        }
        if self.converge(&key) {
            self.reprocess();
        }
    }

    /// A Service deleted (its last state's `uid`): its IPs go back, and if it held any,
    /// every Service is looked at again.
    pub fn handle_service_deleted(&mut self, key: &str, uid: Option<&str>) {
        let other = self.services.get(key).is_some_and(|t| {
            let known = t.svc.metadata.uid.as_deref();
            known.is_some() && uid.is_some() && known != uid
        });
        if other {
            return;
        }
        if self.forget(key) {
            self.reprocess();
        }
    }

    /// The pools and namespaces as cached now (every pool of the namespace; every namespace
    /// by name with its labels). A change of the configuration they form reprocesses every
    /// Service; a status someone else wrote over this leader's is written again.
    pub fn handle_config(
        &mut self,
        pools: impl IntoIterator<Item = IPAddressPool>,
        namespaces: BTreeMap<String, Labels>,
    ) {
        self.pool_objects = pools.into_iter().collect();
        self.namespaces = namespaces;
        for p in &self.pool_objects {
            self.pools_dirty |= self.pool_writes.observed(p);
        }
        let view = match ConfigView::read(&self.pool_objects, &self.namespaces) {
            Ok(v) => v,
            // Invalid: keep working with the last valid configuration.
            Err(e) => {
                tracing::warn!(error = %e, "IPAddressPools are not valid; waiting for a valid configuration");
                self.config_error = Some(format!("configuration error: {}", e.metallb_message()));
                return;
            }
        };
        self.config_error = None;
        if self.view.as_ref() == Some(&view) {
            return;
        }
        let pools = view.pools.clone();
        self.view = Some(view);
        self.pool_writes.keep_only(&pools);
        self.pools_dirty = true;
        match self.alloc.as_mut() {
            Some(alloc) => {
                if alloc.pools() != &pools {
                    let released = alloc.set_pools(pools);
                    if !released.is_empty() {
                        tracing::info!(services = ?released, "released: their IPs are in no pool any more");
                    }
                }
                self.reprocess();
            }
            None => self.start(),
        }
    }

    /// How the write to `id` ended.
    pub fn handle_written(&mut self, id: &WriteId, result: WriteResult) {
        match id {
            WriteId::Service(key) => self.service_written(key, result),
            WriteId::Pool(name) => {
                let Some(counters) = self.pools_in_flight.remove(name) else {
                    return;
                };
                if let WriteResult::Written {
                    resource_version,
                    uid,
                } = result
                {
                    self.pool_writes
                        .wrote(name, uid, resource_version, counters);
                    // Changes made meanwhile are looked at again.
                    self.pools_dirty = true;
                }
                // A failed write is looked at again through `retry`, after the driver's
                // pause: at once, a refused write would be asked for again and again.
            }
        }
    }

    /// Tries a failed write to `id` again if it is still wanted.
    pub fn retry(&mut self, id: &WriteId) {
        match id {
            WriteId::Service(key) => self.enqueue(key),
            WriteId::Pool(_) => self.pools_dirty = true,
        }
    }

    /// The next write to carry out. Service writes come first, then events, then pool
    /// statuses.
    pub fn poll_write(&mut self) -> Option<Write> {
        while let Some(key) = self.write_queue.pop_front() {
            self.queued.remove(&key);
            let Some(t) = self.services.get_mut(&key) else {
                continue;
            };
            if t.in_flight.is_some() {
                // Asked for again when the write under way ends.
                continue;
            }
            let Some(target) = &t.target else {
                continue;
            };
            match wanted(&t.svc, target) {
                Some(desired) => {
                    t.in_flight = Some(desired.clone());
                    t.seen_in_flight.clear();
                    return Some(Write::ServiceStatus(Box::new(desired)));
                }
                None => {
                    t.target = None;
                    let svc = Arc::clone(&t.svc);
                    for ev in std::mem::take(&mut t.held_events) {
                        self.events.push_back((Arc::clone(&svc), ev));
                    }
                }
            }
        }
        if let Some((service, event)) = self.events.pop_front() {
            return Some(Write::Event { service, event });
        }
        if self.pools_dirty {
            self.pools_dirty = false;
            self.queue_pool_statuses();
        }
        let (name, counters) = self.pool_queue.pop_front()?;
        self.pools_in_flight.insert(name.clone(), counters);
        Some(Write::PoolStatus { name, counters })
    }

    fn service_written(&mut self, key: &str, result: WriteResult) {
        let Some(t) = self.services.get_mut(key) else {
            return;
        };
        let Some(mut sent) = t.in_flight.take() else {
            return;
        };
        let made_from = sent.metadata.resource_version.clone();
        match result {
            WriteResult::Written {
                resource_version, ..
            } => {
                let echoed = resource_version
                    .as_ref()
                    .is_some_and(|rv| t.seen_in_flight.contains(rv));
                // Already delivered: what the core holds is that version or a newer one.
                if !echoed {
                    t.unechoed.clone_from(&resource_version);
                    sent.metadata.resource_version = resource_version;
                    t.svc = Arc::new(sent);
                }
                tracing::info!(service = %key, ips = ?service::ingress_ips(&t.svc), "service status updated");
            }
            WriteResult::Gone => {
                if self.forget(key) {
                    self.reprocess();
                }
                return;
            }
            // The watch brings the newer version (converged and written then), unless it has
            // already; a failure is retried by the driver ([`Self::retry`]).
            WriteResult::Conflict | WriteResult::Failed => {}
        }
        let svc = Arc::clone(&t.svc);
        for ev in std::mem::take(&mut t.held_events) {
            self.events.push_back((Arc::clone(&svc), ev));
        }
        // What is wanted now is written next (nothing if the Service shows it), from the
        // version the write left or a newer one the watch delivered meanwhile; never again
        // from the version that just failed.
        if svc.metadata.resource_version != made_from {
            self.enqueue(key);
        }
    }

    /// Drops `key`'s Service; returns whether it held IPs (every Service is then looked at
    /// again).
    pub(super) fn forget(&mut self, key: &str) -> bool {
        self.services.remove(key);
        let released = self.alloc.as_mut().and_then(|a| a.release(key));
        if let Some(old) = &released {
            tracing::info!(service = key, ips = ?old.ips, "service deleted, IPs released");
            self.pools_dirty = true;
        }
        released.is_some()
    }

    pub(super) fn enqueue(&mut self, key: &str) {
        if self.queued.insert(key.to_string()) {
            self.write_queue.push_back(key.to_string());
        }
    }

    /// Queues a status write for every pool whose status shows other counters, once per
    /// change (a pool with a write under way is looked at again when it ends).
    fn queue_pool_statuses(&mut self) {
        self.pool_queue.clear();
        let Some(alloc) = &self.alloc else {
            return;
        };
        for pool in alloc.pools().iter() {
            let name = pool.name();
            if self.pools_in_flight.contains_key(name) {
                continue;
            }
            let Some(counters) = alloc.status_counters(name) else {
                continue;
            };
            // Not cached: deleted, and the next configuration drops it from the allocator.
            let Some(cached) = self
                .pool_objects
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
            else {
                continue;
            };
            if !self.pool_writes.up_to_date(cached, counters) {
                self.pool_queue.push_back((name.to_string(), counters));
            }
        }
    }
}

/// Whether the watch's version `delivered` is this core's write's version `written` or a
/// later one. A watch gives one object's versions in order, so until `written` arrives every
/// version delivered is older; the exception is a version from after a relist, which may
/// skip `written`. resourceVersions are opaque by the API's contract, but every API server
/// stores etcd's revision there, so when both read as integers the larger one is newer.
fn at_or_after(delivered: Option<&str>, written: &str) -> bool {
    let Some(delivered) = delivered else {
        return false;
    };
    if delivered == written {
        return true;
    }
    matches!(
        (delivered.parse::<u64>(), written.parse::<u64>()),
        (Ok(d), Ok(w)) if d > w
    )
}
