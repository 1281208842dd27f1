//! The webhook's flags: MetalLB's controller's names, defaults and meanings (v0.16.2,
//! `controller/main.go`), so MetalLB's manifests and chart start `vigil controller` unchanged.

use std::path::PathBuf;

/// What the controller process does (MetalLB's `--webhook-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WebhookMode {
    /// Allocate and serve the webhooks (MetalLB's default).
    Enabled,
    /// Allocate only: no webhook server, no certificate rotation.
    Disabled,
    /// Serve the webhooks only: no allocation, no leader election (the memberlist Secret is
    /// still ensured, as MetalLB does).
    #[value(name = "onlywebhook")]
    OnlyWebhook,
}

/// The webhook's flags (flattened into the controller's command line).
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookArgs {
    /// enabled: allocate and serve the webhooks; disabled: allocate only; onlywebhook: serve
    /// the webhooks only.
    #[arg(long = "webhook-mode", value_enum, default_value = "enabled")]
    pub webhook_mode: WebhookMode,
    /// Do not make or rotate the webhook certificate: serve the one in --cert-dir
    /// (tls.crt, tls.key), reloaded when it changes.
    #[arg(
        long = "disable-cert-rotation",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub disable_cert_rotation: bool,
    /// Where the serving certificate is written (and read from with
    /// --disable-cert-rotation).
    #[arg(
        long = "cert-dir",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    pub cert_dir: PathBuf,
    /// The webhook Service's name: the certificate is for `<name>.<namespace>.svc`.
    #[arg(long = "cert-service-name", default_value = "metallb-webhook-service")]
    pub cert_service_name: String,
    /// The Secret that keeps the webhook's CA and serving certificate.
    #[arg(long = "webhook-secret", default_value = "metallb-webhook-cert")]
    pub webhook_secret: String,
    /// Offer HTTP/2 on the webhook port (MetalLB offers only HTTP/1.1 unless set). Accepted;
    /// vigil serves HTTP/1.1 either way (every API server speaks it).
    #[arg(
        long = "webhook-http2",
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub webhook_http2: bool,
    /// The webhook server's port (MetalLB's is fixed at 9443; vigil's own flag, for tests
    /// that run two webhook servers side by side).
    #[arg(long = "webhook-port", default_value_t = 9443)]
    pub webhook_port: u16,
}

/// The webhook's checked settings (see [`WebhookArgs::settings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The MetalLB namespace: objects are accepted only there, the Secret lives there.
    pub namespace: String,
    /// Make and rotate the certificate (else read it from `cert_dir`).
    pub rotate: bool,
    /// The certificate directory.
    pub cert_dir: PathBuf,
    /// The name the serving certificate is for: `<service>.<namespace>.svc`.
    pub dns_name: String,
    /// The certificate Secret's name.
    pub secret_name: String,
    /// The port served.
    pub port: u16,
    /// `--webhook-http2` was given (HTTP/1.1 is served anyway; said once in the log).
    pub http2_asked: bool,
}

/// The ValidatingWebhookConfiguration whose CA bundle is kept (MetalLB's fixed name).
pub const VALIDATING_WEBHOOK: &str = "metallb-webhook-configuration";
/// The CRD whose conversion webhook's CA bundle is kept (MetalLB's fixed name).
pub const BGPPEER_CRD: &str = "bgppeers.metallb.io";

impl WebhookArgs {
    /// Whether the allocation runs (all modes but `onlywebhook`).
    pub fn allocates(&self) -> bool {
        self.webhook_mode != WebhookMode::OnlyWebhook
    }

    /// The webhook's settings in `namespace`, or `None` when `--webhook-mode=disabled`.
    pub fn settings(&self, namespace: &str) -> Option<WebhookSettings> {
        if self.webhook_mode == WebhookMode::Disabled {
            return None;
        }
        Some(WebhookSettings {
            namespace: namespace.to_string(),
            rotate: !self.disable_cert_rotation,
            cert_dir: self.cert_dir.clone(),
            dns_name: format!("{}.{namespace}.svc", self.cert_service_name),
            secret_name: self.webhook_secret.clone(),
            port: self.webhook_port,
            http2_asked: self.webhook_http2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        webhook: WebhookArgs,
    }

    fn parse(argv: &[&str]) -> WebhookArgs {
        let mut full = vec!["controller"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).unwrap().webhook
    }

    #[test]
    fn metallb_defaults() {
        let a = parse(&[]);
        assert_eq!(a.webhook_mode, WebhookMode::Enabled);
        let s = a.settings("metallb-system").unwrap();
        assert_eq!(s.dns_name, "metallb-webhook-service.metallb-system.svc");
        assert_eq!(s.secret_name, "metallb-webhook-cert");
        assert_eq!(
            s.cert_dir,
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
        );
        assert_eq!(s.port, 9443);
        assert!(s.rotate);
    }

    #[test]
    fn modes_and_go_style_booleans() {
        assert_eq!(parse(&["--webhook-mode=disabled"]).settings("m"), None);
        let only = parse(&["--webhook-mode=onlywebhook", "--disable-cert-rotation"]);
        assert!(!only.allocates());
        assert!(!only.settings("m").unwrap().rotate);
        let off = parse(&["--disable-cert-rotation=false", "--webhook-http2=true"]);
        assert!(off.settings("m").unwrap().rotate);
        assert!(off.webhook_http2);
        let bad = Cli::try_parse_from(["controller", "--webhook-mode=sometimes"]);
        assert!(bad.is_err());
    }
}
