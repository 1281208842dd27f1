//! The pure translation from the speaker's cached Kubernetes objects to what this speaker must
//! do, decided exactly as MetalLB's speaker decides it (v0.16.2:
//! `speaker/main.go:SetBalancer` and `speaker/layer2_controller.go:ShouldAnnounce`).
//!
//! For every Service the speaker handles, [`translate`] gives the nodes MetalLB's election
//! would consider ([`Announceable::eligible_nodes`]; the speaker core intersects them with the
//! live gossip members, alive or suspect, and ranks them with [`crate::election`]), the
//! preference scores, and the interfaces *this* node would announce from. Services the
//! speaker does not handle are listed with MetalLB's reason.
//!
//! Mapping onto the speaker core's `ServiceSpec` (one obvious function, once that type is on
//! main): `id` → `id`, `vips` → `vips`, `nodes: Some(eligible_nodes)` (MetalLB never means
//! "any node": an empty set means nobody), `interfaces` → `interfaces`; MetalLB has no
//! label selector or health check of its own (those are already folded into
//! `eligible_nodes`), so `node_selector` is empty and `health_checked` false.

use crate::cached::{CachedService, CachedSlice};
use crate::config::{Config, L2Ad};
use crate::selector::Selector;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_core::Resource;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The label that excludes a node from load balancers (any value).
pub const EXCLUDE_LB_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The annotation that lets Services share an IP.
pub const ALLOW_SHARED_IP: &str = "metallb.io/allow-shared-ip";
/// Its deprecated spelling, still honoured.
pub const ALLOW_SHARED_IP_DEPRECATED: &str = "metallb.universe.tf/allow-shared-ip";

/// The objects the speaker caches. MetalLB objects and speaker Pods outside
/// [`Options::namespace`] are ignored, as MetalLB's speaker only lists its own namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cluster<'a> {
    /// Every Service.
    pub services: &'a [Service],
    /// Every EndpointSlice.
    pub endpoint_slices: &'a [EndpointSlice],
    /// Every Node.
    pub nodes: &'a [Node],
    /// Pods in the speaker namespace (filtered by [`Options::speaker_selector`] here).
    pub pods: &'a [Pod],
}

/// The speaker's settings that change the decisions.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// This node's name (`METALLB_NODE_NAME`).
    pub node_name: String,
    /// Where speaker Pods are listed: `METALLB_ML_NAMESPACE` if set, else MetalLB's namespace
    /// (`METALLB_NAMESPACE`), as the speaker's settings resolve it
    /// (`vigil_k8s::settings::SpeakerSettings::translate_options`).
    pub namespace: String,
    /// `--lb-class`: `None` handles only Services with no class.
    pub lb_class: Option<String>,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
    /// `METALLB_ML_LABELS`, parsed; `None` when memberlist is disabled (no peers to join).
    pub speaker_selector: Option<Selector>,
}

/// What this speaker must do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    /// This node.
    pub node: String,
    /// Services the speaker handles, by id.
    pub services: Vec<Announceable>,
    /// Services it does not handle, by id, with MetalLB's reason.
    pub ignored: Vec<(String, Ignored)>,
    /// Gossip peers to join.
    pub peers: Vec<Peer>,
}

/// One Service the election runs for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announceable {
    /// `namespace/name`, MetalLB's key.
    pub id: String,
    /// The ingress IPs in order (IPv4-mapped IPv6 as IPv4); the first is the election key.
    pub vips: Vec<IpAddr>,
    /// The pool containing them.
    pub pool: String,
    /// Nodes MetalLB's election would consider, before the gossip view: in a node set of an
    /// advertisement that applies, not `NetworkUnavailable`, not excluded by label, and (for
    /// `externalTrafficPolicy: Local`) hosting a servable endpoint. Empty means nobody.
    pub eligible_nodes: BTreeSet<String>,
    /// Election preference per node (summed over the applying advertisements); absent is 0.
    pub preferences: BTreeMap<String, i64>,
    /// The interfaces this node announces from, if it wins.
    pub interfaces: Interfaces,
    /// Why nobody may announce, when a rule rather than the node filters says so.
    pub nobody: Option<Nobody>,
}

impl Announceable {
    /// The election key: the first VIP.
    pub fn key(&self) -> IpAddr {
        self.vips[0]
    }
}

/// Interfaces to announce from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interfaces {
    /// Every interface (some applying advertisement names none).
    All,
    /// Only these (the union over the applying advertisements that select this node).
    Only(BTreeSet<String>),
}

impl Interfaces {
    /// MetalLB's `MatchInterfaces`: whether any of the node's interfaces may announce. When
    /// not, MetalLB's winner emits `announceFailed` and does not announce the IP (and nobody
    /// else does either: the election is not rerun).
    pub fn usable_on<'a>(&self, node_interfaces: impl IntoIterator<Item = &'a str>) -> bool {
        match self {
            Self::All => true,
            Self::Only(set) => node_interfaces.into_iter().any(|i| set.contains(i)),
        }
    }
}

/// A rule by which nobody announces a handled Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nobody {
    /// No endpoint in any slice can serve (`notOwner`, before anything else).
    NoServableEndpoint,
    /// The Service has `allow-shared-ip` and an applying advertisement has
    /// serviceSelectors (`sharedIPWithServiceSelector`).
    SharedIpWithServiceSelector,
    /// No advertisement of the pool applies to the Service (`noMatchingAdvertisement`).
    NoAdvertisement,
}

/// Why the speaker does not handle a Service (MetalLB withdraws it, or never looks at it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ignored {
    /// Its `loadBalancerClass` is not this speaker's (MetalLB skips it entirely).
    OtherClass,
    /// Not `type: LoadBalancer` (`notLoadBalancer`).
    NotLoadBalancer,
    /// No ingress IP yet (`noIPAllocated`).
    NoIpAllocated,
    /// An ingress entry without a valid IP (`invalidIP`).
    InvalidIp(String),
    /// No pool contains all its IPs (`ipNotAllowed`).
    IpNotAllowed,
}

/// A gossip peer to join.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    /// Its address (the gossip port is the configured one, as in MetalLB).
    pub addr: IpAddr,
    /// The node it runs on, if known (lets the caller skip itself).
    pub node: Option<String>,
    /// Where the address came from.
    pub source: PeerSource,
}

/// Where a peer address came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PeerSource {
    /// A speaker Pod's `status.podIP` (MetalLB's only source).
    PodIp,
    /// vigil: the `InternalIP` of the node a hostNetwork speaker Pod is scheduled on, known
    /// before the Pod reports its IP.
    NodeInternalIp,
}

/// Decides, for this node, every Service under `config` (the last configuration accepted).
/// Each Service's slices are found through one index built here (by namespace and the
/// `kubernetes.io/service-name` label), never by scanning every slice per Service.
pub fn translate(config: &Config, cluster: &Cluster<'_>, opts: &Options) -> NodeView {
    let nodes = node_map(cluster.nodes);
    let services: Vec<CachedService> = cluster.services.iter().map(Into::into).collect();
    let slices: Vec<CachedSlice> = cluster.endpoint_slices.iter().map(Into::into).collect();
    let mut by_service: HashMap<(&str, &str), Vec<&CachedSlice>> = HashMap::new();
    for slice in &slices {
        if let Some(key) = slice_service(slice) {
            by_service.entry(key).or_default().push(slice);
        }
    }
    let mut view = NodeView {
        node: opts.node_name.clone(),
        ..NodeView::default()
    };
    let mut services: Vec<&CachedService> = services.iter().collect();
    // By `namespace/name` as a string, as MetalLB lists them.
    services.sort_by_cached_key(|s| service_id(*s));
    for svc in services {
        let slices = by_service
            .get(&service_key(svc))
            .map_or(&[][..], Vec::as_slice);
        match translate_service(config, svc, slices, &nodes, opts) {
            Ok(a) => view.services.push(a),
            Err(why) => view.ignored.push((service_id(svc), why)),
        }
    }
    view.peers = peers(cluster.pods, &nodes, opts);
    view
}

/// Nodes by name, as [`translate_service`] and [`peers`] take them.
pub fn node_map<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> BTreeMap<&'a str, &'a Node> {
    nodes
        .into_iter()
        .filter_map(|n| Some((n.metadata.name.as_deref()?, n)))
        .collect()
}

/// A Service's `namespace/name`, MetalLB's key and the speaker's service id (of a whole
/// Service or a cached one).
pub fn service_id(svc: &impl Resource) -> String {
    let (ns, name) = service_key(svc);
    format!("{ns}/{name}")
}

fn service_key(svc: &impl Resource) -> (&str, &str) {
    (
        svc.meta().namespace.as_deref().unwrap_or_default(),
        svc.meta().name.as_deref().unwrap_or_default(),
    )
}

/// The Service an EndpointSlice belongs to (namespace, `kubernetes.io/service-name`), if
/// it names one.
pub fn slice_service(slice: &CachedSlice) -> Option<(&str, &str)> {
    Some((
        slice.metadata.namespace.as_deref().unwrap_or_default(),
        slice.service.as_deref()?,
    ))
}

/// Decides one Service for this node: `slices` are its EndpointSlices (those whose
/// [`slice_service`] is this Service; others are not read), `nodes` every Node by name.
/// The answer is the one [`translate`] gives for it.
pub fn translate_service(
    config: &Config,
    svc: &CachedService,
    slices: &[&CachedSlice],
    nodes: &BTreeMap<&str, &Node>,
    opts: &Options,
) -> Result<Announceable, Ignored> {
    let mut a = handle(config, slices, nodes, opts, svc)?;
    a.id = service_id(svc);
    Ok(a)
}

fn handle(
    config: &Config,
    slices: &[&CachedSlice],
    nodes: &BTreeMap<&str, &Node>,
    opts: &Options,
    svc: &CachedService,
) -> Result<Announceable, Ignored> {
    // speaker's ServiceReconciler: filterByLoadBalancerClass.
    let flag = opts.lb_class.as_deref().unwrap_or_default();
    if svc.load_balancer_class.as_deref().unwrap_or_default() != flag
        || (svc.load_balancer_class.is_none() && !flag.is_empty())
    {
        return Err(Ignored::OtherClass);
    }
    if !svc.load_balancer {
        return Err(Ignored::NotLoadBalancer);
    }
    if svc.ingress_ips.is_empty() {
        return Err(Ignored::NoIpAllocated);
    }
    let mut vips = Vec::new();
    for text in &svc.ingress_ips {
        let ip = crate::addr::parse_ip(text).ok_or_else(|| Ignored::InvalidIp(text.clone()))?;
        vips.push(ip.to_canonical());
    }
    let pool = config.pool_for(&vips).ok_or(Ignored::IpNotAllowed)?;

    let no_labels = BTreeMap::new();
    let labels = svc.metadata.labels.as_ref().unwrap_or(&no_labels);
    let ads: Vec<&L2Ad> = pool
        .l2_advertisements
        .iter()
        .filter(|ad| ad.selects_service(labels))
        .collect();
    let mine: Vec<&L2Ad> = ads
        .iter()
        .copied()
        .filter(|ad| ad.nodes.contains(&opts.node_name))
        .collect();
    let interfaces = if mine.is_empty() || mine.iter().any(|ad| ad.all_interfaces()) {
        Interfaces::All
    } else {
        Interfaces::Only(
            mine.iter()
                .flat_map(|ad| ad.interfaces.iter().cloned())
                .collect(),
        )
    };
    let mut preferences: BTreeMap<String, i64> = BTreeMap::new();
    for ad in &ads {
        for (node, w) in &ad.preferred_nodes {
            *preferences.entry(node.clone()).or_default() += w;
        }
    }
    let mut out = Announceable {
        id: String::new(),
        vips,
        pool: pool.name.clone(),
        eligible_nodes: BTreeSet::new(),
        preferences,
        interfaces,
        nobody: None,
    };

    // Step 1: some endpoint anywhere must be able to serve.
    let servable = || {
        slices
            .iter()
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.can_serve)
    };
    if servable().next().is_none() {
        out.nobody = Some(Nobody::NoServableEndpoint);
        return Ok(out);
    }
    // Step 3: allow-shared-ip is incompatible with serviceSelectors.
    if svc.shares_ip() && ads.iter().any(|ad| !ad.service_selectors.is_empty()) {
        out.nobody = Some(Nobody::SharedIpWithServiceSelector);
        return Ok(out);
    }
    if ads.is_empty() {
        out.nobody = Some(Nobody::NoAdvertisement);
        return Ok(out);
    }
    // Step 5: the node filters (the gossip view is the caller's).
    let mut eligible: BTreeSet<String> = ads
        .iter()
        .flat_map(|ad| ad.nodes.iter())
        .filter(|n| {
            let node = nodes.get(n.as_str()).copied();
            !network_unavailable(node) && (opts.ignore_exclude_lb || !excluded(node))
        })
        .cloned()
        .collect();
    // Step 6: Local policy keeps nodes hosting a servable endpoint.
    if svc.local_traffic {
        let hosting: BTreeSet<&str> = servable().filter_map(|e| e.node_name.as_deref()).collect();
        eligible.retain(|n| hosting.contains(n.as_str()));
    }
    out.eligible_nodes = eligible;
    Ok(out)
}

/// MetalLB's `EndpointCanServe`: ready unset or true, or serving true (terminating endpoints
/// that still serve count; `terminating` itself is not read).
pub fn can_serve(ready: Option<bool>, serving: Option<bool>) -> bool {
    ready.is_none_or(|r| r) || serving == Some(true)
}

/// The node's first `NetworkUnavailable` condition is `True`.
pub fn network_unavailable(node: Option<&Node>) -> bool {
    node.and_then(|n| n.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "NetworkUnavailable"))
        .is_some_and(|c| c.status == "True")
}

/// The node carries the exclude-from-external-load-balancers label.
pub fn excluded(node: Option<&Node>) -> bool {
    node.and_then(|n| n.metadata.labels.as_ref())
        .is_some_and(|l| l.contains_key(EXCLUDE_LB_LABEL))
}

/// The gossip peers: speaker Pods in [`Options::namespace`] matching
/// [`Options::speaker_selector`], by Pod IP and, for a hostNetwork Pod, its node's
/// `InternalIP`s.
pub fn peers<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    nodes: &BTreeMap<&str, &Node>,
    opts: &Options,
) -> Vec<Peer> {
    let Some(selector) = &opts.speaker_selector else {
        return Vec::new();
    };
    let mut out: BTreeMap<IpAddr, Peer> = BTreeMap::new();
    let no_labels = BTreeMap::new();
    for pod in pods {
        if pod.metadata.namespace.as_deref().unwrap_or_default() != opts.namespace {
            continue;
        }
        if !selector.matches(pod.metadata.labels.as_ref().unwrap_or(&no_labels)) {
            continue;
        }
        let spec = pod.spec.as_ref();
        let node = spec.and_then(|s| s.node_name.clone());
        if let Some(ip) = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(crate::addr::parse_ip)
        {
            let ip = ip.to_canonical();
            out.entry(ip).or_insert(Peer {
                addr: ip,
                node: node.clone(),
                source: PeerSource::PodIp,
            });
        }
        let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
        let Some(n) = node.as_deref().and_then(|n| nodes.get(n)) else {
            continue;
        };
        if !host_network {
            continue;
        }
        for a in n
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
        {
            if let Some(ip) = crate::addr::parse_ip(&a.address) {
                let ip = ip.to_canonical();
                out.entry(ip).or_insert(Peer {
                    addr: ip,
                    node: node.clone(),
                    source: PeerSource::NodeInternalIp,
                });
            }
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_can_serve_truth_table() {
        // `terminating` is not read: a terminating endpoint that still serves can serve.
        assert!(can_serve(None, None));
        assert!(can_serve(Some(true), Some(false)));
        assert!(can_serve(Some(false), Some(true)));
        assert!(!can_serve(Some(false), None));
        assert!(!can_serve(Some(false), Some(false)));
    }

    #[test]
    fn interfaces_usable_as_match_interfaces() {
        assert!(Interfaces::All.usable_on([]));
        let only = Interfaces::Only(["eth1".to_string()].into());
        assert!(only.usable_on(["eth0", "eth1"]));
        assert!(!only.usable_on(["eth0"]));
    }
}
