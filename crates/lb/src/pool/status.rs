//! A pool's status figures as MetalLB's controller writes them (`IPAddressPool.status`): the
//! allocator's counters, signed as the CRD's fields are, with MetalLB's count of an
//! `avoidBuggyIPs` pool.
//!
//! MetalLB (v0.16.2, `poolCount` in `internal/allocator`) counts a pool CIDR by CIDR, an
//! address range being cut into the fewest CIDRs that cover it, and with `avoidBuggyIPs` takes
//! a CIDR's first address off when it ends in .0 or .255, and then its last address off on
//! the same test. A CIDR of one such address has the same first and last address, so it is
//! taken off twice and counts -1 instead of 0. The cut makes a one-address CIDR at such an
//! address in two places only: at the start of a range that begins at an address ending in
//! .255 (an odd address starts no larger CIDR), and at the end of a range that ends at an
//! address ending in .0 (a larger CIDR starting there would pass the range's end). So the
//! reported `availableIPv4` is lower than the usable addresses left by one per such range
//! end, and can be negative: `198.18.101.0-198.18.101.0` reads -1 available.
//! [`Allocator::counters`] stays the true count.

use super::addr::Family;
use super::allocator::Allocator;
use super::config::Pool;
use std::net::IpAddr;

/// A pool's status figures as MetalLB reports them (see the module docs for where they differ
/// from [`super::PoolCounters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounters {
    /// `assignedIPv4`.
    pub assigned_ipv4: i64,
    /// `assignedIPv6`.
    pub assigned_ipv6: i64,
    /// `availableIPv4` (negative for some `avoidBuggyIPs` pools, as in MetalLB).
    pub available_ipv4: i64,
    /// `availableIPv6`.
    pub available_ipv6: i64,
}

impl Allocator {
    /// The status figures MetalLB's controller would write for `pool`, if it exists.
    pub fn status_counters(&self, pool: &str) -> Option<StatusCounters> {
        let c = self.counters(pool)?;
        let miscount = counted_twice(self.pools().get(pool)?);
        // Counts above i64::MAX are clamped (MetalLB's count stops there too).
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Some(StatusCounters {
            assigned_ipv4: n(c.assigned_ipv4),
            assigned_ipv6: n(c.assigned_ipv6),
            available_ipv4: n(c.available_ipv4) - miscount,
            available_ipv6: n(c.available_ipv6),
        })
    }
}

/// The one-address CIDRs at a buggy address MetalLB's count takes off twice (module docs).
fn counted_twice(pool: &Pool) -> i64 {
    if !pool.avoid_buggy_ips() {
        return 0;
    }
    let last_octet = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => Some(v4.octets()[3]),
        IpAddr::V6(_) => None,
    };
    pool.ranges()
        .iter()
        .filter(|r| r.family() == Family::V4)
        .map(|r| {
            i64::from(last_octet(r.first) == Some(255)) + i64::from(last_octet(r.last) == Some(0))
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::super::{PoolSpec, Pools};
    use super::*;

    fn allocator(addresses: &[&str], avoid: bool) -> Allocator {
        let mut spec = PoolSpec::new("p", addresses);
        spec.avoid_buggy_ips = avoid;
        let mut a = Allocator::default();
        a.set_pools(Pools::new([spec]).unwrap());
        a
    }

    fn available_v4(addresses: &[&str], avoid: bool) -> (u64, i64) {
        let a = allocator(addresses, avoid);
        (
            a.counters("p").unwrap().available_ipv4,
            a.status_counters("p").unwrap().available_ipv4,
        )
    }

    #[test]
    fn a_one_address_cidr_at_a_buggy_address_counts_minus_one_as_in_metallb() {
        // (true count, MetalLB's figure); each figure is what MetalLB v0.16.2's allocator
        // gives (conformance/metallb-alloc's probe).
        assert_eq!(available_v4(&["198.18.101.0-198.18.101.0"], true), (0, -1));
        assert_eq!(available_v4(&["198.18.101.255/32"], true), (0, -1));
        // .250/31 (2), .252/30 (4 less .255), 1.0/32 (-1).
        assert_eq!(available_v4(&["198.18.0.250-198.18.1.0"], true), (5, 4));
        // .255/32 (-1), 1.0/30 (4 less .0).
        assert_eq!(available_v4(&["198.18.0.255-198.18.1.3"], true), (3, 2));
        // Both ends: .255/32 and 1.0/32, -1 each.
        assert_eq!(available_v4(&["198.18.0.255-198.18.1.0"], true), (0, -2));
        // Two entries, one usable address in all.
        assert_eq!(
            available_v4(&["198.18.2.0/32", "198.18.2.1/32"], true),
            (1, 0)
        );
    }

    #[test]
    fn other_pools_read_the_true_count() {
        for (addresses, avoid) in [
            (&["198.18.101.0-198.18.101.0"][..], false),
            (&["198.18.0.250-198.18.1.5"][..], true),
            (&["198.18.0.0/24", "2001:db8::/127"][..], true),
            (&["198.18.0.0/31"][..], true),
            (&["198.18.0.254/31"][..], true),
        ] {
            let (count, figure) = available_v4(addresses, avoid);
            assert_eq!(i64::try_from(count).unwrap(), figure, "{addresses:?}");
        }
    }
}
