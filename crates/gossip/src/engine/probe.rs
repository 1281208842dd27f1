//! Failure detection: the probe cycle (direct ping, indirect pings through helpers with
//! nacks, the TCP fallback ping, the verdict), Lifeguard's local health score, strong
//! evidence of absence, and answering and relaying other nodes' probes.

use super::streams::StreamPurpose;
use super::timers::Deadline;
use super::{Event, MemberState, Membership, StreamId};
use crate::wire::{self, Ack, Dead, IndirectPing, Message, Nack, Ping, Suspect, Transport};
use core::time::Duration;
use std::cmp::Reverse;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The probe in progress (memberlist runs one at a time).
#[derive(Debug)]
pub(super) struct Probe {
    pub(super) target: Arc<str>,
    pub(super) seq: u32,
    sent: Instant,
    /// End of the direct-ack window.
    pub(super) ack_deadline: Instant,
    /// Verdict time: the (health-scaled) probe interval after the ping.
    pub(super) end: Instant,
    pub(super) indirect_sent: bool,
    expected_nacks: usize,
    nacks: usize,
    tcp: Option<StreamId>,
    pub(super) tcp_ok: bool,
    /// The target's incarnation when the probe began: a failed probe accuses that one (as Go
    /// does), not one the target refuted to meanwhile.
    incarnation: u32,
}

/// An indirect probe we run for someone else.
#[derive(Debug)]
pub(super) struct Relay {
    origin_seq: u32,
    reply_to: SocketAddr,
    nack_at: Option<Instant>,
    expires: Instant,
}

impl Membership {
    /// Strong evidence: `addr` answered with ICMP port unreachable, or refused a TCP
    /// connection, so no process listens there. When `use_strong_evidence` is on it counts as
    /// one confirmation of an existing suspicion, and if we are probing that member and still
    /// waiting for its direct ack, the probe moves on to its indirect phase at once, so the TCP
    /// fallback ping (whose refusal is the proof of absence, see
    /// [`Config::use_strong_evidence`]) goes out now instead of at the end of the ack window.
    /// It never declares anyone dead by itself: an ICMP error only quotes addresses and ports,
    /// which anyone can forge, and a refused connection we did not make for a probe proves
    /// nothing about that probe.
    ///
    /// [`Config::use_strong_evidence`]: crate::Config::use_strong_evidence
    pub fn handle_unreachable(&mut self, now: Instant, addr: SocketAddr) {
        if !self.config.use_strong_evidence {
            return;
        }
        let Some(i) = (1..self.members.len()).find(|&i| self.members.list[i].addr() == addr) else {
            return;
        };
        let m = &mut self.members.list[i];
        if let Some(s) = m.suspicion.as_deref_mut()
            && s.confirm_strong()
        {
            let (deadline, episode) = (s.deadline(), s.episode);
            self.deadlines
                .push(Reverse((deadline, Deadline::Suspicion { episode })));
        }
        let name = self.members.list[i].name.clone();
        let probing = self
            .probe
            .as_ref()
            .is_some_and(|p| !p.indirect_sent && *p.target == *name);
        if probing {
            self.probe_indirect(now);
        } else if self.watching(&name) && self.probe.as_ref().is_none_or(|p| p.target != name) {
            // A watched member's port is closed: probe it now (its TCP fallback ping, if
            // refused, proves the absence) instead of when its turn comes.
            if !self.urgent_probes.contains(&name) {
                self.urgent_probes.push_back(name);
            }
            if self.probe.is_none() {
                self.next_probe = self.next_probe.min(now);
            }
        }
    }

    fn reply_addr(from: SocketAddr, source_addr: &[u8], source_port: u16) -> SocketAddr {
        match (wire::ip_from_wire(source_addr), source_port) {
            (Some(ip), port) if port > 0 => SocketAddr::new(ip, port),
            _ => from,
        }
    }

    pub(super) fn on_ping(&mut self, from: SocketAddr, p: Ping) {
        if !p.node.is_empty() && p.node != self.name() {
            self.stats.ignored += 1;
            return;
        }
        let ack = Message::Ack(Ack {
            seq_no: p.seq_no,
            payload: self.ack_payload.clone(),
        });
        let to = Self::reply_addr(from, &p.source_addr, p.source_port);
        self.send_msg(to, ack.to_vec(Transport::Packet));
    }

    pub(super) fn on_indirect_ping(&mut self, now: Instant, from: SocketAddr, req: IndirectPing) {
        let Some(ip) = req.target.as_deref().and_then(wire::ip_from_wire) else {
            self.stats.malformed += 1;
            return;
        };
        let seq = self.next_seq();
        let ping = Message::Ping(self.own_ping(seq, &req.node));
        self.send_msg(
            SocketAddr::new(ip, req.port),
            ping.to_vec(Transport::Packet),
        );
        let nack_at = req.nack.then(|| now + self.config.probe_timeout);
        let expires = now + self.config.probe_interval;
        self.relays.insert(
            seq,
            Relay {
                origin_seq: req.seq_no,
                reply_to: Self::reply_addr(from, &req.source_addr, req.source_port),
                nack_at,
                expires,
            },
        );
        self.deadlines.push(Reverse((
            nack_at.unwrap_or(expires),
            Deadline::Relay { seq },
        )));
    }

    pub(super) fn relay_timer(&mut self, now: Instant, seq: u32) {
        let Some(relay) = self.relays.get_mut(&seq) else {
            return;
        };
        if let Some(at) = relay.nack_at
            && now >= at
        {
            relay.nack_at = None;
            let (to, origin) = (relay.reply_to, relay.origin_seq);
            let expires = relay.expires;
            self.deadlines
                .push(Reverse((expires, Deadline::Relay { seq })));
            let nack = Message::Nack(Nack { seq_no: origin });
            self.send_msg(to, nack.to_vec(Transport::Packet));
            return;
        }
        if now >= relay.expires {
            self.relays.remove(&seq);
        }
    }

    pub(super) fn on_ack(&mut self, now: Instant, ack: Ack) {
        if let Some(relay) = self.relays.remove(&ack.seq_no) {
            let fwd = Message::Ack(Ack {
                seq_no: relay.origin_seq,
                payload: None,
            });
            self.send_msg(relay.reply_to, fwd.to_vec(Transport::Packet));
            return;
        }
        if self.watch_ack(now, ack.seq_no)
            || self.blind_ack(now, ack.seq_no)
            || self.redial_ack(now, ack.seq_no)
            || self.heard_back_ack(now, ack.seq_no)
        {
            return;
        }
        match &self.probe {
            // No `now < p.end` test: the verdict is given in `handle_timeout`, so a probe
            // still running has had no verdict yet. An ack handed to us after `end` arrived
            // while we were not running (a stalled process, a late driver: the packet waited
            // in the socket); the target answered, and refusing it would make us accuse a
            // live peer for our own stall.
            Some(p) if p.seq == ack.seq_no => {
                let rtt = now.saturating_duration_since(p.sent);
                let name = p.target.clone();
                let direct = !p.indirect_sent;
                self.watch_heard_member(now, &name);
                self.probe_succeeded(now);
                if direct {
                    self.events.push_back(Event::PingComplete {
                        name,
                        rtt,
                        payload: ack.payload,
                    });
                }
            }
            _ => self.stats.ignored += 1,
        }
    }

    pub(super) fn on_nack(&mut self, from: SocketAddr, n: Nack) {
        if let Some(p) = &mut self.probe
            && p.seq == n.seq_no
        {
            p.nacks += 1;
        } else if !self.watch_nack(from, n.seq_no) {
            self.stats.ignored += 1;
        }
    }

    pub(super) fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    pub(super) fn own_ping(&self, seq: u32, target: &str) -> Ping {
        let me = self.local();
        Ping {
            seq_no: seq,
            node: target.to_string(),
            source_addr: me.ip.as_bytes().to_vec(),
            source_port: me.port,
            source_node: me.name.to_string(),
        }
    }

    fn scaled(&self, d: Duration) -> Duration {
        if self.config.lifeguard {
            d * (self.awareness as u32 + 1)
        } else {
            d
        }
    }

    pub(super) fn apply_awareness(&mut self, delta: isize) {
        if !self.config.lifeguard {
            return;
        }
        let max = self.config.awareness_max_multiplier as isize - 1;
        self.awareness = (self.awareness as isize + delta).clamp(0, max) as usize;
    }

    pub(super) fn start_probe(&mut self, now: Instant) {
        let (target, urgent) = loop {
            match self.urgent_probes.pop_front() {
                Some(name) => {
                    if let Some(i) = self.members.find(&name)
                        && i != 0
                        && !self.members.list[i].state.is_gone()
                    {
                        break (Some(i), true);
                    }
                }
                None => {
                    let next = self.members.next_probe_target(
                        now,
                        self.config.gossip_to_the_dead_time,
                        &mut self.rng,
                    );
                    break (next, false);
                }
            }
        };
        let Some(i) = target else {
            self.schedule_next_probe(now);
            return;
        };
        // A round-robin turn of a member the watch heard from within the interval is spared:
        // the watch's pings already show it alive, and a probe would cost a wake-up at each
        // end. Its turn passes as if probed (the order and every other member's cadence are
        // unchanged); a silent watched member, or one asked for urgently, is probed.
        if !urgent && self.watch_vouches(now, &self.members.list[i].name) {
            self.stats.probes_spared += 1;
            self.schedule_next_probe(now);
            return;
        }
        self.stats.probes += 1;
        let seq = self.next_seq();
        let target = &self.members.list[i];
        let (name, addr, suspect) = (
            target.name.clone(),
            target.addr(),
            target.state == MemberState::Suspect,
        );
        let ping = Message::Ping(self.own_ping(seq, &name)).to_vec(Transport::Packet);
        if suspect {
            // Lifeguard's buddy system: tell the suspect it is suspected, so it refutes at once.
            let accusation = Message::Suspect(Suspect {
                incarnation: self.members.list[i].incarnation,
                node: name.to_string(),
                from: self.name().to_string(),
            })
            .to_vec(Transport::Packet);
            self.send_compound(addr, vec![ping, accusation], Some(i));
        } else {
            self.send_msg(addr, ping);
        }
        let end = now + self.scaled(self.config.probe_interval);
        self.probe = Some(Probe {
            target: name,
            seq,
            sent: now,
            ack_deadline: now + self.config.probe_timeout,
            end,
            indirect_sent: false,
            expected_nacks: 0,
            nacks: 0,
            tcp: None,
            tcp_ok: false,
            incarnation: self.members.list[i].incarnation,
        });
    }

    pub(super) fn probe_indirect(&mut self, now: Instant) {
        let Some(p) = &self.probe else { return };
        let Some(ti) = self.members.find(&p.target) else {
            self.probe = None;
            return;
        };
        let target = self.members.list[ti].clone();
        let seq = p.seq;
        self.events.push_back(Event::ProbeMissed {
            name: target.name.clone(),
        });
        // The helpers get the whole indirect window from when we actually ask them. Normally
        // that is the ack deadline and nothing moves; but if we were stalled past it (a
        // stopped process, a starved host), `end` may have passed too, and judging at once
        // would accuse the target without waiting for a single helper: our stall, its blame.
        let window = p.end.saturating_duration_since(p.ack_deadline);
        let end = p.end.max(now + window);
        let helpers =
            self.members
                .random(self.config.indirect_checks, Some(ti), &mut self.rng, |m| {
                    m.state == MemberState::Alive
                });
        let mut expected_nacks = 0;
        for h in helpers {
            let helper = &self.members.list[h];
            let nack = helper.pmax() >= 4;
            expected_nacks += usize::from(nack);
            let to = helper.addr();
            let me = self.local();
            let req = Message::IndirectPing(IndirectPing {
                seq_no: seq,
                target: Some(target.ip.as_bytes().to_vec()),
                port: target.port,
                node: target.name.to_string(),
                nack,
                source_addr: me.ip.as_bytes().to_vec(),
                source_port: me.port,
                source_node: me.name.to_string(),
            });
            self.send_msg(to, req.to_vec(Transport::Packet));
        }
        let mut tcp = None;
        if !self.config.disable_tcp_pings && target.pmax() >= 3 {
            let ping = Message::Ping(self.own_ping(seq, &target.name));
            tcp = Some(self.request_stream_until(
                target.addr(),
                &ping,
                true,
                StreamPurpose::TcpPing { seq },
                end,
            ));
        }
        if let Some(p) = &mut self.probe {
            p.indirect_sent = true;
            p.expected_nacks = expected_nacks;
            p.tcp = tcp;
            p.end = end;
        }
    }

    fn probe_succeeded(&mut self, now: Instant) {
        if let Some(p) = self.probe.take()
            && let Some(id) = p.tcp
        {
            self.streams.remove(&id);
        }
        self.apply_awareness(-1);
        self.schedule_next_probe(now);
    }

    /// Proof of absence: the target did not ack our ping directly and its host refused the TCP
    /// fallback ping we made for this very probe (a reset that acknowledged our SYN, or an
    /// ICMP error quoting it), so no process listens on its gossip port. Declared dead at
    /// once and gossiped at once; see [`Config::use_strong_evidence`] for why no suspicion
    /// period. A dead verdict is refuted like a suspicion: the member, if it lives after all,
    /// or its restarted process, announces a higher incarnation and is taken back.
    ///
    /// [`Config::use_strong_evidence`]: crate::Config::use_strong_evidence
    pub(super) fn probe_absent(&mut self, now: Instant) {
        let Some(p) = self.probe.take() else { return };
        if let Some(id) = p.tcp {
            self.streams.remove(&id);
        }
        self.schedule_next_probe(now);
        self.stats.probes_failed += 1;
        // Our own health is not in question: the target's host answered us at once. So the
        // awareness score stays as it is (a missed ack would raise it; an ack would lower it).
        let Some(i) = self.members.find(&p.target) else {
            return;
        };
        let m = &self.members.list[i];
        if i == 0 || m.state.is_gone() || m.incarnation > p.incarnation {
            // Gone already, or it refuted during the probe: it spoke after our probe began.
            return;
        }
        self.stats.absences_proven += 1;
        self.stats.deaths_declared += 1;
        // The incarnation the probe began with, as for a failed probe: if the member refuted
        // meanwhile (a higher incarnation), `on_dead` ignores this verdict.
        let d = Dead {
            incarnation: p.incarnation,
            node: p.target.to_string(),
            from: self.name().to_string(),
        };
        self.on_dead(now, &d);
        // Spread the news now rather than at the next gossip tick.
        self.next_gossip = self.next_gossip.min(now);
    }

    pub(super) fn probe_verdict(&mut self, now: Instant) {
        let Some(p) = self.probe.take() else { return };
        if let Some(id) = p.tcp {
            self.streams.remove(&id);
        }
        self.schedule_next_probe(now);
        if p.tcp_ok {
            // Reachable over TCP though UDP probes failed: a network problem, not a death.
            self.apply_awareness(-1);
            return;
        }
        self.stats.probes_failed += 1;
        let delta = if p.expected_nacks > 0 {
            p.expected_nacks.saturating_sub(p.nacks) as isize
        } else {
            1
        };
        self.apply_awareness(delta);
        if self.members.find(&p.target).is_none() {
            return;
        }
        let s = Suspect {
            incarnation: p.incarnation,
            node: p.target.to_string(),
            from: self.name().to_string(),
        };
        self.on_suspect(now, &s);
    }
}
