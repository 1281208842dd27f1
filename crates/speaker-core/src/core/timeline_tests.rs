//! The ownership timeline through [`SpeakerCore`]: a host loss as the next candidate and a
//! bystander see it, in both election modes, with plain values and a made-up clock.

use super::*;
use crate::model::{ServiceSpec, SharedVips};
use std::time::{Duration, Instant};

const NODES: [&str; 3] = ["node-a", "node-b", "node-c"];
const VIP: &str = "198.18.0.100";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn desired(shared_vips: SharedVips) -> DesiredState {
    DesiredState {
        services: vec![
            ServiceSpec::new("default/web", [ip(VIP)]),
            ServiceSpec::new("default/dns", [ip("198.18.0.101")]),
        ],
        shared_vips,
        ..DesiredState::default()
    }
}

fn view(dead: Option<&str>) -> Vec<Member> {
    NODES
        .iter()
        .map(|n| Member {
            name: (*n).into(),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state: if Some(*n) == dead {
                MemberState::Dead
            } else {
                MemberState::Alive
            },
            meta: NodeMeta::default(),
        })
        .collect()
}

fn changes(core: &mut SpeakerCore) -> Vec<OwnershipChange> {
    while core.poll_action().is_some() {}
    std::iter::from_fn(|| core.poll_ownership_change()).collect()
}

/// The owner of VIP, the next candidate, and the bystander, in Go's order.
fn ranked() -> [&'static str; 3] {
    let r = vigil_lb::rank(NODES, ip(VIP));
    [r[0], r[1], r[2]]
}

/// The owner's host is lost: the next candidate reports one change with every stage in
/// order (first miss, suspect, dead, decision, first announcement), naming the old owner,
/// the cause and the next candidate; the bystander records the change for its status and
/// reports nothing; the old owner's VIP that the next candidate did not get stays quiet.
#[test]
fn a_host_loss_reports_every_stage_once_at_the_new_owner() {
    for mode in [SharedVips::PerService, SharedVips::OneOwner] {
        let [owner, next, third] = ranked();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let settings = |node: &str| StaticSettings::new(node, "198.18.0.1:7946".parse().unwrap());
        let mut taker = SpeakerCore::new(&settings(next), desired(mode), t0);
        let mut bystander = SpeakerCore::new(&settings(third), desired(mode), t0);
        for core in [&mut taker, &mut bystander] {
            core.handle_first_join(ms(0), view(None));
            // Startup changes: each node reports the VIPs it took.
            for c in changes(core) {
                assert_eq!((c.cause, c.previous.clone()), (Cause::Startup, None));
            }
            for vip in core.awaiting_announce() {
                core.handle_first_announce(ms(1), vip);
            }
            let _ = changes(core);
            assert_eq!(
                core.ownership_changes(ms(1))
                    .iter()
                    .find(|c| c.vip == VIP)
                    .and_then(|c| c.owner.as_deref()),
                Some(owner)
            );

            // The loss, as the runner reports it.
            core.handle_member_signal(ms(100), owner, MemberSignal::ProbeMissed);
            core.handle_member_signal(ms(110), owner, MemberSignal::ProbeMissed);
            core.handle_member_signal(ms(150), owner, MemberSignal::Suspect);
            core.handle_members(ms(150), Some(MemberEventKind::Suspect), view(None));
            core.handle_member_signal(ms(600), owner, MemberSignal::Dead);
            core.handle_members(ms(600), Some(MemberEventKind::Dead), view(Some(owner)));
        }
        assert_eq!(changes(&mut taker), vec![], "waits for the first frame");
        assert_eq!(taker.awaiting_announce(), vec![ip(VIP)], "{mode:?}");
        assert!(taker.announce_deadline().is_some());
        taker.handle_first_announce(ms(603), ip(VIP));
        let reported = changes(&mut taker);
        assert_eq!(reported.len(), 1, "{mode:?}: {reported:?}");
        let c = &reported[0];
        let stages: Vec<Stage> = c.stages.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, Stage::ALL.to_vec(), "{mode:?}");
        assert!(c.stages.windows(2).all(|w| w[0].1 <= w[1].1));
        assert_eq!(c.at(Stage::FirstMiss), Some(ms(100)));
        assert_eq!(c.at(Stage::Decision), Some(ms(600)));
        assert_eq!(
            (c.previous.as_deref(), c.owner.as_deref(), c.next.as_deref()),
            (Some(owner), Some(next), Some(third))
        );
        assert_eq!(
            (c.cause, c.member.as_deref()),
            (Cause::MemberDead, Some(owner))
        );
        assert_eq!(taker.announce_deadline(), None, "nothing waits any more");

        assert_eq!(changes(&mut bystander), vec![], "{mode:?}");
        let seen = bystander.ownership_changes(ms(1600));
        let seen = seen.iter().find(|c| c.vip == VIP).unwrap();
        assert_eq!(
            (seen.owner.as_deref(), seen.previous.as_deref(), seen.cause),
            (Some(next), Some(owner), Cause::MemberDead)
        );
        assert_eq!(seen.age_ms, 1000.0);
        let names: Vec<Stage> = seen.stages.iter().map(|s| s.stage).collect();
        assert_eq!(
            names,
            [
                Stage::FirstMiss,
                Stage::Suspect,
                Stage::Dead,
                Stage::Decision
            ]
        );
    }
}

/// A change whose frame never shows is reported at the bound.
#[test]
fn a_missing_first_frame_is_reported_at_the_bound() {
    let [owner, next, _] = ranked();
    let t0 = Instant::now();
    let settings = StaticSettings::new(next, "198.18.0.1:7946".parse().unwrap());
    let mut core = SpeakerCore::new(&settings, desired(SharedVips::PerService), t0);
    core.handle_first_join(t0, view(None));
    for vip in core.awaiting_announce() {
        core.handle_first_announce(t0, vip);
    }
    let _ = changes(&mut core);
    core.handle_members(t0, Some(MemberEventKind::Left), view(Some(owner)));
    assert_eq!(changes(&mut core), vec![]);
    assert_eq!(core.poll_timeout(), None, "the bound wakes no decision");
    let due = core.announce_deadline().expect("the bound");
    assert_eq!(due, t0 + ANNOUNCE_BOUND);
    core.handle_announce_timeout(due - Duration::from_millis(1));
    assert_eq!(changes(&mut core), vec![]);
    core.handle_announce_timeout(due);
    let c = changes(&mut core);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].cause, Cause::MemberLeft);
    assert_eq!(c[0].at(Stage::FirstAnnounce), None);
}
