//! [`SpeakerCore`]: the speaker's decisions, with no I/O (quinn-proto's shape).
//!
//! Calling contract:
//! - **Inputs**, named `handle_*` (plus [`begin_shutdown`](SpeakerCore::begin_shutdown)):
//!   a whole desired-state snapshot, the gossip view after a membership event, a local health
//!   flip, the end of the first join, an announcer event, and time. Each input that may change
//!   the result re-runs the election at once.
//! - **Outputs**: [`poll_action`](SpeakerCore::poll_action) until `None` after every input, in
//!   order; [`poll_timeout`](SpeakerCore::poll_timeout) for the next deadline (absolute), at
//!   which the caller calls [`handle_timeout`](SpeakerCore::handle_timeout); and
//!   [`status`](SpeakerCore::status) for `/status`.
//!
//! The rules it keeps:
//! - **First join:** nothing is elected before the first join through the seeds is over.
//!   Alone, a node would think itself the owner of every VIP and answer beside the real owners.
//! - **Fail-back hold-down:** a node publishes `holding` from its start until the hold-down
//!   ends, so it ranks after settled members; unless its first join finds no settled member
//!   (a cold start, or alone): then holding back would only make VIPs hop as nodes settle.
//! - **Order, taking a VIP:** the address goes on the local device ([`Action::HoldAddress`])
//!   before the announcer answers for it ([`Action::SetOwned`]), so the first client that
//!   follows the gratuitous ARP is accepted by the kernel.
//! - **Order, giving a VIP up** (make before break): a VIP that moves to a live node is handed
//!   over ([`Action::HandOver`]): the announcer keeps answering until another MAC claims it or
//!   the bound passes, and only then ([`handle_announcer_event`](SpeakerCore::handle_announcer_event)
//!   with `HandedOver`) does its address come off. A VIP nobody takes goes silent and loses
//!   its address at once.
//! - **Isolation** ([`isolation`]): a node that loses every other member at once (two or
//!   more) answers for nothing until it hears the cluster again (or a bound passes), so a host
//!   that comes back does not answer beside the VIPs' real owners.
//! - **Shutdown:** every owned VIP with a successor (as the others will elect once they hear
//!   the leave) is handed over, the others go silent, the node leaves, and the addresses come
//!   off once the successors are heard (or at the bound); then [`Action::Stopped`].

pub mod claims;
mod election;
mod health;
pub mod isolation;
mod member;
mod status;
mod timeline;

#[cfg(test)]
mod isolation_tests;
#[cfg(test)]
mod keyed_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timeline_tests;

pub use election::VipStatus;
pub use health::Hysteresis;
pub use member::{Member, MemberEventKind, MemberState};
pub use status::{Counters, Status, StatusMember, StatusQuorum, StatusVip};
pub use timeline::{
    ANNOUNCE_BOUND, Cause, MemberSignal, OwnershipChange, Stage, StatusChange, StatusStage,
    Timeline,
};

use crate::model::{DesiredState, DesiredUpdate, ServiceChanges, ServiceSpec, StaticSettings};
use election::{Change, Election, OwnedChanges, ViewChange};
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use vigil_l2::Vip;
use vigil_l2::wire::ethernet::Address as EthernetAddress;
use vigil_lb::NodeMeta;

/// How long a node keeps answering for a VIP whose successor has not been heard claiming it.
/// The successor claims it once it elects itself (a few gossip rounds after the change), so
/// this is a bound for the case where it never speaks.
pub const HANDOVER_BOUND: Duration = Duration::from_secs(1);

/// How long past [`HANDOVER_BOUND`] a stopping node waits for the announcer to report its
/// handovers over (the announcer enforces the bound itself; this covers a lost report).
const STOP_SLACK: Duration = Duration::from_millis(500);

/// What the caller does next, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Action {
    /// Notice: this node now answers for `vip` (for logs, events and counters).
    Announced {
        /// The VIP.
        vip: IpAddr,
        /// Its services.
        services: Vec<String>,
        /// Why, for people.
        reason: String,
        /// What made the election run.
        trigger: Trigger,
    },
    /// Notice: this node stopped answering for `vip` (or will, once `successor` is heard).
    Withdrawn {
        /// The VIP.
        vip: IpAddr,
        /// Its services before the change.
        services: Vec<String>,
        /// Why, for people.
        reason: String,
        /// The node elected in its place, if any.
        successor: Option<String>,
        /// What made the election run ([`Trigger::Stop`] on shutdown).
        trigger: Trigger,
    },
    /// Put `vip` on the local-address device (only with `local_address` set).
    HoldAddress(IpAddr),
    /// Take `vip` off the local-address device.
    ReleaseAddress {
        /// The VIP.
        vip: IpAddr,
        /// Why (for the log).
        why: AddressRelease,
    },
    /// Keep answering for these VIPs until another MAC claims each, or `bound` passes
    /// (`vigil_l2::Announcer::hand_over`). Comes before the [`Action::SetOwned`] without them.
    HandOver {
        /// The VIPs.
        vips: Vec<IpAddr>,
        /// The longest the announcer keeps answering.
        bound: Duration,
    },
    /// The announcer's owned set, whole.
    SetOwned(Vec<Vip>),
    /// The announcer's owned set, changed by these only
    /// (`vigil_l2::Announcer::update_owned`): what one per-service election changed.
    UpdateOwned {
        /// Owned from now on (newly, or announced on other interfaces).
        own: Vec<Vip>,
        /// Not owned any more.
        disown: Vec<IpAddr>,
    },
    /// Say again who answers for the owned VIPs (a member (re)appeared: after a partition
    /// heals, the other side's clients may still hold its owner's MAC).
    Reannounce,
    /// Publish this node's gossip metadata.
    PublishMeta(NodeMeta),
    /// Ask every live member to acknowledge this node's alive state
    /// (`vigil_gossip::Membership::confirm_alive`): the split-brain guard's rejoin quiet
    /// after a regained majority ends once all have ([`SpeakerCore::handle_heard_back`]).
    ConfirmAlive,
    /// The seeds to join and re-join changed.
    SetSeeds(Vec<String>),
    /// Notice: the fail-back hold-down ended (`skipped`: at the first join, a cold start).
    HoldDownOver {
        /// Ended at the first join because no other member had settled.
        skipped: bool,
    },
    /// Notice: every VIP was elected again.
    Elected {
        /// What made it run.
        trigger: Trigger,
        /// Live members seen.
        live: usize,
        /// VIPs taken or released.
        changes: usize,
    },
    /// Leave the gossip cluster gracefully (while the handovers run).
    Leave,
    /// The shutdown is complete: the successors answer (or nobody will) and the addresses
    /// are off. Nothing follows.
    Stopped,
}

/// Why a VIP's address comes off the local device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressRelease {
    /// Nobody takes the VIP (or no service uses it any more).
    Released,
    /// Its successor claimed it.
    HandedOver,
    /// This node stopped.
    Stopping,
}

impl AddressRelease {
    /// The word in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::HandedOver => "handed over",
            Self::Stopping => "stop",
        }
    }
}

/// What made the election run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The first join through the seeds is over.
    FirstJoin,
    /// A membership event.
    Member(MemberEventKind),
    /// The gossip view was replaced without an event.
    View,
    /// A local health check flipped.
    Health,
    /// The fail-back hold-down ended.
    HoldDownOver,
    /// A new desired state.
    Desired,
    /// This node is stopping.
    Stop,
    /// Gossip found this node cut off.
    CutOff,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FirstJoin => f.write_str("first join done"),
            Self::Member(kind) => kind.fmt(f),
            Self::View => f.write_str("view"),
            Self::Health => f.write_str("health change"),
            Self::HoldDownOver => f.write_str("hold-down over"),
            Self::Desired => f.write_str("reload"),
            Self::Stop => f.write_str("stop"),
            Self::CutOff => f.write_str("cut off"),
        }
    }
}

/// A shutdown in progress.
#[derive(Debug)]
struct Stopping {
    /// VIPs handed over whose successor has not been heard yet.
    pending: BTreeSet<IpAddr>,
    /// When to stop waiting for them.
    deadline: Instant,
}

/// The speaker's decisions (see the [module docs](self) for the calling contract).
#[derive(Debug)]
pub struct SpeakerCore {
    node: String,
    holds_addresses: bool,
    election: Election,
    /// Health-checked services whose check does not pass here.
    failing: BTreeSet<String>,
    /// In the fail-back hold-down, and when it ends.
    holding: bool,
    hold_down_end: Option<Instant>,
    /// The first join is over.
    joined: bool,
    /// VIPs this core asked to be held on the local device and not yet released.
    held: BTreeSet<IpAddr>,
    stopping: Option<Stopping>,
    stopped: bool,
    counters: Counters,
    actions: VecDeque<Action>,
    /// Every VIP's ownership changes, with their stages.
    timeline: Timeline,
    /// Whether every other member was lost at once (then this node answers for nothing).
    isolation: isolation::Isolation,
    /// Other hosts' claims on VIPs announced here, reported once per VIP change.
    claims: claims::ClaimLog,
    /// The time of the last input that carried one (inputs without a time, such as a
    /// health flip, are dated by it).
    clock: Instant,
}

impl SpeakerCore {
    /// A speaker that has not joined yet and announces nothing. Every health-checked service
    /// starts failing here; with a hold-down, the node starts holding.
    pub fn new(settings: &StaticSettings, desired: DesiredState, now: Instant) -> Self {
        let failing = desired.health_checked();
        let mut core = Self {
            node: settings.node_name.clone(),
            holds_addresses: settings.local_address.is_some(),
            election: Election::new(
                settings.node_name.clone(),
                settings.hold_down.is_some(),
                desired,
            ),
            failing,
            holding: settings.hold_down.is_some(),
            hold_down_end: settings.hold_down.map(|d| now + d),
            joined: false,
            held: BTreeSet::new(),
            stopping: None,
            stopped: false,
            counters: Counters::default(),
            actions: VecDeque::new(),
            timeline: Timeline::new(settings.node_name.clone()),
            isolation: isolation::Isolation::new(
                isolation::rejoin_quiet(&settings.gossip.engine_config()),
                isolation::heard_back_quiet(&settings.gossip.engine_config()),
            ),
            claims: claims::ClaimLog::default(),
            clock: now,
        };
        let meta = core.meta();
        core.election.set_local_meta(meta);
        core
    }

    /// The metadata this node publishes now (also the metadata to start gossip with).
    pub fn meta(&self) -> NodeMeta {
        NodeMeta {
            labels: self.election.desired().labels.clone(),
            failing: self.failing.clone(),
            holding: self.holding,
        }
    }

    /// The desired state in force.
    pub fn desired(&self) -> &DesiredState {
        self.election.desired()
    }

    /// Whether the first join is over (`/readyz`).
    pub fn joined(&self) -> bool {
        self.joined
    }

    /// Whether this node lost every other member at once and answers for nothing until it
    /// hears the cluster again ([`isolation`]).
    pub fn isolated(&self) -> bool {
        self.isolation.silenced()
    }

    /// Whether a shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.is_some() || self.stopped
    }

    /// A new desired state (a reload, or the API's view changed). Services newly
    /// health-checked start failing; services gone drop their health state. An identical
    /// snapshot changes nothing.
    pub fn handle_desired(&mut self, now: Instant, desired: DesiredState) {
        self.tick(now);
        if self.stopping() || desired == *self.election.desired() {
            return;
        }
        let old_checked = self.election.desired().health_checked();
        let new_checked = desired.health_checked();
        let old_meta = self.meta();
        let seeds_changed = desired.seeds != self.election.desired().seeds;
        self.failing.retain(|s| new_checked.contains(s));
        self.failing
            .extend(new_checked.difference(&old_checked).cloned());
        if seeds_changed {
            self.actions
                .push_back(Action::SetSeeds(desired.seeds.clone()));
        }
        self.election.set_desired(desired);
        self.publish_meta_if_changed(&old_meta);
        self.resync(now, Trigger::Desired);
    }

    /// One update from a source: a whole snapshot ([`handle_desired`](Self::handle_desired))
    /// or the services that changed ([`handle_service_changes`](Self::handle_service_changes))
    /// and the seeds.
    pub fn handle_update(&mut self, now: Instant, update: DesiredUpdate) {
        match update {
            DesiredUpdate::Whole(desired) => self.handle_desired(now, desired),
            DesiredUpdate::Changes(ServiceChanges {
                upserts,
                removes,
                seeds,
            }) => {
                if let Some(seeds) = seeds {
                    self.handle_seeds(now, seeds);
                }
                self.handle_service_changes(now, upserts, removes);
            }
        }
    }

    /// The seeds changed (nothing is elected again).
    pub fn handle_seeds(&mut self, _now: Instant, seeds: Vec<String>) {
        if self.stopping() || seeds == self.election.desired().seeds {
            return;
        }
        self.actions.push_back(Action::SetSeeds(seeds.clone()));
        self.election.set_seeds(seeds);
    }

    /// Some services changed (`upserts`, whole, replacing those with the same id) or are
    /// gone (`removes`, by id). With per-service elections (Kubernetes mode) only these
    /// services are elected again and only their VIPs touched; grouped elections run whole.
    /// A service equal to the one in force changes nothing.
    pub fn handle_service_changes(
        &mut self,
        now: Instant,
        upserts: Vec<ServiceSpec>,
        removes: Vec<String>,
    ) {
        self.tick(now);
        if self.stopping() {
            return;
        }
        let old_meta = self.meta();
        for id in &removes {
            self.failing.remove(id);
        }
        for spec in &upserts {
            let was_checked = self
                .election
                .service(&spec.id)
                .is_some_and(|s| s.health_checked);
            if !spec.health_checked {
                self.failing.remove(&spec.id);
            } else if !was_checked {
                self.failing.insert(spec.id.clone());
            }
        }
        let changed = self.election.apply_changes(upserts, removes);
        if changed.is_empty() {
            return;
        }
        self.publish_meta_if_changed(&old_meta);
        self.resync_with(now, Trigger::Desired, |e| e.evaluate_services(&changed));
    }

    /// The gossip view after a membership event of `kind` (`None`: the view without an
    /// event). The whole view replaces the last one. A view the election reads the same
    /// (a suspicion, a refutation) elects nothing; a lost member only leaves the rankings
    /// it was in.
    pub fn handle_members(
        &mut self,
        now: Instant,
        kind: Option<MemberEventKind>,
        members: impl IntoIterator<Item = Member>,
    ) {
        self.tick(now);
        if let Some(kind) = kind {
            *self.counters.member_events.entry(kind).or_default() += 1;
        }
        let guard_held = self.election.guard_holds();
        self.election.set_members(members);
        if self.stopping() {
            return;
        }
        let trigger = kind.map_or(Trigger::View, Trigger::Member);
        let regained = self.joined && !guard_held && self.election.guard_holds();
        let mut silence_changed = self
            .isolation
            .observe(now, &self.node, self.election.members());
        if regained
            && self
                .isolation
                .majority_regained(now, self.election.live_count())
        {
            silence_changed = true;
            self.actions.push_back(Action::ConfirmAlive);
        }
        if silence_changed {
            self.election.set_isolated(self.isolation.silenced());
            self.resync(now, trigger);
            return;
        }
        match self.election.view_change() {
            ViewChange::Unchanged => {}
            ViewChange::Lost(lost) => self.resync_with(now, trigger, |e| e.evaluate_lost(&lost)),
            ViewChange::Other => self.resync(now, trigger),
        }
        if kind == Some(MemberEventKind::Join) && self.election.owns_any() {
            self.actions.push_back(Action::Reannounce);
        }
    }

    /// Gossip found this node cut off (it heard no one, or did not run, for as long as the
    /// others need to declare it dead): silent until [`handle_reconnected`]
    /// (see [`isolation`]).
    ///
    /// [`handle_reconnected`]: Self::handle_reconnected
    pub fn handle_cut_off(&mut self, now: Instant) {
        self.tick(now);
        if self.stopping() {
            return;
        }
        if self
            .isolation
            .cut_off(now, &self.node, self.election.members())
        {
            self.election.set_isolated(self.isolation.silenced());
            self.resync(now, Trigger::CutOff);
        }
    }

    /// Gossip merged the cluster's state after a cut-off: silent for the rejoin quiet, then
    /// elects from the merged view.
    pub fn handle_reconnected(&mut self, now: Instant) {
        self.tick(now);
        if self.stopping() {
            return;
        }
        if self.isolation.reconnected(now) {
            self.election.set_isolated(self.isolation.silenced());
            self.resync(now, Trigger::View);
        }
    }

    /// Every member live after the reconnection (or after [`Action::ConfirmAlive`]) holds this
    /// node alive (`vigil_gossip::Event::HeardBack`): the rejoin quiet may end sooner.
    pub fn handle_heard_back(&mut self, now: Instant) {
        self.tick(now);
        if self.stopping() {
            return;
        }
        let live = self.election.live_count();
        if self.isolation.heard_back(now, live) {
            self.election.set_isolated(self.isolation.silenced());
            self.resync(now, Trigger::View);
        }
    }

    /// A local health check flipped. Returns whether the service is health-checked here (a
    /// report for another service is ignored).
    pub fn handle_local_health(&mut self, service: &str, passing: bool) -> bool {
        let checked = self
            .election
            .service(service)
            .is_some_and(|s| s.health_checked);
        if !checked || self.stopping() {
            return checked;
        }
        let changed = if passing {
            self.failing.remove(service)
        } else {
            self.failing.insert(service.to_string())
        };
        if changed {
            self.publish_meta();
            self.resync(self.clock, Trigger::Health);
        }
        true
    }

    /// The first join through the seeds is over (answered or not), with the gossip view as
    /// it stands: elect from now on. If no other live member has settled, the hold-down is
    /// skipped (a cold start).
    pub fn handle_first_join(&mut self, now: Instant, members: impl IntoIterator<Item = Member>) {
        self.tick(now);
        if self.joined || self.stopping() {
            return;
        }
        self.joined = true;
        self.election.set_members(members);
        // Who is live at the first join counts for isolation (never isolated here: a node
        // alone at its first join has nobody to lose).
        self.isolation
            .observe(now, &self.node, self.election.members());
        if self.holding {
            let serving = self
                .election
                .members()
                .iter()
                .any(|m| m.name != self.node && m.live() && !m.meta.holding);
            if !serving {
                self.holding = false;
                self.actions
                    .push_back(Action::HoldDownOver { skipped: true });
                self.publish_meta();
            }
        }
        self.resync(now, Trigger::FirstJoin);
    }

    /// Another host claimed `vip`, which this node announces (the announcer's
    /// `Event::Claimed`): `Some(n)` when the caller should report it now, `n` claims heard for
    /// the VIP since the last report; `None` while it is the same conflict (see [`claims`]).
    pub fn note_claim(&mut self, now: Instant, vip: IpAddr, by: EthernetAddress) -> Option<u64> {
        self.tick(now);
        self.claims.claimed(now, vip, by)
    }

    /// What the announcer reported. A VIP handed over to its successor loses its address,
    /// unless it came back here meanwhile; a stopping node finishes once every handover is over.
    pub fn handle_announcer_event(&mut self, now: Instant, event: &vigil_l2::Event) {
        let vigil_l2::Event::HandedOver { vip, .. } = event else {
            return;
        };
        if let Some(stopping) = &mut self.stopping {
            stopping.pending.remove(vip);
            if stopping.pending.is_empty() {
                self.finish_stop(now);
            }
            return;
        }
        if !self.election.owns(*vip) && self.held.remove(vip) {
            self.actions.push_back(Action::ReleaseAddress {
                vip: *vip,
                why: AddressRelease::HandedOver,
            });
        }
    }

    /// Time passed: ends the hold-down, or a shutdown whose handovers were not all reported.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.tick(now);
        if let Some(stopping) = &self.stopping {
            if now >= stopping.deadline {
                self.finish_stop(now);
            }
            return;
        }
        if self.isolation.handle_timeout(now) {
            self.election.set_isolated(self.isolation.silenced());
            self.resync(now, Trigger::View);
        }
        if self.holding && self.hold_down_end.is_some_and(|end| now >= end) {
            self.holding = false;
            self.actions
                .push_back(Action::HoldDownOver { skipped: false });
            self.publish_meta();
            self.resync(now, Trigger::HoldDownOver);
        }
    }

    /// Stop: hand every owned VIP with a successor to it, silence the rest, and leave. The
    /// caller keeps feeding announcer events and timeouts until [`Action::Stopped`].
    pub fn begin_shutdown(&mut self, now: Instant) {
        if self.stopping() {
            return;
        }
        let successors = self.election.successors();
        let mut pending = BTreeSet::new();
        let announced = self.election.announced();
        for (vip, next) in &successors {
            let services = announced
                .iter()
                .filter(|(_, v)| v == vip)
                .map(|(s, _)| s.clone())
                .collect();
            let reason = match next {
                Some(_) => "stopping: answering until the successor claims it",
                None => "stopping: no node would take it",
            };
            self.actions.push_back(Action::Withdrawn {
                vip: *vip,
                services,
                reason: reason.into(),
                successor: next.clone(),
                trigger: Trigger::Stop,
            });
            if next.is_some() {
                pending.insert(*vip);
            }
        }
        self.actions.push_back(Action::HandOver {
            vips: pending.iter().copied().collect(),
            bound: HANDOVER_BOUND,
        });
        self.actions.push_back(Action::SetOwned(Vec::new()));
        self.actions.push_back(Action::Leave);
        let empty = pending.is_empty();
        self.stopping = Some(Stopping {
            pending,
            deadline: now + HANDOVER_BOUND + STOP_SLACK,
        });
        if empty {
            self.finish_stop(now);
        }
    }

    fn finish_stop(&mut self, _now: Instant) {
        if self.stopped {
            return;
        }
        self.stopping = None;
        self.stopped = true;
        self.actions.push_back(Action::SetOwned(Vec::new()));
        for vip in std::mem::take(&mut self.held) {
            self.actions.push_back(Action::ReleaseAddress {
                vip,
                why: AddressRelease::Stopping,
            });
        }
        self.actions.push_back(Action::Stopped);
    }

    /// What the runner saw of member `name` (a missed probe, a suspicion, a death...), for
    /// the ownership timeline's detection stages. Elects nothing: the view that follows
    /// comes through [`handle_members`](Self::handle_members).
    pub fn handle_member_signal(&mut self, now: Instant, name: &str, signal: MemberSignal) {
        self.tick(now);
        self.timeline.member(now, name, signal);
    }

    /// The first gratuitous ARP or unsolicited advertisement for `vip` went out (at `at`,
    /// or before): the timeline of the change that brought it here is complete.
    pub fn handle_first_announce(&mut self, at: Instant, vip: IpAddr) {
        self.timeline.announced(at, vip);
    }

    /// VIPs this node took whose first announcement the runner has not reported yet.
    pub fn awaiting_announce(&self) -> Vec<IpAddr> {
        self.timeline.awaiting_announce().collect()
    }

    /// When a change still waiting for its first announcement is reported without one
    /// ([`ANNOUNCE_BOUND`] after its decision). Kept out of
    /// [`poll_timeout`](Self::poll_timeout): the runner watches for the first frame while
    /// anything waits, and calls [`handle_announce_timeout`](Self::handle_announce_timeout)
    /// as it does; a report deadline decides nothing.
    pub fn announce_deadline(&self) -> Option<Instant> {
        self.timeline.poll_timeout()
    }

    /// Reports the changes whose first announcement did not come by [`ANNOUNCE_BOUND`].
    pub fn handle_announce_timeout(&mut self, now: Instant) {
        self.tick(now);
        self.timeline.handle_timeout(now);
    }

    /// The next complete ownership change this node reports: one per change in the cluster
    /// (the new owner reports it, or the old one when nobody takes the VIP). Poll until
    /// `None` after every input, as [`poll_action`](Self::poll_action).
    pub fn poll_ownership_change(&mut self) -> Option<OwnershipChange> {
        self.timeline.poll_change()
    }

    /// The last ownership change of every VIP this node has elected, for `/status`.
    pub fn ownership_changes(&self, now: Instant) -> Vec<StatusChange> {
        self.timeline.changes().map(|c| c.to_status(now)).collect()
    }

    /// The timeline (read-only).
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    fn tick(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
    }

    /// The next action for the caller, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.stopped {
            return None;
        }
        if let Some(stopping) = &self.stopping {
            return Some(stopping.deadline);
        }
        let hold_down = self.hold_down_end.filter(|_| self.holding);
        match (hold_down, self.isolation.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The status document.
    pub fn status(&self) -> Status {
        let quorum = self.election.quorum();
        Status {
            node: self.node.clone(),
            members: self
                .election
                .members()
                .iter()
                .map(StatusMember::from)
                .collect(),
            vips: self
                .election
                .vip_status()
                .iter()
                .map(StatusVip::from)
                .collect(),
            quorum: StatusQuorum {
                live: quorum.live,
                needed: quorum.needed,
            },
            holding: self.holding,
            health: self
                .election
                .desired()
                .health_checked()
                .into_iter()
                .map(|s| {
                    let ok = !self.failing.contains(&s);
                    (s, ok)
                })
                .collect(),
            changes: Vec::new(),
        }
    }

    /// The gossip view as last given.
    pub fn members(&self) -> &[Member] {
        self.election.members()
    }

    /// The VIPs the announcer answers for now.
    pub fn owned_vips(&self) -> Vec<Vip> {
        self.election.owned_vips()
    }

    /// (service, VIP) pairs this node announces (`metallb_speaker_announced`).
    pub fn announced(&self) -> Vec<(String, IpAddr)> {
        self.election.announced()
    }

    /// The counters since start.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    fn publish_meta_if_changed(&mut self, old: &NodeMeta) {
        if self.meta() != *old {
            self.publish_meta();
        }
    }

    /// Publishes this node's metadata, and elects with it at once: the gossip view may
    /// report this node's own entry back later, or never.
    fn publish_meta(&mut self) {
        let meta = self.meta();
        self.election.set_local_meta(meta.clone());
        self.actions.push_back(Action::PublishMeta(meta));
    }

    /// Re-elects every VIP (once the first join is over) and queues what changed, in order:
    /// notices, addresses to hold or drop, handovers, the owned set.
    fn resync(&mut self, now: Instant, trigger: Trigger) {
        self.resync_with(now, trigger, Election::evaluate);
    }

    /// As [`resync`](Self::resync), with the election run by `evaluate` (whole, or only the
    /// services or members that changed).
    fn resync_with(
        &mut self,
        now: Instant,
        trigger: Trigger,
        evaluate: impl FnOnce(&mut Election) -> Vec<Change>,
    ) {
        self.counters.evaluations += 1;
        if !self.joined {
            return;
        }
        let changes = evaluate(&mut self.election);
        let (owners, whole) = self.election.touched_owners();
        self.timeline.observe(now, cause_of(trigger), owners, whole);
        let mut handing_over = Vec::new();
        let mut addresses = Vec::new();
        for change in &changes {
            if let Change::Taken { vip, .. } | Change::Released { vip, .. } = change {
                self.claims.changed(*vip);
            }
            match change {
                Change::Taken {
                    vip,
                    services,
                    reason,
                } => {
                    self.counters.vips_taken += 1;
                    self.actions.push_back(Action::Announced {
                        vip: *vip,
                        services: services.clone(),
                        reason: reason.clone(),
                        trigger,
                    });
                    if self.holds_addresses {
                        self.held.insert(*vip);
                        addresses.push(Action::HoldAddress(*vip));
                    }
                }
                Change::Services {
                    vip,
                    added,
                    removed,
                } => {
                    // The VIP stays owned: notices only, for per-service status objects.
                    if !added.is_empty() {
                        self.actions.push_back(Action::Announced {
                            vip: *vip,
                            services: added.clone(),
                            reason: "the VIP is owned here and these services now use it".into(),
                            trigger,
                        });
                    }
                    if !removed.is_empty() {
                        self.actions.push_back(Action::Withdrawn {
                            vip: *vip,
                            services: removed.clone(),
                            reason:
                                "these services no longer use the VIP from here; it stays owned"
                                    .into(),
                            successor: None,
                            trigger,
                        });
                    }
                }
                Change::Released {
                    vip,
                    services,
                    reason,
                    successor,
                } => {
                    self.counters.vips_released += 1;
                    self.actions.push_back(Action::Withdrawn {
                        vip: *vip,
                        services: services.clone(),
                        reason: reason.clone(),
                        successor: successor.clone(),
                        trigger,
                    });
                    match successor {
                        Some(_) => handing_over.push(*vip),
                        None => {
                            if self.held.remove(vip) {
                                addresses.push(Action::ReleaseAddress {
                                    vip: *vip,
                                    why: AddressRelease::Released,
                                });
                            }
                        }
                    }
                }
            }
        }
        self.actions.extend(addresses);
        if !handing_over.is_empty() {
            self.actions.push_back(Action::HandOver {
                vips: handing_over,
                bound: HANDOVER_BOUND,
            });
        }
        match self.election.take_owned_changes() {
            OwnedChanges::All => {
                if !changes.is_empty() {
                    self.actions
                        .push_back(Action::SetOwned(self.election.owned_vips()));
                }
            }
            OwnedChanges::Some { own, disown } => {
                if !own.is_empty() || !disown.is_empty() {
                    self.actions.push_back(Action::UpdateOwned { own, disown });
                }
            }
        }
        let live = self.election.live_count();
        self.actions.push_back(Action::Elected {
            trigger,
            live,
            changes: changes.len(),
        });
    }
}

/// The timeline's cause for an election's trigger.
fn cause_of(trigger: Trigger) -> Cause {
    match trigger {
        Trigger::FirstJoin => Cause::Startup,
        Trigger::Member(MemberEventKind::Dead) => Cause::MemberDead,
        Trigger::Member(MemberEventKind::Left) => Cause::MemberLeft,
        Trigger::Member(MemberEventKind::Join) => Cause::MemberJoined,
        Trigger::Member(
            MemberEventKind::Update | MemberEventKind::Suspect | MemberEventKind::Refuted,
        ) => Cause::MemberUpdated,
        Trigger::View | Trigger::Stop | Trigger::CutOff => Cause::View,
        Trigger::Health => Cause::Health,
        Trigger::HoldDownOver => Cause::HoldDownOver,
        Trigger::Desired => Cause::Configuration,
    }
}
