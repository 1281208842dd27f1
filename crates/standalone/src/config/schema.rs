//! The file as written: serde's view of the YAML. Every value a person can get wrong is kept
//! as a string (or an option) here and checked in [`validate`](super::validate), so that one
//! pass can name every bad field; serde would stop at the first. Unknown fields are errors, so
//! a typo never passes silently.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) node: RawNode,
    pub(super) gossip: Option<RawGossip>,
    #[serde(default)]
    pub(super) interfaces: RawInterfaces,
    #[serde(default)]
    pub(super) election: RawElection,
    #[serde(default)]
    pub(super) announce: RawAnnounce,
    #[serde(default)]
    pub(super) http: RawHttp,
    #[serde(default)]
    pub(super) services: Vec<RawService>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGossip {
    pub(super) bind: Option<String>,
    pub(super) advertise: Option<String>,
    #[serde(default)]
    pub(super) seeds: Vec<String>,
    pub(super) profile: Option<String>,
    pub(super) keyring_file: Option<PathBuf>,
    pub(super) label: Option<String>,
    pub(super) rejoin_interval: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInterfaces {
    pub(super) include: Option<Vec<String>>,
    pub(super) exclude: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawElection {
    pub(super) hold_down: Option<String>,
    pub(super) expected_members: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAnnounce {
    pub(super) refresh: Option<String>,
    pub(super) local_address: Option<String>,
    pub(super) arp_sysctls: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHttp {
    pub(super) listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) vips: Vec<String>,
    pub(super) nodes: Option<Vec<String>>,
    #[serde(default)]
    pub(super) node_selector: BTreeMap<String, String>,
    pub(super) interfaces: Option<Vec<String>>,
    pub(super) health_check: Option<RawHealthCheck>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealthCheck {
    pub(super) tcp: Option<String>,
    pub(super) http: Option<String>,
    pub(super) command: Option<Vec<String>>,
    pub(super) interval: Option<String>,
    pub(super) timeout: Option<String>,
    pub(super) rise: Option<u32>,
    pub(super) fall: Option<u32>,
}
