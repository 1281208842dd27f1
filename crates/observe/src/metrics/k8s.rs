//! MetalLB's `metallb_k8s_client_*` (`internal/k8s/controllers/stats.go`): how the speaker's
//! Kubernetes client is doing, with MetalLB's names, types and help texts.

use super::{counter, gauge};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

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
}

impl Collector for K8sClientMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        counter(
            &mut enc,
            "metallb_k8s_client_updates",
            "Number of k8s object updates that have been processed.",
            self.updates,
        )?;
        counter(
            &mut enc,
            "metallb_k8s_client_update_errors",
            "Number of k8s object updates that failed for some reason.",
            self.update_errors,
        )?;
        gauge(
            &mut enc,
            "metallb_k8s_client_config_loaded_bool",
            "1 if the MetalLB configuration was successfully loaded at least once.",
            u64::from(self.config_loaded),
        )?;
        gauge(
            &mut enc,
            "metallb_k8s_client_config_stale_bool",
            "1 if running on a stale configuration, because the latest config failed to load.",
            u64::from(self.config_stale),
        )
    }
}
