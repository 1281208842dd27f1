//! A service: VIPs, and which nodes may answer for them.

use crate::meta::NodeView;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// A load-balanced service as the election needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Service {
    /// Unique name.
    pub name: String,
    /// Its VIPs; the first one is the election key, as in MetalLB (a dual-stack service is
    /// announced from one node).
    pub vips: Vec<IpAddr>,
    /// If set, only these nodes may answer.
    pub nodes: Option<BTreeSet<String>>,
    /// Labels a node must carry (all of them, with these values).
    pub node_selector: BTreeMap<String, String>,
    /// Whether the service has a health check: then only nodes that do not list it as
    /// failing may answer.
    pub health_checked: bool,
    /// Election preference per node, higher first, before the hash order: MetalLB's
    /// `preferredNodeSelectors` score (the sum of the matching weights of every
    /// L2Advertisement that applies). An absent node scores 0; empty: hash order alone.
    pub preferences: BTreeMap<String, i64>,
}

impl Service {
    /// Whether `node` may answer for this service (liveness aside).
    pub fn admits(&self, node: &NodeView) -> bool {
        let listed = self.nodes.as_ref().is_none_or(|n| n.contains(&node.name));
        let labelled = self
            .node_selector
            .iter()
            .all(|(k, v)| node.meta.labels.get(k) == Some(v));
        let healthy = !self.health_checked || !node.meta.failing.contains(&self.name);
        listed && labelled && healthy
    }
}
