//! Mixed clusters of real processes: `vigil agent` nodes and Go memberlist nodes
//! (`conformance/cmd/vigil-gopeer`) at 0.2.2 (Debian), 0.5.1 (MetalLB's pin) and 0.7.0 (the
//! latest release), every node on a host of its own in a network-namespace lab, all with Go's
//! LAN timings.
//!
//! Each mixed-cluster test runs once per memberlist version, as `memberlist_0_2_2::NAME`,
//! `memberlist_0_5_1::NAME` and `memberlist_0_7_0::NAME`, so a failure names the version (and
//! `cargo test --test interop memberlist_0_5_1` runs one version). They need root for the
//! namespaces (skipped without, unless `VIGIL_REQUIRE_ROOT=1`) and the Go peers, from
//! `VIGIL_GO_BIN_DIR`, from next to `VIGIL_CONFORMANCE_BIN`, or from `conformance/build.sh`
//! (skipped without Go, unless `VIGIL_REQUIRE_GO=1`).

mod interop_lab;
mod support;

use interop_lab::Lab;
use std::path::PathBuf;
use support::{DETECT, Kind, Node, WAIT, gopeer_bin_for, vigil, wait_converged, wait_until};

const K16: &str = "AQEBAQEBAQEBAQEBAQEBAQ==";
const K24: &str = "AgICAgICAgICAgICAgICAgICAgICAgIC";
const K32: &str = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
const K_OTHER: &str = "CQkJCQkJCQkJCQkJCQkJCQ==";
const K_NEW: &str = "BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=";
const LO_ANY: &str = "127.0.0.1:0";

/// Each test body below, once per memberlist version, in a module named after the version.
macro_rules! for_each_memberlist_version {
    ($($test:ident),* $(,)?) => {
        for_each_memberlist_version!(@version memberlist_0_2_2, "0.2.2", $($test),*);
        for_each_memberlist_version!(@version memberlist_0_5_1, "0.5.1", $($test),*);
        for_each_memberlist_version!(@version memberlist_0_7_0, "0.7.0", $($test),*);
    };
    (@version $module:ident, $version:literal, $($test:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $test() {
                    super::$test($version);
                }
            )*
        }
    };
}

for_each_memberlist_version!(
    vigil_joins_a_go_cluster,
    agent_retries_a_join_until_the_seed_is_up,
    go_joins_a_vigil_cluster,
    sigkill_is_detected_both_ways_and_restarted_nodes_rejoin,
    graceful_leave_is_seen_as_left_both_ways,
    encryption_with_16_24_and_32_byte_keys,
    wrong_key_never_becomes_a_member,
    labels_decide_membership,
    key_rotation_across_a_mixed_cluster_suspects_no_one,
    user_messages_and_meta_updates_flow_both_ways,
    push_pull_with_more_than_50_members,
    ipv6_mixed_cluster,
);

/// A fresh lab and the Go peer of `version`, or `None` when the test is to be skipped (no
/// root, or no Go; each says so).
fn lab(test: &str, version: &str) -> Option<(Lab, PathBuf)> {
    lab_for(test, version, 16)
}

/// [`lab`] for up to `hosts` hosts.
fn lab_for(test: &str, version: &str, hosts: usize) -> Option<(Lab, PathBuf)> {
    if !vigil_netlab::root_or_skip(&format!("{test} (memberlist {version})")) {
        return None;
    }
    let bin = gopeer_bin_for(version)?;
    Some((Lab::with_capacity("vgio", hosts), bin))
}

/// Whether this memberlist version has labels (0.3.0 and later).
fn has_labels(version: &str) -> bool {
    version != "0.2.2"
}

fn no_events_about(nodes: &[&Node], events: &[&str], about: &str) {
    for n in nodes {
        for ev in events {
            let found = n.matching(ev, |e| e["node"] == about);
            assert!(
                found.is_empty(),
                "{} saw {ev} about {about}: {found:?}",
                n.name
            );
        }
    }
}

fn vigil_joins_a_go_cluster(version: &str) {
    let Some((mut lab, bin)) = lab("vigil_joins_a_go_cluster", version) else {
        return;
    };
    let mut g1 = lab.go(&bin, "g1", &[], &[]);
    let ready = g1.wait_event("ready", WAIT, |_| true);
    assert_eq!(
        ready["version"], version,
        "the peer runs memberlist {version}"
    );
    let mut g2 = lab.go(&bin, "g2", &[g1.addr], &[]);
    let mut g3 = lab.go(&bin, "g3", &[g1.addr], &[]);
    let mut v1 = lab.vigil("v1", &[g2.addr], &[]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(
        &mut [&mut g1, &mut g2, &mut g3, &mut v1],
        &["g1", "g2", "g3", "v1"],
        WAIT,
    );
}

/// An agent started before its seed keeps trying (`--retry-join`) and gets in.
fn agent_retries_a_join_until_the_seed_is_up(version: &str) {
    let Some((mut lab, bin)) = lab("agent_retries_a_join_until_the_seed_is_up", version) else {
        return;
    };
    // The seed's host is up but nothing listens yet, so the agent's first tries are refused.
    let seed_host = lab.host();
    let mut v1 = lab.vigil("v1", &[seed_host.addr()], &["--retry-join", "300ms"]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 0);
    let mut g1 = lab.go_on(&seed_host, &bin, "g1", &[], &[]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(&mut [&mut g1, &mut v1], &["g1", "v1"], WAIT);
}

fn go_joins_a_vigil_cluster(version: &str) {
    let Some((mut lab, bin)) = lab("go_joins_a_vigil_cluster", version) else {
        return;
    };
    let mut v1 = lab.vigil("v1", &[], &[]);
    let mut v2 = lab.vigil("v2", &[v1.addr], &[]);
    let mut v3 = lab.vigil("v3", &[v1.addr], &[]);
    let mut g1 = lab.go(&bin, "g1", &[v3.addr], &[]);
    g1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(
        &mut [&mut v1, &mut v2, &mut v3, &mut g1],
        &["g1", "v1", "v2", "v3"],
        WAIT,
    );
}

/// SIGKILL of a Go node is detected by vigil nodes and of a vigil node by Go nodes; each
/// restarted at its old address rejoins.
fn sigkill_is_detected_both_ways_and_restarted_nodes_rejoin(version: &str) {
    let Some((mut lab, bin)) = lab(
        "sigkill_is_detected_both_ways_and_restarted_nodes_rejoin",
        version,
    ) else {
        return;
    };
    let mut g1 = lab.go(&bin, "g1", &[], &[]);
    let g2_host = lab.host();
    let mut g2 = lab.go_on(&g2_host, &bin, "g2", &[g1.addr], &[]);
    let mut v1 = lab.vigil("v1", &[g1.addr], &[]);
    let v2_host = lab.host();
    let mut v2 = lab.vigil_on(&v2_host, "v2", &[g1.addr], &[]);
    let all = ["g1", "g2", "v1", "v2"];
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);

    g2.kill();
    v1.wait_about("dead", "g2", DETECT);
    v2.wait_about("dead", "g2", DETECT);
    g1.wait_about("dead", "g2", DETECT);
    drop(g2);
    let mut g2 = lab.go_on(&g2_host, &bin, "g2", &[v1.addr], &[]);
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);

    v2.kill();
    g1.wait_about("dead", "v2", DETECT);
    g2.wait_about("dead", "v2", DETECT);
    v1.wait_about("dead", "v2", DETECT);
    drop(v2);
    let mut v2 = lab.vigil_on(&v2_host, "v2", &[g2.addr], &[]);
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);
}

fn graceful_leave_is_seen_as_left_both_ways(version: &str) {
    let Some((mut lab, bin)) = lab("graceful_leave_is_seen_as_left_both_ways", version) else {
        return;
    };
    let mut g1 = lab.go(&bin, "g1", &[], &[]);
    let mut g2 = lab.go(&bin, "g2", &[g1.addr], &[]);
    let mut v1 = lab.vigil("v1", &[g1.addr], &[]);
    let mut v2 = lab.vigil("v2", &[g1.addr], &["--leave-timeout", "3s"]);
    wait_converged(
        &mut [&mut g1, &mut g2, &mut v1, &mut v2],
        &["g1", "g2", "v1", "v2"],
        WAIT,
    );

    let status = v2.terminate();
    assert!(status.success(), "vigil agent exit on SIGTERM: {status}");
    v2.wait_event("stopped", WAIT, |_| true);
    g1.wait_about("left", "v2", WAIT);
    g2.wait_about("left", "v2", WAIT);
    v1.wait_about("left", "v2", WAIT);

    g2.cmd_ok("leave 3000");
    g2.cmd("shutdown");
    g1.wait_about("left", "g2", WAIT);
    v1.wait_about("left", "g2", WAIT);
    no_events_about(&[&g1, &v1], &["dead"], "v2");
    no_events_about(&[&g1, &v1], &["dead"], "g2");
}

fn encryption_with_16_24_and_32_byte_keys(version: &str) {
    let Some((mut lab, bin)) = lab("encryption_with_16_24_and_32_byte_keys", version) else {
        return;
    };
    let mut pairs = Vec::new();
    for (i, key) in [K16, K24, K32].into_iter().enumerate() {
        let g = lab.go(&bin, &format!("g{i}"), &[], &["-key", key]);
        let v = lab.vigil(&format!("v{i}"), &[g.addr], &["--key", key]);
        // A Go node joining through the vigil node proves the other direction.
        let g_in = lab.go(&bin, &format!("h{i}"), &[v.addr], &["-key", key]);
        pairs.push((i, g, v, g_in));
    }
    for (i, g, v, g_in) in &mut pairs {
        // All three pairs share one bridge; each key makes a cluster of its own.
        let names = [format!("g{i}"), format!("h{i}"), format!("v{i}")];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        wait_converged(&mut [g, v, g_in], &names, WAIT);
        assert_eq!(v.metric("vigil_gossip_decrypt_failures_total"), 0);
        assert!(g.matching("rejected", |_| true).is_empty());
    }
}

/// Wrong keys and missing encryption never make a member, and are counted as rejected.
fn wrong_key_never_becomes_a_member(version: &str) {
    let Some((mut lab, bin)) = lab("wrong_key_never_becomes_a_member", version) else {
        return;
    };
    let mut g1 = lab.go(&bin, "g1", &[], &["-key", K16]);
    let mut v1 = lab.vigil("v1", &[g1.addr], &["--key", K16]);
    wait_converged(&mut [&mut g1, &mut v1], &["g1", "v1"], WAIT);

    // A vigil node with the wrong key tries the Go node: Go rejects it.
    let bad_v = lab.vigil("bad-v", &[g1.addr], &["--key", K_OTHER]);
    let joined = bad_v.wait_event("joined", WAIT, |_| true);
    assert_eq!(joined["n"], 0, "{joined}");
    g1.wait_event("rejected", WAIT, |_| true);

    // A Go node with the wrong key tries the vigil node: vigil counts it.
    let bad_g = lab.go(&bin, "bad-g", &[v1.addr], &["-key", K_OTHER]);
    let joined = bad_g.wait_event("joined", WAIT, |_| true);
    assert!(joined["error"].is_string(), "{joined}");
    wait_until("v1 counts decrypt failures", WAIT, || {
        v1.metric("vigil_gossip_decrypt_failures_total") > 0
    });

    // A node without encryption is rejected too.
    let plain = lab.vigil("plain", &[v1.addr], &[]);
    let joined = plain.wait_event("joined", WAIT, |_| true);
    assert_eq!(joined["n"], 0, "{joined}");

    std::thread::sleep(std::time::Duration::from_secs(2));
    for n in [&mut g1, &mut v1] {
        let members = n.members();
        let names: Vec<&str> = members.keys().map(String::as_str).collect();
        assert_eq!(names, ["g1", "v1"], "{} knows {members:?}", n.name);
    }
}

/// Labels (memberlist 0.3+): a different or missing label never joins. Go 0.2.2 has none and
/// rejects a labelled node's traffic as garbage; 0.5.1 and 0.7.0 join vigil nodes with the
/// same label and reject those with another, both ways.
fn labels_decide_membership(version: &str) {
    let Some((mut lab, bin)) = lab("labels_decide_membership", version) else {
        return;
    };
    let mut v1 = lab.vigil("v1", &[], &["--label", "blue"]);
    let mut v2 = lab.vigil("v2", &[v1.addr], &["--label", "blue"]);
    wait_converged(&mut [&mut v1, &mut v2], &["v1", "v2"], WAIT);

    let red = lab.vigil("red", &[v1.addr], &["--label", "red"]);
    assert_eq!(red.wait_event("joined", WAIT, |_| true)["n"], 0);
    let none = lab.vigil("none", &[v1.addr], &[]);
    assert_eq!(none.wait_event("joined", WAIT, |_| true)["n"], 0);
    wait_until("v1 counts label mismatches", WAIT, || {
        v1.metric("vigil_gossip_label_mismatches_total") >= 2
    });

    // An unlabelled Go node refuses a labelled vigil node: 0.2.2 as an unknown message type
    // (244, the label header's), the others as a label mismatch.
    let mut g1 = lab.go(&bin, "g1", &[], &[]);
    let blue_to_go = lab.vigil("blue-g", &[g1.addr], &["--label", "blue"]);
    assert_eq!(blue_to_go.wait_event("joined", WAIT, |_| true)["n"], 0);
    g1.wait_event("rejected", WAIT, |e| {
        e["kind"] == "label" || e["line"].as_str().is_some_and(|l| l.contains("(244)"))
    });

    let mut blue = vec!["v1", "v2"];
    if has_labels(version) {
        // A blue Go node joins the blue vigil cluster; a red one is refused by it, and a blue
        // Go node refuses an unlabelled vigil node.
        let mut g_blue = lab.go(&bin, "g-blue", &[v2.addr], &["-label", "blue"]);
        g_blue.wait_event("joined", WAIT, |e| e["n"] == 1);
        wait_converged(
            &mut [&mut v1, &mut v2, &mut g_blue],
            &["g-blue", "v1", "v2"],
            WAIT,
        );
        let before = v1.metric("vigil_gossip_label_mismatches_total");
        let g_red = lab.go(&bin, "g-red", &[v1.addr], &["-label", "red"]);
        let joined = g_red.wait_event("joined", WAIT, |_| true);
        assert!(joined["error"].is_string(), "{joined}");
        wait_until("v1 counts the red Go node", WAIT, || {
            v1.metric("vigil_gossip_label_mismatches_total") > before
        });
        let plain_to_blue = lab.vigil("plain-g", &[g_blue.addr], &[]);
        assert_eq!(plain_to_blue.wait_event("joined", WAIT, |_| true)["n"], 0);
        g_blue.wait_event("rejected", WAIT, |e| e["kind"] == "label");
        blue.push("g-blue");
        std::thread::sleep(std::time::Duration::from_secs(1));
        assert_eq!(g_blue.members().len(), 3, "{:?}", g_blue.members());
    } else {
        // 0.2.2 cannot be given a label at all.
        let mut cmd = std::process::Command::new(&bin);
        cmd.args(["-name", "x", "-label", "blue"]);
        let out = cmd.output().unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("no labels"),
            "{out:?}"
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    assert_eq!(v1.members().len(), blue.len(), "{:?}", v1.members());
    assert_eq!(g1.members().len(), 1, "{:?}", g1.members());
}

/// Install a new key everywhere, make it primary everywhere, remove the old one: nobody is
/// ever suspected. One vigil node rotates through its keyring file, the other through the
/// admin endpoint, the Go nodes through memberlist's Keyring.
fn key_rotation_across_a_mixed_cluster_suspects_no_one(version: &str) {
    let Some((mut lab, bin)) = lab(
        "key_rotation_across_a_mixed_cluster_suspects_no_one",
        version,
    ) else {
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "vigil-interop-rot-{}-{version}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ring = dir.join("keyring.json");
    let write_ring = |keys: &[&str]| {
        // Write then rename, so the agent never reads a half-written file.
        let tmp = dir.join("keyring.tmp");
        std::fs::write(&tmp, serde_json::to_string(keys).unwrap()).unwrap();
        std::fs::rename(&tmp, &ring).unwrap();
    };
    write_ring(&[K16]);
    let ring_arg = ring.to_str().unwrap();

    let mut g1 = lab.go(&bin, "g1", &[], &["-key", K16]);
    let mut g2 = lab.go(&bin, "g2", &[g1.addr], &["-key", K16]);
    let mut v1 = lab.vigil("v1", &[g1.addr], &["--keyring-file", ring_arg]);
    let mut v2 = lab.vigil("v2", &[g1.addr], &["--key", K16]);
    let all = ["g1", "g2", "v1", "v2"];
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);
    let pause = || std::thread::sleep(std::time::Duration::from_millis(1500));

    // 1. Install the new key everywhere.
    g1.cmd_ok(&format!("key-install {K_NEW}"));
    g2.cmd_ok(&format!("key-install {K_NEW}"));
    write_ring(&[K16, K_NEW]);
    v1.wait_event("keyring_reloaded", WAIT, |e| e["keys"] == 2);
    assert_eq!(v2.http("POST", "/keyring/install", K_NEW).0, 200);
    pause();
    // 2. Make it primary everywhere.
    g1.cmd_ok(&format!("key-use {K_NEW}"));
    g2.cmd_ok(&format!("key-use {K_NEW}"));
    write_ring(&[K_NEW, K16]);
    wait_until("v1 reloads the ring again", WAIT, || {
        v1.matching("keyring_reloaded", |_| true).len() >= 2
    });
    assert_eq!(v2.http("POST", "/keyring/use", K_NEW).0, 200);
    pause();
    // 3. Remove the old key everywhere.
    g1.cmd_ok(&format!("key-remove {K16}"));
    g2.cmd_ok(&format!("key-remove {K16}"));
    write_ring(&[K_NEW]);
    wait_until("v1 drops the old key", WAIT, || {
        v1.matching("keyring_reloaded", |e| e["keys"] == 1).len() == 1
    });
    assert_eq!(v2.http("POST", "/keyring/remove", K16).0, 200);
    // Several probe rounds on the new key alone.
    std::thread::sleep(std::time::Duration::from_secs(5));

    // A newcomer holding only the new key joins through either side.
    let mut v3 = lab.vigil("v3", &[g2.addr], &["--key", K_NEW]);
    let all = ["g1", "g2", "v1", "v2", "v3"];
    wait_converged(
        &mut [&mut g1, &mut g2, &mut v1, &mut v2, &mut v3],
        &all,
        WAIT,
    );
    for n in [&g1, &g2, &v1, &v2] {
        for ev in ["suspect", "dead", "rejected", "keyring_rejected"] {
            let seen = n.matching(ev, |_| true);
            assert!(seen.is_empty(), "{} saw {ev}: {seen:?}", n.name);
        }
    }
    for v in [&v1, &v2] {
        assert_eq!(v.metric("vigil_gossip_suspicions_total"), 0);
        assert_eq!(v.metric("vigil_gossip_decrypt_failures_total"), 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn user_messages_and_meta_updates_flow_both_ways(version: &str) {
    let Some((mut lab, bin)) = lab("user_messages_and_meta_updates_flow_both_ways", version) else {
        return;
    };
    let mut g1 = lab.go(&bin, "g1", &[], &[]);
    let mut v1 = lab.vigil("v1", &[g1.addr], &[]);
    wait_converged(&mut [&mut g1, &mut v1], &["g1", "v1"], WAIT);

    g1.cmd_ok("send v1 go-over-tcp");
    g1.cmd_ok("sendudp v1 go-over-udp");
    g1.cmd_ok("broadcast go-broadcast");
    for msg in ["go-over-tcp", "go-over-udp", "go-broadcast"] {
        v1.wait_event("user", WAIT, |e| e["msg"] == msg);
    }

    let to = g1.addr;
    assert_eq!(
        v1.http("POST", &format!("/send?to={to}"), "vigil-over-tcp")
            .0,
        200
    );
    assert_eq!(
        v1.http("POST", &format!("/send?to={to}&udp"), "vigil-over-udp")
            .0,
        200
    );
    assert_eq!(v1.http("POST", "/broadcast", "vigil-broadcast").0, 200);
    for msg in ["vigil-over-tcp", "vigil-over-udp", "vigil-broadcast"] {
        g1.wait_event("user", WAIT, |e| e["msg"] == msg);
    }

    assert_eq!(v1.http("POST", "/meta", "vigil-meta").0, 200);
    g1.wait_event("update", WAIT, |e| {
        e["node"] == "v1" && e["meta"] == "vigil-meta"
    });
    g1.cmd_ok("meta go-meta");
    v1.wait_event("update", WAIT, |e| {
        e["node"] == "g1" && e["meta"] == "go-meta"
    });
}

/// 25 Go and 25 vigil nodes; newcomers learn all 50 from one push/pull (more than 127 bytes of
/// header counts on the way, where go-msgpack v2 writes its signed integer forms).
fn push_pull_with_more_than_50_members(version: &str) {
    let Some((mut lab, bin)) = lab_for("push_pull_with_more_than_50_members", version, 52) else {
        return;
    };
    let mut nodes: Vec<Node> = Vec::new();
    let g0 = lab.go(&bin, "g00", &[], &[]);
    let seed = g0.addr;
    nodes.push(g0);
    for i in 1..25 {
        nodes.push(lab.go(&bin, &format!("g{i:02}"), &[seed], &[]));
    }
    for i in 0..25 {
        nodes.push(lab.vigil(&format!("v{i:02}"), &[seed], &[]));
    }
    // Fifty processes starting on two shared cores (CI runs other labs beside this one) can
    // take longer than one WAIT to converge; the bound is generous because it is only a bound.
    for n in nodes.iter_mut().step_by(7) {
        let who = n.name.clone();
        wait_until(&format!("{who} sees 50 alive"), 3 * WAIT, || {
            n.alive().len() == 50
        });
    }
    // The newcomers' only source of members is the join's push/pull (gossip would take many
    // rounds to tell them about 50 nodes), so check right after the join; and first let the
    // two they join through know all 50 (the loop above may end as the last node joined,
    // before gossip told them of it: CI, 2026-12-07).
    assert_eq!(nodes[10].kind, Kind::Go);
    assert_eq!(nodes[40].kind, Kind::Vigil);
    for i in [10, 40] {
        let n = &mut nodes[i];
        let who = n.name.clone();
        wait_until(&format!("{who} sees 50 alive"), 3 * WAIT, || {
            n.alive().len() == 50
        });
    }
    let via_go = nodes[10].addr;
    let via_vigil = nodes[40].addr;
    let mut v_new = lab.vigil("v-new", &[via_go], &[]);
    let mut g_new = lab.go(&bin, "g-new", &[via_vigil], &[]);
    v_new.wait_event("joined", WAIT, |e| e["n"] == 1);
    g_new.wait_event("joined", WAIT, |e| e["n"] == 1);
    for n in [&mut v_new, &mut g_new] {
        // One snapshot, so that a failure shows what was counted.
        let seen = n.members();
        let alive = seen.values().filter(|s| s.as_str() == "alive").count();
        assert!(alive >= 51, "{} right after its join: {seen:?}", n.name);
    }
    wait_until("v-new sees 52", WAIT, || v_new.alive().len() == 52);
    wait_until("g-new sees 52", WAIT, || g_new.alive().len() == 52);
}

fn ipv6_mixed_cluster(version: &str) {
    let Some((mut lab, bin)) = lab("ipv6_mixed_cluster", version) else {
        return;
    };
    let hosts: Vec<_> = (0..4).map(|_| lab.host_v6()).collect();
    let mut g1 = lab.go_on(&hosts[0], &bin, "g1", &[], &[]);
    let mut v1 = lab.vigil_on(&hosts[1], "v1", &[g1.addr], &[]);
    let mut g2 = lab.go_on(&hosts[2], &bin, "g2", &[v1.addr], &[]);
    let mut v2 = lab.vigil_on(&hosts[3], "v2", &[g2.addr], &[]);
    assert!(v1.addr.is_ipv6() && g1.addr.is_ipv6());
    wait_converged(
        &mut [&mut g1, &mut v1, &mut g2, &mut v2],
        &["g1", "g2", "v1", "v2"],
        WAIT,
    );
    g2.kill();
    v1.wait_about("dead", "g2", DETECT);
}

/// Bad flags and unreadable keys fail fast with a clear message and exit code 2.
#[test]
fn agent_rejects_bad_flags_and_keys() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(support::vigil_bin())
            .arg("agent")
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&["--name", "x", "--key", "not-base64!"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--key #1") && err.contains("base64"), "{err}");
    let (code, err) = run(&["--name", "x", "--key", "AAAA"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("16, 24 or 32 bytes"), "{err}");
    let (code, err) = run(&["--name", "x", "--keyring-file", "/nonexistent/ring.json"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("cannot read keyring file /nonexistent/ring.json"),
        "{err}"
    );
    let (code, err) = run(&["--name", "x", "--profile", "turbo"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("turbo"), "{err}");
    let (code, err) = run(&["--name", "x", "--bind", "0.0.0.0:0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("advertise"), "{err}");
}

/// Settings from a TOML file, with flags overriding it.
#[test]
fn agent_reads_a_config_file() {
    let dir = std::env::temp_dir().join(format!("vigil-interop-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("agent.toml");
    std::fs::write(
        &cfg,
        format!(
            "name = \"from-file\"\nbind = \"127.0.0.1:0\"\nprofile = \"fast\"\n\
             admin = \"127.0.0.1:0\"\nkeys = [\"{K32}\"]\nmeta = \"file-meta\"\n"
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(support::vigil_bin());
    cmd.args([
        "agent",
        "--config",
        cfg.to_str().unwrap(),
        "--meta",
        "flag-meta",
    ]);
    let mut a = support::spawn("from-file", Kind::Vigil, cmd);
    let members = a.http("GET", "/members", "").1;
    assert!(members.contains("\"node\":\"from-file\""), "{members}");
    assert!(members.contains("\"meta\":\"flag-meta\""), "{members}");
    let mut b = vigil("b", LO_ANY, &[a.addr], &["--key", K32]);
    wait_converged(&mut [&mut a, &mut b], &["b", "from-file"], WAIT);

    std::fs::write(&cfg, "name = \"x\"\nbogus = 1\n").unwrap();
    let out = std::process::Command::new(support::vigil_bin())
        .args(["agent", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bogus"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
