//! The watch: fast detection of a lost neighbour, on top of SWIM's round-robin probes.
//!
//! SWIM probes each member once per probe cycle, so a member that vanishes waits for its turn,
//! a failed probe, and then a suspicion long enough for a lone accusation to be refuted. That
//! is a few hundred milliseconds in the `fast` profile. The watch adds, for our nearest
//! members on a ring every node orders the same way (a hash of the names: the next one after
//! us, the one before, the second after...), so that every member has `watch_neighbours`
//! watchers and, with an even number, watches its watchers back:
//!
//! - a plain memberlist ping every `watch_interval` (no piggy-backed gossip, so broadcasts
//!   keep their retransmit budget for the whole cluster), whose acks are the member's signs
//!   of life, with any packet it sends us and any newer incarnation heard of it. Two
//!   neighbours that watch each other need one ping between them, not two: the one before
//!   on the ring pings, its ack is the earlier one's sign of life and the ping the later
//!   one's. So a member before us is pinged only when no datagram of its own arrived for
//!   1.5 intervals (its ping was lost, or it stopped): each still hears the other every
//!   interval while both live, with half the datagrams and wake-ups;
//! - once it has been silent for `watch_confirm_after`, indirect pings with nacks through
//!   helpers, repeated every probe timeout, and one round before the verdict a suspicion
//!   (memberlist's own message) if enough helpers confirmed that it does not answer them;
//! - a death declared (memberlist's own `dead` message, gossiped at once) when it has been
//!   silent for `watch_dead_after`, if at least `watch_confirmations` distinct helpers
//!   nacked during this silence (capped by the helpers there are; never with none), we did
//!   not stall, and our Lifeguard health score is below its ceiling.
//!
//! Why this does not accuse live members (the full argument is in docs/ARCHITECTURE.md,
//! "Detection"): silence is counted only over time we were running (a stall of ours moves
//! the start of every silence forward by its length), it must be seen by independent helpers
//! too (a bad path between us and the member, or our own deafness, gets no nacks), and
//! `watch_dead_after` is longer than the longest pause a process gets from CPU bandwidth
//! control at its default 100 ms period, which is what the soak's starved owner suffers.

use super::members::MemberState;
use super::{Event, Membership, WireIp};
use crate::wire::{Dead, IndirectPing, Message, Suspect, Transport};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The watch's state. Empty (and idle) when `watch_neighbours` is 0.
#[derive(Debug, Default)]
pub(super) struct Watch {
    targets: Vec<Watched>,
    /// Our pings and indirect requests in flight, oldest first: (seq, target, sent).
    pending: VecDeque<(u32, Arc<str>, Instant)>,
    /// When the next watch round runs.
    next_tick: Option<Instant>,
    /// When the last round ran (to see our own stalls).
    last_tick: Option<Instant>,
    /// The live membership changed since the targets were chosen.
    pub(super) dirty: bool,
}

/// One member we watch.
#[derive(Debug)]
struct Watched {
    name: Arc<str>,
    addr: SocketAddr,
    /// Its incarnation when last seen: a newer one (a refutation) is a sign of life.
    incarnation: u32,
    /// Its last sign of life, moved forward by our own stalls.
    heard: Instant,
    /// It comes after us on the ring, so it is ours to ping every round; one before us pings
    /// us, and is pinged only when its datagrams stop.
    after_us: bool,
    /// When a datagram from its address last arrived (not moved by stalls).
    datagram_at: Option<Instant>,
    /// When the next indirect round may go out, while it is silent.
    next_round: Option<Instant>,
    /// Helpers that nacked an indirect ping about it since it went silent.
    nackers: Vec<SocketAddr>,
    /// A suspicion was raised in this silence.
    suspected: bool,
}

/// FNV-1a: a hash every node computes the same way, so that the ring is one ring.
fn ring_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl Membership {
    /// When the watch next needs to run.
    pub(super) fn watch_deadline(&self) -> Option<Instant> {
        self.watch.next_tick
    }

    /// Chooses the members to watch: the `watch_neighbours` live members nearest to us on
    /// the ring, taken alternately after and before us (+1, -1, +2, ...), so that neighbours
    /// watch each other. Keeps what we knew of members that stay.
    fn watch_choose(&mut self, now: Instant) {
        self.watch.dirty = false;
        let k = self.config.watch_neighbours;
        let mut ring: Vec<(u64, usize)> = (0..self.members.len())
            .filter(|&i| i == 0 || !self.members.list[i].state.is_gone())
            .map(|i| (ring_hash(&self.members.list[i].name), i))
            .collect();
        ring.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                self.members.list[a.1]
                    .name
                    .cmp(&self.members.list[b.1].name)
            })
        });
        let me = ring.iter().position(|&(_, i)| i == 0).unwrap_or(0);
        let n = ring.len();
        let mut chosen: Vec<(usize, bool)> = Vec::with_capacity(k);
        for step in 1..n {
            for (at, after_us) in [(me + step, true), (me + n - step, false)] {
                let i = ring[at % n].1;
                if chosen.len() < k && !chosen.iter().any(|c| c.0 == i) {
                    chosen.push((i, after_us));
                }
            }
        }
        let mut old = core::mem::take(&mut self.watch.targets);
        for (i, after_us) in chosen {
            let m = &self.members.list[i];
            let kept = old.iter().position(|w| w.name == m.name);
            let w = match kept {
                Some(j) => Watched {
                    after_us,
                    ..old.swap_remove(j)
                },
                None => Watched {
                    after_us,
                    name: m.name.clone(),
                    addr: m.addr(),
                    incarnation: m.incarnation,
                    // A new target starts as just heard: it was alive when chosen.
                    heard: now,
                    datagram_at: None,
                    next_round: None,
                    nackers: Vec::new(),
                    suspected: false,
                },
            };
            self.watch.targets.push(w);
        }
        if self.watch.targets.is_empty() {
            self.watch.next_tick = None;
            self.watch.last_tick = None;
        } else if self.watch.next_tick.is_none() {
            self.watch.next_tick = Some(now);
        }
    }

    /// Called after a member's state changed (joined, came back, died, left).
    pub(super) fn watch_members_changed(&mut self, now: Instant) {
        if self.config.watch_neighbours > 0 {
            self.watch.dirty = true;
            if self.watch.next_tick.is_none() {
                self.watch.next_tick = Some(now);
            }
        }
    }

    /// Whether the watch vouches for member `name` now: watched, and heard from within a
    /// probe interval (see `start_probe`).
    pub(super) fn watch_vouches(&self, now: Instant, name: &str) -> bool {
        let within = self.config.probe_interval;
        self.watch
            .targets
            .iter()
            .any(|w| &*w.name == name && now.saturating_duration_since(w.heard) < within)
    }

    /// A sign of life of member `name` (a probe of ours it acked).
    pub(super) fn watch_heard_member(&mut self, now: Instant, name: &str) {
        if let Some(w) = self.watch.targets.iter_mut().find(|w| &*w.name == name) {
            w.heard_at(now);
        }
    }

    /// A datagram arrived from `from`: if it is a watched member's address, it lives.
    pub(super) fn watch_heard_from(&mut self, now: Instant, from: SocketAddr) {
        if let Some(w) = self.watch.targets.iter_mut().find(|w| w.addr == from) {
            w.heard_at(now);
            w.datagram_at = Some(now);
        }
    }

    /// An ack: true if it answered one of the watch's pings (ours, or relayed by a helper).
    pub(super) fn watch_ack(&mut self, now: Instant, seq: u32) -> bool {
        let Some(j) = self.watch.pending.iter().position(|p| p.0 == seq) else {
            return false;
        };
        let (_, name, _) = self
            .watch
            .pending
            .remove(j)
            .unwrap_or_else(|| unreachable!());
        self.watch_heard_member(now, &name);
        true
    }

    /// A nack: true if it answered one of the watch's indirect pings; `from` is the helper.
    pub(super) fn watch_nack(&mut self, from: SocketAddr, seq: u32) -> bool {
        let Some(p) = self.watch.pending.iter().find(|p| p.0 == seq) else {
            return false;
        };
        let name = p.1.clone();
        if let Some(w) = self.watch.targets.iter_mut().find(|w| w.name == name)
            && w.next_round.is_some()
            && !w.nackers.contains(&from)
        {
            w.nackers.push(from);
        }
        true
    }

    /// One watch round: choose targets if the membership changed, ping each, and run the
    /// confirmation and verdict of those that went silent.
    pub(super) fn watch_tick(&mut self, now: Instant) {
        if self.config.watch_neighbours == 0 {
            self.watch.next_tick = None;
            return;
        }
        if self.watch.next_tick.is_none_or(|t| now < t) {
            return;
        }
        if self.watch.dirty {
            self.watch_choose(now);
        }
        let interval = self.config.watch_interval;
        // Our own stall: the time we were not running is nobody's silence but ours.
        if let Some(last) = self.watch.last_tick {
            let gap = now.saturating_duration_since(last);
            if gap > interval * 2 {
                self.stats.watch_stalls += 1;
                let lost = gap - interval;
                for w in &mut self.watch.targets {
                    w.heard = (w.heard + lost).min(now);
                    w.nackers.clear();
                    w.next_round = None;
                }
            }
        }
        self.watch.last_tick = Some(now);
        let horizon = self.config.watch_dead_after + self.config.probe_interval;
        while self
            .watch
            .pending
            .front()
            .is_some_and(|p| now.saturating_duration_since(p.2) > horizon)
        {
            self.watch.pending.pop_front();
        }
        for j in 0..self.watch.targets.len() {
            self.watch_one(now, j);
        }
        self.watch.next_tick = if self.watch.targets.is_empty() {
            self.watch.last_tick = None;
            None
        } else {
            Some(self.on_gossip_beat(now + interval))
        };
    }

    /// The gossip tick nearest `at`, when gossip ticks at least as often as the watch: the
    /// watch's pings then leave in the same wake-up as gossip's, not in one of their own
    /// (a wake-up costs far more than the work in it). `at` moves by at most half a gossip
    /// interval, so rounds stay between 0.5 and 1.5 watch intervals apart.
    fn on_gossip_beat(&self, at: Instant) -> Instant {
        let beat = self.config.gossip_interval.as_nanos();
        if beat == 0 || beat > self.config.watch_interval.as_nanos() {
            return at;
        }
        let anchor = self.next_gossip;
        let (from, later) = if at >= anchor {
            (at - anchor, true)
        } else {
            (anchor - at, false)
        };
        let n = (from.as_nanos() + beat / 2) / beat;
        let Ok(shift) = u64::try_from(n * beat).map(core::time::Duration::from_nanos) else {
            return at;
        };
        let snapped = if later {
            anchor.checked_add(shift)
        } else {
            anchor.checked_sub(shift)
        };
        snapped.unwrap_or(at)
    }

    fn watch_one(&mut self, now: Instant, j: usize) {
        let name = self.watch.targets[j].name.clone();
        let Some(i) = self.members.find(&name) else {
            self.watch.dirty = true;
            return;
        };
        let m = &self.members.list[i];
        if m.state.is_gone() {
            self.watch.dirty = true;
            return;
        }
        let (addr, incarnation, state) = (m.addr(), m.incarnation, m.state);
        let w = &mut self.watch.targets[j];
        w.addr = addr;
        if incarnation > w.incarnation {
            w.incarnation = incarnation;
            w.heard_at(now);
        }
        // The ping: memberlist's own, alone in its datagram; spared for a member before us
        // while its own pings arrive.
        let interval = self.config.watch_interval;
        let pinged_by_it = !w.after_us
            && w.datagram_at
                .is_some_and(|t| now.saturating_duration_since(t) < interval + interval / 2);
        if pinged_by_it {
            self.stats.watch_pings_spared += 1;
        } else {
            let seq = self.next_seq();
            let ping = Message::Ping(self.own_ping(seq, &name)).to_vec(Transport::Packet);
            self.send_raw(addr, &ping, false);
            self.stats.watch_pings += 1;
            self.watch.pending.push_back((seq, name.clone(), now));
        }

        let w = &self.watch.targets[j];
        let silence = now.saturating_duration_since(w.heard);
        if silence < self.config.watch_confirm_after {
            return;
        }
        if w.next_round.is_none() {
            self.events
                .push_back(Event::ProbeMissed { name: name.clone() });
        }
        if w.next_round.is_none_or(|t| now >= t) {
            self.watch_ask_helpers(now, j, i);
        }
        let helpers = self.watch_helpers_available(i);
        let need = self.config.watch_confirmations.min(helpers);
        let w = &mut self.watch.targets[j];
        if need == 0 || w.nackers.len() < need {
            return;
        }
        // The suspicion goes out one round before the verdict, not as soon as the helpers
        // confirm: a suspicion also starts SWIM's own timer at every member, and a member
        // starved for most of every 100 ms would then be suspected in every period, with
        // only its short runs to refute in. One round ahead, it tells the member (which
        // refutes if it lives), gets the others probing it, and names the stage.
        let suspect_at = self
            .config
            .watch_dead_after
            .saturating_sub(self.config.watch_interval);
        if !w.suspected && silence >= suspect_at {
            w.suspected = true;
            if state == MemberState::Alive {
                let s = Suspect {
                    incarnation,
                    node: name.to_string(),
                    from: self.name().to_string(),
                };
                self.on_suspect(now, &s);
            }
        }
        // Lifeguard's question, "is it them or is it me?", asked of this very silence: the
        // helpers' nacks show that we hear others on time, the stall check that we ran. The
        // engine's own score must not be at its ceiling either; it is not required to be 0,
        // because every prober of a member that really died raises it (the helpers' nacks
        // come at the end of the indirect window, a hair after the probe's verdict).
        let unhealthy = self.awareness + 1 >= self.config.awareness_max_multiplier;
        if silence >= self.config.watch_dead_after && !unhealthy && !self.leaving {
            self.stats.watch_deaths_declared += 1;
            self.stats.deaths_declared += 1;
            let d = Dead {
                incarnation,
                node: name.to_string(),
                from: self.name().to_string(),
            };
            self.on_dead(now, &d);
            // Spread the news now rather than at the next gossip tick.
            self.next_gossip = self.next_gossip.min(now);
            self.watch.dirty = true;
        }
    }

    /// Members that can confirm a silence: alive, not us, not the target, and able to nack.
    fn watch_helpers_available(&self, target: usize) -> usize {
        (1..self.members.len())
            .filter(|&h| {
                let m = &self.members.list[h];
                h != target && m.state == MemberState::Alive && m.pmax() >= 4
            })
            .count()
    }

    /// Indirect pings with nacks about watched target `j` (member `i`), through helpers.
    fn watch_ask_helpers(&mut self, now: Instant, j: usize, i: usize) {
        let target = &self.members.list[i];
        let (ip, port, node): (WireIp, u16, Arc<str>) =
            (target.ip, target.port, target.name.clone());
        let helpers =
            self.members
                .random(self.config.indirect_checks, Some(i), &mut self.rng, |m| {
                    m.state == MemberState::Alive && m.pmax() >= 4
                });
        let seq = self.next_seq();
        for h in helpers {
            let to = self.members.list[h].addr();
            let me = self.local();
            let req = Message::IndirectPing(IndirectPing {
                seq_no: seq,
                target: Some(ip.as_bytes().to_vec()),
                port,
                node: node.to_string(),
                nack: true,
                source_addr: me.ip.as_bytes().to_vec(),
                source_port: me.port,
                source_node: me.name.to_string(),
            });
            self.send_raw(to, &req.to_vec(Transport::Packet), false);
        }
        self.watch.pending.push_back((seq, node, now));
        self.watch.targets[j].next_round = Some(now + self.config.probe_timeout);
    }

    /// Whether `name` is one of the members we watch.
    pub(super) fn watching(&self, name: &str) -> bool {
        self.watch.targets.iter().any(|w| &*w.name == name)
    }

    /// The members being watched, for tests and status.
    pub fn watched(&self) -> impl Iterator<Item = &str> + '_ {
        self.watch.targets.iter().map(|w| &*w.name)
    }
}

impl Watched {
    fn heard_at(&mut self, now: Instant) {
        self.heard = self.heard.max(now);
        self.next_round = None;
        self.nackers.clear();
        self.suspected = false;
    }
}
