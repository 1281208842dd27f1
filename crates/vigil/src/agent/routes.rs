//! The agent's HTTP routes on the shared server ([`vigil_observe::http`]).
//!
//! | route | method | who | answers |
//! |---|---|---|---|
//! | `/members` | GET | anyone | members as JSON |
//! | `/metrics` | GET | anyone | Prometheus text |
//! | `/healthz` | GET | anyone | 200 while the gossip driver answers |
//! | `/meta` | POST | token | body: new metadata |
//! | `/broadcast` | POST | token | body: user message gossiped to everyone |
//! | `/send?to=ADDR[&udp]` | POST | token | body: user message to one node (TCP unless `udp`) |
//! | `/join` | POST | token | body: seeds, one per line; answers how many answered |
//! | `/leave` | POST | token | leave gracefully (keeps running until SIGTERM) |
//! | `/keyring/install`, `/keyring/use`, `/keyring/remove` | POST | token | body: base64 key |
//!
//! "token": off (403) unless the agent was given `--admin-token-file`, then only with
//! `Authorization: Bearer <token>` (401 otherwise).

use super::events::{EventCounts, member_json};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use vigil_gossip_net::{Memberlist, parse_key};
use vigil_observe::Guard;
use vigil_observe::http::{self, text};
use vigil_observe::metrics::{GossipMetrics, MemberCounts, Scrape};

/// How long `POST /leave` may take.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the routes read and act on.
#[derive(Clone)]
pub(super) struct AgentState {
    /// The gossip member.
    pub(super) ml: Memberlist,
    /// Counts from the event stream.
    pub(super) counts: Arc<Mutex<EventCounts>>,
}

/// The agent's routes, the mutating ones behind `guard`.
pub(super) fn router(state: AgentState, guard: &Guard) -> Router {
    Router::new()
        .route("/members", get(members))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/meta", guard.wrap(post(set_meta)))
        .route("/broadcast", guard.wrap(post(broadcast)))
        .route("/send", guard.wrap(post(send)))
        .route("/join", guard.wrap(post(join)))
        .route("/leave", guard.wrap(post(leave)))
        .route("/keyring/install", guard.wrap(post(install_key)))
        .route("/keyring/use", guard.wrap(post(use_key)))
        .route("/keyring/remove", guard.wrap(post(remove_key)))
        .fallback(http::not_found(&["/members", "/metrics", "/healthz"]))
        .with_state(state)
}

/// An error answer: the status and the reason.
struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        text(self.0, self.1)
    }
}

fn unavailable(e: vigil_gossip_net::Error) -> Failure {
    Failure(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
}

fn bad(e: impl std::fmt::Display) -> Failure {
    Failure(StatusCode::BAD_REQUEST, e.to_string())
}

fn ok() -> Response {
    text(StatusCode::OK, "ok")
}

fn body_text(body: &Bytes) -> String {
    String::from_utf8_lossy(body).trim().to_string()
}

async fn members(State(s): State<AgentState>) -> Result<Response, Failure> {
    let members = s.ml.members().await.map_err(unavailable)?;
    let list: Vec<_> = members.iter().map(member_json).collect();
    Ok(axum::Json(list).into_response())
}

async fn metrics(State(s): State<AgentState>) -> Result<Response, Failure> {
    let members = s.ml.members().await.map_err(unavailable)?;
    let mut stats = s.ml.stats().await.map_err(unavailable)?;
    let counts = *s.counts.lock().unwrap_or_else(PoisonError::into_inner);
    stats.keyring_errors += counts.keyring_file_errors;
    let gossip = GossipMetrics {
        stats: Some(stats),
        members: MemberCounts::of(&members),
        events: counts.members,
        user_messages: counts.user_messages,
    };
    Ok(Scrape::new().with(gossip).response())
}

async fn healthz(State(s): State<AgentState>) -> Response {
    http::probe(s.ml.stats().await.map(|_| "ok").map_err(|e| e.to_string()))
}

async fn set_meta(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    s.ml.set_meta(body.to_vec()).await.map_err(bad)?;
    Ok(ok())
}

async fn broadcast(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    s.ml.broadcast_user(None, body.to_vec())
        .map_err(unavailable)?;
    Ok(ok())
}

/// `?to=ADDR[&udp]`.
#[derive(Deserialize)]
struct SendTo {
    to: Option<String>,
    udp: Option<String>,
}

async fn send(
    State(s): State<AgentState>,
    Query(q): Query<SendTo>,
    body: Bytes,
) -> Result<Response, Failure> {
    let to = q.to.ok_or_else(|| bad("give ?to=ADDR"))?;
    let to: SocketAddr = to.parse().map_err(bad)?;
    s.ml.send_user(to, body.to_vec(), q.udp.is_none())
        .map_err(unavailable)?;
    Ok(ok())
}

async fn join(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    let seeds: Vec<String> = body_text(&body)
        .lines()
        .map(|l| l.trim().to_string())
        .collect();
    let n = s.ml.join(&seeds).await.map_err(bad)?;
    Ok(text(StatusCode::OK, n.to_string()))
}

async fn leave(State(s): State<AgentState>) -> Result<Response, Failure> {
    s.ml.leave(LEAVE_TIMEOUT).await.map_err(unavailable)?;
    Ok(ok())
}

async fn install_key(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    let key = parse_key(&body_text(&body)).map_err(bad)?;
    s.ml.install_key(key).map_err(unavailable)?;
    Ok(ok())
}

async fn use_key(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    let key = parse_key(&body_text(&body)).map_err(bad)?;
    s.ml.use_key(key.as_bytes()).await.map_err(bad)?;
    Ok(ok())
}

async fn remove_key(State(s): State<AgentState>, body: Bytes) -> Result<Response, Failure> {
    let key = parse_key(&body_text(&body)).map_err(bad)?;
    s.ml.remove_key(key.as_bytes()).await.map_err(bad)?;
    Ok(ok())
}
