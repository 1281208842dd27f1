//! Joining the cluster: the seeds until one answers, then a re-join of the seeds that are not
//! live members every `rejoin_interval`, so that a healed partition merges (MetalLB does this
//! every 60 s). Seeds arrive on a watch channel, so a new desired state changes them at once.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};
use vigil_gossip_net::{Memberlist, resolve_seeds};

/// First retry interval while no seed has answered; it doubles up to the rejoin interval.
const JOIN_RETRY: Duration = Duration::from_secs(1);

/// The seed addresses worth a join: not this node, not a live member, each once. At most one
/// per configured seed address, so a round's work is bounded by the configuration, and none
/// at all while every seed is in the cluster.
fn rejoin_targets(
    seeds: Vec<SocketAddr>,
    live: &BTreeSet<SocketAddr>,
    local: SocketAddr,
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = seeds
        .into_iter()
        .filter(|a| *a != local && !live.contains(a))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Joins the seeds until one answers, then every `rejoin` joins again those that are not live
/// members, so that a healed partition merges (MetalLB does this every 60 s). The work per
/// round is one push/pull per configured seed that is not a live member: nothing at all while
/// every seed is in the cluster.
pub(crate) async fn join_loop(
    gossip: Memberlist,
    mut seeds: watch::Receiver<Vec<String>>,
    rejoin: Duration,
    first_join: tokio::sync::oneshot::Sender<()>,
) {
    let mut first_join = Some(first_join);
    let mut joined = false;
    let mut retry = JOIN_RETRY;
    loop {
        let list = seeds.borrow_and_update().clone();
        let port = gossip.local_addr().port();
        let targets: Vec<SocketAddr> = match resolve_seeds(&list, port).await {
            Ok(addrs) => {
                let live: BTreeSet<SocketAddr> = gossip
                    .members()
                    .await
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| !m.state.is_gone())
                    .map(|m| m.addr)
                    .collect();
                rejoin_targets(addrs, &live, gossip.advertise_addr())
            }
            Err(e) => {
                warn!(event = "seed_unresolved", error = %e, "cannot resolve a seed");
                Vec::new()
            }
        };
        if targets.is_empty() {
            joined = true;
        } else {
            match gossip.join_addrs(targets.clone()).await {
                Ok(n) if n > 0 => {
                    info!(
                        event = "joined",
                        answered = n,
                        asked = targets.len(),
                        "joined the cluster through seeds"
                    );
                    joined = true;
                }
                Ok(_) | Err(_) if !joined => {
                    warn!(
                        event = "join_failed",
                        asked = targets.len(),
                        retry_in = ?retry,
                        "no seed answered; retrying"
                    );
                }
                _ => {}
            }
        }
        // Answered or not, the first attempt is over: alone, this node elects among itself.
        if let Some(tx) = first_join.take() {
            let _ = tx.send(());
        }
        let wait = if joined {
            rejoin
        } else {
            let wait = retry;
            retry = (retry * 2).min(rejoin);
            wait
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = seeds.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 7946))
    }

    #[test]
    fn rejoin_targets_are_the_seeds_outside_the_cluster_once_each() {
        let seeds = vec![addr(11), addr(12), addr(13), addr(14), addr(13)];
        let live: BTreeSet<SocketAddr> = [addr(11), addr(12)].into();
        // This node (11) and live members are skipped; a seed listed twice is asked once.
        assert_eq!(
            rejoin_targets(seeds.clone(), &live, addr(11)),
            [addr(13), addr(14)]
        );
        // Everyone in: no work at all.
        let all: BTreeSet<SocketAddr> = seeds.iter().copied().collect();
        assert!(rejoin_targets(seeds, &all, addr(11)).is_empty());
    }
}
