//! What the speaker shows: the status and counters shared with the HTTP endpoint, and its
//! routes (`/metrics`, `/healthz`, `/readyz`, `/status`) on the one HTTP server and the one
//! set of metric collectors of `vigil-observe`.

pub mod http;
pub mod state;
pub mod status_writes;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use vigil_observe::metrics::K8sClientMetrics;
use vigil_observe::secure::SecureServing;

/// Reloads a configuration source applied and rejected, shown in `/metrics`
/// (`vigil_config_reloads_total`), and, for the Kubernetes source, MetalLB's
/// `metallb_k8s_client_*` counts. Cheap to clone; every clone counts into the same values.
#[derive(Debug, Clone, Default)]
pub struct SourceCounters {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The Kubernetes status writer's counters (exported once a writer runs).
    status_writes: status_writes::StatusWriteCounters,
    applied: AtomicU64,
    rejected: AtomicU64,
    /// Set by a Kubernetes source: the `metallb_k8s_client_*` series are exported.
    kubernetes: AtomicBool,
    updates: AtomicU64,
    update_errors: AtomicU64,
    config_loaded: AtomicBool,
    config_stale: AtomicBool,
    keyed_checks: AtomicU64,
    keyed_differences: AtomicU64,
    /// Set by the Kubernetes speaker: the metrics port is served as MetalLB serves it.
    secure: OnceLock<SecureServing>,
}

impl SourceCounters {
    /// A new snapshot was applied.
    pub fn count_applied(&self) {
        self.inner.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// A new snapshot was rejected (the old one stays in force).
    pub fn count_rejected(&self) {
        self.inner.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Snapshots applied so far.
    pub fn applied(&self) -> u64 {
        self.inner.applied.load(Ordering::Relaxed)
    }

    /// Snapshots rejected so far.
    pub fn rejected(&self) -> u64 {
        self.inner.rejected.load(Ordering::Relaxed)
    }

    /// The source reads Kubernetes: `/metrics` shows MetalLB's `metallb_k8s_client_*`.
    pub fn set_kubernetes(&self) {
        self.inner.kubernetes.store(true, Ordering::Relaxed);
    }

    /// One Kubernetes object update processed (`metallb_k8s_client_updates_total`).
    pub fn count_update(&self) {
        self.inner.updates.fetch_add(1, Ordering::Relaxed);
    }

    /// One update that failed (`metallb_k8s_client_update_errors_total`).
    pub fn count_update_error(&self) {
        self.inner.update_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a configuration was ever loaded (`config_loaded_bool`) and whether the
    /// speaker runs on a stale one because the latest failed (`config_stale_bool`).
    pub fn set_config_state(&self, loaded: bool, stale: bool) {
        self.inner.config_loaded.store(loaded, Ordering::Relaxed);
        self.inner.config_stale.store(stale, Ordering::Relaxed);
    }

    /// The Kubernetes status writer's counters (`vigil_k8s_status_*`, `vigil_k8s_events_total`).
    pub fn status_writes(&self) -> &status_writes::StatusWriteCounters {
        &self.inner.status_writes
    }

    /// A full check of the keyed state ran and found `differences` Services that differed
    /// (`vigil_k8s_keyed_state_{checks,differences}_total`).
    pub fn count_keyed_check(&self, differences: u64) {
        self.inner.keyed_checks.fetch_add(1, Ordering::Relaxed);
        self.inner
            .keyed_differences
            .fetch_add(differences, Ordering::Relaxed);
    }

    /// Serve the metrics port as MetalLB does (HTTPS, TokenReview and SubjectAccessReview on
    /// every request; the probe port then serves only the probes). Set once, before the
    /// runner starts; a later call is ignored.
    pub fn serve_securely(&self, serving: SecureServing) {
        let _ = self.inner.secure.set(serving);
    }

    /// How the metrics port is served securely, if it is.
    pub fn secure_serving(&self) -> Option<&SecureServing> {
        self.inner.secure.get()
    }

    /// MetalLB's Kubernetes client metrics, for a Kubernetes source only.
    pub fn k8s_client(&self) -> Option<K8sClientMetrics> {
        let i = &self.inner;
        i.kubernetes
            .load(Ordering::Relaxed)
            .then(|| K8sClientMetrics {
                updates: i.updates.load(Ordering::Relaxed),
                update_errors: i.update_errors.load(Ordering::Relaxed),
                config_loaded: i.config_loaded.load(Ordering::Relaxed),
                config_stale: i.config_stale.load(Ordering::Relaxed),
                keyed_state_checks: i.keyed_checks.load(Ordering::Relaxed),
                keyed_state_differences: i.keyed_differences.load(Ordering::Relaxed),
            })
    }
}
