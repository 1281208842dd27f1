//! MetalLB's `metallb_k8s_client_*` (`internal/k8s/controllers/stats.go`): how the speaker's
//! Kubernetes client is doing, with MetalLB's names, types and help texts; and vigil's own
//! `vigil_k8s_*` for the speaker's ServiceL2Status writer and Event queue (MetalLB has none).

use super::{counter, counters, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};

/// What a Kubernetes-mode speaker's client exports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct K8sClientMetrics {
    /// Kubernetes object updates processed.
    pub updates: u64,
    /// Updates that failed: as in MetalLB, a configuration the speaker refused (one that
    /// would leave an announced IP in no pool), not one that does not parse.
    pub update_errors: u64,
    /// The MetalLB configuration was loaded at least once.
    pub config_loaded: bool,
    /// The latest configuration failed to load: the speaker runs on the last good one. As in
    /// MetalLB, going back to the configuration in force leaves it set until another
    /// configuration is applied.
    pub config_stale: bool,
    /// vigil: full checks of the speaker's keyed state against a whole translation (after
    /// each relist, once changes settle, and periodically).
    pub keyed_state_checks: u64,
    /// vigil: Services whose keyed state differed from the whole translation at a check
    /// (each one repaired then); anything but 0 is a bug in the keyed path.
    pub keyed_state_differences: u64,
}

/// MetalLB's four `metallb_k8s_client_*` families alone: what the controller exports (the
/// speaker's [`K8sClientMetrics`] adds its keyed-state checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MetalLbClientMetrics {
    /// Kubernetes object updates (reconciles) processed.
    pub updates: u64,
    /// Updates that failed.
    pub update_errors: u64,
    /// The configuration was loaded at least once.
    pub config_loaded: bool,
    /// The latest configuration failed to load; the last good one is in force.
    pub config_stale: bool,
}

impl Collector for MetalLbClientMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        self.write(&mut enc)
    }
}

impl MetalLbClientMetrics {
    fn write(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        counter(
            enc,
            "metallb_k8s_client_updates",
            "Number of k8s object updates that have been processed.",
            self.updates,
        )?;
        counter(
            enc,
            "metallb_k8s_client_update_errors",
            "Number of k8s object updates that failed for some reason.",
            self.update_errors,
        )?;
        gauge(
            enc,
            "metallb_k8s_client_config_loaded_bool",
            "1 if the MetalLB configuration was successfully loaded at least once.",
            u64::from(self.config_loaded),
        )?;
        gauge(
            enc,
            "metallb_k8s_client_config_stale_bool",
            "1 if running on a stale configuration, because the latest config failed to load.",
            u64::from(self.config_stale),
        )
    }
}

impl Collector for K8sClientMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        MetalLbClientMetrics {
            updates: self.updates,
            update_errors: self.update_errors,
            config_loaded: self.config_loaded,
            config_stale: self.config_stale,
        }
        .write(&mut enc)?;
        counter(
            &mut enc,
            "vigil_k8s_keyed_state_checks",
            "Full checks of the keyed Service state against a whole translation.",
            self.keyed_state_checks,
        )?;
        counter(
            &mut enc,
            "vigil_k8s_keyed_state_differences",
            "Services whose keyed state differed from the whole translation at a check.",
            self.keyed_state_differences,
        )
    }
}

/// The speaker's ServiceL2Status writer and its `nodeAssigned` Event queue (`vigil_k8s_*`): how
/// much waits, how much is in flight, and how the writes and Events went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusWriterMetrics {
    /// Services waiting for a write: to look at now, or backing off after a failure.
    pub queue_depth: u64,
    /// Services backing off after a failed write (part of `queue_depth`).
    pub backing_off: u64,
    /// Writes running now.
    pub in_flight: u64,
    /// This node's ServiceL2Status objects as its watch shows them.
    pub observed: u64,
    /// Creates (the object, its status written next).
    pub create: WriteCounts,
    /// Status patches.
    pub patch_status: WriteCounts,
    /// Deletes (a 404 counts as done).
    pub delete: WriteCounts,
    /// `nodeAssigned` Events written.
    pub events_sent: u64,
    /// Events the API server refused or that timed out (not tried again, as MetalLB's
    /// recorder).
    pub events_failed: u64,
    /// Events dropped because the queue was full: a write never waits for an Event.
    pub events_dropped: u64,
}

/// Writes of one kind, by result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// Done.
    pub ok: u64,
    /// Failed (tried again after a per-Service backoff).
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByKindResult {
    kind: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByResult {
    result: &'static str,
}

impl Collector for StatusWriterMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        gauge(
            &mut enc,
            "vigil_k8s_status_queue_depth",
            "Services whose ServiceL2Status waits for a write (now or after a backoff).",
            self.queue_depth,
        )?;
        gauge(
            &mut enc,
            "vigil_k8s_status_backing_off",
            "Services whose last ServiceL2Status write failed, waiting to try again.",
            self.backing_off,
        )?;
        gauge(
            &mut enc,
            "vigil_k8s_status_in_flight",
            "ServiceL2Status writes running now (at most one per Service).",
            self.in_flight,
        )?;
        gauge(
            &mut enc,
            "vigil_k8s_status_observed",
            "This node's ServiceL2Status objects as its watch shows them.",
            self.observed,
        )?;
        let writes = [
            ("create", self.create),
            ("patch_status", self.patch_status),
            ("delete", self.delete),
        ];
        counters(
            &mut enc,
            "vigil_k8s_status_writes",
            "ServiceL2Status writes by kind and result.",
            writes.into_iter().flat_map(|(kind, c)| {
                [
                    (ByKindResult { kind, result: "ok" }, c.ok),
                    (
                        ByKindResult {
                            kind,
                            result: "failed",
                        },
                        c.failed,
                    ),
                ]
            }),
        )?;
        counters(
            &mut enc,
            "vigil_k8s_events",
            "nodeAssigned Events by result (dropped: the queue was full).",
            [
                (ByResult { result: "sent" }, self.events_sent),
                (ByResult { result: "failed" }, self.events_failed),
                (ByResult { result: "dropped" }, self.events_dropped),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Scrape;

    #[test]
    fn the_status_writer_exports_its_queue_writes_and_event_drops() {
        let text = Scrape::new()
            .with(StatusWriterMetrics {
                queue_depth: 3,
                in_flight: 2,
                create: WriteCounts { ok: 5, failed: 1 },
                events_dropped: 4,
                ..StatusWriterMetrics::default()
            })
            .render();
        for want in [
            "# TYPE vigil_k8s_status_queue_depth gauge",
            "vigil_k8s_status_queue_depth 3",
            "vigil_k8s_status_in_flight 2",
            "vigil_k8s_status_writes_total{kind=\"create\",result=\"ok\"} 5",
            "vigil_k8s_status_writes_total{kind=\"create\",result=\"failed\"} 1",
            "vigil_k8s_status_writes_total{kind=\"delete\",result=\"ok\"} 0",
            "vigil_k8s_events_total{result=\"dropped\"} 4",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
    }
}
