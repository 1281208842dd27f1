//! The speaker's own metrics: health checks, the local-address device, configuration reloads.

use super::{counters, gauge, gauges};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use std::collections::BTreeMap;

/// What the speaker exports beside the election.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpeakerMetrics {
    /// Whether this node's health check of each checked service passes.
    pub health_checks: BTreeMap<String, bool>,
    /// The local-address device's state, when one is configured (no series otherwise).
    pub local_address: Option<LocalAddressMetrics>,
    /// Configuration reloads applied.
    pub config_reloads_applied: u64,
    /// Configuration reloads rejected (the old configuration kept).
    pub config_reloads_rejected: u64,
}

/// VIPs held on the local-address device and the changes made to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalAddressMetrics {
    /// VIPs held now.
    pub held: u64,
    /// Adds done (already there counts as done).
    pub added: u64,
    /// Adds that failed.
    pub add_failed: u64,
    /// Removes done (already gone counts as done).
    pub removed: u64,
    /// Removes that failed.
    pub remove_failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByService {
    service: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByChange {
    op: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByResult {
    result: &'static str,
}

impl Collector for SpeakerMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        gauges(
            &mut enc,
            "vigil_health_check_passing",
            "1 while this node's health check for the service passes.",
            self.health_checks.iter().map(|(service, ok)| {
                (
                    ByService {
                        service: service.clone(),
                    },
                    u64::from(*ok),
                )
            }),
        )?;
        if let Some(local) = &self.local_address {
            gauge(
                &mut enc,
                "vigil_local_address_held",
                "VIPs this node holds on announce.local_address.",
                local.held,
            )?;
            counters(
                &mut enc,
                "vigil_local_address_changes",
                "Adds and removes of VIPs on announce.local_address, by result (already there or already gone counts as ok).",
                [
                    ("add", "ok", local.added),
                    ("add", "failed", local.add_failed),
                    ("remove", "ok", local.removed),
                    ("remove", "failed", local.remove_failed),
                ]
                .map(|(op, result, n)| (ByChange { op, result }, n)),
            )?;
        }
        counters(
            &mut enc,
            "vigil_config_reloads",
            "Configuration reloads, by result.",
            [
                ("applied", self.config_reloads_applied),
                ("rejected", self.config_reloads_rejected),
            ]
            .map(|(result, n)| (ByResult { result }, n)),
        )
    }
}
