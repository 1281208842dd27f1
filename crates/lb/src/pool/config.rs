//! Address pools: what an `IPAddressPool` says, checked once, before anything allocates.

use super::addr::{Family, canonical, from_u128, to_u128};
use crate::cidr::{AddressError, parse_pool_entry};
use crate::selector::{Labels, Selector};
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// One `IPAddressPool`'s spec, as read from the API (unchecked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    /// `metadata.name`.
    pub name: String,
    /// `spec.addresses`: CIDRs (`198.18.0.0/24`) or inclusive ranges (`198.18.0.10-198.18.0.20`).
    pub addresses: Vec<String>,
    /// `spec.autoAssign` (default true): whether services that ask for no pool and no IP may
    /// get addresses from this pool.
    pub auto_assign: bool,
    /// `spec.avoidBuggyIPs`: never hand out an IPv4 address whose last byte is 0 or 255.
    pub avoid_buggy_ips: bool,
    /// `spec.serviceAllocation`, if present.
    pub service_allocation: Option<ServiceAllocation>,
}

impl PoolSpec {
    /// A pool with MetalLB's defaults (auto-assign on, buggy IPs allowed, no service allocation).
    pub fn new(name: impl Into<String>, addresses: &[&str]) -> Self {
        Self {
            name: name.into(),
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            auto_assign: true,
            avoid_buggy_ips: false,
            service_allocation: None,
        }
    }
}

/// `spec.serviceAllocation`: which services a pool is for, and how much it is preferred.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAllocation {
    /// `priority`: lower is preferred; 0 (unset) ranks after every positive priority.
    pub priority: i32,
    /// `namespaces`: namespaces whose services may use the pool.
    pub namespaces: Vec<String>,
    /// `namespaceSelectors`: namespaces whose labels match any of these may use the pool too.
    pub namespace_selectors: Vec<Selector>,
    /// `serviceSelectors`: if any, only services whose labels match one of these may use it.
    pub service_selectors: Vec<Selector>,
}

/// An inclusive run of addresses of one family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AddressRange {
    /// First address.
    pub first: IpAddr,
    /// Last address (same family, not before `first`).
    pub last: IpAddr,
}

impl AddressRange {
    /// The family of both ends.
    pub fn family(&self) -> Family {
        Family::of(self.first)
    }

    /// Whether `ip` lies in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        Family::of(ip) == self.family() && self.first <= ip && ip <= self.last
    }

    fn overlaps(&self, other: &Self) -> bool {
        self.family() == other.family() && self.first <= other.last && other.first <= self.last
    }
}

impl fmt::Display for AddressRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Whether MetalLB's `avoidBuggyIPs` skips `ip`: an IPv4 address ending in .0 or .255 (such
/// addresses confuse the smurf protection of some old consumer routers). IPv6 is never skipped.
pub fn is_buggy(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => matches!(v4.octets()[3], 0 | 255),
        IpAddr::V6(_) => false,
    }
}

/// A checked pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    name: String,
    ranges: Vec<AddressRange>,
    auto_assign: bool,
    avoid_buggy_ips: bool,
    service_allocation: Option<ServiceAllocation>,
    capacity: [u64; 2],
}

impl Pool {
    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its addresses in configuration order (each CIDR or range as one inclusive range).
    pub fn ranges(&self) -> &[AddressRange] {
        &self.ranges
    }

    /// `autoAssign`.
    pub fn auto_assign(&self) -> bool {
        self.auto_assign
    }

    /// `avoidBuggyIPs`.
    pub fn avoid_buggy_ips(&self) -> bool {
        self.avoid_buggy_ips
    }

    /// `serviceAllocation`.
    pub fn service_allocation(&self) -> Option<&ServiceAllocation> {
        self.service_allocation.as_ref()
    }

    /// Usable addresses of `family`, counted as MetalLB counts them for the pool status
    /// (`internal/allocator/allocator.go:poolCount`): each range is cut into CIDR prefixes; a
    /// prefix with 2^62 addresses or more makes the count `i64::MAX`; buggy IPs are left out
    /// when the pool avoids them.
    pub fn capacity(&self, family: Family) -> u64 {
        self.capacity[family.index()]
    }

    /// Whether the pool can hand out `ip`: it lies in one of the ranges and is not a skipped
    /// buggy IP (MetalLB's `poolFor` treats a buggy IP in an avoiding pool as outside it).
    pub fn owns(&self, ip: IpAddr) -> bool {
        !(self.avoid_buggy_ips && is_buggy(ip)) && self.ranges.iter().any(|r| r.contains(ip))
    }

    /// Whether the pool's `serviceAllocation` admits a service in `namespace` (whose labels are
    /// `namespace_labels`) carrying `labels` (MetalLB's `isPoolCompatibleWithService`): the
    /// namespace must be listed or selected, if the pool names any, and the service must match
    /// one of the service selectors, if there are any. A pool without `serviceAllocation`
    /// admits every service.
    pub fn admits(&self, namespace: &str, namespace_labels: &Labels, labels: &Labels) -> bool {
        let Some(sa) = &self.service_allocation else {
            return true;
        };
        let names_namespaces = !sa.namespaces.is_empty() || !sa.namespace_selectors.is_empty();
        let namespace_ok = !names_namespaces
            || sa.namespaces.iter().any(|n| n == namespace)
            || sa
                .namespace_selectors
                .iter()
                .any(|s| s.matches(namespace_labels));
        let service_ok = sa.service_selectors.is_empty()
            || sa.service_selectors.iter().any(|s| s.matches(labels));
        namespace_ok && service_ok
    }

    /// The pool's rank among the pools pinned to a service: positive priorities first,
    /// lowest first; then the pools without priority; ties by name.
    pub(crate) fn pin_rank(&self) -> (bool, i32, &str) {
        let p = self.service_allocation.as_ref().map_or(0, |s| s.priority);
        (p <= 0, if p > 0 { p } else { 0 }, &self.name)
    }
}

/// Why a pool configuration was refused. Each names the pool and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `metadata.name` is empty.
    #[error("pool {index}: metadata.name is empty")]
    MissingName {
        /// Position of the pool in the list.
        index: usize,
    },
    /// Two pools with one name.
    #[error("pool {0:?}: defined twice")]
    DuplicatePool(String),
    /// `spec.addresses` is empty.
    #[error("pool {0:?}: spec.addresses is empty")]
    NoAddresses(String),
    /// An entry of `spec.addresses` is neither a CIDR nor a range (MetalLB's message).
    #[error("pool {pool:?}: spec.addresses[{index}]: {source}")]
    BadAddress {
        /// The pool.
        pool: String,
        /// Position in `spec.addresses`.
        index: usize,
        /// What is wrong with it.
        source: AddressError,
    },
    /// Two address entries overlap (in one pool or in two).
    #[error("pool {pool:?}: spec.addresses {range} overlaps {other} of pool {other_pool:?}")]
    Overlap {
        /// The pool whose entry came later.
        pool: String,
        /// That entry.
        range: AddressRange,
        /// The pool of the earlier entry.
        other_pool: String,
        /// The earlier entry.
        other: AddressRange,
    },
    /// A namespace listed twice in `serviceAllocation.namespaces`.
    #[error("pool {pool:?}: spec.serviceAllocation.namespaces lists {namespace:?} twice")]
    DuplicateNamespace {
        /// The pool.
        pool: String,
        /// The namespace.
        namespace: String,
    },
    /// A selector repeated in one list. (Invalid selectors cannot be built: see
    /// [`Selector::from_parts`].)
    #[error(
        "pool {pool:?}: spec.serviceAllocation.{field}[{index}]: duplicate selector {selector}"
    )]
    DuplicateSelector {
        /// The pool.
        pool: String,
        /// `namespaceSelectors` or `serviceSelectors`.
        field: &'static str,
        /// Position in that list.
        index: usize,
        /// The selector, in Kubernetes' text form.
        selector: String,
    },
}

/// A checked set of pools: names unique, every address entry parsed, no two entries
/// overlapping, selectors valid. Iterates in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pools {
    by_name: BTreeMap<String, Pool>,
}

impl Pools {
    /// Checks `specs` as MetalLB's configuration parser does (`internal/config/config.go:poolsFor`).
    pub fn new(specs: impl IntoIterator<Item = PoolSpec>) -> Result<Self, ConfigError> {
        let mut by_name = BTreeMap::new();
        let mut seen: Vec<(String, AddressRange)> = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let pool = check_pool(index, spec)?;
            if by_name.contains_key(&pool.name) {
                return Err(ConfigError::DuplicatePool(pool.name));
            }
            for range in &pool.ranges {
                if let Some((other_pool, other)) = seen.iter().find(|(_, o)| o.overlaps(range)) {
                    return Err(ConfigError::Overlap {
                        pool: pool.name.clone(),
                        range: *range,
                        other_pool: other_pool.clone(),
                        other: *other,
                    });
                }
                seen.push((pool.name.clone(), *range));
            }
            by_name.insert(pool.name.clone(), pool);
        }
        Ok(Self { by_name })
    }

    /// The pool named `name`.
    pub fn get(&self, name: &str) -> Option<&Pool> {
        self.by_name.get(name)
    }

    /// Every pool, in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Pool> {
        self.by_name.values()
    }

    /// Whether there are no pools.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The pool that can hand out every one of `ips`, if any (MetalLB's `poolFor`). Entries
    /// never overlap, so there is at most one.
    pub fn owner_of(&self, ips: &[IpAddr]) -> Option<&Pool> {
        if ips.is_empty() {
            return None;
        }
        self.iter().find(|p| ips.iter().all(|ip| p.owns(*ip)))
    }
}

fn check_pool(index: usize, spec: PoolSpec) -> Result<Pool, ConfigError> {
    if spec.name.is_empty() {
        return Err(ConfigError::MissingName { index });
    }
    if spec.addresses.is_empty() {
        return Err(ConfigError::NoAddresses(spec.name));
    }
    let mut ranges = Vec::with_capacity(spec.addresses.len());
    for (i, entry) in spec.addresses.iter().enumerate() {
        let range = parse_address(entry).map_err(|source| ConfigError::BadAddress {
            pool: spec.name.clone(),
            index: i,
            source,
        })?;
        ranges.push(range);
    }
    if let Some(sa) = &spec.service_allocation {
        for (i, ns) in sa.namespaces.iter().enumerate() {
            if sa.namespaces[..i].contains(ns) {
                return Err(ConfigError::DuplicateNamespace {
                    pool: spec.name.clone(),
                    namespace: ns.clone(),
                });
            }
        }
        for (field, list) in [
            ("namespaceSelectors", &sa.namespace_selectors),
            ("serviceSelectors", &sa.service_selectors),
        ] {
            for (i, s) in list.iter().enumerate() {
                if list[..i].contains(s) {
                    return Err(ConfigError::DuplicateSelector {
                        pool: spec.name.clone(),
                        field,
                        index: i,
                        selector: s.to_string(),
                    });
                }
            }
        }
    }
    let mut capacity = [0u64; 2];
    for family in [Family::V4, Family::V6] {
        capacity[family.index()] = ranges
            .iter()
            .filter(|r| r.family() == family)
            .fold(0u64, |total, r| {
                add_capacity(total, range_capacity(r, spec.avoid_buggy_ips))
            });
    }
    Ok(Pool {
        name: spec.name,
        ranges,
        auto_assign: spec.auto_assign,
        avoid_buggy_ips: spec.avoid_buggy_ips,
        service_allocation: spec.service_allocation,
        capacity,
    })
}

/// The count MetalLB reports when a pool "will never run out".
const UNBOUNDED: u64 = i64::MAX as u64;

fn add_capacity(total: u64, size: u64) -> u64 {
    total.saturating_add(size).min(UNBOUNDED)
}

/// MetalLB's count for one address entry: the sum over its CIDR prefixes, `i64::MAX` as soon
/// as one prefix holds 2^62 addresses or more.
fn range_capacity(r: &AddressRange, avoid_buggy: bool) -> u64 {
    let bits = r.family().bits();
    let (first, last) = (to_u128(r.first), to_u128(r.last));
    let mut total = 0u64;
    for (start, host_bits) in prefixes(first, last, bits) {
        if host_bits >= 62 {
            return UNBOUNDED;
        }
        let mut size = 1u64 << host_bits;
        if avoid_buggy && r.family() == Family::V4 {
            if host_bits >= 8 {
                // Every whole /24 in the prefix holds one .0 and one .255.
                size -= 2 << (host_bits - 8);
            } else {
                let end = start + (1u128 << host_bits) - 1;
                size -= u64::from(is_buggy(from_u128(Family::V4, start)));
                if end != start {
                    size -= u64::from(is_buggy(from_u128(Family::V4, end)));
                }
            }
        }
        total = add_capacity(total, size);
    }
    total
}

/// The CIDR prefixes that exactly cover `[first, last]`, in address order, as (start, number
/// of host bits): each step takes the largest aligned block starting at the cursor that fits.
fn prefixes(first: u128, last: u128, bits: u32) -> Vec<(u128, u32)> {
    let mut out = Vec::new();
    let mut cur = first;
    loop {
        let align = if cur == 0 {
            bits
        } else {
            cur.trailing_zeros().min(bits)
        };
        let mut host = align;
        // Shrink until the block ends at or before `last`.
        while host > 0 && block_end(cur, host) > last {
            host -= 1;
        }
        out.push((cur, host));
        let end = block_end(cur, host);
        if end >= last {
            return out;
        }
        cur = end + 1;
    }
}

fn block_end(start: u128, host_bits: u32) -> u128 {
    if host_bits >= 128 {
        u128::MAX
    } else {
        start | ((1u128 << host_bits) - 1)
    }
}

/// Parses one `spec.addresses` entry with MetalLB's rules ([`crate::cidr`], the parser the
/// speaker uses too) into the one inclusive range its CIDR prefixes cover.
pub fn parse_address(entry: &str) -> Result<AddressRange, AddressError> {
    let cidrs = parse_pool_entry(entry)?;
    // A CIDR is one prefix, a range summarises into adjacent prefixes in order: never empty.
    let (Some(first), Some(last)) = (cidrs.first(), cidrs.last()) else {
        return Err(AddressError::Cidr(entry.to_string()));
    };
    Ok(AddressRange {
        first: first.network(),
        last: last.last(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(s: &str) -> AddressRange {
        parse_address(s).unwrap()
    }

    fn pool(addresses: &[&str], avoid: bool) -> Pool {
        let mut spec = PoolSpec::new("p", addresses);
        spec.avoid_buggy_ips = avoid;
        Pools::new([spec]).unwrap().get("p").unwrap().clone()
    }

    #[test]
    fn cidrs_and_ranges_parse_as_metallb() {
        let r = range("198.18.0.7/24");
        assert_eq!(r.first.to_string(), "198.18.0.0");
        assert_eq!(r.last.to_string(), "198.18.0.255");
        let r = range("198.18.0.10 - 198.18.0.20");
        assert_eq!(
            (r.first.to_string(), r.last.to_string()),
            ("198.18.0.10".into(), "198.18.0.20".into())
        );
        let r = range("2001:db8::/126");
        assert_eq!(r.last.to_string(), "2001:db8::3");
        assert_eq!(
            range("2001:db8::/0").last,
            IpAddr::V6(std::net::Ipv6Addr::from(u128::MAX))
        );
        assert!(parse_address("198.18.0.20-198.18.0.10").is_err());
        assert!(parse_address("198.18.0.1-2001:db8::1").is_err());
        assert!(parse_address("198.18.0.0/33").is_err());
        assert!(parse_address("198.18.0.0").is_err());
        assert!(parse_address(" 198.18.0.0/24").is_err());
        assert_eq!(range("::ffff:198.18.0.7/120"), range("198.18.0.0/24"));
        // Shorter than /96 it is an IPv6 prefix, as Go reads it.
        assert_eq!(range("::ffff:198.18.0.0/24").first.to_string(), "::");
        assert_eq!(
            range("::ffff:198.18.0.0/95").first.to_string(),
            "::fffe:0:0"
        );
        assert_eq!(range("198.18.0.0/00024"), range("198.18.0.0/24"));
    }

    #[test]
    fn prefixes_cover_a_range_exactly() {
        // 10..=20 is 10/31, 12/30, 16/30, 20/32.
        assert_eq!(
            prefixes(10, 20, 32),
            vec![(10, 1), (12, 2), (16, 2), (20, 0)]
        );
        assert_eq!(prefixes(0, u128::MAX, 128), vec![(0, 128)]);
        assert_eq!(prefixes(0, u32::MAX as u128, 32), vec![(0, 32)]);
    }

    #[test]
    fn capacity_matches_metallb_pool_count() {
        // The cases of MetalLB's TestPoolCount.
        assert_eq!(pool(&["1.2.3.0/24"], false).capacity(Family::V4), 256);
        assert_eq!(
            pool(&["1.2.3.0/24", "2.3.4.128/25"], false).capacity(Family::V4),
            384
        );
        assert_eq!(
            pool(&["1.2.3.0/24", "2.3.4.128/25"], true).capacity(Family::V4),
            381
        );
        let big = pool(&["1.2.3.0/24", "2.3.4.128/25", "1000::/64"], true);
        assert_eq!(big.capacity(Family::V4), 381);
        assert_eq!(big.capacity(Family::V6), i64::MAX as u64);
        let small = pool(&["1.2.3.0/31", "1000::/127"], true);
        assert_eq!(
            (small.capacity(Family::V4), small.capacity(Family::V6)),
            (1, 2)
        );
        // A range crossing a /24 boundary: .250-.5 of the next /24 holds .255 and .0.
        assert_eq!(
            pool(&["198.18.0.250-198.18.1.5"], true).capacity(Family::V4),
            10
        );
        assert_eq!(
            pool(&["198.18.0.250-198.18.1.5"], false).capacity(Family::V4),
            12
        );
    }

    #[test]
    fn buggy_ips_are_outside_an_avoiding_pool() {
        let p = pool(&["198.18.0.0/24"], true);
        assert!(!p.owns("198.18.0.0".parse().unwrap()));
        assert!(!p.owns("198.18.0.255".parse().unwrap()));
        assert!(p.owns("198.18.0.1".parse().unwrap()));
        assert!(pool(&["198.18.0.0/24"], false).owns("198.18.0.0".parse().unwrap()));
    }

    #[test]
    fn bad_configuration_names_the_field() {
        let e = Pools::new([
            PoolSpec::new("a", &["198.18.0.0/24"]),
            PoolSpec::new("b", &["198.18.0.128-198.18.1.1"]),
        ]);
        assert!(
            matches!(e, Err(ConfigError::Overlap { ref pool, .. }) if pool == "b"),
            "{e:?}"
        );
        let e = Pools::new([PoolSpec::new("a", &["198.18.0.0/25", "198.18.0.100/32"])]);
        assert!(matches!(e, Err(ConfigError::Overlap { .. })));
        let e = Pools::new([
            PoolSpec::new("a", &["198.18.0.0/24"]),
            PoolSpec::new("a", &["198.18.1.0/24"]),
        ]);
        assert_eq!(e, Err(ConfigError::DuplicatePool("a".into())));
        let e = Pools::new([PoolSpec::new("a", &["nope"])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pool \"a\": spec.addresses[0]: invalid CIDR \"nope\""
        );
        assert_eq!(
            Pools::new([PoolSpec::new("a", &[])]),
            Err(ConfigError::NoAddresses("a".into()))
        );
        let mut spec = PoolSpec::new("a", &["198.18.0.0/24"]);
        spec.service_allocation = Some(ServiceAllocation {
            service_selectors: vec![
                Selector::parse("a=b").unwrap(),
                Selector::parse("a=b").unwrap(),
            ],
            ..ServiceAllocation::default()
        });
        let e = Pools::new([spec]).unwrap_err();
        assert!(e.to_string().contains("serviceSelectors[1]"), "{e}");
    }
}
