//! The controller's health-probe endpoint on `--health-probe-port` (17472 by default, as
//! MetalLB's controller), so MetalLB's Deployment probes keep working when only the image
//! changes: `GET /healthz` and `GET /readyz` answer 200 `ok` while the process runs, as
//! MetalLB's controller-runtime ping checks do. (The speaker serves its own `/healthz` and
//! `/readyz`, which look at gossip and readiness, on its probe port too: `probe_listen`.)

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;

/// Serves the probes on `addr` until `shutdown` resolves; port 0 turns them off. A port that
/// cannot be bound is logged and the program goes on: the kubelet's probes then fail, which is
/// how a cluster notices, and gossip and failover are not stopped for it.
pub async fn serve(addr: SocketAddr, shutdown: impl Future<Output = ()> + Send + 'static) {
    if addr.port() == 0 {
        return;
    }
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(event = "health_probe_bind_failed", %addr, error = %e,
                "cannot serve the health probes (--health-probe-port)");
            return;
        }
    };
    tracing::info!(event = "health_probe_listening", %addr, "health probes served");
    vigil_observe::http::serve(listener, router(), shutdown).await;
}

fn router() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get_status(addr: SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn probes_answer_ok_and_unknown_paths_do_not() {
        // Bind a free port first, then hand it to serve.
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(addr, async move {
            let _ = stop_rx.await;
        }));
        let mut answer = String::new();
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                answer = get_status(addr, "/healthz").await;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok"), "{answer}");
        let ready = get_status(addr, "/readyz").await;
        assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
        let other = get_status(addr, "/nope").await;
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        let _ = stop_tx.send(());
        server.await.unwrap();
    }

    #[tokio::test]
    async fn port_zero_serves_nothing() {
        serve("127.0.0.1:0".parse().unwrap(), std::future::pending()).await;
    }
}
