//! The status document (`/status`, `vigil status`) and the counters behind `/metrics`, as the
//! core knows them. The JSON shape is a contract with `vigil status` and the tests.

use super::election::VipStatus;
use super::member::{Member, MemberEventKind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The status document served at `/status` (what `vigil status` prints).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node's name.
    pub node: String,
    /// Every member known, this node included, by name.
    pub members: Vec<StatusMember>,
    /// Every desired VIP with its owner (empty until the first join is over).
    pub vips: Vec<StatusVip>,
    /// Live members seen and needed by the split-brain guard (0 needed: guard off).
    pub quorum: StatusQuorum,
    /// Whether this node is in its fail-back hold-down.
    pub holding: bool,
    /// Each health-checked service: whether its check passes on this node.
    pub health: BTreeMap<String, bool>,
}

/// A member in [`Status`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMember {
    /// Its gossip name.
    pub name: String,
    /// Its gossip address, `ip:port`.
    pub addr: String,
    /// `alive`, `suspect`, `dead` or `left` (see [`MemberState`](super::MemberState)).
    pub state: String,
    /// The labels it publishes for node selectors.
    pub labels: BTreeMap<String, String>,
    /// Services whose health check fails on it.
    pub failing: BTreeSet<String>,
    /// Whether it is in its fail-back hold-down.
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusVip {
    /// The VIP.
    pub vip: String,
    /// The services that use it.
    pub services: Vec<String>,
    /// The elected owner, if any node may answer.
    pub owner: Option<String>,
    /// Whether this node announces it.
    pub announced_here: bool,
    /// The candidates, best first.
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuorum {
    /// Live members seen, this node included.
    pub live: usize,
    /// Live members needed (0: guard off).
    pub needed: usize,
}

/// What the core counted since start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Election runs (every input that may change the result counts one).
    pub evaluations: u64,
    /// VIPs this node started announcing.
    pub vips_taken: u64,
    /// VIPs this node stopped announcing.
    pub vips_released: u64,
    /// Membership events seen, by kind.
    pub member_events: BTreeMap<MemberEventKind, u64>,
}
