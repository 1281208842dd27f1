//! The replica's life: create the memberlist Secret if missing, then take part in leader
//! election on a `coordination.k8s.io/v1` Lease (kube-lease-manager) and lead while elected:
//! allocate ([`crate::driver`]) and, when asked, rotate the memberlist key
//! ([`crate::rotation`]), both writing only through one [`Leadership`] fence.

use crate::args::Settings;
use crate::driver::{self, FIELD_MANAGER, LeadConfig};
use crate::fence::Leadership;
use crate::rotation::{self, RotationSettings, metrics::SharedMetrics};
use crate::secret::{self, SecretError, SecretOutcome};
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
    let manager = LeaseManagerBuilder::new(client.clone(), &settings.lease_name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(settings.lease_seconds)
        .with_grace(settings.grace_seconds)
        .with_field_manager(FIELD_MANAGER)
        .build()
        .await
        .map_err(lease_err)?;
    let (mut leader, lease_task) = manager.watch().await;

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
    };
    let fence = Leadership::start(
        client.clone(),
        &settings.namespace,
        &settings.lease_name,
        &settings.identity,
        settings.grace_seconds,
        leader.clone(),
    );
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
        let allocate = driver::lead(client.clone(), cfg.clone(), fence.clone(), end.clone());
        let rotate = async {
            if let Some(r) = &rotation {
                let (client, fence) = (client.clone(), fence.clone());
                rotation::run(r.settings.clone(), client, r.metrics.clone(), fence, end).await;
            }
        };
        tokio::join!(allocate, rotate);
        if *stop.borrow() {
            break;
        }
        warn!(identity = %settings.identity, "lost the lease, no longer allocating");
    }
    drop(fence);
    // Dropping the receiver makes the lease task release the Lease and end.
    drop(leader);
    match lease_task.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(lease_err(e)),
        Err(e) => {
            warn!(error = %e, "lease task");
            Ok(())
        }
    }
}
