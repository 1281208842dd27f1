//! What the runner shares with its HTTP endpoint: the latest status and the counters behind
//! `/metrics`. The runner writes it after every batch of actions; readers take a copy.

pub use crate::core::{Status, StatusMember, StatusQuorum, StatusVip};
use crate::local_address::AddressCounters;
use std::collections::BTreeSet;
use std::net::IpAddr;
use vigil_observe::metrics::{FailoverMetrics, MemberCounts, MemberEventCounts};

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
    /// Members by state, this node included.
    pub member_counts: MemberCounts,
    /// Membership events seen, by kind (the speaker core's counters).
    pub member_events: MemberEventCounts,
    /// The local-address device's state, when `announce.local_address` is set.
    pub local_address: Option<LocalAddressState>,
    /// The ownership changes this node reported: `vigil_failover_*`.
    pub failover: FailoverMetrics,
}

/// VIPs held on `announce.local_address` and the changes made to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalAddressState {
    /// VIPs held now.
    pub held: usize,
    /// Adds and removes, done and failed.
    pub counters: AddressCounters,
}
