//! The speaker's decisions, with no I/O: the gossip view and the configuration go in; which
//! VIPs this node announces, and what changed and why, come out. The daemon feeds it on every
//! membership event, health change and reload, and hands the owned set to the announcer.

use super::config::{Config, ServiceConfig};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use vigil_gossip::{MemberInfo, MemberState};
use vigil_l2::{InterfaceSet, Vip};
use vigil_lb::{Group, NodeMeta, NodeView, Policy, Quorum, Service, Verdict, decide, elect};

/// A gossip member as the speaker keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Node name.
    pub name: String,
    /// Gossip address.
    pub addr: SocketAddr,
    /// `alive`, `suspect`, `dead` or `left`.
    pub state: &'static str,
    /// What it published.
    #[serde(flatten)]
    pub meta: PublishedMeta,
}

/// A member's metadata, spelled out for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct PublishedMeta {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Services whose health check fails there.
    pub failing: BTreeSet<String>,
    /// In its fail-back hold-down.
    pub holding: bool,
}

impl From<&MemberInfo> for Member {
    fn from(m: &MemberInfo) -> Self {
        let meta = NodeMeta::decode(m.meta.as_deref().unwrap_or_default());
        Self {
            name: m.name.to_string(),
            addr: m.addr,
            state: state_name(m.state),
            meta: PublishedMeta {
                labels: meta.labels,
                failing: meta.failing,
                holding: meta.holding,
            },
        }
    }
}

fn state_name(state: MemberState) -> &'static str {
    match state {
        MemberState::Alive => "alive",
        MemberState::Suspect => "suspect",
        MemberState::Dead => "dead",
        MemberState::Left => "left",
        // A state added to the engine later: not a candidate until we know what it means.
        _ => "unknown",
    }
}

impl Member {
    /// Alive or suspect: a candidate, as in MetalLB.
    pub fn live(&self) -> bool {
        matches!(self.state, "alive" | "suspect")
    }

    fn view(&self) -> NodeView {
        NodeView {
            name: self.name.clone(),
            live: self.live(),
            meta: NodeMeta {
                labels: self.meta.labels.clone(),
                failing: self.meta.failing.clone(),
                holding: self.meta.holding,
            },
        }
    }
}

/// A change in what this node announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// This node now answers for the VIP.
    Taken {
        /// The VIP.
        vip: IpAddr,
        /// Its services.
        services: Vec<String>,
        /// Why (for the log).
        reason: String,
    },
    /// This node stopped owning the VIP.
    Released {
        /// The VIP.
        vip: IpAddr,
        /// Its services (before the change).
        services: Vec<String>,
        /// Why (for the log).
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VipStatus {
    /// The VIP.
    pub vip: IpAddr,
    /// Its services.
    pub services: Vec<String>,
    /// The elected owner, if any node may answer.
    pub owner: Option<String>,
    /// Whether this node announces it.
    pub announced_here: bool,
    /// Candidates, best first.
    pub candidates: Vec<String>,
}

/// The speaker's state.
#[derive(Debug)]
pub struct Speaker {
    config: Config,
    members: Vec<Member>,
    groups: Vec<Group>,
    verdicts: Vec<Verdict>,
    quorum: Quorum,
    owned: BTreeMap<IpAddr, Owned>,
}

impl Speaker {
    /// A speaker that knows only its configuration and announces nothing yet.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            members: Vec::new(),
            groups: Vec::new(),
            verdicts: Vec::new(),
            quorum: Quorum { live: 0, needed: 0 },
            owned: BTreeMap::new(),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replaces the configuration (a reload); call [`evaluate`](Self::evaluate) after.
    pub fn set_config(&mut self, config: Config) {
        self.config = config;
    }

    /// Replaces the gossip view; call [`evaluate`](Self::evaluate) after.
    pub fn set_members(&mut self, members: impl IntoIterator<Item = Member>) {
        self.members = members.into_iter().collect();
        self.members.sort_by(|a, b| a.name.cmp(&b.name));
    }

    /// The gossip view.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The split-brain guard's count at the last evaluation.
    pub fn quorum(&self) -> Quorum {
        self.quorum
    }

    fn policy(&self) -> Policy {
        Policy {
            hold_down: self.config.election.hold_down.is_some(),
            expected_members: self.config.election.expected_members,
        }
    }

    /// Re-runs the election for every VIP and returns what changed for this node. VIPs whose
    /// ownership did not change are left alone.
    pub fn evaluate(&mut self) -> Vec<Change> {
        let services: Vec<Service> = self.config.services.iter().map(lb_service).collect();
        let nodes: Vec<NodeView> = self.members.iter().map(Member::view).collect();
        let policy = self.policy();
        self.groups = elect(&services, &nodes, &policy);
        self.quorum = Quorum::of(&nodes, &policy);
        let local = self.config.node.name.clone();
        self.verdicts = decide(&local, &self.groups, self.quorum);

        let mut owned = BTreeMap::new();
        let mut why_not: BTreeMap<IpAddr, String> = BTreeMap::new();
        let mut elected: BTreeMap<IpAddr, String> = BTreeMap::new();
        for (group, verdict) in self.groups.iter().zip(&self.verdicts) {
            for &vip in &group.vips {
                match verdict {
                    Verdict::Owner => {
                        let services = group
                            .services
                            .iter()
                            .filter(|s| self.service(s).is_some_and(|c| c.vips.contains(&vip)))
                            .cloned()
                            .collect();
                        let interfaces = self.interfaces_for(vip);
                        owned.insert(
                            vip,
                            Owned {
                                services,
                                interfaces,
                            },
                        );
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
                Some(now) if now.interfaces == was.interfaces => {}
                Some(_) => changes.push(Change::Taken {
                    vip: *vip,
                    services: owned[vip].services.clone(),
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
    pub fn successors(&self) -> BTreeMap<IpAddr, Option<String>> {
        let local = &self.config.node.name;
        let services: Vec<Service> = self.config.services.iter().map(lb_service).collect();
        let nodes: Vec<NodeView> = self
            .members
            .iter()
            .map(|m| {
                let mut view = m.view();
                view.live &= m.name != *local;
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

    fn service(&self, name: &str) -> Option<&ServiceConfig> {
        self.config.services.iter().find(|s| s.name == name)
    }

    /// Where a VIP is announced: every interface if any of its services allows all,
    /// otherwise the union of their lists.
    fn interfaces_for(&self, vip: IpAddr) -> InterfaceSet {
        let mut names = BTreeSet::new();
        for s in self
            .config
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

    /// The VIPs to hand to the announcer.
    pub fn owned_vips(&self) -> Vec<Vip> {
        self.owned
            .iter()
            .map(|(addr, o)| Vip {
                addr: *addr,
                interfaces: o.interfaces.clone(),
            })
            .collect()
    }

    /// (service, VIP) pairs this node announces, for `metallb_speaker_announced`.
    pub fn announced(&self) -> Vec<(String, IpAddr)> {
        self.owned
            .iter()
            .flat_map(|(ip, o)| o.services.iter().map(move |s| (s.clone(), *ip)))
            .collect()
    }

    /// Every configured VIP with its owner.
    pub fn vip_status(&self) -> Vec<VipStatus> {
        let mut out = Vec::new();
        for (group, verdict) in self.groups.iter().zip(&self.verdicts) {
            for &vip in &group.vips {
                out.push(VipStatus {
                    vip,
                    services: group
                        .services
                        .iter()
                        .filter(|s| self.service(s).is_some_and(|c| c.vips.contains(&vip)))
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

fn lb_service(s: &ServiceConfig) -> Service {
    Service {
        name: s.name.clone(),
        vips: s.vips.clone(),
        nodes: s.nodes.clone(),
        node_selector: s.node_selector.clone(),
        health_checked: s.health_check.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(name: &str, extra: &str) -> Config {
        let text = format!(
            "node: {{name: {name}}}\ngossip: {{bind: 198.18.0.1}}\nservices:\n  \
             - {{name: web, vips: [198.18.0.100, 2001:db8::100]}}\n  \
             - {{name: api, vips: [198.18.0.100]}}\n  \
             - {{name: dns, vips: [198.18.0.101]}}\n{extra}"
        );
        Config::parse(&text, None).unwrap()
    }

    fn member(name: &str, state: &'static str) -> Member {
        Member {
            name: name.into(),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state,
            meta: PublishedMeta::default(),
        }
    }

    /// Go's order for 198.18.0.100 puts node-a before node-b and node-c.
    #[test]
    fn owner_takes_and_releases_with_reasons() {
        let mut a = Speaker::new(config("node-a", ""));
        a.set_members([
            member("node-a", "alive"),
            member("node-b", "alive"),
            member("node-c", "suspect"),
        ]);
        let changes = a.evaluate();
        let taken: Vec<IpAddr> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Taken { vip, .. } => Some(*vip),
                Change::Released { .. } => None,
            })
            .collect();
        assert!(taken.contains(&"198.18.0.100".parse().unwrap()));
        assert!(taken.contains(&"2001:db8::100".parse().unwrap()));
        // Services sharing 198.18.0.100 are both announced from here.
        let announced = a.announced();
        assert!(announced.contains(&("web".into(), "198.18.0.100".parse().unwrap())));
        assert!(announced.contains(&("api".into(), "198.18.0.100".parse().unwrap())));
        // Same view again: nothing changes.
        assert!(a.evaluate().is_empty());
    }

    #[test]
    fn every_node_agrees_and_only_the_owner_announces() {
        let view = [
            member("node-a", "alive"),
            member("node-b", "alive"),
            member("node-c", "alive"),
        ];
        let mut owners = BTreeMap::<IpAddr, Vec<String>>::new();
        for name in ["node-a", "node-b", "node-c"] {
            let mut s = Speaker::new(config(name, ""));
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
                member("node-b", "alive"),
                member("node-c", "alive"),
            ]
        };
        let mut b = Speaker::new(config("node-b", ""));
        b.set_members(view("alive"));
        b.evaluate();
        let before = b.owned_vips();
        b.set_members(view("dead"));
        let changes = b.evaluate();
        assert!(b.owned_vips().len() >= before.len());
        assert!(changes.iter().all(|c| matches!(c, Change::Taken { .. })));
        // A reload that adds a service changes only what the new service brings.
        let after_death = b.owned_vips();
        b.set_config(config(
            "node-b",
            "  - {name: extra, vips: [198.18.0.102], nodes: [node-c]}\n",
        ));
        assert!(b.evaluate().is_empty());
        assert_eq!(b.owned_vips(), after_death);
    }

    #[test]
    fn successors_are_who_the_others_elect_once_this_node_left() {
        let names = ["node-a", "node-b", "node-c"];
        let owner = vigil_lb::rank(names, "198.18.0.100".parse().unwrap())[0];
        let view = |dead: &str| names.map(|n| member(n, if n == dead { "dead" } else { "alive" }));
        let mut s = Speaker::new(config(owner, ""));
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
            let group_key = if *vip == "2001:db8::100".parse::<IpAddr>().unwrap() {
                "198.18.0.100".parse().unwrap()
            } else {
                *vip
            };
            let expected = vigil_lb::rank(others, group_key)[0];
            assert_eq!(next.as_deref(), Some(expected), "{vip}");
            let mut successor = Speaker::new(config(expected, ""));
            successor.set_members(view(owner));
            successor.evaluate();
            assert!(successor.owned_vips().iter().any(|v| v.addr == *vip));
        }

        // A node that loses the VIP to a better candidate names it as the successor.
        let others = names.into_iter().filter(|n| *n != owner);
        let later = vigil_lb::rank(others, "198.18.0.100".parse().unwrap())[0];
        let mut b = Speaker::new(config(later, ""));
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
        let mut alone = Speaker::new(config("node-a", ""));
        alone.set_members([member("node-a", "alive")]);
        alone.evaluate();
        assert!(!alone.owned_vips().is_empty());
        assert!(alone.successors().values().all(Option::is_none));

        // With the split-brain guard, a leave that drops the rest below a majority has no
        // successor either: the survivor would stay silent.
        let mut guarded = Speaker::new(config("node-a", "election: {expected_members: 3}\n"));
        guarded.set_members([member("node-a", "alive"), member("node-b", "alive")]);
        guarded.evaluate();
        assert!(!guarded.owned_vips().is_empty());
        assert!(guarded.successors().values().all(Option::is_none));
    }

    #[test]
    fn the_split_brain_guard_releases_with_its_reason() {
        let mut a = Speaker::new(config("node-a", "election: {expected_members: 3}\n"));
        a.set_members([member("node-a", "alive"), member("node-b", "alive")]);
        a.evaluate();
        assert!(!a.owned_vips().is_empty());
        a.set_members([member("node-a", "alive"), member("node-b", "dead")]);
        let changes = a.evaluate();
        assert!(a.owned_vips().is_empty());
        assert!(changes.iter().all(|c| matches!(
            c,
            Change::Released { reason, successor: None, .. } if reason.contains("split-brain guard")
        )));
    }
}
