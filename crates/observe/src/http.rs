//! The one HTTP server: the caller's axum [`Router`] served over HTTP/1.1 by hyper.
//!
//! Every endpoint vigil serves is small and local (`/metrics`, `/status`, an admin POST), and
//! its clients are Prometheus, `vigil status`, health probes and scripts, so each connection
//! carries one request and is closed after the answer, a request head must arrive within
//! [`HEADER_TIMEOUT`], a whole connection may last [`CONNECTION_DEADLINE`] and a body may be
//! [`MAX_BODY`] bytes: a slow or stuck client holds nothing for long. Accept errors (such as
//! running out of file descriptors) pause the loop briefly instead of spinning.
//!
//! A speaker's endpoint, as a caller wires it (its state and handlers are its own):
//!
//! ```no_run
//! use axum::{Router, extract::State, routing::get};
//! use vigil_observe::http::{self, probe};
//! use vigil_observe::metrics::{ElectionMetrics, L2Metrics, Scrape};
//!
//! #[derive(Clone)]
//! struct Speaker; // the caller's shared state: status, counters, handles
//!
//! async fn metrics(State(_s): State<Speaker>) -> axum::response::Response {
//!     // Read the counters (awaiting the drivers), fill the collectors, render.
//!     Scrape::new()
//!         .with(L2Metrics::default())
//!         .with(ElectionMetrics::default())
//!         .response()
//! }
//!
//! # async fn run() -> std::io::Result<()> {
//! let router = Router::new()
//!     .route("/metrics", get(metrics))
//!     .route("/healthz", get(|| async { probe(Ok("ok")) }))
//!     .fallback(http::not_found(&["/metrics", "/healthz"]))
//!     .with_state(Speaker);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7472").await?;
//! let shutdown = async { /* the caller's shutdown signal */ };
//! http::serve(listener, router, shutdown).await;
//! # Ok(())
//! # }
//! ```

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a client may take to send a request head.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may last, answer included.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// The largest request body accepted (larger ones get 413).
pub const MAX_BODY: usize = 64 * 1024;
/// The pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until `shutdown` completes. Connections already accepted
/// finish on their own (within [`CONNECTION_DEADLINE`]).
pub async fn serve(listener: TcpListener, router: Router, shutdown: impl Future<Output = ()>) {
    accept_loop(listener, shutdown, |stream| {
        let router = router.clone();
        async move { answer(stream, router).await }
    })
    .await;
}

/// [`serve`] over TLS: each connection's handshake must end within [`HEADER_TIMEOUT`], and
/// counts towards its [`CONNECTION_DEADLINE`]. A failed handshake closes the connection.
pub async fn serve_tls(
    listener: TcpListener,
    tls: std::sync::Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    accept_loop(listener, shutdown, |stream| {
        let (acceptor, router) = (acceptor.clone(), router.clone());
        async move {
            let handshake = tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await;
            match handshake {
                Ok(Ok(stream)) => answer(stream, router).await,
                Ok(Err(e)) => {
                    tracing::debug!(event = "tls_handshake_failed", error = %e, "TLS handshake failed");
                }
                Err(_) => tracing::debug!(event = "tls_handshake_timeout", "TLS handshake too slow"),
            }
        }
    })
    .await;
}

/// Accepts until `shutdown`, handing each connection to `handle` on a task of its own that
/// may last [`CONNECTION_DEADLINE`].
async fn accept_loop<F, Fut>(listener: TcpListener, shutdown: impl Future<Output = ()>, handle: F)
where
    F: Fn(tokio::net::TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(event = "http_accept_failed", error = %e, "HTTP accept failed; pausing");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let connection = handle(stream);
        tokio::spawn(async move {
            // A client that does not finish in time is cut off; nothing to report.
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, connection).await;
        });
    }
}

/// One request on `stream`, answered by `router` with the server's limits, then a close.
async fn answer<S>(stream: S, router: Router)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.keep_alive(false)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    let service = TowerToHyperService::new(limited(router));
    let _ = http.serve_connection(TokioIo::new(stream), service).await;
}

/// The router with the server's limits on it.
fn limited(router: Router) -> Router {
    router.layer(DefaultBodyLimit::max(MAX_BODY))
}

/// A plain-text answer; the text gets a trailing newline if it has none.
pub fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A liveness or readiness answer: 200 with `ok_text`, or 503 with the reason.
pub fn probe(result: Result<&str, String>) -> Response {
    match result {
        Ok(ok) => text(StatusCode::OK, ok),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// A fallback for unknown paths: 404 naming the paths that exist.
pub fn not_found(
    paths: &'static [&'static str],
) -> impl Fn() -> std::future::Ready<Response> + Clone {
    move || {
        std::future::ready(text(
            StatusCode::NOT_FOUND,
            format!("not found; try {}", paths.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::{get, post};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        // The server closes after one answer (no keep-alive), so reading to the end returns.
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
            .await
            .unwrap_or_else(|_| panic!("no close after one answer to {request:?}: {out:?}"))
            .unwrap();
        out
    }

    #[tokio::test]
    async fn one_request_per_connection_over_a_real_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = Router::new()
            .route("/healthz", get(|| async { probe(Ok("ok")) }))
            .route("/echo", post(|body: String| async move { body }))
            .fallback(not_found(&["/healthz", "/echo"]));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, async {
            let _ = stopped.await;
        }));

        // HTTP/1.1 without "Connection: close" still gets one answer and a close.
        let answer = exchange(addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nok\n"), "{answer}");
        let answer = exchange(addr, "GET /nope HTTP/1.0\r\n\r\n").await;
        assert!(answer.contains(" 404 "), "{answer}");
        assert!(answer.contains("try /healthz, /echo"), "{answer}");
        let answer = exchange(
            addr,
            "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
        )
        .await;
        assert!(answer.ends_with("hello"), "{answer}");

        stop.send(()).unwrap();
        server.await.unwrap();
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "still listening after shutdown"
        );
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused() {
        use tower::ServiceExt;
        let router =
            limited(Router::new().route("/echo", post(|body: String| async move { body })));
        let request = |len: usize| {
            axum::http::Request::post("/echo")
                .body(axum::body::Body::from(vec![b'x'; len]))
                .unwrap()
        };
        let ok = router.clone().oneshot(request(MAX_BODY)).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
        let big = router.oneshot(request(MAX_BODY + 1)).await.unwrap();
        assert_eq!(big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    }
}
