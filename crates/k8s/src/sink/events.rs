//! `nodeAssigned` Events, sent in the background as MetalLB's recorder sends them: a bounded
//! queue the notices never wait on (full: the Event is dropped and counted), a few requests
//! at a time, each with a deadline, none tried again.

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::warn;
use vigil_speaker::observe::status_writes::{EventOutcome, StatusWriteCounters};

/// Events waiting to be sent, at most.
const QUEUE: usize = 1024;
/// Events being sent at once, at most.
const IN_FLIGHT: usize = 4;
/// How long one Event may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// The sending end, held by the sink.
#[derive(Debug)]
pub(super) struct Queue {
    tx: mpsc::Sender<String>,
    counters: StatusWriteCounters,
}

impl Queue {
    /// Starts the workers.
    pub(super) fn start(
        client: Client,
        node: String,
        services: Store<Service>,
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
        if self.tx.try_send(id.to_string()).is_err() {
            self.counters.count_event(EventOutcome::Dropped);
        }
    }
}

struct Sender {
    client: Client,
    node: String,
    services: Store<Service>,
    counters: StatusWriteCounters,
}

impl Sender {
    async fn run(self, mut rx: mpsc::Receiver<String>) {
        use futures_util::StreamExt;
        let ids = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let this = &self;
        ids.for_each_concurrent(IN_FLIGHT, |id| async move {
            let sender = this;
            let outcome = match tokio::time::timeout(DEADLINE, sender.send(&id)).await {
                Ok(Ok(true)) => EventOutcome::Sent,
                Ok(Ok(false)) => EventOutcome::Failed,
                Ok(Err(e)) => {
                    warn!(event = "event_failed", service = %id, error = %e, "nodeAssigned event not written");
                    EventOutcome::Failed
                }
                Err(_) => {
                    warn!(event = "event_failed", service = %id, "nodeAssigned event timed out");
                    EventOutcome::Failed
                }
            };
            sender.counters.count_event(outcome);
        })
        .await;
    }

    /// Sends the Event; `false` when the Service is not (or no longer) known.
    async fn send(&self, id: &str) -> Result<bool, kube::Error> {
        let Some((ns, name)) = id.split_once('/') else {
            return Ok(false);
        };
        let Some(svc) = self.services.get(&ObjectRef::new(name).within(ns)) else {
            return Ok(false);
        };
        let note = format!(
            "announcing from node {:?} with protocol \"layer2\"",
            self.node
        );
        self.event(&svc, "nodeAssigned", &note).await?;
        Ok(true)
    }

    /// A core/v1 Event on `svc` (MetalLB's speaker role may create those, not
    /// `events.k8s.io` ones).
    async fn event(&self, svc: &Service, reason: &str, message: &str) -> Result<(), kube::Error> {
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
