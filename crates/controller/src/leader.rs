//! The replica's life: create the memberlist Secret if missing, then take part in leader
//! election on a `coordination.k8s.io/v1` Lease (kube-lease-manager) and lead while elected:
//! allocate ([`crate::driver`]), keep the ConfigurationState ([`crate::state`]) and, when
//! asked, rotate the memberlist key ([`crate::rotation`]), all writing only through one
//! [`Leadership`] fence.
//!
//! Without rights on Leases (MetalLB's own RBAC grants none: its controller runs one replica
//! and elects nobody) the replica runs alone, as MetalLB's does: it says so once in the log,
//! in the ConfigurationState and in `vigil_controller_replicated`, and allocates.

use crate::args::Settings;
use crate::driver::{self, FIELD_MANAGER, LeadConfig};
use crate::fence::Leadership;
use crate::metrics::ControllerMetrics;
use crate::rotation::{self, RotationSettings, metrics::SharedMetrics};
use crate::secret::{self, SecretError, SecretOutcome};
use crate::state::{self, ControllerState, Replication};
use futures::FutureExt;
use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use std::future::Future;
use tokio::sync::watch;
use tracing::{info, warn};

/// Why [`run`] stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The memberlist Secret could not be ensured.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// Leader election failed.
    #[error("leader election on Lease {lease:?}: {source}")]
    Lease {
        /// The Lease.
        lease: String,
        /// The failure.
        source: LeaseManagerError,
    },
}

/// The memberlist key rotation the leader runs beside the allocation.
#[derive(Debug, Clone)]
pub struct KeyRotation {
    /// What to rotate, and when.
    pub settings: RotationSettings,
    /// Where the rotation reports (`/metrics`).
    pub metrics: SharedMetrics,
}

/// Runs one controller replica until `shutdown` resolves: ensures the memberlist Secret
/// (when `--ml-secret-name` is set; every replica does, creation is idempotent), then
/// competes for the Lease and, while it holds it, allocates. Losing the Lease stops
/// allocating; a replica killed without releasing it is replaced once the Lease runs out.
/// On shutdown the Lease is released, so a successor takes over at once.
pub async fn run(
    settings: Settings,
    client: Client,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    run_with_rotation(settings, client, None, shutdown).await
}

/// [`run`], and while leading also the memberlist key `rotation` (only the leader rotates).
pub async fn run_with_rotation(
    settings: Settings,
    client: Client,
    rotation: Option<KeyRotation>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let metrics = ControllerMetrics::default();
    run_with(
        settings,
        client,
        rotation,
        ControllerState::default(),
        metrics,
        shutdown,
    )
    .await
}

/// [`run_with_rotation`], reporting into `state` (its ConfigurationState and metrics).
pub async fn run_with(
    settings: Settings,
    client: Client,
    rotation: Option<KeyRotation>,
    state: ControllerState,
    metrics: ControllerMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    if let Some(name) = &settings.ml_secret_name {
        let outcome = secret::ensure_memberlist_secret(
            &client,
            &settings.namespace,
            name,
            settings.deployment.as_deref(),
        )
        .await?;
        match outcome {
            SecretOutcome::Created => info!(secret = %name, "memberlist secret created"),
            SecretOutcome::Existed => info!(secret = %name, "memberlist secret exists, kept"),
        }
    }
    let lease_err = |source| RunError::Lease {
        lease: settings.lease_name.clone(),
        source,
    };
    let built = LeaseManagerBuilder::new(client.clone(), &settings.lease_name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(settings.lease_seconds)
        .with_grace(settings.grace_seconds)
        .with_field_manager(FIELD_MANAGER)
        .build()
        .await;
    // Alone, this replica is always elected: the sender stays here until the end.
    let mut always_elected = None;
    let (mut leader, lease_task) = match built {
        Ok(manager) => {
            state.set_replication(Replication::Lease);
            let (leader, task) = manager.watch().await;
            (leader, Some(task))
        }
        Err(LeaseManagerError::KubeError(kube::Error::Api(s))) if s.is_forbidden() => {
            let why = format!(
                "no rights on coordination.k8s.io leases in {} ({}); run one replica",
                settings.namespace, s.message
            );
            warn!(event = "unreplicated", lease = %settings.lease_name, reason = %why, "running unreplicated, as MetalLB's controller does: allocating without leader election");
            state.set_replication(Replication::Alone(why));
            let (elected, leader) = watch::channel(true);
            always_elected = Some(elected);
            (leader, None)
        }
        Err(e) => return Err(lease_err(e)),
    };

    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let cfg = LeadConfig {
        namespace: settings.namespace.clone(),
        lb_class: settings.lb_class.clone(),
        identity: settings.identity.clone(),
        metrics,
    };
    let fence = match lease_task {
        Some(_) => Leadership::start(
            client.clone(),
            &settings.namespace,
            &settings.lease_name,
            &settings.identity,
            settings.grace_seconds,
            leader.clone(),
        ),
        None => Leadership::sole(),
    };
    loop {
        tokio::select! {
            () = stopped(stop.clone()) => break,
            r = leader.wait_for(|l| *l) => if r.is_err() { break },
        }
        info!(identity = %settings.identity, "elected leader");
        let mut lost_rx = leader.clone();
        let stop_rx = stop.clone();
        let end = async move {
            tokio::select! {
                () = stopped(stop_rx) => {}
                _ = lost_rx.wait_for(|l| !*l) => {}
            }
        }
        .shared();
        let allocate = driver::lead(
            client.clone(),
            cfg.clone(),
            fence.clone(),
            state.clone(),
            end.clone(),
        );
        let keep_state = state::write_loop(
            client.clone(),
            settings.namespace.clone(),
            state.clone(),
            end.clone(),
        );
        let rotate = async {
            if let Some(r) = &rotation {
                let (client, fence) = (client.clone(), fence.clone());
                rotation::run(r.settings.clone(), client, r.metrics.clone(), fence, end).await;
            }
        };
        tokio::join!(allocate, rotate, keep_state);
        if *stop.borrow() {
            break;
        }
        warn!(identity = %settings.identity, "lost the lease, no longer allocating");
    }
    drop(fence);
    drop(always_elected);
    // Dropping the receiver makes the lease task release the Lease and end.
    drop(leader);
    let Some(lease_task) = lease_task else {
        return Ok(());
    };
    match lease_task.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(lease_err(e)),
        Err(e) => {
            warn!(error = %e, "lease task");
            Ok(())
        }
    }
}
