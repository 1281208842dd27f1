//! The election over the gossip view and the desired state: which VIPs this node announces,
//! and what changed since the last run and why. VIPs whose ownership did not change are left
//! alone. [`SpeakerCore`](super::SpeakerCore) decides *when* to run it and turns the
//! [`Change`]s into actions.

use super::member::Member;
use super::timeline::VipOwner;
use crate::model::{DesiredState, ServiceSpec, SharedVips};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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

/// How the gossip view changed since the last election, as far as the election reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ViewChange {
    /// Same live members with the same metadata (a suspicion, a refutation, a dead member
    /// that was already not live): nothing to elect.
    Unchanged,
    /// Only these members stopped being live: each ranking keeps its order without them.
    Lost(BTreeSet<String>),
    /// Anything else (a join, new metadata): every service is elected again.
    Other,
}

/// The election's state: inputs, the last result, and the VIPs owned since.
///
/// With per-service elections (Kubernetes mode) every service is elected on its own, so a
/// change to some services re-elects only those ([`Election::evaluate_services`]) and
/// touches only their VIPs; a lost member only shortens the rankings it was in. Grouped
/// elections (standalone) always run whole.
#[derive(Debug)]
pub(crate) struct Election {
    node: String,
    hold_down: bool,
    desired: DesiredState,
    /// Position of each service in `desired.services`.
    index: HashMap<String, usize>,
    /// The services using each VIP, by id.
    by_vip: BTreeMap<IpAddr, BTreeSet<String>>,
    members: Vec<Member>,
    /// The node views the last election ran with.
    views: Vec<NodeView>,
    /// What this node publishes: it stands for this node's own entry in the view, which
    /// the gossip layer may not have reported back yet.
    local_meta: NodeMeta,
    /// Grouped mode: the groups and verdicts of the last election, in order.
    groups: Vec<Group>,
    verdicts: Vec<Verdict>,
    /// Per-service mode: each service's group and verdict, by id.
    elected: HashMap<String, (Group, Verdict)>,
    quorum: Quorum,
    /// Every other member was lost at once ([`super::isolation`]): own nothing.
    isolated: bool,
    owned: BTreeMap<IpAddr, Owned>,
    /// The VIPs the last election may have moved (every VIP after a whole election), for
    /// the ownership timeline ([`Election::touched_owners`]).
    touched: Touched,
    /// What the last election changed in `owned`, for the announcer.
    owned_changes: OwnedChanges,
}

/// What an election changed in the VIPs this node owns, for the announcer: handing it the
/// whole set after each change is O(VIPs owned) per Service changed, which a speaker owning
/// a thousand VIPs paid on every event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum OwnedChanges {
    /// Any VIP may have changed (a grouped election runs whole): the whole set.
    #[default]
    All,
    /// Only these: owned now (with where they are announced: new, or their interfaces
    /// changed), or not any more.
    Some {
        /// Owned now.
        own: Vec<Vip>,
        /// Owned before, not now.
        disown: Vec<IpAddr>,
    },
}

/// The VIPs the last election may have moved.
#[derive(Debug, Default)]
enum Touched {
    /// Every VIP (a grouped election runs whole).
    #[default]
    All,
    /// These (per-service elections).
    Some(BTreeSet<IpAddr>),
}

impl Election {
    pub(crate) fn new(node: String, hold_down: bool, desired: DesiredState) -> Self {
        let mut election = Self {
            node,
            hold_down,
            desired,
            index: HashMap::new(),
            by_vip: BTreeMap::new(),
            members: Vec::new(),
            views: Vec::new(),
            local_meta: NodeMeta::default(),
            groups: Vec::new(),
            verdicts: Vec::new(),
            elected: HashMap::new(),
            quorum: Quorum { live: 0, needed: 0 },
            isolated: false,
            owned: BTreeMap::new(),
            touched: Touched::All,
            owned_changes: OwnedChanges::All,
        };
        election.reindex();
        election
    }

    pub(crate) fn desired(&self) -> &DesiredState {
        &self.desired
    }

    pub(crate) fn set_desired(&mut self, desired: DesiredState) {
        self.desired = desired;
        self.reindex();
    }

    /// The seeds in force are replaced (nothing to elect).
    pub(crate) fn set_seeds(&mut self, seeds: Vec<String>) {
        self.desired.seeds = seeds;
    }

    /// The service with this id, by index.
    pub(crate) fn service(&self, id: &str) -> Option<&ServiceSpec> {
        self.index.get(id).map(|&i| &self.desired.services[i])
    }

    fn reindex(&mut self) {
        self.index.clear();
        self.by_vip.clear();
        for (i, s) in self.desired.services.iter().enumerate() {
            self.index.insert(s.id.clone(), i);
            for vip in &s.vips {
                self.by_vip.entry(*vip).or_default().insert(s.id.clone());
            }
        }
    }

    fn unlink(by_vip: &mut BTreeMap<IpAddr, BTreeSet<String>>, spec: &ServiceSpec) {
        for vip in &spec.vips {
            if let Some(ids) = by_vip.get_mut(vip) {
                ids.remove(&spec.id);
                if ids.is_empty() {
                    by_vip.remove(vip);
                }
            }
        }
    }

    fn link(by_vip: &mut BTreeMap<IpAddr, BTreeSet<String>>, spec: &ServiceSpec) {
        for vip in &spec.vips {
            by_vip.entry(*vip).or_default().insert(spec.id.clone());
        }
    }

    /// Applies changed and removed services to the desired state (in O(changes)); returns
    /// the ids that really changed. A removal swaps the last service into the hole, so the
    /// order of `desired.services` is not kept (per-service elections do not read it).
    pub(crate) fn apply_changes(
        &mut self,
        upserts: Vec<ServiceSpec>,
        removes: Vec<String>,
    ) -> BTreeSet<String> {
        let mut changed = BTreeSet::new();
        for id in removes {
            let Some(pos) = self.index.remove(&id) else {
                continue;
            };
            let old = self.desired.services.swap_remove(pos);
            if let Some(moved) = self.desired.services.get(pos) {
                self.index.insert(moved.id.clone(), pos);
            }
            Self::unlink(&mut self.by_vip, &old);
            changed.insert(id);
        }
        for spec in upserts {
            match self.index.get(&spec.id).copied() {
                Some(pos) => {
                    if self.desired.services[pos] == spec {
                        continue;
                    }
                    let old = std::mem::replace(&mut self.desired.services[pos], spec);
                    Self::unlink(&mut self.by_vip, &old);
                    Self::link(&mut self.by_vip, &self.desired.services[pos]);
                    changed.insert(old.id);
                }
                None => {
                    Self::link(&mut self.by_vip, &spec);
                    self.index
                        .insert(spec.id.clone(), self.desired.services.len());
                    changed.insert(spec.id.clone());
                    self.desired.services.push(spec);
                }
            }
        }
        changed
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

    /// Isolated or not (see [`super::isolation`]); the caller elects again.
    pub(crate) fn set_isolated(&mut self, isolated: bool) {
        self.isolated = isolated;
    }

    /// The members live in the view, this node included.
    pub(crate) fn live_count(&self) -> usize {
        self.members.iter().filter(|m| m.live()).count()
    }

    /// Whether the split-brain guard lets this node announce (always, without the guard).
    pub(crate) fn guard_holds(&self) -> bool {
        self.live_count() >= self.guard_needed()
    }

    /// The live members the split-brain guard alone needs (0 without it).
    fn guard_needed(&self) -> usize {
        self.desired.expected_members.map_or(0, |n| n / 2 + 1)
    }

    /// The quorum of `nodes` under the policy; never reached while isolated (one more live
    /// member needed than seen).
    fn quorum_of(&self, nodes: &[NodeView]) -> Quorum {
        let quorum = Quorum::of(nodes, &self.policy());
        if self.isolated {
            Quorum {
                live: quorum.live,
                needed: quorum.needed.max(quorum.live + 1),
            }
        } else {
            quorum
        }
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

    fn views_now(&self) -> Vec<NodeView> {
        self.members.iter().map(Member::view).collect()
    }

    /// How the gossip view changed since the last election, as the election reads it.
    pub(crate) fn view_change(&self) -> ViewChange {
        let now = self.views_now();
        if now == self.views {
            return ViewChange::Unchanged;
        }
        let before: BTreeMap<&str, &NodeView> =
            self.views.iter().map(|v| (v.name.as_str(), v)).collect();
        let after: BTreeMap<&str, &NodeView> = now.iter().map(|v| (v.name.as_str(), v)).collect();
        let mut lost = BTreeSet::new();
        for (name, view) in &after {
            match before.get(name) {
                // Not live before and now: its metadata is never read.
                Some(old) if !old.live && !view.live => {}
                Some(old) if old.live && !view.live => {
                    lost.insert(name.to_string());
                }
                Some(old) if old == view => {}
                None if !view.live => {}
                _ => return ViewChange::Other,
            }
        }
        for (name, old) in &before {
            if old.live && !after.contains_key(name) {
                lost.insert(name.to_string());
            }
        }
        if lost.is_empty() {
            ViewChange::Unchanged
        } else {
            ViewChange::Lost(lost)
        }
    }

    fn per_service(&self) -> bool {
        self.desired.shared_vips == SharedVips::PerService
    }

    /// Re-runs the election for every VIP and returns what changed for this node.
    pub(crate) fn evaluate(&mut self) -> Vec<Change> {
        if self.per_service() {
            let nodes = self.views_now();
            self.quorum = self.quorum_of(&nodes);
            self.views = nodes;
            let mut touched: BTreeSet<IpAddr> = self.owned.keys().copied().collect();
            self.elected.clear();
            let ids: Vec<String> = self.desired.services.iter().map(|s| s.id.clone()).collect();
            for id in ids {
                touched.extend(self.elect_one(&id));
            }
            return self.settle(&touched);
        }
        self.evaluate_grouped()
    }

    /// Per-service mode: re-elects only `ids` (changed, added or removed services) and
    /// settles only their VIPs. Grouped mode, or a view that changed since the last
    /// election: everything.
    pub(crate) fn evaluate_services(&mut self, ids: &BTreeSet<String>) -> Vec<Change> {
        if !self.per_service() || self.view_change() != ViewChange::Unchanged {
            return self.evaluate();
        }
        let mut touched = BTreeSet::new();
        for id in ids {
            if let Some((group, _)) = self.elected.remove(id) {
                touched.extend(group.vips);
            }
            touched.extend(self.elect_one(id));
        }
        self.settle(&touched)
    }

    /// Per-service mode: only `lost` stopped being live since the last election. Each
    /// ranking keeps its order without them (the hash and the scores are per node), so they
    /// are only taken out; a verdict changes where an owner was lost or the quorum moved.
    pub(crate) fn evaluate_lost(&mut self, lost: &BTreeSet<String>) -> Vec<Change> {
        if !self.per_service() {
            return self.evaluate();
        }
        let nodes = self.views_now();
        let quorum = self.quorum_of(&nodes);
        let quorum_moved = quorum != self.quorum;
        self.quorum = quorum;
        self.views = nodes;
        let mut touched = BTreeSet::new();
        for (group, verdict) in self.elected.values_mut() {
            // Usually one name: a linear search of the ranking beats a set lookup per
            // candidate. Only a lost first candidate (or a quorum change) moves the verdict.
            let mut owner_lost = false;
            for name in lost {
                if let Some(at) = group.candidates.iter().position(|c| c == name) {
                    group.candidates.remove(at);
                    owner_lost |= at == 0;
                }
            }
            if !owner_lost && !quorum_moved {
                continue;
            }
            let next = decide(&self.node, std::slice::from_ref(group), quorum)
                .pop()
                .unwrap_or(Verdict::Standby { owner: None });
            if next != *verdict {
                touched.extend(group.vips.iter().copied());
                *verdict = next;
            }
        }
        self.settle(&touched)
    }

    /// Elects one service on its own (per-service mode) with the views of the last election;
    /// returns its VIPs. A service gone or without VIPs is only forgotten.
    fn elect_one(&mut self, id: &str) -> Vec<IpAddr> {
        self.elected.remove(id);
        let Some(spec) = self.service(id) else {
            return Vec::new();
        };
        let policy = self.policy();
        let Some(group) = elect(&[spec.to_lb()], &self.views, &policy).pop() else {
            return Vec::new();
        };
        let verdict = decide(&self.node, std::slice::from_ref(&group), self.quorum)
            .pop()
            .unwrap_or(Verdict::Standby { owner: None });
        let vips = group.vips.clone();
        self.elected.insert(id.to_string(), (group, verdict));
        vips
    }

    /// Per-service mode: who owns each of `touched` now, and what changed there for this
    /// node, in the order a whole election reports it (VIPs owned before, then VIPs taken).
    fn settle(&mut self, touched: &BTreeSet<IpAddr>) -> Vec<Change> {
        let guard_needed = self.guard_needed();
        self.touched = Touched::Some(touched.clone());
        let mut owned = BTreeMap::new();
        let mut why_not: BTreeMap<IpAddr, String> = BTreeMap::new();
        let mut elected: BTreeMap<IpAddr, String> = BTreeMap::new();
        let mut candidates: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for &vip in touched {
            for id in self.by_vip.get(&vip).into_iter().flatten() {
                let Some((group, verdict)) = self.elected.get(id) else {
                    continue;
                };
                candidates.entry(vip).or_insert(group.candidates.len());
                match verdict {
                    Verdict::Owner => owned
                        .entry(vip)
                        .or_insert_with(|| Owned {
                            services: Vec::new(),
                            interfaces: self.interfaces_for(vip),
                        })
                        .services
                        .push(id.clone()),
                    verdict => {
                        why_not.insert(vip, why_not_reason(verdict, self.isolated, guard_needed));
                        if let Verdict::Standby { owner: Some(o) } = verdict {
                            elected.insert(vip, o.clone());
                        }
                    }
                }
            }
        }
        let mut changes = Vec::new();
        for vip in touched {
            if let Some(was) = self.owned.get(vip) {
                changes.extend(diff_owned(
                    *vip,
                    was,
                    owned.get(vip),
                    &mut why_not,
                    &mut elected,
                ));
            }
        }
        for (vip, now) in &owned {
            if !self.owned.contains_key(vip) {
                let n = candidates.get(vip).copied().unwrap_or(0);
                changes.push(Change::Taken {
                    vip: *vip,
                    services: now.services.clone(),
                    reason: format!("this node is first of {n} candidate(s)"),
                });
            }
        }
        let (mut own, mut disown) = (Vec::new(), Vec::new());
        for vip in touched {
            match (self.owned.get(vip), owned.get(vip)) {
                (Some(was), Some(now)) if was.interfaces == now.interfaces => {}
                (_, Some(now)) => own.push(Vip {
                    addr: *vip,
                    interfaces: now.interfaces.clone(),
                }),
                (Some(_), None) => disown.push(*vip),
                (None, None) => {}
            }
        }
        self.owned_changes = OwnedChanges::Some { own, disown };
        for vip in touched {
            match owned.remove(vip) {
                Some(o) => self.owned.insert(*vip, o),
                None => self.owned.remove(vip),
            };
        }
        changes
    }

    /// Grouped mode: every group elected again.
    fn evaluate_grouped(&mut self) -> Vec<Change> {
        let guard_needed = self.guard_needed();
        self.touched = Touched::All;
        self.owned_changes = OwnedChanges::All;
        let services = self.services();
        let nodes = self.views_now();
        let policy = self.policy();
        self.groups = elect(&services, &nodes, &policy);
        self.quorum = self.quorum_of(&nodes);
        self.views = nodes;
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
                    verdict => {
                        why_not.insert(vip, why_not_reason(verdict, self.isolated, guard_needed));
                        if let Verdict::Standby { owner: Some(o) } = verdict {
                            elected.insert(vip, o.clone());
                        }
                    }
                }
            }
        }

        let mut changes = Vec::new();
        for (vip, was) in &self.owned {
            changes.extend(diff_owned(
                *vip,
                was,
                owned.get(vip),
                &mut why_not,
                &mut elected,
            ));
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

    /// Each VIP the last election may have moved, with its owner and next candidate, and
    /// whether the list is every desired VIP. A VIP no service uses any more comes with no
    /// services. Per-service elections: O(VIPs touched).
    pub(crate) fn touched_owners(&self) -> (Vec<VipOwner>, bool) {
        let ok = self.quorum.ok();
        let of = |group: &Group| {
            let owner = group.owner().filter(|_| ok).map(str::to_string);
            let next = group.candidates.get(1).cloned();
            (owner, next)
        };
        let services = |vip: &IpAddr| -> Vec<String> {
            self.by_vip
                .get(vip)
                .into_iter()
                .flatten()
                .cloned()
                .collect()
        };
        let per_vip = |vip: &IpAddr| {
            let services = services(vip);
            let group = services
                .iter()
                .find_map(|id| self.elected.get(id).map(|(g, _)| g));
            let (owner, next) = group.map(of).unwrap_or_default();
            VipOwner {
                vip: *vip,
                services,
                owner,
                next,
            }
        };
        match (&self.touched, self.per_service()) {
            (Touched::Some(vips), _) => (vips.iter().map(per_vip).collect(), false),
            (Touched::All, true) => (self.by_vip.keys().map(per_vip).collect(), true),
            (Touched::All, false) => {
                let mut owners = Vec::new();
                for group in &self.groups {
                    let (owner, next) = of(group);
                    for vip in &group.vips {
                        owners.push(VipOwner {
                            vip: *vip,
                            services: services(vip),
                            owner: owner.clone(),
                            next: next.clone(),
                        });
                    }
                }
                (owners, true)
            }
        }
    }

    /// Where a VIP is announced: every interface if any of its services allows all,
    /// otherwise the union of their lists.
    fn interfaces_for(&self, vip: IpAddr) -> InterfaceSet {
        let mut names = BTreeSet::new();
        for s in self
            .by_vip
            .get(&vip)
            .into_iter()
            .flatten()
            .filter_map(|id| self.service(id))
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

    /// What the last election changed in the VIPs owned (see [`OwnedChanges`]).
    pub(crate) fn take_owned_changes(&mut self) -> OwnedChanges {
        std::mem::take(&mut self.owned_changes)
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
        if self.per_service() {
            let mut out = Vec::new();
            for s in &self.desired.services {
                let Some((group, verdict)) = self.elected.get(&s.id) else {
                    continue;
                };
                for &vip in &group.vips {
                    out.push(VipStatus {
                        vip,
                        services: vec![s.id.clone()],
                        owner: group.owner().map(str::to_string),
                        announced_here: matches!(verdict, Verdict::Owner),
                        candidates: group.candidates.clone(),
                    });
                }
            }
            return out;
        }
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

/// Why this node does not own a VIP, for people.
/// `guard_needed`: the live members the split-brain guard alone needs (0 without it); under
/// isolation the guard's reason comes first when it would silence this node anyway.
fn why_not_reason(verdict: &Verdict, isolated: bool, guard_needed: usize) -> String {
    match verdict {
        Verdict::NoQuorum(q) if isolated && q.live < guard_needed => format!(
            "split-brain guard: {} live member(s) seen, {guard_needed} needed (and isolated)",
            q.live
        ),
        Verdict::NoQuorum(_) if isolated => {
            "isolated: every other member lost at once, or none heard; silent until the cluster is heard".into()
        }
        Verdict::Owner => "this node owns it".into(),
        Verdict::Standby { owner: Some(o) } => format!("{o} is first of the candidates"),
        Verdict::Standby { owner: None } => "no candidate node".into(),
        Verdict::NoQuorum(q) => format!(
            "split-brain guard: {} live member(s) seen, {} needed",
            q.live, q.needed
        ),
    }
}

/// What changed for a VIP this node owned (`was`), now owned as `now` or not at all.
fn diff_owned(
    vip: IpAddr,
    was: &Owned,
    now: Option<&Owned>,
    why_not: &mut BTreeMap<IpAddr, String>,
    elected: &mut BTreeMap<IpAddr, String>,
) -> Option<Change> {
    match now {
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
            (!added.is_empty() || !removed.is_empty()).then_some(Change::Services {
                vip,
                added,
                removed,
            })
        }
        Some(now) => Some(Change::Taken {
            vip,
            services: now.services.clone(),
            reason: "its interfaces changed".into(),
        }),
        None => Some(Change::Released {
            vip,
            services: was.services.clone(),
            reason: why_not
                .remove(&vip)
                .unwrap_or_else(|| "no service uses it any more".into()),
            successor: elected.remove(&vip),
        }),
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

    /// Candidate sets are shared (`NodeSet`), but a service is changed by what its set
    /// holds, not by which set it points at.
    #[test]
    fn an_equal_candidate_set_held_elsewhere_is_no_change() {
        let mut e = election("node-a");
        let with = |nodes: &[&str]| {
            let mut spec = ServiceSpec::new("web", [ip("198.18.0.100")]);
            spec.nodes = Some(std::sync::Arc::new(
                nodes.iter().map(|n| n.to_string()).collect(),
            ));
            spec
        };
        let changed = e.apply_changes(vec![with(&["node-a", "node-b"])], Vec::new());
        assert_eq!(changed, BTreeSet::from(["web".to_string()]));
        let again = e.apply_changes(vec![with(&["node-a", "node-b"])], Vec::new());
        assert!(again.is_empty(), "same names in another set: {again:?}");
        let changed = e.apply_changes(vec![with(&["node-b"])], Vec::new());
        assert_eq!(changed, BTreeSet::from(["web".to_string()]));
    }

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
        extra.nodes = Some(std::sync::Arc::new(["node-c".to_string()].into()));
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
