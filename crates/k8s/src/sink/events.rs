//! Events on Services, sent in the background as MetalLB's recorder sends them: a bounded
//! queue the notices never wait on (full: the Event is dropped and counted), a few requests
//! at a time, each with a deadline, none tried again.
//!
//! - `nodeAssigned` (MetalLB's, unchanged): this node started announcing the Service;
//! - `vigilOwnerMoved` (vigil's): the Service's IP moved to this node from another, with the
//!   previous owner, the cause and the stages of the change (the ownership timeline), so
//!   `kubectl describe service` says why an IP moved.

use crate::cached::CachedService;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::warn;
use vigil_speaker::core::OwnershipChange;
use vigil_speaker::observe::status_writes::{EventOutcome, StatusWriteCounters};

/// Events waiting to be sent, at most.
const QUEUE: usize = 1024;
/// Events being sent at once, at most.
const IN_FLIGHT: usize = 4;
/// How long one Event may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// The reason of the Event for an IP that moved to this node.
pub(super) const OWNER_MOVED: &str = "vigilOwnerMoved";

/// One Event to send.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// MetalLB's `nodeAssigned`, for Service `namespace/name`.
    NodeAssigned(String),
    /// `vigilOwnerMoved` for Service `namespace/name`, with its message.
    OwnerMoved { service: String, message: String },
}

impl Item {
    fn service(&self) -> &str {
        match self {
            Self::NodeAssigned(s) | Self::OwnerMoved { service: s, .. } => s,
        }
    }
}

/// The `vigilOwnerMoved` message for a change: who took the IP from whom, why, who is next,
/// and each stage as milliseconds after the first. `None` unless the IP moved between two
/// nodes.
pub(super) fn owner_moved_message(change: &OwnershipChange) -> Option<String> {
    let (previous, owner) = (change.previous.as_deref()?, change.owner.as_deref()?);
    if previous == owner {
        return None;
    }
    let stages: Vec<String> = change
        .offsets()
        .into_iter()
        .map(|(stage, after)| format!("{stage} +{:.1}ms", after.as_secs_f64() * 1e3))
        .collect();
    let member = change
        .member
        .as_deref()
        .map_or(String::new(), |m| format!(" {m}"));
    Some(format!(
        "{} moved from node {previous:?} to node {owner:?}: {}{member}; next candidate {}; stages: {}",
        change.vip,
        change.cause,
        change
            .next
            .as_deref()
            .map_or("none".into(), |n| format!("{n:?}")),
        stages.join(", ")
    ))
}

/// The sending end, held by the sink.
#[derive(Debug)]
pub(super) struct Queue {
    tx: mpsc::Sender<Item>,
    counters: StatusWriteCounters,
}

impl Queue {
    /// Starts the workers.
    pub(super) fn start(
        client: Client,
        node: String,
        services: Store<CachedService>,
        counters: StatusWriteCounters,
    ) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let sender = Sender {
            client,
            node,
            services,
            counters: counters.clone(),
        };
        tokio::spawn(sender.run(rx));
        Self { tx, counters }
    }

    /// Queues a `nodeAssigned` Event for Service `id` (`namespace/name`), or drops it.
    pub(super) fn node_assigned(&self, id: &str) {
        self.queue(Item::NodeAssigned(id.to_string()));
    }

    /// Queues a `vigilOwnerMoved` Event on each of the change's Services when its IP moved
    /// here from another node, or drops it.
    pub(super) fn owner_moved(&self, change: &OwnershipChange) {
        let Some(message) = owner_moved_message(change) else {
            return;
        };
        for service in &change.services {
            self.queue(Item::OwnerMoved {
                service: service.clone(),
                message: message.clone(),
            });
        }
    }

    fn queue(&self, item: Item) {
        if self.tx.try_send(item).is_err() {
            self.counters.count_event(EventOutcome::Dropped);
        }
    }
}

struct Sender {
    client: Client,
    node: String,
    services: Store<CachedService>,
    counters: StatusWriteCounters,
}

impl Sender {
    async fn run(self, mut rx: mpsc::Receiver<Item>) {
        use futures_util::StreamExt;
        let items = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let this = &self;
        items.for_each_concurrent(IN_FLIGHT, |item| async move {
            let sender = this;
            let id = item.service();
            let reason = match &item {
                Item::NodeAssigned(_) => "nodeAssigned",
                Item::OwnerMoved { .. } => OWNER_MOVED,
            };
            let outcome = match tokio::time::timeout(DEADLINE, sender.send(&item)).await {
                Ok(Ok(true)) => EventOutcome::Sent,
                Ok(Ok(false)) => EventOutcome::Failed,
                Ok(Err(e)) => {
                    warn!(event = "event_failed", service = %id, reason, error = %e, "event not written");
                    EventOutcome::Failed
                }
                Err(_) => {
                    warn!(event = "event_failed", service = %id, reason, "event timed out");
                    EventOutcome::Failed
                }
            };
            sender.counters.count_event(outcome);
        })
        .await;
    }

    /// Sends the Event; `false` when the Service is not (or no longer) known.
    async fn send(&self, item: &Item) -> Result<bool, kube::Error> {
        let Some((ns, name)) = item.service().split_once('/') else {
            return Ok(false);
        };
        let Some(svc) = self.services.get(&ObjectRef::new(name).within(ns)) else {
            return Ok(false);
        };
        match item {
            Item::NodeAssigned(_) => {
                let note = format!(
                    "announcing from node {:?} with protocol \"layer2\"",
                    self.node
                );
                self.event(&svc, "nodeAssigned", &note).await?;
            }
            Item::OwnerMoved { message, .. } => self.event(&svc, OWNER_MOVED, message).await?,
        }
        Ok(true)
    }

    /// A core/v1 Event on `svc` (MetalLB's speaker role may create those, not
    /// `events.k8s.io` ones).
    async fn event(
        &self,
        svc: &CachedService,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let ns = svc.metadata.namespace.clone().unwrap_or_default();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let event = CoreEvent {
            metadata: ObjectMeta {
                generate_name: Some(format!(
                    "{}.",
                    svc.metadata.name.as_deref().unwrap_or("service")
                )),
                namespace: Some(ns.clone()),
                ..ObjectMeta::default()
            },
            involved_object: svc.object_ref(&()),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some("Normal".into()),
            source: Some(EventSource {
                component: Some("metallb-speaker".into()),
                host: Some(self.node.clone()),
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            reporting_component: Some("metallb-speaker".into()),
            reporting_instance: Some(self.node.clone()),
            ..CoreEvent::default()
        };
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), &ns);
        events.create(&PostParams::default(), &event).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use vigil_speaker::core::{Cause, Stage};

    #[test]
    fn a_move_between_nodes_says_who_why_and_when_and_nothing_else_does() {
        let t0 = Instant::now();
        let mut change = OwnershipChange {
            vip: "198.18.0.100".parse().unwrap(),
            services: vec!["default/web".into()],
            previous: Some("node-a".into()),
            owner: Some("node-b".into()),
            next: Some("node-c".into()),
            cause: Cause::MemberDead,
            member: Some("node-a".into()),
            here: true,
            stages: vec![
                (Stage::Suspect, t0),
                (Stage::Dead, t0 + Duration::from_millis(120)),
                (Stage::Decision, t0 + Duration::from_millis(120)),
                (Stage::FirstAnnounce, t0 + Duration::from_micros(121_500)),
            ],
        };
        assert_eq!(
            owner_moved_message(&change).unwrap(),
            "198.18.0.100 moved from node \"node-a\" to node \"node-b\": member_dead node-a; \
             next candidate \"node-c\"; stages: suspect +0.0ms, dead +120.0ms, \
             decision +120.0ms, first_announce +121.5ms"
        );
        change.previous = None;
        assert_eq!(owner_moved_message(&change), None, "a first assignment");
        change.previous = Some("node-b".into());
        assert_eq!(owner_moved_message(&change), None);
        change.previous = Some("node-a".into());
        change.owner = None;
        assert_eq!(owner_moved_message(&change), None, "nobody took it");
    }
}
