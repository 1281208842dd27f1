//! The election over the gossip view and the desired state: which VIPs this node announces,
//! and what changed since the last run and why. VIPs whose ownership did not change are left
//! alone. [`SpeakerCore`](super::SpeakerCore) decides *when* to run it and turns the
//! [`Change`]s into actions.

use super::member::Member;
use crate::model::{DesiredState, SharedVips};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use vigil_l2::{InterfaceSet, Vip};
use vigil_lb::{Group, NodeMeta, NodeView, Policy, Quorum, Service, Verdict, decide, elect};

/// A change in what this node announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// This node now answers for the VIP (or answers on other interfaces).
    Taken {
        vip: IpAddr,
        services: Vec<String>,
        reason: String,
    },
    /// This node still owns the VIP, for other services: `added` are now announced from
    /// here, `removed` no longer are (deleted, or, with per-service elections, owned
    /// elsewhere).
    Services {
        vip: IpAddr,
        added: Vec<String>,
        removed: Vec<String>,
    },
    /// This node stopped owning the VIP.
    Released {
        vip: IpAddr,
        services: Vec<String>,
        reason: String,
        /// The node elected in its place, if any: this node answers until it is heard.
        successor: Option<String>,
    },
}

/// A VIP this node announces.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    services: Vec<String>,
    interfaces: InterfaceSet,
}

/// The status of one VIP, for `/status` and `vigil status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipStatus {
    /// The VIP.
    pub vip: IpAddr,
    /// The services that use it.
    pub services: Vec<String>,
    /// The elected owner, if any node may answer.
    pub owner: Option<String>,
    /// Whether this node announces it.
    pub announced_here: bool,
    /// The candidates, best first.
    pub candidates: Vec<String>,
}

/// The election's state: inputs, the last result, and the VIPs owned since.
#[derive(Debug)]
pub(crate) struct Election {
    node: String,
    hold_down: bool,
    desired: DesiredState,
    members: Vec<Member>,
    /// What this node publishes: it stands for this node's own entry in the view, which
    /// the gossip layer may not have reported back yet.
    local_meta: NodeMeta,
    groups: Vec<Group>,
    verdicts: Vec<Verdict>,
    quorum: Quorum,
    owned: BTreeMap<IpAddr, Owned>,
}

impl Election {
    pub(crate) fn new(node: String, hold_down: bool, desired: DesiredState) -> Self {
        Self {
            node,
            hold_down,
            desired,
            members: Vec::new(),
            local_meta: NodeMeta::default(),
            groups: Vec::new(),
            verdicts: Vec::new(),
            quorum: Quorum { live: 0, needed: 0 },
            owned: BTreeMap::new(),
        }
    }

    pub(crate) fn desired(&self) -> &DesiredState {
        &self.desired
    }

    pub(crate) fn set_desired(&mut self, desired: DesiredState) {
        self.desired = desired;
    }

    pub(crate) fn set_members(&mut self, members: impl IntoIterator<Item = Member>) {
        self.members = members.into_iter().collect();
        self.members.sort_by(|a, b| a.name.cmp(&b.name));
        self.patch_local();
    }

    /// This node's metadata as it publishes it now.
    pub(crate) fn set_local_meta(&mut self, meta: NodeMeta) {
        self.local_meta = meta;
        self.patch_local();
    }

    fn patch_local(&mut self) {
        let node = &self.node;
        if let Some(me) = self.members.iter_mut().find(|m| m.name == *node) {
            me.meta = self.local_meta.clone();
        }
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    pub(crate) fn quorum(&self) -> Quorum {
        self.quorum
    }

    fn policy(&self) -> Policy {
        Policy {
            hold_down: self.hold_down,
            expected_members: self.desired.expected_members,
            per_service: self.desired.shared_vips == SharedVips::PerService,
        }
    }

    fn services(&self) -> Vec<Service> {
        self.desired.services.iter().map(|s| s.to_lb()).collect()
    }

    /// Each VIP's services, in desired order: one pass instead of a lookup per VIP.
    fn services_by_vip(&self) -> BTreeMap<IpAddr, Vec<String>> {
        let mut out: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
        for s in &self.desired.services {
            for vip in &s.vips {
                let list = out.entry(*vip).or_default();
                if !list.contains(&s.id) {
                    list.push(s.id.clone());
                }
            }
        }
        out
    }

    /// Re-runs the election for every VIP and returns what changed for this node.
    pub(crate) fn evaluate(&mut self) -> Vec<Change> {
        let services = self.services();
        let nodes: Vec<NodeView> = self.members.iter().map(Member::view).collect();
        let policy = self.policy();
        self.groups = elect(&services, &nodes, &policy);
        self.quorum = Quorum::of(&nodes, &policy);
        self.verdicts = decide(&self.node, &self.groups, self.quorum);
        let by_vip = self.services_by_vip();

        let mut owned = BTreeMap::new();
        let mut why_not: BTreeMap<IpAddr, String> = BTreeMap::new();
        let mut elected: BTreeMap<IpAddr, String> = BTreeMap::new();
        for (group, verdict) in self.groups.iter().zip(&self.verdicts) {
            for &vip in &group.vips {
                match verdict {
                    Verdict::Owner => {
                        // The group's services that use this VIP (with per-service
                        // elections, other groups may own it for their services too).
                        let mine = by_vip
                            .get(&vip)
                            .into_iter()
                            .flatten()
                            .filter(|s| group.services.contains(s))
                            .cloned();
                        let interfaces = self.interfaces_for(vip);
                        let entry = owned.entry(vip).or_insert(Owned {
                            services: Vec::new(),
                            interfaces,
                        });
                        for s in mine {
                            if !entry.services.contains(&s) {
                                entry.services.push(s);
                            }
                        }
                    }
                    Verdict::Standby { owner: Some(o) } => {
                        why_not.insert(vip, format!("{o} is first of the candidates"));
                        elected.insert(vip, o.clone());
                    }
                    Verdict::Standby { owner: None } => {
                        why_not.insert(vip, "no candidate node".to_string());
                    }
                    Verdict::NoQuorum(q) => {
                        why_not.insert(
                            vip,
                            format!(
                                "split-brain guard: {} live member(s) seen, {} needed",
                                q.live, q.needed
                            ),
                        );
                    }
                }
            }
        }

        let mut changes = Vec::new();
        for (vip, was) in &self.owned {
            match owned.get(vip) {
                Some(now) if now.interfaces == was.interfaces => {
                    let added: Vec<String> = now
                        .services
                        .iter()
                        .filter(|s| !was.services.contains(s))
                        .cloned()
                        .collect();
                    let removed: Vec<String> = was
                        .services
                        .iter()
                        .filter(|s| !now.services.contains(s))
                        .cloned()
                        .collect();
                    if !added.is_empty() || !removed.is_empty() {
                        changes.push(Change::Services {
                            vip: *vip,
                            added,
                            removed,
                        });
                    }
                }
                Some(now) => changes.push(Change::Taken {
                    vip: *vip,
                    services: now.services.clone(),
                    reason: "its interfaces changed".into(),
                }),
                None => changes.push(Change::Released {
                    vip: *vip,
                    services: was.services.clone(),
                    reason: why_not
                        .remove(vip)
                        .unwrap_or_else(|| "no service uses it any more".into()),
                    successor: elected.remove(vip),
                }),
            }
        }
        for (vip, now) in &owned {
            if !self.owned.contains_key(vip) {
                let group = self.groups.iter().find(|g| g.vips.contains(vip));
                let n = group.map_or(0, |g| g.candidates.len());
                changes.push(Change::Taken {
                    vip: *vip,
                    services: now.services.clone(),
                    reason: format!("this node is first of {n} candidate(s)"),
                });
            }
        }
        self.owned = owned;
        changes
    }

    /// For each VIP this node announces, the node that would own it once this one has left,
    /// as the others will elect when they hear the leave: `None` when no node would (no other
    /// candidate, or the split-brain guard would silence the rest).
    pub(crate) fn successors(&self) -> BTreeMap<IpAddr, Option<String>> {
        let services = self.services();
        let nodes: Vec<NodeView> = self
            .members
            .iter()
            .map(|m| {
                let mut view = m.view();
                view.live &= m.name != self.node;
                view
            })
            .collect();
        let policy = self.policy();
        let groups = elect(&services, &nodes, &policy);
        let quorum = Quorum::of(&nodes, &policy);
        self.owned
            .keys()
            .map(|vip| {
                let next = groups
                    .iter()
                    .find(|g| g.vips.contains(vip))
                    .and_then(Group::owner)
                    .filter(|_| quorum.ok())
                    .map(str::to_string);
                (*vip, next)
            })
            .collect()
    }

    /// Where a VIP is announced: every interface if any of its services allows all,
    /// otherwise the union of their lists.
    fn interfaces_for(&self, vip: IpAddr) -> InterfaceSet {
        let mut names = BTreeSet::new();
        for s in self
            .desired
            .services
            .iter()
            .filter(|s| s.vips.contains(&vip))
        {
            match &s.interfaces {
                None => return InterfaceSet::All,
                Some(list) => names.extend(list.iter().cloned()),
            }
        }
        InterfaceSet::Only(names)
    }

    pub(crate) fn owns(&self, vip: IpAddr) -> bool {
        self.owned.contains_key(&vip)
    }

    pub(crate) fn owns_any(&self) -> bool {
        !self.owned.is_empty()
    }

    /// The VIPs to hand to the announcer.
    pub(crate) fn owned_vips(&self) -> Vec<Vip> {
        self.owned
            .iter()
            .map(|(addr, o)| Vip {
                addr: *addr,
                interfaces: o.interfaces.clone(),
            })
            .collect()
    }

    /// (service, VIP) pairs this node announces.
    pub(crate) fn announced(&self) -> Vec<(String, IpAddr)> {
        self.owned
            .iter()
            .flat_map(|(ip, o)| o.services.iter().map(move |s| (s.clone(), *ip)))
            .collect()
    }

    /// Every desired VIP with its owner (empty before the first election).
    pub(crate) fn vip_status(&self) -> Vec<VipStatus> {
        let by_vip = self.services_by_vip();
        let mut out = Vec::new();
        for (group, verdict) in self.groups.iter().zip(&self.verdicts) {
            for &vip in &group.vips {
                out.push(VipStatus {
                    vip,
                    services: by_vip
                        .get(&vip)
                        .into_iter()
                        .flatten()
                        .filter(|s| group.services.contains(s))
                        .cloned()
                        .collect(),
                    owner: group.owner().map(str::to_string),
                    announced_here: matches!(verdict, Verdict::Owner),
                    candidates: group.candidates.clone(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    //! The election's rules, moved from the standalone speaker with their assertions.
    use super::*;
    use crate::core::MemberState;
    use crate::model::ServiceSpec;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn desired(expected_members: Option<usize>, extra: Option<ServiceSpec>) -> DesiredState {
        let mut services = vec![
            ServiceSpec::new("web", [ip("198.18.0.100"), ip("2001:db8::100")]),
            ServiceSpec::new("api", [ip("198.18.0.100")]),
            ServiceSpec::new("dns", [ip("198.18.0.101")]),
        ];
        services.extend(extra);
        DesiredState {
            services,
            expected_members,
            ..DesiredState::default()
        }
    }

    fn election(name: &str) -> Election {
        Election::new(name.into(), false, desired(None, None))
    }

    fn member(name: &str, state: MemberState) -> Member {
        Member {
            name: name.into(),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state,
            meta: Default::default(),
        }
    }

    use MemberState::{Alive, Dead, Suspect};

    /// Go's order for 198.18.0.100 puts node-a before node-b and node-c.
    #[test]
    fn owner_takes_and_releases_with_reasons() {
        let mut a = election("node-a");
        a.set_members([
            member("node-a", Alive),
            member("node-b", Alive),
            member("node-c", Suspect),
        ]);
        let changes = a.evaluate();
        let taken: Vec<IpAddr> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Taken { vip, .. } => Some(*vip),
                Change::Released { .. } | Change::Services { .. } => None,
            })
            .collect();
        assert!(taken.contains(&ip("198.18.0.100")));
        assert!(taken.contains(&ip("2001:db8::100")));
        // Services sharing 198.18.0.100 are both announced from here.
        let announced = a.announced();
        assert!(announced.contains(&("web".into(), ip("198.18.0.100"))));
        assert!(announced.contains(&("api".into(), ip("198.18.0.100"))));
        // Same view again: nothing changes.
        assert!(a.evaluate().is_empty());
    }

    #[test]
    fn every_node_agrees_and_only_the_owner_announces() {
        let view = [
            member("node-a", Alive),
            member("node-b", Alive),
            member("node-c", Alive),
        ];
        let mut owners = BTreeMap::<IpAddr, Vec<String>>::new();
        for name in ["node-a", "node-b", "node-c"] {
            let mut s = election(name);
            s.set_members(view.clone());
            s.evaluate();
            for v in s.owned_vips() {
                owners.entry(v.addr).or_default().push(name.into());
            }
        }
        assert_eq!(owners.len(), 3);
        assert!(owners.values().all(|o| o.len() == 1), "{owners:?}");
    }

    #[test]
    fn a_dead_owner_moves_its_vips_and_a_reload_touches_nothing_else() {
        let view = |a_state| {
            [
                member("node-a", a_state),
                member("node-b", Alive),
                member("node-c", Alive),
            ]
        };
        let mut b = election("node-b");
        b.set_members(view(Alive));
        b.evaluate();
        let before = b.owned_vips();
        b.set_members(view(Dead));
        let changes = b.evaluate();
        assert!(b.owned_vips().len() >= before.len());
        assert!(changes.iter().all(|c| matches!(c, Change::Taken { .. })));
        // A reload that adds a service changes only what the new service brings.
        let after_death = b.owned_vips();
        let mut extra = ServiceSpec::new("extra", [ip("198.18.0.102")]);
        extra.nodes = Some(["node-c".to_string()].into());
        b.set_desired(desired(None, Some(extra)));
        assert!(b.evaluate().is_empty());
        assert_eq!(b.owned_vips(), after_death);
    }

    #[test]
    fn successors_are_who_the_others_elect_once_this_node_left() {
        let names = ["node-a", "node-b", "node-c"];
        let owner = vigil_lb::rank(names, ip("198.18.0.100"))[0];
        let view = |dead: &str| names.map(|n| member(n, if n == dead { Dead } else { Alive }));
        let mut s = election(owner);
        s.set_members(view(""));
        s.evaluate();
        let successors = s.successors();
        assert_eq!(
            successors.keys().copied().collect::<Vec<_>>(),
            s.owned_vips().iter().map(|v| v.addr).collect::<Vec<_>>()
        );
        for (vip, next) in &successors {
            // The others, seeing this node gone, elect the same successor.
            let others: Vec<&str> = names.into_iter().filter(|n| *n != owner).collect();
            let group_key = if *vip == ip("2001:db8::100") {
                ip("198.18.0.100")
            } else {
                *vip
            };
            let expected = vigil_lb::rank(others, group_key)[0];
            assert_eq!(next.as_deref(), Some(expected), "{vip}");
            let mut successor = election(expected);
            successor.set_members(view(owner));
            successor.evaluate();
            assert!(successor.owned_vips().iter().any(|v| v.addr == *vip));
        }

        // A node that loses the VIP to a better candidate names it as the successor.
        let others = names.into_iter().filter(|n| *n != owner);
        let later = vigil_lb::rank(others, ip("198.18.0.100"))[0];
        let mut b = election(later);
        b.set_members(view(owner));
        b.evaluate();
        b.set_members(view(""));
        let changes = b.evaluate();
        assert!(!changes.is_empty());
        assert!(changes.iter().all(|c| matches!(
            c,
            Change::Released { successor: Some(s), .. } if s == owner
        )));

        // Alone: nobody to hand over to.
        let mut alone = election("node-a");
        alone.set_members([member("node-a", Alive)]);
        alone.evaluate();
        assert!(!alone.owned_vips().is_empty());
        assert!(alone.successors().values().all(Option::is_none));

        // With the split-brain guard, a leave that drops the rest below a majority has no
        // successor either: the survivor would stay silent.
        let mut guarded = Election::new("node-a".into(), false, desired(Some(3), None));
        guarded.set_members([member("node-a", Alive), member("node-b", Alive)]);
        guarded.evaluate();
        assert!(!guarded.owned_vips().is_empty());
        assert!(guarded.successors().values().all(Option::is_none));
    }

    #[test]
    fn the_split_brain_guard_releases_with_its_reason() {
        let mut a = Election::new("node-a".into(), false, desired(Some(3), None));
        a.set_members([member("node-a", Alive), member("node-b", Alive)]);
        a.evaluate();
        assert!(!a.owned_vips().is_empty());
        a.set_members([member("node-a", Alive), member("node-b", Dead)]);
        let changes = a.evaluate();
        assert!(a.owned_vips().is_empty());
        assert!(changes.iter().all(|c| matches!(
            c,
            Change::Released { reason, successor: None, .. } if reason.contains("split-brain guard")
        )));
    }
}
