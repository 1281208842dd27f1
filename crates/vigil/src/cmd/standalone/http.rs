//! The local HTTP endpoint: `/metrics`, `/healthz`, `/readyz` and `/status` (JSON, read by
//! `vigil status`). A deliberately small HTTP/1.x server: GET only, one request per
//! connection, bounded reads and time, so a stuck client cannot hold anything.

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
pub struct Sources {
    /// The daemon's shared state.
    pub shared: Arc<Mutex<Shared>>,
    /// The announcer, for its counters.
    pub l2: Handle,
    /// The gossip node, for its counters and liveness.
    pub gossip: Memberlist,
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, sources: Sources) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let sources = sources.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, handle(stream, &sources)).await;
        });
    }
}

async fn handle(mut stream: TcpStream, sources: &Sources) -> std::io::Result<()> {
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
        route(path, sources).await
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

async fn route(path: &str, sources: &Sources) -> (u16, &'static str, String) {
    let snapshot = || {
        sources
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    };
    match path {
        "/metrics" => {
            let gossip = sources.gossip.stats().await.ok();
            let text = metrics::render(&snapshot(), &sources.l2.stats(), gossip.as_ref());
            (200, "text/plain; version=0.0.4", text)
        }
        // Alive: the gossip driver answers.
        "/healthz" => match sources.gossip.stats().await {
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
