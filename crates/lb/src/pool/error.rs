//! Why an allocation failed, in MetalLB's categories, so a controller can raise the same
//! events. No error from [`Allocator`](super::Allocator)'s `assign` or `allocate*` methods
//! changes any state; what [`Allocator::converge`](super::Allocator::converge) released on the
//! way is reported in its [`Note`](super::Note)s.

use super::request::{Port, ServiceFamily};
use std::net::IpAddr;

/// Why a Service's fields could not be read as a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Neither `spec.clusterIPs` nor `spec.clusterIP` is set, so the family is unknown
    /// (MetalLB: `clearAssignment` reason `noClusterIPs`).
    #[error("the service has no cluster IPs, so its IP family is unknown")]
    NoClusterIps,
    /// The cluster IPs do not parse, or are not one address or one of each family.
    #[error("cannot tell the IP family from cluster IPs {0:?}")]
    BadClusterIps(Vec<String>),
    /// `RequireDualStack` with fewer than two cluster IPs (MetalLB's `not enough clusterips`
    /// event).
    #[error("the service requires dual stack but has only one cluster IP")]
    NotEnoughClusterIps,
    /// `spec.ipFamilyPolicy` is none of the three policies.
    #[error("unknown spec.ipFamilyPolicy {0:?}")]
    UnknownFamilyPolicy(String),
    /// Both `metallb.io/loadBalancerIPs` and `spec.loadBalancerIP` are set.
    #[error("service can not have both metallb.io/loadBalancerIPs and spec.loadBalancerIP")]
    BothIpFields,
    /// An entry of `metallb.io/loadBalancerIPs` is not an IP address.
    #[error("invalid metallb.io/loadBalancerIPs: {0:?}")]
    BadLoadBalancerIps(String),
    /// `spec.loadBalancerIP` is not an IP address.
    #[error("invalid spec.loadBalancerIP {0:?}")]
    BadLoadBalancerIp(String),
    /// The requested IPs are not one address, or two of different families.
    #[error("requested IPs {0:?} are not one address or one of each family")]
    BadIpFamilies(Vec<IpAddr>),
}

/// Why two services may not share an IP (MetalLB's `sharingOK` and port check).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareRefusal {
    /// The service already on the IP has no sharing key.
    #[error("existing service does not allow sharing")]
    ExistingDoesNotShare,
    /// The new service has no sharing key.
    #[error("new service does not allow sharing")]
    NewDoesNotShare,
    /// The sharing keys differ.
    #[error("sharing key {new:?} does not match existing sharing key {existing:?}")]
    KeyMismatch {
        /// The key of the service on the IP.
        existing: String,
        /// The key of the newcomer.
        new: String,
    },
    /// The backend keys differ (for `Local` services, their pod selectors).
    #[error("backend key {new:?} does not match existing backend key {existing:?}")]
    BackendMismatch {
        /// The backend key of the service on the IP.
        existing: String,
        /// The backend key of the newcomer.
        new: String,
    },
    /// A port (protocol and number) is already used on the IP.
    #[error("port {0} is already in use")]
    PortInUse(Port),
}

/// Why an assignment or allocation failed. From [`Allocator::converge`](super::Allocator::converge)
/// MetalLB reports these as the Warning event `AllocationFailed`, or as the Info event
/// `ClearAssignment` when carried IPs no longer fit ([`ClearReason::NotAllowed`](super::ClearReason::NotAllowed)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The requested IPs are in no pool, or in different pools, or one is a buggy IP of a pool
    /// that avoids them (MetalLB: `%q is not allowed in config`).
    /// State: unchanged.
    #[error("{ips:?} is not allowed in config: no single pool holds all of them")]
    NotInAnyPool {
        /// The IPs asked for.
        ips: Vec<IpAddr>,
    },
    /// The pool holding the requested IPs, or the requested pool, does not admit the service
    /// by its `serviceAllocation` (MetalLB: `pool %s not compatible for ip assignment`).
    /// State: unchanged.
    #[error("pool {pool} not compatible for ip assignment")]
    PoolNotAllowed {
        /// The pool.
        pool: String,
    },
    /// More than two IPs asked for.
    /// State: unchanged.
    #[error("more than two addresses {ips:?}")]
    TooManyIps {
        /// The IPs asked for.
        ips: Vec<IpAddr>,
    },
    /// Two IPs of one family asked for.
    /// State: unchanged.
    #[error("{ips:?} has the same family")]
    SameFamily {
        /// The IPs asked for.
        ips: Vec<IpAddr>,
    },
    /// An IP is held by services this one may not share it with.
    /// State: unchanged.
    #[error("{ip} is in use by {services:?}: {refusal}")]
    IpInUse {
        /// The IP.
        ip: IpAddr,
        /// The services on it other than this one, in name order.
        services: Vec<String>,
        /// The first rule broken, against the first of them that breaks one.
        refusal: ShareRefusal,
    },
    /// `metallb.io/address-pool` names no pool (MetalLB: `unknown pool %q`).
    /// State: unchanged.
    #[error("unknown pool {pool:?}")]
    UnknownPool {
        /// The name asked for.
        pool: String,
    },
    /// The requested pool has no IP this service may take, of any family (MetalLB: `no
    /// available IPs in pool %s`).
    /// State: unchanged.
    #[error("no available IPs in pool {pool}")]
    PoolExhausted {
        /// The pool.
        pool: String,
    },
    /// The requested pool has no IP of the family the service needs (MetalLB: `no available
    /// IPs in pool %s for %s IPFamily`).
    /// State: unchanged.
    #[error("no available IPs in pool {pool} for {family} IPFamily")]
    NoFamilyInPool {
        /// The pool.
        pool: String,
        /// What the service needed.
        family: ServiceFamily,
    },
    /// Automatic allocation: no auto-assignable pool admits the service. MetalLB says `no
    /// available IPs` for this and [`AllocError::NoAvailableIps`] alike.
    /// State: unchanged.
    #[error("no available IPs: no auto-assignable pool admits the service")]
    NoPoolMatches,
    /// Automatic allocation: pools admit the service, but none has an IP it may take of the
    /// family it needs (MetalLB: `no available IPs`).
    /// State: unchanged.
    #[error("no available IPs")]
    NoAvailableIps,
    /// The requested IPs' family is not the service's (MetalLB: `requested loadBalancer IP(s)
    /// %q does not match the ipFamily of the service`).
    /// State: unchanged.
    #[error(
        "requested loadBalancer IP(s) {ips:?} does not match the ipFamily of the service ({family})"
    )]
    RequestedFamilyMismatch {
        /// The IPs asked for.
        ips: Vec<IpAddr>,
        /// The service's family.
        family: ServiceFamily,
    },
    /// The requested IPs are not in the requested pool (MetalLB: `requested loadBalancer
    /// IP(s) %q is not compatible with requested address pool %s`).
    /// State: unchanged.
    #[error(
        "requested loadBalancer IP(s) {ips:?} is not compatible with requested address pool {pool}"
    )]
    RequestedIpsNotInPool {
        /// The IPs asked for.
        ips: Vec<IpAddr>,
        /// The pool asked for.
        pool: String,
    },
    /// The service already holds IPs of another family than it now needs (MetalLB: `IP for
    /// wrong family assigned`).
    /// State: unchanged.
    #[error("IPs of the wrong family assigned: hold {held:?}, service is {family}")]
    WrongFamilyHeld {
        /// The IPs held.
        held: Vec<IpAddr>,
        /// The service's family.
        family: ServiceFamily,
    },
    /// The requested IPs could not be read.
    /// State: unchanged.
    #[error(transparent)]
    BadRequest(#[from] RequestError),
}
