//! The one client for vigil's own endpoints (`vigil status`, the labs and tests): a blocking
//! HTTP/1.0 GET, plain or over TLS with a bearer token. HTTP/1.0 so the answer is never
//! chunked and ends when the server closes the connection. Over TLS the server's certificate
//! is not checked (its handshake signatures are), as MetalLB's ServiceMonitors'
//! `insecureSkipVerify`: the metrics port's certificate is self-signed unless the operator
//! gave one, and what protects the answer is the bearer token the server reviews.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// The largest answer read (a `/status` of thousands of VIPs fits many times over).
const MAX_ANSWER: u64 = 16 * 1024 * 1024;

/// An HTTP answer: the status code and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Everything after the head.
    pub body: String,
}

/// How to reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Plain HTTP (standalone mode's port, the probe ports).
    Plain,
    /// TLS, the certificate not checked (the metrics port in Kubernetes mode).
    Tls,
}

/// `GET path` at `addr`, with `Authorization: Bearer <token>` when a token is given; `limit`
/// bounds the connect and each read and write.
pub fn get(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    transport: Transport,
    limit: Duration,
) -> io::Result<Answer> {
    let request = match token {
        Some(t) => {
            format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {t}\r\n\r\n")
        }
        None => format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n"),
    };
    let mut tcp = TcpStream::connect_timeout(&addr, limit)?;
    tcp.set_read_timeout(Some(limit))?;
    tcp.set_write_timeout(Some(limit))?;
    let mut bytes = Vec::new();
    // A server that closes without close_notify ends a TLS read with an error after the
    // answer: the answer decides, the error is kept for the message.
    let ended = match transport {
        Transport::Plain => {
            tcp.write_all(request.as_bytes())?;
            (&mut tcp).take(MAX_ANSWER).read_to_end(&mut bytes)
        }
        Transport::Tls => {
            let mut tls = tls_connection(addr)?;
            let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
            stream.write_all(request.as_bytes())?;
            stream.take(MAX_ANSWER).read_to_end(&mut bytes)
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    parse(&text).ok_or_else(|| {
        io::Error::other(format!(
            "GET {path} at {addr}: no HTTP answer ({ended:?}): {text:?}"
        ))
    })
}

fn tls_connection(addr: SocketAddr) -> io::Result<rustls::ClientConnection> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(io::Error::other)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    rustls::ClientConnection::new(Arc::new(config), name).map_err(io::Error::other)
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
fn parse(text: &str) -> Option<Answer> {
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head
        .strip_prefix("HTTP/1.")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(Answer {
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
