//! The speaker's command line and environment, as MetalLB's speaker takes them
//! (`speaker/main.go`, v0.16.2), so a DaemonSet can swap only its image. Parsing only.
//!
//! Every flag reads its MetalLB environment variable when not given; a flag beats the
//! environment; an empty variable counts as unset (Go's `os.Getenv` default). Go's flag
//! package also accepts one dash (`-port=9120`) and `--flag=false` for booleans: so does this
//! (see [`go_style_args`]).

use crate::secret::KeyDerivation;
use crate::selector::{Selector, SelectorError};
use clap::{ArgAction, Parser};
use std::net::IpAddr;
use std::path::PathBuf;

/// MetalLB's default metrics port (HTTPS since v0.16; 0 disables).
pub const DEFAULT_METRICS_PORT: u16 = 9120;
/// MetalLB's default health-probe port (bound to 127.0.0.1).
pub const DEFAULT_HEALTH_PROBE_PORT: u16 = 17472;
/// memberlist's default port, used when `METALLB_ML_BIND_PORT` is unset.
pub const DEFAULT_ML_PORT: u16 = 7946;

/// The flags and variables, as given.
#[derive(Debug, Clone, Parser, PartialEq, Eq)]
#[command(
    name = "speaker",
    about = "vigil speaker, Kubernetes mode (MetalLB's flags)"
)]
pub struct SpeakerArgs {
    /// Name of this Kubernetes node (spec.nodeName); required.
    #[arg(long = "node-name", env = "METALLB_NODE_NAME")]
    pub node_name: Option<String>,
    /// Name of this speaker Pod (owner of the status objects it writes).
    #[arg(long = "pod-name", env = "METALLB_POD_NAME")]
    pub pod_name: Option<String>,
    /// MetalLB's namespace (configuration objects, speaker Pods); else the service account's.
    #[arg(long = "namespace", env = "METALLB_NAMESPACE")]
    pub namespace: Option<String>,
    /// Deprecated and unused, as in MetalLB.
    #[arg(long = "host", env = "METALLB_HOST")]
    pub host: Option<String>,
    /// memberlist bind address (the pod IP); with `--ml-labels`, enables memberlist.
    #[arg(long = "ml-bindaddr", env = "METALLB_ML_BIND_ADDR")]
    pub ml_bind_addr: Option<String>,
    /// memberlist bind and advertise port (default 7946).
    #[arg(long = "ml-bindport", env = "METALLB_ML_BIND_PORT")]
    pub ml_bind_port: Option<String>,
    /// Label selector of the speaker Pods (peers); with `--ml-bindaddr`, enables memberlist.
    #[arg(long = "ml-labels", env = "METALLB_ML_LABELS")]
    pub ml_labels: Option<String>,
    /// Namespace of the speaker Pods (MetalLB 0.9's variable; later ones use `--namespace`).
    #[arg(long = "ml-namespace", env = "METALLB_ML_NAMESPACE")]
    pub ml_namespace: Option<String>,
    /// Directory holding the memberlist key file `secretkey`.
    #[arg(long = "ml-secret-key-path", env = "METALLB_ML_SECRET_KEY_PATH")]
    pub ml_secret_key_path: Option<PathBuf>,
    /// Start from memberlist's WAN defaults (ignored when the tuning file exists).
    #[arg(long = "ml-wan-config", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub ml_wan_config: bool,
    /// Handle only Services of this loadBalancerClass (none: only Services without a class).
    #[arg(long = "lb-class", default_value = "")]
    pub lb_class: String,
    /// Ignore the exclude-from-external-load-balancers node label.
    #[arg(long = "ignore-exclude-lb", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub ignore_exclude_lb: bool,
    /// all, debug, info, warn, error or none.
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
    /// Metrics port (0 disables).
    #[arg(long = "port", default_value_t = DEFAULT_METRICS_PORT)]
    pub port: u16,
    /// Health-probe port.
    #[arg(long = "health-probe-port", default_value_t = DEFAULT_HEALTH_PROBE_PORT)]
    pub health_probe_port: u16,
    /// Kubeconfig file (default: in-cluster configuration).
    #[arg(long = "kubeconfig", env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// vigil: which MetalLB release's memberlist key derivation to use (sha256 = v0.16.2+,
    /// v0.14 = v0.14.0 to v0.16.1, v0.13).
    #[arg(
        long = "ml-key-derivation",
        env = "VIGIL_ML_KEY_DERIVATION",
        default_value = "sha256"
    )]
    pub ml_key_derivation: KeyDerivation,
    /// Period in whole seconds of the gratuitous ARP / NDP refresh for owned IPs (0: none),
    /// MetalLB's name for vigil's `--refresh`.
    #[arg(
        long = "gratuitous-arp-interval",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub gratuitous_arp_interval: i64,
    /// MetalLB's pprof address; accepted, nothing is served (vigil has no pprof).
    #[arg(long = "pprof-bind-address", default_value = "")]
    pub pprof_bind_address: String,
    /// MetalLB's FRR reload debounce in milliseconds; accepted and checked as MetalLB does
    /// (a positive integer), without effect: vigil has no BGP.
    #[arg(long = "bgp-debounce-timeout", env = "METALLB_BGP_DEBOUNCE_TIMEOUT")]
    pub bgp_debounce_timeout: Option<String>,
    /// frr-k8s's namespace; accepted, without effect (no BGP).
    #[arg(long = "frrk8s-namespace", env = "FRRK8S_NAMESPACE")]
    pub frrk8s_namespace: Option<String>,
    /// Pass BGP secret references to frr-k8s; accepted, without effect (no BGP).
    #[arg(long = "frrk8s-secret-passthrough", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub frrk8s_secret_passthrough: bool,
    /// MetalLB's BGP implementation (`METALLB_BGP_TYPE`: native, frr, frr-k8s); read only
    /// from the environment in MetalLB (the flag is vigil's, hidden).
    #[arg(long = "bgp-type", env = "METALLB_BGP_TYPE", hide = true)]
    pub bgp_type: Option<String>,
    /// MetalLB's TLS flags for the metrics port (`vigil_observe::tls`).
    #[command(flatten)]
    pub tls: vigil_observe::tls::TlsArgs,
    /// vigil's split-brain guard, off by default as MetalLB has none: a node announces only
    /// while it sees a majority of the speaker Pods' nodes live in its gossip view.
    #[arg(long = "majority-guard", env = "VIGIL_MAJORITY_GUARD", action = ArgAction::Set, num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    pub majority_guard: bool,
}

/// The largest `--gratuitous-arp-interval` MetalLB accepts (a Go `int32`).
pub const MAX_GRATUITOUS_ARP_INTERVAL: i64 = i32::MAX as i64;

/// A setting accepted for MetalLB's sake that has no effect in vigil (a mode vigil lacks);
/// the speaker and controller log each once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inactive {
    /// The flag or variable, as given.
    pub setting: String,
    /// Why it does nothing here.
    pub reason: &'static str,
}

/// What vigil says of a BGP setting.
pub const NO_BGP: &str = "vigil announces Layer 2 only: there is no BGP or FRR mode";

/// The settings of MetalLB's BGP modes found in `bgp_type` and friends, each as an
/// [`Inactive`] (shared with the controller, which reads `METALLB_BGP_TYPE` too).
pub fn bgp_type_inactive(bgp_type: Option<&str>) -> Option<Inactive> {
    // MetalLB's default, "native", with no BGP object means pure L2: nothing to say.
    let t = bgp_type.filter(|t| !t.is_empty() && *t != "native")?;
    Some(Inactive {
        setting: format!("METALLB_BGP_TYPE={t}"),
        reason: NO_BGP,
    })
}

/// MetalLB's log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Everything.
    All,
    /// Debug and up.
    Debug,
    /// Info and up.
    Info,
    /// Warnings and errors.
    Warn,
    /// Errors.
    Error,
    /// Nothing.
    None,
}

/// memberlist settings, present when both `--ml-labels` and `--ml-bindaddr` are set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Memberlist {
    /// Bind address.
    pub bind_addr: IpAddr,
    /// Bind and advertise port.
    pub bind_port: u16,
    /// The speaker Pods' selector.
    pub labels: Selector,
    /// Where speaker Pods are listed.
    pub namespace: String,
    /// The key file, if a key path was given.
    pub secret_key_file: Option<PathBuf>,
    /// The key derivation.
    pub key_derivation: KeyDerivation,
    /// WAN defaults.
    pub wan: bool,
}

/// Checked settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeakerSettings {
    /// This node.
    pub node_name: String,
    /// This Pod, if named.
    pub pod_name: Option<String>,
    /// MetalLB's namespace.
    pub namespace: String,
    /// Memberlist, or `None`: disabled (MetalLB then assumes a speaker on every node).
    pub memberlist: Option<Memberlist>,
    /// `--lb-class`, `None` when empty.
    pub lb_class: Option<String>,
    /// `--ignore-exclude-lb`.
    pub ignore_exclude_lb: bool,
    /// `--log-level`.
    pub log_level: LogLevel,
    /// Metrics port, `None` when 0.
    pub metrics_port: Option<u16>,
    /// Health-probe port.
    pub health_probe_port: u16,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--gratuitous-arp-interval`, `None` when 0.
    pub gratuitous_arp_interval: Option<std::time::Duration>,
    /// Settings accepted without effect, to be logged once.
    pub inactive: Vec<Inactive>,
    /// `--majority-guard`: the expected members are the speaker Pods' nodes.
    pub majority_guard: bool,
}

/// A setting that cannot work, naming the flag and variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// `--node-name` / `METALLB_NODE_NAME` missing.
    #[error("must specify --node-name or METALLB_NODE_NAME")]
    NoNodeName,
    /// No namespace given and none from the service account.
    #[error(
        "unable to get namespace from pod service account data, please specify --namespace or METALLB_NAMESPACE"
    )]
    NoNamespace,
    /// A bad value.
    #[error("{flag}: {problem}")]
    Invalid {
        /// Flag and variable.
        flag: &'static str,
        /// What is wrong.
        problem: String,
    },
}

impl SpeakerSettings {
    /// The options of the translation (`vigil_metallb::translate`) this speaker runs with.
    pub fn translate_options(&self) -> vigil_metallb::Options {
        vigil_metallb::Options {
            node_name: self.node_name.clone(),
            namespace: self
                .memberlist
                .as_ref()
                .map_or_else(|| self.namespace.clone(), |m| m.namespace.clone()),
            lb_class: self.lb_class.clone(),
            ignore_exclude_lb: self.ignore_exclude_lb,
            speaker_selector: self.memberlist.as_ref().map(|m| m.labels.clone()),
        }
    }
}

fn set(v: &Option<String>) -> Option<&str> {
    v.as_deref().filter(|s| !s.is_empty())
}

impl SpeakerArgs {
    /// Checks the settings. `service_account_namespace` is the content of
    /// `/var/run/secrets/kubernetes.io/serviceaccount/namespace`, if readable (asked only
    /// when no namespace is given).
    pub fn resolve(
        &self,
        service_account_namespace: impl FnOnce() -> Option<String>,
    ) -> Result<SpeakerSettings, SettingsError> {
        let node_name = set(&self.node_name)
            .ok_or(SettingsError::NoNodeName)?
            .to_string();
        let namespace = match set(&self.namespace) {
            Some(ns) => ns.to_string(),
            None => service_account_namespace()
                .filter(|s| !s.is_empty())
                .ok_or(SettingsError::NoNamespace)?,
        };
        let invalid = |flag, problem: String| SettingsError::Invalid { flag, problem };
        let log_level = LogLevel::parse(&self.log_level).ok_or_else(|| {
            invalid(
                "--log-level",
                format!(
                    "{:?} is not one of all, debug, info, warn, error, none",
                    self.log_level
                ),
            )
        })?;
        let gratuitous_arp_interval = match self.gratuitous_arp_interval {
            0 => None,
            s @ 1..=MAX_GRATUITOUS_ARP_INTERVAL => {
                Some(std::time::Duration::from_secs(s.unsigned_abs()))
            }
            s => {
                return Err(invalid(
                    "--gratuitous-arp-interval",
                    format!("{s} must be whole seconds from 0 to {MAX_GRATUITOUS_ARP_INTERVAL}"),
                ));
            }
        };
        let inactive = self.inactive()?;
        let memberlist = match (set(&self.ml_labels), set(&self.ml_bind_addr)) {
            (Some(labels), Some(addr)) => {
                let bind_addr = addr.parse().map_err(|_| {
                    invalid(
                        "--ml-bindaddr / METALLB_ML_BIND_ADDR",
                        format!("{addr:?} is not an IP address"),
                    )
                })?;
                let bind_port = match set(&self.ml_bind_port) {
                    None => DEFAULT_ML_PORT,
                    Some(p) => p.parse().map_err(|_| {
                        invalid(
                            "--ml-bindport / METALLB_ML_BIND_PORT",
                            format!("{p:?} is not a port number"),
                        )
                    })?,
                };
                let labels = Selector::parse(labels).map_err(|e: SelectorError| {
                    invalid("--ml-labels / METALLB_ML_LABELS", e.to_string())
                })?;
                Some(Memberlist {
                    bind_addr,
                    bind_port,
                    labels,
                    namespace: set(&self.ml_namespace).unwrap_or(&namespace).to_string(),
                    secret_key_file: self
                        .ml_secret_key_path
                        .as_ref()
                        .filter(|p| !p.as_os_str().is_empty())
                        .map(|p| p.join(crate::secret::SECRET_KEY_FILE)),
                    key_derivation: self.ml_key_derivation,
                    wan: self.ml_wan_config,
                })
            }
            _ => None,
        };
        if self.majority_guard && memberlist.is_none() {
            return Err(invalid(
                "--majority-guard / VIGIL_MAJORITY_GUARD",
                "needs memberlist (--ml-bindaddr and --ml-labels): the speaker Pods it selects are the members a majority is counted of".into(),
            ));
        }
        Ok(SpeakerSettings {
            node_name,
            pod_name: set(&self.pod_name).map(str::to_string),
            namespace,
            memberlist,
            lb_class: (!self.lb_class.is_empty()).then(|| self.lb_class.clone()),
            ignore_exclude_lb: self.ignore_exclude_lb,
            log_level,
            metrics_port: (self.port != 0).then_some(self.port),
            health_probe_port: self.health_probe_port,
            kubeconfig: self.kubeconfig.clone(),
            gratuitous_arp_interval,
            inactive,
            majority_guard: self.majority_guard,
        })
    }

    /// The BGP, FRR and pprof settings given: checked as MetalLB checks them (so a value
    /// MetalLB refuses is refused here too), then listed as [`Inactive`].
    fn inactive(&self) -> Result<Vec<Inactive>, SettingsError> {
        let invalid = |flag, problem: String| SettingsError::Invalid { flag, problem };
        let mut out = Vec::new();
        let bgp_type = set(&self.bgp_type);
        out.extend(bgp_type_inactive(bgp_type));
        if let Some(ms) = set(&self.bgp_debounce_timeout) {
            if !ms.parse::<i64>().is_ok_and(|ms| ms > 0) {
                return Err(invalid(
                    "--bgp-debounce-timeout / METALLB_BGP_DEBOUNCE_TIMEOUT",
                    format!("{ms:?} must be a positive whole number of milliseconds"),
                ));
            }
            out.push(Inactive {
                setting: format!("--bgp-debounce-timeout={ms}"),
                reason: NO_BGP,
            });
        }
        if self.frrk8s_secret_passthrough {
            // MetalLB's start-up checks of the pass-through, kept so one command line is
            // accepted or refused by both.
            if bgp_type != Some("frr-k8s") {
                return Err(invalid(
                    "--frrk8s-secret-passthrough",
                    "requires METALLB_BGP_TYPE=frr-k8s".into(),
                ));
            }
            if set(&self.frrk8s_namespace).is_none() {
                return Err(invalid(
                    "--frrk8s-secret-passthrough",
                    "requires --frrk8s-namespace to be set".into(),
                ));
            }
            out.push(Inactive {
                setting: "--frrk8s-secret-passthrough".into(),
                reason: NO_BGP,
            });
        }
        if let Some(ns) = set(&self.frrk8s_namespace) {
            out.push(Inactive {
                setting: format!("--frrk8s-namespace={ns}"),
                reason: NO_BGP,
            });
        }
        if !self.pprof_bind_address.is_empty() {
            out.push(Inactive {
                setting: format!("--pprof-bind-address={}", self.pprof_bind_address),
                reason: "vigil serves no pprof (a Go runtime profiler)",
            });
        }
        Ok(out)
    }
}

impl LogLevel {
    /// MetalLB's spelling of a level, if `s` is one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "all" => Self::All,
            "debug" => Self::Debug,
            "info" => Self::Info,
            "warn" => Self::Warn,
            "error" => Self::Error,
            "none" => Self::None,
            _ => return None,
        })
    }

    /// The same level as a `tracing` filter directive.
    pub fn tracing_filter(self) -> &'static str {
        match self {
            Self::All => "trace",
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Warn => "warn",
            Self::Error => "error",
            Self::None => "off",
        }
    }
}

/// Rewrites Go-style single-dash long flags (`-port=9120`, `-node-name x`) to clap's
/// double-dash form. Stops at `--`; leaves `-` and non-flag words alone.
pub fn go_style_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = false;
    for a in args {
        if rest {
            out.push(a);
            continue;
        }
        if a == "--" {
            rest = true;
            out.push(a);
        } else if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") {
            out.push(format!("-{a}"));
        } else {
            out.push(a);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> SpeakerArgs {
        let mut all = vec!["speaker".to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        SpeakerArgs::try_parse_from(go_style_args(all)).unwrap()
    }

    #[test]
    fn metallb_daemonset_args_parse() {
        let a = parse(&[
            "--port=7472",
            "--log-level=debug",
            "--node-name=a",
            "--namespace=metallb-system",
            "--ml-bindaddr=198.18.0.1",
            "--ml-labels=app=metallb,component=speaker",
            "--ml-secret-key-path=/etc/ml_secret_key",
            "-ignore-exclude-lb",
        ]);
        let s = a.resolve(|| None).unwrap();
        assert_eq!(s.node_name, "a");
        assert_eq!(s.metrics_port, Some(7472));
        assert_eq!(s.log_level, LogLevel::Debug);
        assert!(s.ignore_exclude_lb);
        let opts = s.translate_options();
        assert_eq!(
            (opts.node_name.as_str(), opts.namespace.as_str()),
            ("a", "metallb-system")
        );
        assert!(opts.ignore_exclude_lb && opts.lb_class.is_none());
        assert!(opts.speaker_selector.is_some());
        let ml = s.memberlist.clone().unwrap();
        assert_eq!(ml.bind_port, DEFAULT_ML_PORT);
        assert_eq!(ml.namespace, "metallb-system");
        assert_eq!(
            ml.secret_key_file,
            Some(PathBuf::from("/etc/ml_secret_key/secretkey"))
        );
        assert_eq!(ml.key_derivation, KeyDerivation::Sha256);
        assert!(
            ml.labels.matches(
                &[
                    ("app".to_string(), "metallb".to_string()),
                    ("component".to_string(), "speaker".to_string())
                ]
                .into()
            )
        );
    }

    #[test]
    fn defaults_and_disabled_memberlist() {
        let s = parse(&[
            "--node-name",
            "b",
            "--ml-labels",
            "app=metallb",
            "--port",
            "0",
            "--ml-wan-config=false",
        ])
        .resolve(|| Some("metallb-system".into()))
        .unwrap();
        assert_eq!(s.namespace, "metallb-system");
        assert_eq!(
            s.memberlist, None,
            "memberlist needs both labels and bind address"
        );
        assert_eq!(s.metrics_port, None);
        assert_eq!(s.lb_class, None);
        assert_eq!(s.log_level, LogLevel::Info);
        assert_eq!(s.health_probe_port, DEFAULT_HEALTH_PROBE_PORT);
    }

    #[test]
    fn bad_settings_are_named() {
        assert_eq!(
            parse(&[]).resolve(|| Some("ns".into())),
            Err(SettingsError::NoNodeName)
        );
        assert_eq!(
            parse(&["--node-name=a"]).resolve(|| None),
            Err(SettingsError::NoNamespace)
        );
        let e = parse(&["--node-name=a", "--namespace=n", "--log-level=loud"])
            .resolve(|| None)
            .unwrap_err();
        assert!(matches!(
            e,
            SettingsError::Invalid {
                flag: "--log-level",
                ..
            }
        ));
        let e = parse(&[
            "--node-name=a",
            "--namespace=n",
            "--ml-labels=a=b",
            "--ml-bindaddr=x",
        ])
        .resolve(|| None)
        .unwrap_err();
        assert!(e.to_string().contains("METALLB_ML_BIND_ADDR"), "{e}");
        let e = parse(&[
            "--node-name=a",
            "--namespace=n",
            "--ml-labels=a=b",
            "--ml-bindaddr=198.18.0.1",
            "--ml-bindport=70000",
        ])
        .resolve(|| None)
        .unwrap_err();
        assert!(e.to_string().contains("METALLB_ML_BIND_PORT"), "{e}");
        assert!(SpeakerArgs::try_parse_from(["speaker", "--ml-key-derivation=md5"]).is_err());
    }

    #[test]
    fn metallb_bgp_pprof_and_arp_flags_are_accepted() {
        let s = parse(&[
            "--node-name=a",
            "--namespace=n",
            "--gratuitous-arp-interval=30",
            "--pprof-bind-address=127.0.0.1:6060",
            "--bgp-debounce-timeout=3000",
            "--frrk8s-namespace=frr-k8s-system",
            "--frrk8s-secret-passthrough",
            "--bgp-type=frr-k8s",
        ])
        .resolve(|| None)
        .unwrap();
        assert_eq!(
            s.gratuitous_arp_interval,
            Some(std::time::Duration::from_secs(30))
        );
        let said: Vec<&str> = s.inactive.iter().map(|i| i.setting.as_str()).collect();
        assert_eq!(
            said,
            [
                "METALLB_BGP_TYPE=frr-k8s",
                "--bgp-debounce-timeout=3000",
                "--frrk8s-secret-passthrough",
                "--frrk8s-namespace=frr-k8s-system",
                "--pprof-bind-address=127.0.0.1:6060"
            ]
        );
        let quiet = parse(&["--node-name=a", "--namespace=n", "--bgp-type=native"])
            .resolve(|| None)
            .unwrap();
        assert!(quiet.inactive.is_empty() && quiet.gratuitous_arp_interval.is_none());
        for (bad, flag) in [
            ("--gratuitous-arp-interval=-1", "--gratuitous-arp-interval"),
            (
                "--gratuitous-arp-interval=2147483648",
                "--gratuitous-arp-interval",
            ),
            (
                "--bgp-debounce-timeout=0",
                "--bgp-debounce-timeout / METALLB_BGP_DEBOUNCE_TIMEOUT",
            ),
            (
                "--frrk8s-secret-passthrough=true",
                "--frrk8s-secret-passthrough",
            ),
        ] {
            let e = parse(&["--node-name=a", "--namespace=n", bad])
                .resolve(|| None)
                .unwrap_err();
            assert!(
                matches!(e, SettingsError::Invalid { flag: f, .. } if f == flag),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn go_style_rewrites_single_dash_only() {
        assert_eq!(
            go_style_args(["x", "-port=1", "--a", "-", "--", "-keep"].map(String::from)),
            ["x", "--port=1", "--a", "-", "--", "-keep"]
        );
    }
}
