//! What the simulator measures: failures and who learned of them when, false positives,
//! traffic, and a hash of the whole trace.

use crate::net::NodeId;
use core::time::Duration;

/// Traffic counters, summed over all nodes. Counted at the sender, lost datagrams included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    /// UDP datagrams sent.
    pub packets: u64,
    /// UDP bytes sent (the sealed datagrams, exactly as they would go on the wire).
    pub bytes: u64,
    /// Datagrams lost on a link (loss rate) or dropped by a partition.
    pub dropped: u64,
    /// TCP exchanges started.
    pub streams: u64,
    /// TCP bytes, requests and replies.
    pub stream_bytes: u64,
}

impl core::ops::Sub for Traffic {
    type Output = Self;

    fn sub(self, o: Self) -> Self {
        Self {
            packets: self.packets - o.packets,
            bytes: self.bytes - o.bytes,
            dropped: self.dropped - o.dropped,
            streams: self.streams - o.streams,
            stream_bytes: self.stream_bytes - o.stream_bytes,
        }
    }
}

/// How a node went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The host vanished (or the process was killed): peers must detect it.
    Crash,
    /// It left cleanly.
    Leave,
}

/// One node going away, and when each other node learned of it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The node that went away.
    pub node: NodeId,
    /// Crash or leave.
    pub kind: FailureKind,
    /// Virtual time of the crash, or of the call to `leave`.
    pub at: Duration,
    /// How many other nodes were up at that moment (the ones expected to learn of it).
    pub observers: usize,
    /// For each node that learned of it: who, and after how long. `Dead` events count for
    /// crashes; `Dead` or `Left` for leaves.
    pub learned: Vec<(NodeId, Duration)>,
    /// How many of those learned it as `Dead` (for a leave, this should be zero).
    pub as_dead: usize,
    /// Whether the failure is still open (the node has not come back).
    pub open: bool,
    seen: Vec<bool>,
}

impl Failure {
    pub(crate) fn new(node: NodeId, kind: FailureKind, at: Duration, observers: usize) -> Self {
        Self {
            node,
            kind,
            at,
            observers,
            learned: Vec::new(),
            as_dead: 0,
            open: true,
            seen: Vec::new(),
        }
    }

    pub(crate) fn learn(&mut self, by: NodeId, now: Duration, dead: bool) {
        if self.seen.len() <= by {
            self.seen.resize(by + 1, false);
        }
        if self.seen[by] {
            return;
        }
        self.seen[by] = true;
        self.learned.push((by, now.saturating_sub(self.at)));
        self.as_dead += usize::from(dead);
    }

    /// Time until the first node learned of it.
    pub fn first(&self) -> Option<Duration> {
        self.learned.iter().map(|&(_, d)| d).min()
    }

    /// Time until every observer had learned of it (`None` while some have not).
    pub fn all(&self) -> Option<Duration> {
        (self.learned.len() >= self.observers)
            .then(|| self.learned.iter().map(|&(_, d)| d).max())
            .flatten()
    }

    /// Whether every observer has learned of it.
    pub fn complete(&self) -> bool {
        self.learned.len() >= self.observers
    }
}

/// A `Dead` verdict about a node that was up, reachable from the declarer, and neither frozen
/// nor crashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FalsePositive {
    /// When.
    pub at: Duration,
    /// Who declared it.
    pub by: NodeId,
    /// About whom.
    pub about: NodeId,
}

/// Everything the simulator measured so far.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Traffic since the start.
    pub traffic: Traffic,
    /// Every crash and leave, in order.
    pub failures: Vec<Failure>,
    /// `Dead` verdicts about healthy nodes.
    pub false_positives: Vec<FalsePositive>,
    /// `Suspect` events about healthy nodes (a secondary figure: suspicion is cheap if refuted).
    pub false_suspicions: u64,
    /// `Dead` events about nodes that were frozen, partitioned away from the declarer, or
    /// already down (correct verdicts that are not part of a tracked failure).
    pub expected_deaths: u64,
    /// Refutations seen (`Refuted` events: a suspect came back).
    pub refutations_seen: u64,
    /// `Join` events.
    pub joins_seen: u64,
    /// Engine events of all kinds delivered to the simulator.
    pub engine_events: u64,
    /// Simulator events processed (deliveries and wake-ups).
    pub sim_events: u64,
    /// Times a node asked to be woken at an instant that had already passed, repeatedly.
    pub engine_spins: u64,
    /// Per node: `Suspect` events about it, at any node, in any circumstances.
    pub suspected: Vec<u32>,
    /// Per node: `Dead` events about it, at any node, in any circumstances.
    pub declared_dead: Vec<u32>,
}

impl Metrics {
    /// False positives at or after `since`.
    pub fn false_positives_since(&self, since: Duration) -> usize {
        self.false_positives
            .iter()
            .filter(|f| f.at >= since)
            .count()
    }
}

/// Nearest-rank percentile of sorted samples (`p` in 0..=100).
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// p50, p99 and max of some samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spread {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50: Option<Duration>,
    /// 99th percentile.
    pub p99: Option<Duration>,
    /// Largest.
    pub max: Option<Duration>,
}

impl Spread {
    /// The spread of `samples`.
    pub fn of(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self {
            n: samples.len(),
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
            max: samples.last().copied(),
        }
    }
}

/// A 64-bit FNV-1a hash, for the trace (stable across runs, platforms and Rust versions).
#[derive(Debug, Clone, Copy)]
pub struct TraceHash(u64);

impl Default for TraceHash {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl TraceHash {
    /// Mixes in bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 ^= u64::from(x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Mixes in a number.
    pub fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }

    /// The hash so far.
    pub fn value(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&x| Duration::from_millis(x))
                .collect::<Vec<_>>()
        };
        let s = Spread::of(ms(&[5, 1, 4, 2, 3]));
        assert_eq!(s.p50, Some(Duration::from_millis(3)));
        assert_eq!(s.p99, Some(Duration::from_millis(5)));
        assert_eq!(s.max, Some(Duration::from_millis(5)));
        let s = Spread::of(ms(&(1..=100).collect::<Vec<_>>()));
        assert_eq!(s.p99, Some(Duration::from_millis(99)));
        assert_eq!(Spread::of(vec![]).p50, None);
    }
}
