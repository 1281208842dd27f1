//! Validation of the whole file into a [`Config`]: each section, each service and each
//! optional value on its own, so that one pass reports every bad field. Pure: no file is read.

use super::fields::{
    check_authority, check_device_name, check_label, check_name, check_seed, is_broadcast,
    names_set, non_empty_names_set, parse_http_url, positive_duration, refresh_interval,
    socket_addr,
};
use super::schema::{RawConfig, RawGossip, RawHealthCheck, RawNode, RawService};
use super::{
    ArpSysctlsMode, Config, ConfigError, DEFAULT_HTTP_LISTEN, DEFAULT_REJOIN_INTERVAL,
    ElectionConfig, GossipConfig, HealthCheck, InterfacesConfig, LocalAddressConfig,
    MIN_REJOIN_INTERVAL, NodeConfig, Probe, ServiceConfig, bad,
};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;
use vigil_gossip::Profile;
use vigil_lb::MAX_META_LEN;

/// The longest cluster label memberlist accepts.
const MAX_LABEL_LEN: usize = 255;

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
pub(super) fn file(raw: RawConfig, default_name: Option<&str>) -> Result<Config, Vec<ConfigError>> {
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
            non_empty_names_set(
                &format!("{field}.nodes"),
                n,
                "no node could answer (remove it to allow every node)",
            )
        })
        .transpose()?;
    for (k, v) in &raw.node_selector {
        check_label(&format!("{field}.node_selector.{k}"), k, v)?;
    }
    let interfaces = raw
        .interfaces
        .map(|n| {
            non_empty_names_set(
                &format!("{field}.interfaces"),
                n,
                "the VIP could be announced nowhere (remove it for all)",
            )
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
