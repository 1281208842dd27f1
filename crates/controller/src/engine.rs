//! The leader's work: kube-rs reflectors over IPAddressPools, Namespaces and Services, a
//! kube-rs `Controller` reconciling each Service through one shared `lb::pool::Allocator`,
//! and the writes (Service status with a resourceVersion precondition, pool status, events).
//!
//! Why it is safe: every reconcile holds the allocator's lock from reading the Service (a
//! fresh GET, not the cache, so it sees every write this leader made) through writing it
//! back; the write is an update of the status subresource carrying the resourceVersion read,
//! so a Service changed meanwhile fails with a conflict and is reconciled again. An IP the
//! allocator handed out stays held in memory until the Service is reconciled again, so a
//! failed write never frees it for anyone else. At start, before the first reconcile, the
//! allocator is rebuilt from every Service's current ingress (MetalLB's `reprocessAll`
//! order), so a new leader keeps every allocation.
//!
//! Deleted Services: kube-rs's `Controller` does not reconcile objects that are gone, and
//! MetalLB uses no finalizer, so a metadata-only watch on Services reports deletions (and
//! after each relist, allocations whose Service vanished are checked and released).

use crate::events::{self, ServiceEvent, Severity};
use crate::pools;
use crate::service;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};
use tracing::{debug, info, warn};
use vigil_k8s::crd::IPAddressPool;
use vigil_lb::pool::{Allocator, Labels, PoolCounters, Pools, deprecated_annotations};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-controller";

/// What the leader needs from the settings.
#[derive(Debug, Clone)]
pub(crate) struct LeadConfig {
    pub(crate) namespace: String,
    pub(crate) lb_class: Option<String>,
    pub(crate) identity: String,
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
}

impl ReconcileError {
    fn is_conflict(&self) -> bool {
        let Self::Api { source, .. } = self;
        matches!(source, kube::Error::Api(s) if s.is_conflict())
    }
}

fn failed(op: &'static str) -> impl FnOnce(kube::Error) -> ReconcileError {
    move |source| ReconcileError::Api { op, source }
}

/// The allocator and what was last written from it.
struct State {
    /// `None` while the pools do not form a valid configuration: then nothing is touched
    /// (MetalLB's controller waits the same way when it has no configuration).
    alloc: Option<Allocator>,
    /// The pool status last written (or read) per pool.
    counters: BTreeMap<String, PoolCounters>,
}

struct Ctx {
    client: Client,
    cfg: LeadConfig,
    state: Mutex<State>,
    pools: Store<IPAddressPool>,
    namespaces: Store<Namespace>,
    recorder: Recorder,
    reprocess: mpsc::UnboundedSender<()>,
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
    let controller = Controller::new(svc_api.clone(), watcher::Config::default());
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
        }),
        pools: pool_store.clone(),
        namespaces: ns_store.clone(),
        reprocess,
    });

    // Pool and namespace changes reprocess every Service, as in MetalLB.
    let triggers = {
        let ctx = Arc::clone(&ctx);
        let changes = futures::stream::select(
            pool_stream.map(|r| r.map(|_| ()).map_err(|e| e.to_string())),
            ns_stream.map(|r| r.map(|_| ()).map_err(|e| e.to_string())),
        );
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut changes = std::pin::pin!(changes.take_until(stop));
            while let Some(r) = changes.next().await {
                match r {
                    Ok(()) => {
                        let _ = ctx.reprocess.send(());
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
    rebuild(&ctx, &svc_api).await?;

    let reprocess_stream = tokio_stream_from(reprocess_rx);
    controller
        .reconcile_all_on(reprocess_stream)
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|r| async move {
            match r {
                Ok((obj, _)) => debug!(service = %obj, "reconciled"),
                Err(e) => debug!(error = %e, "reconcile"),
            }
        })
        .await;
    let _ = tokio::join!(triggers, deletions);
    Ok(())
}

fn tokio_stream_from(mut rx: mpsc::UnboundedReceiver<()>) -> impl Stream<Item = ()> + Send {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// Rebuilds the allocator from every Service's current ingress (a fresh list), before any
/// reconcile: MetalLB's restart order, every valid carried allocation kept.
async fn rebuild(ctx: &Ctx, svc_api: &Api<Service>) -> Result<(), ReconcileError> {
    let mut st = ctx.state.lock().await;
    let Some(pools) = ctx.current_pools() else {
        st.alloc = None;
        return Ok(());
    };
    let list = svc_api
        .list(&ListParams::default())
        .await
        .map_err(failed("list services"))?;
    let carried: Vec<_> = list
        .items
        .iter()
        .filter(|s| {
            service::handled(s, ctx.cfg.lb_class.as_deref()) && service::is_load_balancer(s)
        })
        .filter_map(|s| {
            let req = service::request(s, &ctx.namespace_labels(s)).ok()?;
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
    st.alloc = Some(alloc);
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

impl Ctx {
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
    fn refresh_pools(&self, st: &mut State) -> bool {
        let Some(pools) = self.current_pools() else {
            return false;
        };
        match st.alloc.as_mut() {
            Some(alloc) if alloc.pools() == &pools => false,
            Some(alloc) => {
                let released = alloc.set_pools(pools);
                if !released.is_empty() {
                    info!(services = ?released, "released: their IPs are in no pool any more");
                }
                true
            }
            // A first valid configuration: nothing can be allocated yet, so nothing is lost
            // by starting empty; each Service's carried IPs are assigned as it converges.
            None => {
                st.alloc = Some(Allocator::new(pools));
                true
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
            if st.counters.get(pool.name()) == Some(&c) {
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
}

async fn reconcile(obj: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let key = service::key(&obj);
    let ns = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.name_any();
    let api: Api<Service> = Api::namespaced(ctx.client.clone(), &ns);
    let mut st = ctx.state.lock().await;
    if ctx.refresh_pools(&mut st) {
        let _ = ctx.reprocess.send(());
    }
    let Some(svc) = api.get_opt(&name).await.map_err(failed("get service"))? else {
        drop(st);
        ctx.forget(&key).await;
        return Ok(Action::await_change());
    };
    if !service::handled(&svc, ctx.cfg.lb_class.as_deref()) {
        return Ok(Action::await_change());
    }
    let labels = ctx.namespace_labels(&svc);
    let Some(alloc) = st.alloc.as_mut() else {
        return Ok(Action::await_change());
    };
    let before = alloc.allocation(&key).map(|a| a.ips.clone());
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
                        drop(st);
                        for ev in &evs {
                            ctx.publish(&svc, ev).await;
                        }
                        return Ok(Action::await_change());
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
    let after = alloc.allocation(&key).map(|a| a.ips.clone());
    let desired = service::with_allocation(&svc, &ips, pool.as_deref());
    if service::differs(&svc, &desired) {
        let annotations = svc.metadata.annotations.clone().unwrap_or_default();
        for a in deprecated_annotations(&annotations) {
            evs.push(events::deprecated(a));
        }
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        api.replace_status(&name, &pp, &desired)
            .await
            .map_err(failed("update service status"))?;
        info!(service = %key, ips = ?ips, pool = ?pool, "service status updated");
    }
    // IPs given up may be what a waiting Service needs (MetalLB's ReprocessAll).
    if before.is_some() && before != after {
        let _ = ctx.reprocess.send(());
    }
    ctx.write_counters(&mut st).await?;
    drop(st);
    for ev in &evs {
        ctx.publish(&svc, ev).await;
    }
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
