//! What a speaker tells the others about itself through gossip node metadata, and the view of
//! a member the election works on.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// memberlist's limit on node metadata.
pub const MAX_META_LEN: usize = 512;

/// A speaker's published state: its labels, the services whose health check fails on it, and
/// whether it is still in its fail-back hold-down.
///
/// Encoded as compact JSON with one-letter keys (metadata is capped at [`MAX_META_LEN`]
/// bytes). Absent or foreign metadata (a Go memberlist node, a MetalLB speaker) decodes as the
/// default: no labels, nothing failing, settled, so such nodes are candidates as MetalLB's
/// election would make them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// Node labels, matched by services' node selectors.
    #[serde(rename = "l", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Services whose health check does not (yet) pass on this node.
    #[serde(rename = "f", default, skip_serializing_if = "BTreeSet::is_empty")]
    pub failing: BTreeSet<String>,
    /// Still in the fail-back hold-down: rank after every settled candidate.
    #[serde(rename = "h", default, skip_serializing_if = "is_false")]
    pub holding: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl NodeMeta {
    /// The metadata bytes to gossip.
    pub fn encode(&self) -> Vec<u8> {
        if *self == Self::default() {
            return Vec::new();
        }
        // Serialising maps and sets of strings cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Reads a member's metadata; anything that is not ours counts as the default.
    pub fn decode(bytes: &[u8]) -> Self {
        serde_json::from_slice(bytes).unwrap_or_default()
    }
}

/// One member as the election sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Its gossip name (the node name MetalLB hashes).
    pub name: String,
    /// Alive or suspect: a suspect member is still a candidate, as in MetalLB.
    pub live: bool,
    /// What it published.
    pub meta: NodeMeta,
}

impl NodeView {
    /// A live member with the given metadata.
    pub fn live(name: impl Into<String>, meta: NodeMeta) -> Self {
        Self {
            name: name.into(),
            live: true,
            meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_meta_is_empty_and_foreign_meta_is_default() {
        assert!(NodeMeta::default().encode().is_empty());
        assert_eq!(NodeMeta::decode(b""), NodeMeta::default());
        assert_eq!(NodeMeta::decode(b"\x01\x02role=web"), NodeMeta::default());
    }

    #[test]
    fn meta_round_trips_compactly() {
        let meta = NodeMeta {
            labels: [("zone".to_string(), "a".to_string())].into(),
            failing: ["web".to_string()].into(),
            holding: true,
        };
        let bytes = meta.encode();
        assert_eq!(bytes, br#"{"l":{"zone":"a"},"f":["web"],"h":true}"#);
        assert_eq!(NodeMeta::decode(&bytes), meta);
    }
}
