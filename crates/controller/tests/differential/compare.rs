//! The comparison of one step: what differs between the two sides, before the allowed list
//! is consulted.

use crate::seen::{Seen, Shown, raised};
use std::collections::BTreeSet;

/// The Service's `status.loadBalancer.ingress` IPs, in order.
pub(crate) const INGRESS: &str = "ingress";
/// The Service's `metallb.io/ip-allocated-from-pool`.
pub(crate) const POOL: &str = "ip-allocated-from-pool";
/// The event reasons raised about the Service in the step.
pub(crate) const EVENTS: &str = "event reasons";
/// A pool's status counters.
pub(crate) const POOL_STATUS: &str = "pool status";

/// What differed in one step.
#[derive(Debug, Clone)]
pub(crate) struct Difference {
    /// One of [`INGRESS`], [`POOL`], [`EVENTS`], [`POOL_STATUS`].
    pub(crate) what: &'static str,
    /// The Service (`namespace/name`), or the pool for [`POOL_STATUS`].
    pub(crate) key: String,
    pub(crate) metallb: String,
    pub(crate) vigil: String,
    /// For event reasons: those only MetalLB raised, and those only vigil raised.
    pub(crate) only: Option<(Reasons, Reasons)>,
}

impl Difference {
    /// Whether it is about a Service (not a pool).
    pub(crate) fn is_service(&self) -> bool {
        self.what != POOL_STATUS
    }
}

/// (type, reason) pairs.
pub(crate) type Reasons = BTreeSet<(String, String)>;

/// Compares what the step did on both sides.
pub(crate) fn compare(before: &(Seen, Seen), after: &(Seen, Seen)) -> Vec<Difference> {
    let (m, v) = after;
    let mut out = Vec::new();
    let keys: BTreeSet<&String> = m.services.keys().chain(v.services.keys()).collect();
    for key in &keys {
        let (a, b) = (m.services.get(*key), v.services.get(*key));
        let ingress = |s: Option<&Shown>| s.map(|s| s.ingress.clone());
        let pool = |s: Option<&Shown>| s.and_then(|s| s.pool.clone());
        if ingress(a) != ingress(b) {
            out.push(Difference {
                what: INGRESS,
                key: key.to_string(),
                metallb: format!("{:?}", ingress(a)),
                vigil: format!("{:?}", ingress(b)),
                only: None,
            });
        }
        if pool(a) != pool(b) {
            out.push(Difference {
                what: POOL,
                key: key.to_string(),
                metallb: format!("{:?}", pool(a)),
                vigil: format!("{:?}", pool(b)),
                only: None,
            });
        }
    }
    let (rm, rv) = (raised(&before.0, m), raised(&before.1, v));
    let keys: BTreeSet<&String> = rm.keys().chain(rv.keys()).collect();
    for key in keys {
        // A Service deleted in this step: its last events are of no interest.
        if !m.services.contains_key(key) && !v.services.contains_key(key) {
            continue;
        }
        let empty = BTreeSet::new();
        let (a, b) = (rm.get(key).unwrap_or(&empty), rv.get(key).unwrap_or(&empty));
        if a != b {
            out.push(Difference {
                what: EVENTS,
                key: key.clone(),
                metallb: format!("{a:?}"),
                vigil: format!("{b:?}"),
                only: Some((a - b, b - a)),
            });
        }
    }
    let names: BTreeSet<&String> = m.pools.keys().chain(v.pools.keys()).collect();
    for name in names {
        let (a, b) = (
            m.pools.get(name).map(|p| p.1),
            v.pools.get(name).map(|p| p.1),
        );
        if a != b {
            out.push(Difference {
                what: POOL_STATUS,
                key: name.clone(),
                metallb: format!("{a:?}"),
                vigil: format!("{b:?}"),
                only: None,
            });
        }
    }
    out
}
