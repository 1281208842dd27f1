//! The owner election over all services at once.

use crate::go_ip::go_ip_string;
use crate::meta::NodeView;
use crate::service::Service;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// Options beyond MetalLB's election. The default is MetalLB's behaviour, except that
/// services sharing a VIP are elected together unless [`Policy::per_service`] is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Rank members that announce they are in their fail-back hold-down after every settled
    /// candidate, so a node that just (re)joined takes VIPs back only once it has settled.
    /// A holding member still owns a VIP that no settled member may take (cold start).
    pub hold_down: bool,
    /// The split-brain guard: the number of members the cluster should have. A node that sees
    /// fewer than a majority of them live (itself included) announces nothing.
    pub expected_members: Option<usize>,
    /// Elect every service on its own, keyed by its own first VIP, over its own candidates,
    /// as MetalLB's speaker does: two services sharing an IP may then land on different
    /// nodes, and both answer for it. `false`, vigil's standalone rule: services sharing
    /// any VIP form one group, elected once over the candidates all of them admit.
    pub per_service: bool,
}

/// One election unit: services that share any VIP, transitively (one service alone with
/// [`Policy::per_service`]). They all land on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The VIP whose Go spelling is hashed: the first VIP of the group's first service.
    pub key: IpAddr,
    /// The services, in the order given.
    pub services: Vec<String>,
    /// Every VIP of those services, each once, in first-seen order.
    pub vips: Vec<IpAddr>,
    /// Live members every service admits, best first (settled before holding, then by the
    /// first service's preference score, then by hash).
    pub candidates: Vec<String>,
}

impl Group {
    /// The elected owner, if any member may answer.
    pub fn owner(&self) -> Option<&str> {
        self.candidates.first().map(String::as_str)
    }
}

/// Sorts node names by SHA-256(name + `#` + Go's spelling of `key`), smallest digest first,
/// as MetalLB's speaker does.
pub fn rank<'a>(names: impl IntoIterator<Item = &'a str>, key: IpAddr) -> Vec<&'a str> {
    let ip = go_ip_string(key);
    let mut keyed: Vec<([u8; 32], &str)> = names
        .into_iter()
        .map(|name| {
            let mut h = Sha256::new();
            h.update(name.as_bytes());
            h.update(b"#");
            h.update(ip.as_bytes());
            (h.finalize().into(), name)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, name)| name).collect()
}

/// Elects an owner for every group of services. Pure: every speaker with the same view gets
/// the same answer.
pub fn elect(services: &[Service], nodes: &[NodeView], policy: &Policy) -> Vec<Group> {
    let groups = if policy.per_service {
        (0..services.len())
            .filter(|&i| !services[i].vips.is_empty())
            .map(|i| vec![i])
            .collect()
    } else {
        group_services(services)
    };
    groups
        .into_iter()
        .map(|members| {
            let group: Vec<&Service> = members.iter().map(|&i| &services[i]).collect();
            let key = group[0].vips[0];
            let mut vips = Vec::new();
            for ip in group.iter().flat_map(|s| &s.vips) {
                if !vips.contains(ip) {
                    vips.push(*ip);
                }
            }
            let admitted = nodes
                .iter()
                .filter(|n| n.live && group.iter().all(|s| s.admits(n)));
            let (holding, settled): (Vec<&NodeView>, Vec<&NodeView>) =
                admitted.partition(|n| policy.hold_down && n.meta.holding);
            // The group's first service speaks for it, as its first VIP is the key: services
            // that share an IP share a pool and so the same advertisements and scores.
            let preferences = &group[0].preferences;
            let ordered = |nodes: &[&NodeView]| -> Vec<String> {
                let mut names = rank(nodes.iter().map(|n| n.name.as_str()), key);
                // Stable: equal scores keep the hash order (MetalLB's sortL2Candidates).
                names.sort_by_key(|n| std::cmp::Reverse(preferences.get(*n).copied().unwrap_or(0)));
                names.into_iter().map(str::to_string).collect()
            };
            let mut candidates = ordered(&settled);
            candidates.extend(ordered(&holding));
            Group {
                key,
                services: group.iter().map(|s| s.name.clone()).collect(),
                vips,
                candidates,
            }
        })
        .collect()
}

/// Indices of services grouped by shared VIPs (connected components), each group in input
/// order, groups ordered by their first service. Services without VIPs are left out.
fn group_services(services: &[Service]) -> Vec<Vec<usize>> {
    let mut parent: Vec<usize> = (0..services.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..services.len() {
        for j in 0..i {
            if services[i]
                .vips
                .iter()
                .any(|ip| services[j].vips.contains(ip))
            {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                // The smaller index stays root, so groups are named by their first service.
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut roots: Vec<usize> = Vec::new();
    for i in (0..services.len()).filter(|&i| !services[i].vips.is_empty()) {
        let r = root(&mut parent, i);
        match roots.iter().position(|&x| x == r) {
            Some(g) => groups[g].push(i),
            None => {
                roots.push(r);
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// Whether this node sees enough of the cluster to announce (the split-brain guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quorum {
    /// Live members seen, this node included.
    pub live: usize,
    /// Live members needed (a majority of the expected members; 0 without the guard).
    pub needed: usize,
}

impl Quorum {
    /// Counts live members against the policy.
    pub fn of(nodes: &[NodeView], policy: &Policy) -> Self {
        let live = nodes
            .iter()
            .filter(|n| n.live)
            .map(|n| n.name.as_str())
            .collect::<BTreeSet<_>>()
            .len();
        let needed = policy.expected_members.map_or(0, |n| n / 2 + 1);
        Self { live, needed }
    }

    /// Whether a majority is in sight.
    pub fn ok(&self) -> bool {
        self.live >= self.needed
    }
}

/// What this node does with one group, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This node won the election: announce.
    Owner,
    /// Another node won (or nobody may answer): stay silent.
    Standby {
        /// The winner, if any.
        owner: Option<String>,
    },
    /// This node would win but sees no majority: stay silent.
    NoQuorum(Quorum),
}

/// This node's verdict on each group, in the same order.
pub fn decide(local: &str, groups: &[Group], quorum: Quorum) -> Vec<Verdict> {
    groups
        .iter()
        .map(|g| match g.owner() {
            Some(owner) if owner == local && !quorum.ok() => Verdict::NoQuorum(quorum),
            Some(owner) if owner == local => Verdict::Owner,
            owner => Verdict::Standby {
                owner: owner.map(str::to_string),
            },
        })
        .collect()
}
