//! A frozen speaker that thaws never answers beside the survivor that took its VIPs (issue 23's
//! split-brain bound for a returning process), root, network namespaces.
//!
//! Three standalone hosts and a client on a bridge (`standalone_lab`). The VIP's owner's
//! speaker gets SIGSTOP for a second: the others declare it dead and the next candidate takes
//! the VIP. Then SIGCONT. Meanwhile the client asks ARP for the VIP every 5 ms, each question
//! from its own sender address, so every answer names the question it answers.
//!
//! Counted, no durations: the questions that two MACs answered, one of them the thawed host's,
//! before the thawed host's own gratuitous re-assertion (must be none: a thawed speaker that
//! still believed it owned the VIP would answer queued and new questions beside the survivor
//! until gossip merged); and at the end one owner that every host names, the only MAC
//! answering. The per-question record around the thaw is printed either way.

mod standalone_lab;

use standalone_lab::{Cluster, ProbeRecord, expected_owner, root_or_skip};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(20);
/// How long the owner's speaker stays stopped: several times the fast profile's detection (the
/// watch's verdict comes after 130 ms of silence), short of the isolation bound.
const FROZEN: Duration = Duration::from_secs(1);
/// The client's question interval, in ms.
const PROBE_EVERY_MS: u32 = 5;

/// A word's value in a `key=value` line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The gratuitous announcements the prober heard, as (the latest question asked when each
/// came, MAC), in arrival order.
fn gratuitous(record: &ProbeRecord) -> Vec<(usize, String)> {
    record
        .lines
        .iter()
        .filter(|l| l.starts_with("answer ") && field(l, "kind") == Some("arp"))
        .filter(|l| field(l, "gratuitous") == Some("1"))
        .filter_map(|l| {
            Some((
                field(l, "round")?.parse().ok()?,
                field(l, "mac")?.to_string(),
            ))
        })
        .collect()
}

/// The questions in `ranges` (1-based, inclusive; "..." between ranges), one line each: when it
/// was asked, who answered and when each answer arrived (ms since the prober started), and the
/// gratuitous announcements heard before the next question.
fn timeline(
    record: &ProbeRecord,
    ranges: &[(usize, usize)],
    name_of: &dyn Fn(&str) -> String,
) -> String {
    let asked: BTreeMap<usize, String> = record
        .lines
        .iter()
        .filter(|l| l.starts_with("round "))
        .filter_map(|l| Some((field(l, "n")?.parse().ok()?, field(l, "t_ms")?.to_string())))
        .collect();
    let mut heard: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for l in record.lines.iter().filter(|l| l.starts_with("answer ")) {
        if field(l, "kind") != Some("arp") {
            continue;
        }
        let (Some(round), Some(mac), Some(at)) = (
            field(l, "round").and_then(|r| r.parse().ok()),
            field(l, "mac"),
            field(l, "t_ms"),
        ) else {
            continue;
        };
        let what = if field(l, "gratuitous") == Some("1") {
            format!("GARP {} at {at}", name_of(mac))
        } else {
            format!("{} at {at}", name_of(mac))
        };
        heard.entry(round).or_default().push(what);
    }
    let mut out = String::new();
    for (i, (from, to)) in ranges.iter().enumerate() {
        if i > 0 {
            out.push_str("  ...\n");
        }
        for k in (*from).max(1)..=(*to).min(record.probes) {
            out.push_str(&format!(
                "  q{k} asked at {}: {}\n",
                asked.get(&k).map_or("?", String::as_str),
                heard.get(&k).map_or("-".to_string(), |h| h.join(", "))
            ));
        }
    }
    out
}

#[test]
fn a_thawed_owner_never_answers_beside_the_survivor_that_took_its_vip() {
    if !root_or_skip("a_thawed_owner_never_answers_beside_the_survivor_that_took_its_vip") {
        return;
    }
    let mut lab = Cluster::new(3);
    let names = lab.names();
    let owner = lab.start_all("", "");
    let survivors: Vec<String> = names.iter().filter(|n| **n != owner).cloned().collect();
    let next = expected_owner(&survivors);
    let (owner_mac, next_mac) = (lab.mac(&owner), lab.mac(&next));
    let macs: Vec<(String, String)> = names.iter().map(|h| (lab.mac(h), h.clone())).collect();
    let name_of = |mac: &str| {
        macs.iter()
            .find(|(m, _)| m == mac)
            .map_or_else(|| mac.to_string(), |(_, h)| h.clone())
    };
    lab.wait_agreed(&owner);

    lab.start_prober(PROBE_EVERY_MS, 25);
    let pid = lab
        .pid(&owner)
        .expect("the owner's speaker runs")
        .to_string();
    // Some questions answered by the owner first.
    std::thread::sleep(Duration::from_millis(300));
    vigil_netlab::run(&["kill", "-STOP", &pid]);
    std::thread::sleep(FROZEN);
    // The survivor must have taken the VIP before the thaw, or there is nothing to test.
    let took = vigil_netlab::poll(GENEROUS, Duration::from_millis(50), || {
        lab.owner_seen_by(&next).as_deref() == Some(&next)
    });
    vigil_netlab::run(&["kill", "-CONT", &pid]);
    assert!(
        took,
        "{next} never took the VIP from the frozen {owner}\n{}",
        lab.logs()
    );

    // Merged again: every host names one owner and that MAC alone answers.
    lab.wait_for("the cluster to merge after the thaw", GENEROUS, || {
        names.iter().all(|h| {
            lab.alive_seen_by(h).len() == 3 && lab.owner_seen_by(h).as_deref() == Some(&owner)
        })
    });
    lab.wait_for(
        "the owner alone to answer after the merge",
        GENEROUS,
        || lab.arp_answers() == [owner_mac.clone()],
    );
    let record = lab.stop_prober();

    // The survivor's first answer: it has the VIP from here on.
    let takeover = record
        .answers
        .iter()
        .position(|macs| macs.contains(&next_mac))
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("{next} never answered the client\n{}", lab.logs()));
    // The thawed host's own re-assertion: its first gratuitous announcement after that.
    let reassert = gratuitous(&record)
        .into_iter()
        .find(|(round, mac)| *round >= takeover && *mac == owner_mac)
        .map(|(round, _)| round);
    let end = reassert.unwrap_or(record.probes);
    // Questions before the re-assertion that the thawed host answered beside someone else.
    let beside: Vec<usize> = (1..end)
        .filter(|k| {
            let macs: BTreeSet<&String> = record.answers[k - 1].iter().collect();
            macs.len() > 1 && macs.contains(&owner_mac)
        })
        .collect();
    let early_alone = (takeover..end)
        .filter(|k| record.answers[k - 1].iter().all(|m| *m == owner_mac))
        .filter(|k| !record.answers[k - 1].is_empty())
        .count();
    let doubles_after: usize = (end..=record.probes)
        .filter(|k| {
            let macs: BTreeSet<&String> = record.answers[k - 1].iter().collect();
            macs.len() > 1
        })
        .count();
    // Around the survivor's takeover and around the re-assertion.
    let first = beside.first().copied().unwrap_or(takeover).min(takeover);
    let again = reassert.unwrap_or(record.probes);
    let around = timeline(
        &record,
        &[
            (first.saturating_sub(5), first + 10),
            (again.saturating_sub(10), again + 10),
        ],
        &name_of,
    );
    let garps: Vec<String> = gratuitous(&record)
        .iter()
        .map(|(round, mac)| format!("{}@q{round}", name_of(mac)))
        .collect();
    eprintln!(
        "{} questions; {next} first answered q{takeover}; {owner} re-asserted at q{}; {} \
         questions answered by {owner} beside another MAC before that, {early_alone} by {owner} \
         alone; {doubles_after} questions with two MACs after it; {} unanswered; gratuitous \
         announcements (host@latest question): {}\n{around}",
        record.probes,
        reassert.map_or("-".to_string(), |r| r.to_string()),
        beside.len(),
        record.unanswered().len(),
        garps.join(" ")
    );
    assert!(
        reassert.is_some(),
        "{owner} never re-asserted the VIP after the thaw\n{around}\n{}",
        lab.logs()
    );
    assert!(
        beside.is_empty(),
        "the thawed {owner} answered beside another MAC before its re-assertion: questions \
         {beside:?}\n{around}\n{}",
        lab.logs()
    );
    // One owner at the end: the last question's answers are one MAC, the owner's.
    let last = record
        .answers
        .iter()
        .rev()
        .find(|m| !m.is_empty())
        .expect("answers");
    let last: BTreeSet<&String> = last.iter().collect();
    assert_eq!(last, BTreeSet::from([&owner_mac]), "{around}");
}
