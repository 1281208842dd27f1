//! The status writer's task: a watch of this node's ServiceL2Status objects and the runner's
//! wishes feed the [`Reconciler`]; its operations run here, up to [`MAX_IN_FLIGHT`] at once,
//! each request with a deadline, so a stalled API server holds a slot for a bounded time and
//! the Service is tried again after its backoff.

use super::Wishes;
use super::reconcile::{Effect, Observation, Op, Outcome, Reconciler, Seen, Step, Want};
use crate::crd::{LABEL_ANNOUNCE_NODE, ServiceL2Status};
use crate::source::Shared;
use crate::status::service_l2_status;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tracing::warn;
use vigil_speaker::observe::status_writes::{StatusWriteCounters, WriteKind};

/// Status operations in flight, at most.
pub(super) const MAX_IN_FLIGHT: usize = 16;
/// How long one request may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The API server refused it or could not be reached.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// No answer within [`DEADLINE`].
    #[error("no answer within {DEADLINE:?}")]
    Timeout,
}

pub(super) struct Writer {
    requests: Requests,
    wants: Wants,
}

/// What this node wants per Service, built when a wish is taken.
struct Wants {
    namespace: String,
    node: String,
    shared: Shared,
    pods: Store<Pod>,
    pod: Option<String>,
    /// This speaker's Pod as owner, once found.
    owner: Option<OwnerReference>,
}

/// The requests, shared by the operations in flight.
struct Requests {
    statuses: Api<ServiceL2Status>,
    /// The create goes untyped: the typed root carries no apiVersion/kind.
    untyped: Api<DynamicObject>,
    resource: ApiResource,
    namespace: String,
    node: String,
    counters: StatusWriteCounters,
}

impl Writer {
    pub(super) fn new(
        target: super::Target,
        shared: Shared,
        pods: Store<Pod>,
        counters: StatusWriteCounters,
    ) -> Self {
        let resource = ApiResource::erase::<ServiceL2Status>(&());
        Self {
            requests: Requests {
                statuses: Api::namespaced(target.client.clone(), &target.namespace),
                untyped: Api::namespaced_with(target.client, &target.namespace, &resource),
                resource,
                namespace: target.namespace.clone(),
                node: target.node.clone(),
                counters,
            },
            wants: Wants {
                namespace: target.namespace,
                node: target.node,
                shared,
                pods,
                pod: target.pod,
                owner: None,
            },
        }
    }

    pub(super) async fn run(self, wishes: Arc<Wishes>) {
        let Self {
            requests,
            mut wants,
        } = self;
        let mut core = Reconciler::new(MAX_IN_FLIGHT);
        let mine =
            watcher::Config::default().labels(&format!("{LABEL_ANNOUNCE_NODE}={}", requests.node));
        let watch = watcher(requests.statuses.clone(), mine).default_backoff();
        let mut watch = std::pin::pin!(watch);
        let mut running = FuturesUnordered::new();
        loop {
            let now = Instant::now().into_std();
            while let Some(op) = core.next_op(now) {
                running.push(requests.perform(op));
            }
            requests.counters.set_gauges(
                core.queue_depth() + wishes.len(),
                core.backing_off(),
                core.in_flight(),
                core.observed(),
            );
            let deadline = core.deadline().map(Instant::from_std);
            tokio::select! {
                () = wishes.changed.notified() => {
                    for (key, announced) in wishes.take() {
                        let want = announced.then(|| wants.want(&key)).flatten();
                        core.desire(key, want);
                    }
                }
                event = watch.next() => match event {
                    Some(Ok(event)) => {
                        if let Some(observation) = observation(event) {
                            core.observe(observation);
                        }
                    }
                    Some(Err(e)) => warn!(event = "l2status_watch_error", error = %e, "ServiceL2Status watch failed; retrying"),
                    None => return,
                },
                Some((key, outcome)) = running.next(), if !running.is_empty() => {
                    core.finished(&key, outcome, Instant::now().into_std());
                }
                () = sleep_until(deadline), if deadline.is_some() => {}
            }
        }
    }
}

impl Requests {
    /// Runs one operation; answers its Service and what it did.
    async fn perform(&self, op: Op) -> (String, Outcome) {
        let mut effects = Vec::new();
        let result = match (&op.step, &op.want) {
            (Step::Create, Some(want)) => self.create(&op.key, want, &mut effects).await,
            (Step::PatchStatus { name }, Some(want)) => {
                self.patch_status(name, want, &mut effects).await
            }
            (Step::Delete { name }, _) => self.delete(name, &mut effects).await,
            (_, None) => Ok(()),
        };
        if let Err(e) = &result {
            warn!(event = "l2status_write_failed", service = %op.key, step = ?op.step, error = %e, "ServiceL2Status not written; will try again");
        }
        let ok = result.is_ok();
        (op.key, Outcome { effects, ok })
    }

    async fn create(
        &self,
        key: &str,
        want: &Want,
        effects: &mut Vec<Effect>,
    ) -> Result<(), WriteError> {
        let Some((ns, name)) = key.split_once('/') else {
            return Ok(());
        };
        let mut object = service_l2_status(
            &self.namespace,
            &self.node,
            ns,
            name,
            &crate::Interfaces::All,
        );
        object.metadata.owner_references = want.owner.clone().map(|owner| vec![owner]);
        let create = DynamicObject::new("", &self.resource).data(serde_json::json!({ "spec": {} }));
        let create = DynamicObject {
            metadata: object.metadata,
            ..create
        };
        let created = timed(self.untyped.create(&PostParams::default(), &create)).await;
        self.counters
            .count_write(WriteKind::Create, created.is_ok());
        let created = created?;
        let Some(object_name) = created.metadata.name.clone() else {
            return Ok(());
        };
        effects.push(Effect::Wrote(Seen {
            name: object_name.clone(),
            version: created
                .metadata
                .resource_version
                .clone()
                .unwrap_or_default(),
            status: None,
            owners: created
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect(),
        }));
        // `status` is a subresource: the create ignores it, so it is written after.
        self.patch_status(&object_name, want, effects).await
    }

    async fn patch_status(
        &self,
        name: &str,
        want: &Want,
        effects: &mut Vec<Effect>,
    ) -> Result<(), WriteError> {
        let status = serde_json::json!({ "status": want.status });
        let patched = timed(self.statuses.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&status),
        ))
        .await;
        self.counters
            .count_write(WriteKind::PatchStatus, patched.is_ok());
        match patched {
            Ok(object) => {
                if let Some((_, seen)) = Seen::of(&object) {
                    effects.push(Effect::Wrote(seen));
                }
                Ok(())
            }
            Err(WriteError::Api(kube::Error::Api(e))) if e.code == 404 => {
                // Gone meanwhile: the next look creates it again.
                effects.push(Effect::Deleted(name.to_string()));
                Err(WriteError::Api(kube::Error::Api(e)))
            }
            Err(e) => Err(e),
        }
    }

    async fn delete(&self, name: &str, effects: &mut Vec<Effect>) -> Result<(), WriteError> {
        let deleted = match timed(self.statuses.delete(name, &DeleteParams::default())).await {
            Err(WriteError::Api(kube::Error::Api(e))) if e.code == 404 => Ok(()),
            other => other.map(|_| ()),
        };
        self.counters
            .count_write(WriteKind::Delete, deleted.is_ok());
        if deleted.is_ok() {
            effects.push(Effect::Deleted(name.to_string()));
        }
        deleted
    }
}

impl Wants {
    /// What this node wants for Service `key` (`namespace/name`) now; `None` for a malformed
    /// id.
    fn want(&mut self, key: &str) -> Option<Want> {
        let (ns, name) = key.split_once('/')?;
        let object = service_l2_status(
            &self.namespace,
            &self.node,
            ns,
            name,
            &self.shared.interfaces(key),
        );
        Some(Want {
            status: object.status.unwrap_or_default(),
            owner: self.owner(),
        })
    }

    /// This speaker's Pod as an owner reference (MetalLB makes it the owner: a dead node's
    /// statuses are collected with it); `None` while it is not known.
    fn owner(&mut self) -> Option<OwnerReference> {
        if self.owner.is_none() {
            let pod = self.pod.as_deref()?;
            let found = self
                .pods
                .state()
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(pod))?;
            self.owner = found.controller_owner_ref(&()).map(|owner| OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..owner
            });
        }
        self.owner.clone()
    }
}

/// A request with [`DEADLINE`].
async fn timed<T>(request: impl Future<Output = Result<T, kube::Error>>) -> Result<T, WriteError> {
    match tokio::time::timeout(DEADLINE, request).await {
        Ok(result) => result.map_err(WriteError::from),
        Err(_) => Err(WriteError::Timeout),
    }
}

/// Sleeps until `deadline` (forever without one; the caller guards it).
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The watch's report as the reconciler takes it; objects not labelled with a Service are
/// left alone.
fn observation(event: watcher::Event<ServiceL2Status>) -> Option<Observation> {
    Some(match event {
        watcher::Event::Apply(o) => {
            let (key, seen) = Seen::of(&o)?;
            Observation::Apply(key, seen)
        }
        watcher::Event::Delete(o) => {
            let (key, seen) = Seen::of(&o)?;
            Observation::Delete(key, seen)
        }
        watcher::Event::Init => Observation::Init,
        watcher::Event::InitApply(o) => {
            let (key, seen) = Seen::of(&o)?;
            Observation::InitApply(key, seen)
        }
        watcher::Event::InitDone => Observation::InitDone,
    })
}
