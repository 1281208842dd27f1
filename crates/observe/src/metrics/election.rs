//! `vigil_election_*`: who announces what, as this node decided it.

use super::{counter, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// What the election exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ElectionMetrics {
    /// Times every VIP's owner was re-elected.
    pub evaluations: u64,
    /// VIPs this node announces now.
    pub vips_owned: u64,
    /// VIPs this node took over.
    pub vips_taken: u64,
    /// VIPs this node released.
    pub vips_released: u64,
    /// The split-brain guard sees a majority (always true when the guard is off).
    pub quorum: bool,
    /// This node is in its fail-back hold-down.
    pub holding: bool,
}

impl Collector for ElectionMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        counter(
            &mut enc,
            "vigil_election_evaluations",
            "Times every VIP's owner was re-elected.",
            self.evaluations,
        )?;
        gauge(
            &mut enc,
            "vigil_election_vips_owned",
            "VIPs this node announces.",
            self.vips_owned,
        )?;
        counter(
            &mut enc,
            "vigil_election_vips_taken",
            "VIPs this node took over.",
            self.vips_taken,
        )?;
        counter(
            &mut enc,
            "vigil_election_vips_released",
            "VIPs this node released.",
            self.vips_released,
        )?;
        gauge(
            &mut enc,
            "vigil_election_quorum",
            "1 while the split-brain guard sees a majority (always 1 when off).",
            u64::from(self.quorum),
        )?;
        gauge(
            &mut enc,
            "vigil_election_holding",
            "1 while this node is in its fail-back hold-down.",
            u64::from(self.holding),
        )
    }
}
