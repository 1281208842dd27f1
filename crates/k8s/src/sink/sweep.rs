//! A lost node's ServiceL2Statuses, removed by the survivors: a node whose host is gone cannot
//! delete its own, and its Pod (their owner, so the garbage collector's trigger) lives on in
//! the API until the node controller evicts it, minutes later. Until then `kubectl get
//! servicel2statuses` would name it as announcing beside its successor.
//!
//! When this node's gossip view shows a member dead or left (not merely suspect), it lists
//! that node's statuses (label `metallb.io/node=<node>`) and deletes
//! - those of Services this node announces (MetalLB's rule: the announcing node deletes other
//!   nodes' statuses of its Service), and
//! - every one of them if this node is the lowest-named live member of its view, so that a
//!   status nobody takes over (a `Local` Service whose only endpoints were there) goes too.
//!
//! Why a living node is never erased for good: each death is swept once (an edge, not a
//! level), each delete carries the listed `resourceVersion` as a precondition (what the node
//! rewrote since stays), and a node that is alive and partitioned re-creates a deleted status
//! at once: its writer watches its own statuses and still wants them. A node that comes back
//! is swept again only after it has been seen live and then lost again.
//!
//! The decisions ([`plan`], [`doomed`]) are pure; [`run`] is the task.

use super::reconcile::{Key, Seen};
use crate::crd::{LABEL_ANNOUNCE_NODE, ServiceL2Status};
use crate::source::Shared;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Preconditions};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{info, warn};
use vigil_speaker::core::Member;
use vigil_speaker::observe::status_writes::{StatusWriteCounters, WriteKind};

/// The first wait after a failed list; it doubles per failure up to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest wait between tries.
const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long one request may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// Which of a lost node's statuses to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Those of Services this node announces.
    Announced,
    /// All of them (this node is the lowest-named live member).
    All,
}

/// What [`plan`] decided after one gossip view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Members seen lost (dead or left) and not seen live since: swept once each.
    pub lost: BTreeSet<String>,
    /// The sweeps to start now.
    pub sweeps: Vec<(String, Scope)>,
}

/// Decides, from a gossip view, which lost nodes to sweep: those lost in `view` that were not
/// already in `lost` (swept before), never `me`. A member absent from the view stays in
/// `lost` (memberlist forgets the dead after a while; it is not swept again for that). A
/// member live again leaves `lost`, so that its next loss is swept.
///
/// In a view of three members or more where this node is not in a strict majority of live
/// ones, nothing is swept: this node is more likely the one cut off (a host whose link is down
/// sees everyone else dead), and its deletes would only make the others write their statuses
/// again. Two-member clusters cannot tell, and sweep.
pub fn plan(me: &str, view: &[Member], lost: &BTreeSet<String>) -> Plan {
    let live: BTreeSet<&str> = view
        .iter()
        .filter(|m| m.live())
        .map(|m| m.name.as_str())
        .chain(std::iter::once(me))
        .collect();
    let known = view
        .iter()
        .map(|m| m.name.as_str())
        .chain(std::iter::once(me))
        .collect::<BTreeSet<_>>()
        .len();
    let minority = known >= 3 && live.len() * 2 <= known;
    let scope = if live.first() == Some(&me) {
        Scope::All
    } else {
        Scope::Announced
    };
    let mut next: BTreeSet<String> = lost
        .iter()
        .filter(|name| !live.contains(name.as_str()))
        .cloned()
        .collect();
    let mut sweeps = Vec::new();
    if minority {
        return Plan { lost: next, sweeps };
    }
    for m in view.iter().filter(|m| !m.live() && m.name != me) {
        if next.insert(m.name.clone()) {
            sweeps.push((m.name.clone(), scope));
        }
    }
    Plan { lost: next, sweeps }
}

/// The objects to delete among a lost node's statuses (`listed`): name and resourceVersion.
pub fn doomed(
    listed: &[(Key, Seen)],
    scope: Scope,
    announced_here: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    listed
        .iter()
        .filter(|(key, _)| scope == Scope::All || announced_here(key))
        .map(|(_, seen)| (seen.name.clone(), seen.version.clone()))
        .collect()
}

/// The sweeps waiting for the task, and the lost set they came from.
#[derive(Debug, Default)]
pub(super) struct Sweeps {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    lost: BTreeSet<String>,
    /// Node -> scope (the wider one when asked twice).
    pending: BTreeMap<String, Scope>,
}

impl Sweeps {
    /// Takes in a gossip view (see [`plan`]).
    pub(super) fn view(&self, me: &str, view: &[Member]) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let plan = plan(me, view, &state.lost);
        // A node live again is not swept (its statuses are its own again).
        let lost = plan.lost;
        state.pending.retain(|node, _| lost.contains(node));
        state.lost = lost;
        if plan.sweeps.is_empty() {
            return;
        }
        for (node, scope) in plan.sweeps {
            let entry = state.pending.entry(node).or_insert(scope);
            *entry = (*entry).max(scope);
        }
        drop(state);
        self.changed.notify_one();
    }

    fn take(&self) -> BTreeMap<String, Scope> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut state.pending)
    }

    /// Puts back a sweep that failed, unless its node is live again or asked anew.
    fn retry(&self, node: String, scope: Scope) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.lost.contains(&node) {
            let entry = state.pending.entry(node).or_insert(scope);
            *entry = (*entry).max(scope);
        }
    }

    fn is_lost(&self, node: &str) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lost
            .contains(node)
    }
}

/// The sweeping task: waits for sweeps, runs them one after the other (a node's loss is rare;
/// a list and a few deletes each), retries a failed one after a backoff while its node stays
/// lost.
pub(super) async fn run(
    statuses: Api<ServiceL2Status>,
    shared: Shared,
    sweeps: Arc<Sweeps>,
    counters: StatusWriteCounters,
) {
    let mut failures: u32 = 0;
    let mut retry_at: Option<Instant> = None;
    loop {
        let wake = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sweeps.changed.notified() => {}
            () = wake => retry_at = None,
        }
        let mut failed = false;
        for (node, scope) in sweeps.take() {
            if !sweeps.is_lost(&node) {
                continue;
            }
            if sweep(&statuses, &shared, &counters, &node, scope)
                .await
                .is_err()
            {
                sweeps.retry(node, scope);
                failed = true;
            }
        }
        if failed {
            let wait = RETRY_MIN
                .saturating_mul(1 << failures.min(8))
                .min(RETRY_MAX);
            failures = failures.saturating_add(1);
            retry_at = Some(Instant::now() + wait);
        } else {
            failures = 0;
        }
    }
}

/// Lists `node`'s statuses and deletes the doomed ones; `Err` when the list or a delete failed
/// (other than "gone" or "changed since").
async fn sweep(
    statuses: &Api<ServiceL2Status>,
    shared: &Shared,
    counters: &StatusWriteCounters,
    node: &str,
    scope: Scope,
) -> Result<(), ()> {
    let params = ListParams::default().labels(&format!("{LABEL_ANNOUNCE_NODE}={node}"));
    let listed = match tokio::time::timeout(DEADLINE, statuses.list(&params)).await {
        Ok(Ok(list)) => list,
        Ok(Err(e)) => {
            warn!(event = "l2status_sweep_failed", node = %node, error = %e, "cannot list a lost node's ServiceL2Statuses; will try again");
            return Err(());
        }
        Err(_) => {
            warn!(event = "l2status_sweep_failed", node = %node, error = "no answer", "cannot list a lost node's ServiceL2Statuses; will try again");
            return Err(());
        }
    };
    let listed: Vec<(Key, Seen)> = listed.items.iter().filter_map(Seen::of).collect();
    let doomed = doomed(&listed, scope, |key| shared.announces(key));
    let mut deleted = 0usize;
    let mut result = Ok(());
    for (name, version) in &doomed {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: Some(version.clone()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        let outcome = tokio::time::timeout(DEADLINE, statuses.delete(name, &params)).await;
        let ok = match outcome {
            Ok(Ok(_)) => {
                deleted += 1;
                true
            }
            // Gone already, or rewritten since the list (by its node, alive after all).
            Ok(Err(kube::Error::Api(e))) if e.code == 404 || e.code == 409 => true,
            Ok(Err(e)) => {
                warn!(event = "l2status_sweep_failed", node = %node, status = %name, error = %e, "cannot delete a lost node's ServiceL2Status; will try again");
                false
            }
            Err(_) => false,
        };
        counters.count_write(WriteKind::Delete, ok);
        if !ok {
            result = Err(());
        }
    }
    info!(event = "l2status_swept", node = %node, scope = ?scope, listed = listed.len(), deleted, "removed a lost node's ServiceL2Statuses");
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_speaker::core::MemberState;

    fn member(name: &str, state: MemberState) -> Member {
        Member {
            name: name.into(),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state,
            meta: Default::default(),
        }
    }

    fn names(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_loss_is_swept_once_by_every_survivor_and_wholly_by_the_lowest_live() {
        use MemberState::{Alive, Dead, Suspect};
        let view = [
            member("node-a", Dead),
            member("node-b", Alive),
            member("node-c", Suspect),
        ];
        // node-b is the lowest live (node-a is dead): it sweeps everything of node-a.
        let p = plan("node-b", &view, &BTreeSet::new());
        assert_eq!(p.sweeps, vec![("node-a".to_string(), Scope::All)]);
        assert_eq!(p.lost, names(&["node-a"]));
        // node-c only what it announces (suspect is still live: node-b stays lowest).
        let p = plan("node-c", &view, &BTreeSet::new());
        assert_eq!(p.sweeps, vec![("node-a".to_string(), Scope::Announced)]);
        // The same view again: no new sweep (an edge, not a level).
        let again = plan("node-b", &view, &p.lost);
        assert!(again.sweeps.is_empty());
        assert_eq!(again.lost, p.lost);
        // Forgotten by memberlist: still not swept again.
        let forgotten = plan("node-b", &view[1..], &p.lost);
        assert!(forgotten.sweeps.is_empty());
        assert_eq!(forgotten.lost, names(&["node-a"]));
        // Back, then lost again: swept again.
        let back = plan("node-b", &[member("node-a", Alive)], &forgotten.lost);
        assert!(back.lost.is_empty() && back.sweeps.is_empty());
        let lost_again = plan("node-b", &[member("node-a", MemberState::Left)], &back.lost);
        assert_eq!(lost_again.sweeps, vec![("node-a".to_string(), Scope::All)]);
    }

    #[test]
    fn a_node_in_a_minority_of_its_view_sweeps_nothing() {
        use MemberState::{Alive, Dead};
        let cut_off = [
            member("node-a", Alive),
            member("node-b", Dead),
            member("node-c", Dead),
        ];
        let p = plan("node-a", &cut_off, &BTreeSet::new());
        assert!(p.sweeps.is_empty() && p.lost.is_empty());
        // Two members: the survivor sweeps (it cannot tell).
        let pair = [member("node-a", Alive), member("node-b", Dead)];
        assert_eq!(plan("node-a", &pair, &BTreeSet::new()).sweeps.len(), 1);
    }

    #[test]
    fn a_node_never_sweeps_itself_and_suspects_are_not_swept() {
        use MemberState::{Dead, Suspect};
        let p = plan(
            "node-a",
            &[member("node-a", Dead), member("node-b", Suspect)],
            &BTreeSet::new(),
        );
        assert!(p.sweeps.is_empty() && p.lost.is_empty());
    }

    #[test]
    fn only_announced_services_are_doomed_unless_all() {
        let seen = |name: &str| Seen {
            name: name.into(),
            version: format!("v-{name}"),
            status: None,
            owners: Vec::new(),
        };
        let listed = vec![
            ("app/web".to_string(), seen("l2-1")),
            ("app/local".to_string(), seen("l2-2")),
        ];
        let mine = |key: &str| key == "app/web";
        assert_eq!(
            doomed(&listed, Scope::Announced, mine),
            vec![("l2-1".to_string(), "v-l2-1".to_string())]
        );
        assert_eq!(doomed(&listed, Scope::All, mine).len(), 2);
    }
}
