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
//! each Service write the Lease is checked (as watched, and read only when the watched copy
//! does not vouch for this replica), so a replica that lost the Lease without noticing yet
//! does not write.
//!
//! What it asks of the API server per Service change is what MetalLB's controller asks: the
//! Service's status written once when it changes, the events, and the pool's status counters
//! once per change (written apart from the reconciles, so a burst of changes folds into one
//! write). Everything read comes from watches.
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
use k8s_openapi::jiff::Timestamp;
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
use vigil_lb::pool::{
    ANNOTATION_PREFIX, Allocator, IP_ALLOCATED_FROM_POOL, Labels, PoolCounters, Pools,
    deprecated_annotations,
};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-controller";

/// How long a stop waits for running reconciles before cancelling them.
const FORCED_STOP_AFTER: Duration = Duration::from_secs(5);

/// How long a failed pool status write waits before it is tried again.
const POOL_STATUS_RETRY: Duration = Duration::from_secs(1);

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
    /// The lease manager's renewal margin: it renews the Lease this many seconds before the
    /// Lease would run out.
    pub(crate) grace_seconds: u64,
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
    /// Each Service as this leader's last status write left it ([`Ctx::current`]).
    written: BTreeMap<String, WrittenService>,
    /// UIDs of Services seen deleted that the cache may still hold: never converged again
    /// (that would take their IPs back). Pruned once the cache has let them go.
    deleted: BTreeSet<String>,
    /// Until when the last Lease read still vouches for this replica ([`Ctx::check_leader`]).
    leader_until: Option<Instant>,
}

/// A Service's status as this leader last wrote it.
#[derive(Debug)]
struct WrittenService {
    /// The version the write produced.
    resource_version: String,
    ips: Vec<IpAddr>,
    pool: Option<String>,
}

impl WrittenService {
    /// Whether `svc` carries what was written: the same ingress IPs and pool annotation.
    fn shown_by(&self, svc: &Service) -> bool {
        service::ingress_ips(svc) == self.ips
            && svc
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(&format!("{ANNOTATION_PREFIX}{IP_ALLOCATED_FROM_POOL}")))
                == self.pool.as_ref()
    }
}

/// What this leader last wrote as each pool's status (MetalLB writes a pool's status when
/// its counters change, and again when someone else changes that status).
///
/// A write is remembered with the resourceVersion it produced. Until the pool watch has
/// delivered that version the cache shows an older status, which is no reason to write
/// again; once it has, every later version is newer than the write, so a status that differs
/// from it was written by someone else.
#[derive(Debug, Default)]
struct PoolStatusWrites(BTreeMap<String, PoolStatusWrite>);

#[derive(Debug)]
struct PoolStatusWrite {
    /// The pool written (a pool deleted and made again under its name is another pool).
    uid: Option<String>,
    counters: PoolCounters,
    /// The version the write produced.
    resource_version: Option<String>,
    /// Whether the watch has delivered that version.
    seen: bool,
}

impl PoolStatusWrites {
    /// Whether `cached` needs no status write for `counters`: this leader wrote them to this
    /// pool (perhaps not in the cache yet), or the cache shows them already.
    fn up_to_date(&mut self, cached: &IPAddressPool, counters: PoolCounters) -> bool {
        let name = cached.name_any();
        if self
            .0
            .get(&name)
            .is_some_and(|w| w.uid == cached.metadata.uid && w.counters == counters)
        {
            return true;
        }
        if cached.status.clone().unwrap_or_default() != pools::status(counters) {
            return false;
        }
        self.0.insert(
            name,
            PoolStatusWrite {
                uid: cached.metadata.uid.clone(),
                counters,
                resource_version: cached.metadata.resource_version.clone(),
                seen: true,
            },
        );
        true
    }

    /// `stored` is what the API server answered to a write of `counters`.
    fn wrote(&mut self, stored: &IPAddressPool, counters: PoolCounters) {
        self.0.insert(
            stored.name_any(),
            PoolStatusWrite {
                uid: stored.metadata.uid.clone(),
                counters,
                resource_version: stored.metadata.resource_version.clone(),
                seen: false,
            },
        );
    }

    /// A pool as its watch delivered it. Returns whether someone else changed its status
    /// after this leader's last write to it (which is then forgotten, so the next
    /// [`Ctx::write_counters`] compares with the cache and writes).
    fn observed(&mut self, pool: &IPAddressPool) -> bool {
        let name = pool.name_any();
        let Some(w) = self.0.get_mut(&name) else {
            return false;
        };
        if w.uid != pool.metadata.uid {
            return false;
        }
        if w.resource_version.is_some() && w.resource_version == pool.metadata.resource_version {
            w.seen = true;
            return false;
        }
        if w.seen && pool.status.clone().unwrap_or_default() != pools::status(w.counters) {
            self.0.remove(&name);
            return true;
        }
        false
    }

    /// Forgets pools no longer configured.
    fn keep_only(&mut self, configured: &Pools) {
        self.0
            .retain(|name, _| configured.iter().any(|p| p.name() == name));
    }
}

struct Ctx {
    client: Client,
    cfg: LeadConfig,
    state: Mutex<State>,
    pools: Store<IPAddressPool>,
    namespaces: Store<Namespace>,
    services: Store<Service>,
    /// Wakes [`write_pool_statuses`]; a burst of changes wakes it once.
    counters_changed: tokio::sync::Notify,
    /// The pool statuses this leader wrote; also updated by the pool watch, so not under
    /// `state`'s lock (which a reprocessing pass holds for long).
    pool_writes: std::sync::Mutex<PoolStatusWrites>,
    /// The election Lease, watched ([`Ctx::check_leader`]).
    lease: Store<Lease>,
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
    let (lease_store, lease_writer) = reflector::store();
    let lease_api: Api<Lease> = Api::namespaced(client.clone(), &cfg.namespace);
    let lease_stream = reflector::reflector(
        lease_writer,
        watcher(
            lease_api,
            watcher::Config::default().fields(&format!("metadata.name={}", cfg.lease_name)),
        ),
    )
    .default_backoff();
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
            written: BTreeMap::new(),
            deleted: BTreeSet::new(),
            leader_until: None,
        }),
        pools: pool_store.clone(),
        namespaces: ns_store.clone(),
        services: svc_store.clone(),
        lease: lease_store,
        pool_writes: std::sync::Mutex::default(),
        counters_changed: tokio::sync::Notify::new(),
        reprocess,
        started: watch::Sender::new(false),
    });

    // A change of the pool configuration reprocesses every Service, as in MetalLB; pool
    // status writes (ours) and namespace changes no selector sees are no change.
    let triggers = {
        let ctx = Arc::clone(&ctx);
        let changes = futures::stream::select(
            pool_stream.map(|r| r.map(Some).map_err(|e| e.to_string())),
            ns_stream.map(|r| r.map(|_| None).map_err(|e| e.to_string())),
        );
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut changes = std::pin::pin!(changes.take_until(stop));
            let mut last: Option<ConfigView> = None;
            while let Some(r) = changes.next().await {
                match r {
                    Ok(pool) => {
                        let now = ctx.config_view();
                        if now.is_some() && now != last {
                            last = now;
                            let _ = ctx.reprocess.send(());
                        }
                        if pool.is_some_and(|p| ctx.pool_writes().observed(&p)) {
                            // Someone else rewrote a status of ours: put it back (MetalLB's
                            // pool status controller looks again at status-only changes).
                            ctx.counters_changed();
                        }
                    }
                    Err(e) => warn!(error = %e, "pool or namespace watch"),
                }
            }
        })
    };
    let lease_watch = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(lease_stream.take_until(stop));
            while let Some(r) = events.next().await {
                if let Err(e) = r {
                    debug!(error = %e, "lease watch");
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
            let _ = tokio::join!(triggers, deletions, lease_watch);
            return Ok(());
        }
    }
    rebuild(&ctx).await?;
    let pool_statuses = tokio::spawn(write_pool_statuses(Arc::clone(&ctx), stop.clone()));
    ctx.counters_changed();
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
    let _ = tokio::join!(triggers, deletions, passes, lease_watch, pool_statuses);
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

/// Writes the pools' status counters whenever they may have changed, apart from the
/// reconciles (which then neither wait for these writes nor make one each: changes that come
/// while a write is under way are written together after it, as MetalLB's work queue folds a
/// pool's pending status updates into one). A failed write is tried again.
async fn write_pool_statuses(ctx: Arc<Ctx>, stop: impl Future<Output = ()> + Send) {
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            () = ctx.counters_changed.notified() => {}
            () = &mut stop => return,
        }
        if let Err(e) = ctx.write_counters().await {
            warn!(error = %e, "pool status");
            ctx.counters_changed();
            tokio::select! {
                () = tokio::time::sleep(POOL_STATUS_RETRY) => {}
                () = &mut stop => return,
            }
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

/// How long `lease` still vouches for `identity` holding it, `None` if it does not: until
/// `grace_seconds` before it runs out, by the renewal time it shows.
///
/// Why that is safe: the renewal time is stamped by the holder's own clock when it renews
/// (the lease manager writes `now`), and a successor takes over only once the whole duration
/// has passed since, by its clock. The lease manager renews `grace` before the end, the
/// margin it allows for clocks that differ; trusting the Lease up to that same moment needs
/// no other assumption. A copy older than the truth only shows an earlier renewal, so a
/// lagging watch errs on the side of reading the Lease.
fn vouched_for(
    lease: &Lease,
    identity: &str,
    grace_seconds: u64,
    now: Timestamp,
) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let trusted_s = i64::from(spec.lease_duration_seconds?) - i64::try_from(grace_seconds).ok()?;
    if trusted_s <= 0 {
        return None;
    }
    let left_ms = renewed.as_millisecond() + trusted_s * 1000 - now.as_millisecond();
    u64::try_from(left_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
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
            self.counters_changed();
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

    /// Asks [`write_pool_statuses`] to bring the pools' statuses in line with the allocator.
    fn counters_changed(&self) {
        self.counters_changed.notify_one();
    }

    /// Writes the counters of every pool whose status shows other counters, once per change:
    /// a pool this leader wrote is not written again for the same counters while the cache
    /// still shows the status before that write ([`PoolStatusWrites`]).
    async fn write_counters(&self) -> Result<(), ReconcileError> {
        let wanted: Vec<(String, PoolCounters)> = {
            let st = self.state.lock().await;
            let Some(alloc) = st.alloc.as_ref() else {
                return Ok(());
            };
            self.pool_writes().keep_only(alloc.pools());
            alloc
                .pools()
                .iter()
                .filter_map(|p| Some((p.name().to_string(), alloc.counters(p.name())?)))
                .collect()
        };
        let api: Api<IPAddressPool> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        for (name, c) in wanted {
            // Gone from the cache: deleted, and the next refresh drops it from the allocator.
            let Some(cached) = self
                .pools
                .get(&reflector::ObjectRef::new(&name).within(&self.cfg.namespace))
            else {
                continue;
            };
            if self.pool_writes().up_to_date(&cached, c) {
                continue;
            }
            let patch = serde_json::json!({ "status": pools::status(c) });
            match api
                .patch_status(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(stored) => self.pool_writes().wrote(&stored, c),
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(failed("pool status")(e)),
            }
        }
        Ok(())
    }

    fn pool_writes(&self) -> std::sync::MutexGuard<'_, PoolStatusWrites> {
        self.pool_writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes sure this replica still holds the Lease right before a Service write: the
    /// election reports a lost Lease only when it next syncs, so without this a replica cut
    /// off from renewing could still write while its successor allocates.
    ///
    /// The Lease comes from a watch on it, which shows each renewal as it happens; it vouches
    /// for this replica until [`vouched_for`] says. Only when the watched copy does not vouch
    /// (the watch not yet listed, or lagging behind a renewal by the moment it takes to
    /// arrive) is the Lease read, and that answer is used the same way. So a write reads no
    /// Lease, and the Lease is requested only by its renewals.
    async fn check_leader(&self, st: &mut State) -> Result<(), ReconcileError> {
        let now = Instant::now();
        if st.leader_until.is_some_and(|t| now < t) {
            return Ok(());
        }
        st.leader_until = None;
        let lease_ref = reflector::ObjectRef::new(&self.cfg.lease_name).within(&self.cfg.namespace);
        if let Some(left) = self
            .lease
            .get(&lease_ref)
            .and_then(|l| self.vouched_for(&l, Timestamp::now()))
        {
            st.leader_until = Some(now + left);
            return Ok(());
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.cfg.namespace);
        let lease = leases
            .get_opt(&self.cfg.lease_name)
            .await
            .map_err(failed("read lease"))?;
        let Some(lease) = lease else {
            return Err(ReconcileError::NotLeader);
        };
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        if holder != Some(self.cfg.identity.as_str()) {
            return Err(ReconcileError::NotLeader);
        }
        if let Some(left) = self.vouched_for(&lease, Timestamp::now()) {
            st.leader_until = Some(Instant::now() + left);
        }
        Ok(())
    }

    fn vouched_for(&self, lease: &Lease, now: Timestamp) -> Option<Duration> {
        vouched_for(lease, &self.cfg.identity, self.cfg.grace_seconds, now)
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

    /// The Service to converge: `cached`, unless it does not show this leader's last write to
    /// it (the cache has not caught up); then a fresh read (`None`: it is gone).
    ///
    /// A cached Service at another version than the write that shows what was written is
    /// used as it is: either it is newer (someone changed something else since), or it is an
    /// older one carrying the same status, which converges to no write; and any write made
    /// from a stale copy fails its resourceVersion precondition. So a Service changed by
    /// others after a write costs no read.
    async fn current(
        &self,
        st: &mut State,
        cached: &Service,
    ) -> Result<Option<Service>, ReconcileError> {
        let key = service::key(cached);
        match st.written.get(&key) {
            Some(w)
                if cached.metadata.resource_version.as_deref()
                    != Some(w.resource_version.as_str())
                    && !w.shown_by(cached) => {}
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
                self.counters_changed();
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
        // Counted as the allocator holds it, written or not (as MetalLB counts).
        let held: &[IpAddr] = alloc
            .allocation(&key)
            .map(|a| a.ips.as_slice())
            .unwrap_or_default();
        if held != before.as_slice() {
            self.counters_changed();
        }
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
                    self.counters_changed();
                    return Ok(Reconciled {
                        reprocess: true,
                        ..Reconciled::nothing()
                    });
                }
                Err(e) => return Err(failed("update service status")(e)),
            };
            if let Some(resource_version) = stored.metadata.resource_version {
                let written = WrittenService {
                    resource_version,
                    ips: ips.clone(),
                    pool: pool.clone().filter(|_| !ips.is_empty()),
                };
                st.written.insert(key.clone(), written);
            }
            info!(service = %key, ips = ?ips, pool = ?pool, "service status updated");
        }
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
        self.counters_changed();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: &str, seconds: i32) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "namespace": "n"},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": seconds},
        }))
        .unwrap()
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn a_lease_vouches_until_the_lease_manager_would_renew_it() {
        let l = lease("me", "2026-12-03T08:00:00.000000Z", 15);
        // Renewed with 5 s of grace: trusted for 10 s after the renewal, not beyond.
        let left = |now| vouched_for(&l, "me", 5, at(now));
        assert_eq!(left("2026-12-03T08:00:00Z"), Some(Duration::from_secs(10)));
        assert_eq!(
            left("2026-12-03T08:00:09.5Z"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(left("2026-12-03T08:00:10Z"), None);
        assert_eq!(left("2026-12-03T08:00:30Z"), None);
        // Someone else's, or no renewal time: never.
        assert_eq!(
            vouched_for(&l, "other", 5, at("2026-12-03T08:00:01Z")),
            None
        );
        let mut no_time = l.clone();
        no_time.spec.as_mut().unwrap().renew_time = None;
        assert_eq!(
            vouched_for(&no_time, "me", 5, at("2026-12-03T08:00:01Z")),
            None
        );
        // A grace as long as the Lease leaves nothing to trust.
        assert_eq!(vouched_for(&l, "me", 15, at("2026-12-03T07:59:59Z")), None);
    }

    fn pool(uid: &str, rv: &str, assigned: i64) -> IPAddressPool {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "uid": uid, "resourceVersion": rv},
            "spec": {"addresses": ["198.18.0.0/30"]},
            "status": {"assignedIPv4": assigned, "assignedIPv6": 0,
                       "availableIPv4": 4 - assigned, "availableIPv6": 0},
        }))
        .unwrap()
    }

    fn counters(assigned: u64) -> PoolCounters {
        PoolCounters {
            assigned_ipv4: assigned,
            available_ipv4: 4 - assigned,
            ..PoolCounters::default()
        }
    }

    #[test]
    fn a_pool_status_is_written_once_per_change_and_again_after_someone_elses() {
        let mut w = PoolStatusWrites::default();
        // The cache shows the counters: nothing to write.
        assert!(w.up_to_date(&pool("u", "1", 0), counters(0)));
        // They change: write; once written, the lagging cache (still 0) is no reason to write.
        assert!(!w.up_to_date(&pool("u", "1", 0), counters(1)));
        w.wrote(&pool("u", "2", 1), counters(1));
        assert!(w.up_to_date(&pool("u", "1", 0), counters(1)));
        // Two writes in a row, the watch behind both: older versions are not someone else's.
        w.wrote(&pool("u", "3", 2), counters(2));
        assert!(!w.observed(&pool("u", "2", 1)));
        assert!(!w.observed(&pool("u", "3", 2)));
        // After our write was seen, a different status is someone else's: write again.
        assert!(w.observed(&pool("u", "4", 0)));
        assert!(!w.up_to_date(&pool("u", "4", 0), counters(2)));
        // A pool made again under the same name is another pool.
        w.wrote(&pool("u", "5", 2), counters(2));
        assert!(!w.up_to_date(&pool("v", "6", 0), counters(2)));
    }
}
