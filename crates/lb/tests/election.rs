//! The election against vectors written by Go (`tests/vectors/lb/gen.go`: `net.IP.String()`
//! and MetalLB's sort), and its behaviour beyond MetalLB.

use std::collections::BTreeSet;
use std::net::IpAddr;
use vigil_lb::{
    Group, NodeMeta, NodeView, Policy, Quorum, Service, Verdict, decide, elect, go_ip_string, rank,
};

const VECTORS: &str = include_str!("../../../tests/vectors/lb/election.txt");

fn vectors(kind: &str) -> Vec<Vec<&'static str>> {
    VECTORS
        .lines()
        .filter_map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            (words[0] == kind).then(|| words[1..].to_vec())
        })
        .collect()
}

#[test]
fn ip_strings_match_go() {
    let cases = vectors("ip");
    assert!(cases.len() >= 25);
    for case in cases {
        let ip: IpAddr = case[0].parse().expect(case[0]);
        assert_eq!(
            go_ip_string(ip),
            case[1],
            "Go prints {} as {}",
            case[0],
            case[1]
        );
    }
}

#[test]
fn owner_order_matches_metallb() {
    let cases = vectors("order");
    assert_eq!(cases.len(), 5);
    for case in cases {
        let ip: IpAddr = case[0].parse().unwrap();
        let want: Vec<&str> = case[1].split(',').collect();
        let mut shuffled = want.clone();
        shuffled.reverse();
        shuffled.rotate_left(3);
        assert_eq!(rank(shuffled, ip), want, "order for {}", case[0]);
    }
}

#[test]
fn hashes_match_go() {
    use sha2::{Digest, Sha256};
    for case in vectors("hash") {
        let ip: IpAddr = case[1].parse().unwrap();
        let digest = Sha256::digest(format!("{}#{}", case[0], go_ip_string(ip)));
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, case[2]);
    }
}

fn svc(name: &str, vips: &[&str]) -> Service {
    Service {
        name: name.into(),
        vips: vips.iter().map(|v| v.parse().unwrap()).collect(),
        ..Service::default()
    }
}

fn live(names: &[&str]) -> Vec<NodeView> {
    names
        .iter()
        .map(|n| NodeView::live(*n, NodeMeta::default()))
        .collect()
}

const NODES: [&str; 10] = [
    "node-a",
    "node-b",
    "node-c",
    "worker-1",
    "worker-2",
    "worker-10",
    "k8s-control-plane",
    "host.example.com",
    "Node-A",
    "\u{fc}n\u{ef}code",
];

/// The Go order for 198.18.0.100 starts node-a, k8s-control-plane, worker-10.
#[test]
fn first_live_candidate_wins_and_a_dead_one_is_skipped() {
    let services = [svc("web", &["198.18.0.100"])];
    let mut nodes = live(&NODES);
    let groups = elect(&services, &nodes, &Policy::default());
    assert_eq!(groups[0].owner(), Some("node-a"));
    // Dead or left: the next in the hash order wins. (Suspect members are `live`, as in
    // MetalLB, which takes memberlist.Members(); the speaker maps states to `live`.)
    nodes[0].live = false;
    let groups = elect(&services, &nodes, &Policy::default());
    assert_eq!(groups[0].owner(), Some("k8s-control-plane"));
    assert_eq!(groups[0].candidates.len(), 9);
}

#[test]
fn removing_a_node_moves_only_its_vips() {
    let services: Vec<Service> = (0..40)
        .map(|i| svc(&format!("s{i}"), &[&format!("198.18.1.{i}")]))
        .collect();
    let nodes = live(&NODES[..5]);
    let before = elect(&services, &nodes, &Policy::default());
    let after = elect(&services, &live(&NODES[1..5]), &Policy::default());
    let mut moved = 0;
    for (b, a) in before.iter().zip(&after) {
        if b.owner() != Some("node-a") {
            assert_eq!(b.owner(), a.owner(), "{} moved needlessly", b.services[0]);
        } else {
            moved += 1;
        }
    }
    assert!(moved > 0);
}

#[test]
fn eligibility_filters_by_node_list_labels_and_health() {
    let mut nodes = live(&NODES[..6]);
    nodes[2].meta.labels.insert("zone".into(), "b".into());
    nodes[4].meta.labels.insert("zone".into(), "b".into());
    let mut listed = svc("listed", &["198.18.0.100"]);
    listed.nodes = Some(BTreeSet::from([
        "worker-1".to_string(),
        "node-b".to_string(),
    ]));
    let mut zoned = svc("zoned", &["198.18.0.101"]);
    zoned.node_selector.insert("zone".into(), "b".into());
    let mut checked = svc("checked", &["2001:db8::100"]);
    checked.health_checked = true;
    let services = [listed, zoned, checked];

    let groups = elect(&services, &nodes, &Policy::default());
    let set = |g: &Group| g.candidates.iter().cloned().collect::<BTreeSet<_>>();
    assert_eq!(
        set(&groups[0]),
        BTreeSet::from(["worker-1".into(), "node-b".into()])
    );
    assert_eq!(
        set(&groups[1]),
        BTreeSet::from(["node-c".into(), "worker-2".into()])
    );
    assert_eq!(groups[2].candidates.len(), 6);

    // The Go order for 2001:DB8::100 among these six begins worker-1, worker-10.
    assert_eq!(groups[2].owner(), Some("worker-1"));
    nodes[3].meta.failing.insert("checked".into());
    let groups = elect(&services, &nodes, &Policy::default());
    assert_eq!(groups[2].owner(), Some("worker-10"));
    // A failing check of another service does not matter.
    nodes[5].meta.failing.insert("zoned".into());
    assert_eq!(
        elect(&services, &nodes, &Policy::default())[2].owner(),
        Some("worker-10")
    );
}

#[test]
fn services_sharing_an_ip_land_on_one_node() {
    // "b" shares .101 with "a" and brings 2001:db8::7; "c" shares 2001:db8::7 with "b".
    let mut a = svc("a", &["198.18.0.100", "198.18.0.101"]);
    let b = svc("b", &["198.18.0.101", "2001:db8::7"]);
    let mut c = svc("c", &["2001:db8::7"]);
    let d = svc("d", &["198.18.0.200"]);
    // Their eligibility differs: the group takes only nodes all of them admit.
    a.nodes = Some(NODES[..4].iter().map(|s| s.to_string()).collect());
    c.nodes = Some(NODES[2..].iter().map(|s| s.to_string()).collect());
    let groups = elect(&[a, b, c, d], &live(&NODES), &Policy::default());
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].services, ["a", "b", "c"]);
    assert_eq!(groups[0].key, "198.18.0.100".parse::<IpAddr>().unwrap());
    assert_eq!(groups[0].vips.len(), 3);
    let set: BTreeSet<&str> = groups[0].candidates.iter().map(String::as_str).collect();
    assert_eq!(set, BTreeSet::from(["node-c", "worker-1"]));
    assert_eq!(groups[1].services, ["d"]);
}

/// MetalLB elects per service: two services sharing an IP with different candidates may be
/// owned by different nodes (198.18.0.100's hash order is node-a, node-b, node-c).
#[test]
fn per_service_policy_elects_services_sharing_an_ip_apart() {
    let mut http = svc("http", &["198.18.0.100"]);
    http.nodes = Some(["node-b".to_string(), "node-c".to_string()].into());
    let dns = svc("dns", &["198.18.0.100"]);
    let nodes = live(&NODES[..3]);
    let together = elect(&[http.clone(), dns.clone()], &nodes, &Policy::default());
    assert_eq!(together.len(), 1);
    assert_eq!(together[0].owner(), Some("node-b"));
    let policy = Policy {
        per_service: true,
        ..Policy::default()
    };
    let apart = elect(&[http, dns], &nodes, &policy);
    let owners: Vec<_> = apart
        .iter()
        .map(|g| (g.services[0].as_str(), g.owner()))
        .collect();
    assert_eq!(owners, [("http", Some("node-b")), ("dns", Some("node-a"))]);
    assert!(
        apart
            .iter()
            .all(|g| g.vips == ["198.18.0.100".parse::<IpAddr>().unwrap()])
    );
}

#[test]
fn hold_down_ranks_holding_members_last_but_never_leaves_a_vip_unowned() {
    let services = [svc("web", &["198.18.0.100"])];
    let mut nodes = live(&NODES[..3]);
    nodes[0].meta.holding = true; // node-a, the hash winner, just came back.
    let plain = elect(&services, &nodes, &Policy::default());
    assert_eq!(
        plain[0].owner(),
        Some("node-a"),
        "MetalLB ignores hold-down"
    );
    let policy = Policy {
        hold_down: true,
        ..Policy::default()
    };
    let held = elect(&services, &nodes, &policy);
    assert_ne!(held[0].owner(), Some("node-a"));
    assert_eq!(
        held[0].candidates.last().map(String::as_str),
        Some("node-a")
    );
    // Everyone holding (a cold start): the hash order decides as usual.
    for n in &mut nodes {
        n.meta.holding = true;
    }
    assert_eq!(elect(&services, &nodes, &policy)[0].owner(), Some("node-a"));
}

/// MetalLB's `preferredNodeSelectors`: the score sorts first, highest wins, the hash breaks
/// ties (198.18.0.100's hash order is node-a, node-b, node-c); hold-down still ranks a
/// holding member last whatever its score.
#[test]
fn preference_scores_sort_before_the_hash() {
    let mut web = svc("web", &["198.18.0.100"]);
    web.preferences = [("node-c".to_string(), 10), ("node-b".to_string(), 10)].into();
    let mut nodes = live(&NODES[..3]);
    let groups = elect(std::slice::from_ref(&web), &nodes, &Policy::default());
    assert_eq!(groups[0].candidates, ["node-b", "node-c", "node-a"]);
    web.preferences.insert("node-a".into(), -1);
    web.preferences.insert("node-c".into(), 11);
    let groups = elect(std::slice::from_ref(&web), &nodes, &Policy::default());
    assert_eq!(groups[0].candidates, ["node-c", "node-b", "node-a"]);
    nodes[2].meta.holding = true;
    let policy = Policy {
        hold_down: true,
        ..Policy::default()
    };
    let groups = elect(std::slice::from_ref(&web), &nodes, &policy);
    assert_eq!(groups[0].candidates, ["node-b", "node-a", "node-c"]);
}

#[test]
fn split_brain_guard_silences_a_minority() {
    let services = [svc("web", &["198.18.0.100"])];
    let policy = Policy {
        expected_members: Some(3),
        ..Policy::default()
    };
    let mut nodes = live(&["node-a", "node-b", "node-c"]);
    let groups = elect(&services, &nodes, &policy);
    let quorum = Quorum::of(&nodes, &policy);
    assert_eq!(quorum, Quorum { live: 3, needed: 2 });
    assert_eq!(decide("node-a", &groups, quorum), [Verdict::Owner]);
    assert_eq!(
        decide("node-b", &groups, quorum),
        [Verdict::Standby {
            owner: Some("node-a".into())
        }]
    );
    // node-a alone on its side of a partition: it would win, but sees 1 of 3.
    nodes[1].live = false;
    nodes[2].live = false;
    let groups = elect(&services, &nodes, &policy);
    let quorum = Quorum::of(&nodes, &policy);
    assert_eq!(
        decide("node-a", &groups, quorum),
        [Verdict::NoQuorum(quorum)]
    );
}

#[test]
fn nobody_eligible_means_no_owner() {
    let mut s = svc("web", &["198.18.0.100"]);
    s.nodes = Some(BTreeSet::from(["elsewhere".to_string()]));
    let groups = elect(&[s], &live(&NODES), &Policy::default());
    assert_eq!(groups[0].owner(), None);
    assert_eq!(
        decide(
            "node-a",
            &groups,
            Quorum {
                live: 10,
                needed: 0
            }
        ),
        [Verdict::Standby { owner: None }]
    );
}
