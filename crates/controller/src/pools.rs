//! IPAddressPool objects (vigil-k8s's CRD types) read as `lb::pool` specs, and the pool
//! status the allocator's counters become.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as ApiSelector;
use vigil_k8s::crd::{IPAddressPool, IPAddressPoolStatus};
use vigil_lb::pool::{
    ConfigError, LabelSelector, Operator, PoolCounters, PoolSpec, Pools, Requirement,
    SelectorError, ServiceAllocation,
};

/// A pool that cannot be read, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// A selector of `spec.serviceAllocation` is not valid.
    #[error("IPAddressPool {pool}: spec.serviceAllocation.{field}: {source}")]
    Selector {
        /// The pool.
        pool: String,
        /// `namespaceSelectors` or `serviceSelectors`.
        field: &'static str,
        /// What is wrong.
        source: SelectorError,
    },
    /// `spec.serviceAllocation.priority` does not fit an i32.
    #[error("IPAddressPool {pool}: spec.serviceAllocation.priority {priority} is out of range")]
    Priority {
        /// The pool.
        pool: String,
        /// The value.
        priority: i64,
    },
    /// The pools together are not valid (overlaps, bad addresses...).
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// An API label selector as `lb::pool` matches it.
pub fn selector(api: &ApiSelector) -> Result<LabelSelector, SelectorError> {
    let match_expressions = api
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            Ok(Requirement {
                key: e.key.clone(),
                operator: e.operator.parse::<Operator>()?,
                values: e.values.clone().unwrap_or_default(),
            })
        })
        .collect::<Result<Vec<_>, SelectorError>>()?;
    let sel = LabelSelector {
        match_labels: api.match_labels.clone().unwrap_or_default(),
        match_expressions,
    };
    sel.validate()?;
    Ok(sel)
}

/// One IPAddressPool as an `lb::pool` spec (MetalLB's defaults: `autoAssign` true).
pub fn pool_spec(pool: &IPAddressPool) -> Result<PoolSpec, PoolError> {
    let name = pool.metadata.name.clone().unwrap_or_default();
    let spec = &pool.spec;
    let service_allocation = match &spec.service_allocation {
        None => None,
        Some(sa) => {
            let selectors = |field: &'static str, list: &Option<Vec<ApiSelector>>| {
                list.iter()
                    .flatten()
                    .map(|s| {
                        selector(s).map_err(|source| PoolError::Selector {
                            pool: name.clone(),
                            field,
                            source,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            let priority = sa.priority.unwrap_or(0);
            Some(ServiceAllocation {
                priority: i32::try_from(priority).map_err(|_| PoolError::Priority {
                    pool: name.clone(),
                    priority,
                })?,
                namespaces: sa.namespaces.clone().unwrap_or_default(),
                namespace_selectors: selectors("namespaceSelectors", &sa.namespace_selectors)?,
                service_selectors: selectors("serviceSelectors", &sa.service_selectors)?,
            })
        }
    };
    Ok(PoolSpec {
        name,
        addresses: spec.addresses.clone().unwrap_or_default(),
        auto_assign: spec.auto_assign.unwrap_or(true),
        avoid_buggy_ips: spec.avoid_buggy_ips.unwrap_or(false),
        service_allocation,
    })
}

/// Every pool of the namespace as one checked configuration.
pub fn pools<'a>(objects: impl IntoIterator<Item = &'a IPAddressPool>) -> Result<Pools, PoolError> {
    let specs = objects
        .into_iter()
        .map(pool_spec)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Pools::new(specs)?)
}

/// The status MetalLB's controller writes for counters `c` (values above `i64::MAX` are
/// clamped, as the CRD's fields are signed).
pub fn status(c: PoolCounters) -> IPAddressPoolStatus {
    let n = |v: u64| Some(i64::try_from(v).unwrap_or(i64::MAX));
    IPAddressPoolStatus {
        assigned_ipv4: n(c.assigned_ipv4),
        assigned_ipv6: n(c.assigned_ipv6),
        available_ipv4: n(c.available_ipv4),
        available_ipv6: n(c.available_ipv6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let s = pool_spec(&p).unwrap();
        assert!(s.auto_assign && !s.avoid_buggy_ips);
        let sa = s.service_allocation.unwrap();
        assert_eq!((sa.priority, sa.namespaces), (5, vec!["x".to_string()]));
        assert_eq!(
            sa.service_selectors[0].match_expressions[0].operator,
            Operator::In
        );
    }

    #[test]
    fn bad_selector_names_pool_and_field() {
        let p = pool(serde_json::json!({
            "metadata": {"name": "a"},
            "spec": {"addresses": ["198.18.0.0/30"], "serviceAllocation": {
                "namespaceSelectors": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]
            }}
        }));
        let e = pool_spec(&p).unwrap_err().to_string();
        assert!(
            e.contains("IPAddressPool a") && e.contains("namespaceSelectors"),
            "{e}"
        );
    }
}
