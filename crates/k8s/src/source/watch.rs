//! The reflectors, each marking what its events touch in one shared [`Dirty`] set and then
//! ringing one bell: the builder learns *which* Services changed, not only that something did.
//!
//! - A Service event marks that Service; an EndpointSlice event marks the slice with the
//!   Service it names now (the builder keeps the slice→Service index and also marks the
//!   Service it named before).
//! - A Node event marks the Nodes only when something the translation reads changed
//!   ([`NodeFacts`]: labels, the `NetworkUnavailable` condition, `InternalIP`s); kubelet
//!   heartbeats, images and `managedFields` change none of these.
//! - IPAddressPools and L2Advertisements mark the configuration when their labels or spec
//!   changed (not their status: the controller's counts); speaker Pods the peers
//!   (watched, or listed every 10 s where the role may only list them).
//! - A relist (a watch restarted: `InitDone`) marks `relisted`: everything is translated
//!   again and then checked against a whole translation.

use super::dirty::{Bell, Dirty, SliceMove};
use super::slim::Slim;
use crate::cached::{CachedService, CachedSlice};
use crate::crd::{IPAddressPool, IPAddressPoolSpec, L2Advertisement, L2AdvertisementSpec};
use crate::translate::{network_unavailable, service_id, slice_service};
use futures_util::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};
use vigil_speaker::observe::SourceCounters;

/// How often speaker Pods are listed where they may not be watched.
const POD_POLL: Duration = Duration::from_secs(10);

/// What every watch shares: the dirty set and its bell, and the counters
/// (`metallb_k8s_client_updates_total` counts each object seen changed or deleted).
pub(super) struct Watch {
    pub(super) bell: Arc<Bell>,
    pub(super) counters: SourceCounters,
}

/// What a watched kind must be to live in a reflector's store shared across tasks.
pub(super) trait Reflected:
    Resource<DynamicType = ()> + Slim + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Reflected for K where
    K: Resource<DynamicType = ()> + Slim + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// How one kind's events mark the dirty set.
pub(super) trait Marker<K>: Send + 'static {
    fn mark(&mut self, event: &watcher::Event<K>, dirty: &mut Dirty);
}

/// Services: the Service itself.
pub(super) struct ServiceMarker;

impl Marker<CachedService> for ServiceMarker {
    fn mark(&mut self, event: &watcher::Event<CachedService>, dirty: &mut Dirty) {
        match event {
            watcher::Event::Apply(s) | watcher::Event::Delete(s) => {
                dirty.services.insert(service_id(s));
            }
            watcher::Event::InitDone => dirty.relisted = true,
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }
}

/// EndpointSlices: the slice and the Service it names now (none once deleted).
pub(super) struct SliceMarker;

impl Marker<CachedSlice> for SliceMarker {
    fn mark(&mut self, event: &watcher::Event<CachedSlice>, dirty: &mut Dirty) {
        let (slice, deleted) = match event {
            watcher::Event::Apply(s) => (s, false),
            watcher::Event::Delete(s) => (s, true),
            watcher::Event::InitDone => {
                dirty.relisted = true;
                return;
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
        let owner = (!deleted)
            .then(|| slice_service(slice).map(|(ns, name)| format!("{ns}/{name}")))
            .flatten();
        dirty.slices.push(SliceMove {
            slice: slice_key(slice),
            owner,
        });
    }
}

/// A slice's `namespace/name`.
pub(super) fn slice_key(slice: &CachedSlice) -> String {
    format!(
        "{}/{}",
        slice.metadata.namespace.as_deref().unwrap_or_default(),
        slice.metadata.name.as_deref().unwrap_or_default()
    )
}

/// What the speaker reads of an object, compared per name so that only a change of it marks
/// anything: of a Node its [`NodeFacts`]; of a pool or an advertisement what the
/// configuration's parse reads, its labels (the advertisements' pool selectors) and its
/// spec. Not a pool's status: the
/// controller rewrites a pool's `assignedIPv4` / `availableIPv4` counts with every IP it
/// allocates, and each of those writes reaching every speaker as a new configuration
/// re-parsed it (every Node and pool cloned) once per Service during a sync.
pub(super) trait MarkedFacts {
    type Facts: PartialEq + Send + 'static;
    fn facts(&self) -> Self::Facts;
    /// Marks what a change of these facts touches.
    fn mark(dirty: &mut Dirty);
}

impl MarkedFacts for IPAddressPool {
    type Facts = (Option<BTreeMap<String, String>>, IPAddressPoolSpec);
    fn facts(&self) -> Self::Facts {
        (self.metadata.labels.clone(), self.spec.clone())
    }
    fn mark(dirty: &mut Dirty) {
        dirty.config = true;
    }
}

impl MarkedFacts for L2Advertisement {
    type Facts = (Option<BTreeMap<String, String>>, L2AdvertisementSpec);
    fn facts(&self) -> Self::Facts {
        (self.metadata.labels.clone(), self.spec.clone())
    }
    fn mark(dirty: &mut Dirty) {
        dirty.config = true;
    }
}

/// Pools, advertisements and Nodes: what their facts touch ([`MarkedFacts::mark`]), when
/// the facts changed, an object came or went, or the watch relisted.
pub(super) struct FactsMarker<K: MarkedFacts> {
    facts: HashMap<String, K::Facts>,
}

impl<K: MarkedFacts> Default for FactsMarker<K> {
    fn default() -> Self {
        Self {
            facts: HashMap::new(),
        }
    }
}

impl<K: MarkedFacts + Resource + Send + 'static> Marker<K> for FactsMarker<K> {
    fn mark(&mut self, event: &watcher::Event<K>, dirty: &mut Dirty) {
        let name = |o: &K| o.meta().name.clone().unwrap_or_default();
        match event {
            watcher::Event::Apply(o) => {
                let facts = o.facts();
                if self.facts.get(&name(o)) != Some(&facts) {
                    self.facts.insert(name(o), facts);
                    K::mark(dirty);
                }
            }
            watcher::Event::Delete(o) => {
                self.facts.remove(&name(o));
                K::mark(dirty);
            }
            watcher::Event::Init => self.facts.clear(),
            watcher::Event::InitApply(o) => {
                self.facts.insert(name(o), o.facts());
            }
            watcher::Event::InitDone => {
                K::mark(dirty);
                dirty.relisted = true;
            }
        }
    }
}

/// Speaker Pods in the synthetic stores of [`super::KeyedBench`]: the peers (the speaker's
/// own Pod watch marks them the same way).
pub(super) struct PeerMarker;

impl<K> Marker<K> for PeerMarker {
    fn mark(&mut self, event: &watcher::Event<K>, dirty: &mut Dirty) {
        match event {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone => {
                dirty.peers = true;
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }
}

/// What the translation reads of a Node: its labels (advertisements' node selectors, the
/// exclude label), whether it is `NetworkUnavailable`, and its `InternalIP`s (peers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeFacts {
    labels: BTreeMap<String, String>,
    network_unavailable: bool,
    internal_ips: Vec<String>,
}

impl NodeFacts {
    pub(super) fn of(node: &Node) -> Self {
        Self {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            network_unavailable: network_unavailable(Some(node)),
            internal_ips: node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .into_iter()
                .flatten()
                .filter(|a| a.type_ == "InternalIP")
                .map(|a| a.address.clone())
                .collect(),
        }
    }
}

/// Nodes: only a change in [`NodeFacts`], a new Node or a deleted one.
impl MarkedFacts for Node {
    type Facts = NodeFacts;
    fn facts(&self) -> Self::Facts {
        NodeFacts::of(self)
    }
    fn mark(dirty: &mut Dirty) {
        dirty.nodes = true;
    }
}

pub(super) type NodeMarker = FactsMarker<Node>;
/// Pools and advertisements: the configuration.
pub(super) type ConfigMarker<K> = FactsMarker<K>;

impl Watch {
    /// One reflector: a watch with kube's default backoff feeding a store; every event marks
    /// what it touches through `marker` (after the store has it), then rings the bell.
    /// Errors are logged; the watcher retries and the cache in force stays.
    pub(super) fn reflect<K>(
        &self,
        api: Api<K>,
        config: watcher::Config,
        mut marker: impl Marker<K>,
    ) -> Store<K>
    where
        K: Reflected,
    {
        let (reader, writer) = reflector::store();
        // The stores keep only what the speaker reads ([`Slim`]): they hold every Service
        // and slice of the cluster.
        let stream = reflector::reflector(
            writer,
            watcher(api, config).default_backoff().modify(Slim::slim),
        );
        let bell = Arc::clone(&self.bell);
        let counters = self.counters.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        if matches!(
                            event,
                            watcher::Event::Apply(_)
                                | watcher::Event::Delete(_)
                                | watcher::Event::InitApply(_)
                        ) {
                            counters.count_update();
                        }
                        bell.mark(|dirty| marker.mark(&event, dirty));
                    }
                    Err(e) => warn!(
                        event = "k8s_watch_error",
                        kind = %K::kind(&()),
                        error = %e,
                        "watch failed; retrying, the cache in force stays"
                    ),
                }
            }
        });
        reader
    }

    /// The speaker Pods' store (every Pod of the namespace; the translation applies
    /// `--ml-labels`): watched where the role allows it, otherwise listed every
    /// [`POD_POLL`]. MetalLB's speaker role grants `list` and `get` on Pods but not `watch`
    /// (MetalLB lists them at start and then every few minutes), so the first watch refused
    /// (403) turns this store into the poll for good. A change marks the peers either way.
    pub(super) fn pods<K>(&self, api: Api<K>) -> Store<K>
    where
        K: Reflected,
    {
        let (reader, mut writer) = reflector::store();
        let bell = Arc::clone(&self.bell);
        let counters = self.counters.clone();
        tokio::spawn(async move {
            if may_watch(&api).await {
                watch_until_refused(&api, &mut writer, &bell, &counters).await;
                info!(
                    event = "pod_watch_refused",
                    every = ?POD_POLL,
                    "the speaker Pods' watch was refused: listing them instead"
                );
            } else {
                info!(
                    event = "pod_list_polled",
                    every = ?POD_POLL,
                    "the role may list speaker Pods but not watch them (MetalLB's): listing them"
                );
            }
            poll(api, writer, bell, counters).await;
        });
        reader
    }
}

/// Whether this speaker may watch `api`'s objects, as the API server answers a
/// SelfSubjectAccessReview (every authenticated user may ask). Asking first keeps a refused
/// watch, and kube's warning about it, out of the log; an error answers no.
async fn may_watch<K>(api: &Api<K>) -> bool
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: api.namespace().map(str::to_string),
                verb: Some("watch".into()),
                group: Some(K::group(&()).into_owned()),
                resource: Some(K::plural(&()).into_owned()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let reviews: Api<SelfSubjectAccessReview> = Api::all(api.clone().into_client());
    match reviews.create(&PostParams::default(), &review).await {
        Ok(answer) => answer.status.is_some_and(|s| s.allowed),
        Err(e) => {
            let code = match &e {
                kube::Error::Api(status) => status.code.to_string(),
                _ => "none".into(),
            };
            info!(
                event = "access_review_failed",
                code, "could not ask whether Pods may be watched"
            );
            false
        }
    }
}

/// Feeds `writer` from a watch until the API server refuses the watch itself (403); other
/// errors are logged and retried with kube's default backoff, the cache in force staying.
async fn watch_until_refused<K>(
    api: &Api<K>,
    writer: &mut Writer<K>,
    bell: &Bell,
    counters: &SourceCounters,
) where
    K: Reflected,
{
    let stream = watcher(api.clone(), watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                let event = event.modify(Slim::slim);
                writer.apply_watcher_event(&event);
                match event {
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) => {
                        counters.count_update();
                        bell.mark(|dirty| dirty.peers = true);
                    }
                    watcher::Event::InitApply(_) => counters.count_update(),
                    watcher::Event::InitDone => bell.mark(|dirty| dirty.peers = true),
                    watcher::Event::Init => {}
                }
            }
            Err(watcher::Error::WatchStartFailed(kube::Error::Api(e))) if e.code == 403 => return,
            Err(e) => warn!(
                event = "k8s_watch_error",
                kind = %K::kind(&()),
                error = %e,
                "watch failed; retrying, the cache in force stays"
            ),
        }
    }
}

/// Lists every [`POD_POLL`] into `writer`. A failed list keeps the last one; a changed list
/// marks the peers.
async fn poll<K>(api: Api<K>, mut writer: Writer<K>, bell: Arc<Bell>, counters: SourceCounters)
where
    K: Reflected,
{
    let mut poll = tokio::time::interval(POD_POLL);
    let mut last_versions: Option<Vec<Option<String>>> = None;
    loop {
        poll.tick().await;
        match api.list(&kube::api::ListParams::default()).await {
            Ok(list) => {
                let versions = list
                    .items
                    .iter()
                    .map(|o| o.meta().resource_version.clone())
                    .collect();
                if last_versions.as_ref() == Some(&versions) {
                    continue;
                }
                last_versions = Some(versions);
                writer.apply_watcher_event(&watcher::Event::Init);
                for mut object in list.items {
                    counters.count_update();
                    object.slim();
                    writer.apply_watcher_event(&watcher::Event::InitApply(object));
                }
                writer.apply_watcher_event(&watcher::Event::InitDone);
                bell.mark(|dirty| dirty.peers = true);
            }
            Err(e) => warn!(
                event = "k8s_list_error",
                kind = %K::kind(&()),
                error = %e,
                "list failed; the last one stays"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(labels: serde_json::Value, addresses: &str, assigned: i64) -> IPAddressPool {
        let mut pool: IPAddressPool = serde_json::from_value(json!({
            "metadata": {"name": "lab", "namespace": "metallb-system", "labels": labels,
                "resourceVersion": assigned.to_string(),
                "managedFields": [{"manager": "controller", "operation": "Update"}]},
            "spec": {"addresses": [addresses]},
            "status": {"assignedIPv4": assigned, "availableIPv4": 256 - assigned}
        }))
        .unwrap();
        pool.slim();
        pool
    }

    fn marks(
        marker: &mut FactsMarker<IPAddressPool>,
        event: watcher::Event<IPAddressPool>,
    ) -> bool {
        let mut dirty = Dirty::default();
        marker.mark(&event, &mut dirty);
        dirty.config
    }

    #[test]
    fn a_pool_marks_the_configuration_only_when_its_labels_or_spec_change() {
        let mut marker = FactsMarker::default();
        let labels = json!({"zone": "a"});
        marker.mark(&watcher::Event::Init, &mut Dirty::default());
        marker.mark(
            &watcher::Event::InitApply(pool(labels.clone(), "198.18.0.0/24", 0)),
            &mut Dirty::default(),
        );
        assert!(marks(&mut marker, watcher::Event::InitDone));
        // The controller's counts, one write per allocated IP: not the configuration.
        for assigned in 1..5 {
            let p = pool(labels.clone(), "198.18.0.0/24", assigned);
            assert!(!marks(&mut marker, watcher::Event::Apply(p)));
        }
        let relabelled = pool(json!({"zone": "b"}), "198.18.0.0/24", 5);
        assert!(marks(
            &mut marker,
            watcher::Event::Apply(relabelled.clone())
        ));
        assert!(!marks(&mut marker, watcher::Event::Apply(relabelled)));
        let respecced = pool(json!({"zone": "b"}), "198.18.1.0/24", 5);
        assert!(marks(&mut marker, watcher::Event::Apply(respecced.clone())));
        assert!(marks(
            &mut marker,
            watcher::Event::Delete(respecced.clone())
        ));
        // Back after its deletion: a new pool, whatever its content.
        assert!(marks(&mut marker, watcher::Event::Apply(respecced)));
    }

    #[test]
    fn the_speaker_keeps_no_pool_status() {
        assert_eq!(pool(json!({}), "198.18.0.0/24", 7).status, None);
    }
}
