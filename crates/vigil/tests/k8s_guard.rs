//! A host that comes back never answers beside the VIPs' owner (issue 23's split-brain bound),
//! in Kubernetes mode with the majority guard (`--majority-guard`) and in standalone mode
//! without it (the isolation rule alone, `vigil_speaker_core::core::isolation`).
//!
//! The lab of `k8s_support` (a real kube-apiserver, three speaker hosts, a client): the owner's
//! link is cut for two seconds (it sees every other member lost at once; the others take its
//! VIPs), then restored. A client asks ARP and NDP for Service `web`'s two VIPs every 5 ms
//! throughout. Counted, after the link is back: answers from the returning host before its own
//! gratuitous re-assertion (must be none: it is silent until it has merged, and the rejoin
//! quiet more), questions answered by two MACs after the heal (at most the one or two asked at
//! the handover itself: the returning host keeps the deaths it declared while cut off to
//! itself, so no survivor takes over from another, and the survivor answering for its VIPs
//! hears it back before it re-asserts and hands over at its first frame; see
//! docs/ARCHITECTURE.md), and at the end one MAC per VIP.
//!
//! Root and the Go programs are needed (skips otherwise; fails under `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`).

mod k8s_support;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use vigil_kubelab::cluster::{CLIENT, LabProcess};
use vigil_netlab::prober::{Kind, Recording};

use k8s_support::{Cluster, Mode, Probe, SETTLE, Svc, WEB4, WEB6, pool_and_ad};

const WEB: [IpAddr; 2] = [IpAddr::V4(WEB4), IpAddr::V6(WEB6)];
/// How long the owner's link stays down: long enough for it to lose every other member (a few
/// hundred ms with the fast profile), short of the isolation bound.
const CUT: Duration = Duration::from_secs(2);
/// The client's question interval.
const PROBE_EVERY: Duration = Duration::from_millis(5);
/// Questions both the survivor and the returning owner may answer at the handover itself.
const MAX_DOUBLE_AT_HANDOVER: usize = 2;

/// What the client saw of one kind after the heal.
#[derive(Debug, Default)]
struct AfterHeal {
    /// Answers from the returning host before its first gratuitous announcement.
    early: usize,
    /// Rounds with two MACs answering.
    double_rounds: usize,
    /// From the first to the last answer of those rounds.
    double_window: Duration,
    /// Of those rounds, how many the returning host (the owner once merged) answered last.
    owner_last: usize,
    /// The MAC pairs of those rounds, with their counts.
    pairs: BTreeMap<(String, String), usize>,
    /// When the returning host's first gratuitous announcement came, after the heal.
    reasserted_after: Option<Duration>,
}

fn after_heal(rec: &Recording, kind: Kind, heal: Duration, returning: &str) -> AfterHeal {
    let mut out = AfterHeal::default();
    let reassert = rec
        .answers
        .iter()
        .find(|a| a.kind == kind && a.at >= heal && a.gratuitous && a.mac.to_string() == returning)
        .map(|a| a.at);
    out.reasserted_after = reassert.map(|at| at - heal);
    let asked: Vec<_> = rec
        .answers
        .iter()
        .filter(|a| a.kind == kind && a.at >= heal && !a.gratuitous)
        .collect();
    // The announcer answers a question in the turn it takes the VIP, and its first gratuitous
    // frame leaves right after (paced): answers within one probe interval of it are part of
    // the re-assertion.
    out.early = asked
        .iter()
        .filter(|a| {
            a.mac.to_string() == returning && reassert.is_none_or(|r| a.at + PROBE_EVERY < r)
        })
        .count();
    let mut rounds: BTreeMap<u64, Vec<(Duration, String)>> = BTreeMap::new();
    for a in &asked {
        rounds
            .entry(a.round)
            .or_default()
            .push((a.at, a.mac.to_string()));
    }
    let mut first = None;
    let mut last = Duration::ZERO;
    for answers in rounds.values() {
        let macs: BTreeSet<&String> = answers.iter().map(|(_, m)| m).collect();
        if macs.len() < 2 {
            continue;
        }
        out.double_rounds += 1;
        let mut pair = macs.iter().map(|m| (*m).clone());
        if let (Some(x), Some(y)) = (pair.next(), pair.next()) {
            *out.pairs.entry((x, y)).or_default() += 1;
        }
        first.get_or_insert(answers[0].0);
        last = answers.iter().map(|(at, _)| *at).max().unwrap_or(last);
        if answers.last().is_some_and(|(_, m)| m == returning) {
            out.owner_last += 1;
        }
    }
    out.double_window = first.map_or(Duration::ZERO, |f| last - f);
    out
}

/// Cuts `owner`'s link for [`CUT`] while the client probes, waits until it answers alone
/// again, and checks what the client saw after the heal.
fn cut_and_heal(test: &str, c: &mut Cluster, owner: &str, logs: &dyn Fn() -> String) {
    let rest: Vec<&str> = c.nodes().into_iter().filter(|n| *n != owner).collect();
    let next = Cluster::first(&rest, IpAddr::V4(WEB4));
    let next_mac = c.mac(&next).to_string();
    let owner_mac = c.mac(owner).to_string();
    let probe = Probe::start(&c.ns(CLIENT), WEB4, Some(WEB6), PROBE_EVERY);
    std::thread::sleep(Duration::from_millis(200));
    let cut_at = probe.now();
    c.set_link(owner, false);
    let moved = vigil_netlab::poll(SETTLE, Duration::from_millis(20), || {
        probe.heard_since(Kind::Arp, &next_mac, cut_at)
            && probe.heard_since(Kind::Ndp, &next_mac, cut_at)
    });
    assert!(
        moved,
        "{test}: {next} never took over from {owner}\n{}",
        logs()
    );
    let cut_left = CUT.saturating_sub(probe.now() - cut_at);
    std::thread::sleep(cut_left);
    let heal = probe.now();
    c.set_link(owner, true);
    // Back: it merges, takes its VIPs again (MetalLB's ranking), and answers alone.
    let back = vigil_netlab::poll(SETTLE, Duration::from_millis(20), || {
        probe.heard_since(Kind::Arp, &owner_mac, heal)
            && probe.heard_since(Kind::Ndp, &owner_mac, heal)
    });
    std::thread::sleep(Duration::from_millis(500));
    let rec = probe.finish();
    assert!(
        back,
        "{test}: {owner} never answered again after the heal\n{}",
        logs()
    );
    for kind in [Kind::Arp, Kind::Ndp] {
        let seen = after_heal(&rec, kind, heal, &owner_mac);
        let pairs: Vec<String> = seen
            .pairs
            .iter()
            .map(|((x, y), n)| format!("{}+{}: {n}", c.node_of_mac(x), c.node_of_mac(y)))
            .collect();
        eprintln!(
            "{test}: {} after the heal: {owner} re-asserted after {:?} ms, answered {} question(s) \
             before that; rounds with two MACs: {} over {} ms ({}), {owner} last in {} (probe \
             every 5 ms)",
            kind.name(),
            seen.reasserted_after.map(|d| d.as_millis()),
            seen.early,
            seen.double_rounds,
            seen.double_window.as_millis(),
            pairs.join(", "),
            seen.owner_last,
        );
        assert!(
            seen.reasserted_after.is_some(),
            "{test}: {}: {owner} never re-asserted after the heal\n{}",
            kind.name(),
            logs()
        );
        assert_eq!(
            seen.early,
            0,
            "{test}: {}: {owner} answered before it had merged and re-asserted\n{}",
            kind.name(),
            logs()
        );
        // The survivors never held each other dead (the returning host kept the deaths it
        // declared while cut off to itself), and the survivor answering for its VIPs had
        // heard it back before it re-asserted, so it handed over at its first frame. A
        // question asked at that very moment can still be answered by both (the survivor
        // answers until the new owner's first frame reaches it): at most two such.
        assert!(
            seen.double_rounds <= MAX_DOUBLE_AT_HANDOVER,
            "{test}: {}: {} questions answered by two MACs after the heal ({})\n{}",
            kind.name(),
            seen.double_rounds,
            pairs.join(", "),
            logs()
        );
    }
    c.assert_only(&format!("{test}: {owner} back"), &WEB, owner);
}

fn web_cluster(test: &str, tag: &str) -> Option<Cluster> {
    Cluster::new(
        test,
        tag,
        &[],
        &pool_and_ad(),
        &[Svc {
            name: "web",
            ips: &WEB,
        }],
    )
}

/// Lines of `event` in `log`.
fn events(log: &str, event: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(&format!("\"event\":\"{event}\"")))
        .map(str::to_string)
        .collect()
}

#[test]
fn with_the_majority_guard_in_kubernetes_mode_a_returning_host_never_answers_beside_the_owner() {
    const TEST: &str = "with_the_majority_guard_in_kubernetes_mode_a_returning_host_never_answers_beside_the_owner";
    let started = Instant::now();
    let Some(mut c) = web_cluster(TEST, "vkg-grd") else {
        return;
    };
    let vigil = Path::new(env!("CARGO_BIN_EXE_vigil"));
    let mut speakers: Vec<LabProcess> = (0..c.speakers.len())
        .map(|i| c.vigil_speaker(vigil, i, &["--majority-guard".to_string()]))
        .collect();
    let logs = |speakers: &[LabProcess]| {
        speakers
            .iter()
            .map(|p| p.log_tail(25))
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    let all: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let owner = Cluster::first(&all, IpAddr::V4(WEB4));
    c.assert_only(&format!("{TEST}: settled"), &WEB, &owner);
    // The guard is in force, counting the three speaker Pods' nodes.
    for p in &speakers {
        let started = events(&p.log_text(), "started");
        assert!(
            started
                .iter()
                .any(|l| l.contains("\"expected_members\":\"Some(3)\"")),
            "{TEST}: the guard expects 3 members: {started:?}"
        );
    }
    let snapshot = std::cell::RefCell::new(String::new());
    let i = c.index(&owner);
    cut_and_heal(TEST, &mut c, &owner, &|| {
        snapshot.replace(logs(&speakers));
        snapshot.borrow().clone()
    });
    // Cut off, the owner went silent: gossip's cut-off (heard no one for 130 ms) comes before
    // the guard sees its view drop below a majority, so either reason may be the one logged.
    let released = events(&speakers[i].log_text(), "vip_released");
    assert!(
        released
            .iter()
            .any(|l| l.contains("split-brain guard") || l.contains("isolated")),
        "{TEST}: {owner} never released its VIPs when cut off: {released:?}"
    );
    for p in &mut speakers {
        p.check_running();
        assert!(
            p.terminate(Duration::from_secs(15))
                .is_some_and(|s| s.success())
        );
    }
    eprintln!("{TEST}: total {:?}", started.elapsed());
}

#[test]
fn without_the_guard_in_standalone_mode_a_returning_host_never_answers_beside_the_owner() {
    const TEST: &str =
        "without_the_guard_in_standalone_mode_a_returning_host_never_answers_beside_the_owner";
    let started = Instant::now();
    let Some(mut c) = web_cluster(TEST, "vkg-iso") else {
        return;
    };
    c.start_all(Mode::Standalone);
    let all: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let owner = Cluster::first(&all, IpAddr::V4(WEB4));
    c.assert_only(&format!("{TEST}: settled"), &WEB, &owner);
    let logs = c.logs();
    let i = c.index(&owner);
    let snapshot = std::cell::RefCell::new(logs);
    cut_and_heal(TEST, &mut c, &owner, &|| snapshot.borrow().clone());
    // Cut off, the owner found itself isolated and went silent for that reason.
    let released = events(&c.daemons[i].log_text(), "vip_released");
    assert!(
        released.iter().any(|l| l.contains("isolated")),
        "{TEST}: {owner} never released its VIPs as isolated: {released:?}\n{}",
        c.logs()
    );
    for d in &mut c.daemons {
        d.check_running();
        assert!(d.terminate(), "{} stops on SIGTERM", d.node);
    }
    eprintln!("{TEST}: total {:?}", started.elapsed());
}
