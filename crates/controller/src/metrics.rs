//! The controller's `/metrics`: MetalLB's controller families with MetalLB's names, types
//! and help texts (`metallb_allocator_*` per pool, `metallb_k8s_client_*`, `process_*`), and
//! vigil's own (`vigil_controller_key_rotation_*`, and the [`ControllerState`]'s
//! `vigil_controller_replicated` and `vigil_controller_degraded_writes_total`).
//!
//! - The allocator's figures are asked of the leader's driver at each scrape
//!   ([`ControllerMetrics::pool_figures`]): it answers between two events from the allocator
//!   it owns, so nothing is copied while no one scrapes. A replica that does not lead has no
//!   allocator and exports no `metallb_allocator_*` series (MetalLB runs one replica).
//! - `metallb_k8s_client_*` count as MetalLB's service and pool reconcilers do: one update per
//!   Service event and per pool or namespace change; an error per failed Service status
//!   write; a configuration that does not parse makes it stale (no error, as in MetalLB), a
//!   valid one loaded and not stale.

use crate::rotation::metrics::{RotationMetrics, SharedMetrics};
use crate::state::ControllerState;
use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use vigil_lb::pool::Allocator;
use vigil_observe::metrics::{
    AllocatorMetrics, MetalLbClientMetrics, PoolFigures, ProcessMetrics, Scrape,
};

/// How long a scrape waits for the driver's figures (a driver busy longer exports none).
const FIGURES_WAIT: Duration = Duration::from_secs(2);

/// A scrape's question to the driver: the allocator's figures, please.
pub(crate) type FiguresRequest = oneshot::Sender<Vec<PoolFigures>>;

/// The controller's metrics, shared by the driver, the rotation and the `/metrics` route.
/// Cheap to clone; every clone counts into the same values.
#[derive(Debug, Clone, Default)]
pub struct ControllerMetrics {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    updates: AtomicU64,
    update_errors: AtomicU64,
    config_loaded: AtomicBool,
    config_stale: AtomicBool,
    /// The leading driver's question box, while one leads.
    figures: Mutex<Option<mpsc::Sender<FiguresRequest>>>,
    rotation: SharedMetrics,
    /// The webhook server's counters (zero while it is off).
    webhook: Arc<crate::webhook::WebhookMetrics>,
}

impl ControllerMetrics {
    /// The key rotation's metrics (filled by the rotation while this replica leads).
    pub fn rotation(&self) -> SharedMetrics {
        Arc::clone(&self.inner.rotation)
    }

    /// The webhook server's counters (`vigil_controller_webhook_*`).
    pub fn webhook(&self) -> Arc<crate::webhook::WebhookMetrics> {
        Arc::clone(&self.inner.webhook)
    }

    /// One Kubernetes object update processed (a Service event, a pool or namespace change).
    pub fn count_update(&self) {
        self.inner.updates.fetch_add(1, Ordering::Relaxed);
    }

    /// One update that failed (a Service status write the API server refused).
    pub fn count_update_error(&self) {
        self.inner.update_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A configuration was read: valid (loaded, not stale) or not (stale).
    pub fn config_read(&self, valid: bool) {
        if valid {
            self.inner.config_loaded.store(true, Ordering::Relaxed);
        }
        self.inner.config_stale.store(!valid, Ordering::Relaxed);
    }

    /// MetalLB's client counts now.
    pub fn client(&self) -> MetalLbClientMetrics {
        let i = &self.inner;
        MetalLbClientMetrics {
            updates: i.updates.load(Ordering::Relaxed),
            update_errors: i.update_errors.load(Ordering::Relaxed),
            config_loaded: i.config_loaded.load(Ordering::Relaxed),
            config_stale: i.config_stale.load(Ordering::Relaxed),
        }
    }

    /// The driver starts leading: scrapes ask it for the figures through the box returned.
    pub(crate) fn leading(&self) -> mpsc::Receiver<FiguresRequest> {
        let (tx, rx) = mpsc::channel(4);
        *self.lock_figures() = Some(tx);
        rx
    }

    /// The driver stopped leading.
    pub(crate) fn not_leading(&self) {
        *self.lock_figures() = None;
    }

    fn lock_figures(&self) -> std::sync::MutexGuard<'_, Option<mpsc::Sender<FiguresRequest>>> {
        self.inner
            .figures
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The leading driver's allocator figures (`None`: not leading, not allocating yet, or
    /// no answer in time).
    pub async fn pool_figures(&self) -> Option<Vec<PoolFigures>> {
        let ask = self.lock_figures().clone()?;
        let (reply, answer) = oneshot::channel();
        ask.try_send(reply).ok()?;
        tokio::time::timeout(FIGURES_WAIT, answer).await.ok()?.ok()
    }

    /// Every family of one scrape.
    pub async fn scrape(&self) -> Scrape {
        let rotation: RotationMetrics = self
            .inner
            .rotation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let scrape = Scrape::new()
            .with(self.client())
            .with(ProcessMetrics::read())
            .with(rotation)
            .with(crate::webhook::metrics::WebhookCollector(self.webhook()));
        match self.pool_figures().await {
            Some(pools) => scrape.with(AllocatorMetrics { pools }),
            None => scrape,
        }
    }
}

/// Each pool's figures from the allocator (MetalLB's counts, `Allocator::status_counters`).
pub(crate) fn pool_figures(alloc: &Allocator) -> Vec<PoolFigures> {
    let mut services = std::collections::BTreeMap::<&str, u64>::new();
    for a in alloc.allocations().values() {
        *services.entry(a.pool.as_str()).or_default() += 1;
    }
    alloc
        .pools()
        .iter()
        .filter_map(|pool| {
            let name = pool.name();
            let c = alloc.status_counters(name)?;
            Some(PoolFigures {
                pool: name.to_string(),
                ipv4_total: c.available_ipv4.saturating_add(c.assigned_ipv4),
                ipv6_total: c.available_ipv6.saturating_add(c.assigned_ipv6),
                ipv4_in_use: c.assigned_ipv4,
                ipv6_in_use: c.assigned_ipv6,
                services: services.get(name).copied().unwrap_or(0),
            })
        })
        .collect()
}

/// `/metrics` with every family: `metrics`' and the controller `state`'s.
pub fn router(metrics: ControllerMetrics, state: ControllerState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((metrics, state))
}

async fn scrape(State((metrics, state)): State<(ControllerMetrics, ControllerState)>) -> Response {
    metrics.scrape().await.with(state).response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_lb::pool::{PoolSpec, Pools};

    #[tokio::test]
    async fn a_scrape_asks_the_leading_driver_and_counts_as_metallb() {
        let m = ControllerMetrics::default();
        m.count_update();
        m.count_update();
        m.count_update_error();
        m.config_read(false);
        let text = m.scrape().await.render();
        for line in [
            "metallb_k8s_client_updates_total 2",
            "metallb_k8s_client_update_errors_total 1",
            "metallb_k8s_client_config_loaded_bool 0",
            "metallb_k8s_client_config_stale_bool 1",
            "# TYPE process_cpu_seconds_total counter",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        // Not leading: no allocator series.
        assert!(!text.contains("metallb_allocator_"), "{text}");

        let mut alloc = Allocator::default();
        alloc.set_pools(Pools::new([PoolSpec::new("blue", &["198.18.0.0/30"])]).unwrap());
        let figures = pool_figures(&alloc);
        let mut asks = m.leading();
        let driver = tokio::spawn(async move {
            let reply = asks.recv().await.unwrap();
            reply.send(figures).unwrap();
        });
        m.config_read(true);
        let text = m.scrape().await.render();
        driver.await.unwrap();
        for line in [
            "metallb_allocator_addresses_total{pool=\"blue\"} 4",
            "metallb_allocator_addresses_in_use_total{pool=\"blue\"} 0",
            "metallb_k8s_client_config_loaded_bool 1",
            "metallb_k8s_client_config_stale_bool 0",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        m.not_leading();
        assert_eq!(m.pool_figures().await, None);
    }
}
