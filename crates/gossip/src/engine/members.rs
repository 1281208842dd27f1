//! The member table: every node we know of, ourselves included, in probe order.

use super::suspicion::Suspicion;
use core::hash::BuildHasher;
use hashbrown::DefaultHashBuilder;
use hashbrown::HashTable;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha12Rng;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

/// A member's state as we see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemberState {
    /// Answering probes, or not yet caught failing.
    Alive,
    /// Missed a probe; will be declared dead unless it refutes.
    Suspect,
    /// Declared dead.
    Dead,
    /// Left gracefully.
    Left,
}

impl MemberState {
    /// Dead or left.
    pub fn is_gone(self) -> bool {
        matches!(self, Self::Dead | Self::Left)
    }

    /// The lower-case name status pages, logs and metrics labels print (`alive`, `suspect`,
    /// `dead`, `left`): one spelling for every caller, covering every state this version knows.
    pub fn name(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::Suspect => "suspect",
            Self::Dead => "dead",
            Self::Left => "left",
        }
    }
}

/// An IP address in the byte form its owner advertised (4 or 16 bytes), kept exactly so that
/// we re-send the same bytes (Go compares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WireIp {
    len: u8,
    bytes: [u8; 16],
}

impl WireIp {
    /// Accepts 4 or 16 bytes.
    pub fn from_wire(b: &[u8]) -> Option<Self> {
        if b.len() != 4 && b.len() != 16 {
            return None;
        }
        let mut bytes = [0; 16];
        bytes[..b.len()].copy_from_slice(b);
        Some(Self {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The form vigil advertises for its own address.
    pub fn from_ip(ip: IpAddr) -> Self {
        Self::from_wire(&crate::wire::ip_to_wire(ip)).expect("4 or 16 bytes")
    }

    /// The bytes as advertised.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// The address (IPv4-mapped IPv6 reads as IPv4, as in Go).
    pub fn ip(&self) -> IpAddr {
        crate::wire::ip_from_wire(self.as_bytes()).expect("validated length")
    }
}

/// A moment, as nanoseconds since the table was created: 8 bytes where an `Instant` takes 16
/// (a simulator holds 10^8 member entries).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Stamp(u64);

impl Stamp {
    /// How long before `now` this was.
    pub(crate) fn age_at(self, now: Self) -> core::time::Duration {
        core::time::Duration::from_nanos(now.0.saturating_sub(self.0))
    }
}

/// What we know about one member. Kept small (72 bytes): a simulator holds 10^8 of these, so
/// the rarely set metadata sits behind a thin box and the time stamp is a [`Stamp`].
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) name: Arc<str>,
    pub(crate) ip: WireIp,
    pub(crate) port: u16,
    pub(crate) meta: Option<Box<Arc<[u8]>>>,
    pub(crate) vsn: [u8; 6],
    pub(crate) incarnation: u32,
    pub(crate) state: MemberState,
    pub(crate) state_change: Stamp,
    pub(crate) suspicion: Option<Box<Suspicion>>,
}

impl Member {
    /// The metadata bytes, if any.
    pub(crate) fn meta_bytes(&self) -> Option<&[u8]> {
        self.meta.as_deref().map(|m| &**m)
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip.ip(), self.port)
    }

    /// The highest protocol version it understands.
    pub(crate) fn pmax(&self) -> u8 {
        self.vsn[1]
    }
}

/// Members by name, with ourselves at index 0 and a shuffled probe order.
///
/// Compact on purpose: a simulator holds thousands of these tables with thousands of entries
/// each. The name index stores only positions (4 bytes each) and hashes names through the list.
pub(crate) struct Members {
    pub(crate) list: Vec<Member>,
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    order: Vec<u32>,
    probe_pos: usize,
    /// Time zero of the members' [`Stamp`]s.
    epoch: Instant,
}

impl core::fmt::Debug for Members {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Members")
            .field("len", &self.list.len())
            .finish()
    }
}

impl Members {
    pub(crate) fn new(local: Member, epoch: Instant) -> Self {
        let mut members = Self {
            list: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            order: vec![0],
            probe_pos: 0,
            epoch,
        };
        members.push_indexed(local);
        members
    }

    fn push_indexed(&mut self, member: Member) -> usize {
        let i = self.list.len();
        let hash = self.hasher.hash_one(&*member.name);
        self.list.push(member);
        let (list, hasher) = (&self.list, &self.hasher);
        self.index.insert_unique(hash, i as u32, |&j| {
            hasher.hash_one(&*list[j as usize].name)
        });
        i
    }

    /// Makes room for `additional` more members.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.list.reserve_exact(additional);
        self.order.reserve_exact(additional);
        let (list, hasher) = (&self.list, &self.hasher);
        self.index
            .reserve(additional, |&j| hasher.hash_one(&*list[j as usize].name));
    }

    /// `now` as a [`Stamp`].
    pub(crate) fn stamp(&self, now: Instant) -> Stamp {
        let nanos = now.saturating_duration_since(self.epoch).as_nanos();
        Stamp(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// How long before `now` a member's state last changed.
    pub(crate) fn since_change(&self, now: Instant, m: &Member) -> core::time::Duration {
        m.state_change.age_at(self.stamp(now))
    }

    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    pub(crate) fn find(&self, name: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(name);
        self.index
            .find(hash, |&j| &*self.list[j as usize].name == name)
            .map(|&j| j as usize)
    }

    /// Adds a member at a random place in the probe order (so newcomers are not all probed at
    /// once, as Go does).
    pub(crate) fn insert(&mut self, member: Member, rng: &mut ChaCha12Rng) -> usize {
        use rand::Rng;
        let i = self.push_indexed(member);
        self.order.push(i as u32);
        let last = self.order.len() - 1;
        let j = rng.gen_range(0..=last);
        self.order.swap(j, last);
        i
    }

    /// The next member in probe order that is worth probing, wrapping (and then reaping and
    /// reshuffling) at the end of a round. `None` when there is nobody to probe.
    pub(crate) fn next_probe_target(
        &mut self,
        now: Instant,
        reap_after: core::time::Duration,
        rng: &mut ChaCha12Rng,
    ) -> Option<usize> {
        for _ in 0..=self.order.len() {
            if self.probe_pos >= self.order.len() {
                self.reap(now, reap_after);
                self.order.shuffle(rng);
                self.probe_pos = 0;
            }
            let i = self.order[self.probe_pos] as usize;
            self.probe_pos += 1;
            if i != 0 && !self.list[i].state.is_gone() {
                return Some(i);
            }
        }
        None
    }

    /// Removes dead and left members whose state is older than `after`; fixes up indices.
    /// (memberlist 0.2.2 never removed left members: hashicorp/memberlist#253.)
    pub(crate) fn reap(&mut self, now: Instant, after: core::time::Duration) {
        let before = self.list.len();
        let now = self.stamp(now);
        let mut i = 1;
        while i < self.list.len() {
            let m = &self.list[i];
            if m.state.is_gone() && m.state_change.age_at(now) > after {
                self.list.swap_remove(i);
            } else {
                i += 1;
            }
        }
        if self.list.len() != before {
            self.index.clear();
            let members = core::mem::take(&mut self.list);
            for m in members {
                self.push_indexed(m);
            }
            self.order = (0..self.list.len() as u32).collect();
            self.probe_pos = self.order.len();
        }
    }

    /// Up to `k` random members other than ourselves and `exclude` that pass `keep`.
    pub(crate) fn random(
        &self,
        k: usize,
        exclude: Option<usize>,
        rng: &mut ChaCha12Rng,
        keep: impl Fn(&Member) -> bool,
    ) -> Vec<usize> {
        use rand::Rng;
        let n = self.list.len();
        let eligible = |i: usize| i != 0 && Some(i) != exclude && keep(&self.list[i]);
        let mut out = Vec::with_capacity(k);
        if n < 3 * k + 3 {
            // Small tables: shuffle so that rare eligible members are never missed
            // (memberlist PR #350).
            let mut all: Vec<usize> = (1..n).filter(|&i| eligible(i)).collect();
            all.shuffle(rng);
            all.truncate(k);
            return all;
        }
        for _ in 0..3 * n {
            if out.len() >= k {
                break;
            }
            let i = rng.gen_range(1..n);
            if eligible(i) && !out.contains(&i) {
                out.push(i);
            }
        }
        out
    }
}

// The member table dominates a simulator's memory: keep an entry at 72 bytes.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Member>() <= 72);
