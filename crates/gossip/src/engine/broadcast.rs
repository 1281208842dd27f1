//! The transmit-limited broadcast queue (memberlist's `TransmitLimitedQueue`): each message is
//! piggy-backed a limited number of times, least-sent first, larger first, newest first; a
//! new message about a node replaces any queued message about the same node.
//!
//! One refinement over Go: a message goes to every peer once before any peer gets it twice.
//! Piggy-backing follows the traffic (acks go back to whoever pinged us), so Go's copies often
//! land on the same few peers and a small cluster can miss news until the next push/pull;
//! here the retransmit limit means "this many different peers heard it" when there are that
//! many. With fewer peers than the limit (three nodes: two peers, limit 4) the copies go
//! round again, so each peer gets two: on a lossy link a single copy of a refutation is lost
//! often enough to get a live node declared dead.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

/// Order in which messages go out: fewest transmits, then longest, then newest.
type Key = (u32, Reverse<usize>, Reverse<u64>);

#[derive(Debug, Default)]
pub(crate) struct BroadcastQueue {
    queue: BTreeMap<Key, Item>,
    by_name: HashMap<Box<str>, Key>,
    next_id: u64,
    /// No queued message is shorter (a lower bound, exact after the queue empties): lets
    /// `take` stop once the room left cannot hold any message, instead of walking the rest
    /// of a long queue (a node that just joined a big cluster queues one alive per member).
    min_len: Option<usize>,
}

#[derive(Debug)]
struct Item {
    name: Option<Box<str>>,
    message: Vec<u8>,
    /// Set for our own leave message, so `leave` can wait until it has gone out.
    notify: bool,
    /// Peers that already have it.
    sent_to: Vec<SocketAddr>,
}

/// A broadcast that left the queue (sent often enough, or replaced) and was being waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Retired;

impl BroadcastQueue {
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether a message about `name` is queued.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Drops the queued message about `name`, if any.
    pub(crate) fn remove(&mut self, name: &str) {
        if let Some(key) = self.by_name.remove(name) {
            self.queue.remove(&key);
            if self.queue.is_empty() {
                self.min_len = None;
            }
        }
    }

    /// Queues `message`, replacing any message about the same `name`. Returns `Retired` if a
    /// waited-for message was replaced.
    pub(crate) fn push(
        &mut self,
        name: Option<&str>,
        message: Vec<u8>,
        notify: bool,
    ) -> Option<Retired> {
        let mut retired = None;
        if let Some(name) = name
            && let Some(old) = self.by_name.remove(name)
            && let Some(item) = self.queue.remove(&old)
            && item.notify
        {
            retired = Some(Retired);
        }
        self.next_id += 1;
        self.min_len = Some(self.min_len.map_or(message.len(), |m| m.min(message.len())));
        let key = (0, Reverse(message.len()), Reverse(self.next_id));
        if let Some(name) = name {
            self.by_name.insert(name.into(), key);
        }
        self.queue.insert(
            key,
            Item {
                name: name.map(Into::into),
                message,
                notify,
                sent_to: Vec::new(),
            },
        );
        retired
    }

    /// Takes messages for `to` that fit in `limit` bytes, each costing `overhead` extra, and
    /// counts a transmit for each. A message leaves the queue after `transmit_limit`
    /// transmits; none goes to a peer twice in one round, and a round ends once all `peers`
    /// we know have it. Returns the messages and whether a waited-for message retired.
    pub(crate) fn take(
        &mut self,
        to: SocketAddr,
        overhead: usize,
        limit: usize,
        transmit_limit: u32,
        peers: usize,
    ) -> (Vec<Vec<u8>>, Option<Retired>) {
        let mut used = 0;
        let mut keys = Vec::new();
        let shortest = self.min_len.unwrap_or(0);
        for (key, item) in &self.queue {
            let room = limit.saturating_sub(used);
            if room <= overhead || room < overhead + shortest {
                break;
            }
            if used + overhead + item.message.len() > limit || item.sent_to.contains(&to) {
                continue;
            }
            used += overhead + item.message.len();
            keys.push(*key);
        }
        let mut picked = Vec::with_capacity(keys.len());
        let mut retired = None;
        for key in keys {
            let mut item = self.queue.remove(&key).expect("key just seen");
            picked.push(item.message.clone());
            item.sent_to.push(to);
            let transmits = key.0 + 1;
            if item.sent_to.len() >= peers {
                item.sent_to.clear();
            }
            if transmits >= transmit_limit {
                if let Some(name) = &item.name {
                    self.by_name.remove(name);
                }
                if item.notify {
                    retired = Some(Retired);
                }
            } else {
                let new_key = (transmits, key.1, key.2);
                if let Some(name) = &item.name {
                    self.by_name.insert(name.clone(), new_key);
                }
                self.queue.insert(new_key, item);
            }
        }
        if self.queue.is_empty() {
            self.min_len = None;
        }
        (picked, retired)
    }
}

/// memberlist's retransmit limit: `mult * ceil(log10(n + 1))`.
pub(crate) fn retransmit_limit(mult: usize, n: usize) -> u32 {
    let scale = ((n as f64) + 1.0).log10().ceil() as usize;
    (mult * scale).max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retransmit_limit_matches_memberlist() {
        assert_eq!(retransmit_limit(3, 1), 3);
        assert_eq!(retransmit_limit(3, 99), 6);
        assert_eq!(retransmit_limit(4, 5), 4);
        assert_eq!(retransmit_limit(4, 100), 12);
    }

    #[test]
    fn newer_message_about_a_node_replaces_the_older() {
        let mut q = BroadcastQueue::default();
        q.push(Some("a"), vec![1; 10], false);
        q.push(Some("b"), vec![2; 10], false);
        q.push(Some("a"), vec![3; 10], false);
        assert_eq!(q.len(), 2);
        let (msgs, _) = q.take(peer(1), 2, 1000, 5, 10);
        assert!(msgs.contains(&vec![3; 10]) && msgs.contains(&vec![2; 10]));
    }

    #[test]
    fn least_sent_then_largest_first_and_retired_at_the_limit() {
        let mut q = BroadcastQueue::default();
        q.push(None, vec![1; 5], false);
        q.push(None, vec![2; 50], true);
        let (msgs, retired) = q.take(peer(1), 0, 60, 2, 10);
        assert_eq!(msgs, vec![vec![2; 50], vec![1; 5]]);
        assert_eq!(retired, None);
        // Only room for the small one now.
        let (msgs, _) = q.take(peer(2), 0, 20, 2, 10);
        assert_eq!(msgs, vec![vec![1; 5]]);
        assert_eq!(q.len(), 1);
        let (msgs, retired) = q.take(peer(3), 0, 60, 2, 10);
        assert_eq!(msgs, vec![vec![2; 50]]);
        assert_eq!(
            retired,
            Some(Retired),
            "the waited-for message went out twice"
        );
        assert!(q.is_empty());
    }

    #[test]
    fn a_peer_gets_a_message_twice_only_after_every_peer_had_it() {
        let mut q = BroadcastQueue::default();
        q.push(Some("a"), vec![1; 5], false);
        assert_eq!(q.take(peer(1), 0, 60, 4, 3).0.len(), 1);
        assert!(q.take(peer(1), 0, 60, 4, 3).0.is_empty());
        assert_eq!(q.take(peer(2), 0, 60, 4, 3).0.len(), 1);
        assert!(q.take(peer(2), 0, 60, 4, 3).0.is_empty());
        // Everyone we know has it once; a second round begins, up to the limit of 4.
        assert_eq!(q.take(peer(3), 0, 60, 4, 3).0.len(), 1);
        assert_eq!(q.take(peer(1), 0, 60, 4, 3).0.len(), 1);
        assert!(q.is_empty(), "retired at the transmit limit");
        assert!(q.take(peer(2), 0, 60, 4, 3).0.is_empty());
    }

    /// Three nodes: two peers, limit 4. Each peer gets the message twice, so one lost copy
    /// (of a refutation, say) is not the end of it.
    #[test]
    fn with_fewer_peers_than_the_limit_each_peer_gets_several_copies() {
        let mut q = BroadcastQueue::default();
        q.push(Some("a"), vec![1; 5], false);
        let mut got = [0; 2];
        for _ in 0..5 {
            for (i, g) in got.iter_mut().enumerate() {
                *g += q.take(peer(i as u8 + 1), 0, 60, 4, 2).0.len();
            }
        }
        assert_eq!(got, [2, 2]);
        assert!(q.is_empty());
    }

    fn peer(i: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, i], 7946))
    }
}
