//! Getting news out: the broadcast queues (memberlist's and the application's), gossip
//! rounds to random members, piggy-backing queued broadcasts on every datagram we send, and
//! sealing datagrams for the wire.

use super::broadcast::{self, retransmit_limit};
use super::streams::StreamPurpose;
use super::{Event, MemberState, Membership, Transmit};
use crate::wire::{self, Message, Transport, compound, packet};
use std::net::SocketAddr;
use std::time::Instant;

impl Membership {
    /// Queues an application broadcast, piggy-backed after memberlist's own messages. A
    /// `key` replaces any queued broadcast with the same key.
    pub fn broadcast_user(&mut self, key: Option<&str>, msg: Vec<u8>) {
        let mut framed = Vec::with_capacity(msg.len() + 1);
        framed.push(u8::from(wire::MessageType::User));
        framed.extend_from_slice(&msg);
        self.user_broadcasts.push(key, framed, false);
    }

    /// Sends an application message to one peer: over UDP (best effort) or TCP (reliable).
    pub fn send_user(&mut self, now: Instant, to: SocketAddr, msg: Vec<u8>, reliable: bool) {
        if reliable {
            let m = Message::User(msg);
            self.request_stream(now, to, &m, false, StreamPurpose::OneWay);
        } else {
            let bytes = Message::User(msg).to_vec(Transport::Packet);
            self.send_raw(to, &bytes, false);
        }
    }

    pub(super) fn queue_broadcast(&mut self, name: &str, msg: &Message) {
        let bytes = msg.to_vec(Transport::Packet);
        if let Some(broadcast::Retired) = self.broadcasts.push(Some(name), bytes, false) {
            self.leave_broadcast_retired();
        }
    }

    fn leave_broadcast_retired(&mut self) {
        if self.leaving && self.leave_deadline.take().is_some() {
            self.events.push_back(Event::LeaveComplete);
        }
    }

    /// Something is queued for gossip.
    pub(super) fn has_broadcasts(&self) -> bool {
        !self.broadcasts.is_empty() || !self.user_broadcasts.is_empty()
    }

    pub(super) fn gossip(&mut self, now: Instant) {
        if !self.has_broadcasts() {
            return;
        }
        let dead_window = self.config.gossip_to_the_dead_time;
        let stamp = self.members.stamp(now);
        let targets =
            self.members
                .random(self.config.gossip_nodes, None, &mut self.rng, |m| {
                    match m.state {
                        MemberState::Alive | MemberState::Suspect => true,
                        MemberState::Dead => m.state_change.age_at(stamp) <= dead_window,
                        MemberState::Left => false,
                    }
                });
        let budget = self
            .config
            .udp_buffer_size
            .saturating_sub(compound::HEADER_OVERHEAD + packet::overhead(&self.framing));
        for t in targets {
            let to = self.members.list[t].addr();
            let msgs = self.take_broadcasts(to, compound::PART_OVERHEAD, budget);
            if msgs.is_empty() {
                continue;
            }
            let crc = self.members.list[t].pmax() >= 5;
            match compound::encode_batches(&msgs, self.config.max_compound_parts) {
                Ok(batches) => {
                    for b in batches {
                        self.send_raw(to, &b, crc);
                    }
                }
                Err(_) => unreachable!("parts are small and batches bounded"),
            }
        }
    }

    fn take_broadcasts(&mut self, to: SocketAddr, overhead: usize, limit: usize) -> Vec<Vec<u8>> {
        let n = self.members.len();
        let tl = retransmit_limit(self.config.retransmit_mult, n);
        let peers = n.saturating_sub(1).max(1);
        let (mut msgs, retired) = self.broadcasts.take(to, overhead, limit, tl, peers);
        if retired.is_some() {
            self.leave_broadcast_retired();
        }
        let used: usize = msgs.iter().map(|m| m.len() + overhead).sum();
        if limit > used + overhead + 1 {
            let (user, _) = self
                .user_broadcasts
                .take(to, overhead, limit - used, tl, peers);
            msgs.extend(user);
        }
        msgs
    }

    /// Sends one message with gossip piggy-backed, as Go's `sendMsg`.
    pub(super) fn send_msg(&mut self, to: SocketAddr, msg: Vec<u8>) {
        let budget = self.config.udp_buffer_size.saturating_sub(
            msg.len() + compound::HEADER_OVERHEAD + packet::overhead(&self.framing),
        );
        let extra = self.take_broadcasts(to, compound::PART_OVERHEAD, budget);
        // Like Go, probes and their answers go without a CRC (Go only finds the peer, and so
        // adds one, when node names are IP addresses); gossip to known members carries one.
        let crc = false;
        if extra.is_empty() {
            self.send_raw(to, &msg, crc);
        } else {
            let mut parts = Vec::with_capacity(extra.len() + 1);
            parts.push(msg);
            parts.extend(extra);
            self.send_parts(to, &parts, crc);
        }
    }

    pub(super) fn send_compound(
        &mut self,
        to: SocketAddr,
        mut parts: Vec<Vec<u8>>,
        peer: Option<usize>,
    ) {
        let used: usize = parts
            .iter()
            .map(|p| p.len() + compound::PART_OVERHEAD)
            .sum();
        let budget = self
            .config
            .udp_buffer_size
            .saturating_sub(used + compound::HEADER_OVERHEAD + packet::overhead(&self.framing));
        parts.extend(self.take_broadcasts(to, compound::PART_OVERHEAD, budget));
        let crc = peer.is_some_and(|i| self.members.list[i].pmax() >= 5);
        self.send_parts(to, &parts, crc);
    }

    fn send_parts(&mut self, to: SocketAddr, parts: &[Vec<u8>], crc: bool) {
        match compound::encode_batches(parts, self.config.max_compound_parts) {
            Ok(batches) => {
                for b in batches {
                    self.send_raw(to, &b, crc);
                }
            }
            Err(_) => unreachable!("parts are small and batches bounded"),
        }
    }

    pub(super) fn send_raw(&mut self, to: SocketAddr, payload: &[u8], crc: bool) {
        let mut bytes = Vec::with_capacity(payload.len() + 64);
        packet::seal(&self.framing, payload, crc, &mut self.rng, &mut bytes);
        self.stats.packets_out += 1;
        self.stats.bytes_out += bytes.len() as u64;
        self.transmits.push_back(Transmit { to, bytes });
    }
}
