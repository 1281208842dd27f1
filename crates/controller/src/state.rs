//! The controller's ConfigurationState, named `controller` and labelled
//! `metallb.io/component-type=controller` in its namespace as MetalLB's controller keeps it:
//! its conditions say whether the IPAddressPools are valid (MetalLB's `poolReconcilerValid`),
//! whether this controller is replicated (vigil's `vigilReplicated`: without Lease rights,
//! as under MetalLB's own RBAC, it runs alone) and which BGP objects it does not serve
//! (vigil's `vigilBGPObjectsIgnored`; vigil has no BGP). `result` and `errorSummary` follow
//! MetalLB's rule: only `ConfigurationError` conditions make the state `Invalid`.
//!
//! [`ControllerState`] is the shared record (the allocation, the election and the BGP lister
//! report into it); [`write_loop`] writes it whenever it changes; its [`Collector`] exports
//! `vigil_controller_replicated` and `vigil_controller_degraded_writes_total`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};
use vigil_metallb::crd::{ConfigurationState, ConfigurationStateStatus, LABEL_COMPONENT_TYPE};

/// The object's name, as MetalLB's controller names it.
pub const NAME: &str = "controller";
/// MetalLB's condition on the pools.
pub const CONDITION_POOLS: &str = "poolReconcilerValid";
/// vigil's condition on replication.
pub const CONDITION_REPLICATED: &str = "vigilReplicated";
/// vigil's condition listing BGP objects it does not serve.
pub const CONDITION_BGP: &str = "vigilBGPObjectsIgnored";
/// The field manager of the object.
const FIELD_MANAGER: &str = "vigil-controller-state";
/// How often BGP objects are looked for.
const BGP_LOOK_EVERY: Duration = Duration::from_secs(60);
/// MetalLB's BGP kinds (`metallb.io/v1beta1`, except BGPPeer's served `v1beta2`).
const BGP_KINDS: [(&str, &str, &str); 4] = [
    ("BGPPeer", "v1beta2", "bgppeers"),
    ("BGPAdvertisement", "v1beta1", "bgpadvertisements"),
    ("BFDProfile", "v1beta1", "bfdprofiles"),
    ("Community", "v1beta1", "communities"),
];

/// How the controller is replicated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replication {
    /// Not decided yet (the election is starting).
    Starting,
    /// Replicas elect a leader on a Lease.
    Lease,
    /// No rights on Leases: this replica runs alone, allocating (MetalLB's way); the
    /// message says what was refused.
    Alone(String),
}

/// A write the controller made in a lesser form, or skipped, for want of a right.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Degraded {
    /// An Event written as core/v1 because events.k8s.io was refused.
    EventCoreV1,
    /// An Event skipped: both event APIs were refused.
    EventSkipped,
    /// A pool status written with `update` because `patch` was refused.
    PoolStatusUpdate,
    /// A pool status skipped: `patch` and `update` were refused.
    PoolStatusSkipped,
}

impl Degraded {
    const ALL: [Self; 4] = [
        Self::EventCoreV1,
        Self::EventSkipped,
        Self::PoolStatusUpdate,
        Self::PoolStatusSkipped,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::EventCoreV1 => "event_core_v1",
            Self::EventSkipped => "event_skipped",
            Self::PoolStatusUpdate => "pool_status_update",
            Self::PoolStatusSkipped => "pool_status_skipped",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    replication: Replication,
    /// `None` until the pools were read; then the configuration error, if any.
    pools: Option<Option<String>>,
    /// `Kind namespace/name` of every BGP object found.
    bgp: Vec<String>,
}

/// The controller's state, shared by the tasks that report into it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ControllerState {
    record: Arc<watch::Sender<Record>>,
    degraded: Arc<Mutex<BTreeMap<Degraded, u64>>>,
}

impl Default for ControllerState {
    fn default() -> Self {
        let (tx, _) = watch::channel(Record {
            replication: Replication::Starting,
            pools: None,
            bgp: Vec::new(),
        });
        Self {
            record: Arc::new(tx),
            degraded: Arc::default(),
        }
    }
}

impl ControllerState {
    /// How the controller is replicated now.
    pub fn set_replication(&self, r: Replication) {
        self.record
            .send_if_modified(|rec| replace(&mut rec.replication, r));
    }

    /// The pools were read: `error` is the configuration error, if they are not valid.
    pub fn set_pools(&self, error: Option<String>) {
        self.record
            .send_if_modified(|rec| replace(&mut rec.pools, Some(error)));
    }

    /// The BGP objects found (`Kind namespace/name`).
    pub fn set_bgp_objects(&self, mut found: Vec<String>) {
        found.sort();
        self.record
            .send_if_modified(|rec| replace(&mut rec.bgp, found));
    }

    /// Counts a degraded write; returns whether it is the first of its kind (to be logged).
    pub fn count(&self, kind: Degraded) -> bool {
        let mut d = self.degraded.lock().unwrap_or_else(PoisonError::into_inner);
        let n = d.entry(kind).or_default();
        *n += 1;
        *n == 1
    }

    /// How the controller is replicated now.
    pub fn replication(&self) -> Replication {
        self.record.borrow().replication.clone()
    }

    /// The status MetalLB's reconcilers would show, with vigil's conditions beside
    /// (`now` stamps them: MetalLB stamps every reconcile).
    pub fn status(&self, now: &Time) -> ConfigurationStateStatus {
        status_of(&self.record.borrow(), now)
    }
}

fn replace<T: PartialEq>(slot: &mut T, value: T) -> bool {
    if *slot == value {
        return false;
    }
    *slot = value;
    true
}

fn condition(type_: &str, ok: bool, reason: &str, message: String, now: &Time) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message,
        last_transition_time: now.clone(),
        observed_generation: None,
    }
}

fn status_of(rec: &Record, now: &Time) -> ConfigurationStateStatus {
    let mut conditions = Vec::new();
    match &rec.pools {
        None => {}
        Some(None) => conditions.push(condition(
            CONDITION_POOLS,
            true,
            "Reconciled",
            String::new(),
            now,
        )),
        Some(Some(e)) => conditions.push(condition(
            CONDITION_POOLS,
            false,
            "ConfigurationError",
            e.clone(),
            now,
        )),
    }
    match &rec.replication {
        Replication::Starting => {}
        Replication::Lease => conditions.push(condition(
            CONDITION_REPLICATED,
            true,
            "LeaseElection",
            "replicas elect a leader on a Lease".into(),
            now,
        )),
        Replication::Alone(why) => conditions.push(condition(
            CONDITION_REPLICATED,
            false,
            "NoLeaseRights",
            format!("running unreplicated, as MetalLB's controller does: {why}"),
            now,
        )),
    }
    if !rec.bgp.is_empty() {
        conditions.push(condition(
            CONDITION_BGP,
            false,
            "BGPNotSupported",
            format!(
                "vigil announces Layer 2 only; not served: {}",
                rec.bgp.join(", ")
            ),
            now,
        ));
    }
    let errors: Vec<&str> = conditions
        .iter()
        .filter(|c| c.status == "False" && c.reason == "ConfigurationError")
        .map(|c| c.message.as_str())
        .collect();
    let result = match (conditions.is_empty(), errors.is_empty()) {
        (true, _) => "Unknown",
        (false, true) => "Valid",
        (false, false) => "Invalid",
    };
    ConfigurationStateStatus {
        result: Some(result.into()),
        error_summary: (!errors.is_empty()).then(|| errors.join("\n")),
        conditions: (!conditions.is_empty()).then_some(conditions),
    }
}

/// Writes the ConfigurationState `controller` in `namespace` whenever the state changes, and
/// looks for BGP objects every minute, until `stop`. A refused or failed write is logged once
/// per kind of failure and tried again on the next change or look.
pub async fn write_loop(
    client: Client,
    namespace: String,
    state: ControllerState,
    stop: impl Future<Output = ()>,
) {
    let api: Api<ConfigurationState> = Api::namespaced(client.clone(), &namespace);
    let mut changes = state.record.subscribe();
    let mut look = tokio::time::interval(BGP_LOOK_EVERY);
    let mut stop = std::pin::pin!(stop);
    let mut last_error: Option<String> = None;
    // The interval's first tick is now: look once before the first write.
    look.tick().await;
    state.set_bgp_objects(bgp_objects(&client, &namespace).await);
    loop {
        changes.mark_unchanged();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let status = state.status(&now);
        match write(&api, status).await {
            Ok(()) => last_error = None,
            Err(e) => {
                let e = e.to_string();
                if last_error.as_ref() != Some(&e) {
                    warn!(event = "configuration_state_failed", error = %e, "ConfigurationState controller not written");
                }
                last_error = Some(e);
            }
        }
        // Wait for a reason to write again: a change, or a failed write and the next look.
        loop {
            tokio::select! {
                () = &mut stop => return,
                r = changes.changed() => if r.is_err() { return } else { break },
                _ = look.tick() => {
                    state.set_bgp_objects(bgp_objects(&client, &namespace).await);
                    if last_error.is_some() || changes.has_changed().unwrap_or(false) {
                        break;
                    }
                }
            }
        }
    }
}

async fn write(
    api: &Api<ConfigurationState>,
    status: ConfigurationStateStatus,
) -> Result<(), kube::Error> {
    let body = serde_json::json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "ConfigurationState",
        "metadata": { "name": NAME, "labels": { LABEL_COMPONENT_TYPE: "controller" } },
    });
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(NAME, &apply, &Patch::Apply(&body)).await?;
    let status = serde_json::json!({ "status": status });
    api.patch_status(NAME, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// Every BGP object in `namespace`, as `Kind namespace/name`. A kind whose CRD is missing, or
/// that may not be listed, counts as none.
async fn bgp_objects(client: &Client, namespace: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (kind, version, plural) in BGP_KINDS {
        let resource = ApiResource {
            group: "metallb.io".into(),
            version: version.into(),
            api_version: format!("metallb.io/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.list_metadata(&ListParams::default()).await {
            Ok(list) => found.extend(list.items.iter().map(|o| {
                format!(
                    "{kind} {namespace}/{}",
                    o.metadata.name.as_deref().unwrap_or_default()
                )
            })),
            Err(e) => tracing::debug!(kind, error = %e, "BGP objects not listed"),
        }
    }
    if !found.is_empty() {
        info!(event = "bgp_objects_found", objects = ?found, "vigil announces Layer 2 only; these BGP objects are not served");
    }
    found
}

impl Collector for ControllerState {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let replicated = u64::from(self.replication() == Replication::Lease);
        let family = enc.encode_descriptor(
            "vigil_controller_replicated",
            "1 when the controller's replicas elect a leader on a Lease; 0 when it runs alone (no Lease rights) or is starting.",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(replicated).encode(family)?;
        let degraded = self
            .degraded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut family = enc.encode_descriptor(
            "vigil_controller_degraded_writes",
            "Writes made in a lesser form or skipped for want of an RBAC right, by write.",
            None,
            MetricType::Counter,
        )?;
        for kind in Degraded::ALL {
            let labels = [("write".to_string(), kind.label().to_string())];
            let metric = family.encode_family(&labels)?;
            ConstCounter::new(degraded.get(&kind).copied().unwrap_or(0)).encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time("2026-12-06T03:00:00Z".parse().unwrap())
    }

    #[test]
    fn result_follows_metallbs_rule() {
        let state = ControllerState::default();
        assert_eq!(state.status(&now()).result.as_deref(), Some("Unknown"));
        state.set_pools(None);
        state.set_replication(Replication::Alone("leases: forbidden".into()));
        state.set_bgp_objects(vec!["BGPPeer metallb-system/p".into()]);
        let s = state.status(&now());
        // Running alone and BGP objects are said, but the configuration is valid.
        assert_eq!(s.result.as_deref(), Some("Valid"));
        let types: Vec<(&str, &str)> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                (CONDITION_POOLS, "True"),
                (CONDITION_REPLICATED, "False"),
                (CONDITION_BGP, "False")
            ]
        );
        state.set_pools(Some("configuration error: overlapping CIDRs".into()));
        let s = state.status(&now());
        assert_eq!(s.result.as_deref(), Some("Invalid"));
        assert_eq!(
            s.error_summary.as_deref(),
            Some("configuration error: overlapping CIDRs")
        );
    }

    #[test]
    fn degraded_writes_are_logged_once_and_counted() {
        let state = ControllerState::default();
        assert!(state.count(Degraded::EventCoreV1));
        assert!(!state.count(Degraded::EventCoreV1));
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        state.set_replication(Replication::Lease);
        registry.register_collector(Box::new(state.clone()));
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("vigil_controller_replicated 1"), "{text}");
        assert!(
            text.contains("vigil_controller_degraded_writes_total{write=\"event_core_v1\"} 2"),
            "{text}"
        );
    }
}
