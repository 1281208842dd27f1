//! The leader's I/O around [`AllocatorCore`]: watches on Services, IPAddressPools and
//! Namespaces feed the core, and the writes it asks for are carried out behind the
//! [`Leadership`] fence.
//!
//! - One task owns the core: it takes one watch event or write result at a time, hands it
//!   to the core, and then starts what the core asks for. No lock is shared with anyone, so
//!   nothing waits on an API call to decide.
//! - Service and pool status writes run concurrently, at most [`MAX_WRITES_IN_FLIGHT`] at a
//!   time (the core keeps one per object). A Service status is an update of the status
//!   subresource carrying the resourceVersion the core converged on, so a Service changed
//!   meanwhile fails with a conflict instead of being overwritten.
//! - Events go out in the order the core asked for them, from one task.
//! - The Service watch is the only one on Services: its deletions feed the core, and a
//!   relist (read from etcd, not the API server's cache) tells the core which Services are
//!   gone. The core is the Service cache; pools and namespaces have reflector stores, whose
//!   whole content the core takes on each change.
//! - A write that failed is handed back to the core after a pause ([`RETRY_AFTER`]).
//! - Rights MetalLB's RBAC does not grant degrade, never stop the allocation: Events go to
//!   core/v1 when events.k8s.io is refused, a pool status is `update`d when `patch` is
//!   refused, and a write refused both ways is skipped from then on; each is counted and
//!   logged once ([`ControllerState`]).

use crate::core::{AllocatorCore, Write, WriteId, WriteResult, pool_status};
use crate::events::{ServiceEvent, Severity};
use crate::fence::Leadership;
use crate::metrics::ControllerMetrics;
use crate::service;
use crate::state::{ControllerState, Degraded};
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, ListSemantic, watcher};
use kube::{Client, Resource, ResourceExt};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{debug, warn};
use vigil_lb::pool::{Labels, StatusCounters};
use vigil_metallb::crd::IPAddressPool;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-controller";

/// Status writes carried out at once.
pub const MAX_WRITES_IN_FLIGHT: usize = 8;

/// How long a failed write waits before the core is asked for it again.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// How long a write refused for a newer version waits before it is tried again, should the
/// watch not bring that version first (it nearly always does, and then this finds nothing).
const CONFLICT_RETRY_AFTER: Duration = Duration::from_millis(500);

/// How long a stop waits for the writes under way.
const STOP_WAITS: Duration = Duration::from_secs(5);

/// Events waiting for the event task.
const EVENT_QUEUE: usize = 1024;

/// What the leader needs from the settings.
#[derive(Debug, Clone)]
pub(crate) struct LeadConfig {
    pub(crate) namespace: String,
    pub(crate) lb_class: Option<String>,
    pub(crate) identity: String,
    /// Counted into, and asked for the allocator's figures.
    pub(crate) metrics: ControllerMetrics,
}

/// What ended: a write (with its object and result), or a retry pause.
enum Done {
    Write(WriteId, WriteResult),
    Retry(WriteId),
}

/// Allocates until `stop` resolves; returns once the writes under way have ended (or after
/// [`STOP_WAITS`]).
pub(crate) async fn lead(
    client: Client,
    cfg: LeadConfig,
    fence: Leadership,
    state: ControllerState,
    stop: impl Future<Output = ()> + Send,
) {
    let (pool_store, pool_writer) = reflector::store();
    let pool_api: Api<IPAddressPool> = Api::namespaced(client.clone(), &cfg.namespace);
    let pool_events =
        reflector::reflector(pool_writer, watcher(pool_api, watcher::Config::default()))
            .default_backoff()
            .map(|r| r.map(|e| matches!(e, watcher::Event::InitDone)));
    let (ns_store, ns_writer) = reflector::store();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let ns_events = reflector::reflector(
        ns_writer,
        watcher(ns_api, watcher::Config::default()).modify(|n| n.metadata.managed_fields = None),
    )
    .default_backoff()
    .map(|r| r.map(|e| matches!(e, watcher::Event::InitDone)));
    // The relist is read from etcd: a new leader rebuilds from what the last one wrote.
    let svc_api: Api<Service> = Api::all(client.clone());
    let svc_events = watcher(
        svc_api,
        watcher::Config::default().list_semantic(ListSemantic::MostRecent),
    )
    // Not kept, and not sent back: an update without managedFields leaves them as they are.
    .modify(|s| s.metadata.managed_fields = None)
    .default_backoff();

    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(cfg.identity.clone()),
        },
    );
    let (event_tx, event_rx) = mpsc::channel(EVENT_QUEUE);
    let event_task = tokio::spawn(publish_events(
        recorder,
        CoreEvents::new(client.clone(), &cfg.identity),
        fence.clone(),
        state.clone(),
        event_rx,
    ));

    let mut core = AllocatorCore::new(cfg.lb_class.clone());
    let metrics = cfg.metrics.clone();
    let mut figure_asks = metrics.leading();
    let mut writes: JoinSet<Done> = JoinSet::new();
    let mut pauses: JoinSet<Done> = JoinSet::new();
    let mut listing: Vec<Arc<Service>> = Vec::new();
    let (mut pools_ready, mut ns_ready) = (false, false);
    let mut svc_events = std::pin::pin!(svc_events);
    let mut pool_events = std::pin::pin!(pool_events);
    let mut ns_events = std::pin::pin!(ns_events);
    let mut stop = std::pin::pin!(stop.fuse());
    let writer = Writer {
        client: client.clone(),
        namespace: cfg.namespace.clone(),
        fence,
        state: state.clone(),
        pool_rights: Arc::default(),
    };
    loop {
        let mut config_changed = false;
        tokio::select! {
            () = &mut stop => break,
            Some(ev) = svc_events.next() => match ev {
                Ok(watcher::Event::Init) => listing.clear(),
                Ok(watcher::Event::InitApply(s)) => {
                    metrics.count_update();
                    listing.push(Arc::new(s));
                }
                Ok(watcher::Event::InitDone) => {
                    core.handle_services_listed(std::mem::take(&mut listing));
                }
                Ok(watcher::Event::Apply(s)) => {
                    metrics.count_update();
                    core.handle_service(Arc::new(s));
                }
                Ok(watcher::Event::Delete(s)) => {
                    metrics.count_update();
                    core.handle_service_deleted(&service::key(&s), s.metadata.uid.as_deref());
                }
                Err(e) => warn!(error = %e, "service watch"),
            },
            Some(ev) = pool_events.next() => match ev {
                Ok(done) => {
                    metrics.count_update();
                    pools_ready |= done;
                    config_changed = true;
                }
                Err(e) => warn!(error = %e, "pool watch"),
            },
            Some(ev) = ns_events.next() => match ev {
                Ok(done) => {
                    metrics.count_update();
                    ns_ready |= done;
                    config_changed = true;
                }
                Err(e) => warn!(error = %e, "namespace watch"),
            },
            Some(reply) = figure_asks.recv() => {
                let figures = core.allocator().map(crate::metrics::pool_figures);
                let _ = reply.send(figures.unwrap_or_default());
            },
            Some(Ok(done)) = writes.join_next(), if !writes.is_empty() => {
                if let Done::Write(id, result) = done {
                    if result == WriteResult::Failed && matches!(id, WriteId::Service(_)) {
                        metrics.count_update_error();
                    }
                    if let Some(pause) = retry_pause(&result) {
                        let again = id.clone();
                        pauses.spawn(async move {
                            tokio::time::sleep(pause).await;
                            Done::Retry(again)
                        });
                    }
                    core.handle_written(&id, result);
                }
            },
            Some(Ok(Done::Retry(id))) = pauses.join_next(), if !pauses.is_empty() => {
                core.retry(&id);
            },
        }
        // Nothing is decided before both caches hold what the API server has.
        if config_changed && pools_ready && ns_ready {
            core.handle_config(
                pool_store.state().iter().map(|p| (**p).clone()),
                namespace_labels(&ns_store),
            );
            state.set_pools(core.config_error().map(str::to_string));
            metrics.config_read(core.config_error().is_none());
        }
        while writes.len() < MAX_WRITES_IN_FLIGHT {
            let Some(write) = core.poll_write() else {
                break;
            };
            match write {
                Write::Event { service, event } => {
                    if event_tx.send((service, event)).await.is_err() {
                        warn!("event task ended");
                    }
                }
                Write::ServiceStatus(svc) => {
                    let w = writer.clone();
                    writes.spawn(async move { w.service_status(*svc).await });
                }
                Write::PoolStatus { name, counters } => {
                    let w = writer.clone();
                    writes.spawn(async move { w.pool_status(name, counters).await });
                }
            }
        }
    }
    metrics.not_leading();
    drop(event_tx);
    let drained = async {
        while writes.join_next().await.is_some() {}
        let _ = event_task.await;
    };
    if tokio::time::timeout(STOP_WAITS, drained).await.is_err() {
        debug!("writes still under way at stop, cancelled");
    }
}

/// How long to wait before asking the core again after `result`, if at all.
fn retry_pause(result: &WriteResult) -> Option<Duration> {
    match result {
        WriteResult::Failed => Some(RETRY_AFTER),
        WriteResult::Conflict => Some(CONFLICT_RETRY_AFTER),
        WriteResult::Written { .. } | WriteResult::Gone => None,
    }
}

/// Every namespace's labels, by name.
fn namespace_labels(store: &Store<Namespace>) -> BTreeMap<String, Labels> {
    store
        .state()
        .iter()
        .map(|n| (n.name_any(), n.metadata.labels.clone().unwrap_or_default()))
        .collect()
}

/// Carries out status writes behind the fence.
#[derive(Clone)]
struct Writer {
    client: Client,
    namespace: String,
    fence: Leadership,
    state: ControllerState,
    /// How pool status may be written, as learnt from refusals.
    pool_rights: Arc<std::sync::atomic::AtomicU8>,
}

/// [`Writer::pool_rights`]: `patch` allowed (or not refused yet), only `update`, neither.
const POOL_STATUS_PATCH: u8 = 0;
const POOL_STATUS_UPDATE: u8 = 1;
const POOL_STATUS_NONE: u8 = 2;

fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_forbidden())
}

impl Writer {
    async fn service_status(&self, svc: Service) -> Done {
        let key = service::key(&svc);
        let id = WriteId::Service(key.clone());
        if let Err(e) = self.fence.check().await {
            debug!(service = %key, error = %e, "not written");
            return Done::Write(id, WriteResult::Failed);
        }
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Service> = Api::namespaced(self.client.clone(), &ns);
        let result = match api.replace_status(&svc.name_any(), &pp, &svc).await {
            Ok(stored) => WriteResult::Written {
                resource_version: stored.metadata.resource_version,
                uid: stored.metadata.uid,
            },
            Err(e) => {
                let result = failure(&e);
                if result == WriteResult::Failed {
                    warn!(service = %key, error = %e, "update service status");
                } else {
                    debug!(service = %key, error = %e, "update service status");
                }
                result
            }
        };
        Done::Write(id, result)
    }

    async fn pool_status(&self, name: String, counters: StatusCounters) -> Done {
        let id = WriteId::Pool(name.clone());
        if let Err(e) = self.fence.check().await {
            debug!(pool = %name, error = %e, "not written");
            return Done::Write(id, WriteResult::Failed);
        }
        use std::sync::atomic::Ordering::Relaxed;
        let api: Api<IPAddressPool> = Api::namespaced(self.client.clone(), &self.namespace);
        let status = pool_status::status_of(counters);
        let mut written = Err(None);
        if self.pool_rights.load(Relaxed) == POOL_STATUS_PATCH {
            let patch = serde_json::json!({ "status": status });
            let pp = PatchParams::apply(FIELD_MANAGER);
            written = api
                .patch_status(&name, &pp, &Patch::Merge(&patch))
                .await
                .map_err(Some);
            if written
                .as_ref()
                .is_err_and(|e| e.as_ref().is_some_and(forbidden))
            {
                // MetalLB's role grants `update` of ipaddresspools/status only.
                self.pool_rights.store(POOL_STATUS_UPDATE, Relaxed);
            }
        }
        if self.pool_rights.load(Relaxed) == POOL_STATUS_UPDATE {
            if self.state.count(Degraded::PoolStatusUpdate) {
                warn!(
                    event = "pool_status_update",
                    "patch of ipaddresspools/status refused: pool status is written with update"
                );
            }
            written = self.pool_status_update(&name, status).await.map_err(Some);
            if written
                .as_ref()
                .is_err_and(|e| e.as_ref().is_some_and(forbidden))
            {
                self.pool_rights.store(POOL_STATUS_NONE, Relaxed);
            }
        }
        if self.pool_rights.load(Relaxed) == POOL_STATUS_NONE {
            if self.state.count(Degraded::PoolStatusSkipped) {
                warn!(
                    event = "pool_status_skipped",
                    "neither patch nor update of ipaddresspools/status is allowed: pool status is not written (allocation goes on)"
                );
            }
            // Failed: asked again after a pause, and skipped again without a request.
            return Done::Write(id, WriteResult::Failed);
        }
        let result = match written {
            Ok(stored) => WriteResult::Written {
                resource_version: stored.metadata.resource_version,
                uid: stored.metadata.uid,
            },
            Err(Some(e)) => {
                warn!(pool = %name, error = %e, "pool status");
                failure(&e)
            }
            Err(None) => WriteResult::Failed,
        };
        Done::Write(id, result)
    }

    /// The status written with `update`, over the pool as read now (MetalLB's way; read
    /// whole: its role grants `get` of ipaddresspools, not of their status).
    async fn pool_status_update(
        &self,
        name: &str,
        status: vigil_metallb::crd::IPAddressPoolStatus,
    ) -> Result<IPAddressPool, kube::Error> {
        // As a DynamicObject: the update must carry apiVersion and kind.
        let resource = kube::api::ApiResource::erase::<IPAddressPool>(&());
        let dynamic: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
        let mut pool = dynamic.get(name).await?;
        pool.metadata.managed_fields = None;
        pool.data["status"] = serde_json::to_value(status).unwrap_or_default();
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        let stored = dynamic.replace_status(name, &pp, &pool).await?;
        Ok(IPAddressPool {
            metadata: stored.metadata,
            ..IPAddressPool::default()
        })
    }
}

/// A failed API call as a write's result.
fn failure(e: &kube::Error) -> WriteResult {
    match e {
        kube::Error::Api(s) if s.is_conflict() => WriteResult::Conflict,
        kube::Error::Api(s) if s.is_not_found() => WriteResult::Gone,
        _ => WriteResult::Failed,
    }
}

/// Which API the events go to, as learnt from refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventApi {
    /// events.k8s.io/v1 (kube's recorder).
    EventsV1,
    /// core/v1, as MetalLB's controller writes them (its RBAC grants only these).
    CoreV1,
    /// Neither is allowed: events are skipped.
    None,
}

/// Publishes the core's events in order, each behind the fence.
async fn publish_events(
    recorder: Recorder,
    core_events: CoreEvents,
    fence: Leadership,
    state: ControllerState,
    mut events: mpsc::Receiver<(Arc<Service>, ServiceEvent)>,
) {
    let mut api = EventApi::EventsV1;
    while let Some((svc, ev)) = events.recv().await {
        if let Err(e) = fence.check().await {
            debug!(reason = ev.reason, error = %e, "event not published");
            continue;
        }
        if api == EventApi::EventsV1 {
            match publish_v1(&recorder, &svc, &ev).await {
                Err(e) if forbidden(&e) => api = EventApi::CoreV1,
                Err(e) => warn!(error = %e, reason = ev.reason, "event"),
                Ok(()) => {}
            }
        }
        if api == EventApi::CoreV1 {
            if state.count(Degraded::EventCoreV1) {
                warn!(
                    event = "events_core_v1",
                    "events.k8s.io refused: events are written as core/v1 Events"
                );
            }
            match core_events.publish(&svc, &ev).await {
                Err(e) if forbidden(&e) => api = EventApi::None,
                Err(e) => warn!(error = %e, reason = ev.reason, "event"),
                Ok(()) => {}
            }
        }
        if api == EventApi::None && state.count(Degraded::EventSkipped) {
            warn!(
                event = "events_skipped",
                "neither events.k8s.io nor core/v1 events may be created: events are not written (allocation goes on)"
            );
        }
    }
}

async fn publish_v1(recorder: &Recorder, svc: &Service, ev: &ServiceEvent) -> kube::Result<()> {
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
    recorder.publish(&event, &svc.object_ref(&())).await
}

/// core/v1 Events, written as client-go's recorder writes them (a new Event per call,
/// named after the Service).
struct CoreEvents {
    client: Client,
    instance: String,
}

impl CoreEvents {
    fn new(client: Client, instance: &str) -> Self {
        Self {
            client,
            instance: instance.to_string(),
        }
    }

    async fn publish(&self, svc: &Service, ev: &ServiceEvent) -> kube::Result<()> {
        use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = CoreEvent {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", svc.name_any())),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: svc.object_ref(&()),
            reason: Some(ev.reason.to_string()),
            message: Some(ev.note.clone()),
            type_: Some(
                match ev.severity {
                    Severity::Normal => "Normal",
                    Severity::Warning => "Warning",
                }
                .into(),
            ),
            source: Some(EventSource {
                component: Some(FIELD_MANAGER.into()),
                host: None,
            }),
            reporting_component: Some(FIELD_MANAGER.into()),
            reporting_instance: Some(self.instance.clone()),
            action: Some("Allocate".into()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            count: Some(1),
            ..CoreEvent::default()
        };
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &ns);
        api.create(&PostParams::default(), &event).await.map(|_| ())
    }
}
