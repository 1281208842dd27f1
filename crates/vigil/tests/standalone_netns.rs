//! `vigil standalone` end to end: three hosts and a client on a bridge, each in its own
//! network namespace (root only; CI runs them with `VIGIL_REQUIRE_ROOT=1`). The client asks
//! ARP for the VIP with vigil-l2-client and sees which MAC answers.
//!
//! No test asserts a duration: every wait is a bounded poll with a generous limit.

mod standalone_lab;

use standalone_lab::{Cluster, VIP, expected_owner, root_or_skip};
use std::time::Duration;

const GENEROUS: Duration = Duration::from_secs(30);

/// The owner MetalLB's election picks for [`VIP`] among `names`.
/// Starts every host on `election` settings and waits until all see each other alive and
/// agree on the VIP's owner, and the client gets exactly one ARP answer, from that owner.
fn converged(election: &str) -> (Cluster, String) {
    let mut lab = Cluster::new(3);
    let names = lab.names();
    let owner = lab.start_all(election, "");
    lab.wait_for(
        "every host to see three alive members and one owner",
        GENEROUS,
        || {
            names.iter().all(|h| {
                lab.alive_seen_by(h).len() == 3 && lab.owner_seen_by(h).as_deref() == Some(&owner)
            })
        },
    );
    // With a hold-down, every node holds at first (a cold start); wait until all settled.
    lab.wait_for("every host to be out of its hold-down", GENEROUS, || {
        names.iter().all(|h| {
            lab.status(h).is_some_and(|s| {
                s["members"]
                    .as_array()
                    .is_some_and(|ms| ms.iter().all(|m| m["holding"] == false))
            })
        })
    });
    let mac = lab.mac(&owner);
    lab.wait_for("the owner alone to answer ARP", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    (lab, owner)
}

fn others(lab: &Cluster, but: &str) -> Vec<String> {
    lab.names().into_iter().filter(|n| n != but).collect()
}

#[test]
fn three_nodes_elect_one_owner_that_alone_answers_and_reports_it() {
    if !root_or_skip("three_nodes_elect_one_owner_that_alone_answers_and_reports_it") {
        return;
    }
    let (lab, owner) = converged("");
    // Answered again: still exactly one answer, from the owner.
    assert_eq!(lab.arp_answers(), [lab.mac(&owner)]);
    // The service's IPv6 VIP goes with it: one advertisement, from the same node.
    let mac = lab.mac(&owner);
    lab.wait_for(
        "the owner alone to answer NS for the IPv6 VIP",
        GENEROUS,
        || lab.ns_answers() == [mac.clone()],
    );
    // `vigil status` on any host names the owner and lists the members.
    let text = lab.status_text("n1");
    assert!(text.contains(VIP) && text.contains(&owner), "{text}");
    for host in lab.names() {
        assert!(text.contains(&host), "{text}");
    }
    // Metrics: only the owner has a metallb_speaker_announced series; it counted the answers.
    for host in lab.names() {
        let metrics = lab.metrics(&host);
        let announced = metrics.contains(&format!(
            "metallb_speaker_announced{{ip=\"{VIP}\",node=\"{host}\",protocol=\"layer2\",service=\"web\"}} 1"
        ));
        assert_eq!(announced, host == owner, "{host}:\n{metrics}");
        if host == owner {
            assert!(
                metrics.contains(&format!("metallb_layer2_requests_received{{ip=\"{VIP}\"}}")),
                "{metrics}"
            );
        }
    }
}

#[test]
fn the_vip_moves_when_its_owner_dies() {
    if !root_or_skip("the_vip_moves_when_its_owner_dies") {
        return;
    }
    let (mut lab, owner) = converged("");
    let survivors = others(&lab, &owner);
    let next = expected_owner(&survivors);
    lab.kill(&owner);
    let mac = lab.mac(&next);
    lab.wait_for("the next owner alone to answer ARP", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    lab.wait_for("the next owner alone to answer NS", GENEROUS, || {
        lab.ns_answers() == [mac.clone()]
    });
    for host in &survivors {
        lab.wait_for("survivors to agree on the new owner", GENEROUS, || {
            lab.owner_seen_by(host).as_deref() == Some(&next)
        });
    }
}

#[test]
fn a_stopped_owner_leaves_and_its_vip_moves() {
    if !root_or_skip("a_stopped_owner_leaves_and_its_vip_moves") {
        return;
    }
    let (mut lab, owner) = converged("");
    let survivors = others(&lab, &owner);
    let next = expected_owner(&survivors);
    assert!(
        lab.terminate(&owner),
        "SIGTERM did not stop {owner} cleanly\n{}",
        lab.logs()
    );
    let mac = lab.mac(&next);
    lab.wait_for("the next owner alone to answer ARP", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    // The others saw a leave, not a failure.
    for host in &survivors {
        lab.wait_for("a member_left event", GENEROUS, || {
            lab.log(host)
                .lines()
                .any(|l| l.contains("\"event\":\"member_left\"") && l.contains(&owner))
        });
    }
}

#[test]
fn the_vip_moves_when_the_owners_health_check_fails_and_comes_back() {
    if !root_or_skip("the_vip_moves_when_the_owners_health_check_fails_and_comes_back") {
        return;
    }
    let (lab, owner) = converged("");
    let next = expected_owner(&others(&lab, &owner));
    std::fs::write(lab.down_flag(&owner), "").unwrap();
    let mac = lab.mac(&next);
    lab.wait_for("the VIP to move off the failing owner", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
    // The failing node is still an alive member; only its check fails.
    assert!(lab.alive_seen_by(&next).contains(&owner));
    std::fs::remove_file(lab.down_flag(&owner)).unwrap();
    let mac = lab.mac(&owner);
    lab.wait_for(
        "the VIP to come back once the check passes",
        GENEROUS,
        || lab.arp_answers() == [mac.clone()],
    );
}

#[test]
fn with_a_hold_down_a_restarted_owner_takes_the_vip_back_only_after_it() {
    if !root_or_skip("with_a_hold_down_a_restarted_owner_takes_the_vip_back_only_after_it") {
        return;
    }
    let (mut lab, owner) = converged("hold_down: 4s");
    let next = expected_owner(&others(&lab, &owner));
    lab.kill(&owner);
    let next_mac = lab.mac(&next);
    lab.wait_for("the next owner to answer", GENEROUS, || {
        lab.arp_answers() == [next_mac.clone()]
    });
    lab.start(&owner);
    // Once the others see the restarted node alive while it still holds, the VIP stays put.
    let mut seen_holding = false;
    lab.wait_for(
        "the restarted node to rejoin in hold-down, or settle",
        GENEROUS,
        || {
            let Some(status) = lab.status(&next) else {
                return false;
            };
            let back = status["members"].as_array().and_then(|ms| {
                ms.iter()
                    .find(|m| m["name"] == owner.as_str() && m["state"] == "alive")
                    .cloned()
            });
            match back {
                Some(m) if m["holding"] == true => {
                    // While it holds by its own account before and after the question, the
                    // VIP has not moved back: only the next owner answers.
                    let holds = || lab.status(&owner).is_some_and(|s| s["holding"] == true);
                    let before = holds();
                    let owner_now = lab.owner_seen_by(&next);
                    let answers = lab.arp_answers();
                    if before && holds() {
                        seen_holding = true;
                        assert_eq!(owner_now.as_deref(), Some(next.as_str()), "{}", lab.logs());
                        assert_eq!(answers, std::slice::from_ref(&next_mac), "{}", lab.logs());
                    }
                    false
                }
                Some(_) => true,
                None => false,
            }
        },
    );
    assert!(
        seen_holding,
        "the restarted node never showed its hold-down\n{}",
        lab.logs()
    );
    let mac = lab.mac(&owner);
    lab.wait_for("the VIP to go back after the hold-down", GENEROUS, || {
        lab.arp_answers() == [mac.clone()]
    });
}

#[test]
fn a_reload_adds_a_vip_without_touching_the_others_and_a_bad_file_is_refused() {
    if !root_or_skip("a_reload_adds_a_vip_without_touching_the_others_and_a_bad_file_is_refused") {
        return;
    }
    let (lab, owner) = converged("");
    let released = |host: &str| metric(&lab.metrics(host), "vigil_election_vips_released_total");
    let before: Vec<u64> = lab.names().iter().map(|h| released(h)).collect();
    let extra = "  - {name: api, vips: [198.18.0.101]}\n";
    for host in lab.names() {
        lab.write_config(&host, &lab.config(&host, "", extra));
    }
    let names = lab.names();
    let api_owner = vigil_lb::rank(
        names.iter().map(String::as_str),
        "198.18.0.101".parse().unwrap(),
    )[0]
    .to_string();
    lab.wait_for("every host to elect the new VIP's owner", GENEROUS, || {
        names.iter().all(|h| {
            lab.status(h).is_some_and(|s| {
                s["vips"].as_array().is_some_and(|vs| {
                    vs.iter()
                        .any(|v| v["vip"] == "198.18.0.101" && v["owner"] == api_owner.as_str())
                })
            })
        })
    });
    // Nothing was released anywhere: the existing VIP was not touched.
    let after: Vec<u64> = names.iter().map(|h| released(h)).collect();
    assert_eq!(before, after, "{}", lab.logs());
    assert_eq!(lab.arp_answers(), [lab.mac(&owner)]);

    // SIGHUP re-reads the file even when it did not change.
    lab.hangup(&names[0]);
    lab.wait_for("a reload on SIGHUP", GENEROUS, || {
        lab.log(&names[0]).lines().any(|l| {
            l.contains("\"event\":\"config_unchanged\"") && l.contains("\"trigger\":\"SIGHUP\"")
        })
    });

    // A bad file is refused; the running configuration stays.
    for host in &names {
        lab.write_config(host, "gossip: {bind: nowhere}\n");
    }
    lab.wait_for("every host to refuse the bad file", GENEROUS, || {
        names.iter().all(|h| {
            lab.metrics(h)
                .contains("vigil_config_reloads_total{result=\"rejected\"} 1")
        })
    });
    assert_eq!(lab.arp_answers(), [lab.mac(&owner)]);
    assert_eq!(
        lab.owner_seen_by(&names[0]).as_deref(),
        Some(owner.as_str())
    );
}

/// The value of an unlabelled metric.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

#[test]
fn with_the_split_brain_guard_a_lone_survivor_stays_silent() {
    if !root_or_skip("with_the_split_brain_guard_a_lone_survivor_stays_silent") {
        return;
    }
    let (mut lab, owner) = converged("expected_members: 3");
    let survivor = others(&lab, &owner)[0].clone();
    for host in lab.names() {
        if host != survivor {
            lab.kill(&host);
        }
    }
    // The survivor sees 1 of 3: it would own the VIP, but announces nothing.
    lab.wait_for("the survivor to see itself alone", GENEROUS, || {
        lab.status(&survivor).is_some_and(|s| {
            s["quorum"]["live"] == 1
                && s["vips"]
                    .as_array()
                    .is_some_and(|vs| vs.iter().all(|v| v["announced_here"] == false))
        })
    });
    assert_eq!(
        lab.owner_seen_by(&survivor).as_deref(),
        Some(survivor.as_str())
    );
    assert!(lab.arp_answers().is_empty(), "{}", lab.logs());
    assert!(
        lab.status_text(&survivor).contains("NO QUORUM"),
        "{}",
        lab.status_text(&survivor)
    );
}
