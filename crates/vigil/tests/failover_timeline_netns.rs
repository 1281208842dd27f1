//! Every ownership change explained, end to end (root, network namespaces): three standalone
//! hosts and a client on a bridge; the owner's host is lost (its cable pulled at the bridge, so
//! its process runs on but nobody hears it). The new owner logs one `ownership_changed` line per
//! VIP with every detection stage, counts it in `vigil_failover_stage_seconds`, and
//! `vigil status <ip>` on the new owner and on the bystander names the owner, the reason, the
//! previous owner and the stages.
//!
//! Nothing asserts a duration: stages are counted and names compared; waits are bounded polls.

mod standalone_lab;

use serde_json::Value;
use standalone_lab::{Cluster, VIGIL, VIP, VIP6, expected_owner, root_or_skip};
use std::process::{Command, Stdio};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(30);

/// The lab's namespace prefix, read off a path the lab names after it
/// (`/tmp/<prefix>-<host>.log`).
fn prefix(lab: &Cluster, host: &str) -> String {
    let log = lab.log_path(host).display().to_string();
    log.strip_prefix("/tmp/")
        .and_then(|s| s.strip_suffix(&format!("-{host}.log")))
        .expect("the lab's log path")
        .to_string()
}

/// Pulls `host`'s cable: its port on the bridge goes down (the host and its speaker run on).
fn unplug(lab: &Cluster, host: &str) {
    let br = format!("{}-br", prefix(lab, host));
    let port = format!("p-{host}-eth0");
    let ok = Command::new("ip")
        .args(["-n", &br, "link", "set", &port, "down"])
        .status()
        .expect("ip")
        .success();
    assert!(ok, "cannot set {port} down in {br}");
}

/// `vigil status <ip>` in `host`'s namespace.
fn explain(lab: &Cluster, host: &str, ip: &str) -> String {
    let ns = format!("{}-{host}", prefix(lab, host));
    let out = Command::new("ip")
        .args(["netns", "exec", &ns, VIGIL, "status", ip])
        .args(["--addr", "127.0.0.1:7472"])
        .stdin(Stdio::null())
        .output()
        .expect("vigil status");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `host`'s `ownership_changed` log lines about `vip`.
fn changes(lab: &Cluster, host: &str, vip: &str) -> Vec<Value> {
    lab.log(host)
        .lines()
        .filter(|l| l.contains("\"ownership_changed\""))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| field(v, "vip") == vip)
        .collect()
}

/// A field of a JSON log line (flattened: at the top level).
fn field(line: &Value, name: &str) -> String {
    let v = &line[name];
    v.as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

#[test]
fn a_host_loss_is_explained_by_the_log_the_metrics_and_vigil_status() {
    if !root_or_skip("a_host_loss_is_explained_by_the_log_the_metrics_and_vigil_status") {
        return;
    }
    let mut lab = Cluster::new(3);
    let names = lab.names();
    let owner = lab.start_all("", "");
    let survivors: Vec<String> = names.iter().filter(|n| **n != owner).cloned().collect();
    let next = expected_owner(&survivors);
    let bystander = survivors.iter().find(|n| **n != next).unwrap().clone();
    lab.wait_agreed(&owner);
    // Before the loss: the owner took both VIPs at start, and says so. A checked service
    // starts failing, so when the owner's first join beats its check's first pass (a shell
    // run, slow on a loaded machine) it elected a peer first and took over when the check
    // passed: "health". Seen once in CI.
    let first = explain(&lab, &owner, VIP);
    assert!(first.contains(&format!("owner:     {owner}")), "{first}");
    assert!(
        first.contains("cause:     startup") || first.contains("cause:     health"),
        "{first}"
    );

    unplug(&lab, &owner);
    let mac = lab.mac(&next);
    lab.wait_for("the next owner alone to answer ARP", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    lab.wait_for(
        "one ownership_changed line per VIP on the new owner",
        GENEROUS,
        || {
            [VIP, VIP6].iter().all(|vip| {
                changes(&lab, &next, vip)
                    .iter()
                    .any(|c| field(c, "cause") == "member_dead")
            })
        },
    );
    for vip in [VIP, VIP6] {
        let moves: Vec<Value> = changes(&lab, &next, vip)
            .into_iter()
            .filter(|c| field(c, "previous") == owner)
            .collect();
        assert_eq!(moves.len(), 1, "{vip}: one line per change\n{moves:?}");
        let c = &moves[0];
        eprintln!("{next}: {c}");
        assert_eq!(field(c, "owner"), next);
        assert_eq!(field(c, "member"), owner);
        assert_eq!(field(c, "cause"), "member_dead");
        // Every stage, each with a time: in three hosts each watches the other two, so the
        // new owner saw its own probes of the lost one go unanswered (`first_miss`).
        for stage in [
            "first_miss_ms",
            "suspect_ms",
            "dead_ms",
            "decision_ms",
            "first_announce_ms",
        ] {
            assert_ne!(field(c, stage), "-", "{vip}: {stage} missing\n{c}");
        }
        let stages: u64 = field(c, "stages").parse().unwrap();
        assert_eq!(stages, 5, "{c}");
        // The bystander and the lost owner report nothing for this change.
        assert!(
            changes(&lab, &bystander, vip)
                .iter()
                .all(|c| field(c, "previous") != owner),
            "the bystander reported the change"
        );
    }

    // `vigil status <ip>`: who owns it, why, who is next, since when, what moved it last.
    let text = explain(&lab, &next, VIP);
    eprintln!("vigil status {VIP} on {next}:\n{text}");
    for want in [
        format!("owner:     {next}, answering from here"),
        "why:       first of 2 live candidate(s)".to_string(),
        format!("previous:  {owner}"),
        format!("cause:     member_dead ({owner})"),
        format!("last move: {next} took over from {owner}: {owner} was declared dead"),
        "since:     ".to_string(),
        "next:      ".to_string(),
    ] {
        assert!(text.contains(&want), "{want:?} missing:\n{text}");
    }
    let stages_line = text.lines().find(|l| l.starts_with("stages:")).unwrap();
    for stage in [
        "first_miss +",
        "suspect +",
        "dead +",
        "decision +",
        "first_announce +",
    ] {
        assert!(stages_line.contains(stage), "{stage}: {stages_line}");
    }
    // The bystander knows the same owner and move; the first frame is the new owner's alone.
    lab.wait_for("the bystander to record the move", GENEROUS, || {
        explain(&lab, &bystander, VIP).contains(&format!("previous:  {owner}"))
    });
    let seen = explain(&lab, &bystander, VIP);
    assert!(seen.contains(&format!("owner:     {next}\n")), "{seen}");
    assert!(!seen.contains("first_announce"), "{seen}");

    // The histogram counted both VIPs' changes at every stage seen.
    let metrics = lab.metrics(&next);
    for stage in ["suspect", "dead", "decision", "first_announce"] {
        let series = format!(
            "vigil_failover_stage_seconds_count{{stage=\"{stage}\",cause=\"member_dead\"}} 2"
        );
        assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
    }
    assert!(
        metrics.contains("vigil_failover_changes_total{cause=\"member_dead\"} 2"),
        "{metrics}"
    );
}
