//! The allocator's state and its primitive operations, each one MetalLB allocator function
//! (`internal/allocator/allocator.go`).

use super::addr::{Family, canonical, from_u128, to_u128};
use super::config::{AddressRange, Pool, Pools, is_buggy};
use super::error::{AllocError, ShareRefusal};
use super::request::{FamilyPolicy, Port, Request, ServiceFamily};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// What one service holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The pool the IPs belong to.
    pub pool: String,
    /// One IP, or one of each family, in the order they were given.
    pub ips: Vec<IpAddr>,
    /// The ports it uses on them.
    pub ports: Vec<Port>,
    /// Its sharing key, if it shares.
    pub sharing_key: Option<String>,
    /// Its backend key.
    pub backend_key: String,
}

/// A pool's status counters (`IPAddressPool.status`): addresses in use by at least one
/// service, and usable addresses left, per family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounters {
    /// `assignedIPv4`.
    pub assigned_ipv4: u64,
    /// `assignedIPv6`.
    pub assigned_ipv6: u64,
    /// `availableIPv4`.
    pub available_ipv4: u64,
    /// `availableIPv6`.
    pub available_ipv6: u64,
}

/// MetalLB-compatible IP allocation over a set of pools. Pure: no I/O, no clock, no
/// randomness; every choice is made in a fixed order, so equal inputs give equal state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocator {
    pools: Pools,
    allocations: BTreeMap<String, Allocation>,
    /// Services on each IP in use. Each has its entry in `allocations`: the two change
    /// together, in `insert` and `release` only.
    on_ip: BTreeMap<IpAddr, BTreeSet<String>>,
    /// Distinct IPs in use per pool, per family.
    assigned: BTreeMap<String, [u64; 2]>,
}

/// The first usable IP of each family a pool offers a service (MetalLB's `Allocation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    pub(crate) ips: [Option<IpAddr>; 2],
}

impl Offer {
    fn get(&self, family: Family) -> Option<IpAddr> {
        self.ips[family.index()]
    }

    fn is_empty(&self) -> bool {
        self.ips.iter().all(Option::is_none)
    }

    /// MetalLB's `selectIPsForFamilyAndPolicy`: a single-family service gets its family's
    /// IP; a dual-stack one gets both (IPv4 first), or with `PreferDualStack` whichever one
    /// there is, IPv4 before IPv6.
    fn select(&self, family: ServiceFamily, policy: FamilyPolicy) -> Option<Vec<IpAddr>> {
        let (v4, v6) = (self.get(Family::V4), self.get(Family::V6));
        match family {
            ServiceFamily::Single(f) => self.get(f).map(|ip| vec![ip]),
            ServiceFamily::Dual => match (policy, v4, v6) {
                (FamilyPolicy::SingleStack, ..) => None,
                (_, Some(a), Some(b)) => Some(vec![a, b]),
                (FamilyPolicy::PreferDualStack, Some(a), None)
                | (FamilyPolicy::PreferDualStack, None, Some(a)) => Some(vec![a]),
                _ => None,
            },
        }
    }
}

impl Allocator {
    /// An allocator over `pools` with nothing allocated.
    pub fn new(pools: Pools) -> Self {
        Self {
            pools,
            ..Self::default()
        }
    }

    /// The pools.
    pub fn pools(&self) -> &Pools {
        &self.pools
    }

    /// What `key` holds.
    pub fn allocation(&self, key: &str) -> Option<&Allocation> {
        self.allocations.get(key)
    }

    /// Every allocation, by service key.
    pub fn allocations(&self) -> &BTreeMap<String, Allocation> {
        &self.allocations
    }

    /// The services holding `ip`, in name order.
    pub fn services_on(&self, ip: IpAddr) -> impl Iterator<Item = &str> {
        self.on_ip
            .get(&canonical(ip))
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    /// The status counters of `pool` (MetalLB's `CountersForPool`), if it exists.
    pub fn counters(&self, pool: &str) -> Option<PoolCounters> {
        let p = self.pools.get(pool)?;
        let [v4, v6] = self.assigned.get(pool).copied().unwrap_or_default();
        Some(PoolCounters {
            assigned_ipv4: v4,
            assigned_ipv6: v6,
            available_ipv4: p.capacity(Family::V4).saturating_sub(v4),
            available_ipv6: p.capacity(Family::V6).saturating_sub(v6),
        })
    }

    /// Replaces the pools (MetalLB's `SetPools`). Each allocation moves to the pool that now
    /// holds all its IPs; one whose IPs no pool holds any more is released. Returns the keys
    /// released, in name order. Nothing else is checked here: MetalLB re-converges every
    /// service after a pool change, and [`Allocator::converge`] then drops allocations the
    /// new `serviceAllocation`s no longer admit.
    pub fn set_pools(&mut self, pools: Pools) -> Vec<String> {
        self.pools = pools;
        let mut released = Vec::new();
        for (key, alloc) in &mut self.allocations {
            match self.pools.owner_of(&alloc.ips) {
                Some(pool) => alloc.pool = pool.name().to_string(),
                None => released.push(key.clone()),
            }
        }
        for key in &released {
            self.release(key);
        }
        self.recount();
        released
    }

    /// Gives `ips` to the service (MetalLB's `Assign`): one pool must hold them all and admit
    /// the service, they must be one IP or one of each family, and every other service on them
    /// must be one it may share with. Assigning what the service already holds succeeds and
    /// changes nothing; assigning anything else replaces what it held.
    pub fn assign(&mut self, req: &Request, ips: &[IpAddr]) -> Result<(), AllocError> {
        let ips: Vec<IpAddr> = ips.iter().copied().map(canonical).collect();
        let pool = self
            .pools
            .owner_of(&ips)
            .ok_or_else(|| AllocError::NotInAnyPool { ips: ips.clone() })?;
        if !pool.admits(&req.namespace, &req.namespace_labels, &req.labels) {
            return Err(AllocError::PoolNotAllowed {
                pool: pool.name().to_string(),
            });
        }
        if ips.len() > 2 {
            return Err(AllocError::TooManyIps { ips });
        }
        if ips.len() == 2 && Family::of(ips[0]) == Family::of(ips[1]) {
            return Err(AllocError::SameFamily { ips });
        }
        for ip in &ips {
            self.check_sharing(req, *ip)?;
        }
        let alloc = Allocation {
            pool: pool.name().to_string(),
            ips,
            ports: req.ports.clone(),
            sharing_key: req.sharing().map(str::to_string),
            backend_key: req.backend_key.clone(),
        };
        self.insert(req.key.clone(), alloc);
        Ok(())
    }

    /// Frees what `key` holds (MetalLB's `Unassign`) and returns it.
    pub fn release(&mut self, key: &str) -> Option<Allocation> {
        let alloc = self.allocations.remove(key)?;
        for ip in &alloc.ips {
            let Some(users) = self.on_ip.get_mut(ip) else {
                continue;
            };
            users.remove(key);
            if users.is_empty() {
                self.on_ip.remove(ip);
                if let Some(count) = self.assigned.get_mut(&alloc.pool) {
                    count[Family::of(*ip).index()] -= 1;
                    if *count == [0, 0] {
                        self.assigned.remove(&alloc.pool);
                    }
                }
            }
        }
        Some(alloc)
    }

    /// Allocates as MetalLB's controller does for a service that holds nothing
    /// (`controller/service.go:allocateIPs`): the requested IPs if any (and then they must lie
    /// in the requested pool, if one is named too); else the first usable IPs of the requested
    /// pool; else automatically ([`Allocator::allocate_auto`]).
    pub fn allocate(&mut self, req: &Request) -> Result<Vec<IpAddr>, AllocError> {
        let wanted = req.requested_ips.clone()?;
        if !wanted.is_empty() {
            let family = ServiceFamily::of(&wanted);
            if family != Some(req.family) {
                return Err(AllocError::RequestedFamilyMismatch {
                    ips: wanted,
                    family: req.family,
                });
            }
            let before = self.allocations.get(&req.key).cloned();
            self.assign(req, &wanted)?;
            if let Some(pool) = &req.pool {
                // As MetalLB: assign first (its errors come first), then undo it if the IPs
                // are not in the pool asked for.
                if self.allocations[&req.key].pool != *pool {
                    self.release(&req.key);
                    if let Some(before) = before {
                        self.insert(req.key.clone(), before);
                    }
                    return Err(AllocError::RequestedIpsNotInPool {
                        ips: wanted,
                        pool: pool.clone(),
                    });
                }
            }
            return Ok(self.allocations[&req.key].ips.clone());
        }
        match &req.pool {
            Some(pool) => self.allocate_from_pool(req, pool),
            None => self.allocate_auto(req),
        }
    }

    /// Allocates from the named pool (MetalLB's `AllocateFromPool`), even if it is not
    /// auto-assignable: the first usable IPs of the families the service needs. A service
    /// that already holds IPs keeps them (if their family fits).
    pub fn allocate_from_pool(
        &mut self,
        req: &Request,
        pool: &str,
    ) -> Result<Vec<IpAddr>, AllocError> {
        if let Some(held) = self.allocations.get(&req.key).map(|a| a.ips.clone()) {
            let fits = ServiceFamily::of(&held) == Some(req.family)
                || req.policy == FamilyPolicy::PreferDualStack;
            if !fits {
                return Err(AllocError::WrongFamilyHeld {
                    held,
                    family: req.family,
                });
            }
            self.assign(req, &held)?;
            return Ok(held);
        }
        let p = self
            .pools
            .get(pool)
            .ok_or_else(|| AllocError::UnknownPool {
                pool: pool.to_string(),
            })?;
        let offer = self.offer(p, req);
        if offer.is_empty() {
            return Err(AllocError::PoolExhausted {
                pool: pool.to_string(),
            });
        }
        let ips =
            offer
                .select(req.family, req.policy)
                .ok_or_else(|| AllocError::NoFamilyInPool {
                    pool: pool.to_string(),
                    family: req.family,
                })?;
        self.assign(req, &ips)?;
        Ok(ips)
    }

    /// Allocates with no pool and no IP asked for (MetalLB's `Allocate`). First the pools
    /// pinned to the service (auto-assignable, with a `serviceAllocation` that admits it),
    /// positive priorities first, lowest first, then those without priority; then the
    /// auto-assignable pools without `serviceAllocation`. In each list the first pool that can
    /// serve the service wins (see the module docs). A service that already holds IPs
    /// keeps them.
    pub fn allocate_auto(&mut self, req: &Request) -> Result<Vec<IpAddr>, AllocError> {
        if let Some(held) = self.allocations.get(&req.key).map(|a| a.ips.clone()) {
            self.assign(req, &held)?;
            return Ok(held);
        }
        let mut pinned: Vec<&Pool> = self
            .pools
            .iter()
            .filter(|p| {
                p.auto_assign()
                    && p.service_allocation().is_some()
                    && p.admits(&req.namespace, &req.namespace_labels, &req.labels)
            })
            .collect();
        pinned.sort_by(|a, b| a.pin_rank().cmp(&b.pin_rank()));
        let open: Vec<&Pool> = self
            .pools
            .iter()
            .filter(|p| p.auto_assign() && p.service_allocation().is_none())
            .collect();
        if pinned.is_empty() && open.is_empty() {
            return Err(AllocError::NoPoolMatches);
        }
        // As MetalLB's allocateFromPools: the best pool of a list or nothing from it; a
        // failure falls through to the next list. (The best pool's offer always selects and
        // assigns; the checks stay for safety.)
        let choices: Vec<Vec<IpAddr>> = [pinned, open]
            .iter()
            .filter_map(|list| self.best_pool(list, req))
            .filter_map(|(_, offer)| offer.select(req.family, req.policy))
            .collect();
        for ips in choices {
            if self.assign(req, &ips).is_ok() {
                return Ok(ips);
            }
        }
        Err(AllocError::NoAvailableIps)
    }

    /// Gives a `PreferDualStack` service that holds one IP a second one of the other family
    /// from the same pool (MetalLB's `AllocateFromPoolForAdditionalFamily`). Returns the new IP.
    pub fn add_family(&mut self, req: &Request) -> Result<IpAddr, AllocError> {
        let alloc = self
            .allocations
            .get(&req.key)
            .ok_or(AllocError::NoAvailableIps)?;
        let held = alloc.ips[0];
        let pool_name = alloc.pool.clone();
        let pool = self
            .pools
            .get(&pool_name)
            .ok_or_else(|| AllocError::UnknownPool {
                pool: pool_name.clone(),
            })?;
        let offer = self.offer(pool, req);
        if offer.is_empty() {
            return Err(AllocError::PoolExhausted { pool: pool_name });
        }
        let extra = Family::of(held).other();
        let ip = offer.get(extra).ok_or(AllocError::NoFamilyInPool {
            pool: pool_name,
            family: ServiceFamily::Single(extra),
        })?;
        self.assign(req, &[held, ip])?;
        Ok(ip)
    }

    /// MetalLB's `findBestPoolForService`: walks `pools` in order and returns the first whose
    /// offer has the service's single family, or both families; failing that, for a
    /// `PreferDualStack` dual-stack service, the first pool offering the primary family, else
    /// the first offering the other one.
    pub(crate) fn best_pool<'p>(
        &self,
        pools: &[&'p Pool],
        req: &Request,
    ) -> Option<(&'p str, Offer)> {
        let primary = req.primary;
        let mut fallback: [Option<(&'p str, Offer)>; 2] = [None, None];
        for pool in pools {
            let offer = self.offer(pool, req);
            if offer.is_empty() {
                continue;
            }
            if let ServiceFamily::Single(f) = req.family
                && offer.get(f).is_some()
            {
                return Some((pool.name(), offer));
            }
            let (a, b) = (offer.get(primary), offer.get(primary.other()));
            if a.is_some() && b.is_some() {
                return Some((pool.name(), offer));
            }
            if !(req.family == ServiceFamily::Dual && req.policy == FamilyPolicy::PreferDualStack) {
                continue;
            }
            if a.is_some() && fallback[0].is_none() {
                fallback[0] = Some((pool.name(), offer));
            }
            if b.is_some() && fallback[1].is_none() {
                fallback[1] = Some((pool.name(), offer));
            }
        }
        let [first, second] = fallback;
        first.or(second)
    }

    /// MetalLB's `getFreeIPsFromPool`: for each family, the first IP the service may take,
    /// walking the pool's entries in configuration order and each entry upwards.
    pub(crate) fn offer(&self, pool: &Pool, req: &Request) -> Offer {
        let mut offer = Offer::default();
        for range in pool.ranges() {
            let slot = &mut offer.ips[range.family().index()];
            if slot.is_none() {
                *slot = self.first_usable(range, pool.avoid_buggy_ips(), req);
            }
        }
        offer
    }

    /// MetalLB's `getIPFromCIDR`: the lowest IP of `range` that is not a skipped buggy IP and
    /// that the service may take, either because nobody holds it or because everybody on it
    /// may share with the service. Walks only the IPs in use, so it is fast in huge ranges.
    fn first_usable(
        &self,
        range: &AddressRange,
        avoid_buggy: bool,
        req: &Request,
    ) -> Option<IpAddr> {
        let family = range.family();
        let last = to_u128(range.last);
        let mut used = self
            .on_ip
            .range(range.first..=range.last)
            .map(|(ip, users)| (to_u128(*ip), users))
            .peekable();
        let mut n = to_u128(range.first);
        loop {
            if n > last {
                return None;
            }
            let ip = from_u128(family, n);
            if avoid_buggy && is_buggy(ip) {
                n = n.checked_add(1)?;
                continue;
            }
            while used.next_if(|(u, _)| *u < n).is_some() {}
            match used.peek() {
                Some((u, users)) if *u == n => {
                    if self.may_take(req, ip, users) {
                        return Some(ip);
                    }
                }
                _ => return Some(ip),
            }
            n = n.checked_add(1)?;
        }
    }

    /// [`check_sharing`](Self::check_sharing)'s verdict on `ip`, held by `users`, without
    /// its error: [`first_usable`](Self::first_usable) asks it of every IP in use below the
    /// first free one, thousands per allocation in a full pool, and building the refusal
    /// (the holders' names cloned) and looking each holder up was nearly all of an
    /// allocation's cost (0.9 ms at 5,000 Services). A service without a sharing key may
    /// share with nobody ([`may_share`] refuses it whatever the holder), so for it an IP held
    /// by another service is never usable and no holder is looked up.
    fn may_take(&self, req: &Request, ip: IpAddr, users: &BTreeSet<String>) -> bool {
        let mut others = users.iter().filter(|u| **u != req.key);
        let ok = if req.sharing().is_none() {
            // Every holder in `on_ip` has its allocation (they change together, in `insert`
            // and `release`), so any other holder refuses.
            others.next().is_none()
        } else {
            others.all(|other| {
                self.allocations
                    .get(other)
                    .is_none_or(|alloc| may_share(alloc, req).is_ok())
            })
        };
        debug_assert_eq!(ok, self.check_sharing(req, ip).is_ok());
        ok
    }

    /// MetalLB's `checkSharing`: the service may take `ip` if nobody else holds it, or if every
    /// other holder has the same non-empty sharing key and the same backend key, and none of
    /// them uses one of its ports.
    pub(crate) fn check_sharing(&self, req: &Request, ip: IpAddr) -> Result<(), AllocError> {
        let Some(users) = self.on_ip.get(&ip) else {
            return Ok(());
        };
        let others: Vec<&String> = users.iter().filter(|u| **u != req.key).collect();
        for other in &others {
            let Some(alloc) = self.allocations.get(other.as_str()) else {
                continue;
            };
            if let Err(refusal) = may_share(alloc, req) {
                return Err(AllocError::IpInUse {
                    ip,
                    services: others.iter().map(|s| s.to_string()).collect(),
                    refusal,
                });
            }
        }
        Ok(())
    }

    fn insert(&mut self, key: String, alloc: Allocation) {
        self.release(&key);
        for ip in &alloc.ips {
            let users = self.on_ip.entry(*ip).or_default();
            if users.is_empty() {
                self.assigned.entry(alloc.pool.clone()).or_default()[Family::of(*ip).index()] += 1;
            }
            users.insert(key.clone());
        }
        self.allocations.insert(key, alloc);
    }

    fn recount(&mut self) {
        self.assigned = self.recounted();
    }

    /// The per-pool counts of distinct IPs in use, counted afresh from the allocations.
    pub(crate) fn recounted(&self) -> BTreeMap<String, [u64; 2]> {
        let mut seen: BTreeMap<&str, BTreeSet<IpAddr>> = BTreeMap::new();
        for alloc in self.allocations.values() {
            seen.entry(&alloc.pool).or_default().extend(&alloc.ips);
        }
        seen.into_iter()
            .map(|(pool, ips)| {
                let mut count = [0u64; 2];
                for ip in ips {
                    count[Family::of(ip).index()] += 1;
                }
                (pool.to_string(), count)
            })
            .collect()
    }

    /// Every IP in use.
    pub(crate) fn ips_in_use(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.on_ip.keys().copied()
    }

    /// The maintained counts (tests compare them with [`Allocator::recounted`]).
    pub(crate) fn assigned_counts(&self) -> BTreeMap<String, [u64; 2]> {
        self.assigned.clone()
    }
}

/// MetalLB's `sharingOK` plus the port check, for a service `req` joining `existing` on one IP.
fn may_share(existing: &Allocation, req: &Request) -> Result<(), ShareRefusal> {
    let Some(held) = existing.sharing_key.as_deref().filter(|k| !k.is_empty()) else {
        return Err(ShareRefusal::ExistingDoesNotShare);
    };
    let Some(new) = req.sharing() else {
        return Err(ShareRefusal::NewDoesNotShare);
    };
    if held != new {
        return Err(ShareRefusal::KeyMismatch {
            existing: held.to_string(),
            new: new.to_string(),
        });
    }
    if existing.backend_key != req.backend_key {
        return Err(ShareRefusal::BackendMismatch {
            existing: existing.backend_key.clone(),
            new: req.backend_key.clone(),
        });
    }
    if let Some(port) = req.ports.iter().find(|p| existing.ports.contains(p)) {
        return Err(ShareRefusal::PortInUse(port.clone()));
    }
    Ok(())
}
