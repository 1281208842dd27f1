//! The reflectors, each marking what its events touch in one shared [`Dirty`] set and then
//! ringing one bell: the builder learns *which* Services changed, not only that something did.
//!
//! - A Service event marks that Service; an EndpointSlice event marks the slice with the
//!   Service it names now (the builder keeps the slice→Service index and also marks the
//!   Service it named before).
//! - A Node event marks the Nodes only when something the translation reads changed
//!   ([`NodeFacts`]: labels, the `NetworkUnavailable` condition, `InternalIP`s); kubelet
//!   heartbeats, images and `managedFields` change none of these.
//! - IPAddressPools and L2Advertisements mark the configuration; speaker Pods the peers.
//! - A relist (a watch restarted: `InitDone`) marks `relisted`: everything is translated
//!   again and then checked against a whole translation.

use super::dirty::{Bell, Dirty, SliceMove};
use super::slim::Slim;
use crate::translate::{network_unavailable, service_id, slice_service};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;
use vigil_speaker::observe::SourceCounters;

/// How often speaker Pods are listed.
const POD_POLL: Duration = Duration::from_secs(10);

/// What every watch shares: the dirty set and its bell, and the counters
/// (`metallb_k8s_client_updates_total` counts each object seen changed or deleted).
pub(super) struct Watch {
    pub(super) bell: Arc<Bell>,
    pub(super) counters: SourceCounters,
}

/// How one kind's events mark the dirty set.
pub(super) trait Marker<K>: Send + 'static {
    fn mark(&mut self, event: &watcher::Event<K>, dirty: &mut Dirty);
}

/// Services: the Service itself.
pub(super) struct ServiceMarker;

impl Marker<Service> for ServiceMarker {
    fn mark(&mut self, event: &watcher::Event<Service>, dirty: &mut Dirty) {
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

impl Marker<EndpointSlice> for SliceMarker {
    fn mark(&mut self, event: &watcher::Event<EndpointSlice>, dirty: &mut Dirty) {
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
pub(super) fn slice_key(slice: &EndpointSlice) -> String {
    format!(
        "{}/{}",
        slice.metadata.namespace.as_deref().unwrap_or_default(),
        slice.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Pools and advertisements: the configuration.
pub(super) struct ConfigMarker;

impl<K> Marker<K> for ConfigMarker {
    fn mark(&mut self, event: &watcher::Event<K>, dirty: &mut Dirty) {
        match event {
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => dirty.config = true,
            watcher::Event::InitDone => {
                dirty.config = true;
                dirty.relisted = true;
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
#[derive(Default)]
pub(super) struct NodeMarker {
    facts: HashMap<String, NodeFacts>,
}

impl Marker<Node> for NodeMarker {
    fn mark(&mut self, event: &watcher::Event<Node>, dirty: &mut Dirty) {
        let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
        match event {
            watcher::Event::Apply(n) => {
                let facts = NodeFacts::of(n);
                if self.facts.insert(name(n), facts.clone()).as_ref() != Some(&facts) {
                    dirty.nodes = true;
                }
            }
            watcher::Event::Delete(n) => {
                self.facts.remove(&name(n));
                dirty.nodes = true;
            }
            watcher::Event::Init => self.facts.clear(),
            watcher::Event::InitApply(n) => {
                self.facts.insert(name(n), NodeFacts::of(n));
            }
            watcher::Event::InitDone => {
                dirty.nodes = true;
                dirty.relisted = true;
            }
        }
    }
}

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
        K: Resource<DynamicType = ()>
            + Slim
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
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

    /// A store filled by listing every [`POD_POLL`], not watching: MetalLB's speaker role may
    /// list speaker Pods but not watch them (MetalLB itself lists them at start and then every
    /// few minutes). A failed list keeps the last one; a changed list marks the peers.
    pub(super) fn poll_list<K>(&self, api: Api<K>) -> Store<K>
    where
        K: Resource<DynamicType = ()>
            + Slim
            + Clone
            + DeserializeOwned
            + Debug
            + Send
            + Sync
            + 'static,
    {
        let (reader, mut writer) = reflector::store();
        let bell = Arc::clone(&self.bell);
        let counters = self.counters.clone();
        tokio::spawn(async move {
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
        });
        reader
    }
}
