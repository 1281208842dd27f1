//! What the speaker shows: the status and counters shared with the HTTP endpoint, and its
//! routes (`/metrics`, `/healthz`, `/readyz`, `/status`) on the one HTTP server and the one
//! set of metric collectors of `vigil-observe`.

pub mod http;
pub mod state;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Reloads a configuration source applied and rejected, shown in `/metrics`
/// (`vigil_config_reloads_total`). Cheap to clone; every clone counts into the same pair.
#[derive(Debug, Clone, Default)]
pub struct SourceCounters {
    inner: Arc<[AtomicU64; 2]>,
}

impl SourceCounters {
    /// A new snapshot was applied.
    pub fn count_applied(&self) {
        self.inner[0].fetch_add(1, Ordering::Relaxed);
    }

    /// A new snapshot was rejected (the old one stays in force).
    pub fn count_rejected(&self) {
        self.inner[1].fetch_add(1, Ordering::Relaxed);
    }

    /// Snapshots applied so far.
    pub fn applied(&self) -> u64 {
        self.inner[0].load(Ordering::Relaxed)
    }

    /// Snapshots rejected so far.
    pub fn rejected(&self) -> u64 {
        self.inner[1].load(Ordering::Relaxed)
    }
}
