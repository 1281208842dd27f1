//! The isolation rule through the whole core: a host cut off from every other member answers
//! for nothing until it hears the cluster again, then owns exactly what a core that never left
//! would own (so it never answers beside the VIPs' real owners).

use super::*;
use crate::model::ServiceSpec;
use std::time::{Duration, Instant};

const MS: Duration = Duration::from_millis(1);

fn member(name: &str, state: MemberState) -> Member {
    Member {
        name: name.into(),
        addr: "198.18.0.1:7946".parse().unwrap(),
        state,
        meta: NodeMeta::default(),
    }
}

fn view(states: &[(&str, MemberState)]) -> Vec<Member> {
    states.iter().map(|(n, s)| member(n, *s)).collect()
}

/// Twelve single-VIP services: each node owns some.
fn desired() -> DesiredState {
    DesiredState {
        services: (0..12)
            .map(|i| {
                ServiceSpec::new(
                    format!("svc-{i}"),
                    [format!("198.18.0.{}", 100 + i).parse::<IpAddr>().unwrap()],
                )
            })
            .collect(),
        ..DesiredState::default()
    }
}

fn settings() -> StaticSettings {
    StaticSettings::new("node-a", "198.18.0.1:7946".parse().unwrap())
}

fn owned(core: &SpeakerCore) -> Vec<IpAddr> {
    core.owned_vips().iter().map(|v| v.addr).collect()
}

fn drain(core: &mut SpeakerCore) -> Vec<Action> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

#[test]
fn a_cut_off_host_is_silent_until_it_merges_then_owns_what_the_cluster_agrees() {
    use MemberState::{Alive, Dead};
    let t0 = Instant::now();
    let all = view(&[("node-a", Alive), ("node-b", Alive), ("node-c", Alive)]);
    let mut core = SpeakerCore::new(&settings(), desired(), t0);
    core.handle_first_join(t0, all.clone());
    let _ = drain(&mut core);
    let rightful = owned(&core);
    assert!(!rightful.is_empty() && rightful.len() < 12, "{rightful:?}");

    // The link goes down: the others are lost one by one.
    let one_lost = view(&[("node-a", Alive), ("node-b", Dead), ("node-c", Alive)]);
    core.handle_members(t0 + 100 * MS, Some(MemberEventKind::Dead), one_lost);
    let _ = drain(&mut core);
    assert!(!core.isolated());
    assert!(owned(&core).len() > rightful.len(), "node-b's VIPs taken");
    let alone = view(&[("node-a", Alive), ("node-b", Dead), ("node-c", Dead)]);
    core.handle_members(t0 + 250 * MS, Some(MemberEventKind::Dead), alone.clone());
    let actions = drain(&mut core);
    assert!(core.isolated());
    assert!(owned(&core).is_empty(), "silent while cut off");
    assert!(
        actions.contains(&Action::SetOwned(Vec::new())),
        "{actions:?}"
    );
    let withdrawn = actions
        .iter()
        .filter(|a| matches!(a, Action::Withdrawn { reason, .. } if reason.starts_with("isolated")))
        .count();
    assert!(
        withdrawn > rightful.len(),
        "every VIP withdrawn as isolated: {actions:?}"
    );
    assert_eq!(
        core.poll_timeout(),
        Some(t0 + 250 * MS + isolation::ISOLATION_BOUND)
    );

    // Some seconds later, still alone (the link is back but gossip has not merged yet).
    core.handle_timeout(t0 + 3_000 * MS);
    core.handle_members(t0 + 3_000 * MS, None, alone);
    assert!(
        drain(&mut core)
            .iter()
            .all(|a| !matches!(a, Action::Announced { .. }))
    );
    assert!(
        owned(&core).is_empty(),
        "silent after the link is back, before the merge"
    );

    // The merge: still quiet while the others hear it alive again...
    let merged = t0 + 3_200 * MS;
    core.handle_members(merged, Some(MemberEventKind::Join), all);
    assert!(
        drain(&mut core)
            .iter()
            .all(|a| !matches!(a, Action::Announced { .. }))
    );
    assert!(core.isolated() && owned(&core).is_empty());
    // The fast profile catches up by push/pull at once: five gossip rounds of quiet.
    let quiet = isolation::rejoin_quiet(&vigil_gossip::Config::fast());
    assert_eq!(quiet, 100 * MS);
    assert_eq!(core.poll_timeout(), Some(merged + quiet));
    // ...then it owns again exactly what it owned before the cut, and nothing else.
    core.handle_timeout(merged + quiet);
    let actions = drain(&mut core);
    assert!(!core.isolated());
    assert_eq!(owned(&core), rightful);
    let announced = actions
        .iter()
        .filter(|a| matches!(a, Action::Announced { .. }))
        .count();
    assert_eq!(announced, rightful.len(), "{actions:?}");
}

#[test]
fn the_last_survivor_of_a_mass_death_answers_after_the_bound() {
    use MemberState::{Alive, Dead};
    let t0 = Instant::now();
    let mut core = SpeakerCore::new(&settings(), desired(), t0);
    core.handle_first_join(
        t0,
        view(&[("node-a", Alive), ("node-b", Alive), ("node-c", Alive)]),
    );
    core.handle_members(
        t0 + MS,
        Some(MemberEventKind::Dead),
        view(&[("node-a", Alive), ("node-b", Dead), ("node-c", Dead)]),
    );
    let _ = drain(&mut core);
    assert!(owned(&core).is_empty());
    let bound = core.poll_timeout().expect("the isolation bound");
    core.handle_timeout(bound);
    let _ = drain(&mut core);
    assert!(!core.isolated());
    assert_eq!(owned(&core).len(), 12, "alone after the bound: every VIP");
}

/// With the split-brain guard, a pair split from three is silent for want of a majority; when
/// the split heals and its view regains the majority at once (a push/pull merge), it stays
/// silent for the rejoin quiet before claiming, so the others hear it alive first.
#[test]
fn a_regained_majority_waits_the_rejoin_quiet_before_claiming() {
    use MemberState::{Alive, Dead};
    let t0 = Instant::now();
    let names = ["node-a", "node-b", "node-c", "node-d", "node-e"];
    let all: Vec<Member> = names.iter().map(|n| member(n, Alive)).collect();
    let guarded = DesiredState {
        expected_members: Some(5),
        ..desired()
    };
    let mut core = SpeakerCore::new(&settings(), guarded, t0);
    core.handle_first_join(t0, all.clone());
    let _ = drain(&mut core);
    let rightful = owned(&core);
    assert!(!rightful.is_empty());

    let pair = view(&[
        ("node-a", Alive),
        ("node-b", Alive),
        ("node-c", Dead),
        ("node-d", Dead),
        ("node-e", Dead),
    ]);
    core.handle_members(t0 + 300 * MS, Some(MemberEventKind::Dead), pair);
    let _ = drain(&mut core);
    assert!(owned(&core).is_empty(), "no majority: silent");
    assert!(!core.isolated(), "not isolated: it still hears node-b");

    let merged = t0 + 2_000 * MS;
    core.handle_members(merged, Some(MemberEventKind::Join), all);
    let _ = drain(&mut core);
    assert!(owned(&core).is_empty(), "quiet first");
    let quiet = isolation::rejoin_quiet(&vigil_gossip::Config::fast());
    assert_eq!(core.poll_timeout(), Some(merged + quiet));
    core.handle_timeout(merged + quiet);
    let _ = drain(&mut core);
    assert_eq!(owned(&core), rightful);
}
