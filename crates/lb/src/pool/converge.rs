//! One service's allocation brought in line with its spec (MetalLB's
//! `controller/service.go:convergeBalancer`, its IP part), and the state rebuilt at start from
//! the IPs services already carry.

use super::addr::canonical;
use super::allocator::Allocator;
use super::config::Pools;
use super::error::{AllocError, RequestError};
use super::request::{FamilyPolicy, Request, ServiceFamily};
use std::net::IpAddr;

/// The outcome of [`Allocator::converge`]: what the service holds now (what
/// `status.loadBalancer.ingress` and `metallb.io/ip-allocated-from-pool` should say), what
/// went wrong, and what happened on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Convergence {
    /// The service's IPs now, in order; empty if it holds none.
    pub ips: Vec<IpAddr>,
    /// Their pool.
    pub pool: Option<String>,
    /// What failed, if anything.
    pub failure: Option<Failure>,
    /// What was done, in order.
    pub notes: Vec<Note>,
}

/// A failed convergence, by the event MetalLB raises for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No pool is configured: the service was cleared (MetalLB logs `noConfig`, no event).
    NoPools,
    /// The requested IPs could not be read while the service held IPs: it keeps them and
    /// MetalLB raises `LoadBalancerFailed`.
    InvalidRequest(RequestError),
    /// Allocation failed: the service holds nothing; MetalLB raises `AllocationFailed`.
    Allocation(AllocError),
}

/// Why a service's current IPs were dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClearReason {
    /// The status lists no IP, so whatever the allocator held for the service is dropped
    /// before allocating afresh (MetalLB clears state in this case too).
    NoIngress,
    /// No pool is configured.
    NoPools,
    /// The IPs' family is not the service's (MetalLB's `serviceFamilyChanged`).
    FamilyChanged,
    /// The IPs cannot be assigned any more (out of every pool, pool no longer admits the
    /// service, or a sharing conflict): MetalLB's `ClearAssignment` Info event, `current IP
    /// for %q not allowed by config`.
    NotAllowed(AllocError),
    /// `metallb.io/address-pool` names another pool than the IPs' (`differentPoolRequested`).
    DifferentPoolRequested,
    /// The requested IPs differ from the current ones (`differentIPRequested`).
    DifferentIpsRequested,
}

/// One step of a convergence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The IPs the service held (or carried in its status) were dropped.
    Cleared {
        /// The IPs dropped.
        ips: Vec<IpAddr>,
        /// Why.
        reason: ClearReason,
    },
    /// The service keeps the IPs it carried.
    Kept,
    /// New IPs were allocated (MetalLB's `IPAllocated` event, `Assigned IP %q`).
    Allocated(Vec<IpAddr>),
    /// A `PreferDualStack` service got the missing family (`IPAllocated`, `Assigned
    /// additional IP %q`).
    AddedFamily(IpAddr),
    /// Getting the missing family failed; the service keeps its one IP
    /// (`AdditionalAssignFailed` Info event).
    AddFamilyFailed(AllocError),
}

impl Allocator {
    /// Brings the service's allocation in line with `req`, given the IPs its status carries
    /// (`ingress`), as MetalLB's `convergeBalancer` does:
    ///
    /// 1. no pools: clear, fail;
    /// 2. IPs of the wrong family for the service: clear;
    /// 3. otherwise re-assign them ([`Allocator::assign`], a no-op when nothing changed): if
    ///    that fails, clear; if `metallb.io/address-pool` names another pool, clear; if the
    ///    requested IPs cannot be read, stop here keeping the IPs; if they differ from the
    ///    current IPs, clear;
    /// 4. a dual-stack `PreferDualStack` service left with one IP tries for the other family
    ///    from the same pool;
    /// 5. a service left with nothing is allocated ([`Allocator::allocate`]).
    pub fn converge(&mut self, req: &Request, ingress: &[IpAddr]) -> Convergence {
        let mut notes = Vec::new();
        let mut ips = match self.keep_existing(req, ingress, &mut notes) {
            Ok(ips) => ips,
            Err(failure) => return self.outcome(req, Some(failure), notes),
        };
        if !ips.is_empty() {
            notes.push(Note::Kept);
        }
        // MetalLB tries this for every PreferDualStack service with one IP, also in a
        // single-stack cluster, where the next pass clears the pair as a family change; we
        // try it only for dual-stack services (MetalLB #2724 made the first allocation follow
        // the cluster IPs' family the same way).
        if ips.len() == 1
            && req.policy == FamilyPolicy::PreferDualStack
            && req.family == ServiceFamily::Dual
        {
            match self.add_family(req) {
                Ok(ip) => {
                    notes.push(Note::AddedFamily(ip));
                    ips.push(ip);
                }
                Err(e) => notes.push(Note::AddFamilyFailed(e)),
            }
        }
        if ips.is_empty() {
            match self.allocate(req) {
                Ok(new) => notes.push(Note::Allocated(new)),
                Err(e) => return self.outcome(req, Some(Failure::Allocation(e)), notes),
            }
        }
        self.outcome(req, None, notes)
    }

    /// Steps 1 to 3 of [`Allocator::converge`]: the IPs the service keeps (possibly none).
    fn keep_existing(
        &mut self,
        req: &Request,
        ingress: &[IpAddr],
        notes: &mut Vec<Note>,
    ) -> Result<Vec<IpAddr>, Failure> {
        let mut ips: Vec<IpAddr> = ingress.iter().copied().map(canonical).collect();
        if self.pools().is_empty() {
            self.clear(req, &ips, ClearReason::NoPools, notes);
            return Err(Failure::NoPools);
        }
        if ips.is_empty() {
            self.clear(req, &ips, ClearReason::NoIngress, notes);
            return Ok(ips);
        }
        if family_changed(&ips, req) {
            self.clear(req, &ips, ClearReason::FamilyChanged, notes);
            ips.clear();
        }
        if ips.is_empty() {
            return Ok(ips);
        }
        if let Err(e) = self.assign(req, &ips) {
            self.clear(req, &ips, ClearReason::NotAllowed(e), notes);
            ips.clear();
        }
        if let Some(pool) = &req.pool
            && !ips.is_empty()
            && self.allocation(&req.key).map(|a| &a.pool) != Some(pool)
        {
            self.clear(req, &ips, ClearReason::DifferentPoolRequested, notes);
            ips.clear();
        }
        let wanted = req.requested_ips.clone().map_err(Failure::InvalidRequest)?;
        if !wanted.is_empty() && !same_ips(&ips, &wanted) {
            if !ips.is_empty() {
                self.clear(req, &ips, ClearReason::DifferentIpsRequested, notes);
            }
            ips.clear();
        }
        Ok(ips)
    }

    /// Releases what the service holds (MetalLB's `clearServiceState`), noting it when it held
    /// or carried anything.
    fn clear(
        &mut self,
        req: &Request,
        carried: &[IpAddr],
        reason: ClearReason,
        notes: &mut Vec<Note>,
    ) {
        let held = self.release(&req.key).map(|a| a.ips);
        let ips = if carried.is_empty() {
            held.unwrap_or_default()
        } else {
            carried.to_vec()
        };
        if !ips.is_empty() {
            notes.push(Note::Cleared { ips, reason });
        }
    }

    fn outcome(&self, req: &Request, failure: Option<Failure>, notes: Vec<Note>) -> Convergence {
        let alloc = self.allocation(&req.key);
        Convergence {
            ips: alloc.map(|a| a.ips.clone()).unwrap_or_default(),
            pool: alloc.map(|a| a.pool.clone()),
            failure,
            notes,
        }
    }

    /// Rebuilds the state at start from the IPs services carry, as MetalLB's controller does
    /// when it reprocesses every service (`service_controller_reload.go:reprocessAll`):
    /// services with more IPs in their status first, then in the API server's list order
    /// (namespace, then name; MetalLB's sort is not stable, so this tie-break is ours).
    ///
    /// Where two services carry one IP they may not share, the first in that order keeps it
    /// and the other is re-allocated, as in MetalLB. Unlike MetalLB, which converges each
    /// service in turn (so a loser's new IP can be one a later service still carries, moving
    /// that service too), every carried allocation that is valid on its own is kept first, and
    /// only then are the rest converged: a conflict moves only the services in it.
    ///
    /// Returns each service's convergence in the order processed.
    pub fn rebuild(
        pools: Pools,
        services: impl IntoIterator<Item = (Request, Vec<IpAddr>)>,
    ) -> (Self, Vec<(String, Convergence)>) {
        let mut services: Vec<(Request, Vec<IpAddr>)> = services.into_iter().collect();
        services.sort_by(|(a, ai), (b, bi)| {
            bi.len()
                .cmp(&ai.len())
                .then_with(|| a.namespace.cmp(&b.namespace))
                .then_with(|| a.key.cmp(&b.key))
        });
        let mut alloc = Self::new(pools);
        for (req, ingress) in &services {
            if !ingress.is_empty() {
                let mut scratch = Vec::new();
                let _ = alloc.keep_existing(req, ingress, &mut scratch);
            }
        }
        let results = services
            .iter()
            .map(|(req, ingress)| (req.key.clone(), alloc.converge(req, ingress)))
            .collect();
        (alloc, results)
    }
}

/// MetalLB's `serviceFamilyChanged`: the IPs have no family, or not the service's, unless the
/// service is dual-stack and `PreferDualStack` (then one IP is fine).
fn family_changed(ips: &[IpAddr], req: &Request) -> bool {
    match ServiceFamily::of(ips) {
        None => true,
        Some(f) if f == req.family => false,
        Some(_) => {
            !(req.family == ServiceFamily::Dual && req.policy == FamilyPolicy::PreferDualStack)
        }
    }
}

/// The same IPs, order aside (MetalLB's `isEqualIPs`).
fn same_ips(a: &[IpAddr], b: &[IpAddr]) -> bool {
    let mut a: Vec<IpAddr> = a.iter().copied().map(canonical).collect();
    let mut b: Vec<IpAddr> = b.iter().copied().map(canonical).collect();
    a.sort();
    b.sort();
    a == b
}
