//! Rolling restart (root, network namespaces): every speaker is stopped with SIGTERM and
//! started again, one after the other, while the client asks ARP for the VIP every few
//! milliseconds. A stopping owner keeps answering until its successor claims the VIP, and a
//! node that loses the VIP to a returning one keeps answering until that one claims it: so
//! every question gets an answer, whatever the timing. Afterwards exactly one host answers.
//!
//! The assertion is about order, not time: each question is identified by its sender address
//! (see the lab's prober), so "no question went unanswered" means the new owner spoke before
//! the old one went silent.

mod standalone_lab;

use standalone_lab::{Cluster, VIP, VIP6, expected_owner, root_or_skip};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(30);
/// The prober's question interval.
const PROBE_INTERVAL_MS: u32 = 5;

/// Waits until every running host sees `alive` alive members and agrees on `owner`.
fn settled(lab: &Cluster, hosts: &[String], alive: usize, owner: &str) {
    lab.wait_for(
        &format!("{hosts:?} to see {alive} alive members and {owner} as the owner"),
        GENEROUS,
        || {
            hosts.iter().all(|h| {
                lab.alive_seen_by(h).len() == alive
                    && lab.owner_seen_by(h).as_deref() == Some(owner)
            })
        },
    );
}

#[test]
fn a_rolling_restart_leaves_no_question_unanswered() {
    if !root_or_skip("a_rolling_restart_leaves_no_question_unanswered") {
        return;
    }
    let mut lab = Cluster::new(3);
    let names = lab.names();
    let owner = lab.start_all("", "");
    lab.wait_agreed(&owner);
    let owner_mac = lab.mac(&owner);

    lab.start_prober(PROBE_INTERVAL_MS, 600);
    // Let it ask a few questions of the settled cluster first (the record shows it did).
    std::thread::sleep(Duration::from_millis(500));
    let mut handed_over = 0;
    for host in &names {
        assert!(
            lab.terminate(host),
            "SIGTERM did not stop {host} cleanly\n{}",
            lab.logs()
        );
        let rest: Vec<String> = names.iter().filter(|n| *n != host).cloned().collect();
        settled(&lab, &rest, rest.len(), &expected_owner(&rest));
        let log = lab.log(host);
        let logged = |event: &str, vip: &str| {
            log.lines().any(|l| {
                l.contains(&format!("\"event\":\"{event}\""))
                    && l.contains(&format!("\"vip\":\"{vip}\""))
            })
        };
        for vip in [VIP, VIP6] {
            if *host == owner {
                // It went silent because its successor spoke (gratuitous ARP, unsolicited
                // NA), not because the bound passed.
                assert!(
                    logged("vip_handed_over", vip),
                    "{host} did not hear its successor claim {vip}\n{}",
                    lab.logs()
                );
            }
            assert!(
                !logged("vip_handover_expired", vip),
                "{host}: the handover of {vip} ran out its bound\n{}",
                lab.logs()
            );
        }
        if *host == owner {
            handed_over += 1;
        }
        lab.start(host);
        settled(&lab, &names, names.len(), &owner);
        lab.wait_for("the owner alone to answer ARP again", GENEROUS, || {
            lab.arp_answers() == [owner_mac.clone()]
        });
    }
    let record = lab.stop_prober();

    assert_eq!(handed_over, 1);
    assert!(
        record.probes > 100,
        "the prober asked too little: {}",
        record.probes
    );
    let unanswered = record.unanswered();
    let owners = record.owners();
    println!(
        "rolling restart: {} questions, {} unanswered, {} answered by two MACs, owners seen: {:?}",
        record.probes,
        unanswered.len(),
        record.answered_twice(),
        owners
    );
    // Where the answering MACs changed, question by question: the handovers as seen.
    for k in 1..record.probes {
        if record.answers[k] != record.answers[k - 1] {
            println!(
                "question {k}: {:?} -> {:?}",
                record.answers[k - 1],
                record.answers[k]
            );
        }
    }
    assert!(
        unanswered.is_empty(),
        "questions without an answer: {unanswered:?}\nowners seen: {owners:?}\n{}",
        lab.logs()
    );
    // Only the owner's restart moved the VIP: to its successor and back.
    let others: Vec<String> = names.iter().filter(|n| **n != owner).cloned().collect();
    let successor_mac = lab.mac(&expected_owner(&others));
    assert_eq!(
        owners,
        [owner_mac.clone(), successor_mac, owner_mac.clone()],
        "owners seen"
    );
    // Exactly one owner afterwards, and everyone agrees.
    lab.wait_for("the owner alone to answer ARP", GENEROUS, || {
        lab.arp_answers() == [owner_mac.clone()]
    });
}
