//! HTTP GETs from inside a lab namespace: plain ([`http_get`]: the probe paths) and over TLS
//! with a bearer token ([`https_get`]: the metrics ports, which MetalLB and vigil serve over
//! HTTPS behind TokenReview and SubjectAccessReview; the certificate is not checked, as
//! MetalLB's ServiceMonitors' `insecureSkipVerify`). HTTP/1.0, so the answer is never chunked
//! and ends when the server closes the connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// How long a connection and each read may take.
const LIMIT: Duration = Duration::from_secs(5);

/// An HTTP answer: the status code and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// Everything after the head.
    pub body: String,
}

/// `GET path` at `addr` from a thread inside lab namespace `ns` (5 s to connect, 5 s per
/// read).
pub fn http_get(ns: &str, addr: SocketAddr, path: &str) -> io::Result<HttpAnswer> {
    vigil_netlab::netns::run_in(ns, || get(addr, path))?
}

fn get(addr: SocketAddr, path: &str) -> io::Result<HttpAnswer> {
    let mut stream = TcpStream::connect_timeout(&addr, LIMIT)?;
    stream.set_read_timeout(Some(LIMIT))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    parse(&text)
        .ok_or_else(|| io::Error::other(format!("GET {path} at {addr}: no HTTP answer: {text:?}")))
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
    let request = match token {
        Some(t) => {
            format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {t}\r\n\r\n")
        }
        None => format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"),
    };
    vigil_netlab::netns::run_in(ns, || tls_get(addr, &request))?
}

fn tls_get(addr: SocketAddr, request: &str) -> io::Result<HttpAnswer> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let mut tls =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)?;
    let mut tcp = TcpStream::connect_timeout(&addr, LIMIT)?;
    tcp.set_read_timeout(Some(LIMIT))?;
    let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
    stream.write_all(request.as_bytes())?;
    let mut bytes = Vec::new();
    // A server that closes without close_notify ends the read with an error after the answer.
    let ended = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    match parse(&text) {
        Some(answer) => Ok(answer),
        None => Err(io::Error::other(format!(
            "GET over TLS at {addr}: no HTTP answer ({ended:?}): {text:?}"
        ))),
    }
}

/// A verifier that takes any certificate (`insecureSkipVerify`), checking only the
/// handshake's signatures.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The status code and body of a whole HTTP answer (`None`: not one).
fn parse(text: &str) -> Option<HttpAnswer> {
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .strip_prefix("HTTP/1.")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(HttpAnswer {
        status,
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_split_into_status_and_body_and_junk_is_none() {
        let answer = parse("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\na 1").unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, "a 1");
        assert_eq!(parse("HTTP/1.0 404 Not Found\r\n\r\n").unwrap().status, 404);
        assert_eq!(parse("SSH-2.0-x\r\n\r\n"), None);
        assert_eq!(parse("HTTP/1.1 200 OK\r\n"), None);
    }
}
