//! The controller's command line and environment, with MetalLB's controller's names where
//! MetalLB has one, checked into [`Settings`] before anything starts.

use std::time::Duration;

/// Where a pod finds its own namespace.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// `vigil controller`'s flags. MetalLB's controller reads the same names (`--namespace` /
/// `METALLB_NAMESPACE`, `--ml-secret-name` / `METALLB_ML_SECRET_NAME`, `--deployment` /
/// `METALLB_DEPLOYMENT`, `--lb-class`), so a MetalLB manifest's arguments and environment
/// carry over.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Namespace of the IPAddressPools, the memberlist Secret and the leader Lease
    /// (default, as MetalLB: the pod's own, from its ServiceAccount token mount).
    #[arg(long, env = "METALLB_NAMESPACE")]
    pub namespace: Option<String>,
    /// Name of the memberlist Secret to create when it is missing; empty: create none.
    #[arg(
        long = "ml-secret-name",
        env = "METALLB_ML_SECRET_NAME",
        default_value = ""
    )]
    pub ml_secret_name: String,
    /// The controller's Deployment, made owner of a Secret created here (so deleting the
    /// Deployment removes the Secret, as with MetalLB); empty: no owner.
    #[arg(long, env = "METALLB_DEPLOYMENT", default_value = "")]
    pub deployment: String,
    /// Handle only Services whose `spec.loadBalancerClass` is this; empty: only Services
    /// without a class.
    #[arg(long = "lb-class", default_value = "")]
    pub lb_class: String,
    /// This Pod's name, MetalLB's `--pod-name`: the replica's identity in the Lease and the
    /// reporting instance of its Events (default: the host name). `--identity` is vigil's
    /// older name for it.
    #[arg(
        long = "pod-name",
        visible_alias = "identity",
        env = "METALLB_POD_NAME"
    )]
    pub identity: Option<String>,
    /// MetalLB's metrics port (HTTPS in MetalLB; 0 disables). What it serves is the metrics
    /// server's (`crates/vigil/src/cmd/controller.rs`).
    #[arg(long = "port", default_value_t = 9120)]
    pub port: u16,
    /// MetalLB's pprof address; accepted, nothing is served (vigil has no pprof).
    #[arg(long = "pprof-bind-address", default_value = "")]
    pub pprof_bind_address: String,
    /// MetalLB's BGP implementation (`METALLB_BGP_TYPE`), which MetalLB's controller reads
    /// only from the environment (the flag is vigil's, hidden): accepted, vigil has no BGP.
    #[arg(long = "bgp-type", env = "METALLB_BGP_TYPE", hide = true)]
    pub bgp_type: Option<String>,
    /// The Lease the replicas elect their leader on.
    #[arg(long, default_value = "vigil-controller")]
    pub lease_name: String,
    /// How long a leader's Lease lasts without renewal (whole seconds, at least 2): a killed
    /// leader is replaced within this time.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// How long before the Lease ends the leader renews it (less than the duration).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub lease_grace: Duration,
    /// How often the memberlist key is replaced (through the Secret's keyring; every live
    /// vigil speaker follows); 0 turns rotation off, as does an empty --ml-secret-name.
    #[arg(long, env = "VIGIL_KEY_ROTATION_PERIOD", default_value = "24h", value_parser = humantime::parse_duration)]
    pub key_rotation_period: Duration,
    /// The least time between two steps of a rotation (longer than the speakers'
    /// acknowledgement heartbeat).
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub key_rotation_settle: Duration,
    /// How long the old key stays accepted after the new one became primary at least (a
    /// speaker starting from a kubelet-mounted copy of the Secret, which lags, still finds
    /// the key in use).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub key_rotation_retain: Duration,
    /// Port of the `/healthz` and `/readyz` probes, as MetalLB's controller (0: none).
    #[arg(long = "health-probe-port", default_value_t = 17472)]
    pub health_probe_port: u16,
    /// Address to serve `/metrics` on (e.g. 0.0.0.0:7472); none by default.
    #[arg(long = "metrics-addr", env = "VIGIL_METRICS_ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// MetalLB's TLS flags for the metrics port (`vigil_observe::tls`).
    #[command(flatten)]
    pub tls: vigil_observe::tls::TlsArgs,
    /// MetalLB's webhook flags (`--webhook-mode`, `--cert-dir`, ...).
    #[command(flatten)]
    pub webhook: crate::webhook::WebhookArgs,
}

/// The key rotation's checked settings (`None` from [`Args::rotation`]: rotation is off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationFlags {
    /// The timing.
    pub policy: crate::rotation::Policy,
}

/// Checked settings: what [`crate::run`] takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Namespace of pools, Secret and Lease.
    pub namespace: String,
    /// The memberlist Secret to create when missing, if any.
    pub ml_secret_name: Option<String>,
    /// The Deployment owning a created Secret, if any.
    pub deployment: Option<String>,
    /// The load-balancer class handled (`None`: Services without a class).
    pub lb_class: Option<String>,
    /// This replica's Lease identity.
    pub identity: String,
    /// The Lease's name.
    pub lease_name: String,
    /// Lease duration in whole seconds.
    pub lease_seconds: u64,
    /// Renewal margin in whole seconds.
    pub grace_seconds: u64,
}

/// A flag that cannot be used, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// `--namespace` is empty.
    #[error(
        "--namespace (METALLB_NAMESPACE) must name a namespace (none given, and not running in a pod)"
    )]
    NoNamespace,
    /// `--lease-duration` is below 2 s or not whole seconds.
    #[error("--lease-duration {0:?} must be whole seconds, at least 2s")]
    LeaseDuration(Duration),
    /// `--lease-grace` is zero, not whole seconds, or not below the duration.
    #[error(
        "--lease-grace {0:?} must be whole seconds, at least 1s and less than --lease-duration"
    )]
    LeaseGrace(Duration),
    /// No identity given and no host name to fall back on.
    #[error("--pod-name (METALLB_POD_NAME) is empty and the host name is unknown")]
    NoIdentity,
    /// A rotation time that cannot work.
    #[error("--{flag} {value:?} must be at least 1s")]
    RotationTime {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: Duration,
    },
}

impl Args {
    /// Checks the flags.
    pub fn settings(&self) -> Result<Settings, ArgsError> {
        let namespace = match self.namespace.as_deref() {
            Some(ns) => ns.to_string(),
            None => std::fs::read_to_string(POD_NAMESPACE_FILE)
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
        };
        if namespace.is_empty() {
            return Err(ArgsError::NoNamespace);
        }
        let whole = |d: Duration| d.subsec_nanos() == 0;
        let lease = self.lease_duration;
        if !whole(lease) || lease < Duration::from_secs(2) {
            return Err(ArgsError::LeaseDuration(lease));
        }
        let grace = self.lease_grace;
        if !whole(grace) || grace.is_zero() || grace >= lease {
            return Err(ArgsError::LeaseGrace(grace));
        }
        let identity = match self.identity.as_deref().filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            None => host_name().ok_or(ArgsError::NoIdentity)?,
        };
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        Ok(Settings {
            namespace,
            ml_secret_name: non_empty(&self.ml_secret_name),
            deployment: non_empty(&self.deployment),
            lb_class: non_empty(&self.lb_class),
            identity,
            lease_name: self.lease_name.clone(),
            lease_seconds: lease.as_secs(),
            grace_seconds: grace.as_secs(),
        })
    }
}

impl Args {
    /// MetalLB's settings given here that have no effect in vigil, each as (setting, why),
    /// to be logged once.
    pub fn inactive(&self) -> Vec<(String, &'static str)> {
        let mut out = Vec::new();
        // MetalLB's default, "native", with no BGP object is pure Layer 2: nothing to say.
        if let Some(t) = self
            .bgp_type
            .as_deref()
            .filter(|t| !t.is_empty() && *t != "native")
        {
            out.push((
                format!("METALLB_BGP_TYPE={t}"),
                "vigil announces Layer 2 only: there is no BGP or FRR mode",
            ));
        }
        if !self.pprof_bind_address.is_empty() {
            out.push((
                format!("--pprof-bind-address={}", self.pprof_bind_address),
                "vigil serves no pprof (a Go runtime profiler)",
            ));
        }
        out
    }

    /// The rotation's settings, or `None` when `--key-rotation-period` is 0.
    pub fn rotation(&self) -> Result<Option<RotationFlags>, ArgsError> {
        if self.key_rotation_period.is_zero() {
            return Ok(None);
        }
        if self.ml_secret_name.is_empty() {
            // No Secret is managed here (MetalLB's manifests always name one).
            return Ok(None);
        }
        for (flag, value) in [
            ("key-rotation-period", self.key_rotation_period),
            ("key-rotation-settle", self.key_rotation_settle),
        ] {
            if value < Duration::from_secs(1) {
                return Err(ArgsError::RotationTime { flag, value });
            }
        }
        Ok(Some(RotationFlags {
            policy: crate::rotation::Policy {
                period: self.key_rotation_period,
                settle: self.key_rotation_settle,
                retain: self.key_rotation_retain,
            },
        }))
    }
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Settings, ArgsError> {
        let mut full = vec!["controller"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).unwrap().args.settings()
    }

    #[test]
    fn metallb_flag_names_and_defaults() {
        let s = parse(&[
            "--namespace=metallb-system",
            "--ml-secret-name=memberlist",
            "--lb-class=vigil",
            "--identity=a",
        ])
        .unwrap();
        assert_eq!(s.namespace, "metallb-system");
        assert_eq!(s.ml_secret_name.as_deref(), Some("memberlist"));
        assert_eq!(s.deployment, None);
        assert_eq!(s.lb_class.as_deref(), Some("vigil"));
        assert_eq!((s.lease_seconds, s.grace_seconds), (15, 5));
    }

    #[test]
    fn metallb_controller_flags_are_accepted() {
        let cli = Cli::try_parse_from([
            "controller",
            "--port=9120",
            "--pod-name=controller-abc",
            "--pprof-bind-address=127.0.0.1:6060",
            "--bgp-type=frr-k8s",
            "--namespace=metallb-system",
        ])
        .unwrap();
        assert_eq!(cli.args.port, 9120);
        assert_eq!(cli.args.settings().unwrap().identity, "controller-abc");
        let said: Vec<String> = cli.args.inactive().into_iter().map(|(s, _)| s).collect();
        assert_eq!(
            said,
            [
                "METALLB_BGP_TYPE=frr-k8s",
                "--pprof-bind-address=127.0.0.1:6060"
            ]
        );
        // vigil's older spelling still works.
        let old = Cli::try_parse_from(["controller", "--identity=x", "--namespace=n"]).unwrap();
        assert_eq!(old.args.settings().unwrap().identity, "x");
    }

    #[test]
    fn rotation_flags() {
        let rotation = |argv: &[&str]| {
            let mut full = vec!["controller"];
            full.extend_from_slice(argv);
            Cli::try_parse_from(full).unwrap().args.rotation()
        };
        let on = rotation(&["--ml-secret-name=memberlist"]).unwrap().unwrap();
        assert_eq!(on.policy.period, Duration::from_secs(24 * 3600));
        assert_eq!(rotation(&["--key-rotation-period=0"]), Ok(None));
        // No Secret named: nothing to rotate.
        assert_eq!(rotation(&[]), Ok(None));
        let e = rotation(&["--ml-secret-name=m", "--key-rotation-settle=10ms"]).unwrap_err();
        assert!(e.to_string().contains("--key-rotation-settle"), "{e}");
    }

    #[test]
    fn bad_lease_times_are_named() {
        let e = parse(&["--namespace=x", "--identity=a", "--lease-duration=1500ms"]).unwrap_err();
        assert!(e.to_string().contains("--lease-duration"), "{e}");
        let e = parse(&[
            "--namespace=x",
            "--identity=a",
            "--lease-duration=4s",
            "--lease-grace=4s",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("--lease-grace"), "{e}");
        assert_eq!(
            parse(&["--namespace=", "--identity=a"]).unwrap_err(),
            ArgsError::NoNamespace
        );
    }
}
