//! Push/pull anti-entropy: joining through seeds, the periodic full-state exchange with one
//! random member (its period scaled to the cluster's size), the protocol-version check, and
//! merging a peer's whole view through the alive / suspect / dead rules.

use super::streams::StreamPurpose;
use super::{Event, MemberState, Membership};
use crate::wire::{Alive, Dead, Message, NodeState, PushNodeState, PushPull, Suspect};
use core::time::Duration;
use std::net::SocketAddr;
use std::time::Instant;

/// memberlist's push/pull period for `n` nodes: the base up to 32 nodes, then one more
/// multiple per doubling.
pub(super) fn push_pull_scale(interval: Duration, n: usize) -> Duration {
    const THRESHOLD: usize = 32;
    if n <= THRESHOLD {
        return interval;
    }
    let mult = ((n as f64).log2() - (THRESHOLD as f64).log2()).ceil() + 1.0;
    interval.mul_f64(mult)
}

impl Membership {
    /// Joins a cluster: a push/pull (with the join flag) to each seed. Results arrive as
    /// [`Event::PushPullComplete`]. Also clears a previous [`leave`](Self::leave), bumping
    /// our incarnation so that peers take us back (Go cannot rejoin after leaving:
    /// hashicorp/memberlist#140).
    pub fn join(&mut self, now: Instant, seeds: &[SocketAddr]) {
        if self.leaving {
            self.leaving = false;
            self.leave_deadline = None;
            self.bump_incarnation(now, self.incarnation);
        }
        for &seed in seeds {
            self.start_push_pull(now, seed, true);
        }
    }

    pub(super) fn replace_first_push_pull(&mut self) {
        if let Some((created, phase)) = self.first_push_pull
            && !self.config.push_pull_interval.is_zero()
        {
            let interval = push_pull_scale(self.config.push_pull_interval, self.members.len());
            self.next_push_pull = created + interval.mul_f64(phase);
        }
    }

    pub(super) fn periodic_push_pull(&mut self, now: Instant) {
        let picked = self
            .members
            .random(1, None, &mut self.rng, |m| m.state == MemberState::Alive);
        if let Some(&i) = picked.first() {
            let addr = self.members.list[i].addr();
            self.start_push_pull(now, addr, false);
        }
    }

    pub(super) fn start_push_pull(&mut self, now: Instant, to: SocketAddr, join: bool) {
        let msg = Message::PushPull(self.local_push_pull(join));
        self.request_stream(
            now,
            to,
            &msg,
            true,
            StreamPurpose::PushPull { join, addr: to },
        );
    }

    pub(super) fn local_push_pull(&self, join: bool) -> PushPull {
        let states = self
            .members
            .list
            .iter()
            .enumerate()
            // A death we declared blind stays ours (see `blind`): we say nothing of the member.
            .filter(|(_, m)| !(m.state == MemberState::Dead && self.held_blind(&m.name)))
            .map(|(i, m)| PushNodeState {
                name: m.name.to_string(),
                addr: Some(m.ip.as_bytes().to_vec()),
                port: m.port,
                meta: m.meta.as_ref().map(|x| x.to_vec()),
                incarnation: if i == 0 {
                    self.incarnation
                } else {
                    m.incarnation
                },
                state: match m.state {
                    MemberState::Alive => NodeState::Alive,
                    MemberState::Suspect => NodeState::Suspect,
                    MemberState::Dead => NodeState::Dead,
                    MemberState::Left => NodeState::Left,
                },
                vsn: Some(m.vsn.to_vec()),
            })
            .collect();
        PushPull {
            join,
            states,
            user_state: self.local_state.clone(),
        }
    }

    /// memberlist's `verifyProtocol`: every node's current versions must fall within the
    /// range all alive nodes support.
    fn compatible(&self, remote: &[PushNodeState]) -> bool {
        let (mut pmin, mut pmax, mut dmin, mut dmax) = (0u8, u8::MAX, 0u8, u8::MAX);
        let remote_alive = remote
            .iter()
            .filter(|s| s.state == NodeState::Alive)
            .filter_map(|s| s.vsn.as_deref().filter(|v| v.len() >= 6));
        let local_alive = self
            .members
            .list
            .iter()
            .filter(|m| m.state == MemberState::Alive)
            .map(|m| &m.vsn[..]);
        for v in remote_alive.chain(local_alive) {
            pmin = pmin.max(v[0]);
            pmax = pmax.min(v[1]);
            dmin = dmin.max(v[3]);
            dmax = dmax.min(v[4]);
        }
        let ok = |v: &[u8]| {
            let (pcur, dcur) = (
                v.get(2).copied().unwrap_or(0),
                v.get(5).copied().unwrap_or(0),
            );
            (pmin..=pmax).contains(&pcur) && (dmin..=dmax).contains(&dcur)
        };
        remote.iter().all(|s| ok(s.vsn.as_deref().unwrap_or(&[])))
            && self.members.list.iter().all(|m| ok(&m.vsn))
    }

    pub(super) fn merge_remote(&mut self, now: Instant, remote: PushPull) {
        if !self.compatible(&remote.states) {
            self.stats.version_mismatches += 1;
            return;
        }
        let PushPull {
            join,
            states,
            user_state,
        } = remote;
        for s in states {
            match s.state {
                NodeState::Alive => {
                    let a = Alive {
                        incarnation: s.incarnation,
                        node: s.name,
                        addr: s.addr,
                        port: s.port,
                        meta: s.meta,
                        vsn: s.vsn,
                    };
                    self.on_alive(now, &a, None, true);
                }
                NodeState::Left => {
                    let d = Dead {
                        incarnation: s.incarnation,
                        from: s.name.clone(),
                        node: s.name,
                    };
                    self.on_dead(now, &d);
                }
                // A peer's "dead" becomes our suspicion: we let the node refute first.
                NodeState::Dead | NodeState::Suspect => {
                    let sus = Suspect {
                        incarnation: s.incarnation,
                        node: s.name,
                        from: self.name().to_string(),
                    };
                    self.on_suspect(now, &sus);
                }
                NodeState::Unknown(_) => {}
            }
        }
        if !user_state.is_empty() {
            self.events.push_back(Event::RemoteState {
                join,
                state: user_state,
            });
        }
    }
}
