//! A LoadBalancer Service as the tests need it: the Service, an EndpointSlice with ready
//! endpoints on chosen nodes (as the endpointslice controller would write it), and the ingress
//! IPs a controller would write through the status subresource.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::error::Error;
use crate::fixtures::{
    TestEndpoint, TestService, TestSlice, create_endpoint_slice, create_service,
};

/// A LoadBalancer Service of a test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbService {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `status.loadBalancer.ingress`, written by the test (none: left to a controller). The
    /// first is MetalLB's election key; both families make the Service dual stack.
    pub ingress: Vec<IpAddr>,
    /// Ready endpoints as (pod IP, node).
    pub endpoints: Vec<(IpAddr, String)>,
    /// `externalTrafficPolicy: Local` (Cluster otherwise).
    pub local: bool,
}

impl LbService {
    /// Service `namespace/name`, no ingress, no endpoints.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            ingress: Vec::new(),
            endpoints: Vec::new(),
            local: false,
        }
    }

    /// The ingress IPs the test writes, as a controller would.
    pub fn ingress(mut self, ips: &[IpAddr]) -> Self {
        self.ingress = ips.to_vec();
        self
    }

    /// A ready endpoint at `ip` on `node`.
    pub fn endpoint(mut self, ip: IpAddr, node: &str) -> Self {
        self.endpoints.push((ip, node.to_string()));
        self
    }

    /// One ready endpoint on each of `nodes`, the i-th at 198.18.1.`first + i` (a subnet
    /// nobody asks about).
    pub fn endpoints_on<S: AsRef<str>>(mut self, nodes: &[S], first: u8) -> Self {
        for (i, node) in nodes.iter().enumerate() {
            let last = first + u8::try_from(i).expect("few nodes");
            self = self.endpoint(IpAddr::from([198, 18, 1, last]), node.as_ref());
        }
        self
    }

    /// `externalTrafficPolicy: Local`.
    pub fn local(mut self) -> Self {
        self.local = true;
        self
    }
}

/// Creates the Service and its EndpointSlice (`<name>-kubelab`), then writes its ingress IPs
/// through the status subresource when it has any.
pub async fn create_lb_service(client: &Client, svc: &LbService) -> Result<(), Error> {
    let mut spec = TestService::load_balancer(&svc.namespace, &svc.name);
    if svc.ingress.iter().any(IpAddr::is_ipv4) && svc.ingress.iter().any(IpAddr::is_ipv6) {
        spec = spec.dual_stack();
    }
    if svc.local {
        spec = spec.external_traffic_policy("Local");
    }
    create_service(client, &spec).await?;
    let mut slice = TestSlice::for_service(&svc.namespace, &svc.name);
    for (ip, node) in &svc.endpoints {
        slice = slice.endpoint(TestEndpoint::ready(*ip, node));
    }
    create_endpoint_slice(client, &slice).await?;
    if !svc.ingress.is_empty() {
        let ingress: Vec<serde_json::Value> = svc
            .ingress
            .iter()
            .map(|ip| serde_json::json!({ "ip": ip.to_string() }))
            .collect();
        let status = serde_json::json!({ "status": { "loadBalancer": { "ingress": ingress } } });
        let services: Api<Service> = Api::namespaced(client.clone(), &svc.namespace);
        services
            .patch_status(&svc.name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    Ok(())
}

/// The Service's first ingress IP, once it has one (`None` before; an unparsable one is an
/// error).
pub async fn first_ingress(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<IpAddr>, Error> {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let svc = services.get(name).await?;
    svc.status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .and_then(|ingress| ingress.into_iter().find_map(|i| i.ip))
        .map(|ip| {
            ip.parse()
                .map_err(|e| Error::Config(format!("ingress IP {ip:?} of {namespace}/{name}: {e}")))
        })
        .transpose()
}
