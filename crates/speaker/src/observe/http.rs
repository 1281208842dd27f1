//! The local HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/status` (JSON, read by
//! `vigil status`). A deliberately small HTTP/1.x server: GET only, one request per
//! connection, bounded reads and time, so a stuck client cannot hold anything.

use super::SourceCounters;
use super::metrics;
use super::state::Shared;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use vigil_gossip_net::Memberlist;
use vigil_l2_net::Handle;

/// The largest request head read.
const MAX_REQUEST: usize = 8 * 1024;
/// How long one connection may take.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(5);

/// What the endpoint reads from.
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

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, state: HttpState) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, handle(stream, &state)).await;
        });
    }
}

async fn handle(mut stream: TcpStream, state: &HttpState) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (code, kind, body) = if method != "GET" {
        (405, "text/plain", "only GET\n".to_string())
    } else {
        route(path, state).await
    };
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let response = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

async fn route(path: &str, state: &HttpState) -> (u16, &'static str, String) {
    let snapshot = || {
        let mut shared = state
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        shared.reloads_ok = state.reloads.applied();
        shared.reloads_rejected = state.reloads.rejected();
        shared
    };
    match path {
        "/metrics" => {
            let gossip = state.gossip.stats().await.ok();
            let text = metrics::render(&snapshot(), &state.l2.stats(), gossip.as_ref());
            (200, "text/plain; version=0.0.4", text)
        }
        // Alive: the gossip driver answers.
        "/healthz" => match state.gossip.stats().await {
            Ok(_) => (200, "text/plain", "ok\n".into()),
            Err(e) => (503, "text/plain", format!("{e}\n")),
        },
        "/readyz" => {
            if snapshot().ready {
                (200, "text/plain", "ready\n".into())
            } else {
                (503, "text/plain", "starting\n".into())
            }
        }
        "/status" => match serde_json::to_string_pretty(&snapshot().status) {
            Ok(json) => (200, "application/json", json + "\n"),
            Err(e) => (503, "text/plain", format!("{e}\n")),
        },
        _ => (
            404,
            "text/plain",
            "try /metrics, /healthz, /readyz or /status\n".into(),
        ),
    }
}
