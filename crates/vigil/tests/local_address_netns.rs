//! `announce.local_address: lo` end to end (root, network namespaces): the owner holds its
//! VIPs on `lo`, so the client's ICMP and TCP to the VIP reach a service on the owner; a
//! crashed owner's kernel, still holding the address, stays silent on ARP and NDP (the
//! speaker set arp_ignore/arp_announce), the address moves on SIGTERM, and a restarted
//! speaker removes what its crashed run left behind.
//!
//! No test asserts a duration: every wait is a bounded poll with a generous limit.

mod standalone_lab;

use standalone_lab::{Cluster, VIGIL, VIP, VIP6, expected_owner, root_or_skip};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(30);
/// The hosts' TCP services outlive any test run by far, and stop by themselves after this.
const SERVICE_MAX_S: u32 = 600;
const LOCAL_ADDRESS: &str = "announce: {local_address: lo}\n";

/// The owner MetalLB's election picks for [`VIP`] among `names`.
/// Three hosts with IPv6 addresses, a TCP service each and `announce.local_address: lo`,
/// converged on one owner, which alone holds both VIPs on `lo`.
fn converged() -> (Cluster, String) {
    let mut lab = Cluster::new(3);
    lab.add_host_ipv6();
    lab.start_services(SERVICE_MAX_S);
    let names = lab.names();
    let owner = lab.start_all("", LOCAL_ADDRESS);
    lab.wait_for(
        "three alive members and one owner everywhere",
        GENEROUS,
        || {
            names.iter().all(|h| {
                lab.alive_seen_by(h).len() == 3 && lab.owner_seen_by(h).as_deref() == Some(&owner)
            })
        },
    );
    lab.wait_for("the owner alone to hold both VIPs on lo", GENEROUS, || {
        names.iter().all(|h| {
            let expected = *h == owner;
            lab.holds(h, "lo", VIP) == expected && lab.holds(h, "lo", VIP6) == expected
        })
    });
    for host in &names {
        for device in ["all", "eth0"] {
            assert_eq!(
                lab.sysctl(host, device, "arp_ignore"),
                "1",
                "{host} {device}"
            );
            assert_eq!(
                lab.sysctl(host, device, "arp_announce"),
                "2",
                "{host} {device}"
            );
        }
        assert!(lab.log(host).contains("\"event\":\"arp_sysctls_set\""));
    }
    (lab, owner)
}

/// Waits until the client's neighbour entry for `vip` is `host`'s MAC and both ICMP and TCP
/// to `vip` are answered, the TCP by `host`'s service.
fn reaches(lab: &Cluster, vip: &str, host: &str) {
    let mac = lab.mac(host);
    lab.wait_for(
        &format!("ping and TCP to {vip} to reach {host} ({mac})"),
        GENEROUS,
        || {
            // A probe first, so that the client resolves the VIP if it has no entry yet.
            let pinged = lab.ping(vip);
            let answered_by = lab.connect(vip);
            pinged
                && answered_by.as_deref() == Some(host)
                && lab.client_neighbour(vip).as_deref() == Some(mac.as_str())
        },
    );
}

/// Several questions in a row, each answered by `host`'s MAC alone, for both VIPs.
fn only_answers(lab: &Cluster, host: &str) {
    let mac = lab.mac(host);
    lab.wait_for(
        &format!("{host} alone to answer ARP and NDP"),
        GENEROUS,
        || lab.arp_answers() == [mac.clone()] && lab.ns_answers() == [mac.clone()],
    );
    for _ in 0..3 {
        assert_eq!(
            lab.arp_answers(),
            std::slice::from_ref(&mac),
            "\n{}",
            lab.logs()
        );
        assert_eq!(
            lab.ns_answers(),
            std::slice::from_ref(&mac),
            "\n{}",
            lab.logs()
        );
    }
}

#[test]
fn the_vip_is_usable_on_its_owner_and_a_crashed_owner_stays_silent() {
    if !root_or_skip("the_vip_is_usable_on_its_owner_and_a_crashed_owner_stays_silent") {
        return;
    }
    let (mut lab, owner) = converged();
    // (1) ICMP and TCP to both VIPs reach the owner's service, through the owner's MAC.
    only_answers(&lab, &owner);
    reaches(&lab, VIP, &owner);
    reaches(&lab, VIP6, &owner);

    // (2) SIGKILL: the address stays on the crashed host's lo, yet only the new owner
    // answers ARP and NDP for it, and the traffic follows the new owner.
    lab.kill(&owner);
    let rest: Vec<String> = lab.names().into_iter().filter(|n| *n != owner).collect();
    let successor = expected_owner(&rest);
    lab.wait_for("the successor to hold both VIPs on lo", GENEROUS, || {
        lab.holds(&successor, "lo", VIP) && lab.holds(&successor, "lo", VIP6)
    });
    assert!(lab.holds(&owner, "lo", VIP) && lab.holds(&owner, "lo", VIP6));
    only_answers(&lab, &successor);
    reaches(&lab, VIP, &successor);
    reaches(&lab, VIP6, &successor);
    assert!(
        lab.holds(&owner, "lo", VIP),
        "the crashed host's address went away by itself: the test above proved nothing"
    );

    // Control: with the kernel's default arp_ignore=0 the crashed host's kernel does answer
    // for the address it still holds, which is what the speaker's sysctls prevent.
    let crashed_mac = lab.mac(&owner);
    for device in ["all", "eth0"] {
        lab.set_sysctl(&owner, device, "arp_ignore", "0");
    }
    let kernel_answered = vigil_netlab::poll(GENEROUS, Duration::from_millis(100), || {
        lab.arp_answers().contains(&crashed_mac)
    });
    for device in ["all", "eth0"] {
        lab.set_sysctl(&owner, device, "arp_ignore", "1");
    }
    assert!(
        kernel_answered,
        "the crashed host's kernel never answered with arp_ignore=0: the check proved nothing"
    );
    // That answer may have pointed the client's cache at the crashed host: start afresh.
    lab.forget_client_neighbour(VIP);
    only_answers(&lab, &successor);

    // (4) The crashed speaker restarts as a non-candidate (its health check fails): it
    // removes the addresses its crashed run left, and the successor keeps the VIP.
    std::fs::write(lab.down_flag(&owner), "").unwrap();
    lab.start(&owner);
    lab.wait_for(
        "the restarted host to drop its stale addresses",
        GENEROUS,
        || !lab.holds(&owner, "lo", VIP) && !lab.holds(&owner, "lo", VIP6),
    );
    assert!(
        lab.log(&owner)
            .contains("\"event\":\"local_address_stale_removed\""),
        "\n{}",
        lab.logs()
    );
    lab.wait_for("the restarted host to see the others", GENEROUS, || {
        lab.alive_seen_by(&owner).len() == 3
            && lab.owner_seen_by(&owner).as_deref() == Some(&successor)
    });
    assert!(!lab.holds(&owner, "lo", VIP) && !lab.holds(&owner, "lo", VIP6));
    assert!(lab.holds(&successor, "lo", VIP) && lab.holds(&successor, "lo", VIP6));
    only_answers(&lab, &successor);
    reaches(&lab, VIP, &successor);
    let metrics = lab.metrics(&owner);
    assert!(metrics.contains("vigil_local_address_held 0"), "{metrics}");
    assert!(
        metrics.contains("vigil_local_address_changes_total{op=\"add\",result=\"failed\"} 0"),
        "{metrics}"
    );
    // Fail-back: the first host's check passes again, it takes the VIPs back (make before
    // break) and the successor takes the addresses off once the handover is over.
    std::fs::remove_file(lab.down_flag(&owner)).unwrap();
    lab.wait_for(
        "the first host to hold the VIPs again, alone",
        GENEROUS,
        || {
            lab.holds(&owner, "lo", VIP)
                && lab.holds(&owner, "lo", VIP6)
                && !lab.holds(&successor, "lo", VIP)
                && !lab.holds(&successor, "lo", VIP6)
        },
    );
    assert!(
        lab.log(&successor).contains("\"trigger\":\"handed over\""),
        "\n{}",
        lab.logs()
    );
    only_answers(&lab, &owner);
    reaches(&lab, VIP, &owner);
    reaches(&lab, VIP6, &owner);
}

#[test]
fn sigterm_moves_the_address_with_the_vip() {
    if !root_or_skip("sigterm_moves_the_address_with_the_vip") {
        return;
    }
    let (mut lab, owner) = converged();
    reaches(&lab, VIP, &owner);
    let rest: Vec<String> = lab.names().into_iter().filter(|n| *n != owner).collect();
    let successor = expected_owner(&rest);
    // (3) A graceful stop hands the VIPs over, then takes the addresses off on the way out.
    assert!(lab.terminate(&owner), "{}", lab.logs());
    assert!(
        !lab.holds(&owner, "lo", VIP) && !lab.holds(&owner, "lo", VIP6),
        "the stopped owner still holds a VIP\n{}",
        lab.logs()
    );
    lab.wait_for("the successor to hold both VIPs on lo", GENEROUS, || {
        lab.holds(&successor, "lo", VIP) && lab.holds(&successor, "lo", VIP6)
    });
    only_answers(&lab, &successor);
    reaches(&lab, VIP, &successor);
    reaches(&lab, VIP6, &successor);
    // Make before break: the addresses came off after the successor was heard claiming.
    let log = lab.log(&owner);
    let handed_over = log.find("\"event\":\"vip_handed_over\"");
    let removed = log.find("\"event\":\"local_address_removed\"");
    assert!(
        matches!((handed_over, removed), (Some(h), Some(r)) if h < r),
        "{log}"
    );
}

#[test]
fn a_local_address_device_that_does_not_exist_stops_the_start() {
    if !root_or_skip("a_local_address_device_that_does_not_exist_stops_the_start") {
        return;
    }
    let mut lab = Cluster::new(1);
    let text = lab.config("n1", "", "announce: {local_address: vip-nowhere}\n");
    lab.write_config("n1", &text);
    let arp_ignore = lab.sysctl("n1", "all", "arp_ignore");
    // --check validates the file alone: the device is looked for at start.
    let check = lab.exec(
        "n1",
        &[
            VIGIL,
            "standalone",
            "--check",
            "--config",
            &lab.config_path("n1").display().to_string(),
        ],
    );
    assert!(check.status.success());
    lab.start("n1");
    let status = lab
        .wait_exit("n1", GENEROUS)
        .expect("the speaker should exit");
    assert!(!status.success());
    let log = lab.log("n1");
    assert!(
        log.contains("announce.local_address") && log.contains("vip-nowhere"),
        "{log}"
    );
    // It stopped before touching anything.
    assert_eq!(lab.sysctl("n1", "all", "arp_ignore"), arp_ignore);
}

#[test]
fn arp_sysctls_check_refuses_loose_settings_and_changes_nothing() {
    if !root_or_skip("arp_sysctls_check_refuses_loose_settings_and_changes_nothing") {
        return;
    }
    let mut lab = Cluster::new(1);
    let extra = "announce: {local_address: lo, arp_sysctls: check}\n";
    lab.write_config("n1", &lab.config("n1", "", extra));
    for device in ["all", "eth0"] {
        lab.set_sysctl("n1", device, "arp_ignore", "0");
        lab.set_sysctl("n1", device, "arp_announce", "0");
    }
    lab.start("n1");
    let status = lab
        .wait_exit("n1", GENEROUS)
        .expect("the speaker should exit");
    assert!(!status.success());
    let log = lab.log("n1");
    assert!(log.contains("announce.arp_sysctls is check"), "{log}");
    assert_eq!(lab.sysctl("n1", "all", "arp_ignore"), "0");
    assert!(!lab.holds("n1", "lo", VIP));

    // Set by hand, stricter than needed: it starts, holds the VIP and leaves them alone.
    lab.set_sysctl("n1", "all", "arp_ignore", "2");
    lab.set_sysctl("n1", "all", "arp_announce", "2");
    lab.start("n1");
    lab.wait_for("the lone host to hold both VIPs", GENEROUS, || {
        lab.holds("n1", "lo", VIP) && lab.holds("n1", "lo", VIP6)
    });
    let log = lab.log("n1");
    assert!(log.contains("\"event\":\"arp_sysctls_checked\""), "{log}");
    assert!(!log.contains("\"event\":\"arp_sysctls_set\""), "{log}");
    assert_eq!(lab.sysctl("n1", "all", "arp_ignore"), "2");
    assert_eq!(lab.sysctl("n1", "eth0", "arp_ignore"), "0");
}
