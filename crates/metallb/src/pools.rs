//! IPAddressPools as the controller's allocator takes them (`vigil_lb::pool`), read by the same
//! code as the speaker's configuration ([`crate::config::read_pools`]), so that a pool one of
//! them refuses the other refuses too, with MetalLB's message.

use crate::config::{self, ConfigError, PoolProblem};
use crate::crd::IPAddressPool;
use vigil_lb::pool::{PoolSpec, Pools, ServiceAllocation};

/// Every pool of the namespace, checked as MetalLB checks them, as one allocator
/// configuration.
pub fn pools<'a>(
    objects: impl IntoIterator<Item = &'a IPAddressPool>,
) -> Result<Pools, ConfigError> {
    let objects: Vec<IPAddressPool> = objects.into_iter().cloned().collect();
    let read = config::read_pools(&objects)?;
    let specs = read.into_values().map(|pool| PoolSpec {
        name: pool.name,
        addresses: pool.addresses,
        auto_assign: pool.auto_assign,
        avoid_buggy_ips: pool.avoid_buggy_ips,
        service_allocation: pool.service_allocation.map(|sa| ServiceAllocation {
            priority: sa.priority,
            namespaces: sa.namespaces,
            namespace_selectors: sa.namespace_selectors,
            service_selectors: sa.service_selectors,
        }),
    });
    // The reader above applied every rule the allocator's own check does (names, addresses,
    // overlaps, repeated namespaces and selectors), so this cannot refuse what it accepted;
    // if it ever did, the pools are refused all the same, with its reason.
    Pools::new(specs).map_err(|e| ConfigError::Pool {
        pool: String::new(),
        problem: Box::new(PoolProblem::Allocator(e.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_lb::selector::Selector;

    fn pool(json: serde_json::Value) -> IPAddressPool {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn spec_fields_and_defaults() {
        let p = pool(serde_json::json!({
            "metadata": {"name": "a"},
            "spec": {"addresses": ["198.18.0.0/30"], "serviceAllocation": {
                "priority": 5, "namespaces": ["x"],
                "serviceSelectors": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]
            }}
        }));
        let read = pools([&p]).unwrap();
        let a = read.get("a").unwrap();
        assert!(a.auto_assign() && !a.avoid_buggy_ips());
        let sa = a.service_allocation().unwrap();
        assert_eq!(
            (sa.priority, sa.namespaces.clone()),
            (5, vec!["x".to_string()])
        );
        assert_eq!(sa.service_selectors, [Selector::parse("k in (v)").unwrap()]);
    }

    #[test]
    fn refusals_are_the_speakers_with_metallbs_words() {
        let p = pool(serde_json::json!({
            "metadata": {"name": "a"},
            "spec": {"addresses": ["198.18.0.0/30"], "serviceAllocation": {
                "namespaceSelectors": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
            }}
        }));
        let e = pools([&p]).unwrap_err();
        assert_eq!(
            e,
            config::Config::parse(&[p], &[], &[]).unwrap_err(),
            "the speaker refuses it the same way"
        );
        let e = e.to_string();
        assert!(
            e.contains("address pool a") && e.contains("namespaceSelectors"),
            "{e}"
        );
        let leading_zeros = pool(serde_json::json!({
            "metadata": {"name": "z"}, "spec": {"addresses": ["198.18.0.0/00024"]}
        }));
        assert!(
            pools([&leading_zeros])
                .unwrap()
                .get("z")
                .unwrap()
                .owns("198.18.0.9".parse().unwrap())
        );
    }
}
