//! The server on loopback, over real TLS, with requests the API server would never send:
//! each is refused with a 4xx and counted, and the server keeps answering.

use super::*;
use crate::webhook::certs;
use crate::webhook::tls::{CurrentCert, server_config};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use std::time::SystemTime;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NAME: &str = "metallb-webhook-service.metallb-system.svc";

struct Served {
    addr: std::net::SocketAddr,
    connector: tokio_rustls::TlsConnector,
    metrics: Arc<WebhookMetrics>,
}

async fn start() -> Served {
    let bundle = certs::new_all(NAME, SystemTime::now()).unwrap();
    let current = Arc::new(CurrentCert::default());
    current.set(&bundle.tls_cert, &bundle.tls_key).unwrap();
    let config = server_config(current, None).unwrap();
    // An API server nobody answers at: these requests never need it.
    let kube_config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    let client = kube::Client::try_from(kube_config).unwrap();
    let metrics = Arc::new(WebhookMetrics::default());
    let handler = Arc::new(Handler {
        reviewer: Reviewer::new(client, "metallb-system".into()),
        metrics: metrics.clone(),
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve(listener, config, handler, std::future::pending()));
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&bundle.ca_cert).unwrap())
        .unwrap();
    let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    Served {
        addr,
        connector: tokio_rustls::TlsConnector::from(Arc::new(client_config)),
        metrics,
    }
}

impl Served {
    /// Sends `head` then `body` over a new TLS connection; the status code answered.
    async fn send(&self, head: &str, body: &[u8]) -> u16 {
        let tcp = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let name = rustls_pki_types::ServerName::try_from(NAME).unwrap();
        let mut tls = self.connector.connect(name, tcp).await.unwrap();
        tls.write_all(head.as_bytes()).await.unwrap();
        // The server may answer (and close) before the whole of an oversized body is sent.
        let _ = tls.write_all(body).await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer)).await;
        let text = String::from_utf8_lossy(&answer);
        text.split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    async fn post(&self, path: &str, body: &[u8]) -> u16 {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        self.send(&head, body).await
    }
}

#[tokio::test]
async fn bad_requests_are_refused_and_counted() {
    let s = start().await;
    let pools = "/validate-metallb-io-v1beta1-ipaddresspool";
    assert_eq!(s.post(pools, b"{not json").await, 400);
    assert_eq!(s.post(pools, b"{}").await, 400);
    assert_eq!(s.metrics.bad_count(BadRequest::Malformed), 2);
    let huge = vec![b' '; MAX_BODY + 64 * 1024];
    assert_eq!(s.post(pools, &huge).await, 413);
    assert_eq!(s.metrics.bad_count(BadRequest::TooLarge), 1);
    assert_eq!(s.post("/validate-nothing", b"{}").await, 404);
    assert_eq!(
        s.send("GET /convert HTTP/1.1\r\nHost: x\r\n\r\n", b"")
            .await,
        405
    );
    assert_eq!(s.metrics.bad_count(BadRequest::UnknownPath), 2);
    // Not TLS at all.
    let mut plain = tokio::net::TcpStream::connect(s.addr).await.unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut sink)).await;
    for _ in 0..50 {
        if s.metrics.bad_count(BadRequest::Connection) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.metrics.bad_count(BadRequest::Connection), 1);

    // Still answering: a review that needs no listing (a BGPAdvertisement outside the
    // namespace is refused with MetalLB's message), and a conversion.
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "operation": "CREATE",
            "kind": {"group": "metallb.io", "version": "v1beta1", "kind": "BGPAdvertisement"},
            "resource": {"group": "metallb.io", "version": "v1beta1", "resource": "bgpadvertisements"},
            "name": "a", "namespace": "default", "userInfo": {},
            "object": {"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
                       "metadata": {"name": "a", "namespace": "default"}, "spec": {}},
        }
    });
    let body = serde_json::to_vec(&review).unwrap();
    assert_eq!(
        s.post("/validate-metallb-io-v1beta1-bgpadvertisement", &body)
            .await,
        200
    );
    assert_eq!(s.metrics.denied.load(Ordering::Relaxed), 1);
    let conversion = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u", "desiredAPIVersion": "metallb.io/v1beta2", "objects": [
            {"apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer", "metadata": {"name": "p"},
             "spec": {"myASN": 1, "peerASN": 2, "peerAddress": "198.18.0.1"}}]}
    });
    let body = serde_json::to_vec(&conversion).unwrap();
    assert_eq!(s.post("/convert", &body).await, 200);
    assert_eq!(s.metrics.converted.load(Ordering::Relaxed), 1);
}
