//! The keyed state: what the speaker was sent, by Service id. Each Service's candidate set
//! is held once for every Service that has the same one: with `externalTrafficPolicy:
//! Cluster` every Service's candidates are every eligible Node, so the builder would
//! otherwise keep one copy of the Node names per Service (at 100 Nodes, about 4 KiB each).
//! The specs handed on carry the shared set, so the speaker core holds it once as well.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use vigil_speaker::model::{NodeSet, ServiceSpec};

/// What the speaker was sent, by Service id, the candidate sets shared.
#[derive(Debug, Default)]
pub(crate) struct Sent {
    specs: BTreeMap<String, ServiceSpec>,
    /// Every candidate set some spec holds, with how many specs hold it. Counted here rather
    /// than read from the `Arc`: the speaker core holds the same sets (the upserts carry
    /// them), so a set's strong count says nothing about this map's specs.
    node_sets: HashMap<NodeSet, usize>,
}

impl Sent {
    /// Whether `spec` (by its id) is what was sent. `ServiceSpec`'s equality names every
    /// field, and compares a shared set by pointer first.
    pub(crate) fn is(&self, spec: &ServiceSpec) -> bool {
        self.specs.get(&spec.id) == Some(spec)
    }

    /// Records `spec` as sent, replacing what was sent for its id, and returns it with its
    /// candidate set swapped for the shared one: send that, so the core shares it too.
    pub(crate) fn insert(&mut self, mut spec: ServiceSpec) -> ServiceSpec {
        spec.nodes = spec.nodes.take().map(|set| self.intern(set));
        if let Some(old) = self.specs.insert(spec.id.clone(), spec.clone()) {
            self.release(old);
        }
        spec
    }

    /// Forgets Service `id`; returns whether it had been sent.
    pub(crate) fn remove(&mut self, id: &str) -> bool {
        match self.specs.remove(id) {
            Some(old) => {
                self.release(old);
                true
            }
            None => false,
        }
    }

    /// The ids sent.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &String> {
        self.specs.keys()
    }

    /// Every spec sent, whole, in id order (the candidate sets shared, not copied).
    pub(crate) fn specs(&self) -> Vec<ServiceSpec> {
        self.specs.values().cloned().collect()
    }

    /// The candidate sets held (for tests: how well they are shared).
    #[cfg(test)]
    fn node_sets(&self) -> usize {
        self.node_sets.len()
    }

    fn intern(&mut self, set: NodeSet) -> NodeSet {
        match self.node_sets.entry(set) {
            Entry::Occupied(mut held) => {
                *held.get_mut() += 1;
                Arc::clone(held.key())
            }
            Entry::Vacant(new) => {
                let shared = Arc::clone(new.key());
                new.insert(1);
                shared
            }
        }
    }

    /// A set no spec holds any more is dropped from the map (the core may still hold it
    /// until its own spec is replaced).
    fn release(&mut self, old: ServiceSpec) {
        let Some(set) = old.nodes else {
            return;
        };
        if let Some(holders) = self.node_sets.get_mut(&set) {
            *holders -= 1;
            if *holders == 0 {
                self.node_sets.remove(&set);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, nodes: Option<&[&str]>) -> ServiceSpec {
        ServiceSpec {
            nodes: nodes.map(|n| Arc::new(n.iter().map(|s| s.to_string()).collect())),
            ..ServiceSpec::new(id, ["198.18.0.1".parse().unwrap()])
        }
    }

    #[test]
    fn candidate_sets_are_shared_and_dropped_with_their_last_service() {
        let mut sent = Sent::default();
        let all = ["a", "b", "c"];
        // What the core is handed: one set for every Service with the same candidates.
        let handed: Vec<ServiceSpec> = (0..100)
            .map(|i| sent.insert(spec(&format!("ns/s{i}"), Some(&all))))
            .collect();
        let first = handed[0].nodes.as_ref().unwrap();
        assert!(
            handed
                .iter()
                .all(|s| Arc::ptr_eq(s.nodes.as_ref().unwrap(), first))
        );
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

        // The last Service with a set gone (changed or removed): the set goes with it, even
        // while the core still holds it.
        let held_by_core = sent.insert(spec("ns/local", Some(&all)));
        assert_eq!(sent.node_sets(), 1);
        for i in 0..100 {
            assert!(sent.remove(&format!("ns/s{i}")));
        }
        assert!(!sent.remove("ns/s0"));
        assert_eq!(sent.node_sets(), 1);
        assert!(sent.remove("ns/local"));
        assert_eq!(sent.node_sets(), 0);
        assert_eq!(Arc::strong_count(held_by_core.nodes.as_ref().unwrap()), 101);
        assert_eq!(sent.specs(), vec![spec("ns/any", None)]);
        assert_eq!(sent.ids().collect::<Vec<_>>(), ["ns/any"]);
    }
}
