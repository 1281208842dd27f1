//! The standalone configuration file: its YAML shape, and validation of the whole file into a
//! [`Config`] before anything starts. Every error names the field at fault, e.g.
//! `services[1].vips[0]: "198.18.0.300" is not an IP address`.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;
use vigil_gossip::Profile;
use vigil_lb::{MAX_META_LEN, NodeMeta};
use vigil_speaker::model::{
    ArpSysctls, DesiredState, GossipSettings, InterfaceSelection, LocalAddressSettings,
    ServiceSpec, StaticSettings,
};

/// memberlist's default port.
pub const DEFAULT_GOSSIP_PORT: u16 = 7946;
/// Where the HTTP endpoint listens unless told otherwise (MetalLB's old metrics port, on
/// loopback: `/metrics` and `vigil status` are local).
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:7472";
/// How often seeds that are not live members are joined again, by default: a healed
/// partition merges within about this long.
pub const DEFAULT_REJOIN_INTERVAL: Duration = Duration::from_secs(5);
/// The shortest `gossip.rejoin_interval` allowed: each round may open a TCP push/pull to
/// every seed that is not a live member.
pub const MIN_REJOIN_INTERVAL: Duration = Duration::from_secs(1);
/// The longest cluster label memberlist accepts.
const MAX_LABEL_LEN: usize = 255;

/// A configuration that failed validation: which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The field's path, e.g. `services[0].health_check.interval`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// The file as written. Unknown fields are errors, so a typo never passes silently.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    node: RawNode,
    gossip: Option<RawGossip>,
    #[serde(default)]
    interfaces: RawInterfaces,
    #[serde(default)]
    election: RawElection,
    #[serde(default)]
    announce: RawAnnounce,
    #[serde(default)]
    http: RawHttp,
    #[serde(default)]
    services: Vec<RawService>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGossip {
    bind: Option<String>,
    advertise: Option<String>,
    #[serde(default)]
    seeds: Vec<String>,
    profile: Option<String>,
    keyring_file: Option<PathBuf>,
    label: Option<String>,
    rejoin_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterfaces {
    include: Option<Vec<String>>,
    exclude: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawElection {
    hold_down: Option<String>,
    expected_members: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAnnounce {
    refresh: Option<String>,
    local_address: Option<String>,
    arp_sysctls: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    name: Option<String>,
    #[serde(default)]
    vips: Vec<String>,
    nodes: Option<Vec<String>>,
    #[serde(default)]
    node_selector: BTreeMap<String, String>,
    interfaces: Option<Vec<String>>,
    health_check: Option<RawHealthCheck>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHealthCheck {
    tcp: Option<String>,
    http: Option<String>,
    command: Option<Vec<String>>,
    interval: Option<String>,
    timeout: Option<String>,
    rise: Option<u32>,
    fall: Option<u32>,
}

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

/// Why a file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not YAML of the right shape.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the field and line).
        message: String,
    },
    /// Fields have bad values (every one found), or a file the configuration names cannot
    /// be used.
    #[error("{}", .errors.iter().map(|e| format!("{}: {e}", .path.display())).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Each field and its problem.
        errors: Vec<ConfigError>,
    },
}

impl Config {
    /// Reads and validates a file, then checks the files it names ([`check_files`](Self::check_files)):
    /// what the start and a reload use. `default_name` is used when `node.name` is absent.
    pub fn load(path: &Path, default_name: Option<&str>) -> Result<Self, LoadError> {
        let config = Self::read(path, default_name)?;
        config.check_files().map_err(|e| LoadError::Invalid {
            path: path.to_owned(),
            errors: vec![e],
        })?;
        Ok(config)
    }

    /// Reads and validates a file without touching the files it names (so `vigil status -c`
    /// needs no access to the keyring).
    pub fn read(path: &Path, default_name: Option<&str>) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, default_name).map_err(|e| match e {
            ParseError::Yaml(message) => LoadError::Parse {
                path: path.to_owned(),
                message,
            },
            ParseError::Invalid(errors) => LoadError::Invalid {
                path: path.to_owned(),
                errors,
            },
        })
    }

    /// Reads the files the configuration names (the keyring file), as the start will: a
    /// missing or bad keyring is an error naming `gossip.keyring_file`. Kept apart from
    /// [`parse`](Self::parse), which reads nothing.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        if let Some(path) = &self.gossip.keyring_file {
            vigil_gossip_net::read_keyring_file(path)
                .map_err(|e| bad("gossip.keyring_file", e.to_string()))?;
        }
        Ok(())
    }

    /// Parses and validates YAML text; pure (no file is read).
    pub fn parse(text: &str, default_name: Option<&str>) -> Result<Self, ParseError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_norway::from_str(text).map_err(|e| ParseError::Yaml(e.to_string()))?
        };
        validate(raw, default_name).map_err(ParseError::Invalid)
    }

    /// The gossip metadata this node would publish at its largest: labels, every checked
    /// service failing, and the hold-down flag.
    fn largest_meta(&self) -> NodeMeta {
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
}

impl Config {
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
                    nodes: s.nodes.clone(),
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

/// Why text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not YAML of the right shape (the message names the field and line).
    #[error("{0}")]
    Yaml(String),
    /// Fields have bad values: every one found, in file order by section.
    #[error("{}", Invalid::lines(.0))]
    Invalid(Vec<ConfigError>),
}

/// Formats a list of field errors one per line.
struct Invalid;

impl Invalid {
    fn lines(errors: &[ConfigError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Errors collected while validating, so that one pass reports every bad field.
#[derive(Debug, Default)]
struct Collected(Vec<ConfigError>);

impl Collected {
    /// The value, or `None` with its error kept.
    fn take<T>(&mut self, result: Result<T, ConfigError>) -> Option<T> {
        result.map_err(|e| self.0.push(e)).ok()
    }
}

/// Validates the whole file: each section, each service and each optional value on its own,
/// so every bad field is reported, not only the first. Pure: no file is read.
fn validate(raw: RawConfig, default_name: Option<&str>) -> Result<Config, Vec<ConfigError>> {
    let mut errors = Collected::default();
    let node = errors.take(validate_node(raw.node, default_name));
    let gossip = errors.take(validate_gossip(raw.gossip));
    let include = errors.take(
        raw.interfaces
            .include
            .map(|names| names_set("interfaces.include", names))
            .transpose(),
    );
    let exclude = errors.take(
        raw.interfaces
            .exclude
            .map(|names| names_set("interfaces.exclude", names).map(|s| s.into_iter().collect()))
            .transpose(),
    );
    let hold_down = errors.take(
        raw.election
            .hold_down
            .map(|d| positive_duration("election.hold_down", &d))
            .transpose(),
    );
    let expected_members = errors.take(match raw.election.expected_members {
        Some(0) => Err(bad(
            "election.expected_members",
            "must be at least 1 (or absent to turn the split-brain guard off)",
        )),
        n => Ok(n),
    });
    let refresh = errors.take(
        raw.announce
            .refresh
            .map(|d| refresh_interval("announce.refresh", &d))
            .transpose(),
    );
    let interfaces = InterfacesConfig {
        include: include.flatten(),
        exclude: exclude.flatten(),
    };
    let local_address = errors.take(validate_local_address(
        raw.announce.local_address,
        raw.announce.arp_sysctls,
        &interfaces,
        &raw.services,
    ));
    let http_listen = errors.take(match raw.http.listen.as_deref() {
        None => Ok(Some(DEFAULT_HTTP_LISTEN.parse().expect("a socket address"))),
        Some("" | "off") => Ok(None),
        Some(s) => s.parse().map(Some).map_err(|_| {
            bad(
                "http.listen",
                format!("{s:?} is not an address:port (or \"off\")"),
            )
        }),
    });
    let mut services = Vec::with_capacity(raw.services.len());
    let mut names = BTreeSet::new();
    for (i, s) in raw.services.into_iter().enumerate() {
        let field = format!("services[{i}]");
        // Names are unique even among services with other errors.
        if let Some(name) = &s.name
            && !names.insert(name.clone())
        {
            errors.0.push(bad(
                format!("{field}.name"),
                format!("{name:?} is used by another service"),
            ));
        }
        if let Some(service) = errors.take(validate_service(&field, s)) {
            services.push(service);
        }
    }
    let (
        Some(node),
        Some(gossip),
        Some(hold_down),
        Some(expected_members),
        Some(refresh),
        Some(local_address),
        Some(http_listen),
        [],
    ) = (
        node,
        gossip,
        hold_down,
        expected_members,
        refresh,
        local_address,
        http_listen,
        &errors.0[..],
    )
    else {
        return Err(errors.0);
    };
    let config = Config {
        node,
        gossip,
        interfaces,
        election: ElectionConfig {
            hold_down,
            expected_members,
        },
        refresh,
        local_address,
        http_listen,
        services,
    };
    let meta = config.largest_meta().encode().len();
    if meta > MAX_META_LEN {
        return Err(vec![bad(
            "node.labels",
            format!(
                "labels and health-checked service names need {meta} bytes of gossip metadata; \
                 memberlist allows {MAX_META_LEN}"
            ),
        )]);
    }
    Ok(config)
}

fn validate_node(raw: RawNode, default_name: Option<&str>) -> Result<NodeConfig, ConfigError> {
    let name = match raw.name.as_deref().or(default_name) {
        Some(n) => n.to_string(),
        None => return Err(bad("node.name", "missing (and no host name to default to)")),
    };
    check_name("node.name", &name)?;
    for (k, v) in &raw.labels {
        check_label(&format!("node.labels.{k}"), k, v)?;
    }
    Ok(NodeConfig {
        name,
        labels: raw.labels,
    })
}

fn validate_gossip(raw: Option<RawGossip>) -> Result<GossipConfig, ConfigError> {
    let raw = raw.ok_or_else(|| bad("gossip", "missing (at least gossip.bind is needed)"))?;
    let bind = match raw.bind.as_deref() {
        Some(s) => socket_addr("gossip.bind", s)?,
        None => return Err(bad("gossip.bind", "missing")),
    };
    let advertise = raw
        .advertise
        .as_deref()
        .map(|s| socket_addr("gossip.advertise", s))
        .transpose()?;
    if let Some(a) = advertise {
        if a.ip().is_unspecified() {
            return Err(bad(
                "gossip.advertise",
                format!("{a} is unspecified: give the address peers should use"),
            ));
        }
    } else if bind.ip().is_unspecified() {
        return Err(bad(
            "gossip.advertise",
            format!("missing: gossip.bind is {bind}, so peers need an address to reach us"),
        ));
    }
    for (i, seed) in raw.seeds.iter().enumerate() {
        check_seed(&format!("gossip.seeds[{i}]"), seed)?;
    }
    let profile = match raw.profile.as_deref() {
        None => Profile::Fast,
        Some(p) => p
            .parse()
            .map_err(|e: vigil_gossip::config::UnknownProfile| {
                bad("gossip.profile", e.to_string())
            })?,
    };
    let label = raw.label.unwrap_or_default();
    if label.len() > MAX_LABEL_LEN {
        return Err(bad(
            "gossip.label",
            format!("{} bytes; memberlist allows {MAX_LABEL_LEN}", label.len()),
        ));
    }
    let rejoin_interval = match raw.rejoin_interval.as_deref() {
        None => DEFAULT_REJOIN_INTERVAL,
        Some(s) => {
            let d = positive_duration("gossip.rejoin_interval", s)?;
            if d < MIN_REJOIN_INTERVAL {
                return Err(bad(
                    "gossip.rejoin_interval",
                    format!("{d:?} is too short: at least {MIN_REJOIN_INTERVAL:?}"),
                ));
            }
            d
        }
    };
    Ok(GossipConfig {
        bind,
        advertise,
        seeds: raw.seeds,
        profile,
        keyring_file: raw.keyring_file,
        label,
        rejoin_interval,
    })
}

/// Linux's rule for a device name (`dev_valid_name`): 1 to 15 bytes, not `.` or `..`, no
/// `/`, `:` or whitespace.
fn check_device_name(field: &str, name: &str) -> Result<(), ConfigError> {
    let plausible = !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if plausible {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{name:?} is not a device name (1 to 15 bytes, no '/', ':' or spaces)"),
        ))
    }
}

fn validate_local_address(
    device: Option<String>,
    sysctls: Option<String>,
    interfaces: &InterfacesConfig,
    services: &[RawService],
) -> Result<Option<LocalAddressConfig>, ConfigError> {
    let Some(device) = device else {
        if sysctls.is_some() {
            return Err(bad(
                "announce.arp_sysctls",
                "applies only with announce.local_address",
            ));
        }
        return Ok(None);
    };
    check_device_name("announce.local_address", &device)?;
    // On an announcing interface, a host whose speaker crashed would keep answering for the
    // VIP there whatever arp_ignore says (the address is on the receiving interface).
    let announced_on = interfaces
        .include
        .iter()
        .flatten()
        .chain(services.iter().flat_map(|s| s.interfaces.iter().flatten()))
        .any(|name| *name == device);
    if announced_on {
        return Err(bad(
            "announce.local_address",
            format!(
                "{device:?} is an interface VIPs are announced on: a host whose speaker \
                 stopped would keep answering for them there; use lo or a dummy device"
            ),
        ));
    }
    let arp_sysctls = match sysctls.as_deref() {
        None | Some("set") => ArpSysctlsMode::Set,
        Some("check") => ArpSysctlsMode::Check,
        Some(other) => {
            return Err(bad(
                "announce.arp_sysctls",
                format!("{other:?} is neither \"set\" nor \"check\""),
            ));
        }
    };
    Ok(Some(LocalAddressConfig {
        device,
        arp_sysctls,
    }))
}

fn validate_service(field: &str, raw: RawService) -> Result<ServiceConfig, ConfigError> {
    let name = raw
        .name
        .ok_or_else(|| bad(format!("{field}.name"), "missing"))?;
    check_name(&format!("{field}.name"), &name)?;
    if raw.vips.is_empty() {
        return Err(bad(format!("{field}.vips"), "needs at least one VIP"));
    }
    let mut vips = Vec::with_capacity(raw.vips.len());
    for (i, text) in raw.vips.iter().enumerate() {
        let f = format!("{field}.vips[{i}]");
        let ip = text
            .trim()
            .parse::<IpAddr>()
            .map_err(|_| bad(&f, format!("{text:?} is not an IP address")))?
            .to_canonical();
        if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || is_broadcast(ip) {
            return Err(bad(
                &f,
                format!("{ip} cannot be a VIP (unspecified, loopback, multicast or broadcast)"),
            ));
        }
        if vips.contains(&ip) {
            return Err(bad(&f, format!("{ip} is listed twice")));
        }
        vips.push(ip);
    }
    let nodes = raw
        .nodes
        .map(|n| {
            let set = names_set(&format!("{field}.nodes"), n)?;
            if set.is_empty() {
                return Err(bad(
                    format!("{field}.nodes"),
                    "is empty: no node could answer (remove it to allow every node)",
                ));
            }
            Ok(set)
        })
        .transpose()?;
    for (k, v) in &raw.node_selector {
        check_label(&format!("{field}.node_selector.{k}"), k, v)?;
    }
    let interfaces = raw
        .interfaces
        .map(|n| {
            let set = names_set(&format!("{field}.interfaces"), n)?;
            if set.is_empty() {
                return Err(bad(
                    format!("{field}.interfaces"),
                    "is empty: the VIP could be announced nowhere (remove it for all)",
                ));
            }
            Ok(set)
        })
        .transpose()?;
    let health_check = raw
        .health_check
        .map(|h| validate_health(&format!("{field}.health_check"), h))
        .transpose()?;
    Ok(ServiceConfig {
        name,
        vips,
        nodes,
        node_selector: raw.node_selector,
        interfaces,
        health_check,
    })
}

fn validate_health(field: &str, raw: RawHealthCheck) -> Result<HealthCheck, ConfigError> {
    let given = [raw.tcp.is_some(), raw.http.is_some(), raw.command.is_some()];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(bad(field, "give exactly one of tcp, http or command"));
    }
    let probe = if let Some(target) = raw.tcp {
        check_authority(&format!("{field}.tcp"), &target)?;
        Probe::Tcp(target)
    } else if let Some(url) = raw.http {
        parse_http_url(&format!("{field}.http"), &url)?
    } else {
        let argv = raw.command.unwrap_or_default();
        if argv.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(bad(
                format!("{field}.command"),
                "needs a program, e.g. [\"/usr/local/bin/check\", \"arg\"]",
            ));
        }
        Probe::Command(argv)
    };
    let interval = match raw.interval {
        Some(d) => positive_duration(&format!("{field}.interval"), &d)?,
        None => Duration::from_secs(1),
    };
    let timeout = match raw.timeout {
        Some(d) => positive_duration(&format!("{field}.timeout"), &d)?,
        None => interval.min(Duration::from_secs(1)),
    };
    if timeout > interval {
        return Err(bad(
            format!("{field}.timeout"),
            format!("{timeout:?} is longer than the interval ({interval:?})"),
        ));
    }
    let count = |name: &str, v: Option<u32>| match v {
        Some(0) => Err(bad(format!("{field}.{name}"), "must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(1),
    };
    Ok(HealthCheck {
        probe,
        interval,
        timeout,
        rise: count("rise", raw.rise)?,
        fall: count("fall", raw.fall)?,
    })
}

fn parse_http_url(field: &str, url: &str) -> Result<Probe, ConfigError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        bad(
            field,
            format!("{url:?} is not an http:// URL (https is not supported)"),
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // Without a port, HTTP's 80.
    let authority = if authority.parse::<SocketAddr>().is_ok()
        || (!authority.ends_with(']') && authority.matches(':').count() == 1)
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    check_authority(field, &authority)?;
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            field,
            format!("path {path:?} has spaces or control characters"),
        ));
    }
    Ok(Probe::Http {
        authority,
        path: path.to_string(),
    })
}

/// `host:port` where the port is a number; the host is resolved when the check runs.
fn check_authority(field: &str, s: &str) -> Result<(), ConfigError> {
    let ok = s.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.chars().any(char::is_whitespace) && port.parse::<u16>().is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(bad(field, format!("{s:?} is not host:port")))
    }
}

fn check_seed(field: &str, s: &str) -> Result<(), ConfigError> {
    let ok = !s.is_empty()
        && !s.chars().any(char::is_whitespace)
        && (s.parse::<SocketAddr>().is_ok()
            || s.parse::<IpAddr>().is_ok()
            || match s.split_once(':') {
                None => true,
                Some((host, port)) => {
                    !host.is_empty() && !port.contains(':') && port.parse::<u16>().is_ok()
                }
            });
    if ok {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{s:?} is not host[:port] (IPv6 with a port: [addr]:port)"),
        ))
    }
}

fn socket_addr(field: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_GOSSIP_PORT));
    }
    Err(bad(
        field,
        format!("{s:?} is not an IP address with an optional port"),
    ))
}

/// A duration as humantime writes them (`250ms`, `1.5s`, `10m`, `1h 30m`).
fn duration(field: &str, s: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        bad(
            field,
            format!("{s:?} is not a duration ({e}; try 250ms, 1.5s, 10m)"),
        )
    })
}

/// The longest `announce.refresh`: a refresh rarer than this refreshes nothing a switch or
/// neighbour cache would still hold.
const MAX_REFRESH: Duration = Duration::from_secs(3600);

fn refresh_interval(field: &str, s: &str) -> Result<Duration, ConfigError> {
    let d = positive_duration(field, s)?;
    if d > MAX_REFRESH {
        return Err(bad(
            field,
            format!(
                "{s:?} is longer than {}",
                humantime::format_duration(MAX_REFRESH)
            ),
        ));
    }
    Ok(d)
}

fn positive_duration(field: &str, s: &str) -> Result<Duration, ConfigError> {
    let d = duration(field, s)?;
    if d.is_zero() {
        return Err(bad(field, "must be longer than zero"));
    }
    Ok(d)
}

/// Names go into metric labels, logs and gossip metadata: keep them printable and simple.
fn check_name(field: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(bad(field, "is empty"));
    }
    if name.len() > 253 {
        return Err(bad(field, format!("{} bytes; at most 253", name.len())));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
    {
        return Err(bad(
            field,
            format!("{name:?} has {c:?}; use letters, digits, '-', '_', '.', '/'"),
        ));
    }
    Ok(())
}

fn check_label(field: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    check_name(field, key)?;
    if value.chars().any(|c| c.is_control()) {
        return Err(bad(
            field,
            format!("value {value:?} has control characters"),
        ));
    }
    Ok(())
}

fn names_set(field: &str, names: Vec<String>) -> Result<BTreeSet<String>, ConfigError> {
    let mut set = BTreeSet::new();
    for (i, n) in names.into_iter().enumerate() {
        let f = format!("{field}[{i}]");
        if n.trim().is_empty() || n.chars().any(char::is_whitespace) {
            return Err(bad(f, format!("{n:?} is not a name")));
        }
        if !set.insert(n.clone()) {
            return Err(bad(f, format!("{n:?} is listed twice")));
        }
    }
    Ok(set)
}

fn is_broadcast(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if v4.is_broadcast())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
node:
  name: host-a
  labels: {zone: a}
gossip:
  bind: 198.18.0.11:7946
  seeds: [198.18.0.12, "198.18.0.13:7946", "[2001:db8::13]:7946", host-c.example]
  label: prod
  rejoin_interval: 10s
interfaces:
  include: [eth0]
election:
  hold_down: 10s
  expected_members: 3
announce:
  refresh: 30s
http:
  listen: 127.0.0.1:9472
services:
  - name: web
    vips: [198.18.0.100, "2001:DB8::100"]
    health_check:
      http: http://127.0.0.1:8080/healthz
      interval: 500ms
      fall: 2
  - name: dns
    vips: ["::ffff:198.18.0.53"]
    nodes: [host-a, host-b]
    node_selector: {zone: a}
    interfaces: [eth0]
    health_check: {tcp: "127.0.0.1:53"}
  - name: db
    vips: [198.18.0.54]
    health_check: {command: [/bin/true]}
"#;

    /// The first error of the text, the files it names checked too (as `load` does).
    fn error(text: &str) -> ConfigError {
        match Config::parse(text, None).map(|c| c.check_files()) {
            Err(ParseError::Invalid(e)) => e[0].clone(),
            Ok(Err(e)) => e,
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    fn with(find: &str, replace: &str) -> String {
        assert!(GOOD.contains(find), "{find}");
        GOOD.replacen(find, replace, 1)
    }

    #[test]
    fn a_full_file_validates() {
        let c = Config::parse(GOOD, None).unwrap();
        assert_eq!(c.node.name, "host-a");
        assert_eq!(c.gossip.profile, Profile::Fast);
        assert_eq!(c.gossip.seeds.len(), 4);
        assert_eq!(c.election.hold_down, Some(Duration::from_secs(10)));
        assert_eq!(c.gossip.rejoin_interval, Duration::from_secs(10));
        assert_eq!(
            c.services[0].vips[1],
            "2001:db8::100".parse::<IpAddr>().unwrap()
        );
        // IPv4-mapped spellings become IPv4, as Go prints them.
        assert_eq!(
            c.services[1].vips[0],
            "198.18.0.53".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            c.services[0].health_check.as_ref().unwrap().probe,
            Probe::Http {
                authority: "127.0.0.1:8080".into(),
                path: "/healthz".into()
            }
        );
        assert_eq!(c.http_listen, Some("127.0.0.1:9472".parse().unwrap()));
    }

    #[test]
    fn defaults_are_filled_in() {
        let c = Config::parse("gossip: {bind: 198.18.0.11}", Some("fallback")).unwrap();
        assert_eq!(c.node.name, "fallback");
        assert_eq!(c.gossip.bind, "198.18.0.11:7946".parse().unwrap());
        assert_eq!(c.gossip.profile, Profile::Fast);
        assert_eq!(c.gossip.rejoin_interval, DEFAULT_REJOIN_INTERVAL);
        assert_eq!(c.http_listen, Some(DEFAULT_HTTP_LISTEN.parse().unwrap()));
        assert!(c.services.is_empty());
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases: &[(&str, &str, &str)] = &[
            ("name: host-a", "name: \"host a\"", "node.name"),
            ("zone: a}", "\"bad key\": a}", "node.labels.bad key"),
            ("bind: 198.18.0.11:7946", "bind: nowhere", "gossip.bind"),
            (
                "bind: 198.18.0.11:7946",
                "bind: 0.0.0.0:7946",
                "gossip.advertise",
            ),
            ("host-c.example]", "\"host c\"]", "gossip.seeds[3]"),
            ("label: prod", "profile: turbo", "gossip.profile"),
            (
                "rejoin_interval: 10s",
                "rejoin_interval: 500ms",
                "gossip.rejoin_interval",
            ),
            (
                "rejoin_interval: 10s",
                "rejoin_interval: often",
                "gossip.rejoin_interval",
            ),
            (
                "rejoin_interval: 10s",
                "rejoin_interval: 0s",
                "gossip.rejoin_interval",
            ),
            (
                "label: prod",
                "keyring_file: /nonexistent/keyring.json",
                "gossip.keyring_file",
            ),
            (
                "include: [eth0]",
                "include: [eth0, eth0]",
                "interfaces.include[1]",
            ),
            ("hold_down: 10s", "hold_down: soon", "election.hold_down"),
            ("hold_down: 10s", "hold_down: 0s", "election.hold_down"),
            (
                "expected_members: 3",
                "expected_members: 0",
                "election.expected_members",
            ),
            ("refresh: 30s", "refresh: 3 weeks", "announce.refresh"),
            (
                "refresh: 30s",
                "refresh: 30s\n  local_address: \"\"",
                "announce.local_address",
            ),
            (
                "refresh: 30s",
                "local_address: averyveryverylongname",
                "announce.local_address",
            ),
            (
                "refresh: 30s",
                "local_address: \"lo:1\"",
                "announce.local_address",
            ),
            (
                "refresh: 30s",
                "local_address: \"..\"",
                "announce.local_address",
            ),
            (
                "refresh: 30s",
                "local_address: eth0",
                "announce.local_address",
            ),
            (
                "refresh: 30s",
                "local_address: lo\n  arp_sysctls: leave",
                "announce.arp_sysctls",
            ),
            ("refresh: 30s", "arp_sysctls: check", "announce.arp_sysctls"),
            ("listen: 127.0.0.1:9472", "listen: localhost", "http.listen"),
            ("- name: web", "- name: \"\"", "services[0].name"),
            ("- name: dns", "- name: web", "services[1].name"),
            ("vips: [198.18.0.54]", "vips: []", "services[2].vips"),
            ("\"2001:DB8::100\"]", "198.18.0.300]", "services[0].vips[1]"),
            ("\"2001:DB8::100\"]", "198.18.0.100]", "services[0].vips[1]"),
            ("\"2001:DB8::100\"]", "224.0.0.1]", "services[0].vips[1]"),
            (
                "\"2001:DB8::100\"]",
                "255.255.255.255]",
                "services[0].vips[1]",
            ),
            ("nodes: [host-a, host-b]", "nodes: []", "services[1].nodes"),
            (
                "interfaces: [eth0]\n    health",
                "interfaces: []\n    health",
                "services[1].interfaces",
            ),
            (
                "{tcp: \"127.0.0.1:53\"}",
                "{tcp: \"127.0.0.1\"}",
                "services[1].health_check.tcp",
            ),
            (
                "{tcp: \"127.0.0.1:53\"}",
                "{tcp: \"127.0.0.1:53\", command: [x]}",
                "services[1].health_check",
            ),
            (
                "{tcp: \"127.0.0.1:53\"}",
                "{interval: 1s}",
                "services[1].health_check",
            ),
            (
                "{command: [/bin/true]}",
                "{command: []}",
                "services[2].health_check.command",
            ),
            (
                "http: http://127.0.0.1:8080/healthz",
                "http: https://127.0.0.1/",
                "services[0].health_check.http",
            ),
            (
                "interval: 500ms",
                "interval: 0ms",
                "services[0].health_check.interval",
            ),
            (
                "interval: 500ms",
                "timeout: 2s",
                "services[0].health_check.timeout",
            ),
            ("fall: 2", "fall: 0", "services[0].health_check.fall"),
            ("fall: 2", "rise: 0", "services[0].health_check.rise"),
        ];
        for (find, replace, field) in cases {
            let e = error(&with(find, replace));
            assert_eq!(e.field, *field, "{replace:?} gave {e}");
            assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn every_error_in_the_file_is_reported_in_one_pass() {
        let text = GOOD
            .replacen("name: host-a", "name: \"host a\"", 1)
            .replacen("label: prod", "profile: turbo", 1)
            .replacen("hold_down: 10s", "hold_down: soon", 1)
            .replacen("listen: 127.0.0.1:9472", "listen: localhost", 1)
            .replacen("\"2001:DB8::100\"]", "198.18.0.300]", 1)
            .replacen("fall: 2", "fall: 0", 1)
            .replacen("- name: dns", "- name: web", 1);
        let errors = match Config::parse(&text, None) {
            Err(ParseError::Invalid(errors)) => errors,
            other => panic!("expected field errors, got {other:?}"),
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "node.name",
                "gossip.profile",
                "election.hold_down",
                "http.listen",
                "services[0].vips[1]",
                "services[1].name",
            ],
            "{errors:?}"
        );
        // services[0] stops at its first bad field; the health check's fall is in it.
        let text = GOOD.replacen("fall: 2", "fall: 0", 1);
        assert!(matches!(Config::parse(&text, None), Err(ParseError::Invalid(e)) if e.len() == 1));
        // The printed form has one line per error.
        let shown = Config::parse(
            &GOOD
                .replacen("hold_down: 10s", "hold_down: soon", 1)
                .replacen("listen: 127.0.0.1:9472", "listen: localhost", 1),
            None,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(shown.lines().count(), 2, "{shown}");
    }

    #[test]
    fn validation_reads_no_file() {
        let text = GOOD.replacen("label: prod", "keyring_file: /nonexistent/keyring.json", 1);
        let c = Config::parse(&text, None).expect("parse reads nothing");
        assert_eq!(c.check_files().unwrap_err().field, "gossip.keyring_file");
    }

    #[test]
    fn local_address_is_off_unless_set() {
        let c = Config::parse(GOOD, None).unwrap();
        assert_eq!(c.local_address, None);
        let c = Config::parse(&with("refresh: 30s", "local_address: lo"), None).unwrap();
        assert_eq!(
            c.local_address,
            Some(LocalAddressConfig {
                device: "lo".into(),
                arp_sysctls: ArpSysctlsMode::Set,
            })
        );
        let text = with("refresh: 30s", "local_address: vip0\n  arp_sysctls: check");
        let c = Config::parse(&text, None).unwrap();
        assert_eq!(c.local_address.unwrap().arp_sysctls, ArpSysctlsMode::Check);
        // A dotted VLAN name is a device name too.
        let text = with("refresh: 30s", "local_address: dummy0.5");
        assert!(Config::parse(&text, None).is_ok());
    }

    #[test]
    fn missing_sections_and_fields_are_named() {
        assert_eq!(error("node: {name: a}").field, "gossip");
        assert_eq!(
            error("node: {name: a}\ngossip: {seeds: []}").field,
            "gossip.bind"
        );
        assert_eq!(error("gossip: {bind: 198.18.0.1}").field, "node.name");
        let e =
            error("node: {name: a}\ngossip: {bind: 198.18.0.1}\nservices: [{vips: [198.18.0.9]}]");
        assert_eq!(e.field, "services[0].name");
    }

    #[test]
    fn unknown_fields_and_wrong_types_are_parse_errors_naming_the_field() {
        for (text, needle) in [
            ("gossip: {bind: 198.18.0.1, bnid: x}", "bnid"),
            (
                "gossip: {bind: 198.18.0.1}\nservices: [{name: a, vip: [198.18.0.9]}]",
                "vip",
            ),
            (
                "gossip: {bind: 198.18.0.1}\nelection: {expected_members: many}",
                "expected_members",
            ),
            ("gossip: [", "line"),
        ] {
            match Config::parse(text, Some("n")) {
                Err(ParseError::Yaml(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_example_in_deploy_validates() {
        let example = include_str!("../../../deploy/standalone.example.yaml");
        let dir = std::env::temp_dir().join(format!("vigil-example-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let keyring = dir.join("keyring.json");
        std::fs::write(
            &keyring,
            "[\"T9jncgl9mbLus+baTTa7q7nPSUrXwbDi2dhbtqir37s=\"]",
        )
        .unwrap();
        let text = example.replace("/etc/vigil/keyring.json", &keyring.display().to_string());
        let parsed = Config::parse(&text, None);
        let _ = std::fs::remove_dir_all(&dir);
        let c = parsed.unwrap();
        assert_eq!(c.services.len(), 3);
        assert_eq!(c.election.expected_members, Some(3));
    }

    #[test]
    fn gossip_metadata_must_fit() {
        let labels: String = (0..60).map(|i| format!("label{i}: value{i}, ")).collect();
        let text = format!("node: {{name: a, labels: {{{labels}}}}}\ngossip: {{bind: 198.18.0.1}}");
        assert_eq!(error(&text).field, "node.labels");
    }
}
