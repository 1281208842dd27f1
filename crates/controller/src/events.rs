//! The Service events MetalLB v0.16.2's controller raises, with its reasons verbatim
//! (`controller/service.go:convergeBalancer`, `controller/main.go:SetBalancer`): pure, from
//! an `lb::pool` convergence or a request that could not be read.

use std::net::IpAddr;
use vigil_lb::pool::{ClearReason, Convergence, Failure, Note, RequestError};

/// `Normal` or `Warning` (MetalLB's `Infof` / `Errorf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// One event to publish on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEvent {
    /// Its type.
    pub severity: Severity,
    /// MetalLB's reason, e.g. `AllocationFailed`.
    pub reason: &'static str,
    /// The message.
    pub note: String,
}

/// `IPAllocated`: new IPs.
pub const IP_ALLOCATED: &str = "IPAllocated";
/// `AllocationFailed`: no IP could be given.
pub const ALLOCATION_FAILED: &str = "AllocationFailed";
/// `ClearAssignment`: the current IPs no longer fit the configuration.
pub const CLEAR_ASSIGNMENT: &str = "ClearAssignment";
/// `LoadBalancerFailed`: the requested IPs cannot be read.
pub const LOAD_BALANCER_FAILED: &str = "LoadBalancerFailed";
/// `AdditionalAssignFailed`: a `PreferDualStack` service's second family failed.
pub const ADDITIONAL_ASSIGN_FAILED: &str = "AdditionalAssignFailed";
/// `deprecatedAnnotation`: a `metallb.universe.tf/` annotation is in use.
pub const DEPRECATED_ANNOTATION: &str = "deprecatedAnnotation";
/// `not enough clusterips` (MetalLB's reason has spaces).
pub const NOT_ENOUGH_CLUSTER_IPS: &str = "not enough clusterips";
/// `noclusterIPsIPFamily`: the cluster IPs give no family.
pub const NO_CLUSTER_IPS_FAMILY: &str = "noclusterIPsIPFamily";

impl ServiceEvent {
    fn new(severity: Severity, reason: &'static str, note: String) -> Self {
        Self {
            severity,
            reason,
            note,
        }
    }
}

/// Go's `%q` of a `[]net.IP`: `["198.18.0.1" "2001:db8::1"]`.
fn go_quoted(ips: &[IpAddr]) -> String {
    let inner: Vec<String> = ips.iter().map(|ip| format!("\"{ip}\"")).collect();
    format!("[{}]", inner.join(" "))
}

/// The events for one convergence of service `key`, in MetalLB's order.
pub fn for_convergence(key: &str, c: &Convergence) -> Vec<ServiceEvent> {
    let mut out = Vec::new();
    for note in &c.notes {
        match note {
            Note::Cleared {
                reason: ClearReason::NotAllowed(e),
                ..
            } => out.push(ServiceEvent::new(
                Severity::Normal,
                CLEAR_ASSIGNMENT,
                format!(
                    "current IP for \"{key}\" not allowed by config, will attempt for new IP assignment: {e}"
                ),
            )),
            Note::Cleared { .. } | Note::Kept => {}
            Note::Allocated(ips) => out.push(ServiceEvent::new(
                Severity::Normal,
                IP_ALLOCATED,
                format!("Assigned IP {}", go_quoted(ips)),
            )),
            Note::AddedFamily(ip) => out.push(ServiceEvent::new(
                Severity::Normal,
                IP_ALLOCATED,
                format!("Assigned additional IP \"{ip}\""),
            )),
            Note::AddFamilyFailed(e) => out.push(ServiceEvent::new(
                Severity::Normal,
                ADDITIONAL_ASSIGN_FAILED,
                format!("cannot assign additional IP in PreferDualStack: {e}"),
            )),
        }
    }
    match &c.failure {
        None | Some(Failure::NoPools) => {}
        Some(Failure::InvalidRequest(e)) => out.push(ServiceEvent::new(
            Severity::Warning,
            LOAD_BALANCER_FAILED,
            format!("invalid requested loadbalancer IPs: {e}"),
        )),
        Some(Failure::Allocation(e)) => out.push(ServiceEvent::new(
            Severity::Warning,
            ALLOCATION_FAILED,
            format!("Failed to allocate IP for \"{key}\": {e}"),
        )),
    }
    out
}

/// The event for a Service whose fields give no request, if MetalLB raises one (it raises
/// none for a Service without cluster IPs).
pub fn for_request_error(e: &RequestError) -> Option<ServiceEvent> {
    match e {
        RequestError::NoClusterIps => None,
        RequestError::NotEnoughClusterIps => Some(ServiceEvent::new(
            Severity::Warning,
            NOT_ENOUGH_CLUSTER_IPS,
            format!("Service requires dual stack but not enough clusterips: {e}"),
        )),
        other => Some(ServiceEvent::new(
            Severity::Warning,
            NO_CLUSTER_IPS_FAMILY,
            format!("Failed to retrieve ClusterIPs IPFamily: {other}"),
        )),
    }
}

/// `deprecatedAnnotation` for one annotation key.
pub fn deprecated(annotation: &str) -> ServiceEvent {
    ServiceEvent::new(
        Severity::Warning,
        DEPRECATED_ANNOTATION,
        format!("Service uses deprecated annotation {annotation}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_lb::pool::AllocError;

    #[test]
    fn reasons_and_notes() {
        let ip: IpAddr = "198.18.0.1".parse().unwrap();
        let c = Convergence {
            ips: vec![ip],
            pool: Some("p".into()),
            failure: None,
            notes: vec![Note::Allocated(vec![ip, "2001:db8::1".parse().unwrap()])],
        };
        let ev = for_convergence("n/a", &c);
        assert_eq!(ev[0].reason, IP_ALLOCATED);
        assert_eq!(ev[0].note, "Assigned IP [\"198.18.0.1\" \"2001:db8::1\"]");
        let c = Convergence {
            ips: vec![],
            pool: None,
            failure: Some(Failure::Allocation(AllocError::NotInAnyPool {
                ips: vec![ip],
            })),
            notes: vec![],
        };
        let ev = for_convergence("n/a", &c);
        assert_eq!(
            (ev[0].severity, ev[0].reason),
            (Severity::Warning, ALLOCATION_FAILED)
        );
        assert!(
            ev[0]
                .note
                .starts_with("Failed to allocate IP for \"n/a\": ")
        );
    }
}
