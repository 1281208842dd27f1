//! The speaker's side of key acknowledgements: [`AckWriter`] keeps this node's Lease (its form
//! is `vigil_metallb::key_ack`, re-exported here).

pub use vigil_metallb::key_ack::*;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};

/// Writes this speaker's acknowledgement Lease: at once whenever the report changes, and
/// every `interval` as a heartbeat (valid for three intervals). A failed write is logged and
/// retried at the next change or heartbeat; the speaker never waits for it.
#[derive(Debug, Clone)]
pub struct AckWriter {
    report: watch::Sender<Report>,
}

impl AckWriter {
    /// Starts writing for `node` in `namespace`.
    pub fn start(
        client: kube::Client,
        namespace: &str,
        node: &str,
        interval: Duration,
        initial: Report,
    ) -> Self {
        let (report, rx) = watch::channel(initial);
        let api: Api<Lease> = Api::namespaced(client, namespace);
        tokio::spawn(write_loop(
            api,
            namespace.to_string(),
            node.to_string(),
            interval,
            rx,
        ));
        Self { report }
    }

    /// Changes what is reported (written at once if different).
    pub fn update(&self, change: impl FnOnce(&mut Report)) {
        self.report.send_if_modified(|r| {
            let before = r.clone();
            change(r);
            *r != before
        });
    }
}

async fn write_loop(
    api: Api<Lease>,
    namespace: String,
    node: String,
    interval: Duration,
    mut rx: watch::Receiver<Report>,
) {
    let valid_for = interval * 3;
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let name = lease_name(&node);
    let mut heartbeat = tokio::time::interval(interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = heartbeat.tick() => {}
        }
        let report = rx.borrow_and_update().clone();
        let mut body = lease(
            &namespace,
            &node,
            &report,
            valid_for,
            k8s_openapi::jiff::Timestamp::now(),
        );
        body.metadata.namespace = None;
        let mut value = serde_json::to_value(&body).expect("a Lease serialises");
        value["apiVersion"] = "coordination.k8s.io/v1".into();
        value["kind"] = "Lease".into();
        match api.patch(&name, &params, &Patch::Apply(&value)).await {
            Ok(_) if failing => {
                failing = false;
                info!(event = "key_ack_written", lease = %name, "key acknowledgement written again");
            }
            Ok(_) => {}
            Err(e) => {
                if !failing {
                    warn!(event = "key_ack_failed", lease = %name, error = %e, "key acknowledgement not written; retrying");
                }
                failing = true;
            }
        }
    }
}
