//! The keyed state: what the speaker was sent, by Service id. Each Service's candidate set
//! is held once for every Service that has the same one: with `externalTrafficPolicy:
//! Cluster` every Service's candidates are every eligible Node, so the builder would
//! otherwise keep one copy of the Node names per Service (at 100 Nodes, about 4 KiB each).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use vigil_speaker::model::ServiceSpec;

/// A set of Node names, shared.
type NodeSet = Arc<BTreeSet<String>>;

/// One Service as sent: the spec with its candidates apart.
#[derive(Debug)]
struct Entry {
    /// The spec, `nodes` left `None`.
    spec: ServiceSpec,
    nodes: Option<NodeSet>,
}

impl Entry {
    /// Whether `spec` is what was sent. Every field is named, so that a new one is not
    /// forgotten here.
    fn is(&self, spec: &ServiceSpec) -> bool {
        let ServiceSpec {
            id,
            vips,
            nodes,
            node_selector,
            health_checked,
            interfaces,
            preferences,
        } = spec;
        let sent = &self.spec;
        sent.id == *id
            && sent.vips == *vips
            && self.nodes.as_deref() == nodes.as_ref()
            && sent.node_selector == *node_selector
            && sent.health_checked == *health_checked
            && sent.interfaces == *interfaces
            && sent.preferences == *preferences
    }

    fn to_spec(&self) -> ServiceSpec {
        ServiceSpec {
            nodes: self.nodes.as_deref().cloned(),
            ..self.spec.clone()
        }
    }
}

/// What the speaker was sent, by Service id, the candidate sets shared.
#[derive(Debug, Default)]
pub(crate) struct Sent {
    entries: BTreeMap<String, Entry>,
    /// Every candidate set some entry holds.
    node_sets: HashSet<NodeSet>,
}

impl Sent {
    /// Whether `spec` (by its id) is what was sent.
    pub(crate) fn is(&self, spec: &ServiceSpec) -> bool {
        self.entries.get(&spec.id).is_some_and(|e| e.is(spec))
    }

    /// Records `spec` as sent, replacing what was sent for its id.
    pub(crate) fn insert(&mut self, mut spec: ServiceSpec) {
        let nodes = spec.nodes.take().map(|set| self.intern(set));
        let entry = Entry { spec, nodes };
        if let Some(old) = self.entries.insert(entry.spec.id.clone(), entry) {
            self.release(old);
        }
    }

    /// Forgets Service `id`; returns whether it had been sent.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        match self.entries.remove(id) {
            Some(old) => {
                self.release(old);
                true
            }
            None => false,
        }
    }

    /// The ids sent.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    /// Every spec sent, whole, in id order.
    pub(crate) fn specs(&self) -> Vec<ServiceSpec> {
        self.entries.values().map(Entry::to_spec).collect()
    }

    /// The candidate sets held (for tests: how well they are shared).
    #[cfg(test)]
    fn node_sets(&self) -> usize {
        self.node_sets.len()
    }

    fn intern(&mut self, set: BTreeSet<String>) -> NodeSet {
        if let Some(shared) = self.node_sets.get(&set) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(set);
        self.node_sets.insert(Arc::clone(&shared));
        shared
    }

    /// A set no entry holds any more is dropped (held by the entry and by `node_sets`).
    fn release(&mut self, old: Entry) {
        if let Some(set) = old.nodes
            && Arc::strong_count(&set) == 2
        {
            self.node_sets.remove(&*set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, nodes: Option<&[&str]>) -> ServiceSpec {
        ServiceSpec {
            nodes: nodes.map(|n| n.iter().map(|s| s.to_string()).collect()),
            ..ServiceSpec::new(id, ["198.18.0.1".parse().unwrap()])
        }
    }

    #[test]
    fn candidate_sets_are_shared_and_dropped_with_their_last_service() {
        let mut sent = Sent::default();
        let all = ["a", "b", "c"];
        for i in 0..100 {
            sent.insert(spec(&format!("ns/s{i}"), Some(&all)));
        }
        sent.insert(spec("ns/local", Some(&["a"])));
        sent.insert(spec("ns/any", None));
        assert_eq!(sent.node_sets(), 2);
        assert!(sent.is(&spec("ns/s7", Some(&all))));
        assert!(!sent.is(&spec("ns/s7", Some(&["a", "b"]))));
        assert!(!sent.is(&spec("ns/s7", None)));
        assert!(sent.is(&spec("ns/any", None)));
        assert!(!sent.is(&spec("ns/new", None)));
        let mut moved = spec("ns/s7", Some(&all));
        moved.vips = vec!["198.18.0.2".parse().unwrap()];
        assert!(!sent.is(&moved));

        // The last Service with a set gone (changed or removed): the set goes with it.
        sent.insert(spec("ns/local", Some(&all)));
        assert_eq!(sent.node_sets(), 1);
        for i in 0..100 {
            assert!(sent.remove(&format!("ns/s{i}")));
        }
        assert!(!sent.remove("ns/s0"));
        assert_eq!(sent.node_sets(), 1);
        assert!(sent.remove("ns/local"));
        assert_eq!(sent.node_sets(), 0);
        assert_eq!(sent.specs(), vec![spec("ns/any", None)]);
        assert_eq!(sent.ids().collect::<Vec<_>>(), ["ns/any"]);
    }
}
