//! MetalLB's webhooks, served by `vigil controller` as MetalLB v0.16.2's controller serves
//! them: the same port (9443), paths, certificate Secret (kept and rotated), CA bundle
//! patched into `metallb-webhook-configuration` and the BGPPeer CRD's conversion, and the
//! same verdicts and messages, so MetalLB's ValidatingWebhookConfiguration and Service work
//! unchanged when vigil runs in the controller's Pod.
//!
//! - [`args`]: `--webhook-mode`, `--disable-cert-rotation`, `--cert-dir`,
//!   `--cert-service-name`, `--webhook-secret`, `--webhook-http2` (MetalLB's names).
//! - [`certs`]: the CA and serving certificate, made and judged (no I/O).
//! - [`rotator`]: the Secret, `--cert-dir` and the CA bundles kept.
//! - [`tls`]: the swappable served certificate; `--cert-dir` followed when rotation is off.
//! - [`validate`]: the verdicts (pure; pools and L2Advertisements through the one
//!   configuration reader, `vigil_metallb::config`).
//! - [`review`]: AdmissionReview in and out, the listing the verdicts need.
//! - [`convert`]: BGPPeer v1beta1 ↔ v1beta2 (pure).
//! - [`server`]: TLS, HTTP and the bounds on both.
//! - [`metrics`]: the counters.

pub mod args;
pub mod certs;
pub mod convert;
pub mod metrics;
pub mod review;
pub mod rotator;
pub mod server;
pub mod tls;
pub mod validate;

pub use args::{WebhookArgs, WebhookMode, WebhookSettings};
pub use metrics::WebhookMetrics;

use kube::Client;
use std::future::Future;
use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The port could not be bound.
    #[error("webhook port {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS configuration could not be built.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
}

/// The webhook server, its port bound.
pub struct Webhook {
    listener: tokio::net::TcpListener,
    settings: WebhookSettings,
}

impl Webhook {
    /// Binds the webhook port on every address, as MetalLB does (a port in use is an error:
    /// MetalLB's controller does not start either).
    pub async fn bind(settings: WebhookSettings) -> Result<Self, WebhookError> {
        let addr = SocketAddr::from((Ipv6Addr::UNSPECIFIED, settings.port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WebhookError::Bind { addr, source })?;
        Ok(Self { listener, settings })
    }

    /// The address bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves the webhooks until `shutdown` completes: keeps the certificate (or follows
    /// `--cert-dir` with rotation off) and answers, with MetalLB's `--tls-*` flags when given. Certificate troubles are retried and
    /// logged; until a certificate is served, handshakes fail and the API server retries.
    pub async fn serve(
        self,
        client: Client,
        metrics: Arc<WebhookMetrics>,
        tls_flags: Option<vigil_observe::tls::TlsSettings>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), WebhookError> {
        if self.settings.http2_asked {
            tracing::info!(
                event = "setting_inactive",
                setting = "--webhook-http2",
                "HTTP/1.1 is served (every API server speaks it); HTTP/2 is not offered"
            );
        }
        let current = Arc::new(tls::CurrentCert::default());
        let config = tls::server_config(current.clone(), tls_flags.as_ref())?;
        let settings = Arc::new(self.settings);
        let keeper = if settings.rotate {
            tokio::spawn(rotator::keep_certificate(
                client.clone(),
                settings.clone(),
                current.clone(),
                metrics.clone(),
            ))
        } else {
            tokio::spawn(tls::follow_cert_dir(
                settings.cert_dir.clone(),
                current.clone(),
                tls::CERT_DIR_POLL,
            ))
        };
        tracing::info!(
            event = "webhook_serving",
            port = settings.port,
            rotate = settings.rotate,
            "webhook server listening"
        );
        let handler = Arc::new(server::Handler {
            reviewer: review::Reviewer::new(client, settings.namespace.clone()),
            metrics,
        });
        server::serve(self.listener, config, handler, shutdown).await;
        keeper.abort();
        Ok(())
    }
}

/// `--webhook-mode=onlywebhook`: what the controller does besides the webhook, as MetalLB's
/// does in that mode: ensure the memberlist Secret, then nothing (no election, no
/// allocation) until `shutdown`.
pub async fn without_allocation(
    settings: &crate::Settings,
    client: &Client,
    shutdown: impl Future<Output = ()>,
) -> Result<(), crate::secret::SecretError> {
    if let Some(name) = &settings.ml_secret_name {
        crate::secret::ensure_memberlist_secret(
            client,
            &settings.namespace,
            name,
            settings.deployment.as_deref(),
        )
        .await?;
    }
    tracing::info!(
        event = "webhook_only",
        "--webhook-mode=onlywebhook: no allocation"
    );
    shutdown.await;
    Ok(())
}
