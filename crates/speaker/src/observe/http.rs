//! The speaker's HTTP routes on the shared server (`vigil_observe::http`): `/metrics`
//! (`vigil_observe::metrics` collectors, one name per metric), `/healthz`, `/readyz` and
//! `/status` (JSON, read by `vigil status`). All GET.
//!
//! In Kubernetes mode the source asks for MetalLB's metrics port
//! ([`SourceCounters::serve_securely`]): `/metrics` and `/status` over HTTPS, each request
//! reviewed (`vigil_observe::secure`), and the probe port serves `/healthz` and `/readyz` only,
//! as MetalLB's do. Otherwise every route is served on the listen address, open to whoever can
//! reach it (nothing secret: names, addresses, VIPs, counters).

use super::SourceCounters;
use super::state::Shared;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::net::TcpListener;
use vigil_gossip_net::Memberlist;
use vigil_l2_net::Handle;
use vigil_observe::http::{self as server, probe};
use vigil_observe::metrics::{
    ElectionMetrics, GossipMetrics, L2Metrics, LocalAddressMetrics, ProcessMetrics, Scrape,
    SpeakerMetrics,
};

/// What the routes read from.
#[derive(Clone)]
pub struct HttpState {
    /// The runner's shared state.
    pub shared: Arc<Mutex<Shared>>,
    /// The config source's reload counters.
    pub reloads: SourceCounters,
    /// The announcer, for its counters.
    pub l2: Handle,
    /// The gossip node, for its counters and liveness.
    pub gossip: Memberlist,
}

impl HttpState {
    fn snapshot(&self) -> Shared {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

const PATHS: &[&str] = &["/metrics", "/healthz", "/readyz", "/status"];
/// The metrics port's routes when served securely (MetalLB's has no probes).
const SECURE_PATHS: &[&str] = &["/metrics", "/status"];
/// The probe port's routes.
const PROBE_PATHS: &[&str] = &["/healthz", "/readyz"];

/// The speaker's routes.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .fallback(server::not_found(PATHS))
        .with_state(state)
}

/// Serves the routes until the task is dropped: over HTTPS behind the review gate when the
/// source asked for it, else every route in plain HTTP.
pub async fn serve(listener: TcpListener, state: HttpState) {
    match state.reloads.secure_serving().cloned() {
        Some(secure) => {
            let routes = Router::new()
                .route("/metrics", get(metrics))
                .route("/status", get(status))
                .fallback(server::not_found(SECURE_PATHS))
                .with_state(state);
            secure.serve(listener, routes, std::future::pending()).await;
        }
        None => server::serve(listener, router(state), std::future::pending()).await,
    }
}

/// Serves the health probes alone until the task is dropped (the probe port: MetalLB's
/// serves `/healthz` and `/readyz` and nothing else, unauthenticated).
pub async fn serve_probes(listener: TcpListener, state: HttpState) {
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(server::not_found(PROBE_PATHS))
        .with_state(state);
    server::serve(listener, routes, std::future::pending()).await;
}

async fn metrics(State(state): State<HttpState>) -> Response {
    let shared = state.snapshot();
    let stats = state.gossip.stats().await.ok();
    scrape(&shared, &state.reloads, stats, state.l2.stats()).response()
}

/// Every collector filled from one snapshot.
fn scrape(
    shared: &Shared,
    reloads: &SourceCounters,
    gossip: Option<vigil_gossip_net::NetStats>,
    l2: vigil_l2_net::DriverStats,
) -> Scrape {
    let status = &shared.status;
    let quorum = status.quorum.live >= status.quorum.needed;
    let owned: std::collections::BTreeSet<_> = shared.announced.iter().map(|(_, ip)| *ip).collect();
    let scrape = Scrape::new()
        .with(ProcessMetrics::read())
        .with(L2Metrics {
            node: status.node.clone(),
            announced: shared.announced.clone(),
            configured_vips: shared.configured_vips.clone(),
            stats: l2,
        })
        .with(GossipMetrics {
            stats: gossip,
            members: shared.member_counts,
            events: shared.member_events,
            user_messages: 0,
        })
        .with(ElectionMetrics {
            evaluations: shared.evaluations,
            vips_owned: owned.len() as u64,
            vips_taken: shared.vips_taken,
            vips_released: shared.vips_released,
            quorum,
            holding: status.holding,
        })
        .with(SpeakerMetrics {
            health_checks: status.health.clone(),
            local_address: shared.local_address.map(|l| LocalAddressMetrics {
                held: l.held as u64,
                added: l.counters.added,
                add_failed: l.counters.add_failed,
                removed: l.counters.removed,
                remove_failed: l.counters.remove_failed,
            }),
            config_reloads_applied: reloads.applied(),
            config_reloads_rejected: reloads.rejected(),
        })
        .with(shared.failover.clone());
    let scrape = match reloads.k8s_client() {
        Some(k8s) => scrape.with(k8s),
        None => scrape,
    };
    match reloads.status_writes().metrics() {
        Some(writer) => scrape.with(writer),
        None => scrape,
    }
}

/// Alive: the gossip driver answers.
async fn healthz(State(state): State<HttpState>) -> Response {
    probe(
        state
            .gossip
            .stats()
            .await
            .map(|_| "ok")
            .map_err(|e| e.to_string()),
    )
}

async fn readyz(State(state): State<HttpState>) -> Response {
    probe(if state.snapshot().ready {
        Ok("ready")
    } else {
        Err("starting".into())
    })
}

async fn status(State(state): State<HttpState>) -> Response {
    Json(state.snapshot().status).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::state::LocalAddressState;

    #[test]
    fn a_scrape_carries_the_speakers_series_and_none_for_what_moved_away() {
        let mut shared = Shared::default();
        shared.status.node = "node-a".into();
        let vip = "198.18.0.100".parse().unwrap();
        shared.announced = vec![("web".into(), vip)];
        shared.configured_vips = [vip].into();
        shared.vips_released = 2;
        shared.local_address = Some(LocalAddressState {
            held: 1,
            ..LocalAddressState::default()
        });
        let reloads = SourceCounters::default();
        reloads.count_applied();
        let text = scrape(&shared, &reloads, None, Default::default()).render();
        for want in [
            "metallb_speaker_announced{ip=\"198.18.0.100\",node=\"node-a\",protocol=\"layer2\",service=\"web\"} 1",
            "vigil_election_vips_released_total 2",
            "vigil_local_address_held 1",
            "vigil_config_reloads_total{result=\"applied\"} 1",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
        shared.announced.clear();
        let text = scrape(&shared, &reloads, None, Default::default()).render();
        assert!(!text.contains("metallb_speaker_announced{"), "{text}");
    }
}
