//! What the Kubernetes lab puts into the API server, and what it reads back: vigil's install
//! as `deploy/kubernetes/base` defines it (the CRDs, the speaker's and the controller's
//! ServiceAccounts and RBAC, built into the binary so the lab needs no checkout), a Node and
//! a speaker Pod per host (written as a kubelet would: there is none), an IPAddressPool, an
//! L2Advertisement, Service `demo/web` of type LoadBalancer with an endpoint on every node;
//! then the Service's allocated IP, the memberlist Secret the controller made and the
//! speakers' ServiceL2Status objects.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::Client;
use kube::api::Api;
use vigil_kubelab::deploy::{self, MEMBERLIST_SECRET};
use vigil_kubelab::{
    TestEndpoint, TestNode, TestPod, TestService, TestSlice, apply_yaml, create_endpoint_slice,
    create_node, create_pod, create_service, ensure_namespace,
};

/// The install's namespace (MetalLB's): the pool, the advertisement, the speakers' Pods, the
/// Secret.
pub(super) const METALLB_NS: &str = deploy::NAMESPACE;
/// The Service's namespace.
pub(super) const SERVICE_NS: &str = "demo";
/// The Service's name.
pub(super) const SERVICE: &str = "web";
/// The pool's IPv4 addresses (on the lab's bridge subnet, away from the hosts).
pub(super) const POOL_RANGE: &str = "198.18.0.200-198.18.0.209";
/// The pool's IPv6 addresses (the Service is dual stack).
pub(super) const POOL_RANGE6: &str = "2001:db8::200-2001:db8::209";
/// The speaker Pods' labels in the DaemonSet, which `--ml-labels` selects.
pub(super) const SPEAKER_LABELS: &[(&str, &str)] = &[
    ("app.kubernetes.io/name", "vigil"),
    ("app.kubernetes.io/component", "speaker"),
];

/// vigil's CRDs (MetalLB's API, our files), as `deploy/kubernetes/base` installs them.
const CRDS: &[(&str, &str)] = &[
    (
        "ipaddresspools.yaml",
        include_str!("../../../../../deploy/kubernetes/base/crds/ipaddresspools.yaml"),
    ),
    (
        "l2advertisements.yaml",
        include_str!("../../../../../deploy/kubernetes/base/crds/l2advertisements.yaml"),
    ),
    (
        "servicel2statuses.yaml",
        include_str!("../../../../../deploy/kubernetes/base/crds/servicel2statuses.yaml"),
    ),
    (
        "configurationstates.yaml",
        include_str!("../../../../../deploy/kubernetes/base/crds/configurationstates.yaml"),
    ),
];

/// The speaker's and the controller's ServiceAccounts, roles and bindings, as the base has
/// them: the lab's programs run with exactly these permissions.
const RBAC: &[(&str, &str)] = &[
    (
        "rbac-speaker.yaml",
        include_str!("../../../../../deploy/kubernetes/base/rbac-speaker.yaml"),
    ),
    (
        "rbac-controller.yaml",
        include_str!("../../../../../deploy/kubernetes/base/rbac-controller.yaml"),
    ),
];

/// The pool and the advertisement (MetalLB's API; our own objects).
fn pool_and_ad() -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\n\
         kind: IPAddressPool\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NS}\n\
         spec:\n  addresses:\n    - {POOL_RANGE}\n    - {POOL_RANGE6}\n\
         ---\n\
         apiVersion: metallb.io/v1beta1\n\
         kind: L2Advertisement\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NS}\n\
         spec:\n  ipAddressPools:\n    - lab\n  interfaces:\n    - eth0\n"
    )
}

/// `--ml-labels` for [`SPEAKER_LABELS`].
pub(super) fn speaker_label_selector() -> String {
    SPEAKER_LABELS
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What [`install`] put in, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Installed {
    /// The CRDs' names.
    pub(super) crds: Vec<String>,
    /// `Kind/name` of the RBAC objects.
    pub(super) rbac: Vec<String>,
}

/// Installs everything before the programs start: vigil's CRDs and RBAC, the namespaces,
/// every host's (`(name, address)`) Node and speaker Pod, the pool and the advertisement, and
/// the Service with an endpoint on every node.
pub(super) async fn install(
    client: &Client,
    hosts: &[(String, Ipv4Addr)],
) -> Result<Installed, String> {
    let mut crds = Vec::new();
    for (file, yaml) in CRDS {
        for crd in apply_yaml(client, file, yaml)
            .await
            .map_err(|e| format!("CRD {file}: {e}"))?
        {
            crds.push(crd.metadata.name.unwrap_or_default());
        }
    }
    for ns in [METALLB_NS, SERVICE_NS] {
        ensure_namespace(client, ns)
            .await
            .map_err(|e| format!("namespace {ns}: {e}"))?;
    }
    let mut rbac = Vec::new();
    for (file, yaml) in RBAC {
        rbac.extend(
            deploy::apply_rbac(client, yaml)
                .await
                .map_err(|e| format!("{file}: {e}"))?,
        );
    }
    // The speakers review the lab's /status reads; the lab's scraper may make them.
    apply_yaml(
        client,
        "the scrape RBAC",
        vigil_kubelab::cluster::SCRAPE_RBAC,
    )
    .await
    .map_err(|e| format!("the scrape RBAC: {e}"))?;
    for (name, ip) in hosts {
        let ip = IpAddr::V4(*ip);
        create_node(client, &TestNode::new(name).internal_ip(ip))
            .await
            .map_err(|e| format!("Node {name}: {e}"))?;
        let mut pod = TestPod::new(METALLB_NS, &format!("speaker-{name}"))
            .on_node(name)
            .ip(ip)
            .host_ip(ip);
        for (k, v) in SPEAKER_LABELS {
            pod = pod.label(k, v);
        }
        create_pod(client, &pod)
            .await
            .map_err(|e| format!("speaker Pod on {name}: {e}"))?;
    }
    apply_yaml(client, "the lab's pool and advertisement", &pool_and_ad())
        .await
        .map_err(|e| e.to_string())?;
    create_service(
        client,
        &TestService::load_balancer(SERVICE_NS, SERVICE).dual_stack(),
    )
    .await
    .map_err(|e| format!("Service {SERVICE_NS}/{SERVICE}: {e}"))?;
    let mut slice = TestSlice::for_service(SERVICE_NS, SERVICE);
    for (i, (name, _)) in hosts.iter().enumerate() {
        // Pod addresses on a subnet of their own; nothing is ever sent to them.
        let endpoint = IpAddr::from([198, 18, 1, 10 + u8::try_from(i).unwrap_or(200)]);
        slice = slice.endpoint(TestEndpoint::ready(endpoint, name));
    }
    create_endpoint_slice(client, &slice)
        .await
        .map_err(|e| format!("EndpointSlice of {SERVICE_NS}/{SERVICE}: {e}"))?;
    Ok(Installed { crds, rbac })
}

/// The key's entry in the memberlist Secret (MetalLB's).
const SECRET_KEY: &str = vigil_kubelab::metallb::MEMBERLIST_SECRET_KEY;

/// The memberlist secret the controller wrote (Secret [`MEMBERLIST_SECRET`]), once it is there.
pub(super) async fn memberlist_secret(client: &Client) -> Result<Option<String>, String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), METALLB_NS);
    let secret = secrets
        .get_opt(MEMBERLIST_SECRET)
        .await
        .map_err(|e| format!("Secret {METALLB_NS}/{MEMBERLIST_SECRET}: {e}"))?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|d| d.get(SECRET_KEY).cloned())
        .and_then(|b| String::from_utf8(b.0).ok()))
}

/// The Service's IPs, one per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Vips {
    /// The IPv4 one.
    pub(super) v4: Ipv4Addr,
    /// The IPv6 one.
    pub(super) v6: Ipv6Addr,
}

/// The Service's ingress IPs, once the controller has written both families.
pub(super) async fn ingress(client: &Client) -> Result<Option<Vips>, String> {
    let services: Api<Service> = Api::namespaced(client.clone(), SERVICE_NS);
    let svc = services
        .get(SERVICE)
        .await
        .map_err(|e| format!("Service {SERVICE_NS}/{SERVICE}: {e}"))?;
    let ips: Vec<IpAddr> = svc
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.ip?.parse().ok())
        .collect();
    let v4 = ips.iter().find_map(|ip| match ip {
        IpAddr::V4(v4) => Some(*v4),
        IpAddr::V6(_) => None,
    });
    let v6 = ips.iter().find_map(|ip| match ip {
        IpAddr::V6(v6) => Some(*v6),
        IpAddr::V4(_) => None,
    });
    Ok(v4.zip(v6).map(|(v4, v6)| Vips { v4, v6 }))
}

/// The nodes that have a ServiceL2Status for the Service, sorted.
pub(super) async fn status_nodes(client: &Client) -> Result<Vec<String>, String> {
    let mut nodes: Vec<String> = vigil_kubelab::metallb::l2_statuses(client, METALLB_NS)
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

    use vigil_kubelab::documents;

    #[test]
    fn the_built_in_manifests_are_vigils_crds_and_rbac() {
        for (file, yaml) in CRDS {
            let docs = documents(file, yaml).unwrap();
            assert!(
                docs.iter().all(|d| d["kind"] == "CustomResourceDefinition"
                    && d["spec"]["group"] == "metallb.io"),
                "{file}"
            );
        }
        let accounts: Vec<String> = RBAC
            .iter()
            .flat_map(|(file, yaml)| documents(file, yaml).unwrap())
            .filter(|d| d["kind"] == "ServiceAccount")
            .map(|d| {
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(
            accounts,
            [deploy::SPEAKER_ACCOUNT, deploy::CONTROLLER_ACCOUNT]
        );
        assert_eq!(
            speaker_label_selector(),
            "app.kubernetes.io/name=vigil,app.kubernetes.io/component=speaker"
        );
    }

    #[test]
    fn the_pool_and_advertisement_parse_as_two_metallb_objects() {
        let docs = documents("pool", &pool_and_ad()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "IPAddressPool");
        assert_eq!(docs[0]["spec"]["addresses"][0], POOL_RANGE);
        assert_eq!(docs[0]["spec"]["addresses"][1], POOL_RANGE6);
        assert_eq!(docs[1]["kind"], "L2Advertisement");
        assert_eq!(docs[1]["spec"]["ipAddressPools"][0], "lab");
        assert_eq!(docs[1]["metadata"]["namespace"], METALLB_NS);
    }
}
