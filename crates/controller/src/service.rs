//! A Service as the allocator sees it, and the Service as it should be written back: pure
//! functions over `k8s-openapi`'s Service, following MetalLB v0.16.2's controller
//! (`controller/service.go`, `internal/k8s/controllers/service_controller.go`).

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus};
use std::collections::BTreeMap;
use std::net::IpAddr;
use vigil_lb::pool::{
    ANNOTATION_PREFIX, DEPRECATED_PREFIX, IP_ALLOCATED_FROM_POOL, Labels, Port, Request,
    RequestError, ServiceFields,
};

/// `namespace/name`, the allocation key (MetalLB's).
pub fn key(svc: &Service) -> String {
    format!(
        "{}/{}",
        svc.metadata.namespace.as_deref().unwrap_or_default(),
        svc.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether this controller handles the Service at all (MetalLB's
/// `filterByLoadBalancerClass`, inverted): with `--lb-class=X` only class X, without it
/// only Services with no class. A Service not handled is left exactly as it is.
pub fn handled(svc: &Service, lb_class: Option<&str>) -> bool {
    let class = svc
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_class.as_deref());
    class == lb_class
}

/// `spec.type == LoadBalancer`.
pub fn is_load_balancer(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

/// The IPs `status.loadBalancer.ingress` lists; entries without an IP, or with one that does
/// not parse, are skipped (MetalLB drops them the same way before converging).
pub fn ingress_ips(svc: &Service) -> Vec<IpAddr> {
    svc.status
        .iter()
        .filter_map(|s| s.load_balancer.as_ref())
        .flat_map(|lb| lb.ingress.iter().flatten())
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

/// The allocation request for the Service, its namespace having `namespace_labels`.
pub fn request(svc: &Service, namespace_labels: &Labels) -> Result<Request, RequestError> {
    let empty = BTreeMap::new();
    let spec = svc.spec.clone().unwrap_or_default();
    let mut cluster_ips = spec.cluster_ips.clone().unwrap_or_default();
    if cluster_ips.is_empty()
        && let Some(ip) = spec.cluster_ip.clone()
    {
        cluster_ips.push(ip);
    }
    // "None" is a headless Service's cluster IP; it has no family.
    cluster_ips.retain(|ip| ip != "None");
    let ports: Vec<Port> = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            Some(Port {
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port: u16::try_from(p.port).ok()?,
            })
        })
        .collect();
    let fields = ServiceFields {
        namespace: svc.metadata.namespace.as_deref().unwrap_or_default(),
        name: svc.metadata.name.as_deref().unwrap_or_default(),
        annotations: svc.metadata.annotations.as_ref().unwrap_or(&empty),
        labels: svc.metadata.labels.as_ref().unwrap_or(&empty),
        namespace_labels,
        cluster_ips: &cluster_ips,
        ip_families: spec.ip_families.as_deref().unwrap_or_default(),
        ip_family_policy: spec.ip_family_policy.as_deref(),
        load_balancer_ip: spec.load_balancer_ip.as_deref(),
        traffic_policy_local: spec.external_traffic_policy.as_deref() == Some("Local"),
        selector: spec.selector.as_ref().unwrap_or(&empty),
        ports: &ports,
    };
    Request::from_service(&fields)
}

/// The Service with the fields this controller manages set for `ips` from `pool`: the
/// ingress list, `metallb.io/ip-allocated-from-pool` (removed when there are no IPs), and the
/// deprecated `metallb.universe.tf/ip-allocated-from-pool` always removed (MetalLB drops it
/// since #2642). Everything else is kept, including the resourceVersion, so writing it back
/// fails if the Service changed meanwhile.
pub fn with_allocation(svc: &Service, ips: &[IpAddr], pool: Option<&str>) -> Service {
    let mut out = svc.clone();
    let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.remove(&format!("{DEPRECATED_PREFIX}{IP_ALLOCATED_FROM_POOL}"));
    let ours = format!("{ANNOTATION_PREFIX}{IP_ALLOCATED_FROM_POOL}");
    match pool {
        Some(pool) if !ips.is_empty() => {
            annotations.insert(ours, pool.to_string());
        }
        _ => {
            annotations.remove(&ours);
        }
    }
    if annotations.is_empty() {
        out.metadata.annotations = None;
    }
    let ingress: Vec<LoadBalancerIngress> = ips
        .iter()
        .map(|ip| LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..LoadBalancerIngress::default()
        })
        .collect();
    let status = out.status.get_or_insert_with(ServiceStatus::default);
    // MetalLB replaces the whole load-balancer status (hostnames and port statuses too).
    status.load_balancer = Some(LoadBalancerStatus {
        ingress: (!ingress.is_empty()).then_some(ingress),
    });
    out
}

/// Whether writing `new` over `old` changes anything this controller manages. An ingress
/// entry with an IP and no `ipMode` is the same as one with `ipMode: VIP`: the API server
/// fills that in (Kubernetes 1.30 and later), so comparing them as they are would rewrite
/// every allocated Service on every reconcile.
pub fn differs(old: &Service, new: &Service) -> bool {
    let lb = |s: &Service| {
        let mut l = s
            .status
            .as_ref()
            .and_then(|st| st.load_balancer.clone())
            .map(|l| l.ingress.unwrap_or_default())
            .unwrap_or_default();
        for i in &mut l {
            if i.ip.is_some() && i.ip_mode.is_none() {
                i.ip_mode = Some("VIP".into());
            }
        }
        l
    };
    let ann = |s: &Service| s.metadata.annotations.clone().unwrap_or_default();
    lb(old) != lb(new) || ann(old) != ann(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(json: serde_json::Value) -> Service {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn class_filter_is_metallbs() {
        let none = svc(serde_json::json!({"spec": {"type": "LoadBalancer"}}));
        let x =
            svc(serde_json::json!({"spec": {"type": "LoadBalancer", "loadBalancerClass": "x"}}));
        assert!(handled(&none, None) && !handled(&none, Some("x")));
        assert!(handled(&x, Some("x")) && !handled(&x, None) && !handled(&x, Some("y")));
    }

    #[test]
    fn allocation_written_and_cleared() {
        let s = svc(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n", "resourceVersion": "7",
                "annotations": {"metallb.universe.tf/ip-allocated-from-pool": "old", "keep": "1"}},
            "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.18.0.9"}, {"hostname": "h"}]}}
        }));
        assert_eq!(
            ingress_ips(&s),
            vec!["198.18.0.9".parse::<IpAddr>().unwrap()]
        );
        let ip: IpAddr = "198.18.0.1".parse().unwrap();
        let w = with_allocation(&s, &[ip], Some("p"));
        assert!(differs(&s, &w));
        let ann = w.metadata.annotations.clone().unwrap();
        assert_eq!(
            ann.get("metallb.io/ip-allocated-from-pool")
                .map(String::as_str),
            Some("p")
        );
        assert!(!ann.contains_key("metallb.universe.tf/ip-allocated-from-pool"));
        assert_eq!(w.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(ingress_ips(&w), vec![ip]);
        let c = with_allocation(&w, &[], None);
        assert!(ingress_ips(&c).is_empty());
        assert_eq!(c.metadata.annotations.unwrap().len(), 1);
        assert!(!differs(&w, &with_allocation(&w, &[ip], Some("p"))));
        // As the API server stores it: ipMode filled in.
        let mut stored = w.clone();
        stored
            .status
            .as_mut()
            .unwrap()
            .load_balancer
            .as_mut()
            .unwrap()
            .ingress
            .as_mut()
            .unwrap()[0]
            .ip_mode = Some("VIP".into());
        assert!(!differs(
            &stored,
            &with_allocation(&stored, &[ip], Some("p"))
        ));
    }
}
