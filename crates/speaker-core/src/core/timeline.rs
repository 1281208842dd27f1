//! The ownership-change timeline: for every VIP whose elected owner changes, when each stage
//! of the change happened as this node saw it, why it happened, and who held and holds it.
//!
//! Stages, in order ([`Stage`]): the first answer a member missed (a probe of it that went
//! unanswered, when the gossip engine reports one), its suspicion, its death (or leave), the
//! election that moved the VIP, and the first gratuitous ARP or unsolicited neighbour
//! advertisement the new owner sent. Stages a change did not go through are absent: a
//! configuration change has a decision and an announcement only.
//!
//! Pure, like the rest of the core: every input carries its time. The core feeds it the
//! owners after each election ([`Timeline::observe`]); the runner feeds it what only it sees
//! (member signals, the first frame sent). Every node records every change it elects, so any
//! node can say who owns a VIP and what moved it last; the complete timeline (with the first
//! announcement) is the new owner's, and only the node that takes a VIP (or the one that drops
//! it to nobody) reports the change through [`Timeline::poll_change`] — one report per change
//! in the cluster, for the log line, the histogram and the Kubernetes Event.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a change waits for its first announcement before it is reported without one
/// (the announcer thread stopped, or a frame could not be sent).
pub const ANNOUNCE_BOUND: Duration = Duration::from_secs(2);

/// A missed probe that led to no suspicion within this long is a new episode, not the start
/// of the current one (probes are answered again and the engine does not say so).
const MISS_EPISODE: Duration = Duration::from_secs(5);

/// Evidence about a member older than this is not part of a change decided now.
const EVIDENCE_TTL: Duration = Duration::from_secs(60);

/// Members with evidence kept, at most (the oldest are dropped beyond).
const MAX_EVIDENCE: usize = 4096;

/// Reports waiting for the caller, at most (the oldest are dropped beyond; the caller polls
/// after every input).
const MAX_REPORTS: usize = 4096;

/// A stage of an ownership change, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// A probe of the old owner went unanswered (the gossip engine's report).
    FirstMiss,
    /// The old owner was suspected.
    Suspect,
    /// The old owner was declared dead, or left.
    Dead,
    /// The election moved the VIP.
    Decision,
    /// The new owner sent its first gratuitous ARP or unsolicited neighbour advertisement.
    FirstAnnounce,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Self; 5] = [
        Self::FirstMiss,
        Self::Suspect,
        Self::Dead,
        Self::Decision,
        Self::FirstAnnounce,
    ];

    /// The name in logs, metric labels and `/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FirstMiss => "first_miss",
            Self::Suspect => "suspect",
            Self::Dead => "dead",
            Self::Decision => "decision",
            Self::FirstAnnounce => "first_announce",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a VIP's owner changed: what made the election that moved it run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A member was declared dead.
    MemberDead,
    /// A member left gracefully.
    MemberLeft,
    /// A member joined (or came back).
    MemberJoined,
    /// A member's metadata changed (its labels, failing health checks, or its hold-down).
    MemberUpdated,
    /// The desired state changed (a reload, or the Kubernetes objects).
    Configuration,
    /// A local health check flipped.
    Health,
    /// This node's fail-back hold-down ended.
    HoldDownOver,
    /// This node's first election after its first join.
    Startup,
    /// The gossip view changed without a membership event.
    View,
}

impl Cause {
    /// Every cause, in order.
    pub const ALL: [Self; 9] = [
        Self::MemberDead,
        Self::MemberLeft,
        Self::MemberJoined,
        Self::MemberUpdated,
        Self::Configuration,
        Self::Health,
        Self::HoldDownOver,
        Self::Startup,
        Self::View,
    ];

    /// The name in logs, metric labels and `/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MemberDead => "member_dead",
            Self::MemberLeft => "member_left",
            Self::MemberJoined => "member_joined",
            Self::MemberUpdated => "member_updated",
            Self::Configuration => "configuration",
            Self::Health => "health",
            Self::HoldDownOver => "hold_down_over",
            Self::Startup => "startup",
            Self::View => "view",
        }
    }

    /// Whether a membership event is the cause (the change then names the member).
    pub fn is_member(self) -> bool {
        matches!(
            self,
            Self::MemberDead | Self::MemberLeft | Self::MemberJoined | Self::MemberUpdated
        )
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the runner saw of one member, for the detection stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberSignal {
    /// A probe of it went unanswered.
    ProbeMissed,
    /// It became suspect.
    Suspect,
    /// It was declared dead.
    Dead,
    /// It left gracefully.
    Left,
    /// It answered, refuted a suspicion, joined or came back: the episode is over.
    Alive,
}

/// One VIP's owner after an election, as [`Timeline::observe`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VipOwner {
    /// The VIP.
    pub vip: IpAddr,
    /// The services that use it (empty: no service does any more).
    pub services: Vec<String>,
    /// The elected owner, if any node may answer.
    pub owner: Option<String>,
    /// The candidate after the owner.
    pub next: Option<String>,
}

/// One change of a VIP's owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnershipChange {
    /// The VIP.
    pub vip: IpAddr,
    /// Its services.
    pub services: Vec<String>,
    /// The owner before, as this node had elected it (`None`: nobody, or this node had not
    /// elected yet).
    pub previous: Option<String>,
    /// The owner now (`None`: nobody answers).
    pub owner: Option<String>,
    /// The candidate after the new owner, when the change was decided.
    pub next: Option<String>,
    /// What made the election run.
    pub cause: Cause,
    /// The member whose event made it run, for a member cause.
    pub member: Option<String>,
    /// Whether the new owner is this node.
    pub here: bool,
    /// The stages seen, in [`Stage`] order, each with its time.
    pub stages: Vec<(Stage, Instant)>,
}

impl OwnershipChange {
    /// When `stage` happened, if it did.
    pub fn at(&self, stage: Stage) -> Option<Instant> {
        self.stages
            .iter()
            .find(|(s, _)| *s == stage)
            .map(|(_, t)| *t)
    }

    /// When the decision was taken.
    pub fn decided(&self) -> Instant {
        self.at(Stage::Decision)
            .expect("every change has a decision")
    }

    /// The time of the first stage seen: the origin of [`offsets`](Self::offsets).
    pub fn origin(&self) -> Instant {
        self.stages
            .iter()
            .map(|(_, t)| *t)
            .min()
            .unwrap_or_else(|| self.decided())
    }

    /// Each stage seen, as the time since the first.
    pub fn offsets(&self) -> Vec<(Stage, Duration)> {
        let origin = self.origin();
        self.stages
            .iter()
            .map(|(s, t)| (*s, t.saturating_duration_since(origin)))
            .collect()
    }

    /// The change in one sentence, for people (logs, Events, `vigil status`).
    pub fn describe(&self) -> String {
        let cause = match (&self.member, self.cause) {
            (Some(m), Cause::MemberDead) => format!("{m} was declared dead"),
            (Some(m), Cause::MemberLeft) => format!("{m} left"),
            (Some(m), Cause::MemberJoined) => format!("{m} joined"),
            (Some(m), Cause::MemberUpdated) => format!("{m} changed its metadata"),
            (_, Cause::MemberDead) => "a member was declared dead".into(),
            (_, Cause::MemberLeft) => "a member left".into(),
            (_, Cause::MemberJoined) => "a member joined".into(),
            (_, Cause::MemberUpdated) => "a member changed its metadata".into(),
            (_, Cause::Configuration) => "the configuration changed".into(),
            (_, Cause::Health) => "a health check flipped".into(),
            (_, Cause::HoldDownOver) => "a fail-back hold-down ended".into(),
            (_, Cause::Startup) => "the first election after start".into(),
            (_, Cause::View) => "the gossip view changed".into(),
        };
        let moved = match (&self.previous, &self.owner) {
            (Some(p), Some(o)) => format!("{o} took over from {p}"),
            (None, Some(o)) => format!("{o} took it"),
            (Some(p), None) => format!("nobody answers any more ({p} did)"),
            (None, None) => "nobody answers".into(),
        };
        format!("{moved}: {cause}")
    }

    /// The `/status` form, `now` being the caller's present.
    pub fn to_status(&self, now: Instant) -> StatusChange {
        StatusChange {
            vip: self.vip.to_string(),
            services: self.services.clone(),
            owner: self.owner.clone(),
            previous: self.previous.clone(),
            next: self.next.clone(),
            cause: self.cause,
            member: self.member.clone(),
            description: self.describe(),
            age_ms: millis(now.saturating_duration_since(self.decided())),
            since: None,
            stages: self
                .offsets()
                .into_iter()
                .map(|(stage, after)| StatusStage {
                    stage,
                    after_ms: millis(after),
                })
                .collect(),
        }
    }
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// The last change of a VIP's owner in `/status` (what `vigil status <ip>` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusChange {
    /// The VIP.
    pub vip: String,
    /// Its services.
    pub services: Vec<String>,
    /// The owner since the change.
    pub owner: Option<String>,
    /// The owner before.
    pub previous: Option<String>,
    /// The candidate after the owner when the change was decided.
    pub next: Option<String>,
    /// What made the election run.
    pub cause: Cause,
    /// The member whose event made it run.
    pub member: Option<String>,
    /// The change in one sentence.
    pub description: String,
    /// Milliseconds since the decision, when the status was built.
    pub age_ms: f64,
    /// The decision's wall-clock time (RFC 3339), filled in by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// The stages this node saw, each as milliseconds after the first.
    pub stages: Vec<StatusStage>,
}

/// One stage of a [`StatusChange`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusStage {
    /// The stage.
    pub stage: Stage,
    /// Milliseconds after the change's first stage.
    pub after_ms: f64,
}

/// What was seen of one member's current episode.
#[derive(Debug, Clone, Copy, Default)]
struct Evidence {
    first_miss: Option<Instant>,
    suspect: Option<Instant>,
    dead: Option<Instant>,
    /// The last signal, for expiry.
    last: Option<Instant>,
}

impl Evidence {
    fn stages(&self, now: Instant) -> Vec<(Stage, Instant)> {
        if self
            .last
            .is_none_or(|t| now.saturating_duration_since(t) > EVIDENCE_TTL)
        {
            return Vec::new();
        }
        [
            (Stage::FirstMiss, self.first_miss),
            (Stage::Suspect, self.suspect),
            (Stage::Dead, self.dead),
        ]
        .into_iter()
        .filter_map(|(s, t)| t.map(|t| (s, t)))
        .collect()
    }
}

/// The timeline of every VIP's ownership changes, as this node elects them.
#[derive(Debug)]
pub struct Timeline {
    node: String,
    evidence: BTreeMap<String, Evidence>,
    /// The member named by the last membership signal (the subject of a member cause).
    last_member: Option<String>,
    /// The last change per VIP.
    last: BTreeMap<IpAddr, OwnershipChange>,
    /// Changes to this node waiting for the first announcement, with their deadline.
    awaiting: BTreeMap<IpAddr, Instant>,
    reports: VecDeque<OwnershipChange>,
    /// Reports dropped because the caller did not poll.
    dropped: u64,
}

impl Timeline {
    /// An empty timeline for node `node`.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            evidence: BTreeMap::new(),
            last_member: None,
            last: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            reports: VecDeque::new(),
            dropped: 0,
        }
    }

    /// What the runner saw of member `name` at `now`.
    pub fn member(&mut self, now: Instant, name: &str, signal: MemberSignal) {
        if name == self.node {
            return;
        }
        if signal != MemberSignal::ProbeMissed {
            self.last_member = Some(name.to_string());
        }
        if signal == MemberSignal::Alive {
            self.evidence.remove(name);
            return;
        }
        if !self.evidence.contains_key(name) && self.evidence.len() >= MAX_EVIDENCE {
            let oldest = self
                .evidence
                .iter()
                .min_by_key(|(_, e)| e.last)
                .map(|(n, _)| n.clone());
            if let Some(oldest) = oldest {
                self.evidence.remove(&oldest);
            }
        }
        let e = self.evidence.entry(name.to_string()).or_default();
        if e.last
            .is_some_and(|t| now.saturating_duration_since(t) > EVIDENCE_TTL)
        {
            *e = Evidence::default();
        }
        match signal {
            MemberSignal::ProbeMissed => {
                let stale = e.suspect.is_none()
                    && e.dead.is_none()
                    && e.first_miss
                        .is_some_and(|t| now.saturating_duration_since(t) > MISS_EPISODE);
                if e.first_miss.is_none() || stale {
                    e.first_miss = Some(now);
                }
            }
            MemberSignal::Suspect => {
                e.suspect.get_or_insert(now);
            }
            MemberSignal::Dead | MemberSignal::Left => {
                e.dead.get_or_insert(now);
            }
            MemberSignal::Alive => unreachable!("handled above"),
        }
        e.last = Some(now);
    }

    /// The owners after an election at `now`, caused by `cause`: the VIPs it may have moved
    /// (`whole`: every desired VIP, so records of any other VIP are forgotten). A VIP whose
    /// owner differs from its last record is a change.
    pub fn observe(
        &mut self,
        now: Instant,
        cause: Cause,
        owners: impl IntoIterator<Item = VipOwner>,
        whole: bool,
    ) {
        let mut seen = Vec::new();
        for o in owners {
            if whole {
                seen.push(o.vip);
            }
            if o.services.is_empty() {
                self.forget(o.vip);
                continue;
            }
            let previous = match self.last.get(&o.vip) {
                Some(last) if last.owner == o.owner => continue,
                Some(last) => last.owner.clone(),
                None if o.owner.is_none() => continue,
                None => None,
            };
            self.record(now, cause, o, previous);
        }
        if whole {
            seen.sort_unstable();
            let gone: Vec<IpAddr> = self
                .last
                .keys()
                .filter(|v| seen.binary_search(v).is_err())
                .copied()
                .collect();
            for vip in gone {
                self.forget(vip);
            }
        }
    }

    fn record(&mut self, now: Instant, cause: Cause, o: VipOwner, previous: Option<String>) {
        let member = cause
            .is_member()
            .then(|| self.last_member.clone())
            .flatten();
        // The detection stages belong to the member whose loss moved the VIP: the old owner.
        let mut stages = match cause {
            Cause::MemberDead | Cause::MemberLeft => previous
                .as_deref()
                .or(member.as_deref())
                .and_then(|m| self.evidence.get(m))
                .map(|e| e.stages(now))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        stages.push((Stage::Decision, now));
        let here = o.owner.as_deref() == Some(self.node.as_str());
        let dropped_here = o.owner.is_none() && previous.as_deref() == Some(self.node.as_str());
        let change = OwnershipChange {
            vip: o.vip,
            services: o.services,
            previous,
            owner: o.owner,
            next: o.next,
            cause,
            member,
            here,
            stages,
        };
        self.awaiting.remove(&change.vip);
        if here {
            self.awaiting.insert(change.vip, now + ANNOUNCE_BOUND);
        } else if dropped_here {
            self.report(change.clone());
        }
        self.last.insert(change.vip, change);
    }

    fn report(&mut self, change: OwnershipChange) {
        if self.reports.len() >= MAX_REPORTS {
            self.reports.pop_front();
            self.dropped += 1;
        }
        self.reports.push_back(change);
    }

    /// The first gratuitous frame for `vip` went out at `at` (the runner saw it at or after):
    /// a change to this node waiting for it is complete.
    pub fn announced(&mut self, at: Instant, vip: IpAddr) {
        if self.awaiting.remove(&vip).is_none() {
            return;
        }
        let Some(change) = self.last.get_mut(&vip) else {
            return;
        };
        let at = at.max(change.decided());
        change.stages.push((Stage::FirstAnnounce, at));
        let change = change.clone();
        self.report(change);
    }

    /// The VIPs this node took whose first announcement has not been seen yet.
    pub fn awaiting_announce(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.awaiting.keys().copied()
    }

    /// The next deadline: a change that waits for its announcement too long.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.awaiting.values().min().copied()
    }

    /// Reports the changes whose announcement did not come within [`ANNOUNCE_BOUND`].
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<IpAddr> = self
            .awaiting
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(vip, _)| *vip)
            .collect();
        for vip in due {
            self.awaiting.remove(&vip);
            if let Some(change) = self.last.get(&vip) {
                self.report(change.clone());
            }
        }
    }

    /// The next complete change this node reports (it took the VIP, or dropped it to nobody).
    pub fn poll_change(&mut self) -> Option<OwnershipChange> {
        self.reports.pop_front()
    }

    /// Reports dropped because they were not polled.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The last change of `vip`'s owner.
    pub fn last_change(&self, vip: IpAddr) -> Option<&OwnershipChange> {
        self.last.get(&vip)
    }

    /// The last change of every VIP with a record, by VIP.
    pub fn changes(&self) -> impl Iterator<Item = &OwnershipChange> {
        self.last.values()
    }

    /// `vip` is no longer used: its record goes.
    pub fn forget(&mut self, vip: IpAddr) {
        self.last.remove(&vip);
        self.awaiting.remove(&vip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn owner(vip: &str, owner: Option<&str>, next: Option<&str>) -> VipOwner {
        VipOwner {
            vip: ip(vip),
            services: vec!["default/web".into()],
            owner: owner.map(str::to_string),
            next: next.map(str::to_string),
        }
    }

    const VIP: &str = "198.18.0.100";

    /// A host loss as the next candidate sees it: every stage, in order, once.
    #[test]
    fn a_host_loss_has_every_stage_in_order_and_one_report() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut t = Timeline::new("node-b");
        t.observe(
            ms(0),
            Cause::Startup,
            [owner(VIP, Some("node-a"), Some("node-b"))],
            true,
        );
        assert_eq!(t.poll_change(), None, "another node's VIP: no report here");
        t.member(ms(100), "node-a", MemberSignal::ProbeMissed);
        t.member(ms(120), "node-a", MemberSignal::ProbeMissed);
        t.member(ms(150), "node-a", MemberSignal::Suspect);
        t.member(ms(400), "node-a", MemberSignal::Dead);
        t.observe(
            ms(400),
            Cause::MemberDead,
            [owner(VIP, Some("node-b"), Some("node-c"))],
            false,
        );
        assert_eq!(t.awaiting_announce().collect::<Vec<_>>(), vec![ip(VIP)]);
        assert_eq!(t.poll_timeout(), Some(ms(400) + ANNOUNCE_BOUND));
        assert_eq!(t.poll_change(), None, "waits for the first announcement");
        t.announced(ms(402), ip(VIP));
        t.announced(ms(403), ip(VIP));
        let change = t.poll_change().expect("one report");
        assert_eq!(t.poll_change(), None, "exactly one report per change");
        let stages: Vec<Stage> = change.stages.iter().map(|(s, _)| *s).collect();
        assert_eq!(stages, Stage::ALL.to_vec());
        let times: Vec<Instant> = change.stages.iter().map(|(_, t)| *t).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert_eq!(change.at(Stage::FirstMiss), Some(ms(100)), "the first miss");
        assert_eq!(
            change.offsets()[4],
            (Stage::FirstAnnounce, Duration::from_millis(302))
        );
        assert_eq!(
            (change.previous.as_deref(), change.owner.as_deref()),
            (Some("node-a"), Some("node-b"))
        );
        assert_eq!(change.next.as_deref(), Some("node-c"));
        assert_eq!(
            (change.cause, change.member.as_deref()),
            (Cause::MemberDead, Some("node-a"))
        );
        assert!(change.here);
        assert_eq!(
            change.describe(),
            "node-b took over from node-a: node-a was declared dead"
        );
        let status = change.to_status(ms(1400));
        assert_eq!(status.age_ms, 1000.0);
        assert_eq!(status.stages.len(), 5);
        assert_eq!(status.stages[2].stage, Stage::Dead);
        assert_eq!(status.stages[2].after_ms, 300.0);
        assert_eq!(t.last_change(ip(VIP)), Some(&change));
    }

    /// A third node records the same change for its status and reports nothing.
    #[test]
    fn a_bystander_records_the_change_without_reporting_it() {
        let t0 = Instant::now();
        let mut t = Timeline::new("node-c");
        t.observe(t0, Cause::Startup, [owner(VIP, Some("node-a"), None)], true);
        t.member(t0, "node-a", MemberSignal::Suspect);
        t.member(t0, "node-a", MemberSignal::Dead);
        t.observe(
            t0,
            Cause::MemberDead,
            [owner(VIP, Some("node-b"), None)],
            false,
        );
        assert_eq!(t.poll_change(), None);
        assert_eq!(t.awaiting_announce().count(), 0);
        let last = t.last_change(ip(VIP)).unwrap();
        assert_eq!(last.previous.as_deref(), Some("node-a"));
        assert!(!last.here);
        assert_eq!(last.stages.len(), 3, "suspect, dead, decision");
    }

    /// A change with no detection (configuration) has a decision and an announcement; a
    /// missing announcement is reported at the bound; an unchanged owner is no change.
    #[test]
    fn other_causes_and_the_announcement_bound() {
        let t0 = Instant::now();
        let mut t = Timeline::new("node-a");
        t.observe(t0, Cause::Startup, [owner(VIP, Some("node-a"), None)], true);
        t.announced(t0, ip(VIP));
        let start = t.poll_change().unwrap();
        assert_eq!(
            (start.cause, start.previous.clone()),
            (Cause::Startup, None)
        );
        assert_eq!(start.stages.len(), 2);
        t.observe(
            t0,
            Cause::View,
            [owner(VIP, Some("node-a"), Some("x"))],
            true,
        );
        assert_eq!(t.poll_change(), None, "same owner: no change");

        // Moved away by a reload, then back after a hold-down; no frame seen this time.
        let t1 = t0 + Duration::from_secs(1);
        t.observe(
            t1,
            Cause::Configuration,
            [owner(VIP, Some("node-b"), None)],
            true,
        );
        assert_eq!(t.poll_change(), None, "the new owner reports it");
        t.observe(
            t1,
            Cause::HoldDownOver,
            [owner(VIP, Some("node-a"), None)],
            true,
        );
        t.handle_timeout(t1 + ANNOUNCE_BOUND);
        let back = t.poll_change().unwrap();
        assert_eq!(back.cause, Cause::HoldDownOver);
        assert_eq!(back.previous.as_deref(), Some("node-b"));
        assert_eq!(back.stages, vec![(Stage::Decision, t1)]);
        assert_eq!(t.poll_timeout(), None);

        // Dropped to nobody (the guard): this node reports it; a VIP no service uses is
        // forgotten, and so is one a whole election leaves out.
        t.observe(t1, Cause::MemberDead, [owner(VIP, None, None)], false);
        let none = t.poll_change().unwrap();
        assert_eq!((none.owner.clone(), none.here), (None, false));
        t.observe(
            t1,
            Cause::Configuration,
            [owner("198.18.0.101", Some("node-a"), None)],
            true,
        );
        assert!(t.last_change(ip(VIP)).is_none());
        let mut gone = owner("198.18.0.101", None, None);
        gone.services.clear();
        t.observe(t1, Cause::Configuration, [gone], false);
        assert_eq!(t.changes().count(), 0);
        assert_eq!(t.awaiting_announce().count(), 0);
    }

    /// A refuted suspicion or a stale miss is not part of a later change.
    #[test]
    fn evidence_ends_with_the_episode() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut t = Timeline::new("node-b");
        t.observe(t0, Cause::Startup, [owner(VIP, Some("node-a"), None)], true);
        t.member(s(1), "node-a", MemberSignal::Suspect);
        t.member(s(2), "node-a", MemberSignal::Alive);
        t.member(s(10), "node-a", MemberSignal::ProbeMissed);
        t.member(s(20), "node-a", MemberSignal::ProbeMissed);
        t.member(s(21), "node-a", MemberSignal::Left);
        t.observe(
            s(21),
            Cause::MemberLeft,
            [owner(VIP, Some("node-b"), None)],
            false,
        );
        t.announced(s(21), ip(VIP));
        let c = t.poll_change().unwrap();
        assert_eq!(
            c.stages,
            vec![
                (Stage::FirstMiss, s(20)),
                (Stage::Dead, s(21)),
                (Stage::Decision, s(21)),
                (Stage::FirstAnnounce, s(21)),
            ]
        );
    }
}
