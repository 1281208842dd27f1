//! Verdicts reached blind: deaths we declared while we heard from nobody, kept to ourselves.
//!
//! Why: a host whose link is cut (or whose partition holds no one else) suspects every member
//! it probes and declares each dead when the suspicion expires, since no one can refute. In
//! memberlist those deaths are gossiped, and when the link comes back the host gossips them
//! to the very members it declared dead and to everyone else: a member that hears "X is dead"
//! with X's current incarnation takes it as fact until X's refutation reaches it, so for a
//! gossip round or more the survivors hold each other dead and more than one of them answers
//! for the same address (issue 23: two or three MACs per ARP question after a heal).
//!
//! A death we declared while we heard from no other node for the whole suspicion says more
//! about us than about the member, so (with [`Config::hold_blind_verdicts`]):
//! - it is applied locally (the member is dead to us, and the application hears of it) but
//!   never gossiped, and whatever we had queued about the member (our suspicion of it) is
//!   dropped; it is left out of the state we send in push/pulls;
//! - the member is pinged every watch interval (every probe interval without the watch) for
//!   as long as we hold it dead this way (up to `gossip_to_the_dead_time`), and an ack, or an
//!   alive no older than the one we held, revives it at its own incarnation: the cluster never
//!   heard our verdict, so nobody has to refute it;
//! - on the first such revival we push/pull with that member at once, so that we learn what
//!   happened while we were away (our own death, which we then refute) within one round trip
//!   instead of at the next periodic exchange.
//!
//! Members declared dead the ordinary way (heard from others, gossiped) are pinged too: every
//! probe interval for the first [`EAGER_REDIAL_ROUNDS`] after the death, then every
//! [`REDIAL_ROUNDS`], until `gossip_to_the_dead_time`. A split whose sides each heard their
//! own (a firewall between racks) leaves each side holding the other dead, and nothing in
//! memberlist talks to the dead until a rejoin (seconds) while both sides answer for the same
//! addresses. An ack from such a member starts a push/pull with it: it hears we hold it dead
//! and refutes, we hear what it holds of us and refute, and both sides merge within a round
//! trip and a gossip round. Short splits (a firewall reload, a switch port flapping) are the
//! common ones and a client notices each of their milliseconds, so a young death is pinged as
//! often as a live member is probed; an old one is most likely a real death, and its pings
//! only cost traffic.
//!
//! A false "blind" (we were connected but heard nothing for the whole suspicion, e.g. a
//! two-member cluster) only means the verdict spreads by the others' own probes instead of
//! ours: no one else was there to hear it anyway.
//!
//! Cut off (with [`Config::deaf_after`]): hearing from no other node for that long, or not
//! running for that long (a frozen or starved process; the others may have declared us dead
//! and taken over), raises [`Event::CutOff`] once, so the speaker goes silent. The first
//! datagram from a member afterwards starts a push/pull with it; when one merges (ours or
//! theirs), or after [`RECONNECT_BOUND`] of hearing the others without one, [`Event::Reconnected`]
//! ends the episode: by then we know whether we were declared dead, and have refuted it.
//! Then (with `hold_blind_verdicts`) our alive state goes to every live member with a ping
//! (again, every half gossip interval within a probe interval, to those that have not
//! acknowledged), and [`Event::HeardBack`] says when all have: from then on they hold us alive.
//!
//! [`Config::hold_blind_verdicts`]: crate::Config::hold_blind_verdicts
//! [`Config::deaf_after`]: crate::Config::deaf_after

use super::timers::advance;
use super::{Event, MemberState, Membership};
use crate::wire::{Dead, Message, Transport};
use core::time::Duration;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// How long we may hear the others after being cut off without any push/pull merging before
/// the episode ends anyway: a cluster whose TCP is blocked must not keep us silent for ever.
pub(super) const RECONNECT_BOUND: Duration = Duration::from_secs(1);

/// Probe intervals between pings to members declared dead the ordinary way, once the death
/// is older than [`EAGER_REDIAL_ROUNDS`] probe intervals.
pub(super) const REDIAL_ROUNDS: u32 = 4;

/// For this many probe intervals after a member was declared dead the ordinary way (5 s in
/// the fast profile), it is pinged every probe interval: a split healed in that time merges
/// within a probe interval and a round trip.
pub(super) const EAGER_REDIAL_ROUNDS: u32 = 100;

/// A member declared dead the ordinary way, pinged now and then while its death is recent.
#[derive(Debug)]
struct Redial {
    name: Arc<str>,
    died: Instant,
    /// When it is pinged next.
    due: Instant,
    ping_seq: Option<u32>,
}

/// An episode of being cut off.
#[derive(Debug)]
struct CutOff {
    since: Instant,
    /// When we first heard a member again.
    hearing_since: Option<Instant>,
    /// The member our catch-up push/pull is with, while it runs.
    catching_up: Option<SocketAddr>,
}

/// A member we declared dead blind.
#[derive(Debug)]
struct BlindDeath {
    name: Arc<str>,
    declared: Instant,
    /// The sequence number of the last reconnect ping sent to it.
    ping_seq: Option<u32>,
}

/// What the engine keeps about blind verdicts. Small when unused (a simulator holds thousands
/// of engines).
#[derive(Debug, Default)]
pub(super) struct Blind {
    /// When a datagram or stream from another node last arrived.
    heard_at: Option<Instant>,
    /// The last silence longer than `deaf_after` that has ended: from the last datagram
    /// before it to the first after it.
    last_silence: Option<(Instant, Instant)>,
    deaths: Vec<BlindDeath>,
    next_ping: Option<Instant>,
    /// Whether a revival has already started its catch-up push/pull since the last blind
    /// death: one exchange is enough to learn the cluster's state.
    caught_up: bool,
    /// Members declared dead recently, pinged every probe interval, later every
    /// [`REDIAL_ROUNDS`].
    redials: Vec<Redial>,
    next_redial: Option<Instant>,
    /// When the engine last ran (an input or a timeout), to see our own stalls.
    last_turn: Option<Instant>,
    cut_off: Option<CutOff>,
    /// After a reconnection: our alive state sent to every live member with a ping, the
    /// pings not yet acknowledged, until when they count.
    heard_back: Option<HeardBack>,
}

/// The acknowledgements awaited after a reconnection ([`Event::HeardBack`]).
#[derive(Debug)]
struct HeardBack {
    /// The pings not yet acknowledged: sequence number and the member's name.
    pending: Vec<(u32, Arc<str>)>,
    asked: usize,
    until: Instant,
    /// When the unacknowledged are asked again (see [`heard_back_retry`]).
    next_retry: Option<Instant>,
}

/// How often, after a reconnection, the members that have not yet acknowledged our alive
/// state are sent it again, with the same ping, until the window closes: a heal is seldom
/// one event (a firewall reload on five hosts is five `nft` runs over 25-40 ms), so the
/// first pings can reach a member whose side of the cut is still up, and one lost datagram
/// would otherwise cost the speaker its whole rejoin quiet (issue 23: 116-125 ms from the
/// heal to the rightful owner's announcement instead of about 40). Half a gossip interval.
fn heard_back_retry(config: &crate::Config) -> Duration {
    config.gossip_interval / 2
}

impl Membership {
    /// A valid datagram (from `from`) or stream from another node arrived. If we were cut off,
    /// catch up with the cluster: a push/pull with the sender if it is a member, else with
    /// any live member.
    pub(super) fn heard_from_others(&mut self, now: Instant, from: Option<SocketAddr>) {
        if let Some(t) = self.blind.heard_at
            && !self.config.deaf_after.is_zero()
            && now.saturating_duration_since(t) > self.config.deaf_after
        {
            self.blind.last_silence = Some((t, now));
        }
        self.blind.heard_at = Some(now);
        let Some(cut) = &mut self.blind.cut_off else {
            return;
        };
        cut.hearing_since.get_or_insert(now);
        if cut.catching_up.is_some() {
            return;
        }
        let member_addr = |m: &super::Member| m.addr();
        let to = from
            .filter(|a| self.members.list[1..].iter().any(|m| member_addr(m) == *a))
            .or_else(|| {
                self.members.list[1..]
                    .iter()
                    .find(|m| !m.state.is_gone())
                    .map(member_addr)
            });
        if let Some(to) = to {
            if let Some(cut) = &mut self.blind.cut_off {
                cut.catching_up = Some(to);
            }
            self.start_push_pull(now, to, false);
        }
    }

    /// Every input and timeout starts here: a gap since the last one longer than
    /// `deaf_after` is a stall of ours (we were frozen or starved) long enough for the others
    /// to have declared us dead.
    pub(super) fn note_turn(&mut self, now: Instant) {
        let gap = self
            .blind
            .last_turn
            .map(|t| now.saturating_duration_since(t));
        self.blind.last_turn = Some(now);
        if let Some(gap) = gap
            && self.checks_cut_off()
            && gap > self.config.deaf_after
        {
            self.enter_cut_off(now, gap);
        }
    }

    /// The periodic check: deaf for `deaf_after`, or hearing for [`RECONNECT_BOUND`] after a
    /// cut-off with no push/pull merged.
    pub(super) fn cut_off_tick(&mut self, now: Instant) {
        let deaf_after = self.config.deaf_after;
        if !self.checks_cut_off() {
            return;
        }
        if let Some(t) = self.blind.heard_at
            && now.saturating_duration_since(t) > deaf_after
        {
            self.enter_cut_off(now, now.saturating_duration_since(t));
        }
        if let Some(cut) = &self.blind.cut_off
            && cut
                .hearing_since
                .is_some_and(|t| now.saturating_duration_since(t) >= RECONNECT_BOUND)
        {
            self.reconnected(now);
        }
    }

    /// Cut-offs are looked for only with the watch on: its pings are what make a connected
    /// node hear someone every `watch_interval`, far inside `deaf_after`.
    fn checks_cut_off(&self) -> bool {
        !self.config.deaf_after.is_zero() && self.config.watch_neighbours > 0
    }

    fn enter_cut_off(&mut self, now: Instant, silent_for: Duration) {
        if self.blind.cut_off.is_some() || self.leaving {
            return;
        }
        // Alone (or with only the dead), there is nobody to be cut off from.
        if !self.members.list[1..].iter().any(|m| !m.state.is_gone()) {
            return;
        }
        self.stats.cut_offs += 1;
        self.blind.cut_off = Some(CutOff {
            since: now,
            hearing_since: None,
            catching_up: None,
        });
        self.events.push_back(Event::CutOff { silent_for });
    }

    /// A push/pull merged the cluster's state (`ok`), or ours with `addr` failed.
    pub(super) fn push_pull_ended(&mut self, now: Instant, addr: Option<SocketAddr>, ok: bool) {
        if ok {
            self.reconnected(now);
        } else if let Some(cut) = &mut self.blind.cut_off
            && cut.catching_up.is_some()
            && cut.catching_up == addr
        {
            // Try again with whoever we hear next.
            cut.catching_up = None;
        }
    }

    fn reconnected(&mut self, now: Instant) {
        if let Some(cut) = self.blind.cut_off.take() {
            self.events.push_back(Event::Reconnected {
                after: now.saturating_duration_since(cut.since),
            });
            if self.config.hold_blind_verdicts {
                self.tell_everyone_alive(now);
            }
        }
    }

    /// Asks every live member to confirm that it holds us alive: a new incarnation (so that
    /// our alive overrides whatever death or suspicion of us a member still holds, whether or
    /// not we have heard of it), sent with a ping to each; [`Event::HeardBack`] when all have
    /// acknowledged within a probe interval. For an application that stays silent after a
    /// split until the other side hears it (the speaker's majority guard); the reconnection
    /// after a cut-off does the same by itself.
    pub fn confirm_alive(&mut self, now: Instant) {
        if self.leaving {
            return;
        }
        self.bump_incarnation(now, self.incarnation);
        self.tell_everyone_alive(now);
    }

    /// Sends our alive state (as it is now, after any refutation the catch-up made) with a
    /// ping to every live member. Why: the application stays silent after a reconnection
    /// until the others hold us alive again (else they defend what they took over from us
    /// against our claims); gossip would reach them within a few rounds, but only their acks
    /// say when they have. Each ack comes after its datagram's alive was applied (a compound
    /// message is handled in order), so when all are in, [`Event::HeardBack`].
    fn tell_everyone_alive(&mut self, now: Instant) {
        let live: Vec<(usize, Arc<str>)> = (1..self.members.len())
            .filter(|&i| !self.members.list[i].state.is_gone())
            .map(|i| (i, self.members.list[i].name.clone()))
            .collect();
        if live.is_empty() {
            return;
        }
        let alive = Message::Alive(self.own_alive()).to_vec(Transport::Packet);
        let mut pending = Vec::with_capacity(live.len());
        for (i, name) in live {
            let seq = self.next_seq();
            self.send_alive_with_ping(i, seq, &alive);
            pending.push((seq, name));
        }
        let retry = heard_back_retry(&self.config);
        self.blind.heard_back = Some(HeardBack {
            asked: pending.len(),
            pending,
            until: now + self.config.probe_interval,
            next_retry: (!retry.is_zero()).then(|| now + retry),
        });
    }

    /// One datagram to member `i`: our encoded alive state and a ping numbered `seq`, so that
    /// the ack says the alive state arrived.
    fn send_alive_with_ping(&mut self, i: usize, seq: u32, alive: &[u8]) {
        let m = &self.members.list[i];
        let addr = m.addr();
        let ping = Message::Ping(self.own_ping(seq, &m.name)).to_vec(Transport::Packet);
        self.send_compound(addr, vec![alive.to_vec(), ping], Some(i));
        self.stats.heard_back_pings += 1;
    }

    /// When the unacknowledged alive states go out again, if they do.
    pub(super) fn heard_back_deadline(&self) -> Option<Instant> {
        self.blind.heard_back.as_ref().and_then(|h| h.next_retry)
    }

    /// Sends our alive state and the same ping again to every member that has not yet
    /// acknowledged it, while the window is open (see [`heard_back_retry`]).
    pub(super) fn heard_back_tick(&mut self, now: Instant) {
        let Some(h) = &self.blind.heard_back else {
            return;
        };
        let Some(due) = h.next_retry.filter(|due| now >= *due) else {
            return;
        };
        let until = h.until;
        if now >= until {
            if let Some(h) = &mut self.blind.heard_back {
                h.next_retry = None;
            }
            return;
        }
        let pending = h.pending.clone();
        let alive = Message::Alive(self.own_alive()).to_vec(Transport::Packet);
        for (seq, name) in &pending {
            if let Some(i) = self.members.find(name) {
                self.send_alive_with_ping(i, *seq, &alive);
            }
        }
        let next = advance(due, heard_back_retry(&self.config), now);
        if let Some(h) = &mut self.blind.heard_back {
            h.next_retry = (next < until).then_some(next);
        }
    }

    /// An ack arrived; if it answers one of [`tell_everyone_alive`](Self::tell_everyone_alive)'s
    /// pings in time, count it. Returns whether the ack was ours.
    pub(super) fn heard_back_ack(&mut self, now: Instant, seq: u32) -> bool {
        let Some(h) = &mut self.blind.heard_back else {
            return false;
        };
        let Some(k) = h.pending.iter().position(|(s, _)| *s == seq) else {
            return false;
        };
        if now > h.until {
            self.blind.heard_back = None;
            return true;
        }
        h.pending.swap_remove(k);
        if h.pending.is_empty() {
            let members = h.asked;
            self.blind.heard_back = None;
            self.events.push_back(Event::HeardBack { members });
        }
        true
    }

    /// Whether we are cut off now (between [`Event::CutOff`] and [`Event::Reconnected`]).
    pub fn cut_off(&self) -> bool {
        self.blind.cut_off.is_some()
    }

    /// When the cut-off checks need to run.
    pub(super) fn cut_off_deadline(&self) -> Option<Instant> {
        if !self.checks_cut_off() {
            return None;
        }
        match &self.blind.cut_off {
            Some(cut) => cut.hearing_since.map(|t| t + RECONNECT_BOUND),
            None => self
                .blind
                .heard_at
                .map(|t| t + self.config.deaf_after + Duration::from_millis(1)),
        }
    }

    /// Whether a suspicion that began at `started` and expires now was held blind: we heard
    /// from no one since it began.
    pub(super) fn suspicion_was_blind(&self, started: Instant) -> bool {
        self.config.hold_blind_verdicts && self.blind.heard_at.is_none_or(|t| t < started)
    }

    /// Whether a suspicion that began at `started` and expires now was raised during a
    /// silence of ours that has since ended: raised blind, it says nothing of the member, and
    /// since then we hear the cluster again (whose push/pull holds the member alive at the
    /// same incarnation, which memberlist's rules cannot take back from a suspicion). Declared
    /// dead, it would reach the others as a fresh death of a live member.
    pub(super) fn suspicion_outlived_our_silence(&self, started: Instant) -> bool {
        self.config.hold_blind_verdicts
            && self
                .blind
                .last_silence
                .is_some_and(|(from, to)| started >= from && started <= to)
    }

    /// Member `i` is dead to us, by a verdict we keep to ourselves.
    pub(super) fn declare_dead_blind(&mut self, now: Instant, d: Dead) {
        self.stats.blind_deaths += 1;
        // Our own suspicion of it, queued but perhaps not yet sent, is as blind as the death.
        self.broadcasts.remove(&d.node);
        let Some(name) = self.apply_dead(now, &d) else {
            return;
        };
        self.blind.deaths.retain(|b| b.name != name);
        self.blind.deaths.push(BlindDeath {
            name,
            declared: now,
            ping_seq: None,
        });
        self.blind.caught_up = false;
        if self.blind.next_ping.is_none() {
            self.blind.next_ping = Some(now + self.blind_ping_interval());
        }
    }

    /// How often the members held dead blind are pinged: as often as the watch pings a
    /// neighbour when it runs (the first ack after a heal starts the catch-up, and with it
    /// the end of our silence), else every probe interval.
    fn blind_ping_interval(&self) -> Duration {
        if self.config.watch_neighbours > 0 && !self.config.watch_interval.is_zero() {
            self.config.watch_interval.min(self.config.probe_interval)
        } else {
            self.config.probe_interval
        }
    }

    /// Whether we hold `name` dead by a blind verdict.
    pub(super) fn held_blind(&self, name: &str) -> bool {
        self.blind.deaths.iter().any(|b| &*b.name == name)
    }

    /// Someone else declared `name` dead (or it left, or it revived): our verdict is no longer
    /// ours alone.
    pub(super) fn forget_blind(&mut self, name: &str) {
        if !self.blind.deaths.is_empty() {
            self.blind.deaths.retain(|b| &*b.name != name);
            if self.blind.deaths.is_empty() {
                self.blind.next_ping = None;
            }
        }
    }

    /// When the next reconnect pings are due.
    pub(super) fn blind_deadline(&self) -> Option<Instant> {
        self.blind.next_ping
    }

    /// Pings every member held dead blind (each with a sequence number of its own), and lets
    /// go of those held longer than `gossip_to_the_dead_time`: they are ordinary dead members
    /// from then on.
    pub(super) fn blind_tick(&mut self, now: Instant) {
        let Some(due) = self.blind.next_ping else {
            return;
        };
        if now < due {
            return;
        }
        let keep_for = self.config.gossip_to_the_dead_time;
        self.blind
            .deaths
            .retain(|b| now.saturating_duration_since(b.declared) < keep_for);
        for k in 0..self.blind.deaths.len() {
            let name = self.blind.deaths[k].name.clone();
            if let Some(seq) = self.ping_the_dead(&name) {
                self.blind.deaths[k].ping_seq = Some(seq);
                self.stats.blind_pings += 1;
            }
        }
        self.blind.next_ping = if self.blind.deaths.is_empty() {
            None
        } else {
            Some(advance(due, self.blind_ping_interval(), now))
        };
    }

    /// Pings member `name`, dead to us, at its last address (the probe rotation skips the
    /// dead): the sequence number to match its ack with, or `None` if it is no longer known.
    fn ping_the_dead(&mut self, name: &str) -> Option<u32> {
        let to = self.members.list[self.members.find(name)?].addr();
        let seq = self.next_seq();
        let ping = Message::Ping(self.own_ping(seq, name));
        self.send_msg(to, ping.to_vec(Transport::Packet));
        Some(seq)
    }

    /// Member `name` was declared dead (not left): ping it now and then while its death is
    /// recent (see the module docs).
    pub(super) fn note_dead_for_redial(&mut self, now: Instant, name: Arc<str>) {
        if !self.config.hold_blind_verdicts {
            return;
        }
        self.blind.redials.retain(|r| r.name != name);
        let due = now + self.config.probe_interval;
        self.blind.redials.push(Redial {
            name,
            died: now,
            due,
            ping_seq: None,
        });
        self.blind.next_redial = Some(self.blind.next_redial.map_or(due, |t| t.min(due)));
    }

    /// How long after its last ping a member dead since `died` is pinged again.
    fn redial_gap(&self, died: Instant, now: Instant) -> Duration {
        let probe = self.config.probe_interval;
        if now.saturating_duration_since(died) < probe * EAGER_REDIAL_ROUNDS {
            probe
        } else {
            probe * REDIAL_ROUNDS
        }
    }

    /// When the next pings to the recently dead are due.
    pub(super) fn redial_deadline(&self) -> Option<Instant> {
        self.blind.next_redial
    }

    /// Pings each recently dead member that is due, still dead and not held blind (those have
    /// their own pings); forgets those dead longer than `gossip_to_the_dead_time`.
    pub(super) fn redial_tick(&mut self, now: Instant) {
        if self.blind.next_redial.is_none_or(|due| now < due) {
            return;
        }
        let keep_for = self.config.gossip_to_the_dead_time;
        let members = &self.members;
        self.blind.redials.retain(|r| {
            now.saturating_duration_since(r.died) < keep_for
                && members
                    .find(&r.name)
                    .is_some_and(|i| members.list[i].state == MemberState::Dead)
        });
        for k in 0..self.blind.redials.len() {
            let Redial { due, died, .. } = self.blind.redials[k];
            if now < due {
                continue;
            }
            let gap = self.redial_gap(died, now);
            self.blind.redials[k].due = advance(due, gap, now);
            let name = self.blind.redials[k].name.clone();
            if self.held_blind(&name) {
                continue;
            }
            if let Some(seq) = self.ping_the_dead(&name) {
                self.blind.redials[k].ping_seq = Some(seq);
                self.stats.dead_pings += 1;
            }
        }
        self.blind.next_redial = self.blind.redials.iter().map(|r| r.due).min();
    }

    /// An ack arrived; if it answers a ping to a recently dead member, that member lives
    /// though we (and those who told us) hold it dead: push/pull with it so that both sides
    /// merge. Returns whether the ack was ours.
    pub(super) fn redial_ack(&mut self, now: Instant, seq: u32) -> bool {
        let Some(k) = self
            .blind
            .redials
            .iter()
            .position(|r| r.ping_seq == Some(seq))
        else {
            return false;
        };
        self.blind.redials[k].ping_seq = None;
        let name = self.blind.redials[k].name.clone();
        if let Some(i) = self.members.find(&name) {
            self.stats.dead_answered += 1;
            let to = self.members.list[i].addr();
            self.start_push_pull(now, to, false);
        }
        true
    }

    /// An ack arrived; if it answers a reconnect ping, the member lives: revive it. Returns
    /// whether the ack was ours.
    pub(super) fn blind_ack(&mut self, now: Instant, seq: u32) -> bool {
        let Some(k) = self
            .blind
            .deaths
            .iter()
            .position(|b| b.ping_seq == Some(seq))
        else {
            return false;
        };
        let name = self.blind.deaths[k].name.clone();
        self.revive_blind(now, &name);
        true
    }

    /// Member `name`, held dead by our blind verdict, lives (it answered, or someone holds it
    /// alive at the incarnation we held dead): it takes its old state back.
    pub(super) fn revive_blind(&mut self, now: Instant, name: &str) {
        let Some(i) = self.members.find(name) else {
            self.forget_blind(name);
            return;
        };
        if self.members.list[i].state != MemberState::Dead {
            self.forget_blind(name);
            return;
        }
        self.revive(now, i);
        self.blind_member_back(now, name);
    }

    /// Member `name` is alive again (revived here, or a newer alive of it arrived): if we held
    /// it dead blind, that is over, and the first such return catches up with the cluster by a
    /// push/pull with it, so that we learn at once whether we were declared dead meanwhile
    /// (and refute) instead of at the next periodic exchange.
    pub(super) fn blind_member_back(&mut self, now: Instant, name: &str) {
        if !self.held_blind(name) {
            return;
        }
        self.forget_blind(name);
        self.stats.blind_revivals += 1;
        let catching_up = self
            .blind
            .cut_off
            .as_ref()
            .is_some_and(|c| c.catching_up.is_some());
        if !self.blind.caught_up
            && !catching_up
            && let Some(i) = self.members.find(name)
        {
            self.blind.caught_up = true;
            let addr = self.members.list[i].addr();
            self.start_push_pull(now, addr, false);
        }
    }
}
