//! The keyed builder: turns the dirty keys into the speaker's deltas, translating only the
//! Services they touch, each from its own slices (an index slice→Service kept from the
//! slice events), and checks the keyed state against a whole translation after every relist,
//! once changes settle, and periodically.

use super::dirty::{Bell, Dirty};
use super::sent::Sent;
use super::{Shared, Stores, service_spec};
use crate::cached::{CachedService, CachedSlice};
use crate::crd::ConfigurationState;
use crate::state::ReconcilerCondition;
use crate::status::configuration_state;
use crate::translate::{Interfaces, Options, node_map, peers, slice_service, translate_service};
use crate::{Config, ConfigTracker, Reload};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};
use vigil_speaker::model::{DesiredState, DesiredUpdate, ServiceChanges, ServiceSpec, SharedVips};
use vigil_speaker::observe::SourceCounters;

/// How long the watches must be quiet after a change before the keyed state is checked.
const SETTLE: Duration = Duration::from_secs(1);
/// The shortest time between two checks after changes (a check is O(Services))...
const CHECK_SPACING: Duration = Duration::from_secs(10);
/// ...and at least this many times the last check's duration, so that checks take at most
/// 1 % of a core (at 5,000 Services a check takes about 140 ms; at 20,000, 450 ms).
const CHECK_COST_RATIO: u32 = 100;
/// A check runs at least this often, changes or not.
const CHECK_PERIOD: Duration = Duration::from_secs(300);
/// A refused configuration (it would orphan IPs this node announces) is tried again after
/// this, then after twice as long each time it is refused again, up to [`REFUSED_RETRY_MAX`]:
/// MetalLB's reconciler requeues it with backoff too. Nothing else would try it again once
/// the Services holding those IPs are gone: a Service's events do not re-parse the
/// configuration.
const REFUSED_RETRY_FIRST: Duration = Duration::from_millis(200);
const REFUSED_RETRY_MAX: Duration = Duration::from_secs(60);

/// Builds the speaker's desired state from the stores, keyed by Service.
pub(crate) struct Builder {
    pub(crate) stores: Stores,
    pub(crate) options: Options,
    pub(crate) gossip_port: u16,
    pub(crate) tracker: ConfigTracker,
    /// Where this speaker's ConfigurationState goes (`None`: nowhere, the benchmark), and
    /// the condition last written there.
    pub(crate) state: Option<Api<ConfigurationState>>,
    pub(crate) written: Option<ReconcilerCondition>,
    pub(crate) shared: Shared,
    pub(crate) counters: SourceCounters,
    pub(crate) bell: Arc<Bell>,
    /// Each slice's Service, and each Service's slices (`namespace/name` both).
    pub(crate) slice_owner: HashMap<String, String>,
    pub(crate) slices_of: HashMap<String, BTreeSet<String>>,
    /// What the speaker was sent, by Service id: the keyed state.
    pub(crate) sent: Sent,
    pub(crate) seeds: Vec<String>,
    /// `--majority-guard`: the expected members are counted from the speaker Pods.
    pub(crate) majority_guard: bool,
    /// The expected members in force (`None` without the guard).
    pub(crate) expected_members: Option<usize>,
    /// Whether the last configuration parsed was refused (see [`REFUSED_RETRY_FIRST`]).
    pub(crate) refused: bool,
}

/// When to try a refused configuration again: not at all once it is no longer refused; the
/// first wait after a refusal; twice the last wait (up to the most) after a retry refused
/// again; otherwise the try already planned (a refusal meanwhile does not push it back).
fn next_retry(
    refused: bool,
    planned: Option<(Instant, Duration)>,
    retried: bool,
    now: Instant,
) -> Option<(Instant, Duration)> {
    match (refused, planned) {
        (false, _) => None,
        (true, None) => Some((now + REFUSED_RETRY_FIRST, REFUSED_RETRY_FIRST)),
        (true, Some((_, wait))) if retried => {
            let wait = (wait * 2).min(REFUSED_RETRY_MAX);
            Some((now + wait, wait))
        }
        (true, pending) => pending,
    }
}

/// Sleeps until `at`, or forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// `namespace/name` into an [`ObjectRef`].
fn object_ref<K: kube::Resource<DynamicType = ()>>(key: &str) -> ObjectRef<K> {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    let r = ObjectRef::new(name);
    if ns.is_empty() { r } else { r.within(ns) }
}

impl Builder {
    /// The first desired state, from every store as listed (anything marked before is in
    /// the stores already, so the marks are dropped).
    pub(crate) fn initial(&mut self) -> DesiredState {
        let _ = self.bell.take();
        self.rebuild_slice_index();
        self.reconfigure(true);
        let all = self.all_service_ids();
        let changes = self.translate_keys(all);
        let seeds = self.compute_seeds();
        self.seeds = seeds.clone();
        self.expected_members = self.compute_expected_members();
        DesiredState {
            services: changes.upserts,
            expected_members: self.expected_members,
            seeds,
            labels: BTreeMap::new(),
            shared_vips: SharedVips::PerService,
        }
    }

    /// Translates what is marked, sends the changes, and checks the keyed state after a
    /// relist, once changes settle (at most every [`CHECK_SPACING`], or less often after a
    /// costly check) and every [`CHECK_PERIOD`].
    pub(crate) async fn run(mut self, tx: mpsc::Sender<DesiredUpdate>) {
        let mut last_check = Instant::now();
        let mut check_spacing = CHECK_SPACING;
        let mut unchecked = false;
        // The next try of a refused configuration, and the wait before the one after it.
        let mut retry: Option<(Instant, Duration)> = None;
        loop {
            let settle_at =
                unchecked.then(|| (Instant::now() + SETTLE).max(last_check + check_spacing));
            let periodic = last_check + CHECK_PERIOD;
            let check_at = settle_at.map_or(periodic, |s| s.min(periodic));
            let retry_at = retry.map(|(at, _)| at);
            let check = tokio::select! {
                () = self.bell.rung() => false,
                () = tokio::time::sleep_until(check_at) => true,
                () = sleep_until_some(retry_at) => false,
            };
            let retried = retry_at.is_some_and(|at| at <= Instant::now());
            if retried {
                // Whichever woke us: the refused configuration is parsed again now.
                self.bell.mark(|dirty| dirty.config = true);
            }
            let mut changes = ServiceChanges::default();
            if check {
                let started = Instant::now();
                self.check(&mut changes);
                last_check = Instant::now();
                check_spacing = CHECK_SPACING.max((last_check - started) * CHECK_COST_RATIO);
                unchecked = false;
            } else {
                let dirty = self.bell.take();
                if dirty.is_empty() {
                    continue;
                }
                let relisted = dirty.relisted;
                changes = self.apply(dirty);
                unchecked = true;
                if relisted {
                    self.check(&mut changes);
                    last_check = Instant::now();
                    unchecked = false;
                }
            }
            retry = next_retry(self.refused, retry, retried, Instant::now());
            self.write_state().await;
            let expected = self.compute_expected_members();
            if changes.is_empty() && expected == self.expected_members {
                continue;
            }
            self.counters.count_applied();
            let update = if expected == self.expected_members {
                DesiredUpdate::Changes(changes)
            } else {
                // The guard's count moved (a node added or removed for good): the changes
                // are in `sent` already; a whole state carries the new count.
                info!(event = "expected_members_changed", before = ?self.expected_members, now = ?expected, "split-brain guard: expected members changed");
                self.expected_members = expected;
                DesiredUpdate::Whole(self.whole_state())
            };
            if tx.send(update).await.is_err() {
                return;
            }
        }
    }

    /// The changes the marks in `dirty` make.
    pub(crate) fn apply(&mut self, dirty: Dirty) -> ServiceChanges {
        let mut keys = dirty.services;
        if dirty.relisted {
            self.rebuild_slice_index();
        } else {
            for m in dirty.slices {
                let before = match &m.owner {
                    Some(owner) => self.slice_owner.insert(m.slice.clone(), owner.clone()),
                    None => self.slice_owner.remove(&m.slice),
                };
                if let Some(before) = before {
                    if let Some(set) = self.slices_of.get_mut(&before) {
                        set.remove(&m.slice);
                        if set.is_empty() {
                            self.slices_of.remove(&before);
                        }
                    }
                    keys.insert(before);
                }
                if let Some(owner) = m.owner {
                    self.slices_of
                        .entry(owner.clone())
                        .or_default()
                        .insert(m.slice);
                    keys.insert(owner);
                }
            }
        }
        let everything = if dirty.config || dirty.nodes || dirty.relisted {
            self.reconfigure(dirty.nodes || dirty.relisted)
        } else {
            false
        };
        if everything {
            keys = self.all_service_ids();
        }
        let mut changes = self.translate_keys(keys);
        if dirty.peers || dirty.nodes || dirty.relisted {
            let seeds = self.compute_seeds();
            if seeds != self.seeds {
                self.seeds = seeds.clone();
                changes.seeds = Some(seeds);
            }
        }
        changes
    }

    /// Every Service in the store and every one sent (a deleted one must be removed).
    fn all_service_ids(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self
            .stores
            .services
            .state()
            .iter()
            .map(|s| crate::translate::service_id(s.as_ref()))
            .collect();
        ids.extend(self.sent.ids().cloned());
        ids
    }

    fn rebuild_slice_index(&mut self) {
        self.slice_owner.clear();
        self.slices_of.clear();
        for slice in self.stores.slices.state() {
            if let Some((ns, name)) = slice_service(&slice) {
                let owner = format!("{ns}/{name}");
                let key = super::watch::slice_key(&slice);
                self.slices_of
                    .entry(owner.clone())
                    .or_default()
                    .insert(key.clone());
                self.slice_owner.insert(key, owner);
            }
        }
    }

    /// Parses the configuration again through the tracker (the last good one stays when
    /// the new one is invalid or refused). Returns whether every Service must be translated
    /// again: the configuration in force changed, or the Nodes did (`nodes_changed`).
    fn reconfigure(&mut self, nodes_changed: bool) -> bool {
        let nodes: Vec<Node> = self
            .stores
            .nodes
            .state()
            .iter()
            .map(|n| (**n).clone())
            .collect();
        let pools: Vec<_> = self
            .stores
            .pools
            .state()
            .iter()
            .map(|p| (**p).clone())
            .collect();
        let ads: Vec<_> = self
            .stores
            .ads
            .state()
            .iter()
            .map(|a| (**a).clone())
            .collect();
        let parsed = Config::parse(&pools, &ads, &nodes);
        let announced = self.shared.lock().announced.clone();
        let reload = self.tracker.reconcile(parsed, &announced);
        self.refused = matches!(reload, Reload::Refused(_));
        let applied = match reload {
            Reload::Applied => {
                info!(event = "config_applied", "MetalLB configuration applied");
                true
            }
            Reload::Unchanged => false,
            Reload::Invalid(e) => {
                self.counters.count_rejected();
                warn!(event = "config_invalid", error = %e.metallb_message(), "configuration rejected; the last good one stays");
                false
            }
            Reload::Refused(services) => {
                self.counters.count_rejected();
                // MetalLB counts an update error for the handler's refusal, not for a
                // configuration that does not parse.
                self.counters.count_update_error();
                warn!(event = "config_refused", services = ?services, "configuration would orphan announced IPs; the last good one stays");
                false
            }
        };
        self.counters
            .set_config_state(self.tracker.loaded(), self.tracker.stale());
        applied || nodes_changed
    }

    /// One Service as the speaker should have it, from the stores (`None`: not handled, gone,
    /// or no configuration yet: MetalLB announces nothing before one is applied).
    fn translate_one(
        &self,
        config: Option<&Config>,
        id: &str,
        nodes: &BTreeMap<&str, &Node>,
    ) -> Option<(ServiceSpec, Interfaces)> {
        let config = config?;
        let svc: Arc<CachedService> = self.stores.services.get(&object_ref(id))?;
        let slices: Vec<Arc<CachedSlice>> = self
            .slices_of
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|key| self.stores.slices.get(&object_ref(key)))
            .collect();
        let refs: Vec<&CachedSlice> = slices.iter().map(AsRef::as_ref).collect();
        let a = translate_service(config, &svc, &refs, nodes, &self.options).ok()?;
        Some((service_spec(&a), a.interfaces))
    }

    /// Translates `keys` and records what differs from what was sent.
    fn translate_keys(&mut self, keys: BTreeSet<String>) -> ServiceChanges {
        let node_list = self.stores.nodes.state();
        let nodes = node_map(node_list.iter().map(AsRef::as_ref));
        // Translated first, then recorded: the configuration is read in place, not cloned
        // per batch (it holds every advertisement's Node set).
        let translated: Vec<(String, Option<(ServiceSpec, Interfaces)>)> = keys
            .into_iter()
            .map(|id| {
                let t = self.translate_one(self.tracker.config(), &id, &nodes);
                (id, t)
            })
            .collect();
        let mut changes = ServiceChanges::default();
        let mut interfaces = Vec::with_capacity(translated.len());
        for (id, t) in translated {
            match t {
                Some((spec, ifaces)) => {
                    interfaces.push((id, Some(ifaces)));
                    if !self.sent.is(&spec) {
                        changes.upserts.push(self.sent.insert(spec));
                    }
                }
                None => {
                    if self.sent.remove(&id) {
                        changes.removes.push(id.clone());
                    }
                    interfaces.push((id, None));
                }
            }
        }
        let mut shared = self.shared.lock();
        for (id, ifaces) in interfaces {
            match ifaces {
                Some(i) => shared.interfaces.insert(id, i),
                None => shared.interfaces.remove(&id),
            };
        }
        changes
    }

    fn compute_seeds(&self) -> Vec<String> {
        let node_list = self.stores.nodes.state();
        let nodes = node_map(node_list.iter().map(AsRef::as_ref));
        let pods = self.stores.pods.state();
        let mut seeds: Vec<String> = peers(pods.iter().map(AsRef::as_ref), &nodes, &self.options)
            .into_iter()
            .filter(|p| p.node.as_deref() != Some(self.options.node_name.as_str()))
            .map(|p| std::net::SocketAddr::new(p.addr, self.gossip_port).to_string())
            .collect();
        seeds.sort();
        seeds.dedup();
        seeds
    }

    /// The split-brain guard's expected members: the nodes of the speaker Pods (those
    /// `--ml-labels` selects, this node included), `None` without `--majority-guard`.
    ///
    /// Why the speaker Pods: a DaemonSet's Pods tolerate unreachable and not-ready Nodes, so
    /// a node that is lost or partitioned keeps its Pod (and its place in the count) until the
    /// Node is deleted; a partition therefore never shrinks the count on either side, and the
    /// side that cannot reach the API server keeps the last list it had. The count moves only
    /// when a node joins or is removed for good.
    pub(crate) fn compute_expected_members(&self) -> Option<usize> {
        if !self.majority_guard {
            return None;
        }
        let node_list = self.stores.nodes.state();
        let nodes = node_map(node_list.iter().map(AsRef::as_ref));
        let pods = self.stores.pods.state();
        let mut names: BTreeSet<String> =
            peers(pods.iter().map(AsRef::as_ref), &nodes, &self.options)
                .into_iter()
                .map(|p| p.node.unwrap_or_else(|| p.addr.to_string()))
                .collect();
        names.insert(self.options.node_name.clone());
        Some(names.len())
    }

    /// The whole desired state as sent so far.
    fn whole_state(&self) -> DesiredState {
        DesiredState {
            services: self.sent.specs(),
            expected_members: self.expected_members,
            seeds: self.seeds.clone(),
            labels: BTreeMap::new(),
            shared_vips: SharedVips::PerService,
        }
    }

    /// Every Service translated whole, its slices found by scanning every slice (not
    /// through the keyed index): what the keyed state must equal. Each spec goes to `visit`
    /// as it is made and is dropped after: a map of them all held every Service's candidate
    /// set once more, unshared (at 5,000 Services and 100 Nodes, 21 MB at each check, a
    /// peak that stayed in the speaker's RSS).
    pub(crate) fn whole(&self, mut visit: impl FnMut(ServiceSpec)) {
        let Some(config) = self.tracker.config() else {
            return;
        };
        let node_list = self.stores.nodes.state();
        let nodes = node_map(node_list.iter().map(AsRef::as_ref));
        let slices = self.stores.slices.state();
        let mut by_service: HashMap<(&str, &str), Vec<&CachedSlice>> = HashMap::new();
        for slice in &slices {
            if let Some(key) = slice_service(slice) {
                by_service.entry(key).or_default().push(slice);
            }
        }
        for svc in self.stores.services.state() {
            let key = (
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                svc.metadata.name.as_deref().unwrap_or_default(),
            );
            let mine = by_service.get(&key).map_or(&[][..], Vec::as_slice);
            if let Ok(a) = translate_service(config, &svc, mine, &nodes, &self.options) {
                visit(service_spec(&a));
            }
        }
    }

    /// Compares the keyed state with a whole translation. Services marked since (their
    /// change is on its way) are left out; a difference is counted, logged and repaired
    /// into `changes`.
    pub(crate) fn check(&mut self, changes: &mut ServiceChanges) -> Option<u64> {
        // Whatever is marked now goes through the keyed path first.
        let pending = self.bell.take();
        if !pending.is_empty() {
            let more = self.apply(pending);
            merge(changes, more);
        }
        // Only what differs is kept: `Some` a spec the keyed state lacks or holds otherwise,
        // `None` (below) a Service the keyed state holds and the translation does not.
        let mut translated: HashSet<String> = HashSet::new();
        let mut differ: BTreeMap<String, Option<ServiceSpec>> = BTreeMap::new();
        self.whole(|spec| {
            translated.insert(spec.id.clone());
            if !self.sent.is(&spec) {
                differ.insert(spec.id.clone(), Some(spec));
            }
        });
        // Read after the translation: a Service marked while it ran is on its way.
        let (skip_all, marked) = self.bell.peek(|d| {
            let mut marked = d.services.clone();
            for m in &d.slices {
                marked.extend(m.owner.clone());
                marked.extend(self.slice_owner.get(&m.slice).cloned());
            }
            (d.nodes || d.config || d.relisted, marked)
        });
        if skip_all {
            return None;
        }
        for id in self.sent.ids() {
            if !translated.contains(id) {
                differ.insert(id.clone(), None);
            }
        }
        differ.retain(|id, _| !marked.contains(id));
        let n = differ.len() as u64;
        self.counters.count_keyed_check(n);
        if n == 0 {
            info!(
                event = "keyed_state_checked",
                services = translated.len(),
                differences = 0,
                "keyed state equals a whole translation"
            );
            return Some(0);
        }
        warn!(event = "keyed_state_differs", services = translated.len(), differences = n, first = ?differ.keys().take(5).collect::<Vec<_>>(), "keyed state differs from a whole translation; repaired from it");
        for (id, spec) in differ {
            match spec {
                Some(spec) => {
                    changes.removes.retain(|r| *r != id);
                    changes.upserts.retain(|u| u.id != id);
                    changes.upserts.push(self.sent.insert(spec));
                }
                None => {
                    self.sent.remove(&id);
                    changes.upserts.retain(|u| u.id != id);
                    changes.removes.push(id);
                }
            }
        }
        Some(n)
    }

    /// Writes this speaker's ConfigurationState when the reconcile's condition changed (the
    /// object by server-side apply, its status through the subresource). A failure is
    /// logged and tried again on the next change.
    pub(crate) async fn write_state(&mut self) {
        let Some(condition) = self.tracker.condition().cloned() else {
            return;
        };
        let Some(state) = &self.state else {
            return;
        };
        if self.written.as_ref() == Some(&condition) {
            return;
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let namespace = state.namespace().unwrap_or_default().to_string();
        let object = configuration_state(
            &namespace,
            &self.options.node_name,
            self.tracker.status(now),
        );
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut body = serde_json::json!({ "metadata": object.metadata });
        body["apiVersion"] = "metallb.io/v1beta1".into();
        body["kind"] = "ConfigurationState".into();
        let apply = PatchParams::apply("vigil-speaker").force();
        let result = async {
            state.patch(&name, &apply, &Patch::Apply(&body)).await?;
            let status = serde_json::json!({ "status": object.status });
            state
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
        }
        .await;
        match result {
            Ok(_) => self.written = Some(condition),
            Err(e) => {
                warn!(event = "configuration_state_failed", error = %e, "ConfigurationState not written")
            }
        }
    }
}

/// `later` applied after `into`: the later word on a Service wins.
fn merge(into: &mut ServiceChanges, later: ServiceChanges) {
    for spec in later.upserts {
        into.removes.retain(|r| *r != spec.id);
        into.upserts.retain(|u| u.id != spec.id);
        into.upserts.push(spec);
    }
    for id in later.removes {
        into.upserts.retain(|u| u.id != id);
        if !into.removes.contains(&id) {
            into.removes.push(id);
        }
    }
    if later.seeds.is_some() {
        into.seeds = later.seeds;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_configuration_is_tried_again_with_backoff_until_it_is_not_refused() {
        let t0 = Instant::now();
        let first = next_retry(true, None, false, t0).expect("planned");
        assert_eq!(first, (t0 + REFUSED_RETRY_FIRST, REFUSED_RETRY_FIRST));
        // Refused again by some other change before the try: the plan stands.
        assert_eq!(next_retry(true, Some(first), false, t0), Some(first));
        // Each try refused again waits twice as long, up to the most.
        let mut planned = first;
        let mut waits = Vec::new();
        for _ in 0..12 {
            planned = next_retry(true, Some(planned), true, planned.0).expect("planned");
            waits.push(planned.1);
        }
        assert_eq!(waits[0], REFUSED_RETRY_FIRST * 2);
        assert!(waits.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*waits.last().unwrap(), REFUSED_RETRY_MAX);
        // Accepted (or replaced by a configuration that is not refused): no more tries.
        assert_eq!(next_retry(false, Some(planned), true, planned.0), None);
    }
}
