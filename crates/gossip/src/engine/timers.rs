//! The clock: the periodic ticks (probe, gossip, push/pull), the running probe's ack window
//! and verdict, the heap of suspicion and relay deadlines, and what
//! [`handle_timeout`](Membership::handle_timeout) runs when each comes due.

use super::push_pull::push_pull_scale;
use super::{Event, Membership};
use core::time::Duration;
use std::cmp::Reverse;
use std::time::Instant;

/// An entry of the deadline heap. Entries are never removed early: a stale one (a suspicion
/// refuted or re-timed, a relay answered) is recognised and skipped when it comes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Deadline {
    Suspicion { episode: u64 },
    Relay { seq: u32 },
}

/// The first tick of a `period`-spaced schedule that lies after `now`.
pub(super) fn advance(mut at: Instant, period: Duration, now: Instant) -> Instant {
    if period.is_zero() {
        return now + Duration::from_secs(365 * 24 * 3600);
    }
    while at <= now {
        at += period;
    }
    at
}

impl Membership {
    /// Moves the probe schedule past a probe that ended (or a turn that passed) now: to its
    /// first tick after now. An urgent probe asked for meanwhile starts now instead: it
    /// waited only because one probe runs at a time (a watched member's port refused our
    /// ping while a probe of another member awaited its ack).
    pub(super) fn schedule_next_probe(&mut self, now: Instant) {
        if !self.urgent_probes.is_empty() {
            self.next_probe = now;
            return;
        }
        self.next_probe = advance(self.next_probe, self.config.probe_interval, now);
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.next_push_pull;
        // A gossip tick with nothing queued sends nothing, so it is not worth a wake-up: while
        // the queues are empty `next_gossip` falls behind (advanced by whatever else wakes
        // us), and a broadcast queued meanwhile goes out at once (as after a proven absence,
        // see `probe.rs`) or at the tick already due. The watch keeps its own deadline.
        if self.has_broadcasts() {
            t = t.min(self.next_gossip);
        }
        match &self.probe {
            // `next_probe` stays in the past while a probe runs (it advances when the probe
            // ends), so it only counts when no probe is in progress.
            None => t = t.min(self.next_probe),
            Some(p) => {
                t = t.min(if p.indirect_sent {
                    p.end
                } else {
                    p.ack_deadline
                });
            }
        }
        if let Some(Reverse((d, _))) = self.deadlines.peek() {
            t = t.min(*d);
        }
        if let Some(d) = self.leave_deadline {
            t = t.min(d);
        }
        if let Some(d) = self.watch_deadline() {
            t = t.min(d);
        }
        if let Some(d) = self.blind_deadline() {
            t = t.min(d);
        }
        if let Some(d) = self.cut_off_deadline() {
            t = t.min(d);
        }
        if let Some(d) = self.redial_deadline() {
            t = t.min(d);
        }
        if let Some(d) = self.heard_back_deadline() {
            t = t.min(d);
        }
        Some(t)
    }

    /// Time has come (see [`poll_timeout`](Self::poll_timeout)).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.note_turn(now);
        self.cut_off_tick(now);
        if let Some(d) = self.leave_deadline
            && now >= d
        {
            self.leave_deadline = None;
            self.events.push_back(Event::LeaveComplete);
        }
        while let Some(Reverse((d, what))) = self.deadlines.peek().copied() {
            if d > now {
                break;
            }
            self.deadlines.pop();
            match what {
                Deadline::Suspicion { episode } => self.suspicion_expired(now, episode, d),
                Deadline::Relay { seq } => self.relay_timer(now, seq),
            }
        }
        if let Some(p) = &self.probe
            && !p.indirect_sent
            && now >= p.ack_deadline
        {
            self.probe_indirect(now);
        }
        if let Some(p) = &self.probe
            && p.indirect_sent
            && now >= p.end
        {
            self.probe_verdict(now);
        }
        self.watch_tick(now);
        self.blind_tick(now);
        self.redial_tick(now);
        self.heard_back_tick(now);
        if self.probe.is_none() && now >= self.next_probe {
            self.start_probe(now);
        }
        if now >= self.next_gossip {
            self.gossip(now);
            self.next_gossip = advance(self.next_gossip, self.config.gossip_interval, now);
        }
        if now >= self.next_push_pull {
            self.first_push_pull = None;
            self.periodic_push_pull(now);
            let interval = push_pull_scale(self.config.push_pull_interval, self.members.len());
            self.next_push_pull = advance(self.next_push_pull, interval, now);
        }
    }
}
