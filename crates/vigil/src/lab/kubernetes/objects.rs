//! What the Kubernetes lab puts into the API server, and what it reads back: MetalLB's CRDs,
//! a Node and a speaker Pod per host (written as a kubelet would: there is none), an
//! IPAddressPool, an L2Advertisement, Service `demo/web` of type LoadBalancer with an
//! endpoint on every node; then the Service's allocated IP, the memberlist Secret the
//! controller made and the speakers' ServiceL2Status objects.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Client;
use kube::api::Api;
use vigil_kubelab::metallb::{self, MEMBERLIST_SECRET, MEMBERLIST_SECRET_KEY, SpeakerConfig};
use vigil_kubelab::{
    TestEndpoint, TestService, TestSlice, apply_crds, apply_yaml, create_endpoint_slice,
    create_service, documents, ensure_namespace,
};

/// MetalLB's namespace: the pool, the advertisement, the speakers' Pods, the Secret.
pub(super) const METALLB_NS: &str = metallb::METALLB_NAMESPACE;
/// The Service's namespace.
pub(super) const SERVICE_NS: &str = "demo";
/// The Service's name.
pub(super) const SERVICE: &str = "web";
/// The pool's addresses (on the lab's bridge subnet, away from the hosts).
pub(super) const POOL_RANGE: &str = "198.18.0.200-198.18.0.209";

/// The pool and the advertisement (MetalLB's API; our own objects).
fn pool_and_ad() -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\n\
         kind: IPAddressPool\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NS}\n\
         spec:\n  addresses:\n    - {POOL_RANGE}\n\
         ---\n\
         apiVersion: metallb.io/v1beta1\n\
         kind: L2Advertisement\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NS}\n\
         spec:\n  ipAddressPools:\n    - lab\n  interfaces:\n    - eth0\n"
    )
}

/// Where the CRDs come from: the files and a few words on their origin.
#[derive(Debug, Clone)]
pub(super) struct Crds {
    /// The YAML files, each holding only CustomResourceDefinitions.
    pub(super) files: Vec<PathBuf>,
    /// Where they were found, for the report.
    pub(super) origin: String,
}

/// vigil's own CRDs from the checkout's `deploy/kubernetes/base` (MetalLB-compatible), else
/// MetalLB's from the Go module cache (`conformance/build.sh metallb` downloads them).
pub(super) fn find_crds() -> Result<Crds, String> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/base");
    let mut ours = Vec::new();
    collect_crd_files(&base, &mut ours);
    if !ours.is_empty() {
        ours.sort();
        return Ok(Crds {
            files: ours,
            origin: format!("vigil's, from {}", display(&base)),
        });
    }
    match metallb::metallb_crd_files() {
        Ok(files) => Ok(Crds {
            origin: format!(
                "MetalLB {}'s, from the Go module cache",
                metallb::metallb_version()
            ),
            files,
        }),
        Err(e) => Err(format!("no CRDs: none under {} and {e}", display(&base))),
    }
}

fn display(path: &Path) -> String {
    path.canonicalize()
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// The YAML files under `dir` (recursively) whose documents are all metallb.io CRDs.
fn collect_crd_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.is_dir() {
            collect_crd_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "yaml" || x == "yml") && is_crd_file(&path)
        {
            out.push(path);
        }
    }
}

fn is_crd_file(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let Ok(docs) = documents(&path.display().to_string(), &text) else {
        return false;
    };
    !docs.is_empty()
        && docs
            .iter()
            .all(|d| d["kind"] == "CustomResourceDefinition" && d["spec"]["group"] == "metallb.io")
}

/// The speaker Pod and Node of every host (`(name, address)`), named as the lab names them.
pub(super) fn speaker_configs(hosts: &[(String, Ipv4Addr)]) -> Vec<SpeakerConfig> {
    hosts
        .iter()
        .map(|(name, ip)| SpeakerConfig::new(name, name, IpAddr::V4(*ip)))
        .collect()
}

/// Installs everything before the programs start: the CRDs, the namespaces, every host's Node
/// and speaker Pod, the pool and the advertisement, and the Service with an endpoint on every
/// node. Returns the CRD names.
pub(super) async fn install(
    client: &Client,
    crds: &Crds,
    speakers: &[SpeakerConfig],
) -> Result<Vec<String>, String> {
    let paths: Vec<&Path> = crds.files.iter().map(PathBuf::as_path).collect();
    let names = apply_crds(client, &paths)
        .await
        .map_err(|e| format!("CRDs: {e}"))?;
    for ns in [METALLB_NS, SERVICE_NS] {
        ensure_namespace(client, ns)
            .await
            .map_err(|e| format!("namespace {ns}: {e}"))?;
    }
    metallb::register_speakers(client, speakers)
        .await
        .map_err(|e| format!("Nodes and speaker Pods: {e}"))?;
    apply_yaml(client, "the lab's pool and advertisement", &pool_and_ad())
        .await
        .map_err(|e| e.to_string())?;
    create_service(client, &TestService::load_balancer(SERVICE_NS, SERVICE))
        .await
        .map_err(|e| format!("Service {SERVICE_NS}/{SERVICE}: {e}"))?;
    let mut slice = TestSlice::for_service(SERVICE_NS, SERVICE);
    for (i, s) in speakers.iter().enumerate() {
        // Pod addresses on a subnet of their own; nothing is ever sent to them.
        let endpoint = IpAddr::from([198, 18, 1, 10 + u8::try_from(i).unwrap_or(200)]);
        slice = slice.endpoint(TestEndpoint::ready(endpoint, &s.node));
    }
    create_endpoint_slice(client, &slice)
        .await
        .map_err(|e| format!("EndpointSlice of {SERVICE_NS}/{SERVICE}: {e}"))?;
    Ok(names)
}

/// The memberlist secret the controller wrote, once it is there.
pub(super) async fn memberlist_secret(client: &Client) -> Result<Option<String>, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), METALLB_NS);
    let secret = secrets
        .get_opt(MEMBERLIST_SECRET)
        .await
        .map_err(|e| format!("Secret {METALLB_NS}/{MEMBERLIST_SECRET}: {e}"))?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(MEMBERLIST_SECRET_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok()))
}

/// The Service's first IPv4 ingress IP, once the controller has written one.
pub(super) async fn ingress(client: &Client) -> Result<Option<Ipv4Addr>, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), SERVICE_NS);
    let svc = services
        .get(SERVICE)
        .await
        .map_err(|e| format!("Service {SERVICE_NS}/{SERVICE}: {e}"))?;
    Ok(svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .unwrap_or_default()
        .into_iter()
        .find_map(|i| i.ip?.parse().ok()))
}

/// The nodes that have a ServiceL2Status for the Service, sorted.
pub(super) async fn status_nodes(client: &Client) -> Result<Vec<String>, String> {
    let mut nodes: Vec<String> = metallb::l2_statuses(client, METALLB_NS)
        .await
        .map_err(|e| format!("ServiceL2Status: {e}"))?
        .into_iter()
        .filter(|s| s.service_namespace == SERVICE_NS && s.service_name == SERVICE)
        .map(|s| s.node)
        .collect();
    nodes.sort();
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_and_advertisement_parse_as_two_metallb_objects() {
        let docs = documents("pool", &pool_and_ad()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "IPAddressPool");
        assert_eq!(docs[0]["spec"]["addresses"][0], POOL_RANGE);
        assert_eq!(docs[1]["kind"], "L2Advertisement");
        assert_eq!(docs[1]["spec"]["ipAddressPools"][0], "lab");
        assert_eq!(docs[1]["metadata"]["namespace"], METALLB_NS);
    }
}
