//! Mixed clusters of real processes: `vigil agent` nodes and Go memberlist 0.2.2 nodes
//! (`conformance/cmd/vigil-gopeer`), on loopback, all with Go's LAN timings.
//!
//! Go comes from `VIGIL_GOPEER_BIN`, from next to `VIGIL_CONFORMANCE_BIN`, or from
//! `conformance/build.sh`; without Go the tests skip, unless `VIGIL_REQUIRE_GO=1`.

mod support;

use support::{DETECT, Kind, Node, WAIT, go, gopeer_bin, vigil, wait_converged, wait_until};

const K16: &str = "AQEBAQEBAQEBAQEBAQEBAQ==";
const K24: &str = "AgICAgICAgICAgICAgICAgICAgICAgIC";
const K32: &str = "AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=";
const K_OTHER: &str = "CQkJCQkJCQkJCQkJCQkJCQ==";
const K_NEW: &str = "BAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQ=";
const LO: &str = "127.0.0.1";
const LO_ANY: &str = "127.0.0.1:0";

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

#[test]
fn vigil_joins_a_go_cluster() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", LO, 0, &[], &[]);
    let mut g2 = go(&bin, "g2", LO, 0, &[g1.addr], &[]);
    let mut g3 = go(&bin, "g3", LO, 0, &[g1.addr], &[]);
    let mut v1 = vigil("v1", LO_ANY, &[g2.addr], &[]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(
        &mut [&mut g1, &mut g2, &mut g3, &mut v1],
        &["g1", "g2", "g3", "v1"],
        WAIT,
    );
}

/// An agent started before its seed keeps trying (`--retry-join`) and gets in.
#[test]
fn agent_retries_a_join_until_the_seed_is_up() {
    let Some(bin) = gopeer_bin() else { return };
    // Reserve a port for the seed, then free it so the agent's first tries are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let seed: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut v1 = vigil("v1", LO_ANY, &[seed], &["--retry-join", "300ms"]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 0);
    let mut g1 = go(&bin, "g1", LO, port, &[], &[]);
    v1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(&mut [&mut g1, &mut v1], &["g1", "v1"], WAIT);
}

#[test]
fn go_joins_a_vigil_cluster() {
    let Some(bin) = gopeer_bin() else { return };
    let mut v1 = vigil("v1", LO_ANY, &[], &[]);
    let mut v2 = vigil("v2", LO_ANY, &[v1.addr], &[]);
    let mut v3 = vigil("v3", LO_ANY, &[v1.addr], &[]);
    let mut g1 = go(&bin, "g1", LO, 0, &[v3.addr], &[]);
    g1.wait_event("joined", WAIT, |e| e["n"] == 1);
    wait_converged(
        &mut [&mut v1, &mut v2, &mut v3, &mut g1],
        &["g1", "v1", "v2", "v3"],
        WAIT,
    );
}

/// SIGKILL of a Go node is detected by vigil nodes and of a vigil node by Go nodes; each
/// restarted at its old address rejoins.
#[test]
fn sigkill_is_detected_both_ways_and_restarted_nodes_rejoin() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", LO, 0, &[], &[]);
    let mut g2 = go(&bin, "g2", LO, 0, &[g1.addr], &[]);
    let mut v1 = vigil("v1", LO_ANY, &[g1.addr], &[]);
    let mut v2 = vigil("v2", LO_ANY, &[g1.addr], &[]);
    let all = ["g1", "g2", "v1", "v2"];
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);

    let g2_port = g2.addr.port();
    g2.kill();
    v1.wait_about("dead", "g2", DETECT);
    v2.wait_about("dead", "g2", DETECT);
    g1.wait_about("dead", "g2", DETECT);
    drop(g2);
    let mut g2 = go(&bin, "g2", LO, g2_port, &[v1.addr], &[]);
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);

    let v2_addr = v2.addr;
    v2.kill();
    g1.wait_about("dead", "v2", DETECT);
    g2.wait_about("dead", "v2", DETECT);
    v1.wait_about("dead", "v2", DETECT);
    drop(v2);
    let mut v2 = vigil("v2", &v2_addr.to_string(), &[g2.addr], &[]);
    wait_converged(&mut [&mut g1, &mut g2, &mut v1, &mut v2], &all, WAIT);
}

#[test]
fn graceful_leave_is_seen_as_left_both_ways() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", LO, 0, &[], &[]);
    let mut g2 = go(&bin, "g2", LO, 0, &[g1.addr], &[]);
    let mut v1 = vigil("v1", LO_ANY, &[g1.addr], &[]);
    let mut v2 = vigil("v2", LO_ANY, &[g1.addr], &["--leave-timeout", "3s"]);
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

#[test]
fn encryption_with_16_24_and_32_byte_keys() {
    let Some(bin) = gopeer_bin() else { return };
    let mut pairs = Vec::new();
    for (i, key) in [K16, K24, K32].into_iter().enumerate() {
        let g = go(&bin, &format!("g{i}"), LO, 0, &[], &["-key", key]);
        let v = vigil(&format!("v{i}"), LO_ANY, &[g.addr], &["--key", key]);
        // A Go node joining through the vigil node proves the other direction.
        let g_in = go(&bin, &format!("h{i}"), LO, 0, &[v.addr], &["-key", key]);
        pairs.push((i, g, v, g_in));
    }
    for (i, g, v, g_in) in &mut pairs {
        let names = [format!("g{i}"), format!("h{i}"), format!("v{i}")];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        wait_converged(&mut [g, v, g_in], &names, WAIT);
        assert_eq!(v.metric("vigil_gossip_decrypt_failures_total"), 0);
        assert!(g.matching("rejected", |_| true).is_empty());
    }
}

/// Wrong keys and missing encryption never make a member, and are counted as rejected.
#[test]
fn wrong_key_never_becomes_a_member() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", LO, 0, &[], &["-key", K16]);
    let mut v1 = vigil("v1", LO_ANY, &[g1.addr], &["--key", K16]);
    wait_converged(&mut [&mut g1, &mut v1], &["g1", "v1"], WAIT);

    // A vigil node with the wrong key tries the Go node: Go rejects it.
    let bad_v = vigil("bad-v", LO_ANY, &[g1.addr], &["--key", K_OTHER]);
    let joined = bad_v.wait_event("joined", WAIT, |_| true);
    assert_eq!(joined["n"], 0, "{joined}");
    g1.wait_event("rejected", WAIT, |_| true);

    // A Go node with the wrong key tries the vigil node: vigil counts it.
    let bad_g = go(&bin, "bad-g", LO, 0, &[v1.addr], &["-key", K_OTHER]);
    let joined = bad_g.wait_event("joined", WAIT, |_| true);
    assert!(joined["error"].is_string(), "{joined}");
    wait_until("v1 counts decrypt failures", WAIT, || {
        v1.metric("vigil_gossip_decrypt_failures_total") > 0
    });

    // A node without encryption is rejected too.
    let plain = vigil("plain", LO_ANY, &[v1.addr], &[]);
    let joined = plain.wait_event("joined", WAIT, |_| true);
    assert_eq!(joined["n"], 0, "{joined}");

    std::thread::sleep(std::time::Duration::from_secs(2));
    for n in [&mut g1, &mut v1] {
        let members = n.members();
        let names: Vec<&str> = members.keys().map(String::as_str).collect();
        assert_eq!(names, ["g1", "v1"], "{} knows {members:?}", n.name);
    }
}

/// Labels (memberlist 0.3+) are vigil-only: a different or missing label never joins, and
/// Go 0.2.2 rejects a labelled node's traffic as garbage.
#[test]
fn wrong_label_never_becomes_a_member() {
    let Some(bin) = gopeer_bin() else { return };
    let mut v1 = vigil("v1", LO_ANY, &[], &["--label", "blue"]);
    let mut v2 = vigil("v2", LO_ANY, &[v1.addr], &["--label", "blue"]);
    wait_converged(&mut [&mut v1, &mut v2], &["v1", "v2"], WAIT);

    let red = vigil("red", LO_ANY, &[v1.addr], &["--label", "red"]);
    assert_eq!(red.wait_event("joined", WAIT, |_| true)["n"], 0);
    let none = vigil("none", LO_ANY, &[v1.addr], &[]);
    assert_eq!(none.wait_event("joined", WAIT, |_| true)["n"], 0);
    wait_until("v1 counts label mismatches", WAIT, || {
        v1.metric("vigil_gossip_label_mismatches_total") >= 2
    });

    let mut g1 = go(&bin, "g1", LO, 0, &[], &[]);
    let blue_to_go = vigil("blue-g", LO_ANY, &[g1.addr], &["--label", "blue"]);
    assert_eq!(blue_to_go.wait_event("joined", WAIT, |_| true)["n"], 0);
    g1.wait_event("rejected", WAIT, |_| true);

    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(v1.members().len(), 2, "{:?}", v1.members());
    assert_eq!(g1.members().len(), 1, "{:?}", g1.members());
}

/// Install a new key everywhere, make it primary everywhere, remove the old one: nobody is
/// ever suspected. One vigil node rotates through its keyring file, the other through the
/// admin endpoint, the Go nodes through memberlist's Keyring.
#[test]
fn key_rotation_across_a_mixed_cluster_suspects_no_one() {
    let Some(bin) = gopeer_bin() else { return };
    let dir = std::env::temp_dir().join(format!("vigil-interop-rot-{}", std::process::id()));
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

    let mut g1 = go(&bin, "g1", LO, 0, &[], &["-key", K16]);
    let mut g2 = go(&bin, "g2", LO, 0, &[g1.addr], &["-key", K16]);
    let mut v1 = vigil("v1", LO_ANY, &[g1.addr], &["--keyring-file", ring_arg]);
    let mut v2 = vigil("v2", LO_ANY, &[g1.addr], &["--key", K16]);
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
    let mut v3 = vigil("v3", LO_ANY, &[g2.addr], &["--key", K_NEW]);
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

#[test]
fn user_messages_and_meta_updates_flow_both_ways() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", LO, 0, &[], &[]);
    let mut v1 = vigil("v1", LO_ANY, &[g1.addr], &[]);
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

/// 25 Go and 25 vigil nodes; newcomers learn all 50 from one push/pull.
#[test]
fn push_pull_with_more_than_50_members() {
    let Some(bin) = gopeer_bin() else { return };
    let mut nodes: Vec<Node> = Vec::new();
    let g0 = go(&bin, "g00", LO, 0, &[], &[]);
    let seed = g0.addr;
    nodes.push(g0);
    for i in 1..25 {
        nodes.push(go(&bin, &format!("g{i:02}"), LO, 0, &[seed], &[]));
    }
    for i in 0..25 {
        nodes.push(vigil(&format!("v{i:02}"), LO_ANY, &[seed], &[]));
    }
    for n in nodes.iter_mut().step_by(7) {
        let who = n.name.clone();
        wait_until(&format!("{who} sees 50 alive"), WAIT, || {
            n.alive().len() == 50
        });
    }
    // The newcomers' only source of members is the join's push/pull (gossip would take many
    // rounds to tell them about 50 nodes), so check right after the join.
    let via_go = nodes[10].addr;
    let via_vigil = nodes[40].addr;
    assert_eq!(nodes[10].kind, Kind::Go);
    assert_eq!(nodes[40].kind, Kind::Vigil);
    let mut v_new = vigil("v-new", LO_ANY, &[via_go], &[]);
    let mut g_new = go(&bin, "g-new", LO, 0, &[via_vigil], &[]);
    v_new.wait_event("joined", WAIT, |e| e["n"] == 1);
    g_new.wait_event("joined", WAIT, |e| e["n"] == 1);
    assert!(v_new.alive().len() >= 51, "{:?}", v_new.members());
    assert!(g_new.alive().len() >= 51, "{:?}", g_new.members());
    wait_until("v-new sees 52", WAIT, || v_new.alive().len() == 52);
    wait_until("g-new sees 52", WAIT, || g_new.alive().len() == 52);
}

#[test]
fn ipv6_mixed_cluster() {
    let Some(bin) = gopeer_bin() else { return };
    let mut g1 = go(&bin, "g1", "::1", 0, &[], &[]);
    let mut v1 = vigil("v1", "[::1]:0", &[g1.addr], &[]);
    let mut g2 = go(&bin, "g2", "::1", 0, &[v1.addr], &[]);
    let mut v2 = vigil("v2", "[::1]:0", &[g2.addr], &[]);
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
