//! What the daemon shares with its HTTP endpoint: the latest status and the counters behind
//! `/metrics`. The daemon's loop writes it after every evaluation; readers take a copy.

use super::local_address::AddressCounters;
use super::speaker::{Member, VipStatus};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The status document served at `/status` (what `vigil status` prints).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct Status {
    /// This node's name.
    pub node: String,
    /// Every member known, this node included.
    pub members: Vec<StatusMember>,
    /// Every configured VIP with its owner.
    pub vips: Vec<StatusVip>,
    /// Live members seen and needed by the split-brain guard (0 needed: guard off).
    pub quorum: StatusQuorum,
    /// Whether this node is in its fail-back hold-down.
    pub holding: bool,
    /// Health of this node's checked services.
    pub health: BTreeMap<String, bool>,
}

/// A member in [`Status`].
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct StatusMember {
    /// Name.
    pub name: String,
    /// Gossip address.
    pub addr: String,
    /// alive, suspect, dead or left.
    pub state: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Failing services.
    pub failing: BTreeSet<String>,
    /// In hold-down.
    pub holding: bool,
}

impl From<&Member> for StatusMember {
    fn from(m: &Member) -> Self {
        Self {
            name: m.name.clone(),
            addr: m.addr.to_string(),
            state: m.state.to_string(),
            labels: m.meta.labels.clone(),
            failing: m.meta.failing.clone(),
            holding: m.meta.holding,
        }
    }
}

/// A VIP in [`Status`].
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct StatusVip {
    /// The VIP.
    pub vip: String,
    /// Its services.
    pub services: Vec<String>,
    /// The elected owner.
    pub owner: Option<String>,
    /// Whether this node announces it.
    pub announced_here: bool,
    /// Candidates, best first.
    pub candidates: Vec<String>,
}

impl From<&VipStatus> for StatusVip {
    fn from(v: &VipStatus) -> Self {
        Self {
            vip: v.vip.to_string(),
            services: v.services.clone(),
            owner: v.owner.clone(),
            announced_here: v.announced_here,
            candidates: v.candidates.clone(),
        }
    }
}

/// The split-brain guard's numbers.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct StatusQuorum {
    /// Live members seen.
    pub live: usize,
    /// Needed (0: guard off).
    pub needed: usize,
}

/// Everything the HTTP endpoint reads.
#[derive(Debug, Clone, Default)]
pub struct Shared {
    /// The status document.
    pub status: Status,
    /// (service, VIP) announced here: `metallb_speaker_announced`.
    pub announced: Vec<(String, IpAddr)>,
    /// Every configured VIP: per-IP counters are exported for these only, so a VIP removed
    /// from the configuration leaves no series behind.
    pub configured_vips: BTreeSet<IpAddr>,
    /// The first evaluation ran and the announcer is up.
    pub ready: bool,
    /// Election runs.
    pub evaluations: u64,
    /// VIPs taken by this node.
    pub vips_taken: u64,
    /// VIPs released by this node.
    pub vips_released: u64,
    /// Reloads applied.
    pub reloads_ok: u64,
    /// Reloads rejected (bad file, old one kept).
    pub reloads_rejected: u64,
    /// Membership events seen, by kind.
    pub member_events: BTreeMap<&'static str, u64>,
    /// The local-address device's state, when `announce.local_address` is set.
    pub local_address: Option<LocalAddressState>,
}

/// VIPs held on `announce.local_address` and the changes made to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalAddressState {
    /// VIPs held now.
    pub held: usize,
    /// Adds and removes, done and failed.
    pub counters: AddressCounters,
}
