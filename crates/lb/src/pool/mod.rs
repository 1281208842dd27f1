//! MetalLB-compatible IP allocation for `vigil controller`, as a pure state machine.
//!
//! An [`Allocator`] holds the [`Pools`] and which service holds which IPs. A controller
//! reads each Service into a [`Request`], calls [`Allocator::converge`] with the IPs the
//! Service's status carries, and writes back what the [`Convergence`] says; its
//! [`Failure`]s and [`Note`]s map one to one to MetalLB's events. At start,
//! [`Allocator::rebuild`] takes every Service's carried IPs, so a cluster that switches from
//! MetalLB's controller keeps its addresses. No I/O, no clock, no randomness: where MetalLB
//! leaves an order to Go's map iteration, this module fixes one (said below).
//!
//! `tests/pool_metallb.rs` runs random scenarios (allocate, assign, release, pool changes)
//! through MetalLB v0.16.2's own allocator as well (`conformance/metallb-alloc`) and requires
//! the same IPs, pools, failures and counters at every step; the convergence and restart
//! logic below follows MetalLB's controller, which that test cannot call.
//!
//! The rules, each with the MetalLB v0.16.2 function it follows (files under
//! `go.universe.tf/metallb`):
//!
//! **Pools** (`internal/config/config.go`: `poolsFor`, `addressPoolFromCR`, `ParseCIDR`).
//! `spec.addresses` entries are CIDRs (host bits ignored) or `a-b` ranges of one family; no
//! two entries may overlap, in one pool or across pools; pool names are unique. Bad
//! configuration is a [`ConfigError`] naming the pool and field. `avoidBuggyIPs` skips IPv4
//! addresses ending in .0 or .255 ([`is_buggy`]); such an address counts as outside the pool,
//! so even asking for it fails (`allocator.go:poolFor`). `autoAssign: false` keeps a pool out
//! of automatic allocation only: asking for its name or for one of its IPs still works.
//!
//! **Which services a pool admits** (`allocator.go:isPoolCompatibleWithService`). Without
//! `serviceAllocation`, every service. With it, the namespace must be listed in `namespaces`
//! or match a `namespaceSelectors` entry (if the pool has either), and the service's labels
//! must match one `serviceSelectors` entry (if it has any). [`LabelSelector`] implements
//! Kubernetes' selector rules. *Differs:* MetalLB resolves namespace selectors against the
//! namespaces that exist when the configuration is read, and a pool whose selectors match no
//! namespace at all then admits every namespace; here a namespace must match.
//!
//! **Choosing IPs** (`allocator.go`: `Allocate`, `pinnedPoolsForService`, `sortPools`,
//! `findBestPoolForService`, `getFreeIPsFromPool`, `getIPFromCIDR`; `allocation.go`;
//! `controller/service.go:allocateIPs`). In order: requested IPs (`metallb.io/loadBalancerIPs`
//! or `spec.loadBalancerIP`, never both) are assigned as asked, must match the service's
//! family, and must lie in `metallb.io/address-pool` if that is set too; else a named pool
//! gives its first usable IPs; else automatic allocation tries the pools pinned to the service
//! (auto-assignable, with a `serviceAllocation` that admits it; positive `priority` first,
//! lowest first, then no priority) and then the auto-assignable pools without
//! `serviceAllocation`. In each list the first pool that offers the service's family, or both
//! families, wins; for a dual-stack `PreferDualStack` service, failing that, the first pool
//! offering its primary family (`spec.ipFamilies[0]`), else the other. Within a pool, each
//! family's IP is the lowest usable one, entries in configuration order: usable means free, or
//! held only by services this one may share with (so sharing services pack onto one IP).
//! A dual-stack pair lists IPv4 first (a family added later goes after the first IP). *Differs:* MetalLB walks unpinned pools in Go map order
//! (random) and sorts equal priorities unstably; here ties go by pool name.
//!
//! **Dual stack** (`allocation.go:selectIPsForFamilyAndPolicy`,
//! `service.go:serviceFamilyChanged`). The family comes from the cluster IPs: one IP of
//! its family, or both for `RequireDualStack` (else nothing) and `PreferDualStack` (else one).
//! A carried pair is kept for a dual-stack `PreferDualStack` service even if it is one IP;
//! such a service with one IP tries for the other family from the same pool on every
//! convergence (`AllocateFromPoolForAdditionalFamily`). *Differs:* MetalLB tries that also in a
//! single-stack cluster, then clears the pair as a family change on the next pass; we only
//! try for dual-stack services.
//!
//! **Sharing** (`allocator.go:checkSharing`, `sharingOK`; `k8salloc.BackendKey`). Services
//! share an IP only if all have the same non-empty `metallb.io/allow-shared-ip` key, the same
//! backend key (for `externalTrafficPolicy: Local`, the pod selector printed as `k=v,...`
//! sorted by key; for `Cluster`, empty: see [`backend_key`]), and no two use one protocol and
//! port. A service alone on its IP may change its key in place. *Differs:* MetalLB remembers one
//! key per IP and forgets it when the last port on the IP goes, so a service without ports can
//! end up sharing with one that has no key (checked with `conformance/metallb-alloc`); we
//! check every holder. (Kubernetes gives every LoadBalancer at least one port, so this does not
//! show in a cluster.)
//!
//! **Convergence and release** (`controller/service.go:convergeBalancer`, `main.go:SetBalancer`,
//! `allocator.go:Unassign`). See [`Allocator::converge`]: carried IPs are re-assigned (a no-op
//! when nothing changed), cleared when they no longer fit, and a service left with nothing is
//! allocated. [`Allocator::release`] frees a deleted service's IPs; the IPs are then free for
//! anyone (the controller should re-converge waiting services, as MetalLB's `ReprocessAll`).
//!
//! **Pool changes** (`allocator.go:SetPools`). [`Allocator::set_pools`] moves each allocation
//! to the pool now holding its IPs and releases those no pool holds.
//!
//! **Restart** (`service_controller_reload.go:reprocessAll`). See [`Allocator::rebuild`]:
//! services with more carried IPs first, then by namespace and name; on a conflict the first
//! keeps the IP. *Differs:* every valid carried allocation is kept before any loser is
//! re-allocated, so a conflict never moves a bystander.
//!
//! **Counters** (`allocator.go:poolCount`, `updatePoolStats`). Per pool and family: assigned
//! is the number of distinct IPs held; available is the usable count minus that, the usable
//! count being `i64::MAX` once an entry holds a CIDR prefix of 2^62 addresses or more.
//! *Differs:* MetalLB counts a lone `/32` ending in .0 in an avoiding pool as -1 address; we
//! count 0.

mod addr;
mod allocator;
mod config;
mod converge;
mod error;
mod request;
mod status;

pub use crate::selector::{Labels, Selector};
pub use addr::{Family, canonical};
pub use allocator::{Allocation, Allocator, PoolCounters};
pub use config::{
    AddressRange, ConfigError, Pool, PoolSpec, Pools, ServiceAllocation, is_buggy, parse_address,
};
pub use converge::{ClearReason, Convergence, Failure, Note};
pub use error::{AllocError, RequestError, ShareRefusal};
pub use request::{
    ADDRESS_POOL, ALLOW_SHARED_IP, ANNOTATION_PREFIX, DEPRECATED_PREFIX, FamilyPolicy,
    IP_ALLOCATED_FROM_POOL, LOAD_BALANCER_IPS, Port, Request, ServiceFamily, ServiceFields,
    annotation, backend_key, deprecated_annotations, requested_ips,
};
pub use status::StatusCounters;

impl Allocator {
    /// Checks the allocator's own bookkeeping: every IP's holders are exactly the services
    /// whose allocation lists it, every allocation's IPs lie in its pool, all holders of one IP
    /// may share it with each other, and the counters equal a recount. For tests; returns what
    /// is wrong.
    pub fn audit(&self) -> Result<(), String> {
        let mut expected: std::collections::BTreeMap<std::net::IpAddr, Vec<&str>> =
            std::collections::BTreeMap::new();
        for (key, alloc) in self.allocations() {
            let pool = self
                .pools()
                .get(&alloc.pool)
                .ok_or_else(|| format!("{key}: pool {} does not exist", alloc.pool))?;
            for ip in &alloc.ips {
                if !pool.owns(*ip) {
                    return Err(format!("{key}: {ip} is not in pool {}", alloc.pool));
                }
                expected.entry(*ip).or_default().push(key);
            }
        }
        let in_use: Vec<std::net::IpAddr> = self.ips_in_use().collect();
        if !in_use.iter().eq(expected.keys()) {
            return Err(format!(
                "IPs in use {in_use:?} differ from the allocations' IPs"
            ));
        }
        for (ip, keys) in &expected {
            let held: Vec<&str> = self.services_on(*ip).collect();
            if &held != keys {
                return Err(format!("{ip}: held by {held:?}, allocations say {keys:?}"));
            }
            for (i, a) in keys.iter().enumerate() {
                for b in &keys[..i] {
                    let (x, y) = (&self.allocations()[*a], &self.allocations()[*b]);
                    let shares = x.sharing_key.is_some()
                        && x.sharing_key == y.sharing_key
                        && x.backend_key == y.backend_key
                        && !x.ports.iter().any(|p| y.ports.contains(p));
                    if !shares {
                        return Err(format!("{ip}: {a} and {b} may not share it"));
                    }
                }
            }
        }
        if self.assigned_counts() != self.recounted() {
            return Err(format!(
                "counters {:?} differ from a recount {:?}",
                self.assigned_counts(),
                self.recounted()
            ));
        }
        Ok(())
    }
}
