//! `vigil speaker`: Kubernetes mode, a drop-in for MetalLB's L2 speaker. MetalLB's flags and
//! environment (`vigil_k8s::settings`) with vigil's options on top; the API side is
//! `vigil_k8s::{source, sink}`, the speaker is `vigil_speaker::run`, shared with every mode.
//! SIGTERM or SIGINT is the shutdown (hand over, leave).

use clap::{Args as ClapArgs, Parser};
use std::process::ExitCode;
use std::time::Duration;
use vigil_gossip::Profile;
use vigil_k8s::excludel2::InterfaceExclusions;
use vigil_k8s::memberlist_file::MemberlistTuning;
use vigil_k8s::settings::{LogLevel, SpeakerArgs, SpeakerSettings};
use vigil_speaker::model::{GossipSettings, InterfaceSelection, StaticSettings};

/// Run the speaker in Kubernetes mode, with MetalLB's speaker flags and environment.
#[derive(Debug, Parser)]
pub struct Args {
    /// MetalLB's flags (each also read from its METALLB_* variable).
    #[command(flatten)]
    pub metallb: SpeakerArgs,
    /// vigil's own options.
    #[command(flatten)]
    pub vigil: VigilOptions,
}

/// vigil's options beyond MetalLB's.
#[derive(Debug, Clone, ClapArgs)]
pub struct VigilOptions {
    /// Gossip timing profile: fast (vigil's, sub-second failover), lan (MetalLB's), wan, local.
    #[arg(long = "profile", env = "VIGIL_PROFILE", default_value = "fast")]
    pub profile: Profile,
    /// MetalLB's interface exclusion file (`announcedInterfacesToExclude`: regular
    /// expressions searched in interface names); a missing file excludes nothing, as in MetalLB.
    #[arg(
        long = "excludel2",
        env = "VIGIL_EXCLUDEL2",
        default_value = vigil_k8s::excludel2::EXCLUDE_L2_PATH
    )]
    pub excludel2: std::path::PathBuf,
    /// MetalLB v0.16's memberlist tuning file; when it exists, memberlist's LAN defaults with
    /// its values laid over replace --profile, as in MetalLB (docs/KUBERNETES.md lists the
    /// fields honoured).
    #[arg(
        long = "memberlist-config",
        env = "VIGIL_MEMBERLIST_CONFIG",
        default_value = vigil_k8s::memberlist_file::MEMBERLIST_CONFIG_PATH
    )]
    pub memberlist_config: std::path::PathBuf,
    /// Fail-back hold-down after start (e.g. 30s); none by default, as in MetalLB.
    #[arg(long = "hold-down", env = "VIGIL_HOLD_DOWN", value_parser = super::parse_duration)]
    pub hold_down: Option<Duration>,
    /// Gratuitous ARP / NA refresh period for owned VIPs (none by default).
    #[arg(long = "refresh", env = "VIGIL_REFRESH", value_parser = super::parse_duration)]
    pub refresh: Option<Duration>,
    /// The memberlist Secret in --namespace, followed live for key rotation (its keyring
    /// entry, else `secretkey`); empty: only the mounted `secretkey` file, polled.
    #[arg(
        long = "ml-secret-name",
        env = "METALLB_ML_SECRET_NAME",
        default_value = "memberlist"
    )]
    pub ml_secret_name: String,
    /// Heartbeat of this node's key acknowledgement Lease (valid for three of them).
    #[arg(long = "key-ack-interval", default_value = "5s", value_parser = super::parse_duration)]
    pub key_ack_interval: Duration,
    /// Gratuitous ARP / NA frames per second at most, once a burst of 256 is spent, so a
    /// takeover of thousands of IPs does not flood switches and neighbours; 0: unpaced.
    #[arg(
        long = "announce-rate",
        env = "VIGIL_ANNOUNCE_RATE",
        default_value_t = vigil_l2::announcer::DEFAULT_ANNOUNCE_RATE
    )]
    pub announce_rate: u32,
}

/// Runs `vigil speaker`.
pub fn run(args: Args) -> ExitCode {
    let service_account_ns =
        || std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok();
    let settings = match args.metallb.resolve(service_account_ns) {
        Ok(s) => s,
        Err(e) => return fail(2, e),
    };
    let tls = match args.metallb.tls.settings() {
        Ok(t) => t,
        Err(e) => return fail(2, e),
    };
    let exclusions = match InterfaceExclusions::read(&args.vigil.excludel2) {
        Ok(e) => e,
        Err(e) => return fail(2, format!("--excludel2 {e}")),
    };
    let tuning = match MemberlistTuning::read(&args.vigil.memberlist_config) {
        Ok(t) => t,
        Err(e) => return fail(2, format!("--memberlist-config {e}")),
    };
    let mut statics = static_settings(&settings, &args.vigil, &exclusions);
    if let Err(e) = init_json_logs(settings.log_level) {
        return fail(2, e);
    }
    for inactive in &settings.inactive {
        tracing::warn!(event = "setting_inactive", setting = %inactive.setting, reason = inactive.reason, "accepted for MetalLB's sake, without effect");
    }
    if settings.memberlist.is_none() {
        // MetalLB's words and behaviour (internal/speakerlist): no failure detection.
        tracing::info!(
            event = "memberlist_disabled",
            "not starting fast dead node detection (memberlist), need ml-bindaddr / ml-labels config; \
             every eligible Node counts as running a speaker, as in MetalLB"
        );
    } else if let Some(config) = tuning {
        tracing::info!(
            event = "memberlist_config_loaded",
            path = %args.vigil.memberlist_config.display(),
            "memberlist config file in force; --profile ignored"
        );
        statics.gossip.tuning = Some(config);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(1, format!("cannot start the runtime: {e}")),
    };
    match runtime.block_on(speak(settings, statics, args.vigil, tls)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(event = "failed", error = %e, "vigil speaker failed");
            fail(1, e)
        }
    }
}

/// JSON lines on stderr at MetalLB's log level.
fn init_json_logs(level: LogLevel) -> Result<(), String> {
    let filter = tracing_subscriber::EnvFilter::try_new(level.tracing_filter())
        .map_err(|e| e.to_string())?;
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_target(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}

/// A client from `--kubeconfig`, else the in-cluster (or `KUBECONFIG`) configuration.
pub(crate) async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("no in-cluster configuration and no --kubeconfig: {e}"))?,
    };
    kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))
}

fn fail(code: u8, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("vigil speaker: {e}");
    ExitCode::from(code)
}

/// The speaker's restart-only settings: gossip on MetalLB's memberlist address and port
/// (without memberlist: alone on a loopback port, see [`super::without_memberlist`]);
/// interfaces excluded by MetalLB's list alone (no built-in globs, as in MetalLB).
fn static_settings(
    settings: &SpeakerSettings,
    vigil: &VigilOptions,
    exclusions: &InterfaceExclusions,
) -> StaticSettings {
    let gossip_bind = match settings.memberlist.as_ref() {
        Some(ml) => (ml.bind_addr, ml.bind_port).into(),
        None => (std::net::Ipv4Addr::LOCALHOST, 0).into(),
    };
    // MetalLB binds its metrics port on every IPv4 address (`metricsBindAddress`).
    let http_addr = std::net::Ipv4Addr::UNSPECIFIED;
    StaticSettings {
        node_name: settings.node_name.clone(),
        gossip: GossipSettings {
            bind: gossip_bind,
            advertise: None,
            profile: vigil.profile,
            label: String::new(),
            rejoin_interval: Duration::from_secs(5),
            tuning: None,
        },
        interfaces: InterfaceSelection {
            include: None,
            exclude: Some(Vec::new()),
            exclude_matching: Some(exclusions.patterns().to_vec()),
        },
        local_address: None,
        http_listen: settings.metrics_port.map(|p| (http_addr, p).into()),
        // MetalLB's speaker serves its probes on loopback only (the DaemonSet asks 127.0.0.1).
        probe_listen: (settings.health_probe_port != 0)
            .then(|| (std::net::Ipv4Addr::LOCALHOST, settings.health_probe_port).into()),
        hold_down: vigil.hold_down,
        // vigil's --refresh, else MetalLB's --gratuitous-arp-interval.
        refresh: vigil.refresh.or(settings.gratuitous_arp_interval),
        announce_rate: std::num::NonZeroU32::new(vigil.announce_rate),
    }
}

async fn speak(
    mut settings: SpeakerSettings,
    statics: StaticSettings,
    vigil: VigilOptions,
    tls: vigil_observe::tls::TlsSettings,
) -> Result<(), String> {
    let shutdown = super::shutdown_signal().map_err(|e| format!("signals: {e}"))?;
    let mut shutdown = std::pin::pin!(shutdown);
    let client = kube_client(settings.kubeconfig.as_deref()).await?;
    // MetalLB's metrics port: HTTPS, every request reviewed by the API server.
    let serving = vigil_observe::secure::SecureServing::new(&tls, client.clone())
        .map_err(|e| e.to_string())?;
    // Key rotation: the keyring follows the Secret (vigil_k8s::keyring), not the file.
    let keyring = keyring_options(&mut settings, &vigil);
    let shared = vigil_k8s::source::Shared::default();
    // Nothing is announced before every store has listed; a signal meanwhile just stops.
    let started = tokio::select! {
        started = vigil_k8s::source::start(client.clone(), &settings, shared.clone()) => started,
        () = &mut shutdown => return Ok(()),
    };
    let (source, stores) = started.map_err(|e| format!("kubernetes: {e}"))?;
    source.counters.serve_securely(serving);
    let target = vigil_k8s::sink::Target {
        client: client.clone(),
        namespace: settings.namespace.clone(),
        node: settings.node_name.clone(),
        pod: settings.pod_name.clone(),
    };
    let sink = vigil_k8s::sink::K8sSink::start(target, shared, &stores, &source.counters);
    if settings.memberlist.is_none() {
        let source = vigil_speaker::Source {
            initial: super::without_memberlist::whole(source.initial),
            desired: super::without_memberlist::updates(source.desired),
            initial_keys: Vec::new(),
            keyrings: source.keyrings,
            health: source.health,
            counters: source.counters,
        };
        return vigil_speaker::run(statics, source, sink, shutdown)
            .await
            .map_err(|e| e.to_string());
    }
    let Some(keyring) = keyring else {
        return vigil_speaker::run(statics, source, sink, shutdown)
            .await
            .map_err(|e| e.to_string());
    };
    let follow = vigil_k8s::keyring::start(client, keyring, source.counters.clone()).await?;
    let source = vigil_speaker::Source {
        initial_keys: follow.initial_keys,
        keyrings: follow.keyrings,
        initial: source.initial,
        desired: source.desired,
        health: source.health,
        counters: source.counters,
    };
    vigil_speaker::run(statics, source, follow.acks.sink(sink), shutdown)
        .await
        .map_err(|e| e.to_string())
}

/// Where the keyring is followed from, when a Secret is named; the source then leaves the
/// key file alone.
fn keyring_options(
    settings: &mut SpeakerSettings,
    vigil: &VigilOptions,
) -> Option<vigil_k8s::keyring::KeyringOptions> {
    let ml = settings.memberlist.as_mut()?;
    if vigil.ml_secret_name.is_empty() {
        return None;
    }
    Some(vigil_k8s::keyring::KeyringOptions {
        namespace: settings.namespace.clone(),
        secret_name: vigil.ml_secret_name.clone(),
        key_dir: ml
            .secret_key_file
            .take()
            .and_then(|f| f.parent().map(Into::into)),
        derivation: ml.key_derivation,
        node: settings.node_name.clone(),
        ack_interval: vigil.key_ack_interval,
    })
}
