//! The pool configuration as MetalLB compares it to decide whether to reprocess: the pools
//! as read, and for each pool with `namespaceSelectors` the namespaces they match (MetalLB
//! resolves them when it reads the configuration). A status write, or a namespace label no
//! selector looks at, is no change.

use std::collections::{BTreeMap, BTreeSet};
use vigil_lb::pool::{Labels, Pools};
use vigil_metallb::ConfigError;
use vigil_metallb::crd::IPAddressPool;
use vigil_metallb::pools;

/// The configuration the allocator works with, as compared between changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigView {
    pub(crate) pools: Pools,
    /// Pool name → the namespaces its `namespaceSelectors` match.
    selected: BTreeMap<String, BTreeSet<String>>,
}

impl ConfigView {
    /// Reads `objects` (any order) as one configuration, with `namespaces` (name → labels)
    /// resolving the namespace selectors.
    pub(crate) fn read<'a>(
        objects: impl IntoIterator<Item = &'a IPAddressPool>,
        namespaces: &BTreeMap<String, Labels>,
    ) -> Result<Self, ConfigError> {
        let mut sorted: Vec<&IPAddressPool> = objects.into_iter().collect();
        sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let pools = pools::pools(sorted)?;
        let mut selected = BTreeMap::new();
        for pool in pools.iter() {
            let Some(sa) = pool.service_allocation() else {
                continue;
            };
            if sa.namespace_selectors.is_empty() {
                continue;
            }
            let matching = namespaces
                .iter()
                .filter(|(_, labels)| sa.namespace_selectors.iter().any(|s| s.matches(labels)))
                .map(|(name, _)| name.clone())
                .collect();
            selected.insert(pool.name().to_string(), matching);
        }
        Ok(Self { pools, selected })
    }
}
