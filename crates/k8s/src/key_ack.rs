//! The speaker's side of key acknowledgements: [`AckWriter`] keeps this node's Lease (its form
//! is `vigil_metallb::key_ack`, re-exported here).

pub use vigil_metallb::key_ack::*;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The first wait after a refused write.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(30);
/// The longest wait between two tries of a refused write.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);
use tracing::{info, warn};

/// Writes this speaker's acknowledgement Lease: at once whenever the report changes, and
/// every `interval` as a heartbeat (valid for three intervals). A failed write is logged and
/// retried at the next change or heartbeat; the speaker never waits for it. A write refused
/// for want of a right (MetalLB's own RBAC grants speakers no Leases) is said once, naming
/// the right, and tried again only after a back-off that doubles up to [`MAX_BACKOFF`]:
/// announcing never depends on it, only key rotation's acknowledgements do.
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
    // While refused: when to try again, and the wait after that.
    let mut refused: Option<(Instant, Duration)> = None;
    loop {
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = heartbeat.tick() => {}
        }
        if refused.is_some_and(|(retry_at, _)| Instant::now() < retry_at) {
            continue;
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
                refused = None;
                info!(event = "key_ack_written", lease = %name, "key acknowledgement written again");
            }
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_forbidden() => {
                let wait = refused.map_or(FIRST_BACKOFF, |(_, w)| (w * 2).min(MAX_BACKOFF));
                if refused.is_none() {
                    warn!(
                        event = "key_ack_forbidden",
                        lease = %name,
                        missing = %format!("create and patch of coordination.k8s.io leases in {namespace}"),
                        retry_within = ?MAX_BACKOFF,
                        "key acknowledgement refused: the speaker's ServiceAccount lacks the right (MetalLB's RBAC grants none); announcing goes on, key rotation waits for acknowledgements; tried again with back-off"
                    );
                }
                failing = true;
                refused = Some((Instant::now() + wait, wait));
            }
            Err(e) => {
                if !failing {
                    warn!(event = "key_ack_failed", lease = %name, error = %e, "key acknowledgement not written; retrying");
                }
                failing = true;
            }
        }
    }
}
