//! Properties of the election over random clusters: every node with the same view agrees,
//! exactly one node announces each group, and the owner is always an admitted live member.

use proptest::prelude::*;
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use vigil_lb::{NodeMeta, NodeView, Policy, Quorum, Service, Verdict, decide, elect};

fn cluster() -> impl Strategy<Value = (Vec<NodeView>, Vec<Service>, bool)> {
    let nodes =
        proptest::collection::vec((any::<bool>(), any::<bool>(), 0u8..3, any::<bool>()), 1..8);
    let services = proptest::collection::vec(
        (
            proptest::collection::vec(0u8..12, 1..3),
            any::<bool>(),
            proptest::option::of(0u8..3),
        ),
        1..10,
    );
    (nodes, services, any::<bool>()).prop_map(|(nodes, services, hold_down)| {
        let nodes = nodes
            .into_iter()
            .enumerate()
            .map(|(i, (live, failing, zone, holding))| {
                let mut meta = NodeMeta {
                    holding,
                    ..NodeMeta::default()
                };
                meta.labels.insert("zone".into(), zone.to_string());
                if failing {
                    meta.failing.insert("s0".into());
                }
                NodeView {
                    name: format!("node-{i}"),
                    live,
                    meta,
                }
            })
            .collect();
        let services = services
            .into_iter()
            .enumerate()
            .map(|(i, (vips, checked, zone))| Service {
                name: format!("s{i}"),
                vips: vips
                    .into_iter()
                    .map(|v| IpAddr::V4(Ipv4Addr::new(198, 18, 0, 100 + v)))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect(),
                health_checked: checked,
                node_selector: zone
                    .map(|z| [("zone".to_string(), z.to_string())].into())
                    .unwrap_or_default(),
                ..Service::default()
            })
            .collect();
        (nodes, services, hold_down)
    })
}

proptest! {
    #[test]
    fn one_announcer_per_group_and_every_vip_in_one_group((nodes, services, hold_down) in cluster()) {
        let policy = Policy { hold_down, ..Policy::default() };
        let groups = elect(&services, &nodes, &policy);
        // Every VIP lands in exactly one group.
        let mut seen = BTreeSet::new();
        for g in &groups {
            for vip in &g.vips {
                prop_assert!(seen.insert(*vip), "{vip} in two groups");
            }
        }
        let quorum = Quorum::of(&nodes, &policy);
        for (i, g) in groups.iter().enumerate() {
            let announcers: Vec<&str> = nodes
                .iter()
                .filter(|n| decide(&n.name, &groups, quorum)[i] == Verdict::Owner)
                .map(|n| n.name.as_str())
                .collect();
            match g.owner() {
                Some(owner) => {
                    prop_assert_eq!(announcers, vec![owner]);
                    let node = nodes.iter().find(|n| n.name == owner).unwrap();
                    prop_assert!(node.live);
                    for s in services.iter().filter(|s| g.services.contains(&s.name)) {
                        prop_assert!(s.admits(node));
                    }
                    // A holding node owns only when no settled candidate exists.
                    if hold_down && node.meta.holding {
                        let all_holding = g.candidates.iter().all(|c| {
                            nodes.iter().any(|n| &n.name == c && n.meta.holding)
                        });
                        prop_assert!(all_holding);
                    }
                }
                None => prop_assert!(announcers.is_empty()),
            }
        }
    }

    #[test]
    fn input_order_does_not_change_owners((nodes, services, hold_down) in cluster()) {
        let policy = Policy { hold_down, ..Policy::default() };
        let mut reversed = nodes.clone();
        reversed.reverse();
        let a = elect(&services, &nodes, &policy);
        let b = elect(&services, &reversed, &policy);
        prop_assert_eq!(a, b);
    }
}
