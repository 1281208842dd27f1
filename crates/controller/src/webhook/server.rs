//! The webhook server: TLS on the webhook port, HTTP/1.1, MetalLB's paths (the six
//! validations and `/convert`), POST only.
//!
//! Bounded as vigil's plain server is: a TLS handshake and request head must arrive within
//! [`HEAD_TIMEOUT`], a connection lasts at most [`CONNECTION_DEADLINE`] (the API server's
//! longest webhook timeout) and carries one request, a body is at most [`MAX_BODY`] (the
//! API server's own request limit), and at most [`MAX_CONNECTIONS`] are served at once. A
//! request that breaks a bound or is not a review is refused with 4xx and counted
//! ([`WebhookMetrics`]), never a panic.

use super::convert;
use super::metrics::{BadRequest, WebhookMetrics};
use super::review::Reviewer;
use super::validate::Kind;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// How long a client may take for the TLS handshake, and then for the request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may last, answer included.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(30);
/// The largest body read (the API server's request size limit).
pub const MAX_BODY: usize = 3 * 1024 * 1024;
/// Connections served at once; more wait in the kernel's backlog.
pub const MAX_CONNECTIONS: usize = 32;
/// The pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the handlers share.
pub struct Handler {
    /// The admission reviewer.
    pub reviewer: Reviewer,
    /// The counters.
    pub metrics: Arc<WebhookMetrics>,
}

/// Serves until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    handler: Arc<Handler>,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(event = "webhook_accept_failed", error = %e, "webhook accept failed; pausing");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let metrics = handler.metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let served = tokio::time::timeout(CONNECTION_DEADLINE, async {
                let Ok(Ok(tls)) = tokio::time::timeout(HEAD_TIMEOUT, acceptor.accept(stream)).await
                else {
                    return false;
                };
                let service = hyper::service::service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, std::convert::Infallible>(handle(&handler, req).await) }
                });
                let mut http = hyper::server::conn::http1::Builder::new();
                http.keep_alive(false)
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_TIMEOUT);
                http.serve_connection(TokioIo::new(tls), service)
                    .await
                    .is_ok()
            })
            .await;
            if !matches!(served, Ok(true)) {
                // A failed handshake, a slow head, a connection cut or over its deadline.
                metrics.bad(BadRequest::Connection);
            }
        });
    }
}

async fn handle(handler: &Handler, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let metrics = &handler.metrics;
    let path = req.uri().path().to_string();
    let target = if path == "/convert" {
        None
    } else {
        match Kind::at(&path) {
            Some(kind) => Some(kind),
            None => {
                metrics.bad(BadRequest::UnknownPath);
                return text(StatusCode::NOT_FOUND, "no webhook at this path");
            }
        }
    };
    if req.method() != Method::POST {
        metrics.bad(BadRequest::UnknownPath);
        return text(StatusCode::METHOD_NOT_ALLOWED, "POST only");
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            metrics.bad(BadRequest::TooLarge);
            return text(StatusCode::PAYLOAD_TOO_LARGE, "body over the limit");
        }
        Err(_) => {
            metrics.bad(BadRequest::Connection);
            return text(StatusCode::BAD_REQUEST, "body not read");
        }
    };
    match target {
        Some(kind) => match handler.reviewer.answer(kind, &body).await {
            Ok((answer, allowed)) => {
                let counter = if allowed {
                    &metrics.allowed
                } else {
                    &metrics.denied
                };
                counter.fetch_add(1, Ordering::Relaxed);
                json(answer)
            }
            Err(e) => {
                metrics.bad(BadRequest::Malformed);
                text(StatusCode::BAD_REQUEST, e.to_string())
            }
        },
        None => match convert::review(&body) {
            Ok((answer, ok)) => {
                let counter = if ok {
                    &metrics.converted
                } else {
                    &metrics.conversion_failed
                };
                counter.fetch_add(1, Ordering::Relaxed);
                if !ok {
                    tracing::warn!(event = "webhook_conversion_failed", message = %answer["response"]["result"]["message"], "BGPPeer conversion failed");
                }
                json(serde_json::to_vec(&answer).unwrap_or_default())
            }
            Err(e) => {
                metrics.bad(BadRequest::Malformed);
                text(StatusCode::BAD_REQUEST, e.to_string())
            }
        },
    }
}

fn json(body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

fn text(status: StatusCode, message: impl Into<String>) -> Response<Full<Bytes>> {
    let mut message = message.into();
    message.push('\n');
    let mut r = Response::new(Full::new(Bytes::from(message)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
