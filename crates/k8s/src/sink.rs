//! What a speaker writes back, as MetalLB's does: one `ServiceL2Status` per announcing node
//! and Service, and a `nodeAssigned` event on the Service when this node starts announcing.
//!
//! The runner's notices arrive synchronously ([`StatusSink::notice`]); they are queued and a
//! task writes them, so the API server is never on the announcing path. A write that fails
//! (the API server down or unreachable) is tried again with a backoff until it succeeds or a
//! later notice for the same Service replaces it, as MetalLB's status reconciler requeues: a
//! failover during an API outage is written once the API server is back. A status is never
//! edited into another (MetalLB's CRD makes its fields immutable): when it must change it is
//! deleted and created again. At start, statuses this node left behind are deleted.
//!
//! After that start, this node's statuses are written only here, so the writer keeps what it
//! wrote (object name and status per Service) and never lists: a list by label is a read of
//! every ServiceL2Status in the namespace on the API server, and one per write made a sync of
//! 1,000 Services quadratic (27 lists a second per node in `bench/kubernetes`).

use crate::crd::{
    LABEL_ANNOUNCE_NODE, LABEL_SERVICE_NAME, LABEL_SERVICE_NAMESPACE, ServiceL2Status,
};
use crate::source::{Shared, Stores};
use crate::status::service_l2_status;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::warn;
use vigil_speaker::StatusSink;
use vigil_speaker::core::Action;

/// The notices the writer acts on.
#[derive(Debug)]
enum Notice {
    Announced(String),
    Withdrawn(String),
}

/// The first wait before failed writes are tried again; it doubles up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest wait between tries of failed writes.
const RETRY_MAX: Duration = Duration::from_secs(10);

impl Notice {
    /// Records this notice as the latest wish for its Service (`true`: announced).
    fn merge_into(self, pending: &mut BTreeMap<String, bool>) {
        match self {
            Self::Announced(id) => pending.insert(id, true),
            Self::Withdrawn(id) => pending.insert(id, false),
        };
    }
}

/// The speaker's [`StatusSink`] in Kubernetes mode.
#[derive(Debug)]
pub struct K8sSink {
    tx: mpsc::UnboundedSender<Notice>,
    shared: Shared,
}

impl K8sSink {
    /// Starts the writer task for this node's statuses in `namespace`.
    pub fn start(
        client: Client,
        namespace: &str,
        node: &str,
        pod: Option<&str>,
        shared: Shared,
        stores: &Stores,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = Writer {
            statuses: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            node: node.to_string(),
            shared: shared.clone(),
            services: stores.services.clone(),
            pods: stores.pods.clone(),
            pod: pod.map(str::to_string),
            written: BTreeMap::new(),
        };
        tokio::spawn(writer.run(rx));
        Self { tx, shared }
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
            let notice = if announced {
                Notice::Announced(service.clone())
            } else {
                Notice::Withdrawn(service.clone())
            };
            let _ = self.tx.send(notice);
        }
    }
}

struct Writer {
    statuses: Api<ServiceL2Status>,
    namespace: String,
    node: String,
    shared: Shared,
    services: kube::runtime::reflector::Store<Service>,
    pods: kube::runtime::reflector::Store<Pod>,
    /// This speaker's Pod (`--pod-name`): owner of its statuses, so they go with it.
    pod: Option<String>,
    /// What this writer created, per Service id.
    written: BTreeMap<String, Written>,
}

/// A ServiceL2Status this writer created: its name, and its status once that was written.
#[derive(Debug)]
struct Written {
    name: String,
    status: Option<crate::crd::ServiceL2StatusStatus>,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Notice>) {
        // Per Service, the latest state not yet written (`true`: announced).
        let mut pending: BTreeMap<String, bool> = BTreeMap::new();
        let mut retry = RETRY_MIN;
        // Nothing is written before the statuses an earlier run left are gone: the writer
        // knows only what it wrote, so a leftover would stay beside a new one.
        while let Err(e) = self.delete_left_behind().await {
            warn!(event = "l2status_cleanup_failed", error = %e, "statuses left by an earlier run not deleted yet; will try again");
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(RETRY_MAX);
            while let Ok(notice) = rx.try_recv() {
                notice.merge_into(&mut pending);
            }
            if rx.is_closed() && rx.is_empty() {
                return;
            }
        }
        retry = RETRY_MIN;
        let mut failed = false;
        loop {
            if pending.is_empty() {
                let Some(notice) = rx.recv().await else {
                    return;
                };
                notice.merge_into(&mut pending);
            } else if failed {
                tokio::select! {
                    notice = rx.recv() => {
                        let Some(notice) = notice else { return };
                        notice.merge_into(&mut pending);
                    }
                    () = tokio::time::sleep(retry) => {}
                }
            }
            while let Ok(notice) = rx.try_recv() {
                notice.merge_into(&mut pending);
            }
            failed = false;
            for (id, announced) in pending.clone() {
                let result = if announced {
                    self.announced(&id).await
                } else {
                    self.delete(&id).await
                };
                match result {
                    Ok(()) => {
                        pending.remove(&id);
                    }
                    Err(e) => {
                        failed = true;
                        warn!(event = "l2status_write_failed", service = %id, announced, error = %e, "ServiceL2Status not written; will try again");
                    }
                }
            }
            retry = if failed {
                (retry * 2).min(RETRY_MAX)
            } else {
                RETRY_MIN
            };
        }
    }

    fn selector(&self, service: Option<&str>) -> String {
        let mut sel = format!("{LABEL_ANNOUNCE_NODE}={}", self.node);
        if let Some((ns, name)) = service.and_then(|s| s.split_once('/')) {
            sel.push_str(&format!(
                ",{LABEL_SERVICE_NAMESPACE}={ns},{LABEL_SERVICE_NAME}={name}"
            ));
        }
        sel
    }

    /// Deletes every status of this node's (left by an earlier run).
    async fn delete_left_behind(&mut self) -> Result<(), kube::Error> {
        let list = self
            .statuses
            .list(&ListParams::default().labels(&self.selector(None)))
            .await?;
        for old in list {
            if let Some(name) = old.metadata.name {
                self.delete_named(&name).await?;
            }
        }
        self.written.clear();
        Ok(())
    }

    /// Deletes this node's status for Service `id`, if this writer made one.
    async fn delete(&mut self, id: &str) -> Result<(), kube::Error> {
        if let Some(old) = self.written.get(id) {
            let name = old.name.clone();
            self.delete_named(&name).await?;
            self.written.remove(id);
        }
        Ok(())
    }

    /// Deletes one status by name; one already gone is fine.
    async fn delete_named(&self, name: &str) -> Result<(), kube::Error> {
        match self.statuses.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn announced(&mut self, id: &str) -> Result<(), kube::Error> {
        let Some((ns, name)) = id.split_once('/') else {
            return Ok(());
        };
        let mut want = service_l2_status(
            &self.namespace,
            &self.node,
            ns,
            name,
            &self.shared.interfaces(id),
        );
        // MetalLB makes the speaker Pod the owner: a dead node's status is collected with it.
        let owner = self.pod.as_deref().and_then(|pod| {
            self.pods
                .state()
                .into_iter()
                .find(|p| p.metadata.name.as_deref() == Some(pod))
        });
        if let Some(owner) = owner.and_then(|p| p.controller_owner_ref(&())) {
            want.metadata.owner_references = Some(vec![OwnerReference {
                controller: None,
                block_owner_deletion: None,
                ..owner
            }]);
        }
        if self
            .written
            .get(id)
            .is_some_and(|w| w.status.is_some() && w.status == want.status)
        {
            return Ok(());
        }
        self.delete(id).await?;
        // The typed root carries no apiVersion/kind, which a create needs; and `status` is a
        // subresource: the create ignores it, so it is written after.
        let resource = ApiResource::erase::<ServiceL2Status>(&());
        let untyped: Api<DynamicObject> = Api::namespaced_with(
            self.statuses.clone().into_client(),
            &self.namespace,
            &resource,
        );
        let object = DynamicObject::new("", &resource).data(serde_json::json!({ "spec": {} }));
        let object = DynamicObject {
            metadata: want.metadata.clone(),
            ..object
        };
        let created = untyped.create(&PostParams::default(), &object).await?;
        let object_name = created.metadata.name.unwrap_or_default();
        // Recorded before the status is written, so a failed status write is retried by
        // deleting this object and creating it again.
        self.written.insert(
            id.to_string(),
            Written {
                name: object_name.clone(),
                status: None,
            },
        );
        let status = serde_json::json!({ "status": want.status });
        self.statuses
            .patch_status(
                &object_name,
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await?;
        if let Some(w) = self.written.get_mut(id) {
            w.status.clone_from(&want.status);
        }
        if let Some(svc) = self.services.get(&ObjectRef::new(name).within(ns)) {
            let note = format!(
                "announcing from node {:?} with protocol \"layer2\"",
                self.node
            );
            if let Err(e) = self.event(&svc, "nodeAssigned", &note).await {
                warn!(event = "event_failed", service = id, error = %e, "nodeAssigned event not written");
            }
        }
        Ok(())
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
        let events: Api<CoreEvent> = Api::namespaced(self.statuses.clone().into_client(), &ns);
        events.create(&PostParams::default(), &event).await?;
        Ok(())
    }
}
