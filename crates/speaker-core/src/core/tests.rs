//! The core driven with plain values: no sockets, no root, no clock but a made-up `now`.

use super::*;
use crate::model::{LocalAddressSettings, ServiceSpec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn settings(node: &str, hold_down: Option<Duration>, local_address: bool) -> StaticSettings {
    StaticSettings {
        local_address: local_address.then(|| LocalAddressSettings {
            device: "lo".into(),
            arp_sysctls: Default::default(),
        }),
        hold_down,
        ..StaticSettings::new(node, "198.18.0.1:7946".parse().unwrap())
    }
}

/// web and api share 198.18.0.100; dns has its own.
fn desired() -> DesiredState {
    DesiredState {
        services: vec![
            ServiceSpec::new("web", [ip("198.18.0.100"), ip("2001:db8::100")]),
            ServiceSpec::new("api", [ip("198.18.0.100")]),
            ServiceSpec::new("dns", [ip("198.18.0.101")]),
        ],
        ..DesiredState::default()
    }
}

fn member(name: &str, state: MemberState) -> Member {
    Member {
        name: name.into(),
        addr: "198.18.0.1:7946".parse().unwrap(),
        state,
        meta: NodeMeta::default(),
    }
}

fn holding(mut m: Member) -> Member {
    m.meta.holding = true;
    m
}

fn view(states: &[(&str, MemberState)]) -> Vec<Member> {
    states.iter().map(|(n, s)| member(n, *s)).collect()
}

fn all_alive() -> Vec<Member> {
    NODES
        .iter()
        .map(|n| member(n, MemberState::Alive))
        .collect()
}

fn drain(core: &mut SpeakerCore) -> Vec<Action> {
    std::iter::from_fn(|| core.poll_action()).collect()
}

fn owned(core: &SpeakerCore) -> BTreeSet<IpAddr> {
    core.owned_vips().iter().map(|v| v.addr).collect()
}

/// The node that owns `vip` among `names` (Go's order).
fn first(names: &[&'static str], vip: &str) -> &'static str {
    vigil_lb::rank(names.iter().copied(), ip(vip))[0]
}

/// A joined core with every node alive.
fn joined(node: &str, now: Instant) -> SpeakerCore {
    let mut core = SpeakerCore::new(&settings(node, None, true), desired(), now);
    core.handle_first_join(now, all_alive());
    core
}

#[test]
fn nothing_is_elected_before_the_first_join() {
    let now = Instant::now();
    let mut core = SpeakerCore::new(&settings("node-a", None, false), desired(), now);
    // Alone, before the join: this node would win every VIP. It must not announce.
    core.handle_members(
        now,
        Some(MemberEventKind::Join),
        view(&[("node-a", MemberState::Alive)]),
    );
    let actions = drain(&mut core);
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::SetOwned(_) | Action::Announced { .. })),
        "{actions:?}"
    );
    assert!(core.owned_vips().is_empty() && core.status().vips.is_empty());
    assert!(!core.joined());
    // The join is over (nobody answered): alone, it elects itself.
    core.handle_first_join(now, view(&[("node-a", MemberState::Alive)]));
    assert!(core.joined());
    assert_eq!(owned(&core), desired().vips());
    // Once only.
    core.handle_first_join(now, all_alive());
    let _ = drain(&mut core);
    assert_eq!(owned(&core), desired().vips());
}

#[test]
fn the_hold_down_keeps_a_joining_node_back_until_it_ends() {
    let t0 = Instant::now();
    let hold = Duration::from_secs(10);
    let vip = "198.18.0.100";
    // The node that would win this VIP restarts into a cluster that serves.
    let winner = first(&NODES, vip);
    let mut core = SpeakerCore::new(&settings(winner, Some(hold), false), desired(), t0);
    assert!(core.meta().holding);
    assert_eq!(core.poll_timeout(), Some(t0 + hold));
    let mut members = all_alive();
    for m in &mut members {
        m.meta.holding = m.name == winner;
    }
    core.handle_first_join(t0, members.clone());
    let actions = drain(&mut core);
    assert!(!actions.contains(&Action::HoldDownOver { skipped: true }));
    assert!(!owned(&core).contains(&ip(vip)), "holding: ranks last");
    // Early timeouts change nothing.
    core.handle_timeout(t0 + hold / 2);
    assert!(drain(&mut core).is_empty());
    // The hold-down ends: publish settled metadata, then the others see it and it wins.
    core.handle_timeout(t0 + hold);
    let actions = drain(&mut core);
    assert_eq!(actions[0], Action::HoldDownOver { skipped: false });
    assert!(matches!(&actions[1], Action::PublishMeta(m) if !m.holding));
    assert_eq!(core.poll_timeout(), None);
    // Settled by its own account at once, before the gossip view reports it back.
    assert!(owned(&core).contains(&ip(vip)));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Announced { vip: v, .. } if *v == ip(vip)))
    );
    // Stale gossip about itself (still holding) does not override what it publishes.
    core.handle_members(t0 + hold, Some(MemberEventKind::Update), members);
    let _ = drain(&mut core);
    assert!(owned(&core).contains(&ip(vip)));
}

#[test]
fn a_cold_start_skips_the_hold_down() {
    let t0 = Instant::now();
    let hold = Duration::from_secs(10);
    let mut core = SpeakerCore::new(&settings("node-a", Some(hold), false), desired(), t0);
    // Everyone else seen is holding too (they all start together): nobody serves.
    let members = vec![
        holding(member("node-a", MemberState::Alive)),
        holding(member("node-b", MemberState::Alive)),
    ];
    core.handle_first_join(t0, members);
    let actions = drain(&mut core);
    assert_eq!(actions[0], Action::HoldDownOver { skipped: true });
    assert!(matches!(&actions[1], Action::PublishMeta(m) if !m.holding));
    assert!(!core.meta().holding && !core.status().holding);
    assert_eq!(core.poll_timeout(), None);
}

#[test]
fn a_cold_start_with_a_partial_view_elects_among_what_it_sees_and_moves_once_when_the_rest_arrives()
{
    let t0 = Instant::now();
    let vip = "198.18.0.101";
    let best = first(&NODES, vip);
    let others: Vec<&str> = NODES.iter().copied().filter(|n| *n != best).collect();
    let second = first(&others, vip);
    // `second` starts first and sees only itself and the third node.
    let mut core = SpeakerCore::new(&settings(second, None, true), desired(), t0);
    let partial: Vec<Member> = others
        .iter()
        .map(|n| member(n, MemberState::Alive))
        .collect();
    core.handle_first_join(t0, partial.clone());
    let _ = drain(&mut core);
    assert!(owned(&core).contains(&ip(vip)));
    // The best node joins: the VIP moves to it, handed over, exactly once.
    core.handle_members(t0, Some(MemberEventKind::Join), all_alive());
    let actions = drain(&mut core);
    let withdrawn: Vec<_> = actions
        .iter()
        .filter(|a| matches!(a, Action::Withdrawn { vip: v, successor: Some(s), .. } if *v == ip(vip) && s == best))
        .collect();
    assert_eq!(withdrawn.len(), 1, "{actions:?}");
    assert!(!owned(&core).contains(&ip(vip)));
    // The same view again moves nothing.
    core.handle_members(t0, Some(MemberEventKind::Update), all_alive());
    assert!(
        drain(&mut core)
            .iter()
            .all(|a| matches!(a, Action::Elected { changes: 0, .. }))
    );
}

#[test]
fn a_vip_is_held_before_it_is_announced_and_released_only_after_its_handover() {
    let t0 = Instant::now();
    let vip = ip("198.18.0.101");
    let owner = first(&NODES, "198.18.0.101");
    let others: Vec<&'static str> = NODES.iter().copied().filter(|n| *n != owner).collect();
    let second = first(&others, "198.18.0.101");
    let mut core = SpeakerCore::new(&settings(second, None, true), desired(), t0);
    let owner_dead: Vec<Member> = NODES
        .iter()
        .map(|n| {
            let state = if *n == owner {
                MemberState::Dead
            } else {
                MemberState::Alive
            };
            member(n, state)
        })
        .collect();
    core.handle_first_join(t0, owner_dead);
    let actions = drain(&mut core);
    let hold = actions
        .iter()
        .position(|a| *a == Action::HoldAddress(vip))
        .expect("held");
    let set = actions
        .iter()
        .position(|a| matches!(a, Action::SetOwned(v) if v.iter().any(|v| v.addr == vip)))
        .expect("announced");
    assert!(hold < set, "address before announcement: {actions:?}");

    // The owner comes back: hand over first, the owned set without the VIP after, and the
    // address stays until the announcer reports the handover over.
    core.handle_members(t0, Some(MemberEventKind::Join), all_alive());
    let actions = drain(&mut core);
    let handover = actions
        .iter()
        .position(|a| matches!(a, Action::HandOver { vips, .. } if vips.contains(&vip)))
        .expect("handed over");
    let set = actions
        .iter()
        .position(|a| matches!(a, Action::SetOwned(v) if !v.iter().any(|v| v.addr == vip)))
        .expect("owned set without it");
    assert!(handover < set, "{actions:?}");
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::ReleaseAddress { .. }))
    );
    core.handle_announcer_event(
        t0,
        &vigil_l2::Event::HandedOver {
            vip,
            successor: None,
        },
    );
    assert_eq!(
        drain(&mut core),
        [Action::ReleaseAddress {
            vip,
            why: AddressRelease::HandedOver
        }]
    );
    // A second report for it does nothing.
    core.handle_announcer_event(
        t0,
        &vigil_l2::Event::HandedOver {
            vip,
            successor: None,
        },
    );
    assert!(drain(&mut core).is_empty());
}

#[test]
fn a_vip_nobody_takes_goes_silent_and_loses_its_address_at_once() {
    let t0 = Instant::now();
    let mut core = joined("node-a", t0);
    let _ = drain(&mut core);
    let mine = owned(&core);
    assert!(!mine.is_empty());
    // The services go away.
    core.handle_desired(t0, DesiredState::default());
    let actions = drain(&mut core);
    for vip in &mine {
        assert!(actions.contains(&Action::ReleaseAddress {
            vip: *vip,
            why: AddressRelease::Released
        }));
    }
    assert!(!actions.iter().any(|a| matches!(a, Action::HandOver { .. })));
    assert!(actions.contains(&Action::SetOwned(Vec::new())));
}

#[test]
fn shutdown_hands_over_leaves_and_releases_addresses_once_the_successors_speak() {
    let t0 = Instant::now();
    let owner = first(&NODES, "198.18.0.100");
    let mut core = joined(owner, t0);
    let _ = drain(&mut core);
    let mine = owned(&core);
    assert!(!mine.is_empty());
    core.begin_shutdown(t0);
    let actions = drain(&mut core);
    let handed: BTreeSet<IpAddr> = actions
        .iter()
        .find_map(|a| match a {
            Action::HandOver { vips, .. } => Some(vips.iter().copied().collect()),
            _ => None,
        })
        .expect("a handover");
    assert_eq!(
        handed, mine,
        "every VIP has a successor among two live nodes"
    );
    let order: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::HandOver { .. } => Some("handover"),
            Action::SetOwned(v) if v.is_empty() => Some("silent"),
            Action::Leave => Some("leave"),
            Action::ReleaseAddress { .. } | Action::Stopped => Some("too early"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["handover", "silent", "leave"]);
    assert!(core.poll_timeout().is_some());
    // Inputs during the shutdown elect nothing.
    core.handle_members(t0, Some(MemberEventKind::Join), all_alive());
    core.handle_desired(t0, DesiredState::default());
    assert!(drain(&mut core).is_empty());
    // Each successor is heard; the last one ends the shutdown.
    let mut rest = mine.clone();
    while let Some(vip) = rest.pop_first() {
        core.handle_announcer_event(
            t0,
            &vigil_l2::Event::HandedOver {
                vip,
                successor: None,
            },
        );
        let actions = drain(&mut core);
        if rest.is_empty() {
            assert_eq!(actions.last(), Some(&Action::Stopped));
            let released: BTreeSet<IpAddr> = actions
                .iter()
                .filter_map(|a| match a {
                    Action::ReleaseAddress {
                        vip,
                        why: AddressRelease::Stopping,
                    } => Some(*vip),
                    _ => None,
                })
                .collect();
            assert_eq!(released, mine);
        } else {
            assert!(actions.is_empty());
        }
    }
    assert_eq!(core.poll_timeout(), None);
}

#[test]
fn shutdown_ends_at_the_bound_when_a_successor_is_never_heard() {
    let t0 = Instant::now();
    let mut core = joined(first(&NODES, "198.18.0.100"), t0);
    let _ = drain(&mut core);
    core.begin_shutdown(t0);
    let _ = drain(&mut core);
    let deadline = core.poll_timeout().expect("a deadline");
    assert!(deadline > t0 + HANDOVER_BOUND);
    core.handle_timeout(deadline - Duration::from_millis(1));
    assert!(drain(&mut core).is_empty());
    core.handle_timeout(deadline);
    assert_eq!(drain(&mut core).last(), Some(&Action::Stopped));
}

#[test]
fn shutdown_alone_stops_at_once() {
    let t0 = Instant::now();
    let mut core = SpeakerCore::new(&settings("node-a", None, true), desired(), t0);
    core.handle_first_join(t0, view(&[("node-a", MemberState::Alive)]));
    let _ = drain(&mut core);
    core.begin_shutdown(t0);
    let actions = drain(&mut core);
    assert!(actions.contains(&Action::HandOver {
        vips: Vec::new(),
        bound: HANDOVER_BOUND
    }));
    assert!(actions.iter().all(|a| !matches!(
        a,
        Action::Withdrawn {
            successor: Some(_),
            ..
        }
    )));
    assert_eq!(actions.last(), Some(&Action::Stopped));
}

/// A member that is falsely declared dead and comes back, again and again, moves each of its
/// VIPs away and back once per flap, never more; a suspicion alone (still a candidate) moves
/// nothing, nor does metadata that did not change.
#[test]
fn a_flapping_member_causes_a_bounded_number_of_moves() {
    let t0 = Instant::now();
    let vip = "198.18.0.101";
    let flapper = first(&NODES, vip);
    let others: Vec<&'static str> = NODES.iter().copied().filter(|n| *n != flapper).collect();
    let second = first(&others, vip);
    let mut core = joined(second, t0);
    let _ = drain(&mut core);
    assert!(!owned(&core).contains(&ip(vip)));
    let with = |state| {
        NODES
            .iter()
            .map(|n| {
                member(
                    n,
                    if *n == flapper {
                        state
                    } else {
                        MemberState::Alive
                    },
                )
            })
            .collect::<Vec<_>>()
    };
    let moves = |actions: &[Action]| {
        actions
            .iter()
            .filter(|a| {
                matches!(a, Action::Announced { vip: v, .. } | Action::Withdrawn { vip: v, .. } if *v == ip(vip))
            })
            .count()
    };
    let flaps = 20;
    let mut total = 0;
    let mut handovers = 0;
    for _ in 0..flaps {
        for (kind, state) in [
            (MemberEventKind::Suspect, MemberState::Suspect),
            (MemberEventKind::Dead, MemberState::Dead),
            (MemberEventKind::Dead, MemberState::Dead),
            (MemberEventKind::Join, MemberState::Alive),
            (MemberEventKind::Update, MemberState::Alive),
            (MemberEventKind::Suspect, MemberState::Suspect),
            (MemberEventKind::Refuted, MemberState::Alive),
        ] {
            core.handle_members(t0, Some(kind), with(state));
            let actions = drain(&mut core);
            if kind == MemberEventKind::Suspect || kind == MemberEventKind::Refuted {
                assert_eq!(moves(&actions), 0, "a suspect is still a candidate");
            }
            total += moves(&actions);
            handovers += actions
                .iter()
                .filter(|a| matches!(a, Action::HandOver { .. }))
                .count();
        }
    }
    assert_eq!(
        total,
        2 * flaps,
        "one take and one hand-back per false death"
    );
    assert_eq!(handovers, flaps, "one handover per hand-back");
    assert_eq!(
        core.counters().member_events[&MemberEventKind::Dead],
        2 * flaps as u64
    );
}

#[test]
fn a_flapping_member_with_a_hold_down_does_not_pull_vips_back_while_it_holds() {
    let t0 = Instant::now();
    let vip = "198.18.0.101";
    let flapper = first(&NODES, vip);
    let others: Vec<&'static str> = NODES.iter().copied().filter(|n| *n != flapper).collect();
    let second = first(&others, vip);
    let mut core = SpeakerCore::new(
        &settings(second, Some(Duration::from_secs(5)), false),
        desired(),
        t0,
    );
    core.handle_first_join(t0, all_alive());
    let _ = drain(&mut core);
    // This node's own hold-down is over; the flapper restarts into its own, again and again.
    core.handle_timeout(t0 + Duration::from_secs(5));
    let _ = drain(&mut core);
    // A restarted flapper publishes `holding`: the VIP stays here however often it restarts.
    let mut moves = 0;
    for _ in 0..10 {
        for m in [
            member(flapper, MemberState::Dead),
            holding(member(flapper, MemberState::Alive)),
        ] {
            let mut v: Vec<Member> = others
                .iter()
                .map(|n| member(n, MemberState::Alive))
                .collect();
            v.push(m);
            core.handle_members(t0, Some(MemberEventKind::Join), v);
            moves += drain(&mut core)
                .iter()
                .filter(|a| matches!(a, Action::Announced { vip: v, .. } | Action::Withdrawn { vip: v, .. } if *v == ip(vip)))
                .count();
        }
    }
    assert!(owned(&core).contains(&ip(vip)));
    assert!(moves <= 1, "taken once at most, never handed back: {moves}");
}

#[test]
fn health_flips_publish_metadata_and_move_only_the_checked_service() {
    let t0 = Instant::now();
    let mut d = desired();
    d.services[2].health_checked = true; // dns
    let mut core = SpeakerCore::new(&settings("node-a", None, false), d.clone(), t0);
    assert_eq!(core.meta().failing, ["dns".to_string()].into());
    // The election reads what each node published, this one included, from the gossip view.
    let published = |meta: NodeMeta| {
        let mut m = member("node-a", MemberState::Alive);
        m.meta = meta;
        vec![m]
    };
    core.handle_first_join(t0, published(core.meta()));
    let _ = drain(&mut core);
    assert!(
        !owned(&core).contains(&ip("198.18.0.101")),
        "failing: not a candidate"
    );
    assert!(core.handle_local_health("dns", true));
    let actions = drain(&mut core);
    let Action::PublishMeta(meta) = &actions[0] else {
        panic!("{actions:?}")
    };
    assert!(meta.failing.is_empty());
    // It elects with what it publishes at once: the gossip layer never reports its own
    // update back as an event.
    assert!(owned(&core).contains(&ip("198.18.0.101")));
    core.handle_members(t0, Some(MemberEventKind::Update), published(meta.clone()));
    assert!(
        drain(&mut core)
            .iter()
            .all(|a| !matches!(a, Action::Withdrawn { .. }))
    );
    assert!(owned(&core).contains(&ip("198.18.0.101")));
    // The same result again changes nothing; an unchecked service is ignored.
    assert!(core.handle_local_health("dns", true));
    assert!(!core.handle_local_health("web", false));
    assert!(drain(&mut core).is_empty());
    assert_eq!(
        core.status().health,
        BTreeMap::from([("dns".to_string(), true)])
    );
}

#[test]
fn a_new_desired_state_changes_only_what_it_brings() {
    let t0 = Instant::now();
    let mut core = joined("node-b", t0);
    let _ = drain(&mut core);
    let before = core.owned_vips();
    // An identical snapshot: no actions at all.
    core.handle_desired(t0, desired());
    assert!(drain(&mut core).is_empty());
    // A service only node-c may serve, new seeds and labels.
    let mut d = desired();
    let mut extra = ServiceSpec::new("extra", [ip("198.18.0.102")]);
    extra.nodes = Some(Arc::new(["node-c".to_string()].into()));
    d.services.push(extra);
    let mut checked = ServiceSpec::new("checked", [ip("198.18.0.103")]);
    checked.health_checked = true;
    d.services.push(checked);
    d.seeds = vec!["198.18.0.2".into()];
    d.labels = BTreeMap::from([("zone".into(), "a".into())]);
    core.handle_desired(t0, d);
    let actions = drain(&mut core);
    assert_eq!(actions[0], Action::SetSeeds(vec!["198.18.0.2".into()]));
    assert!(matches!(&actions[1], Action::PublishMeta(m)
        if m.labels.contains_key("zone") && m.failing.contains("checked")));
    // Nothing owned before is withdrawn; anything announced is one of the new VIPs.
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Withdrawn { .. })),
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::Announced { vip, .. }
        if *vip != ip("198.18.0.102") && *vip != ip("198.18.0.103")))
    );
    assert!(
        !owned(&core).contains(&ip("198.18.0.102")),
        "only node-c may serve it"
    );
    assert!(before.iter().all(|v| owned(&core).contains(&v.addr)));
}

/// node-a with the majority guard (3 members expected), joined with node-b alive.
fn guarded_pair(t0: Instant) -> SpeakerCore {
    let mut d = desired();
    d.expected_members = Some(3);
    let mut core = SpeakerCore::new(&settings("node-a", None, false), d, t0);
    core.handle_first_join(t0, pair(MemberState::Alive));
    core
}

/// node-a alive, node-b in `b`.
fn pair(b: MemberState) -> Vec<Member> {
    view(&[("node-a", MemberState::Alive), ("node-b", b)])
}

#[test]
fn the_split_brain_guard_silences_a_minority() {
    let t0 = Instant::now();
    let mut core = guarded_pair(t0);
    let _ = drain(&mut core);
    let mine = owned(&core);
    core.handle_members(t0, Some(MemberEventKind::Dead), pair(MemberState::Dead));
    let actions = drain(&mut core);
    assert!(core.owned_vips().is_empty());
    for vip in mine {
        assert!(actions.iter().any(|a| matches!(a,
            Action::Withdrawn { vip: v, reason, successor: None, .. } if *v == vip && reason.contains("split-brain guard"))));
    }
    assert_eq!(core.status().quorum, StatusQuorum { live: 1, needed: 2 });
}

/// A minority that regains its majority stays quiet for the rejoin quiet, asks gossip to
/// confirm its alive state, and claims again soon after every live member has acknowledged it
/// (`Event::HeardBack`) instead of at the end of the quiet.
#[test]
fn a_regained_majority_asks_for_confirmation_and_ends_its_quiet_on_it() {
    let t0 = Instant::now();
    let mut core = guarded_pair(t0);
    core.handle_members(t0, Some(MemberEventKind::Dead), pair(MemberState::Dead));
    let _ = drain(&mut core);
    assert!(core.owned_vips().is_empty(), "the guard holds");
    let t1 = t0 + Duration::from_secs(2);
    core.handle_members(t1, Some(MemberEventKind::Join), pair(MemberState::Alive));
    let actions = drain(&mut core);
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == Action::ConfirmAlive)
            .count(),
        1,
        "{actions:?}"
    );
    assert!(
        core.owned_vips().is_empty(),
        "quiet after the majority came back"
    );
    let quiet_end = core.poll_timeout().expect("the quiet ends");
    let heard = t1 + Duration::from_millis(2);
    core.handle_heard_back(heard);
    let sooner = core.poll_timeout().expect("the quiet ends");
    assert!(sooner < quiet_end, "{sooner:?} !< {quiet_end:?}");
    core.handle_timeout(sooner);
    assert!(!core.owned_vips().is_empty(), "claims once heard back");
    // A view change that keeps the majority asks nothing more.
    core.handle_members(
        sooner,
        Some(MemberEventKind::Update),
        pair(MemberState::Alive),
    );
    assert!(!drain(&mut core).contains(&Action::ConfirmAlive));
}

#[test]
fn a_join_while_owning_reannounces() {
    let t0 = Instant::now();
    let mut core = joined("node-a", t0);
    let _ = drain(&mut core);
    assert!(!core.owned_vips().is_empty());
    core.handle_members(t0, Some(MemberEventKind::Join), all_alive());
    assert_eq!(drain(&mut core).last(), Some(&Action::Reannounce));
    core.handle_members(t0, Some(MemberEventKind::Update), all_alive());
    assert!(!drain(&mut core).contains(&Action::Reannounce));
}

#[test]
fn the_status_document_keeps_its_json_shape() {
    let t0 = Instant::now();
    let core = joined("node-a", t0);
    let json = serde_json::to_value(core.status()).unwrap();
    assert_eq!(json["node"], "node-a");
    assert_eq!(json["members"][0]["state"], "alive");
    assert!(json["vips"][0]["candidates"].is_array());
    assert_eq!(json["quorum"]["needed"], 0);
    let back: Status = serde_json::from_value(json).unwrap();
    assert_eq!(back, core.status());
}

/// Kubernetes mode elects every service on its own (MetalLB): two services sharing a VIP
/// may be owned by two nodes; a service joining or leaving a VIP this node keeps owning is
/// a notice for that service alone, with the VIP untouched. 198.18.0.100's order is
/// node-a, node-b, node-c.
#[test]
fn per_service_elections_share_a_vip_and_notice_service_changes() {
    let vip = ip("198.18.0.100");
    let spec = |dns_nodes: &[&str], with_http: bool| {
        let mut http = ServiceSpec::new("http", [vip]);
        http.nodes = Some(Arc::new(
            ["node-b".to_string(), "node-c".to_string()].into(),
        ));
        let mut dns = ServiceSpec::new("dns", [vip]);
        dns.nodes = Some(Arc::new(dns_nodes.iter().map(|n| n.to_string()).collect()));
        DesiredState {
            services: if with_http {
                vec![http, dns]
            } else {
                vec![dns]
            },
            shared_vips: crate::model::SharedVips::PerService,
            ..DesiredState::default()
        }
    };
    let now = Instant::now();
    let mut cores: Vec<SpeakerCore> = NODES
        .iter()
        .map(|n| {
            let mut core = SpeakerCore::new(&settings(n, None, false), spec(&NODES, true), now);
            core.handle_first_join(now, all_alive());
            core
        })
        .collect();
    assert_eq!(cores[0].announced(), [("dns".to_string(), vip)]);
    assert_eq!(cores[1].announced(), [("http".to_string(), vip)]);
    assert!(cores[2].announced().is_empty());

    // dns may now only use node-b: node-b announces it too, without taking the VIP again.
    for core in &mut cores {
        drain(core);
        core.handle_desired(now, spec(&["node-b"], true));
    }
    let b = drain(&mut cores[1]);
    assert!(
        b.iter().any(
            |a| matches!(a, Action::Announced { services, .. } if services == &["dns".to_string()])
        ),
        "{b:?}"
    );
    assert_eq!(cores[1].counters().vips_taken, 1);
    let mut on_b = cores[1].announced();
    on_b.sort();
    assert_eq!(on_b, [("dns".to_string(), vip), ("http".to_string(), vip)]);
    assert!(cores[0].owned_vips().is_empty());

    // http goes away: node-b withdraws it alone and keeps answering for dns.
    cores[1].handle_desired(now, spec(&["node-b"], false));
    let b = drain(&mut cores[1]);
    assert!(
        b.iter().any(|a| matches!(a, Action::Withdrawn { services, successor: None, .. } if services == &["http".to_string()])),
        "{b:?}"
    );
    assert_eq!(cores[1].announced(), [("dns".to_string(), vip)]);
    assert_eq!(cores[1].counters().vips_released, 0);
}
