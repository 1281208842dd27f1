//! The leader's work: kube-rs reflectors over IPAddressPools, Namespaces and Services, a
//! kube-rs `Controller` reconciling each Service through one shared `lb::pool::Allocator`,
//! MetalLB's "reprocess all" pass, and the writes (Service status with a resourceVersion
//! precondition, pool status, events).
//!
//! Why it is safe: every reconcile holds the allocator's lock from reading the Service
//! through writing it back. The Service comes from the cache, unless the cache does not yet
//! show the last write this leader made to it: then it is read afresh (so a reconcile never
//! converges on a status older than its own write). The write is an update of the status
//! subresource carrying the resourceVersion read, so a Service changed meanwhile fails with a
//! conflict and is reconciled again. An IP the allocator handed out stays held in memory until
//! the Service is reconciled again, so a failed write never frees it for anyone else. At
//! start, before the first reconcile, the allocator is rebuilt from every Service's current
//! ingress (MetalLB's `reprocessAll` order), so a new leader keeps every allocation. Before
//! each Service write the Lease is checked (read, or a read less than half a Lease duration
//! after its renewal reused), so a replica that lost the Lease without noticing yet does not
//! write.
//!
//! When waiting Services are looked at again is MetalLB's (`controller/main.go:SetBalancer`,
//! `service_controller_reload.go:reprocessAll`): after a pool configuration change (the pools
//! as read, and which namespaces their `namespaceSelectors` match; a status write or a label
//! nobody selects on is no change), after an allocated Service is deleted, after a Service's
//! allocation key (backend key and sharing key) changes, and after a Service loses its IPs
//! while they are still in a pool. The pass goes through every cached Service in MetalLB's
//! order, those carrying more IPs first (ties by namespace and name, where MetalLB takes its
//! cache's map order), and passes again while any Service in it asks for another.
//!
//! Deleted Services: kube-rs's `Controller` does not reconcile objects that are gone, and
//! MetalLB uses no finalizer, so a metadata-only watch on Services reports deletions (and
//! after each relist, allocations whose Service vanished are checked and released).

use crate::events::{self, ServiceEvent, Severity};
use crate::pools;
use crate::service;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, mpsc, watch};
use tracing::{debug, info, warn};
use vigil_k8s::crd::IPAddressPool;
use vigil_lb::pool::{Allocator, Labels, PoolCounters, Pools, deprecated_annotations};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-controller";

/// How long a stop waits for running reconciles before cancelling them.
const FORCED_STOP_AFTER: Duration = Duration::from_secs(5);

/// Passes in a row before the reprocessing waits for the next trigger (MetalLB backs off
/// exponentially instead; a pass that keeps asking for another is a bug either way).
const MAX_PASSES: usize = 8;

/// What the leader needs from the settings.
#[derive(Debug, Clone)]
pub(crate) struct LeadConfig {
    pub(crate) namespace: String,
    pub(crate) lb_class: Option<String>,
    pub(crate) identity: String,
    pub(crate) lease_name: String,
}

/// Why a reconcile failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{op}: {source}")]
    Api {
        /// What was being done.
        op: &'static str,
        /// The failure.
        source: kube::Error,
    },
    /// The Lease names another holder: this replica must not write (it stops leading as
    /// soon as the election notices).
    #[error("the Lease is held by another replica")]
    NotLeader,
}

impl ReconcileError {
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Api { source: kube::Error::Api(s), .. } if s.is_conflict())
    }
}

fn failed(op: &'static str) -> impl FnOnce(kube::Error) -> ReconcileError {
    move |source| ReconcileError::Api { op, source }
}

/// The pool configuration as MetalLB compares it to decide whether to reprocess: the pools,
/// and for each pool with `namespaceSelectors` the namespaces they match (MetalLB resolves
/// them when it reads the configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfigView {
    pools: Pools,
    selected: BTreeMap<String, BTreeSet<String>>,
}

/// The allocator and what was last written from it.
struct State {
    /// `None` while the pools do not form a valid configuration: then nothing is touched
    /// (MetalLB's controller waits the same way when it has no configuration).
    alloc: Option<Allocator>,
    /// The pool status last written (or read) per pool.
    counters: BTreeMap<String, PoolCounters>,
    /// The resourceVersion of each Service as this leader's last status write left it: a
    /// cached Service at another version is read afresh before it is converged.
    written: BTreeMap<String, String>,
    /// UIDs of Services seen deleted that the cache may still hold: never converged again
    /// (that would take their IPs back). Pruned once the cache has let them go.
    deleted: BTreeSet<String>,
    /// Until when the last Lease read still vouches for this replica ([`Ctx::check_leader`]).
    leader_until: Option<Instant>,
}

struct Ctx {
    client: Client,
    cfg: LeadConfig,
    state: Mutex<State>,
    pools: Store<IPAddressPool>,
    namespaces: Store<Namespace>,
    services: Store<Service>,
    recorder: Recorder,
    reprocess: mpsc::UnboundedSender<()>,
    /// Set by the first reconcile: the Service cache is ready.
    started: watch::Sender<bool>,
}

/// One Service reconciled: the events to publish about it, and whether every Service should
/// be looked at again.
struct Reconciled {
    service: Option<Service>,
    events: Vec<ServiceEvent>,
    reprocess: bool,
}

impl Reconciled {
    fn nothing() -> Self {
        Self {
            service: None,
            events: Vec::new(),
            reprocess: false,
        }
    }
}

/// Leads until `stop` resolves: rebuilds the allocations, then reconciles Services until
/// then. Returns after the last reconcile has finished.
pub(crate) async fn lead(
    client: Client,
    cfg: LeadConfig,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), ReconcileError> {
    let stop = stop.shared();
    let (pool_store, pool_writer) = reflector::store();
    let (ns_store, ns_writer) = reflector::store();
    let (reprocess, reprocess_rx) = mpsc::unbounded_channel();

    let pool_api: Api<IPAddressPool> = Api::namespaced(client.clone(), &cfg.namespace);
    let pool_stream =
        reflector::reflector(pool_writer, watcher(pool_api, watcher::Config::default()))
            .default_backoff()
            .touched_objects();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns_stream = reflector::reflector(ns_writer, watcher(ns_api, watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    let svc_api: Api<Service> = Api::all(client.clone());
    let controller = Controller::new(svc_api, watcher::Config::default());
    let svc_store = controller.store();

    let reporter = Reporter {
        controller: FIELD_MANAGER.into(),
        instance: Some(cfg.identity.clone()),
    };
    let ctx = Arc::new(Ctx {
        recorder: Recorder::new(client.clone(), reporter),
        client: client.clone(),
        cfg,
        state: Mutex::new(State {
            alloc: None,
            counters: BTreeMap::new(),
            written: BTreeMap::new(),
            deleted: BTreeSet::new(),
            leader_until: None,
        }),
        pools: pool_store.clone(),
        namespaces: ns_store.clone(),
        services: svc_store.clone(),
        reprocess,
        started: watch::Sender::new(false),
    });

    // A change of the pool configuration reprocesses every Service, as in MetalLB; pool
    // status writes (ours) and namespace changes no selector sees are no change.
    let triggers = {
        let ctx = Arc::clone(&ctx);
        let changes = futures::stream::select(
            pool_stream.map(|r| r.map(|_| ()).map_err(|e| e.to_string())),
            ns_stream.map(|r| r.map(|_| ()).map_err(|e| e.to_string())),
        );
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut changes = std::pin::pin!(changes.take_until(stop));
            let mut last: Option<ConfigView> = None;
            while let Some(r) = changes.next().await {
                match r {
                    Ok(()) => {
                        let now = ctx.config_view();
                        if now.is_some() && now != last {
                            last = now;
                            let _ = ctx.reprocess.send(());
                        }
                    }
                    Err(e) => warn!(error = %e, "pool or namespace watch"),
                }
            }
        })
    };
    let deletions = tokio::spawn(watch_deletions(
        Arc::clone(&ctx),
        svc_store.clone(),
        stop.clone(),
    ));

    // Nothing is decided before the caches hold what the API server has.
    let ready = async {
        let _ = pool_store.wait_until_ready().await;
        let _ = ns_store.wait_until_ready().await;
    };
    tokio::select! {
        () = ready => {}
        () = stop.clone() => {
            let _ = tokio::join!(triggers, deletions);
            return Ok(());
        }
    }
    rebuild(&ctx).await?;
    let passes = tokio::spawn(reprocess_passes(
        Arc::clone(&ctx),
        reprocess_rx,
        stop.clone(),
    ));

    // kube-rs holds its runner until the Service cache is ready, and stops filling that
    // cache once a graceful shutdown begins: a stop before the first list completes would
    // wait forever. So the graceful stop also waits for the cache, and a forceful one
    // follows [`FORCED_STOP_AFTER`] later (dropping the stream cancels what still runs).
    let graceful = {
        let (stop, store) = (stop.clone(), svc_store.clone());
        async move {
            stop.await;
            let _ = store.wait_until_ready().await;
        }
    };
    let forced = {
        let stop = stop.clone();
        async move {
            stop.await;
            tokio::time::sleep(FORCED_STOP_AFTER).await;
        }
    };
    controller
        .graceful_shutdown_on(graceful)
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .take_until(forced)
        .for_each(|r| async move {
            match r {
                Ok((obj, _)) => debug!(service = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile"),
            }
        })
        .await;
    let _ = tokio::join!(triggers, deletions, passes);
    Ok(())
}

/// MetalLB's `reprocessAll`: on each trigger (coalesced), every cached Service in MetalLB's
/// order, under one hold of the lock; again while a Service asks for it or a write failed.
async fn reprocess_passes(
    ctx: Arc<Ctx>,
    mut triggers: mpsc::UnboundedReceiver<()>,
    stop: impl Future<Output = ()> + Send,
) {
    let mut stop = std::pin::pin!(stop);
    // The Controller reconciles only once its Service cache is ready, so its first reconcile
    // says the cache is. (Waiting on the Store here instead would race the Controller's own
    // wait: kube-rs's readiness signal wakes only one waiter.)
    let mut started = ctx.started.subscribe();
    tokio::select! {
        _ = started.wait_for(|s| *s) => {}
        () = &mut stop => return,
    }
    loop {
        tokio::select! {
            t = triggers.recv() => if t.is_none() { return },
            () = &mut stop => return,
        }
        for pass in 1..=MAX_PASSES {
            while triggers.try_recv().is_ok() {}
            let again = ctx.reprocess_all().await;
            if !again {
                break;
            }
            debug!(pass, "reprocessing again");
            // MetalLB retries through its rate limiter, starting at 5 ms and doubling.
            tokio::time::sleep(Duration::from_millis(5 << pass)).await;
        }
    }
}

/// Rebuilds the allocator from every Service's current ingress (a fresh list), before any
/// reconcile: MetalLB's restart order, every valid carried allocation kept.
async fn rebuild(ctx: &Ctx) -> Result<(), ReconcileError> {
    let mut st = ctx.state.lock().await;
    st.alloc = match ctx.current_pools() {
        Some(pools) => Some(ctx.rebuilt(pools).await?),
        None => None,
    };
    for p in ctx.pools.state() {
        let name = p.name_any();
        if let Some(s) = &p.status {
            let read = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok()).unwrap_or(u64::MAX);
            st.counters.insert(
                name,
                PoolCounters {
                    assigned_ipv4: read(s.assigned_ipv4),
                    assigned_ipv6: read(s.assigned_ipv6),
                    available_ipv4: read(s.available_ipv4),
                    available_ipv6: read(s.available_ipv6),
                },
            );
        }
    }
    Ok(())
}

/// Releases the allocations of deleted Services; after every (re)list, checks allocations
/// whose Service is not in the cache.
async fn watch_deletions(
    ctx: Arc<Ctx>,
    cache: Store<Service>,
    stop: impl Future<Output = ()> + Send,
) {
    let meta_api: Api<PartialObjectMeta<Service>> = Api::all(ctx.client.clone());
    let stream = watcher(meta_api, watcher::Config::default())
        .default_backoff()
        .take_until(stop);
    let mut stream = std::pin::pin!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Delete(meta)) => {
                let key = format!(
                    "{}/{}",
                    meta.metadata.namespace.as_deref().unwrap_or_default(),
                    meta.metadata.name.as_deref().unwrap_or_default()
                );
                if let Some(uid) = meta.metadata.uid {
                    ctx.state.lock().await.deleted.insert(uid);
                }
                ctx.forget(&key).await;
            }
            Ok(watcher::Event::InitDone) => {
                let keys: Vec<String> = {
                    let st = ctx.state.lock().await;
                    st.alloc
                        .iter()
                        .flat_map(|a| a.allocations().keys().cloned())
                        .collect()
                };
                for key in keys {
                    let Some((ns, name)) = key.split_once('/') else {
                        continue;
                    };
                    let oref = reflector::ObjectRef::<Service>::new(name).within(ns);
                    if cache.get(&oref).is_some() {
                        continue;
                    }
                    let api: Api<Service> = Api::namespaced(ctx.client.clone(), ns);
                    if let Ok(None) = api.get_opt(name).await {
                        ctx.forget(&key).await;
                    }
                }
            }
            Ok(_) => {}
            Err(e) => warn!(error = %e, "service deletion watch"),
        }
    }
}

/// MetalLB's allocation key (`Allocator.AllocationKey`): backend key then sharing key, empty
/// for a Service holding nothing.
fn allocation_key(alloc: &Allocator, key: &str) -> String {
    alloc
        .allocation(key)
        .map(|a| {
            format!(
                "{}{}",
                a.backend_key,
                a.sharing_key.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default()
}

impl Ctx {
    /// An allocator over `pools` holding what every Service carries now (a fresh list, not
    /// the cache), in MetalLB's restart order.
    async fn rebuilt(&self, pools: Pools) -> Result<Allocator, ReconcileError> {
        let api: Api<Service> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(failed("list services"))?;
        let carried: Vec<_> = list
            .items
            .iter()
            .filter(|s| {
                service::handled(s, self.cfg.lb_class.as_deref()) && service::is_load_balancer(s)
            })
            .filter_map(|s| {
                let req = service::request(s, &self.namespace_labels(s)).ok()?;
                Some((req, service::ingress_ips(s)))
            })
            .collect();
        let n = carried.len();
        let (alloc, _) = Allocator::rebuild(pools, carried);
        info!(
            services = n,
            allocations = alloc.allocations().len(),
            "allocations rebuilt"
        );
        Ok(alloc)
    }

    /// The pools in the cache as one configuration, `None` (with a log line) if invalid.
    fn current_pools(&self) -> Option<Pools> {
        let objects = self.pools.state();
        let mut sorted: Vec<&IPAddressPool> = objects.iter().map(Arc::as_ref).collect();
        sorted.sort_by_key(|p| p.metadata.name.clone());
        match pools::pools(sorted) {
            Ok(p) => Some(p),
            Err(e) => {
                warn!(error = %e, "IPAddressPools are not valid; waiting for a valid configuration");
                None
            }
        }
    }

    /// The configuration as MetalLB compares it, `None` while it is not valid.
    fn config_view(&self) -> Option<ConfigView> {
        let pools = self.current_pools()?;
        let namespaces = self.namespaces.state();
        let mut selected = BTreeMap::new();
        for pool in pools.iter() {
            let Some(sa) = pool.service_allocation() else {
                continue;
            };
            if sa.namespace_selectors.is_empty() {
                continue;
            }
            let matching = namespaces
                .iter()
                .filter(|n| {
                    let labels = n.metadata.labels.clone().unwrap_or_default();
                    sa.namespace_selectors.iter().any(|s| s.matches(&labels))
                })
                .map(|n| n.name_any())
                .collect();
            selected.insert(pool.name().to_string(), matching);
        }
        Some(ConfigView { pools, selected })
    }

    fn namespace_labels(&self, svc: &Service) -> Labels {
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        self.namespaces
            .get(&reflector::ObjectRef::new(ns))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// Releases a deleted Service's IPs; others waiting for IPs are then reprocessed.
    async fn forget(&self, key: &str) {
        let mut st = self.state.lock().await;
        st.written.remove(key);
        let Some(alloc) = st.alloc.as_mut() else {
            return;
        };
        if let Some(old) = alloc.release(key) {
            info!(service = key, ips = ?old.ips, "service deleted, IPs released");
            let _ = self.reprocess.send(());
            if let Err(e) = self.write_counters(&mut st).await {
                warn!(error = %e, "pool status");
            }
        }
    }

    /// Brings the allocator's pools in line with the cache. Returns whether they changed.
    async fn refresh_pools(&self, st: &mut State) -> Result<bool, ReconcileError> {
        let Some(pools) = self.current_pools() else {
            return Ok(false);
        };
        match st.alloc.as_mut() {
            Some(alloc) if alloc.pools() == &pools => Ok(false),
            Some(alloc) => {
                let released = alloc.set_pools(pools);
                if !released.is_empty() {
                    info!(services = ?released, "released: their IPs are in no pool any more");
                }
                Ok(true)
            }
            // The first valid configuration since leading began: rebuilt from what Services
            // carry, as at start, so no carried IP goes to another Service first.
            None => {
                st.alloc = Some(self.rebuilt(pools).await?);
                Ok(true)
            }
        }
    }

    /// Writes the counters of every pool whose status differs from what was last written.
    async fn write_counters(&self, st: &mut State) -> Result<(), ReconcileError> {
        let Some(alloc) = st.alloc.as_ref() else {
            return Ok(());
        };
        let api: Api<IPAddressPool> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let mut written = Vec::new();
        for pool in alloc.pools().iter() {
            let Some(c) = alloc.counters(pool.name()) else {
                continue;
            };
            // MetalLB compares with the pool's status as stored; so do we (the cache may lag
            // our own last write, which then costs one identical write).
            let stored = self
                .pools
                .get(&reflector::ObjectRef::new(pool.name()).within(&self.cfg.namespace))
                .map(|p| p.status.clone().unwrap_or_default());
            if st.counters.get(pool.name()) == Some(&c)
                && stored.as_ref() == Some(&pools::status(c))
            {
                continue;
            }
            let patch = serde_json::json!({ "status": pools::status(c) });
            match api
                .patch_status(
                    pool.name(),
                    &PatchParams::apply(FIELD_MANAGER),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => written.push((pool.name().to_string(), c)),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(failed("pool status")(e)),
            }
        }
        st.counters.extend(written);
        Ok(())
    }

    /// Makes sure this replica still holds the Lease right before a Service write: the
    /// election reports a lost Lease only when it next syncs, so without this a replica cut
    /// off from renewing could still write while its successor allocates.
    ///
    /// The Lease is read, and the answer reused until half its duration after the renewal it
    /// shows: the renewal time was written by this replica's own clock, and a successor may
    /// take over only once a whole duration has passed since it, by its clock; so reuse is
    /// safe while the clocks differ by less than half a duration (the bound Kubernetes' own
    /// leader election assumes too), and a reconcile costs no Lease read most of the time.
    async fn check_leader(&self, st: &mut State) -> Result<(), ReconcileError> {
        if st.leader_until.is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        st.leader_until = None;
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lease = leases
            .get_opt(&self.cfg.lease_name)
            .await
            .map_err(failed("read lease"))?;
        let spec = lease.and_then(|l| l.spec).unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Err(ReconcileError::NotLeader);
        }
        if let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) {
            let until_ms = renewed.0.as_millisecond() + i64::from(seconds) * 500;
            let left_ms = until_ms - k8s_openapi::jiff::Timestamp::now().as_millisecond();
            if let Ok(left) = u64::try_from(left_ms) {
                st.leader_until = Some(Instant::now() + Duration::from_millis(left));
            }
        }
        Ok(())
    }

    async fn publish(&self, svc: &Service, ev: &ServiceEvent) {
        let event = Event {
            type_: match ev.severity {
                Severity::Normal => EventType::Normal,
                Severity::Warning => EventType::Warning,
            },
            reason: ev.reason.to_string(),
            note: Some(ev.note.clone()),
            action: "Allocate".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &svc.object_ref(&())).await {
            warn!(error = %e, reason = ev.reason, "event");
        }
    }

    async fn publish_all(&self, done: &Reconciled) {
        if let Some(svc) = &done.service {
            for ev in &done.events {
                self.publish(svc, ev).await;
            }
        }
    }

    /// The Service to converge: `cached`, unless this leader's last write to it is not in the
    /// cache yet; then a fresh read (`None`: it is gone).
    async fn current(
        &self,
        st: &mut State,
        cached: &Service,
    ) -> Result<Option<Service>, ReconcileError> {
        let key = service::key(cached);
        match st.written.get(&key) {
            Some(rv) if cached.metadata.resource_version.as_deref() != Some(rv.as_str()) => {}
            _ => return Ok(Some(cached.clone())),
        }
        let ns = cached.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Service> = Api::namespaced(self.client.clone(), &ns);
        let fresh = api
            .get_opt(&cached.name_any())
            .await
            .map_err(failed("get service"))?;
        // Whatever it says now is newer than our write.
        st.written.remove(&key);
        Ok(fresh)
    }

    /// One Service brought in line with the allocator (MetalLB's `SetBalancer`), the lock
    /// held: converge, write the status if it changed, and say whether everyone should be
    /// looked at again.
    async fn reconcile_one(
        &self,
        st: &mut State,
        cached: &Service,
    ) -> Result<Reconciled, ReconcileError> {
        let key = service::key(cached);
        if cached
            .metadata
            .uid
            .as_ref()
            .is_some_and(|u| st.deleted.contains(u))
        {
            return Ok(Reconciled::nothing());
        }
        let Some(svc) = self.current(st, cached).await? else {
            // Gone: as the deletion watch would (it may not have seen it yet).
            let released = st.alloc.as_mut().and_then(|a| a.release(&key)).is_some();
            if released {
                self.write_counters(st).await?;
            }
            return Ok(Reconciled {
                reprocess: released,
                ..Reconciled::nothing()
            });
        };
        if !service::handled(&svc, self.cfg.lb_class.as_deref()) {
            return Ok(Reconciled::nothing());
        }
        let labels = self.namespace_labels(&svc);
        let Some(alloc) = st.alloc.as_mut() else {
            return Ok(Reconciled::nothing());
        };
        let before: Vec<IpAddr> = alloc
            .allocation(&key)
            .map(|a| a.ips.clone())
            .unwrap_or_default();
        let key_before = allocation_key(alloc, &key);
        let mut evs: Vec<ServiceEvent> = Vec::new();
        let (ips, pool) = if !service::is_load_balancer(&svc) {
            alloc.release(&key);
            (Vec::new(), None)
        } else {
            match service::request(&svc, &labels) {
                Err(e) => {
                    evs.extend(events::for_request_error(&e));
                    match e {
                        vigil_lb::pool::RequestError::NoClusterIps
                        | vigil_lb::pool::RequestError::NotEnoughClusterIps => {
                            alloc.release(&key);
                            (Vec::new(), None)
                        }
                        // MetalLB stops here without touching the Service.
                        _ => {
                            return Ok(Reconciled {
                                service: Some(svc),
                                events: evs,
                                reprocess: false,
                            });
                        }
                    }
                }
                Ok(req) => {
                    let conv = alloc.converge(&req, &service::ingress_ips(&svc));
                    evs.extend(events::for_convergence(&key, &conv));
                    (conv.ips, conv.pool)
                }
            }
        };
        // A changed sharing or backend key may let others share, or stop them.
        let mut reprocess = allocation_key(alloc, &key) != key_before;
        let desired = service::with_allocation(&svc, &ips, pool.as_deref());
        if service::differs(&svc, &desired) {
            // IPs given up that are still in a pool may be what a waiting Service needs.
            let released = !before.is_empty()
                && alloc.allocation(&key).is_none()
                && alloc.pools().owner_of(&before).is_some();
            reprocess |= released;
            let annotations = svc.metadata.annotations.clone().unwrap_or_default();
            for a in deprecated_annotations(&annotations) {
                evs.push(events::deprecated(a));
            }
            self.check_leader(st).await?;
            let pp = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            let ns = svc.metadata.namespace.clone().unwrap_or_default();
            let api: Api<Service> = Api::namespaced(self.client.clone(), &ns);
            let stored = match api.replace_status(&svc.name_any(), &pp, &desired).await {
                Ok(stored) => stored,
                // Deleted meanwhile: what it was given goes back at once.
                Err(kube::Error::Api(e)) if e.is_not_found() => {
                    if let Some(alloc) = st.alloc.as_mut() {
                        alloc.release(&key);
                    }
                    self.write_counters(st).await?;
                    return Ok(Reconciled {
                        reprocess: true,
                        ..Reconciled::nothing()
                    });
                }
                Err(e) => return Err(failed("update service status")(e)),
            };
            if let Some(rv) = stored.metadata.resource_version {
                st.written.insert(key.clone(), rv);
            }
            info!(service = %key, ips = ?ips, pool = ?pool, "service status updated");
        }
        self.write_counters(st).await?;
        Ok(Reconciled {
            service: Some(svc),
            events: evs,
            reprocess,
        })
    }

    /// One reprocessing pass over every cached Service, in MetalLB's order. Returns whether
    /// another pass is needed.
    async fn reprocess_all(&self) -> bool {
        let mut st = self.state.lock().await;
        let mut again = match self.refresh_pools(&mut st).await {
            Ok(changed) => changed,
            Err(e) => {
                warn!(error = %e, "pools");
                true
            }
        };
        let mut services: Vec<Arc<Service>> = self.services.state();
        let cached: BTreeSet<&String> = services
            .iter()
            .filter_map(|s| s.metadata.uid.as_ref())
            .collect();
        st.deleted.retain(|u| cached.contains(u));
        services.sort_by(|a, b| {
            let n = |s: &Service| service::ingress_ips(s).len();
            n(b).cmp(&n(a))
                .then_with(|| a.metadata.namespace.cmp(&b.metadata.namespace))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        debug!(services = services.len(), "reprocessing every service");
        let mut done = Vec::new();
        for svc in &services {
            match self.reconcile_one(&mut st, svc).await {
                Ok(r) => {
                    again |= r.reprocess;
                    done.push(r);
                }
                Err(e) => {
                    debug!(service = %service::key(svc), error = %e, "reprocess");
                    again = true;
                }
            }
        }
        // A new pool gets its status even when no Service is reconciled.
        if let Err(e) = self.write_counters(&mut st).await {
            warn!(error = %e, "pool status");
            again = true;
        }
        drop(st);
        for r in &done {
            self.publish_all(r).await;
        }
        again
    }
}

async fn reconcile(obj: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    ctx.started
        .send_if_modified(|s| !std::mem::replace(s, true));
    let mut st = ctx.state.lock().await;
    if ctx.refresh_pools(&mut st).await? {
        let _ = ctx.reprocess.send(());
    }
    let done = ctx.reconcile_one(&mut st, &obj).await?;
    drop(st);
    if done.reprocess {
        let _ = ctx.reprocess.send(());
    }
    ctx.publish_all(&done).await;
    Ok(Action::await_change())
}

fn error_policy(obj: Arc<Service>, err: &ReconcileError, _ctx: Arc<Ctx>) -> Action {
    // A conflict means the Service changed under us: read it again at once.
    if err.is_conflict() {
        debug!(service = %service::key(&obj), "conflict, retrying");
        return Action::requeue(Duration::from_millis(200));
    }
    warn!(service = %service::key(&obj), error = %err, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}
