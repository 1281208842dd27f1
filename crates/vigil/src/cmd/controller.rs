//! `vigil controller`: MetalLB-compatible IP allocation for LoadBalancer Services
//! (`vigil_controller`), with `--kubeconfig` or in-cluster configuration. SIGTERM or SIGINT
//! releases the Lease and stops.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Allocate LoadBalancer IPs from MetalLB's IPAddressPools, as MetalLB's controller does.
#[derive(Debug, Parser)]
#[group(id = "vigil_controller_command")]
pub struct Args {
    /// The controller's flags (MetalLB's names and environment).
    #[command(flatten)]
    pub controller: vigil_controller::Args,
    /// Kubeconfig file (default: in-cluster configuration).
    #[arg(long = "kubeconfig", env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// MetalLB's log levels: all, debug, info, warn, error or none (vigil also takes a
    /// tracing filter directive such as `info,kube=debug`).
    #[arg(long = "log-level", default_value = "info")]
    pub log_level: String,
}

/// The tracing filter for `--log-level`: MetalLB's six levels, else a tracing directive.
fn log_filter(level: &str) -> Result<tracing_subscriber::EnvFilter, String> {
    let directive = match vigil_k8s::settings::LogLevel::parse(level) {
        Some(l) => l.tracing_filter(),
        None => level,
    };
    tracing_subscriber::EnvFilter::try_new(directive).map_err(|e| {
        format!("--log-level {level:?}: not one of all, debug, info, warn, error, none ({e})")
    })
}

/// Runs `vigil controller`.
pub fn run(args: Args) -> ExitCode {
    let settings = match args.controller.settings() {
        Ok(s) => s,
        Err(e) => return fail(2, e),
    };
    let filter = match log_filter(&args.log_level) {
        Ok(f) => f,
        Err(e) => return fail(2, e),
    };
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_target(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    for (setting, reason) in args.controller.inactive() {
        tracing::warn!(event = "setting_inactive", setting = %setting, reason, "accepted for MetalLB's sake, without effect");
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(1, format!("cannot start the runtime: {e}")),
    };
    let rotation = match args.controller.rotation() {
        Ok(r) => r,
        Err(e) => return fail(2, e),
    };
    let tls = match args.controller.tls.settings() {
        Ok(t) => t,
        Err(e) => return fail(2, e),
    };
    // MetalLB's metrics port (--port; 0: none) on every IPv4 address, as MetalLB binds it,
    // and vigil's --metrics-addr if given: both HTTPS, every request reviewed.
    let metrics_listen: Vec<std::net::SocketAddr> = (args.controller.port != 0)
        .then(|| (std::net::Ipv4Addr::UNSPECIFIED, args.controller.port).into())
        .into_iter()
        .chain(args.controller.metrics_addr)
        .collect();
    // MetalLB's controller serves its probes on every address (":17472").
    let probes = (
        std::net::Ipv6Addr::UNSPECIFIED,
        args.controller.health_probe_port,
    )
        .into();
    let controller = async move {
        let shutdown = super::shutdown_signal().map_err(|e| format!("signals: {e}"))?;
        tokio::spawn(super::health_probe::serve(probes, std::future::pending()));
        let client = super::speaker::kube_client(args.kubeconfig.as_deref()).await?;
        // One shutdown for the controller (allocation and rotation) and the metrics route.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        });
        let stopped = move || {
            let mut rx = stop_rx.clone();
            async move {
                let _ = rx.wait_for(|s| *s).await;
            }
        };
        let metrics = vigil_controller::metrics::ControllerMetrics::default();
        let state = vigil_controller::state::ControllerState::default();
        if !metrics_listen.is_empty() {
            let serving = vigil_observe::secure::SecureServing::new(&tls, client.clone())
                .map_err(|e| e.to_string())?;
            for addr in metrics_listen {
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| format!("metrics port {addr}: {e}"))?;
                let router = vigil_controller::metrics::router(metrics.clone(), state.clone());
                let serving = serving.clone();
                let stop = stopped();
                tokio::spawn(async move { serving.serve(listener, router, stop).await });
            }
        }
        // MetalLB's webhooks (--webhook-mode): beside the allocation, or alone.
        let webhook = &args.controller.webhook;
        // A port in use stops only the webhook (logged), never the allocation.
        if let Some(hook) = webhook.settings(&settings.namespace) {
            match vigil_controller::webhook::Webhook::bind(hook).await {
                Ok(server) => {
                    tokio::spawn(server.serve(
                        client.clone(),
                        metrics.webhook(),
                        Some(tls.clone()),
                        stopped(),
                    ));
                }
                Err(e) => {
                    tracing::error!(event = "webhook_failed", error = %e, "no webhook server")
                }
            }
        }
        if !webhook.allocates() {
            return vigil_controller::webhook::without_allocation(&settings, &client, stopped())
                .await
                .map_err(|e| e.to_string());
        }
        // The rotation runs on the leader only, beside the allocation.
        let rotation = match (rotation, settings.ml_secret_name.clone()) {
            (Some(flags), Some(secret_name)) => Some(vigil_controller::KeyRotation {
                settings: vigil_controller::rotation::RotationSettings {
                    namespace: settings.namespace.clone(),
                    secret_name,
                    policy: flags.policy,
                    identity: settings.identity.clone(),
                },
                metrics: metrics.rotation(),
            }),
            _ => None,
        };
        vigil_controller::run_with(settings, client, rotation, state, metrics, stopped())
            .await
            .map_err(|e| e.to_string())
    };
    match runtime.block_on(controller) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(event = "failed", error = %e, "vigil controller failed");
            fail(1, e)
        }
    }
}

fn fail(code: u8, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("vigil controller: {e}");
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// MetalLB's levels map to tracing's (`all` and `none` are not tracing levels: read as a
    /// directive they would name a target).
    #[test]
    fn metallb_log_levels() {
        for level in [
            "all",
            "debug",
            "info",
            "warn",
            "error",
            "none",
            "info,kube=debug",
        ] {
            assert!(super::log_filter(level).is_ok(), "{level}");
        }
        assert_eq!(super::log_filter("none").unwrap().to_string(), "off");
        assert_eq!(super::log_filter("all").unwrap().to_string(), "trace");
        assert!(super::log_filter("vigil=loud").is_err());
    }

    /// MetalLB's images run `/speaker` or `/controller` with only MetalLB's flags.
    #[test]
    fn program_names_dispatch() {
        use std::ffi::OsString;
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            crate::dispatch_program_name(words(&["/controller", "--port=9120"])),
            words(&["vigil", "controller", "--port=9120"])
        );
        assert_eq!(
            crate::dispatch_program_name(words(&["speaker", "-log-level=info"])),
            words(&["vigil", "speaker", "-log-level=info"])
        );
        assert_eq!(
            crate::dispatch_program_name(words(&["/usr/bin/vigil", "speaker"])),
            words(&["/usr/bin/vigil", "speaker"])
        );
        // MetalLB's manifest's controller arguments, through the program name.
        let cli =
            <crate::Cli as clap::Parser>::try_parse_from(crate::dispatch_program_name(words(&[
                "/controller",
                "--port=9120",
                "--log-level=info",
            ])));
        assert!(cli.is_ok(), "{cli:?}");
    }

    /// Flattened argument structs must not collide (clap checks this only at run time).
    #[test]
    fn the_command_line_is_consistent() {
        crate::Cli::command().debug_assert();
        for words in [
            &["vigil", "controller", "--namespace=m"][..],
            &["vigil", "speaker", "--node-name=a"][..],
        ] {
            let cli = <crate::Cli as clap::Parser>::try_parse_from(words);
            assert!(cli.is_ok(), "{words:?}: {cli:?}");
        }
    }
}
