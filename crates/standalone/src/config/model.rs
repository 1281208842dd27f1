//! The validated configuration, and its split into what the speaker takes: the restart-only
//! [`StaticSettings`] and the runtime [`DesiredState`].

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;
use vigil_gossip::Profile;
use vigil_lb::NodeMeta;
use vigil_speaker::model::{
    ArpSysctls, DesiredState, GossipSettings, InterfaceSelection, LocalAddressSettings,
    ServiceSpec, StaticSettings,
};

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// This node.
    pub node: NodeConfig,
    /// Gossip settings.
    pub gossip: GossipConfig,
    /// Interfaces to answer on: only these names (if set), and never these globs (MetalLB's
    /// exclude list if unset).
    pub interfaces: InterfacesConfig,
    /// Election options beyond MetalLB.
    pub election: ElectionConfig,
    /// Periodic gratuitous announcements, if any.
    pub refresh: Option<Duration>,
    /// The device the owner puts its VIPs on, so the host accepts traffic to them; `None`:
    /// the VIPs are answered for but not held (the operator binds services otherwise).
    pub local_address: Option<LocalAddressConfig>,
    /// Where `/metrics`, `/healthz`, `/readyz` and `/status` are served; `None` for nowhere.
    pub http_listen: Option<SocketAddr>,
    /// The services, in file order.
    pub services: Vec<ServiceConfig>,
}

/// This node's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// Its gossip name.
    pub name: String,
    /// Labels for services' node selectors, published in gossip metadata.
    pub labels: BTreeMap<String, String>,
}

/// Gossip settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GossipConfig {
    /// UDP and TCP address.
    pub bind: SocketAddr,
    /// The address peers should use.
    pub advertise: Option<SocketAddr>,
    /// Seeds as Go's `Join` takes them (`host[:port]`).
    pub seeds: Vec<String>,
    /// Timing profile (`fast` by default).
    pub profile: Profile,
    /// Keyring file, if gossip is encrypted.
    pub keyring_file: Option<PathBuf>,
    /// Cluster label.
    pub label: String,
    /// How often seeds that are not live members are joined again (partition heal).
    pub rejoin_interval: Duration,
}

/// Interface selection.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InterfacesConfig {
    /// Only these names, if set.
    pub include: Option<BTreeSet<String>>,
    /// Never these globs; MetalLB's defaults if unset.
    pub exclude: Option<Vec<String>>,
}

/// Election options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElectionConfig {
    /// Fail-back hold-down.
    pub hold_down: Option<Duration>,
    /// Split-brain guard: the cluster's expected size.
    pub expected_members: Option<usize>,
}

/// `announce.local_address` and its companion `announce.arp_sysctls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAddressConfig {
    /// The device (e.g. `lo`, or a dummy device) that holds the VIPs this node owns.
    pub device: String,
    /// What to do about the kernel's ARP settings.
    pub arp_sysctls: ArpSysctlsMode,
}

/// How `announce.arp_sysctls` treats `arp_ignore`/`arp_announce`, without which a host that
/// still holds a VIP (its speaker crashed) would answer ARP for it beside the new owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArpSysctlsMode {
    /// Set `arp_ignore=1` and `arp_announce=2` on `all` and the announcing interfaces at start.
    #[default]
    Set,
    /// Touch nothing; refuse to start unless the values in force are already that strict.
    Check,
}

/// One service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceConfig {
    /// Unique name.
    pub name: String,
    /// VIPs, IPv4-mapped IPv6 spellings turned into IPv4.
    pub vips: Vec<IpAddr>,
    /// Only these nodes may answer, if set.
    pub nodes: Option<BTreeSet<String>>,
    /// Labels a node must carry.
    pub node_selector: BTreeMap<String, String>,
    /// Only these interfaces, if set.
    pub interfaces: Option<BTreeSet<String>>,
    /// The health check that makes this node a candidate.
    pub health_check: Option<HealthCheck>,
}

/// A health check, run on every node; only nodes where it passes are candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// What to do.
    pub probe: Probe,
    /// How often.
    pub interval: Duration,
    /// How long one try may take.
    pub timeout: Duration,
    /// Consecutive passes that make a failing check pass.
    pub rise: u32,
    /// Consecutive failures that make a passing check fail.
    pub fall: u32,
}

/// The probe of a health check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A TCP connection is accepted.
    Tcp(String),
    /// An HTTP GET answers 2xx.
    Http {
        /// `host:port` to connect to.
        authority: String,
        /// The request path.
        path: String,
    },
    /// A program exits 0.
    Command(Vec<String>),
}

impl Config {
    /// service failing, and the hold-down flag.
    pub(super) fn largest_meta(&self) -> NodeMeta {
        NodeMeta {
            labels: self.node.labels.clone(),
            failing: self
                .services
                .iter()
                .filter(|s| s.health_check.is_some())
                .map(|s| s.name.clone())
                .collect(),
            holding: self.election.hold_down.is_some(),
        }
    }

    /// The restart-only part, as the speaker takes it.
    pub fn settings(&self) -> StaticSettings {
        StaticSettings {
            node_name: self.node.name.clone(),
            gossip: GossipSettings {
                bind: self.gossip.bind,
                advertise: self.gossip.advertise,
                profile: self.gossip.profile,
                label: self.gossip.label.clone(),
                rejoin_interval: self.gossip.rejoin_interval,
                tuning: None,
            },
            interfaces: InterfaceSelection {
                include: self.interfaces.include.clone(),
                exclude: self.interfaces.exclude.clone(),
                exclude_matching: None,
            },
            local_address: self.local_address.as_ref().map(|l| LocalAddressSettings {
                device: l.device.clone(),
                arp_sysctls: match l.arp_sysctls {
                    ArpSysctlsMode::Set => ArpSysctls::Set,
                    ArpSysctlsMode::Check => ArpSysctls::Check,
                },
            }),
            http_listen: self.http_listen,
            probe_listen: None,
            hold_down: self.election.hold_down,
            refresh: self.refresh,
            // The announcer's default pacing (the file has no setting for it).
            ..StaticSettings::new(&self.node.name, self.gossip.bind)
        }
    }

    /// The runtime part, as one snapshot for the speaker.
    pub fn desired(&self) -> DesiredState {
        DesiredState {
            services: self
                .services
                .iter()
                .map(|s| ServiceSpec {
                    id: s.name.clone(),
                    vips: s.vips.clone(),
                    nodes: s.nodes.clone().map(std::sync::Arc::new),
                    node_selector: s.node_selector.clone(),
                    health_checked: s.health_check.is_some(),
                    interfaces: s.interfaces.clone(),
                    preferences: Default::default(),
                })
                .collect(),
            expected_members: self.election.expected_members,
            seeds: self.gossip.seeds.clone(),
            labels: self.node.labels.clone(),
            shared_vips: Default::default(),
        }
    }

    /// The checked services and their checks.
    pub fn health_checks(&self) -> BTreeMap<String, HealthCheck> {
        self.services
            .iter()
            .filter_map(|s| s.health_check.clone().map(|h| (s.name.clone(), h)))
            .collect()
    }
}
