//! The virtual network: addresses, links (loss, latency, jitter) and partitions.

use core::time::Duration;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A node's index in the simulation.
pub type NodeId = usize;

/// The gossip port every simulated node listens on.
pub const PORT: u16 = 7946;

/// First address of the benchmark range 198.18.0.0/15 that node addresses are taken from.
const BASE: u32 = u32::from_be_bytes([198, 18, 0, 0]);

/// Most nodes that fit in 198.18.0.0/15 (node `i` is `198.18.0.0 + i + 1`).
pub const MAX_NODES: usize = (1 << 17) - 2;

/// The address of node `id`: `198.18.x.y:7946`. Nothing is ever sent on a real network.
pub fn addr_of(id: NodeId) -> SocketAddr {
    assert!(id < MAX_NODES, "at most {MAX_NODES} nodes");
    let ip = Ipv4Addr::from(BASE + id as u32 + 1);
    SocketAddr::new(IpAddr::V4(ip), PORT)
}

/// The node an address belongs to, if it is a simulated one.
pub fn node_of(addr: SocketAddr) -> Option<NodeId> {
    let IpAddr::V4(ip) = addr.ip() else {
        return None;
    };
    if addr.port() != PORT {
        return None;
    }
    let n = u32::from(ip).checked_sub(BASE + 1)? as usize;
    (n < MAX_NODES).then_some(n)
}

/// The name of node `id` (10 bytes for up to 100,000 nodes, like a short host name).
pub fn name_of(id: NodeId) -> String {
    format!("node-{id:05}")
}

/// The node a name belongs to.
pub fn node_named(name: &str) -> Option<NodeId> {
    name.strip_prefix("node-")?.parse().ok()
}

/// One direction of a link between two nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// Probability that a datagram is lost (0.0..=1.0). TCP streams are never lost.
    pub loss: f64,
    /// One-way base latency.
    pub latency: Duration,
    /// Extra one-way delay, uniform in `[0, jitter)`.
    pub jitter: Duration,
}

impl Link {
    /// A LAN link: 100 µs one way plus up to 100 µs jitter, no loss.
    pub const LAN: Self = Self {
        loss: 0.0,
        latency: Duration::from_micros(100),
        jitter: Duration::from_micros(100),
    };

    /// This link with a different loss rate.
    pub fn with_loss(self, loss: f64) -> Self {
        Self { loss, ..self }
    }
}

impl Default for Link {
    fn default() -> Self {
        Self::LAN
    }
}

/// The links between nodes: one default, per-direction overrides, and partition groups.
#[derive(Debug, Clone, Default)]
pub struct Network {
    /// Every link not overridden.
    pub default_link: Link,
    overrides: HashMap<(NodeId, NodeId), Link>,
    /// Partition group per node; nodes in different groups cannot reach each other. Empty
    /// means no partition.
    groups: Vec<u32>,
}

impl Network {
    /// A network where every link is `link`.
    pub fn new(link: Link) -> Self {
        Self {
            default_link: link,
            ..Self::default()
        }
    }

    /// The link from `a` to `b`.
    pub fn link(&self, a: NodeId, b: NodeId) -> Link {
        if self.overrides.is_empty() {
            return self.default_link;
        }
        self.overrides
            .get(&(a, b))
            .copied()
            .unwrap_or(self.default_link)
    }

    /// Overrides the link from `a` to `b` (one direction).
    pub fn set_link(&mut self, a: NodeId, b: NodeId, link: Link) {
        self.overrides.insert((a, b), link);
    }

    /// Removes every override.
    pub fn clear_overrides(&mut self) {
        self.overrides.clear();
    }

    /// Splits the nodes: each listed group can only reach itself; unlisted nodes form one
    /// more group together.
    pub fn partition(&mut self, n: usize, groups: &[&[NodeId]]) {
        self.groups = vec![0; n];
        for (g, members) in groups.iter().enumerate() {
            for &m in *members {
                self.groups[m] = g as u32 + 1;
            }
        }
    }

    /// Ends any partition.
    pub fn heal(&mut self) {
        self.groups.clear();
    }

    /// Whether a partition separates `a` from `b`.
    pub fn partitioned(&self, a: NodeId, b: NodeId) -> bool {
        !self.groups.is_empty()
            && self.groups.get(a).copied().unwrap_or(0) != self.groups.get(b).copied().unwrap_or(0)
    }

    /// Whether any partition is in force.
    pub fn is_partitioned(&self) -> bool {
        !self.groups.is_empty()
    }

    pub(crate) fn grow(&mut self, n: usize) {
        if !self.groups.is_empty() && self.groups.len() < n {
            self.groups.resize(n, 0);
        }
    }
}

impl Link {
    /// Parses a loss rate given as a fraction (`0.05`) or a percentage (`5%`), 0 to 1.
    pub fn parse_loss(s: &str) -> Result<f64, String> {
        let s = s.trim();
        let (num, pct) = match s.strip_suffix('%') {
            Some(n) => (n, true),
            None => (s, false),
        };
        let v: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not a loss rate (try 0.05 or 5%)"))?;
        let v = if pct { v / 100.0 } else { v };
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("loss {s:?} is outside 0..1 (0%..100%)"));
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_names_round_trip() {
        for id in [0, 1, 254, 255, 256, 9_999, MAX_NODES - 1] {
            assert_eq!(node_of(addr_of(id)), Some(id));
            assert_eq!(node_named(&name_of(id)), Some(id));
        }
        assert_eq!(addr_of(0).to_string(), "198.18.0.1:7946");
        assert_eq!(addr_of(9_999).to_string(), "198.18.39.16:7946");
        assert_eq!(node_of("198.18.0.1:7947".parse().unwrap()), None);
        assert_eq!(node_of("10.0.0.1:7946".parse().unwrap()), None);
    }

    #[test]
    fn partitions_separate_groups() {
        let mut net = Network::default();
        net.partition(5, &[&[0, 1]]);
        assert!(!net.partitioned(0, 1));
        assert!(net.partitioned(0, 2));
        assert!(!net.partitioned(2, 4));
        net.heal();
        assert!(!net.partitioned(0, 2));
    }
}
