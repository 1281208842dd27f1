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

use crate::core::{AllocatorCore, Write, WriteId, WriteResult, pool_status};
use crate::events::{ServiceEvent, Severity};
use crate::fence::Leadership;
use crate::service;
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
    let event_task = tokio::spawn(publish_events(recorder, fence.clone(), event_rx));

    let mut core = AllocatorCore::new(cfg.lb_class.clone());
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
    };
    loop {
        let mut config_changed = false;
        tokio::select! {
            () = &mut stop => break,
            Some(ev) = svc_events.next() => match ev {
                Ok(watcher::Event::Init) => listing.clear(),
                Ok(watcher::Event::InitApply(s)) => listing.push(Arc::new(s)),
                Ok(watcher::Event::InitDone) => {
                    core.handle_services_listed(std::mem::take(&mut listing));
                }
                Ok(watcher::Event::Apply(s)) => core.handle_service(Arc::new(s)),
                Ok(watcher::Event::Delete(s)) => {
                    core.handle_service_deleted(&service::key(&s), s.metadata.uid.as_deref());
                }
                Err(e) => warn!(error = %e, "service watch"),
            },
            Some(ev) = pool_events.next() => match ev {
                Ok(done) => {
                    pools_ready |= done;
                    config_changed = true;
                }
                Err(e) => warn!(error = %e, "pool watch"),
            },
            Some(ev) = ns_events.next() => match ev {
                Ok(done) => {
                    ns_ready |= done;
                    config_changed = true;
                }
                Err(e) => warn!(error = %e, "namespace watch"),
            },
            Some(Ok(done)) = writes.join_next(), if !writes.is_empty() => {
                if let Done::Write(id, result) = done {
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
        let api: Api<IPAddressPool> = Api::namespaced(self.client.clone(), &self.namespace);
        let patch = serde_json::json!({ "status": pool_status::status_of(counters) });
        let pp = PatchParams::apply(FIELD_MANAGER);
        let result = match api.patch_status(&name, &pp, &Patch::Merge(&patch)).await {
            Ok(stored) => WriteResult::Written {
                resource_version: stored.metadata.resource_version,
                uid: stored.metadata.uid,
            },
            Err(e) => {
                warn!(pool = %name, error = %e, "pool status");
                failure(&e)
            }
        };
        Done::Write(id, result)
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

/// Publishes the core's events in order, each behind the fence.
async fn publish_events(
    recorder: Recorder,
    fence: Leadership,
    mut events: mpsc::Receiver<(Arc<Service>, ServiceEvent)>,
) {
    while let Some((svc, ev)) = events.recv().await {
        if let Err(e) = fence.check().await {
            debug!(reason = ev.reason, error = %e, "event not published");
            continue;
        }
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
        if let Err(e) = recorder.publish(&event, &svc.object_ref(&())).await {
            warn!(error = %e, reason = ev.reason, "event");
        }
    }
}
