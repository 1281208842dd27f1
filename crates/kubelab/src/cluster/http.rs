//! HTTP GETs from inside a lab namespace: plain ([`http_get`]: the probe paths) and over TLS
//! with a bearer token ([`https_get`]: the metrics ports, which MetalLB and vigil serve over
//! HTTPS behind TokenReview and SubjectAccessReview; the certificate is not checked, as
//! MetalLB's ServiceMonitors' `insecureSkipVerify`). HTTP/1.0, so the answer is never chunked
//! and ends when the server closes the connection.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use vigil_observe::client::{self, Transport};

/// How long a connection and each read may take.
const LIMIT: Duration = Duration::from_secs(5);

/// An HTTP answer: the status code and the body.
pub type HttpAnswer = client::Answer;

/// `GET path` at `addr` from a thread inside lab namespace `ns` (5 s to connect, 5 s per
/// read).
pub fn http_get(ns: &str, addr: SocketAddr, path: &str) -> io::Result<HttpAnswer> {
    vigil_netlab::netns::run_in(ns, || {
        client::get(addr, path, None, Transport::Plain, LIMIT)
    })?
}

/// `GET path` at `addr` over TLS from a thread inside lab namespace `ns`, with
/// `Authorization: Bearer <token>` when a token is given. The server's certificate is not
/// checked (its handshake signature is).
pub fn https_get(
    ns: &str,
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> io::Result<HttpAnswer> {
    vigil_netlab::netns::run_in(ns, || client::get(addr, path, token, Transport::Tls, LIMIT))?
}
