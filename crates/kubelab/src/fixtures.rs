//! The cluster state a test needs, written the way the real writers would: there is no
//! kubelet or controller manager, so Node addresses and conditions and Pod IPs go in through
//! the status subresource, as a kubelet would write them, and EndpointSlices are written
//! directly for Services without a selector.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Error as KubeError};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::Error;
use crate::manifests::FIELD_MANAGER;

fn typed<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| Error::Config(format!("{what}: {e}")))
}

fn family(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() { "IPv4" } else { "IPv6" }
}

/// Creates namespace `name` (no namespace controller runs, so tests use fresh ones rather
/// than delete them). An existing namespace is fine.
pub async fn ensure_namespace(client: &Client, name: &str) -> Result<Namespace, Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = typed("namespace", json!({ "metadata": { "name": name } }))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(ns) => Ok(ns),
        Err(KubeError::Api(status)) if status.is_already_exists() => Ok(api.get(name).await?),
        Err(e) => Err(e.into()),
    }
}

/// A Node as a kubelet would register it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestNode {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.addresses` of type InternalIP.
    pub internal_ips: Vec<IpAddr>,
    /// `status.conditions` as (type, status) pairs, e.g. ("Ready", "True").
    pub conditions: Vec<(String, String)>,
}

impl TestNode {
    /// A node named `name` with `kubernetes.io/hostname` set and condition Ready=True.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            labels: BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]),
            internal_ips: Vec::new(),
            conditions: vec![("Ready".to_string(), "True".to_string())],
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an InternalIP address.
    pub fn internal_ip(mut self, ip: IpAddr) -> Self {
        self.internal_ips.push(ip);
        self
    }

    /// Sets condition `kind` (e.g. "NetworkUnavailable") to `status` ("True", "False",
    /// "Unknown").
    pub fn condition(mut self, kind: &str, status: &str) -> Self {
        self.conditions.retain(|(k, _)| k != kind);
        self.conditions.push((kind.to_string(), status.to_string()));
        self
    }
}

fn condition_json(kind: &str, status: &str) -> Value {
    json!({ "type": kind, "status": status, "reason": "KubeLab", "message": "set by the test" })
}

/// Creates the Node, then writes its addresses and conditions through `nodes/status`.
pub async fn create_node(client: &Client, node: &TestNode) -> Result<Node, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let object = typed(
        "node",
        json!({ "metadata": { "name": node.name, "labels": node.labels } }),
    )?;
    api.create(&PostParams::default(), &object).await?;
    let addresses: Vec<Value> = node
        .internal_ips
        .iter()
        .map(|ip| json!({ "type": "InternalIP", "address": ip.to_string() }))
        .chain(std::iter::once(
            json!({ "type": "Hostname", "address": node.name }),
        ))
        .collect();
    let conditions: Vec<Value> = node
        .conditions
        .iter()
        .map(|(k, s)| condition_json(k, s))
        .collect();
    let status = json!({ "status": { "addresses": addresses, "conditions": conditions } });
    Ok(api
        .patch_status(&node.name, &PatchParams::default(), &Patch::Merge(&status))
        .await?)
}

/// Sets one condition of Node `name` through `nodes/status`, leaving the others (a strategic
/// merge keyed by condition type, as kubelet's own status updates merge).
pub async fn set_node_condition(
    client: &Client,
    name: &str,
    kind: &str,
    status: &str,
) -> Result<Node, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = json!({ "status": { "conditions": [condition_json(kind, status)] } });
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await?)
}

/// A Pod as scheduled and started by a kubelet (nothing runs it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestPod {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeName`.
    pub node_name: Option<String>,
    /// `status.podIPs` (the first is `status.podIP`).
    pub ips: Vec<IpAddr>,
    /// `status.hostIP`.
    pub host_ip: Option<IpAddr>,
    /// Condition Ready (and phase Running when true, Pending otherwise).
    pub ready: bool,
}

impl TestPod {
    /// A ready pod named `name` in `namespace`, no IPs yet.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            labels: BTreeMap::new(),
            node_name: None,
            ips: Vec::new(),
            host_ip: None,
            ready: true,
        }
    }

    /// Adds a label.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    /// Places the pod on `node`.
    pub fn on_node(mut self, node: &str) -> Self {
        self.node_name = Some(node.to_string());
        self
    }

    /// Adds a pod IP.
    pub fn ip(mut self, ip: IpAddr) -> Self {
        self.ips.push(ip);
        self
    }

    /// Sets the host IP.
    pub fn host_ip(mut self, ip: IpAddr) -> Self {
        self.host_ip = Some(ip);
        self
    }
}

/// Creates the Pod, then writes its phase, IPs and Ready condition through `pods/status`.
pub async fn create_pod(client: &Client, pod: &TestPod) -> Result<Pod, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let mut spec = json!({
        // Never pulled: no kubelet runs here. A valid reference all the same.
        "containers": [{ "name": "main", "image": "registry.invalid/vigil/none:0" }],
    });
    if let Some(node) = &pod.node_name {
        spec["nodeName"] = json!(node);
    }
    let object = typed(
        "pod",
        json!({ "metadata": { "name": pod.name, "labels": pod.labels }, "spec": spec }),
    )?;
    api.create(&PostParams::default(), &object).await?;
    set_pod_status(client, pod).await
}

/// Writes `pod`'s phase, IPs, host IP and Ready condition through `pods/status`.
pub async fn set_pod_status(client: &Client, pod: &TestPod) -> Result<Pod, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let ready = if pod.ready { "True" } else { "False" };
    let mut status = json!({
        "phase": if pod.ready { "Running" } else { "Pending" },
        "conditions": [
            { "type": "PodScheduled", "status": "True" },
            { "type": "Ready", "status": ready },
            { "type": "ContainersReady", "status": ready },
        ],
    });
    if let Some(first) = pod.ips.first() {
        status["podIP"] = json!(first.to_string());
        status["podIPs"] = Value::Array(
            pod.ips
                .iter()
                .map(|ip| json!({ "ip": ip.to_string() }))
                .collect(),
        );
    }
    if let Some(host) = pod.host_ip {
        status["hostIP"] = json!(host.to_string());
        status["hostIPs"] = json!([{ "ip": host.to_string() }]);
    }
    let patch = json!({ "status": status });
    Ok(api
        .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?)
}

/// A Service; LoadBalancer without a selector by default, so no controller would fight the
/// test's own EndpointSlices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestService {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.type`.
    pub service_type: String,
    /// `spec.ports` as (name, port, protocol).
    pub ports: Vec<(String, u16, String)>,
    /// `spec.selector` (none by default).
    pub selector: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.ipFamilyPolicy` (SingleStack when `None`).
    pub ip_family_policy: Option<String>,
    /// `spec.externalTrafficPolicy` (Cluster when `None`).
    pub external_traffic_policy: Option<String>,
    /// `spec.loadBalancerClass`.
    pub load_balancer_class: Option<String>,
}

impl TestService {
    /// A LoadBalancer Service `name` with one TCP port "http" 80.
    pub fn load_balancer(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            service_type: "LoadBalancer".to_string(),
            ports: vec![("http".to_string(), 80, "TCP".to_string())],
            selector: BTreeMap::new(),
            annotations: BTreeMap::new(),
            ip_family_policy: None,
            external_traffic_policy: None,
            load_balancer_class: None,
        }
    }

    /// Adds an annotation (e.g. `metallb.io/loadBalancerIPs`).
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Asks for both IP families (`ipFamilyPolicy: RequireDualStack`); vigil-testenv's service
    /// ranges are dual-stack.
    pub fn dual_stack(mut self) -> Self {
        self.ip_family_policy = Some("RequireDualStack".to_string());
        self
    }

    /// Sets `spec.externalTrafficPolicy` ("Local" or "Cluster").
    pub fn external_traffic_policy(mut self, policy: &str) -> Self {
        self.external_traffic_policy = Some(policy.to_string());
        self
    }
}

/// Creates the Service.
pub async fn create_service(client: &Client, svc: &TestService) -> Result<Service, Error> {
    let api: Api<Service> = Api::namespaced(client.clone(), &svc.namespace);
    let ports: Vec<Value> = svc
        .ports
        .iter()
        .map(|(name, port, protocol)| json!({ "name": name, "port": port, "protocol": protocol }))
        .collect();
    let mut spec = json!({ "type": svc.service_type, "ports": ports });
    if !svc.selector.is_empty() {
        spec["selector"] = json!(svc.selector);
    }
    if let Some(p) = &svc.ip_family_policy {
        spec["ipFamilyPolicy"] = json!(p);
    }
    if let Some(p) = &svc.external_traffic_policy {
        spec["externalTrafficPolicy"] = json!(p);
    }
    if let Some(c) = &svc.load_balancer_class {
        spec["loadBalancerClass"] = json!(c);
    }
    let object = typed(
        "service",
        json!({
            "metadata": { "name": svc.name, "annotations": svc.annotations },
            "spec": spec,
        }),
    )?;
    Ok(api.create(&PostParams::default(), &object).await?)
}

/// One endpoint of a [`TestSlice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestEndpoint {
    /// `addresses` (not loopback: the API server rejects it).
    pub addresses: Vec<IpAddr>,
    /// `nodeName`.
    pub node_name: Option<String>,
    /// `conditions.ready`.
    pub ready: bool,
    /// `conditions.serving`.
    pub serving: bool,
    /// `conditions.terminating`.
    pub terminating: bool,
}

impl TestEndpoint {
    /// A ready, serving endpoint at `ip` on `node`.
    pub fn ready(ip: IpAddr, node: &str) -> Self {
        Self {
            addresses: vec![ip],
            node_name: Some(node.to_string()),
            ready: true,
            serving: true,
            terminating: false,
        }
    }
}

/// An EndpointSlice of a Service, as the endpointslice controller would write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSlice {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The Service it belongs to (label `kubernetes.io/service-name`).
    pub service: String,
    /// The endpoints; `addressType` follows the first address (IPv4 when empty).
    pub endpoints: Vec<TestEndpoint>,
    /// `ports` as (name, port, protocol).
    pub ports: Vec<(String, u16, String)>,
}

impl TestSlice {
    /// A slice `<service>-kubelab` with port "http" 80/TCP and no endpoints yet.
    pub fn for_service(namespace: &str, service: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: format!("{service}-kubelab"),
            service: service.to_string(),
            endpoints: Vec::new(),
            ports: vec![("http".to_string(), 80, "TCP".to_string())],
        }
    }

    /// Adds an endpoint.
    pub fn endpoint(mut self, endpoint: TestEndpoint) -> Self {
        self.endpoints.push(endpoint);
        self
    }
}

/// Creates the EndpointSlice.
pub async fn create_endpoint_slice(
    client: &Client,
    slice: &TestSlice,
) -> Result<EndpointSlice, Error> {
    let api: Api<EndpointSlice> = Api::namespaced(client.clone(), &slice.namespace);
    let address_type = slice
        .endpoints
        .iter()
        .find_map(|e| e.addresses.first())
        .map_or("IPv4", family);
    let endpoints: Vec<Value> = slice
        .endpoints
        .iter()
        .map(|e| {
            let mut v = json!({
                "addresses": e.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "conditions": { "ready": e.ready, "serving": e.serving, "terminating": e.terminating },
            });
            if let Some(node) = &e.node_name {
                v["nodeName"] = json!(node);
            }
            v
        })
        .collect();
    let ports: Vec<Value> = slice
        .ports
        .iter()
        .map(|(name, port, protocol)| json!({ "name": name, "port": port, "protocol": protocol }))
        .collect();
    let object = typed(
        "endpointslice",
        json!({
            "metadata": {
                "name": slice.name,
                "labels": {
                    "kubernetes.io/service-name": slice.service,
                    "endpointslice.kubernetes.io/managed-by": FIELD_MANAGER,
                },
            },
            "addressType": address_type,
            "endpoints": endpoints,
            "ports": ports,
        }),
    )?;
    Ok(api.create(&PostParams::default(), &object).await?)
}
