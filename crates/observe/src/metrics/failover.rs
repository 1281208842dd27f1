//! `vigil_failover_*`: the ownership changes this node reported (it took a VIP, or dropped
//! one to nobody), each stage of each as a histogram of the time since the change's first
//! stage (`vigil_speaker_core::core::timeline`). For a lost host, `stage="first_announce"` is
//! the failover as the new owner lived it: from the first probe of the old owner that went
//! unanswered to its own first gratuitous ARP or unsolicited neighbour advertisement.
//!
//! Each change is reported by one node only, so the cluster's sum counts it once.

use super::counters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use std::collections::BTreeMap;
use vigil_speaker_core::core::{Cause, OwnershipChange, Stage};

/// Upper bounds of the buckets, in seconds: fine below a client's first TCP retransmission
/// (200 ms), coarse up to memberlist's LAN timings.
pub const STAGE_BUCKETS: [f64; 18] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.5, 0.75, 1.0, 2.5,
    5.0, 10.0,
];

/// One histogram: per-bucket counts (the last is `+Inf`), sum and count.
#[derive(Debug, Clone, PartialEq)]
struct Histogram {
    buckets: [u64; STAGE_BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: [0; STAGE_BUCKETS.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        let i = STAGE_BUCKETS
            .iter()
            .position(|le| seconds <= *le)
            .unwrap_or(STAGE_BUCKETS.len());
        self.buckets[i] += 1;
        self.sum += seconds;
        self.count += 1;
    }
}

impl EncodeMetric for Histogram {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = STAGE_BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.buckets)
            .collect();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.sum, self.count, &buckets, None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
    cause: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CauseLabel {
    cause: &'static str,
}

/// The ownership changes this node reported, accumulated by the runner and rendered per
/// scrape. Series appear once a change of their stage and cause was seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailoverMetrics {
    stages: BTreeMap<(Stage, Cause), Histogram>,
    changes: BTreeMap<Cause, u64>,
    /// Changes reported without their first announcement (none seen within the bound).
    unannounced: u64,
}

impl FailoverMetrics {
    /// Records one reported change: each of its stages, as seconds after its first.
    pub fn observe(&mut self, change: &OwnershipChange) {
        *self.changes.entry(change.cause).or_default() += 1;
        if change.owner.is_some() && change.at(Stage::FirstAnnounce).is_none() {
            self.unannounced += 1;
        }
        for (stage, after) in change.offsets() {
            self.stages
                .entry((stage, change.cause))
                .or_default()
                .observe(after.as_secs_f64());
        }
    }

    /// Changes recorded with `cause`.
    pub fn changes(&self, cause: Cause) -> u64 {
        self.changes.get(&cause).copied().unwrap_or(0)
    }

    /// Observations of `stage` for changes with `cause`.
    pub fn stage_count(&self, stage: Stage, cause: Cause) -> u64 {
        self.stages.get(&(stage, cause)).map_or(0, |h| h.count)
    }
}

impl Collector for FailoverMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let mut family = enc.encode_descriptor(
            "vigil_failover_stage_seconds",
            "Ownership changes this node reported (it took the VIP, or nobody did): time from \
             the change's first stage (first missed probe, suspect, dead, decision, first \
             gratuitous ARP/NA) to this stage, by cause.",
            None,
            MetricType::Histogram,
        )?;
        for ((stage, cause), histogram) in &self.stages {
            let labels = StageLabels {
                stage: stage.as_str(),
                cause: cause.as_str(),
            };
            histogram.encode(family.encode_family(&labels)?)?;
        }
        counters(
            &mut enc,
            "vigil_failover_changes",
            "Ownership changes this node reported, by cause.",
            self.changes.iter().map(|(cause, n)| {
                (
                    CauseLabel {
                        cause: cause.as_str(),
                    },
                    *n,
                )
            }),
        )?;
        super::counter(
            &mut enc,
            "vigil_failover_unannounced",
            "Ownership changes to this node whose first gratuitous frame was not seen within \
             the bound.",
            self.unannounced,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Scrape;
    use std::time::{Duration, Instant};

    #[test]
    fn a_reported_host_loss_lands_in_one_bucket_per_stage() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let change = OwnershipChange {
            vip: "198.18.0.100".parse().unwrap(),
            services: vec!["web".into()],
            previous: Some("node-a".into()),
            owner: Some("node-b".into()),
            next: None,
            cause: Cause::MemberDead,
            member: Some("node-a".into()),
            here: true,
            stages: vec![
                (Stage::FirstMiss, ms(0)),
                (Stage::Suspect, ms(40)),
                (Stage::Dead, ms(120)),
                (Stage::Decision, ms(120)),
                (Stage::FirstAnnounce, ms(121)),
            ],
        };
        let mut m = FailoverMetrics::default();
        m.observe(&change);
        m.observe(&change);
        assert_eq!(m.changes(Cause::MemberDead), 2);
        assert_eq!(m.stage_count(Stage::FirstAnnounce, Cause::MemberDead), 2);
        let text = Scrape::new().with(m).render();
        for want in [
            "# TYPE vigil_failover_stage_seconds histogram",
            "vigil_failover_stage_seconds_count{stage=\"first_announce\",cause=\"member_dead\"} 2",
            "vigil_failover_stage_seconds_bucket{stage=\"first_announce\",cause=\"member_dead\",le=\"0.1\"} 0",
            "vigil_failover_stage_seconds_bucket{stage=\"first_announce\",cause=\"member_dead\",le=\"0.125\"} 2",
            "vigil_failover_stage_seconds_bucket{stage=\"suspect\",cause=\"member_dead\",le=\"0.025\"} 0",
            "vigil_failover_stage_seconds_bucket{stage=\"suspect\",cause=\"member_dead\",le=\"0.05\"} 2",
            "vigil_failover_stage_seconds_bucket{stage=\"first_miss\",cause=\"member_dead\",le=\"+Inf\"} 2",
            "vigil_failover_changes_total{cause=\"member_dead\"} 2",
            "vigil_failover_unannounced_total 0",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
    }
}
