//! What a mode hands the speaker, split by when it may change.
//!
//! - [`StaticSettings`] are read once at start: sockets, identity, announcer and host set-up.
//!   A source that sees them change (a reloaded file) warns and keeps the old ones; the whole
//!   comparison is one `!=`, so a field added here can never change silently on reload.
//! - [`DesiredState`] is everything that may change at run time: the services and their
//!   VIPs, the split-brain guard's expected size, the seeds and this node's labels. A source
//!   sends it whole (standalone: the speaker diffs snapshots itself) or, through
//!   [`DesiredUpdate::Changes`], only the services that changed (Kubernetes mode's keyed path,
//!   so a change costs the same at 5,000 Services as at 5).
//!
//! The model is mode-agnostic. The standalone YAML file is one source of it; the Kubernetes
//! source folds MetalLB's rules (L2Advertisement node selectors, excluded or unavailable
//! nodes, `externalTrafficPolicy: Local` endpoints) into [`ServiceSpec::nodes`], since every
//! speaker sees the same API objects and so computes the same set.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use vigil_gossip::Profile;

/// Settings that change only on restart. Compare two with `!=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticSettings {
    /// This node's gossip name, also the name services' node lists and the election use.
    pub node_name: String,
    /// How this node gossips.
    pub gossip: GossipSettings,
    /// Which host interfaces the announcer answers on.
    pub interfaces: InterfaceSelection,
    /// The device the owner holds its VIPs on so the kernel accepts their traffic; `None`:
    /// VIPs are answered for but not held (the operator binds services some other way).
    pub local_address: Option<LocalAddressSettings>,
    /// Where `/metrics`, `/healthz`, `/readyz` and `/status` are served; `None`: nowhere.
    pub http_listen: Option<SocketAddr>,
    /// A second address serving the same routes, for probes that ask elsewhere (MetalLB's
    /// DaemonSet asks `127.0.0.1:17472`, its `--health-probe-port`); `None`: none.
    pub probe_listen: Option<SocketAddr>,
    /// The fail-back hold-down: for this long after start, this node ranks after every
    /// settled member, so a restarted node does not pull VIPs back the moment it joins.
    /// Skipped when the first join finds no settled member (a cold start).
    pub hold_down: Option<Duration>,
    /// Period of the unsolicited gratuitous ARP / NA refresh for owned VIPs; `None`: none.
    pub refresh: Option<Duration>,
    /// The announcer's pacing of gratuitous frames, frames per second
    /// (`vigil_l2::Config::announce_rate`); `None`: unpaced.
    pub announce_rate: Option<std::num::NonZeroU32>,
}

impl StaticSettings {
    /// Node `node_name` gossiping on `bind` with the defaults both modes start from: the
    /// `fast` profile, no label, seeds joined again every 5 s, the engine tuned by the
    /// profile, MetalLB's default interface exclusions; VIPs answered for but not held, no
    /// HTTP or probe address, no hold-down, no refresh. One place for the settings a test or
    /// an embedder needs, changed with struct update syntax
    /// (`StaticSettings { hold_down, ..StaticSettings::new(node, bind) }`).
    pub fn new(node_name: &str, bind: SocketAddr) -> Self {
        Self {
            node_name: node_name.to_string(),
            gossip: GossipSettings {
                bind,
                advertise: None,
                profile: Profile::Fast,
                label: String::new(),
                rejoin_interval: Duration::from_secs(5),
                tuning: None,
            },
            interfaces: InterfaceSelection::default(),
            local_address: None,
            http_listen: None,
            probe_listen: None,
            hold_down: None,
            refresh: None,
            announce_rate: std::num::NonZeroU32::new(vigil_l2::announcer::DEFAULT_ANNOUNCE_RATE),
        }
    }

    /// The fields that differ from `other`, by path (`gossip.bind`, `hold_down`, ...), for a
    /// warning that names them. Whether anything changed is `self != other`; this only says
    /// what, and lists every field (the destructuring fails to compile when one is added).
    pub fn changed_fields(&self, other: &Self) -> Vec<&'static str> {
        let Self {
            node_name,
            gossip,
            interfaces,
            local_address,
            http_listen,
            probe_listen,
            hold_down,
            refresh,
            announce_rate,
        } = self;
        let GossipSettings {
            bind,
            advertise,
            profile,
            label,
            rejoin_interval,
            tuning,
        } = gossip;
        let mut out = Vec::new();
        let mut check = |changed: bool, field| {
            if changed {
                out.push(field);
            }
        };
        check(*node_name != other.node_name, "node_name");
        check(*bind != other.gossip.bind, "gossip.bind");
        check(*advertise != other.gossip.advertise, "gossip.advertise");
        check(*profile != other.gossip.profile, "gossip.profile");
        check(*label != other.gossip.label, "gossip.label");
        check(
            *rejoin_interval != other.gossip.rejoin_interval,
            "gossip.rejoin_interval",
        );
        check(*tuning != other.gossip.tuning, "gossip.tuning");
        check(*interfaces != other.interfaces, "interfaces");
        check(*local_address != other.local_address, "local_address");
        check(*http_listen != other.http_listen, "http_listen");
        check(*probe_listen != other.probe_listen, "probe_listen");
        check(*hold_down != other.hold_down, "hold_down");
        check(*refresh != other.refresh, "refresh");
        check(*announce_rate != other.announce_rate, "announce_rate");
        out
    }
}

/// Gossip set-up (memberlist's sockets and timing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipSettings {
    /// The UDP and TCP address gossip binds.
    pub bind: SocketAddr,
    /// The address peers are told to use, when `bind` is a wildcard or behind NAT.
    pub advertise: Option<SocketAddr>,
    /// The timing profile (`fast` is vigil's default; `lan`, `wan`, `local` are Go's).
    pub profile: Profile,
    /// The cluster label: packets with another label are dropped (memberlist's `Label`).
    pub label: String,
    /// How often seeds that are not live members are joined again, so healed partitions merge.
    pub rejoin_interval: Duration,
    /// The whole engine configuration, in place of the profile's (Kubernetes mode: MetalLB's
    /// memberlist `config.json`); `None`: the profile's.
    pub tuning: Option<vigil_gossip::Config>,
}

impl GossipSettings {
    /// The engine configuration gossip runs with: `tuning` if set, else the profile's.
    pub fn engine_config(&self) -> vigil_gossip::Config {
        self.tuning
            .clone()
            .unwrap_or_else(|| vigil_gossip::Config::profile(self.profile))
    }
}

/// Which interfaces the announcer uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InterfaceSelection {
    /// Only interfaces with these names, if set.
    pub include: Option<BTreeSet<String>>,
    /// Never interfaces matching these globs; `None`: MetalLB's default exclusions
    /// (loopback, container bridges and veths, ...).
    pub exclude: Option<Vec<String>>,
    /// Never interfaces whose name matches one of these regular expressions anywhere
    /// (MetalLB's `excludel2.yaml`, searched unanchored as Go's `MatchString`), beside
    /// `exclude`; `None` or empty: none.
    pub exclude_matching: Option<Vec<String>>,
}

/// `announce.local_address`: the owner puts each VIP it announces on this device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAddressSettings {
    /// The device (normally `lo`, or a dummy device).
    pub device: String,
    /// What to do about the kernel's ARP sysctls, which otherwise let a host that still holds
    /// a VIP (its speaker crashed) answer ARP for it beside the new owner.
    pub arp_sysctls: ArpSysctls,
}

/// How the start treats `arp_ignore` / `arp_announce`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArpSysctls {
    /// Set `arp_ignore=1` and `arp_announce=2` on `all` and the announcing interfaces.
    #[default]
    Set,
    /// Change nothing; refuse to start unless the values in force are at least that strict.
    Check,
}

/// Everything that may change at run time, as one whole snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DesiredState {
    /// The services whose VIPs are elected, each with a unique [`ServiceSpec::id`].
    pub services: Vec<ServiceSpec>,
    /// The split-brain guard: when set, a node announces nothing while it sees fewer than a
    /// majority of this many live members. `None`: MetalLB's behaviour (no guard).
    pub expected_members: Option<usize>,
    /// Gossip seeds as Go's `Join` takes them (`host[:port]`), joined at start and re-joined
    /// while they are not live members.
    pub seeds: Vec<String>,
    /// This node's labels, published in gossip metadata for services' node selectors.
    pub labels: BTreeMap<String, String>,
    /// How services that share a VIP are elected.
    pub shared_vips: SharedVips,
}

/// How services that share a VIP are elected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharedVips {
    /// Together, once, over the nodes every one of them admits: one owner answers for the
    /// VIP (standalone mode).
    #[default]
    OneOwner,
    /// Each service on its own, keyed by its own first VIP, as MetalLB's speaker does
    /// (Kubernetes mode): services sharing an IP with different candidates (`Local`
    /// services with endpoints on different nodes) may be owned by different nodes, and
    /// then both answer for the IP.
    PerService,
}

impl DesiredState {
    /// The service with this id.
    pub fn service(&self, id: &str) -> Option<&ServiceSpec> {
        self.services.iter().find(|s| s.id == id)
    }

    /// Every VIP of every service, each once.
    pub fn vips(&self) -> BTreeSet<IpAddr> {
        self.services
            .iter()
            .flat_map(|s| s.vips.iter().copied())
            .collect()
    }

    /// The ids of the services whose candidates must pass a local health check.
    pub fn health_checked(&self) -> BTreeSet<String> {
        self.services
            .iter()
            .filter(|s| s.health_checked)
            .map(|s| s.id.clone())
            .collect()
    }
}

/// A set of node names, shared by the services that have the same one.
pub type NodeSet = Arc<BTreeSet<String>>;

/// One service: VIPs and the rules for which nodes may answer for them.
///
/// Services that share a VIP are elected together (one owner, admitted by every one of them),
/// as `vigil_lb::elect` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// Unique id: the YAML service name, or `namespace/name` in Kubernetes. It appears in
    /// logs, metrics labels and gossip metadata (failing checks).
    pub id: String,
    /// The VIPs, IPv4-mapped IPv6 already turned into IPv4.
    pub vips: Vec<IpAddr>,
    /// Only these nodes may answer; `None`: any node. `Some(empty)`: none (a Kubernetes
    /// service with no servable endpoint anywhere). Shared: the Kubernetes source hands
    /// every Service with the same eligible Nodes one set, which the core then holds once
    /// too (at 100 Nodes a set is about 4.5 KiB). Equality compares contents.
    pub nodes: Option<NodeSet>,
    /// Labels a node must publish to be a candidate (standalone's label selector).
    pub node_selector: BTreeMap<String, String>,
    /// Candidates must publish a passing local health check for this service.
    pub health_checked: bool,
    /// Only announce on these interfaces; `None`: on every interface the selection allows.
    pub interfaces: Option<BTreeSet<String>>,
    /// Election preference per node, higher first, before the hash order (MetalLB's
    /// `preferredNodeSelectors` score in Kubernetes mode); absent nodes score 0.
    pub preferences: BTreeMap<String, i64>,
}

impl ServiceSpec {
    /// A service any node may answer for, on every interface, with no health check.
    pub fn new(id: impl Into<String>, vips: impl IntoIterator<Item = IpAddr>) -> Self {
        Self {
            id: id.into(),
            vips: vips.into_iter().collect(),
            nodes: None,
            node_selector: BTreeMap::new(),
            health_checked: false,
            interfaces: None,
            preferences: BTreeMap::new(),
        }
    }

    /// The election's view of it.
    pub fn to_lb(&self) -> vigil_lb::Service {
        vigil_lb::Service {
            name: self.id.clone(),
            vips: self.vips.clone(),
            nodes: self.nodes.as_deref().cloned(),
            node_selector: self.node_selector.clone(),
            health_checked: self.health_checked,
            preferences: self.preferences.clone(),
        }
    }
}

/// One change to the desired state from a source.
///
/// A source may send whole snapshots (standalone: a reloaded file) or, when it knows what
/// changed (the Kubernetes source's keyed watches), only the services that changed: the
/// speaker then elects only those again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DesiredUpdate {
    /// Everything, replacing what is in force.
    Whole(DesiredState),
    /// Only what changed; the rest stays as it is.
    Changes(ServiceChanges),
}

impl From<DesiredState> for DesiredUpdate {
    fn from(desired: DesiredState) -> Self {
        Self::Whole(desired)
    }
}

/// Services changed or gone, and new seeds, since the last update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceChanges {
    /// Services new or changed, whole (each replaces the one with its id).
    pub upserts: Vec<ServiceSpec>,
    /// Ids of services gone.
    pub removes: Vec<String>,
    /// The seeds, when they changed.
    pub seeds: Option<Vec<String>>,
}

impl ServiceChanges {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.removes.is_empty() && self.seeds.is_none()
    }
}
