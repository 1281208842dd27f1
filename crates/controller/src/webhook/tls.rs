//! The webhook's TLS: one server configuration whose certificate can be swapped while
//! connections are accepted (a renewed certificate is served from the next handshake on),
//! and the watch on `--cert-dir` used when MetalLB's rotation is turned off.
//!
//! As MetalLB's webhook server: TLS 1.3 only (MetalLB's default minimum; its `--tls-*` flags
//! apply) and HTTP/1.1 offered by ALPN.

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// How often `--cert-dir` is read for a changed certificate.
pub const CERT_DIR_POLL: Duration = Duration::from_secs(10);

/// Why a certificate could not be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate PEM holds no certificate or a bad one.
    #[error("tls.crt: no certificate in it ({0})")]
    Cert(String),
    /// The key PEM holds no usable private key.
    #[error("tls.key: no usable private key in it ({0})")]
    Key(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// MetalLB's TLS flags could not be applied.
    #[error("--tls-* flags: {0}")]
    Settings(String),
}

/// The certificate being served, swappable.
#[derive(Debug, Default)]
pub struct CurrentCert {
    key: RwLock<Option<Arc<CertifiedKey>>>,
}

impl CurrentCert {
    /// Serves `cert`/`key` (PEM) from the next handshake on.
    pub fn set(&self, cert: &[u8], key: &[u8]) -> Result<(), TlsError> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<_, _>>()
            .map_err(|e| TlsError::Cert(e.to_string()))?;
        if chain.is_empty() {
            return Err(TlsError::Cert("empty".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| TlsError::Key(e.to_string()))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| TlsError::Key(e.to_string()))?;
        let certified = Arc::new(CertifiedKey::new(chain, signing));
        *self.key.write().unwrap_or_else(|p| p.into_inner()) = Some(certified);
        Ok(())
    }

    /// Whether a certificate is being served.
    pub fn is_set(&self) -> bool {
        self.key.read().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// The served certificate (DER of the first in the chain), if any.
    pub fn served(&self) -> Option<Vec<u8>> {
        let key = self.key.read().unwrap_or_else(|p| p.into_inner());
        key.as_ref()
            .and_then(|k| k.cert.first())
            .map(|c| c.as_ref().to_vec())
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // No certificate yet: the handshake fails (the API server retries).
        self.key.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The server configuration serving whatever `current` holds: TLS 1.3 only, or as MetalLB's
/// `--tls-min-version`, `--tls-cipher-suites` and `--tls-curve-preferences` say when given
/// (MetalLB applies them to its webhook server as to its metrics server).
pub fn server_config(
    current: Arc<CurrentCert>,
    settings: Option<&vigil_observe::tls::TlsSettings>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let config = match settings {
        Some(settings) => {
            let built = settings
                .server_config(current)
                .map_err(|e| TlsError::Settings(e.to_string()))?;
            Arc::unwrap_or_clone(built)
        }
        None => {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ServerConfig::builder_with_provider(provider)
                .with_protocol_versions(&[&rustls::version::TLS13])?
                .with_no_client_auth()
                .with_cert_resolver(current)
        }
    };
    let mut config = config;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// `tls.crt` and `tls.key` in `dir`.
pub fn cert_files(dir: &Path) -> (PathBuf, PathBuf) {
    (
        dir.join(super::certs::TLS_CERT),
        dir.join(super::certs::TLS_KEY),
    )
}

/// With rotation off: serves `--cert-dir`'s certificate, read again every `poll`
/// ([`CERT_DIR_POLL`]) and swapped in when its bytes change (a kubelet-mounted Secret changes
/// by a symlink swap, which a content comparison sees). Runs until dropped.
pub async fn follow_cert_dir(dir: PathBuf, current: Arc<CurrentCert>, poll: Duration) {
    let (cert_path, key_path) = cert_files(&dir);
    let mut served: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut warned = false;
    loop {
        let read = (
            tokio::fs::read(&cert_path).await,
            tokio::fs::read(&key_path).await,
        );
        match read {
            (Ok(cert), Ok(key)) => {
                if served.as_ref() != Some(&(cert.clone(), key.clone())) {
                    match current.set(&cert, &key) {
                        Ok(()) => {
                            tracing::info!(event = "webhook_cert_loaded", dir = %dir.display(), "webhook certificate loaded from --cert-dir");
                            warned = false;
                        }
                        Err(e) => {
                            tracing::warn!(event = "webhook_cert_bad", dir = %dir.display(), error = %e, "webhook certificate in --cert-dir unusable");
                        }
                    }
                    served = Some((cert, key));
                }
            }
            (c, k) => {
                if !warned {
                    let e = c
                        .err()
                        .or(k.err())
                        .map(|e| e.to_string())
                        .unwrap_or_default();
                    tracing::warn!(event = "webhook_cert_missing", dir = %dir.display(), error = %e, "no webhook certificate in --cert-dir yet");
                    warned = true;
                }
            }
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::certs;
    use std::time::SystemTime;

    /// `--disable-cert-rotation`: the directory's certificate is served, and a new one
    /// replaces it once written (as the kubelet updates a mounted Secret).
    #[tokio::test]
    async fn the_cert_dir_is_followed() {
        let dir = std::env::temp_dir().join(format!("vigil-webhook-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = "metallb-webhook-service.metallb-system.svc";
        let first = certs::new_all(name, SystemTime::now()).unwrap();
        let (cert, key) = cert_files(&dir);
        std::fs::write(&cert, &first.tls_cert).unwrap();
        std::fs::write(&key, &first.tls_key).unwrap();
        let current = Arc::new(CurrentCert::default());
        let follow = tokio::spawn(follow_cert_dir(
            dir.clone(),
            current.clone(),
            Duration::from_millis(20),
        ));
        let served = |c: &CurrentCert| c.served();
        let der = |pem: &[u8]| {
            CertificateDer::from_pem_slice(pem)
                .unwrap()
                .as_ref()
                .to_vec()
        };
        let mut seen = Vec::new();
        for _ in 0..250 {
            if let Some(s) = served(&current) {
                seen.push(s);
                if seen.last() == Some(&der(&first.tls_cert)) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(served(&current), Some(der(&first.tls_cert)));
        let second =
            certs::new_serving(&first.ca_cert, &first.ca_key, name, SystemTime::now()).unwrap();
        std::fs::write(&key, &second.tls_key).unwrap();
        std::fs::write(&cert, &second.tls_cert).unwrap();
        for _ in 0..250 {
            if served(&current) == Some(der(&second.tls_cert)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        follow.abort();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(served(&current), Some(der(&second.tls_cert)));
    }
}
