//! End-to-end tests of the announcer in network namespaces (root only; CI runs them with
//! `VIGIL_REQUIRE_ROOT=1`). Each builds its own lab (see `lab/mod.rs`): a client and announcing
//! hosts on a bridge. The client asks with raw ARP / neighbour solicitations of its own making,
//! and reads its kernel's neighbour table with `ip -j neigh`.
//!
//! No test asserts a duration: waits are bounded polls with generous limits.

mod lab;

use std::time::Duration;

use lab::{CLIENT4, CLIENT6, Lab, VIP4, VIP6, matching, root_or_skip, wait_for};

const GENEROUS: Duration = Duration::from_secs(10);

fn arp(lab: &Lab, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "arp",
        "--iface",
        "eth0",
        "--src-ip",
        CLIENT4,
        "--target",
        VIP4,
        "--wait-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    lab.client(&args)
}

fn ns(lab: &Lab, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "ns",
        "--iface",
        "eth0",
        "--src-ip",
        CLIENT6,
        "--target",
        VIP6,
        "--wait-ms",
        "300",
    ];
    args.extend_from_slice(extra);
    lab.client(&args)
}

/// Answers to the client's own question (not gratuitous frames that happen to arrive).
fn arp_answers(lines: &[String]) -> Vec<&String> {
    matching(lines, "arp-reply", &[("target_ip", CLIENT4)])
}

fn na_answers(lines: &[String]) -> Vec<&String> {
    matching(lines, "na", &[("dst", CLIENT6)])
}

#[test]
fn only_the_owner_answers_arp_and_ns_with_its_mac_and_flags() {
    if !root_or_skip("only_the_owner_answers_arp_and_ns_with_its_mac_and_flags") {
        return;
    }
    let mut lab = Lab::new(&["a", "b"]);
    let owner = lab.speaker("a", &["--vip", VIP4, "--vip", VIP6]);
    let standby = lab.speaker("b", &["--standby"]);
    let (mac_a, mac_b) = (lab.mac("a", "eth0"), lab.mac("b", "eth0"));
    // The owner must have joined the solicited-node group before we ask it.
    wait_for("owner interfaces", GENEROUS, || {
        owner.stats().get("interfaces").map(String::as_str) == Some("eth0")
    });

    // ARP, broadcast: one answer, from the owner's MAC, to us.
    let lines = arp(&lab, &[]);
    let answers = arp_answers(&lines);
    assert_eq!(answers.len(), 1, "{lines:?}");
    assert_eq!(
        matching(
            &lines,
            "arp-reply",
            &[("target_ip", CLIENT4), ("mac", &mac_a), ("eth_src", &mac_a)]
        )
        .len(),
        1,
        "{lines:?}"
    );

    // ARP unicast to the owner's MAC (a cache refresh) is answered as well.
    let lines = lab.client(&[
        "arp",
        "--iface",
        "eth0",
        "--src-ip",
        CLIENT4,
        "--target",
        VIP4,
        "--wait-ms",
        "300",
    ]);
    assert!(!arp_answers(&lines).is_empty(), "{lines:?}");

    // NS to the solicited-node group: a solicited, override advertisement from the VIP.
    let lines = ns(&lab, &[]);
    let expected = [
        ("mac", mac_a.as_str()),
        ("flags", "SO"),
        ("src", VIP6),
        ("dst", CLIENT6),
        ("hop_limit", "255"),
        ("eth_src", mac_a.as_str()),
    ];
    assert_eq!(na_answers(&lines).len(), 1, "{lines:?}");
    assert_eq!(matching(&lines, "na", &expected).len(), 1, "{lines:?}");

    // NS unicast to the VIP itself (routers' reachability probes, MetalLB #2920).
    let lines = ns(&lab, &["--unicast-mac", &mac_a]);
    assert_eq!(matching(&lines, "na", &expected).len(), 1, "{lines:?}");

    // The same with hop limit 64: dropped, as RFC 4861 requires, and counted.
    let lines = ns(&lab, &["--unicast-mac", &mac_a, "--hop-limit", "64"]);
    assert!(na_answers(&lines).is_empty(), "{lines:?}");
    wait_for("hop limit counter", GENEROUS, || {
        owner.stat("ndisc_bad_hop_limit") >= 1
    });

    // The standby saw the questions and said nothing.
    wait_for("standby saw questions", GENEROUS, || {
        standby.stat("not_owned") >= 3
    });
    assert_eq!(standby.stat("arp_requests_answered"), 0);
    assert_eq!(standby.stat("neighbor_solicits_answered"), 0);
    assert_eq!(standby.stat("gratuitous_arp_sent"), 0);
    let all = [arp(&lab, &[]), ns(&lab, &[])].concat();
    assert!(
        all.iter().all(|l| !l.contains(&mac_b)),
        "standby MAC {mac_b} answered: {all:?}"
    );
}

#[test]
fn client_neighbour_table_follows_gratuitous_packets_when_ownership_moves() {
    if !root_or_skip("client_neighbour_table_follows_gratuitous_packets_when_ownership_moves") {
        return;
    }
    let mut lab = Lab::new(&["a", "b"]);
    let mut a = lab.speaker("a", &["--vip", VIP4, "--vip", VIP6]);
    let mut b = lab.speaker("b", &["--standby"]);
    let (mac_a, mac_b) = (lab.mac("a", "eth0"), lab.mac("b", "eth0"));

    // The client's kernel resolves both VIPs once, by itself, and learns A.
    for vip in [VIP4, VIP6] {
        wait_for(&format!("client learns {vip} at A"), GENEROUS, || {
            lab.client(&["poke", "--target", vip]);
            std::thread::sleep(Duration::from_millis(100));
            lab.client_neighbour(vip)
                .contains(&format!("\"lladdr\":\"{mac_a}\""))
        });
    }

    // Ownership moves. The client asks nothing: only B's gratuitous ARP and unsolicited NA
    // can change its table.
    a.command("release");
    b.command(&format!("own {VIP4} {VIP6}"));
    for vip in [VIP4, VIP6] {
        wait_for(
            &format!("client's {vip} entry moves to B"),
            GENEROUS,
            || {
                lab.client_neighbour(vip)
                    .contains(&format!("\"lladdr\":\"{mac_b}\""))
            },
        );
    }
    wait_for("B's announcement counters", GENEROUS, || {
        b.stat("gratuitous_arp_sent") >= 2 && b.stat("unsolicited_na_sent") >= 1
    });

    // From now on only B answers; A went silent at once.
    let lines = [arp(&lab, &[]), ns(&lab, &[])].concat();
    assert_eq!(arp_answers(&lines).len(), 1, "{lines:?}");
    assert_eq!(na_answers(&lines).len(), 1, "{lines:?}");
    assert!(lines.iter().all(|l| !l.contains(&mac_a)), "{lines:?}");
    assert!(arp_answers(&lines)[0].contains(&format!("mac={mac_b}")));
}

#[test]
fn interfaces_that_appear_or_come_back_get_announcements_and_answers() {
    if !root_or_skip("interfaces_that_appear_or_come_back_get_announcements_and_answers") {
        return;
    }
    let mut lab = Lab::new(&["a"]);
    let owner = lab.speaker("a", &["--vip", VIP4, "--vip", VIP6]);

    // A second interface, created after start-up, onto the same bridge.
    let listener = lab.client_background(&[
        "listen",
        "--iface",
        "eth0",
        "--target",
        VIP4,
        "--wait-ms",
        "4000",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    lab.plug("a", "eth1");
    let mac1 = lab.mac("a", "eth1");
    let lines = lab.finish(listener);
    assert!(
        !matching(
            &lines,
            "arp-reply",
            &[("mac", &mac1), ("eth_dst", "ff:ff:ff:ff:ff:ff")]
        )
        .is_empty(),
        "no gratuitous ARP from new eth1 ({mac1}): {lines:?}"
    );
    wait_for("eth1 responder", GENEROUS, || {
        owner.stats().get("interfaces").map(String::as_str) == Some("eth0,eth1")
    });

    // Its solicited-node group was joined: a multicast NS gets an answer from eth1's MAC too.
    wait_for("NS answered from eth1", GENEROUS, || {
        let lines = ns(&lab, &[]);
        !matching(&lines, "na", &[("mac", &mac1), ("flags", "SO")]).is_empty()
    });

    // eth1 changes its MAC: announced again at once, with the new MAC.
    let new_mac = "02:00:5e:00:53:01";
    let listener = lab.client_background(&[
        "listen",
        "--iface",
        "eth0",
        "--target",
        VIP4,
        "--wait-ms",
        "3000",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    lab.ip("a", &["link", "set", "eth1", "address", new_mac]);
    let lines = lab.finish(listener);
    assert!(
        !matching(
            &lines,
            "arp-reply",
            &[("mac", new_mac), ("eth_dst", "ff:ff:ff:ff:ff:ff")]
        )
        .is_empty(),
        "no gratuitous ARP with eth1's new MAC: {lines:?}"
    );

    // eth1 goes away: its responder closes, eth0 carries on.
    lab.ip("a", &["link", "del", "eth1"]);
    wait_for("eth1 responder closed", GENEROUS, || {
        owner.stats().get("interfaces").map(String::as_str) == Some("eth0")
    });
    assert_eq!(arp_answers(&arp(&lab, &[])).len(), 1);

    // eth0 goes down and comes back: it is announced again without anyone asking.
    let mac0 = lab.mac("a", "eth0");
    lab.ip("a", &["link", "set", "eth0", "down"]);
    wait_for("eth0 responder closed", GENEROUS, || {
        owner.stats().get("interfaces").map(String::as_str) == Some("")
    });
    let listener = lab.client_background(&[
        "listen",
        "--iface",
        "eth0",
        "--target",
        VIP6,
        "--wait-ms",
        "3000",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    lab.ip("a", &["link", "set", "eth0", "up"]);
    let lines = lab.finish(listener);
    assert!(
        !matching(
            &lines,
            "na",
            &[("mac", &mac0), ("flags", "O"), ("dst", "ff02::1")]
        )
        .is_empty(),
        "no unsolicited NA from eth0 ({mac0}) after it came back: {lines:?}"
    );
}

#[test]
fn malformed_and_truncated_frames_are_dropped_and_counted() {
    if !root_or_skip("malformed_and_truncated_frames_are_dropped_and_counted") {
        return;
    }
    let mut lab = Lab::new(&["a"]);
    let owner = lab.speaker("a", &["--vip", VIP4, "--vip", VIP6]);
    let mac_a = lab.mac("a", "eth0").replace(':', "");
    let mac_c = lab.mac("c", "eth0").replace(':', "");
    let arp_head = format!("ffffffffffff{mac_c}0806");
    let ns_head = format!("{mac_a}{mac_c}86dd");
    let ipv6 = |payload_len: &str| {
        format!(
            "6000000000{payload_len}3aff20010db800000000000000000000000120010db8000000000000000000000100"
        )
    };
    // Each passes the kernel filter (ARP, or ICMPv6 type 135) and is malformed for us.
    let frames = [
        // ARP cut after the operation.
        format!("{arp_head}000108000604000100"),
        // ARP announcing 16-byte protocol addresses it does not carry.
        format!("{arp_head}00010800061000010000000000000000000000000000"),
        // ARP with the right lengths but 27 of its 28 bytes.
        format!("{arp_head}0001080006040001020000000001c6120001000000000000c61200"),
        // IPv6 claiming 32 bytes of payload, carrying 4.
        format!("{ns_head}{}87000000", ipv6("20")),
        // A whole NS with a wrong checksum.
        format!(
            "{ns_head}{}8700ffff0000000020010db8000000000000000000000100",
            ipv6("18")
        ),
        // An NS whose option has length zero.
        format!(
            "{ns_head}{}870000000000000020010db80000000000000000000001000100{mac_c}",
            ipv6("20")
        ),
        // Just an Ethernet header that says ARP.
        arp_head.clone(),
    ];
    // One at a time, so that a failure names the frame.
    for (n, frame) in frames.iter().enumerate() {
        let want = owner.stat("malformed") + 1;
        lab.client(&["raw", "--iface", "eth0", "--hex", frame]);
        wait_for(&format!("frame {n} counted as malformed"), GENEROUS, || {
            owner.stat("malformed") >= want
        });
        assert_eq!(owner.stat("malformed"), want, "frame {n}");
    }

    // Still alive, still answering.
    assert!(lab.alive(&owner), "announcer died");
    let lines = arp(&lab, &[]);
    assert_eq!(arp_answers(&lines).len(), 1, "{lines:?}");
}

#[test]
fn periodic_refresh_keeps_announcing() {
    if !root_or_skip("periodic_refresh_keeps_announcing") {
        return;
    }
    let mut lab = Lab::new(&["a"]);
    let owner = lab.speaker("a", &["--vip", VIP4, "--refresh-ms", "200"]);
    let takeover_frames = 2 * vigil_l2::Config::default().takeover_rounds.len() as u64;
    // After the takeover rounds (4 s by default), refresh rounds keep coming.
    wait_for("refresh rounds", Duration::from_secs(20), || {
        owner.stat("gratuitous_arp_sent") >= takeover_frames + 6
    });
}

#[test]
fn an_interface_without_ipv6_gets_no_ndp_responder() {
    if !root_or_skip("an_interface_without_ipv6_gets_no_ndp_responder") {
        return;
    }
    let mut lab = Lab::new(&["a"]);
    lab.sysctl("a", "net.ipv6.conf.eth0.disable_ipv6=1");
    let owner = lab.speaker("a", &["--vip", VIP4, "--vip", VIP6]);
    wait_for("owner interfaces", GENEROUS, || {
        owner.stats().get("interfaces").map(String::as_str) == Some("eth0")
    });
    // ARP is answered on it; neighbour discovery is not spoken there at all.
    assert_eq!(arp_answers(&arp(&lab, &[])).len(), 1);
    let lines = ns(&lab, &[]);
    assert!(na_answers(&lines).is_empty(), "{lines:?}");
    wait_for("IPv4 announcements", GENEROUS, || {
        owner.stat("gratuitous_arp_sent") >= 2
    });
    assert_eq!(owner.stat("unsolicited_na_sent"), 0);
    assert_eq!(owner.stat("neighbor_solicits_answered"), 0);
}
