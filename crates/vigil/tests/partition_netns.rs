//! Partition and heal (root, network namespaces): nftables rules in each host's namespace cut
//! the gossip between two sides while the client's segment still reaches everyone, as when a
//! network splits between racks but clients see both.
//!
//! - Without the split-brain guard both sides elect an owner and both answer ARP (as MetalLB
//!   does): the client sees two MACs.
//! - With `election.expected_members`, only the side with a majority announces.
//! - Either way, after the heal the cluster ends with exactly one owner that every host agrees
//!   on, the only MAC answering. A short partition heals through gossip to the dead; one that
//!   outlasts it heals through the seeds' re-join (`gossip.rejoin_interval`).
//!
//! Every wait is a bounded poll with a generous limit; nothing asserts a duration.

mod standalone_lab;

use standalone_lab::{Cluster, expected_owner, root_or_skip};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(60);

/// Longer than the fast profile's `gossip_to_the_dead_time` (15 s): past it nobody gossips to
/// the other side any more, so only the seeds' re-join can merge the cluster again.
const BEYOND_GOSSIP_TO_THE_DEAD: Duration = Duration::from_secs(17);

/// Three hosts on `election` settings (and `gossip` extras), converged: all see each other,
/// agree on the owner, and only the owner answers.
fn converged(election: &str, gossip: &str) -> (Cluster, String) {
    let mut lab = Cluster::new(3);
    lab.gossip_extra = gossip.to_string();
    let owner = lab.start_all(election, "");
    lab.wait_agreed(&owner);
    (lab, owner)
}

/// Cuts the owner off from the other two; returns the majority side and its owner.
fn cut_off(lab: &Cluster, owner: &str) -> (Vec<String>, String) {
    let rest: Vec<String> = lab.names().into_iter().filter(|n| n != owner).collect();
    let rest_refs: Vec<&str> = rest.iter().map(String::as_str).collect();
    lab.partition(&[&[owner], &rest_refs]);
    let next = expected_owner(&rest);
    (rest, next)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

#[test]
fn without_the_guard_both_sides_answer_and_the_heal_leaves_one_owner() {
    if !root_or_skip("without_the_guard_both_sides_answer_and_the_heal_leaves_one_owner") {
        return;
    }
    let (lab, owner) = converged("", "rejoin_interval: 2s");
    let (rest, next) = cut_off(&lab, &owner);
    // Each side sees only itself and elects its own owner.
    lab.wait_for("the majority side to elect its own owner", GENEROUS, || {
        rest.iter().all(|h| {
            lab.alive_seen_by(h).len() == 2 && lab.owner_seen_by(h).as_deref() == Some(&next)
        })
    });
    let both = sorted(vec![lab.mac(&owner), lab.mac(&next)]);
    lab.wait_for("the client to see both owners answer", GENEROUS, || {
        sorted(lab.arp_answers()) == both
    });
    // Each owner heard the other's claim.
    for host in [&owner, &next] {
        lab.wait_for("a vip_claimed_elsewhere event", GENEROUS, || {
            lab.log(host)
                .contains("\"event\":\"vip_claimed_elsewhere\"")
        });
    }
    // Let the partition outlast gossip to the dead, so that the heal needs the re-join.
    std::thread::sleep(BEYOND_GOSSIP_TO_THE_DEAD);
    let offsets: Vec<usize> = lab.names().iter().map(|h| lab.log(h).len()).collect();
    lab.heal();
    lab.wait_agreed(&owner);
    let rejoined = lab.names().iter().zip(&offsets).any(|(h, from)| {
        lab.log(h)
            .get(*from..)
            .is_some_and(|l| l.contains("\"event\":\"joined\""))
    });
    assert!(rejoined, "no seed re-join after the heal\n{}", lab.logs());
    // The majority's owner gave the VIP back to the returning one.
    assert!(
        lab.log(&next).contains("\"event\":\"vip_released\""),
        "{}",
        lab.logs()
    );
}

#[test]
fn with_the_guard_only_the_majority_answers_and_the_heal_leaves_one_owner() {
    if !root_or_skip("with_the_guard_only_the_majority_answers_and_the_heal_leaves_one_owner") {
        return;
    }
    let (lab, owner) = converged("expected_members: 3", "");
    let (rest, next) = cut_off(&lab, &owner);
    // The lone former owner sees 1 of 3 and goes silent; the majority elects and answers.
    lab.wait_for("the cut-off owner to lose its quorum", GENEROUS, || {
        lab.status(&owner).is_some_and(|s| {
            s["quorum"]["live"] == 1
                && s["vips"]
                    .as_array()
                    .is_some_and(|vs| vs.iter().all(|v| v["announced_here"] == false))
        })
    });
    lab.wait_for("the majority side to elect its own owner", GENEROUS, || {
        rest.iter().all(|h| {
            lab.alive_seen_by(h).len() == 2 && lab.owner_seen_by(h).as_deref() == Some(&next)
        })
    });
    let mac = lab.mac(&next);
    lab.wait_for("only the majority's owner to answer", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    // And it stays that way: ask again a few times while the partition lasts.
    for _ in 0..5 {
        assert_eq!(
            lab.arp_answers(),
            std::slice::from_ref(&mac),
            "{}",
            lab.logs()
        );
    }
    lab.heal();
    lab.wait_agreed(&owner);
}
