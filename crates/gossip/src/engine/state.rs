//! The alive / suspect / dead rules: what each piece of news does to a member (admission,
//! address conflicts, refutation, suspicion and its expiry, death and leaving), our own
//! incarnation, and the commands that change our own entry (`leave`, `set_meta`,
//! `add_member`).

use super::members::Member;
use super::suspicion::{self, Suspicion};
use super::timers::Deadline;
use super::{Event, MemberInfo, MemberState, Membership, WireIp};
use crate::config::ConfigError;
use crate::wire::{self, Alive, Dead, Message, Suspect, Transport};
use core::time::Duration;
use std::cmp::Reverse;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Largest incarnation jump we believe in an accusation or an alive about a known node. A node
/// bumps its incarnation once per refutation, so real jumps are small; a forged message
/// carrying `u32::MAX` would otherwise make the accused unable to refute ever again
/// (hashicorp/memberlist#358).
const MAX_INCARNATION_JUMP: u32 = 1 << 16;

/// Go compares metadata with `bytes.Equal`, for which nil and empty are the same: Go sends
/// nil for the empty metadata we advertise, and must not look like a change.
fn same_meta(a: Option<&[u8]>, b: Option<&[u8]>) -> bool {
    a.unwrap_or_default() == b.unwrap_or_default()
}

impl Membership {
    /// Leaves gracefully: announces our departure and reports [`Event::LeaveComplete`] once
    /// the announcement has gone out `retransmit` times, or after `timeout`.
    pub fn leave(&mut self, now: Instant, timeout: Duration) {
        if self.leaving {
            return;
        }
        self.leaving = true;
        let name = self.local().name.clone();
        let dead = Dead {
            incarnation: self.incarnation,
            node: name.to_string(),
            from: name.to_string(),
        };
        let anyone_alive = self
            .members
            .list
            .iter()
            .skip(1)
            .any(|m| m.state == MemberState::Alive);
        self.members.list[0].state = MemberState::Left;
        self.members.list[0].state_change = self.members.stamp(now);
        let bytes = Message::Dead(dead).to_vec(Transport::Packet);
        // Straight to every member as well as by gossip: a member that has not heard of the
        // leave when we stop would find our port closed (a probe's proof of absence) and
        // declare us dead, and its verdict would reach some before our leave does. Gossip
        // alone left that window open in about one leave in twenty (the simulator's `leave`
        // scenario over 200 seeds, 20 nodes, `fast`); one datagram each closes it but for
        // loss, which the gossiped copy still covers.
        let to: Vec<SocketAddr> = self
            .members
            .list
            .iter()
            .skip(1)
            .filter(|m| !m.state.is_gone())
            .map(|m| m.addr())
            .collect();
        for addr in to {
            self.send_raw(addr, &bytes, true);
        }
        self.broadcasts.push(Some(&name), bytes, anyone_alive);
        if anyone_alive {
            self.leave_deadline = Some(now + timeout);
        } else {
            self.events.push_back(Event::LeaveComplete);
        }
    }

    /// Changes our metadata and tells everyone (a new incarnation).
    pub fn set_meta(&mut self, now: Instant, meta: Vec<u8>) -> Result<(), ConfigError> {
        if meta.len() > wire::META_MAX_SIZE {
            return Err(ConfigError {
                field: "meta",
                problem: format!("{} bytes; at most 512 are allowed", meta.len()),
            });
        }
        self.members.list[0].meta = Some(Box::new(meta.into()));
        self.bump_incarnation(now, self.incarnation);
        Ok(())
    }

    /// Adds a member as if its alive message had arrived (static configuration, simulators),
    /// except that it is not queued for gossip: whoever configures the nodes tells each one,
    /// and re-gossiping n static entries from each of n nodes would be an n-squared storm.
    ///
    /// A statically configured table describes a cluster that has been running, whose
    /// members' push/pulls are spread over the interval scaled to its size; so while our first
    /// push/pull is still ahead, it is re-placed at the same random fraction of the interval
    /// scaled to the table's new size (with up to 32 members the scale is 1 and nothing
    /// moves). Otherwise n statically configured nodes would all push/pull within the first
    /// unscaled interval, each with the full table, which no running cluster does.
    pub fn add_member(&mut self, now: Instant, alive: &Alive) {
        self.on_alive(now, alive, None, false);
        self.replace_first_push_pull();
    }

    /// [`add_member`](Self::add_member) for many members at once, with room made for them
    /// first (a simulator bootstraps thousands of engines with thousands of members each).
    pub fn add_members<'a>(&mut self, now: Instant, alives: impl IntoIterator<Item = &'a Alive>) {
        let alives = alives.into_iter();
        self.members.reserve(alives.size_hint().0);
        for a in alives {
            self.on_alive(now, a, None, false);
        }
        self.replace_first_push_pull();
    }

    pub(super) fn own_alive(&self) -> Alive {
        let me = self.local();
        Alive {
            incarnation: self.incarnation,
            node: me.name.to_string(),
            addr: Some(me.ip.as_bytes().to_vec()),
            port: me.port,
            meta: me.meta.as_ref().map(|m| m.to_vec()),
            vsn: Some(me.vsn.to_vec()),
        }
    }

    /// Announces ourselves with an incarnation above `accused` (refutation, meta change,
    /// rejoin). Saturates rather than wrapping to 0 (hashicorp/memberlist#358).
    pub(super) fn bump_incarnation(&mut self, now: Instant, accused: u32) {
        let next = self
            .incarnation
            .saturating_add(1)
            .max(accused.saturating_add(1));
        self.incarnation = next;
        let stamp = self.members.stamp(now);
        let me = &mut self.members.list[0];
        me.incarnation = next;
        if !self.leaving {
            me.state = MemberState::Alive;
            me.state_change = stamp;
        }
        let alive = Message::Alive(self.own_alive());
        let name = self.local().name.clone();
        self.queue_broadcast(&name, &alive);
    }

    pub(super) fn refute(&mut self, now: Instant, accused: u32) {
        if self.leaving {
            return;
        }
        self.stats.refutations += 1;
        self.apply_awareness(1);
        self.bump_incarnation(now, accused);
    }

    /// Someone still accuses an incarnation of ours that we already refuted: our refutation
    /// has not reached everyone (its copies were lost), and whoever holds us suspect will
    /// declare us dead when its timer runs out. Go ignores such stale accusations, so one
    /// lost refutation per peer is fatal in a small cluster, where each peer gets one or two
    /// copies. Announce our current incarnation again, unless that announcement is still
    /// queued (so a burst of stale accusations costs one broadcast, not one each).
    fn reannounce(&mut self) {
        if self.leaving {
            return;
        }
        let name = self.local().name.clone();
        if self.broadcasts.contains(&name) {
            return;
        }
        self.stats.reannouncements += 1;
        let alive = Message::Alive(self.own_alive());
        self.queue_broadcast(&name, &alive);
    }

    fn plausible(&mut self, known: u32, claimed: u32) -> bool {
        if claimed > known.saturating_add(MAX_INCARNATION_JUMP) {
            self.stats.implausible_incarnations += 1;
            return false;
        }
        true
    }

    /// An alive about anyone, ourselves included: from a datagram (`from` is its sender), a
    /// push/pull, or static configuration. `gossip`: whether news is queued for dissemination
    /// (not for static configuration).
    pub(super) fn on_alive(
        &mut self,
        now: Instant,
        a: &Alive,
        from: Option<SocketAddr>,
        gossip: bool,
    ) {
        let Some((ip, vsn)) = self.alive_fields(a) else {
            return;
        };
        if a.node == self.name() {
            self.on_alive_about_us(now, a, vsn);
            return;
        }
        let i = match self.members.find(&a.node) {
            Some(i) => i,
            None => self.admit_new(now, a, ip, vsn),
        };
        let m = &self.members.list[i];
        if m.ip != ip || m.port != a.port {
            if self.address_conflict(now, i, ip, a.port) {
                return;
            }
        } else if a.incarnation <= m.incarnation {
            if a.incarnation == m.incarnation && self.held_blind(&a.node) {
                // Alive where we declared it dead blind: the cluster never heard our verdict.
                self.revive_blind(now, &a.node);
                return;
            }
            self.nudge_restarted(now, i, a, from);
            self.stats.ignored += 1;
            return;
        }
        let known = self.members.list[i].incarnation;
        if known > 0 && !self.plausible(known, a.incarnation) {
            return;
        }
        self.apply_alive(now, i, a, ip, vsn, gossip);
    }

    /// The advertised address and the protocol versions of an alive, or `None` (counted) when
    /// it has no usable address, no name, or an impossible version range.
    fn alive_fields(&mut self, a: &Alive) -> Option<(WireIp, [u8; 6])> {
        let Some(ip) = a.addr.as_deref().and_then(WireIp::from_wire) else {
            self.stats.malformed += 1;
            return None;
        };
        if a.node.is_empty() {
            self.stats.malformed += 1;
            return None;
        }
        let mut vsn = [0u8; 6];
        if let Some(v) = &a.vsn {
            if v.len() >= 3 && (v[0] == 0 || v[1] == 0 || v[0] > v[1]) {
                self.stats.ignored += 1;
                return None;
            }
            let n = v.len().min(6);
            vsn[..n].copy_from_slice(&v[..n]);
        }
        Some((ip, vsn))
    }

    /// A node we never heard of: enters the table as dead at incarnation 0, so that the rules
    /// that follow revive it like any dead member (a join event, its alive gossiped on).
    /// Returns its index.
    fn admit_new(&mut self, now: Instant, a: &Alive, ip: WireIp, vsn: [u8; 6]) -> usize {
        let name = match &self.names {
            Some(cache) => cache.intern(&a.node),
            None => a.node.as_str().into(),
        };
        let m = Member {
            name,
            ip,
            port: a.port,
            meta: None,
            vsn,
            incarnation: 0,
            state: MemberState::Dead,
            state_change: self.members.stamp(now),
            suspicion: None,
        };
        self.members.insert(m, &mut self.rng)
    }

    /// An alive gives member `i`'s name another address. The newcomer may take the name over
    /// only from a member that left, or one dead for at least `dead_node_reclaim_time` (when
    /// set); otherwise it is refused and reported as [`Event::Conflict`]. Whether it was
    /// refused.
    fn address_conflict(&mut self, now: Instant, i: usize, ip: WireIp, port: u16) -> bool {
        let m = &self.members.list[i];
        let reclaim = m.state == MemberState::Left
            || (m.state == MemberState::Dead
                && !self.config.dead_node_reclaim_time.is_zero()
                && self.members.since_change(now, m) >= self.config.dead_node_reclaim_time);
        if reclaim {
            return false;
        }
        let existing = MemberInfo::from(m);
        let other_addr = SocketAddr::new(ip.ip(), port);
        self.events.push_back(Event::Conflict {
            existing,
            other_addr,
        });
        true
    }

    /// Member `i`, which we hold dead, spoke (`from` is set) with an incarnation no newer than
    /// the one we declared dead: it restarted and does not know. Tell it directly so it
    /// refutes, instead of staying dead in our view forever (hashicorp/memberlist#311); at
    /// most once per probe interval per member.
    fn nudge_restarted(&mut self, now: Instant, i: usize, a: &Alive, from: Option<SocketAddr>) {
        let m = &self.members.list[i];
        let nudge_due = || {
            self.nudged
                .get(&*m.name)
                .is_none_or(|&t| now.saturating_duration_since(t) >= self.config.probe_interval)
        };
        if m.state == MemberState::Dead && from.is_some() && nudge_due() {
            let nudge = Message::Suspect(Suspect {
                incarnation: m.incarnation,
                node: a.node.clone(),
                from: self.name().to_string(),
            });
            let to = m.addr();
            if self.nudged.len() > 4096 {
                // Bounded: forget old nudges rather than grow without limit.
                self.nudged.clear();
            }
            self.nudged.insert(m.name.clone(), now);
            self.send_msg(to, nudge.to_vec(Transport::Packet));
        }
    }

    /// Member `i` takes the alive: its incarnation, address, metadata and versions, any
    /// suspicion cleared, the alive queued for gossip (or, from static configuration, whatever
    /// was queued about it dropped), and the event its previous state calls for: a join from
    /// dead or left, a refutation from suspect, an update when the metadata changed.
    fn apply_alive(
        &mut self,
        now: Instant,
        i: usize,
        a: &Alive,
        ip: WireIp,
        vsn: [u8; 6],
        gossip: bool,
    ) {
        // Go compares metadata with bytes.Equal, where nil and empty are the same; keeping
        // empty as None also spares an allocation per member.
        let meta: Option<Arc<[u8]>> = a.meta.as_deref().filter(|m| !m.is_empty()).map(Into::into);
        let m = &self.members.list[i];
        let old_state = m.state;
        let meta_changed = !same_meta(m.meta_bytes(), meta.as_deref());
        if gossip {
            self.queue_broadcast(&a.node, &Message::Alive(a.clone()));
        } else {
            // Whatever we had queued about it is stale now, as if replaced by this alive.
            self.broadcasts.remove(&a.node);
        }
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.suspicion = None;
        m.incarnation = a.incarnation;
        m.ip = ip;
        m.port = a.port;
        m.meta = meta.map(Box::new);
        m.vsn = vsn;
        if m.state != MemberState::Alive {
            m.state = MemberState::Alive;
            m.state_change = stamp;
        }
        let info = MemberInfo::from(&*m);
        match old_state {
            MemberState::Dead | MemberState::Left => {
                self.events.push_back(Event::Join(info));
                self.watch_members_changed(now);
                self.blind_member_back(now, &a.node);
            }
            MemberState::Suspect => {
                self.events.push_back(Event::Refuted(info.clone()));
                if meta_changed {
                    self.events.push_back(Event::Update(info));
                }
            }
            MemberState::Alive if meta_changed => self.events.push_back(Event::Update(info)),
            MemberState::Alive => {}
        }
    }

    fn on_alive_about_us(&mut self, now: Instant, a: &Alive, vsn: [u8; 6]) {
        if self.leaving || a.incarnation < self.incarnation {
            return;
        }
        let me = self.local();
        let same = a.incarnation == self.incarnation
            && same_meta(a.meta.as_deref(), me.meta_bytes())
            && vsn == me.vsn;
        if same {
            return;
        }
        if !self.plausible(self.incarnation, a.incarnation) {
            return;
        }
        self.refute(now, a.incarnation);
    }

    pub(super) fn on_suspect(&mut self, now: Instant, s: &Suspect) {
        let Some(i) = self.members.find(&s.node) else {
            self.stats.ignored += 1;
            return;
        };
        let m = &self.members.list[i];
        if s.incarnation < m.incarnation {
            if i == 0 {
                self.reannounce();
            }
            self.stats.ignored += 1;
            return;
        }
        if !self.plausible(m.incarnation, s.incarnation) {
            return;
        }
        if i == 0 {
            self.refute(now, s.incarnation);
            return;
        }
        if let Some(susp) = self.members.list[i].suspicion.as_deref_mut() {
            if susp.confirm(&s.from) {
                let (deadline, episode) = (susp.deadline(), susp.episode);
                self.deadlines
                    .push(Reverse((deadline, Deadline::Suspicion { episode })));
                self.queue_broadcast(&s.node, &Message::Suspect(s.clone()));
            }
            return;
        }
        if self.members.list[i].state != MemberState::Alive {
            return;
        }
        if s.from == self.name() {
            self.stats.suspicions_raised += 1;
        } else if self.config.probe_on_suspicion {
            let name = self.members.list[i].name.clone();
            if self.probe.as_ref().is_none_or(|p| p.target != name) {
                self.urgent_probes.push_back(name);
                if self.probe.is_none() {
                    self.next_probe = self.next_probe.min(now);
                }
            }
        }
        self.queue_broadcast(&s.node, &Message::Suspect(s.clone()));
        let n = self.members.len();
        let mut k = self.config.suspicion_mult.saturating_sub(2);
        if n.saturating_sub(2) < k {
            k = 0;
        }
        let min = suspicion::min_timeout(self.config.suspicion_mult, n, self.config.probe_interval);
        let max = if self.config.lifeguard {
            min * self.config.suspicion_max_timeout_mult as u32
        } else {
            min
        };
        if !self.config.lifeguard {
            k = 0;
        }
        self.next_episode += 1;
        let episode = self.next_episode;
        let susp = Suspicion::new(now, &s.from, k, min, max, episode);
        let deadline = susp.deadline();
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.incarnation = s.incarnation;
        m.state = MemberState::Suspect;
        m.state_change = stamp;
        m.suspicion = Some(Box::new(susp));
        let info = MemberInfo::from(&*m);
        self.suspect_episodes.insert(episode, info.name.clone());
        self.deadlines
            .push(Reverse((deadline, Deadline::Suspicion { episode })));
        self.events.push_back(Event::Suspect {
            member: info,
            from: s.from.as_str().into(),
        });
    }

    pub(super) fn suspicion_expired(&mut self, now: Instant, episode: u64, fired: Instant) {
        let Some(name) = self.suspect_episodes.get(&episode).cloned() else {
            return;
        };
        let Some(i) = self.members.find(&name) else {
            self.suspect_episodes.remove(&episode);
            return;
        };
        let m = &self.members.list[i];
        let Some(s) = m.suspicion.as_deref().filter(|s| s.episode == episode) else {
            self.suspect_episodes.remove(&episode);
            return;
        };
        if s.deadline() > fired {
            // A stale heap entry; the current deadline has its own entry.
            return;
        }
        let blind = self.suspicion_was_blind(s.started);
        let outlived_our_silence = self.suspicion_outlived_our_silence(s.started);
        self.suspect_episodes.remove(&episode);
        if outlived_our_silence {
            self.stats.blind_suspicions_dropped += 1;
            let stamp = self.members.stamp(now);
            let m = &mut self.members.list[i];
            m.suspicion = None;
            m.state = MemberState::Alive;
            m.state_change = stamp;
            let info = MemberInfo::from(&*m);
            self.events.push_back(Event::Refuted(info));
            return;
        }
        self.stats.deaths_declared += 1;
        let d = Dead {
            incarnation: m.incarnation,
            node: name.to_string(),
            from: self.name().to_string(),
        };
        if blind {
            self.declare_dead_blind(now, d);
        } else {
            self.on_dead(now, &d);
        }
    }

    pub(super) fn on_dead(&mut self, now: Instant, d: &Dead) {
        let Some(i) = self.members.find(&d.node) else {
            self.stats.ignored += 1;
            return;
        };
        let m = &self.members.list[i];
        if d.incarnation < m.incarnation {
            if i == 0 && !self.leaving {
                self.reannounce();
            }
            self.stats.ignored += 1;
            return;
        }
        let known = m.incarnation;
        if !self.plausible(known, d.incarnation) {
            return;
        }
        if i == 0 {
            if !self.leaving {
                self.refute(now, d.incarnation);
            } else {
                self.queue_broadcast(&d.node, &Message::Dead(d.clone()));
            }
            return;
        }
        if self.members.list[i].state.is_gone() {
            // Someone else holds it dead too: our verdict, if blind, is no longer ours alone.
            self.forget_blind(&d.node);
            return;
        }
        self.queue_broadcast(&d.node, &Message::Dead(d.clone()));
        self.apply_dead(now, d);
    }

    /// Member `d.node` is dead (or left, when it said so itself): the state change and its
    /// event, without gossip. Returns its name, or `None` if we do not know it.
    pub(super) fn apply_dead(&mut self, now: Instant, d: &Dead) -> Option<Arc<str>> {
        let i = self.members.find(&d.node)?;
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.suspicion = None;
        m.incarnation = d.incarnation;
        m.state = if d.from == d.node {
            MemberState::Left
        } else {
            MemberState::Dead
        };
        m.state_change = stamp;
        let name = m.name.clone();
        let info = MemberInfo::from(&*m);
        self.watch_members_changed(now);
        if info.state == MemberState::Dead {
            self.note_dead_for_redial(now, name.clone());
        }
        self.events.push_back(if info.state == MemberState::Left {
            Event::Left(info)
        } else {
            Event::Dead(info)
        });
        Some(name)
    }

    /// Member `i`, dead to us only, is alive again at the incarnation it had: the state change
    /// and its join event, without gossip (nobody else held it dead).
    pub(super) fn revive(&mut self, now: Instant, i: usize) {
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.state = MemberState::Alive;
        m.state_change = stamp;
        let info = MemberInfo::from(&*m);
        self.events.push_back(Event::Join(info));
        self.watch_members_changed(now);
    }
}
