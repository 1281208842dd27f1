//! The keyed source without a cluster, for the benchmark (`examples/speaker_path.rs`) and
//! tests: stores filled by hand, each event applied to its store and marked as a watch
//! would, then one builder step. Also the whole-snapshot path the keyed one replaced, for
//! comparison.

use super::dirty::Bell;
use super::keyed::Builder;
use super::slim::Slim;
use super::watch::{ConfigMarker, Marker, NodeMarker, PeerMarker, ServiceMarker, SliceMarker};
use super::{Shared, Stores, desired_state};
use crate::cached::{CachedService, CachedSlice};
use crate::crd::{IPAddressPool, L2Advertisement};
use crate::translate::{Options, node_map, peers, slice_service, translate_service};
use crate::{Config, ConfigTracker};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher::Event;
use std::sync::Arc;
use vigil_speaker::model::{DesiredState, ServiceChanges, SharedVips};
use vigil_speaker::observe::SourceCounters;

fn cloned<K: Clone>(objects: Vec<Arc<K>>) -> Vec<K> {
    objects.iter().map(|o| (**o).clone()).collect()
}

/// A keyed source over stores filled by hand (each object slimmed or cached as the
/// reflectors keep it).
pub struct KeyedBench {
    builder: Builder,
    services: Writer<CachedService>,
    slices: Writer<CachedSlice>,
    nodes: Writer<Node>,
    node_marker: NodeMarker,
}

fn fill<K>(writer: &mut Writer<K>, objects: Vec<K>, marker: &mut impl Marker<K>, bell: &Bell)
where
    K: kube::Resource<DynamicType = ()> + Slim + Clone,
{
    let mut events = vec![Event::Init];
    events.extend(objects.into_iter().map(|mut o| {
        o.slim();
        Event::InitApply(o)
    }));
    events.push(Event::InitDone);
    for e in &events {
        writer.apply_watcher_event(e);
        bell.mark(|d| marker.mark(e, d));
    }
}

impl KeyedBench {
    /// Stores holding these objects, listed once, and the first (whole) desired state.
    pub fn new(
        options: Options,
        pools: Vec<IPAddressPool>,
        ads: Vec<L2Advertisement>,
        nodes: Vec<Node>,
        services: Vec<Service>,
        slices: Vec<EndpointSlice>,
        pods: Vec<Pod>,
    ) -> (Self, DesiredState) {
        let bell = Arc::new(Bell::default());
        let (pools_r, mut pools_w) = reflector::store();
        let (ads_r, mut ads_w) = reflector::store();
        let (services_r, mut services_w) = reflector::store();
        let (slices_r, mut slices_w) = reflector::store();
        let (nodes_r, mut nodes_w) = reflector::store();
        let (pods_r, mut pods_w) = reflector::store();
        let mut node_marker = NodeMarker::default();
        fill(&mut pools_w, pools, &mut ConfigMarker::default(), &bell);
        fill(&mut ads_w, ads, &mut ConfigMarker::default(), &bell);
        let services = services.iter().map(CachedService::from).collect();
        let slices = slices.iter().map(CachedSlice::from).collect();
        fill(&mut services_w, services, &mut ServiceMarker, &bell);
        fill(&mut slices_w, slices, &mut SliceMarker, &bell);
        fill(&mut nodes_w, nodes, &mut node_marker, &bell);
        fill(&mut pods_w, pods, &mut PeerMarker, &bell);
        let mut builder = Builder {
            stores: Stores {
                pools: pools_r,
                ads: ads_r,
                services: services_r,
                slices: slices_r,
                nodes: nodes_r,
                pods: pods_r,
            },
            options,
            gossip_port: crate::settings::DEFAULT_ML_PORT,
            tracker: ConfigTracker::new(),
            state: None,
            written: None,
            shared: Shared::default(),
            counters: SourceCounters::default(),
            bell,
            slice_owner: Default::default(),
            slices_of: Default::default(),
            sent: Default::default(),
            seeds: Vec::new(),
            majority_guard: false,
            expected_members: None,
            refused: false,
        };
        let initial = builder.initial();
        let bench = Self {
            builder,
            services: services_w,
            slices: slices_w,
            nodes: nodes_w,
            node_marker,
        };
        (bench, initial)
    }

    fn step(&mut self) -> ServiceChanges {
        let dirty = self.builder.bell.take();
        self.builder.apply(dirty)
    }

    /// A Service created or changed, as its watch event: the keyed changes.
    pub fn apply_service(&mut self, svc: Service) -> ServiceChanges {
        let e = Event::Apply(CachedService::from(&svc));
        self.services.apply_watcher_event(&e);
        self.builder.bell.mark(|d| ServiceMarker.mark(&e, d));
        self.step()
    }

    /// A Service deleted.
    pub fn delete_service(&mut self, svc: Service) -> ServiceChanges {
        let e = Event::Delete(CachedService::from(&svc));
        self.services.apply_watcher_event(&e);
        self.builder.bell.mark(|d| ServiceMarker.mark(&e, d));
        self.step()
    }

    /// An EndpointSlice created or changed.
    pub fn apply_slice(&mut self, slice: EndpointSlice) -> ServiceChanges {
        let e = Event::Apply(CachedSlice::from(&slice));
        self.slices.apply_watcher_event(&e);
        self.builder.bell.mark(|d| SliceMarker.mark(&e, d));
        self.step()
    }

    /// An EndpointSlice deleted.
    pub fn delete_slice(&mut self, slice: EndpointSlice) -> ServiceChanges {
        let e = Event::Delete(CachedSlice::from(&slice));
        self.slices.apply_watcher_event(&e);
        self.builder.bell.mark(|d| SliceMarker.mark(&e, d));
        self.step()
    }

    /// A Node created or changed (a kubelet heartbeat included).
    pub fn apply_node(&mut self, node: Node) -> ServiceChanges {
        let mut node = node;
        node.slim();
        let e = Event::Apply(node);
        self.nodes.apply_watcher_event(&e);
        let marker = &mut self.node_marker;
        self.builder.bell.mark(|d| marker.mark(&e, d));
        self.step()
    }

    /// The full check: Services whose keyed state differs from a whole translation
    /// (repaired).
    pub fn check(&mut self) -> u64 {
        let mut changes = ServiceChanges::default();
        self.builder.check(&mut changes).unwrap_or(0)
    }

    /// The keyed state: what the speaker was sent, by Service id.
    pub fn keyed_state(&self) -> Vec<vigil_speaker::model::ServiceSpec> {
        self.builder.sent.specs()
    }

    /// The whole-snapshot path this source had before it was keyed: every store
    /// deep-cloned, the configuration parsed, every Service translated with its slices
    /// found by scanning every slice, then the whole desired state.
    pub fn whole_snapshot(&self) -> DesiredState {
        let stores = &self.builder.stores;
        let nodes: Vec<Node> = cloned(stores.nodes.state());
        let pools: Vec<IPAddressPool> = cloned(stores.pools.state());
        let ads: Vec<L2Advertisement> = cloned(stores.ads.state());
        let services: Vec<CachedService> = cloned(stores.services.state());
        let slices: Vec<CachedSlice> = cloned(stores.slices.state());
        let pods: Vec<Pod> = cloned(stores.pods.state());
        let Ok(config) = Config::parse(&pools, &ads, &nodes) else {
            return DesiredState::default();
        };
        let by_name = node_map(&nodes);
        let mut view = crate::translate::NodeView {
            node: self.builder.options.node_name.clone(),
            ..Default::default()
        };
        let mut sorted: Vec<&CachedService> = services.iter().collect();
        sorted.sort_by_cached_key(|s| crate::translate::service_id(*s));
        for svc in sorted {
            let key = (
                svc.metadata.namespace.as_deref().unwrap_or_default(),
                svc.metadata.name.as_deref().unwrap_or_default(),
            );
            // As before: every slice looked at for every Service.
            let mine: Vec<&CachedSlice> = slices
                .iter()
                .filter(|s| slice_service(s) == Some(key))
                .collect();
            if let Ok(a) = translate_service(&config, svc, &mine, &by_name, &self.builder.options) {
                view.services.push(a);
            }
        }
        view.peers = peers(&pods, &by_name, &self.builder.options);
        let mut desired = desired_state(&view, self.builder.gossip_port);
        desired.shared_vips = SharedVips::PerService;
        desired
    }
}
