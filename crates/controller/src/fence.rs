//! "Am I the leader", answered in one place: a [`Leadership`] handle that every write of the
//! controller (Service status, pool status, events, the key rotation's Secret updates and
//! events) passes through right before it goes out.
//!
//! The election itself is kube-lease-manager's ([`crate::leader`]); it reports a lost Lease
//! only when it next syncs, so a replica cut off from renewing could still write while its
//! successor allocates. The fence closes that gap: it lets a write through only while the
//! election says this replica leads *and* the Lease, as last seen, vouches for it
//! ([`vouched_for`]). The Lease comes from a watch on it, which shows each renewal as it
//! happens; only when the watched copy does not vouch (the watch not yet listed, or lagging
//! behind a renewal by the moment it takes to arrive) is the Lease read, and that answer is
//! used the same way. So a write reads no Lease, and the Lease is requested only by its
//! renewals.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::debug;

/// Why a write may not go out.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// The election or the Lease names another holder (or none): this replica must not
    /// write.
    #[error("this replica does not hold the Lease")]
    NotLeader,
    /// The Lease could not be read.
    #[error("read lease: {0}")]
    Api(#[source] kube::Error),
}

/// Who holds the election Lease, as this replica may act on it. Cheap to clone.
///
/// Without a Lease ([`Leadership::sole`]: the controller may not use Leases, as under
/// MetalLB's own RBAC) the replica is taken to be the only one, as MetalLB's controller is,
/// and every write goes through.
#[derive(Clone)]
pub struct Leadership {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    identity: String,
    lease_name: String,
    grace_seconds: u64,
    /// The election's own view (kube-lease-manager).
    elected: watch::Receiver<bool>,
    /// The Lease, watched.
    lease: Store<Lease>,
    api: Api<Lease>,
    /// Until when the last Lease seen still vouches for this replica. Held while the Lease
    /// is read, so writes waiting on the fence at once cause one read, not one each.
    until: tokio::sync::Mutex<Option<Instant>>,
    watch_task: tokio::task::AbortHandle,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watch_task.abort();
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(inner) = &self.inner else {
            return f.write_str("Leadership(sole replica, no Lease)");
        };
        f.debug_struct("Leadership")
            .field("identity", &inner.identity)
            .field("lease", &inner.lease_name)
            .field("elected", &*inner.elected.borrow())
            .finish_non_exhaustive()
    }
}

impl Leadership {
    /// A fence for `identity` on Lease `namespace/lease_name`, which the lease manager
    /// renews `grace_seconds` before it would run out, with `elected` the election's view.
    /// Watches the Lease until the last clone is dropped.
    pub fn start(
        client: Client,
        namespace: &str,
        lease_name: &str,
        identity: &str,
        grace_seconds: u64,
        elected: watch::Receiver<bool>,
    ) -> Self {
        let api: Api<Lease> = Api::namespaced(client, namespace);
        let (store, writer) = reflector::store();
        let stream = reflector::reflector(
            writer,
            watcher(
                api.clone(),
                watcher::Config::default().fields(&format!("metadata.name={lease_name}")),
            ),
        )
        .default_backoff();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(r) = stream.next().await {
                if let Err(e) = r {
                    debug!(error = %e, "lease watch");
                }
            }
        });
        Self {
            inner: Some(Arc::new(Inner {
                identity: identity.to_string(),
                lease_name: lease_name.to_string(),
                grace_seconds,
                elected,
                lease: store,
                api,
                until: tokio::sync::Mutex::new(None),
                watch_task: task.abort_handle(),
            })),
        }
    }

    /// The fence of a replica that runs alone, without a Lease: it always leads.
    pub fn sole() -> Self {
        Self { inner: None }
    }

    /// Whether this replica is elected on a Lease (`false`: it runs alone).
    pub fn is_replicated(&self) -> bool {
        self.inner.is_some()
    }

    /// Whether the election says this replica leads (no read).
    pub fn is_elected(&self) -> bool {
        self.inner.as_ref().is_none_or(|i| *i.elected.borrow())
    }

    /// Lets a write through: `Ok` only if this replica leads now.
    pub async fn check(&self) -> Result<(), FenceError> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        if !self.is_elected() {
            return Err(FenceError::NotLeader);
        }
        let mut until = inner.until.lock().await;
        if until.is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        *until = None;
        let lease_ref = reflector::ObjectRef::new(&inner.lease_name)
            .within(inner.api.namespace().unwrap_or_default());
        let watched = inner.lease.get(&lease_ref);
        if let Some(left) = watched.and_then(|l| self.vouched_for(&l)) {
            *until = Some(Instant::now() + left);
            return Ok(());
        }
        let lease = inner
            .api
            .get_opt(&inner.lease_name)
            .await
            .map_err(FenceError::Api)?
            .ok_or(FenceError::NotLeader)?;
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref());
        if holder != Some(inner.identity.as_str()) {
            return Err(FenceError::NotLeader);
        }
        // Held, read just now: this write may go. Only a renewal recent enough vouches for
        // the writes after it.
        if let Some(left) = self.vouched_for(&lease) {
            *until = Some(Instant::now() + left);
        }
        Ok(())
    }

    fn vouched_for(&self, lease: &Lease) -> Option<Duration> {
        let inner = self.inner.as_ref()?;
        vouched_for(
            lease,
            &inner.identity,
            inner.grace_seconds,
            Timestamp::now(),
        )
    }
}

/// How long `lease` still vouches for `identity` holding it, `None` if it does not: until
/// `grace_seconds` before it runs out, by the renewal time it shows.
///
/// Why that is safe: the renewal time is stamped by the holder's own clock when it renews
/// (the lease manager writes `now`), and a successor takes over only once the whole duration
/// has passed since, by its clock. The lease manager renews `grace` before the end, the
/// margin it allows for clocks that differ; trusting the Lease up to that same moment needs
/// no other assumption. A copy older than the truth only shows an earlier renewal, so a
/// lagging watch errs on the side of reading the Lease.
fn vouched_for(
    lease: &Lease,
    identity: &str,
    grace_seconds: u64,
    now: Timestamp,
) -> Option<Duration> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed = spec.renew_time.as_ref()?.0;
    let trusted_s = i64::from(spec.lease_duration_seconds?) - i64::try_from(grace_seconds).ok()?;
    if trusted_s <= 0 {
        return None;
    }
    let left_ms = renewed.as_millisecond() + trusted_s * 1000 - now.as_millisecond();
    u64::try_from(left_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: &str, seconds: i32) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "l", "namespace": "n"},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": seconds},
        }))
        .unwrap()
    }

    fn at(t: &str) -> Timestamp {
        t.parse().unwrap()
    }

    #[test]
    fn a_lease_vouches_until_the_lease_manager_would_renew_it() {
        let l = lease("me", "2026-12-03T08:00:00.000000Z", 15);
        // Renewed with 5 s of grace: trusted for 10 s after the renewal, not beyond.
        let left = |now| vouched_for(&l, "me", 5, at(now));
        assert_eq!(left("2026-12-03T08:00:00Z"), Some(Duration::from_secs(10)));
        assert_eq!(
            left("2026-12-03T08:00:09.5Z"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(left("2026-12-03T08:00:10Z"), None);
        assert_eq!(left("2026-12-03T08:00:30Z"), None);
        // Someone else's, or no renewal time: never.
        assert_eq!(
            vouched_for(&l, "other", 5, at("2026-12-03T08:00:01Z")),
            None
        );
        let mut no_time = l.clone();
        no_time.spec.as_mut().unwrap().renew_time = None;
        assert_eq!(
            vouched_for(&no_time, "me", 5, at("2026-12-03T08:00:01Z")),
            None
        );
        // A grace as long as the Lease leaves nothing to trust.
        assert_eq!(vouched_for(&l, "me", 15, at("2026-12-03T07:59:59Z")), None);
    }
}
