//! The certificate kept as MetalLB's rotator keeps it: read the Secret `--webhook-secret`
//! (created when absent), replace what would not verify 90 days from now ([`certs`]), serve
//! it, write it to `--cert-dir`, and patch its CA into the webhook configurations that call
//! this server: every webhook of the ValidatingWebhookConfiguration
//! `metallb-webhook-configuration` and the conversion webhook of the CRD `bgppeers.metallb.io`
//! (when that CRD exists and converts by webhook).
//!
//! It checks again when the Secret or either configuration changes (someone re-applying
//! MetalLB's manifest blanks the CA bundle; a deleted Secret is made again), and at the latest
//! when the certificate nears its end (every 12 hours, as MetalLB's rotator).

use super::args::{BGPPEER_CRD, VALIDATING_WEBHOOK, WebhookSettings};
use super::certs::{self, Bundle, Verdict};
use super::metrics::WebhookMetrics;
use super::tls::CurrentCert;
use crate::FIELD_MANAGER;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

/// The longest wait between two checks (MetalLB's rotator's period).
const CHECK_PERIOD: Duration = Duration::from_secs(12 * 3600);
/// The wait after a failed check.
const RETRY: Duration = Duration::from_secs(5);

/// Why one check failed (retried after [`RETRY`]).
#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    /// The API server refused or failed a read or write.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The failure.
        source: kube::Error,
    },
    /// A certificate could not be made.
    #[error(transparent)]
    Cert(#[from] certs::CertError),
    /// The certificate made or read cannot be served.
    #[error(transparent)]
    Tls(#[from] super::tls::TlsError),
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> RotateError {
    let what = what.into();
    move |source| RotateError::Api { what, source }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Keeps the certificate until dropped: checks at start, on every change of the Secret or of
/// the two configurations, and before the certificate's end.
pub async fn keep_certificate(
    client: Client,
    settings: Arc<WebhookSettings>,
    current: Arc<CurrentCert>,
    metrics: Arc<WebhookMetrics>,
) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let named = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    // Each watch only says "look again"; what it saw is read afresh by the check. A failing
    // watch (no right to it, the API server away) backs off instead of spinning.
    let changes = futures::stream::select_all([
        watcher(secrets.clone(), named(&settings.secret_name))
            .default_backoff()
            .map(|_| ())
            .boxed(),
        watcher(hooks.clone(), named(VALIDATING_WEBHOOK))
            .default_backoff()
            .map(|_| ())
            .boxed(),
        watcher(crds.clone(), named(BGPPEER_CRD))
            .default_backoff()
            .map(|_| ())
            .boxed(),
    ]);
    tokio::pin!(changes);
    let mut served: Option<Bundle> = None;
    loop {
        let wait = match check(
            &secrets,
            &hooks,
            &crds,
            &settings,
            &current,
            &mut served,
            &metrics,
        )
        .await
        {
            Ok(next) => next
                .and_then(|t| t.duration_since(SystemTime::now()).ok())
                .unwrap_or(CHECK_PERIOD)
                .min(CHECK_PERIOD),
            Err(e) => {
                metrics.cert_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(event = "webhook_cert_failed", error = %e, "webhook certificate check failed; retrying");
                RETRY
            }
        };
        let deadline = tokio::time::sleep(wait);
        tokio::pin!(deadline);
        // Wait for a change (draining a burst of them) or the deadline.
        tokio::select! {
            _ = changes.next() => {
                while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), changes.next()).await {}
            }
            () = &mut deadline => {}
        }
    }
}

/// One check; returns when to check again at the latest.
async fn check(
    secrets: &Api<Secret>,
    hooks: &Api<ValidatingWebhookConfiguration>,
    crds: &Api<CustomResourceDefinition>,
    settings: &WebhookSettings,
    current: &CurrentCert,
    served: &mut Option<Bundle>,
    metrics: &WebhookMetrics,
) -> Result<Option<SystemTime>, RotateError> {
    let bundle = ensure_secret(secrets, settings, metrics).await?;
    if served.as_ref() != Some(&bundle) {
        current.set(&bundle.tls_cert, &bundle.tls_key)?;
        write_cert_dir(settings, &bundle).await;
        tracing::info!(event = "webhook_cert_served", secret = %settings.secret_name, "webhook certificate served");
        *served = Some(bundle.clone());
    }
    inject_validating(hooks, &bundle.ca_cert).await?;
    inject_conversion(crds, &bundle.ca_cert).await?;
    Ok(certs::next_check(&bundle))
}

/// The Secret's certificates, made anew (and written back) where they would not verify.
async fn ensure_secret(
    secrets: &Api<Secret>,
    settings: &WebhookSettings,
    metrics: &WebhookMetrics,
) -> Result<Bundle, RotateError> {
    let name = &settings.secret_name;
    let existing = match secrets.get(name).await {
        Ok(s) => Some(s),
        Err(e) if is_not_found(&e) => None,
        Err(e) => return Err(api(format!("reading Secret {name}"))(e)),
    };
    let data = existing
        .as_ref()
        .and_then(|s| s.data.clone())
        .unwrap_or_default();
    let get = |k: &str| data.get(k).map(|b| b.0.as_slice());
    let now = SystemTime::now();
    let verdict = certs::verdict(
        get(certs::CA_CERT),
        get(certs::CA_KEY),
        get(certs::TLS_CERT),
        get(certs::TLS_KEY),
        &settings.dns_name,
        now,
    );
    let bundle = match verdict {
        Verdict::Keep => {
            let field = |k: &str| get(k).unwrap_or_default().to_vec();
            return Ok(Bundle {
                ca_cert: field(certs::CA_CERT),
                ca_key: field(certs::CA_KEY),
                tls_cert: field(certs::TLS_CERT),
                tls_key: field(certs::TLS_KEY),
            });
        }
        Verdict::NewServing => {
            let (ca_cert, ca_key) = (get(certs::CA_CERT), get(certs::CA_KEY));
            certs::new_serving(
                ca_cert.unwrap_or_default(),
                ca_key.unwrap_or_default(),
                &settings.dns_name,
                now,
            )?
        }
        Verdict::NewAll => certs::new_all(&settings.dns_name, now)?,
    };
    let mut data = data;
    for (k, v) in [
        (certs::CA_CERT, &bundle.ca_cert),
        (certs::CA_KEY, &bundle.ca_key),
        (certs::TLS_CERT, &bundle.tls_cert),
        (certs::TLS_KEY, &bundle.tls_key),
    ] {
        data.insert(k.to_string(), ByteString(v.clone()));
    }
    let pp = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match existing {
        // The resourceVersion it carries makes a concurrent writer's change fail this
        // write; the next check reads theirs.
        Some(mut secret) => {
            secret.data = Some(data);
            secrets
                .replace(name, &pp, &secret)
                .await
                .map_err(api(format!("writing Secret {name}")))?;
        }
        None => {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                data: Some(data),
                ..Secret::default()
            };
            secrets
                .create(&pp, &secret)
                .await
                .map_err(api(format!("creating Secret {name}")))?;
        }
    }
    metrics.cert_rotations.fetch_add(1, Ordering::Relaxed);
    tracing::info!(event = "webhook_cert_made", secret = %name, ca = (verdict == Verdict::NewAll), "webhook certificate made");
    Ok(bundle)
}

/// Writes `tls.crt` and `tls.key` into `--cert-dir`. A read-only directory (MetalLB's
/// manifests mount the Secret there; the kubelet then updates it) is not an error: the server
/// serves from memory.
async fn write_cert_dir(settings: &WebhookSettings, bundle: &Bundle) {
    let (cert, key) = super::tls::cert_files(&settings.cert_dir);
    let result = async {
        tokio::fs::create_dir_all(&settings.cert_dir).await?;
        tokio::fs::write(&cert, &bundle.tls_cert).await?;
        tokio::fs::write(&key, &bundle.tls_key).await
    }
    .await;
    if let Err(e) = result {
        tracing::info!(event = "webhook_cert_dir_unwritable", dir = %settings.cert_dir.display(), error = %e, "--cert-dir not written (served from memory)");
    }
}

/// Sets the CA bundle of every webhook in MetalLB's ValidatingWebhookConfiguration (absent:
/// nothing to do, as MetalLB).
async fn inject_validating(
    hooks: &Api<ValidatingWebhookConfiguration>,
    ca: &[u8],
) -> Result<(), RotateError> {
    let mut config = match hooks.get(VALIDATING_WEBHOOK).await {
        Ok(c) => c,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => {
            return Err(api(format!(
                "reading ValidatingWebhookConfiguration {VALIDATING_WEBHOOK}"
            ))(e));
        }
    };
    if config.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let mut changed = false;
    for hook in config.webhooks.iter_mut().flatten() {
        if hook
            .client_config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.as_slice())
            != Some(ca)
        {
            hook.client_config.ca_bundle = Some(ByteString(ca.to_vec()));
            changed = true;
        }
    }
    if changed {
        hooks
            .replace(VALIDATING_WEBHOOK, &field_manager(), &config)
            .await
            .map_err(api(format!("patching the CA into {VALIDATING_WEBHOOK}")))?;
        tracing::info!(
            event = "webhook_ca_injected",
            target = VALIDATING_WEBHOOK,
            "webhook CA bundle set"
        );
    }
    Ok(())
}

/// Sets the CA bundle of the BGPPeer CRD's conversion webhook, when the CRD exists and
/// converts by webhook.
async fn inject_conversion(
    crds: &Api<CustomResourceDefinition>,
    ca: &[u8],
) -> Result<(), RotateError> {
    let mut crd = match crds.get(BGPPEER_CRD).await {
        Ok(c) => c,
        Err(e) if is_not_found(&e) => return Ok(()),
        Err(e) => return Err(api(format!("reading CRD {BGPPEER_CRD}"))(e)),
    };
    if crd.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let Some(client_config) = crd
        .spec
        .conversion
        .as_mut()
        .and_then(|c| c.webhook.as_mut())
        .and_then(|w| w.client_config.as_mut())
    else {
        return Ok(());
    };
    if client_config.ca_bundle.as_ref().map(|b| b.0.as_slice()) == Some(ca) {
        return Ok(());
    }
    client_config.ca_bundle = Some(ByteString(ca.to_vec()));
    crds.replace(BGPPEER_CRD, &field_manager(), &crd)
        .await
        .map_err(api(format!("patching the CA into CRD {BGPPEER_CRD}")))?;
    tracing::info!(
        event = "webhook_ca_injected",
        target = BGPPEER_CRD,
        "conversion webhook CA bundle set"
    );
    Ok(())
}

fn field_manager() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}
