//! What this leader last wrote as each pool's status. MetalLB writes a pool's status when its
//! counters change, and again when someone else changes that status.
//!
//! A write is remembered with the resourceVersion it produced. Until the pool watch has
//! delivered that version the cache shows an older status, which is no reason to write
//! again; once it has, every later version is newer than the write, so a status that differs
//! from it was written by someone else.

use std::collections::BTreeMap;
use vigil_lb::pool::{Pools, StatusCounters};
use vigil_metallb::crd::{IPAddressPool, IPAddressPoolStatus};

/// The status MetalLB's controller writes for figures `c` (`Allocator::status_counters`,
/// which counts an `avoidBuggyIPs` pool as MetalLB does).
pub fn status_of(c: StatusCounters) -> IPAddressPoolStatus {
    IPAddressPoolStatus {
        assigned_ipv4: Some(c.assigned_ipv4),
        assigned_ipv6: Some(c.assigned_ipv6),
        available_ipv4: Some(c.available_ipv4),
        available_ipv6: Some(c.available_ipv6),
    }
}

/// The pool status writes this leader made, by pool name.
#[derive(Debug, Default)]
pub(crate) struct PoolStatusWrites(BTreeMap<String, PoolStatusWrite>);

#[derive(Debug)]
struct PoolStatusWrite {
    /// The pool written (a pool deleted and made again under its name is another pool).
    uid: Option<String>,
    counters: StatusCounters,
    /// The version the write produced.
    resource_version: Option<String>,
    /// Whether the watch has delivered that version.
    seen: bool,
}

impl PoolStatusWrites {
    /// Whether `cached` needs no status write for `counters`: this leader wrote them to this
    /// pool (perhaps not in the cache yet), or the cache shows them already.
    pub(crate) fn up_to_date(&mut self, cached: &IPAddressPool, counters: StatusCounters) -> bool {
        let name = cached.metadata.name.clone().unwrap_or_default();
        if self
            .0
            .get(&name)
            .is_some_and(|w| w.uid == cached.metadata.uid && w.counters == counters)
        {
            return true;
        }
        if cached.status.clone().unwrap_or_default() != status_of(counters) {
            return false;
        }
        self.0.insert(
            name,
            PoolStatusWrite {
                uid: cached.metadata.uid.clone(),
                counters,
                resource_version: cached.metadata.resource_version.clone(),
                seen: true,
            },
        );
        true
    }

    /// The API server stored `counters` as pool `name`'s status, as object `uid` at version
    /// `resource_version`.
    pub(crate) fn wrote(
        &mut self,
        name: &str,
        uid: Option<String>,
        resource_version: Option<String>,
        counters: StatusCounters,
    ) {
        self.0.insert(
            name.to_string(),
            PoolStatusWrite {
                uid,
                counters,
                resource_version,
                seen: false,
            },
        );
    }

    /// A pool as its watch delivered it. Returns whether someone else changed its status
    /// after this leader's last write to it (which is then forgotten, so the next
    /// [`Self::up_to_date`] compares with the cache and asks for a write).
    pub(crate) fn observed(&mut self, pool: &IPAddressPool) -> bool {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let Some(w) = self.0.get_mut(&name) else {
            return false;
        };
        if w.uid != pool.metadata.uid {
            return false;
        }
        if w.resource_version.is_some() && w.resource_version == pool.metadata.resource_version {
            w.seen = true;
            return false;
        }
        if w.seen && pool.status.clone().unwrap_or_default() != status_of(w.counters) {
            self.0.remove(&name);
            return true;
        }
        false
    }

    /// Forgets pools no longer configured.
    pub(crate) fn keep_only(&mut self, configured: &Pools) {
        self.0
            .retain(|name, _| configured.iter().any(|p| p.name() == name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(uid: &str, rv: &str, assigned: i64) -> IPAddressPool {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "uid": uid, "resourceVersion": rv},
            "spec": {"addresses": ["198.18.0.0/30"]},
            "status": {"assignedIPv4": assigned, "assignedIPv6": 0,
                       "availableIPv4": 4 - assigned, "availableIPv6": 0},
        }))
        .unwrap()
    }

    fn counters(assigned: i64) -> StatusCounters {
        StatusCounters {
            assigned_ipv4: assigned,
            available_ipv4: 4 - assigned,
            ..StatusCounters::default()
        }
    }

    fn wrote(w: &mut PoolStatusWrites, uid: &str, rv: &str, assigned: i64) {
        w.wrote("p", Some(uid.into()), Some(rv.into()), counters(assigned));
    }

    #[test]
    fn a_pool_status_is_written_once_per_change_and_again_after_someone_elses() {
        let mut w = PoolStatusWrites::default();
        // The cache shows the counters: nothing to write.
        assert!(w.up_to_date(&pool("u", "1", 0), counters(0)));
        // They change: write; once written, the lagging cache (still 0) is no reason to write.
        assert!(!w.up_to_date(&pool("u", "1", 0), counters(1)));
        wrote(&mut w, "u", "2", 1);
        assert!(w.up_to_date(&pool("u", "1", 0), counters(1)));
        // Two writes in a row, the watch behind both: older versions are not someone else's.
        wrote(&mut w, "u", "3", 2);
        assert!(!w.observed(&pool("u", "2", 1)));
        assert!(!w.observed(&pool("u", "3", 2)));
        // After our write was seen, a different status is someone else's: write again.
        assert!(w.observed(&pool("u", "4", 0)));
        assert!(!w.up_to_date(&pool("u", "4", 0), counters(2)));
        // A pool made again under the same name is another pool.
        wrote(&mut w, "u", "5", 2);
        assert!(!w.up_to_date(&pool("v", "6", 0), counters(2)));
    }
}
