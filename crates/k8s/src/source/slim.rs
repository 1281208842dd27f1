//! What the caches keep of each object: only the fields the speaker reads. A speaker holds
//! every Service and EndpointSlice of the cluster, so what it does not read is memory per
//! Service for nothing; a Node's images, capacity and system info are large and change with
//! every kubelet report.
//!
//! Kept, by kind (a reader of any other field must add it here first):
//! - Service and EndpointSlice: cached as [`CachedService`] and [`CachedSlice`], deserialized
//!   with only what the speaker reads (`vigil_metallb::cached`); nothing is left to take out.
//! - Node: name and labels (node selectors, the exclude label), `status.addresses` (peers'
//!   `InternalIP`s) and the `NetworkUnavailable` condition.
//! - Pod: the metadata but annotations (labels for `--ml-labels`, owner references for the
//!   statuses' owner), `spec.nodeName`, `spec.hostNetwork` and `status.podIP`.
//! - Pools and advertisements: everything but `managedFields` and a pool's status (the
//!   controller's counts).

use crate::cached::{CachedService, CachedSlice};
use crate::crd::{IPAddressPool, L2Advertisement};
use k8s_openapi::api::core::v1::{Node, NodeStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An object with what the speaker does not read taken out.
pub(crate) trait Slim {
    /// Takes out every field the speaker does not read.
    fn slim(&mut self);
}

/// Deserialized slim: there is nothing more to take out.
impl Slim for CachedService {
    fn slim(&mut self) {}
}

impl Slim for CachedSlice {
    fn slim(&mut self) {}
}

fn slim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

impl Slim for Node {
    fn slim(&mut self) {
        let meta = std::mem::take(&mut self.metadata);
        self.metadata = ObjectMeta {
            name: meta.name,
            labels: meta.labels,
            ..ObjectMeta::default()
        };
        self.spec = None;
        if let Some(status) = self.status.take() {
            let conditions = status.conditions.map(|mut cs| {
                cs.retain(|c| c.type_ == "NetworkUnavailable");
                cs
            });
            self.status = Some(NodeStatus {
                addresses: status.addresses,
                conditions,
                ..NodeStatus::default()
            });
        }
    }
}

impl Slim for Pod {
    fn slim(&mut self) {
        slim_meta(&mut self.metadata);
        self.metadata.annotations = None;
        if let Some(spec) = self.spec.take() {
            self.spec = Some(PodSpec {
                node_name: spec.node_name,
                host_network: spec.host_network,
                ..PodSpec::default()
            });
        }
        if let Some(status) = self.status.take() {
            self.status = Some(PodStatus {
                pod_ip: status.pod_ip,
                ..PodStatus::default()
            });
        }
    }
}

impl Slim for IPAddressPool {
    fn slim(&mut self) {
        slim_meta(&mut self.metadata);
        // The controller's counts; the speaker reads none of them.
        self.status = None;
    }
}

impl Slim for L2Advertisement {
    fn slim(&mut self) {
        slim_meta(&mut self.metadata);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::{
        Options, network_unavailable, node_map, peers, slice_service, translate_service,
    };
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use serde_json::json;

    fn node(name: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": "u-1", "resourceVersion": "9",
                "labels": {"kubernetes.io/hostname": name, "zone": "a"},
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "csi.volume.kubernetes.io/nodeid": "{}"},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "spec": {"podCIDR": "10.244.1.0/24", "providerID": "kind://x",
                "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "198.18.1.1"}, {"type": "Hostname", "address": name}],
                "conditions": [
                    {"type": "NetworkUnavailable", "status": if name == "a" { "True" } else { "False" }},
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-06T00:00:00Z"},
                    {"type": "MemoryPressure", "status": "False"}
                ],
                "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_000}],
                "capacity": {"cpu": "2", "memory": "4Gi"},
                "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "c",
                    "kernelVersion": "6", "kubeProxyVersion": "", "kubeletVersion": "v1.33.0",
                    "machineID": "m", "operatingSystem": "linux", "osImage": "o", "systemUUID": "s"}
            }
        }))
        .unwrap()
    }

    fn service(policy: &str, annotations: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web", "uid": "u-2", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": annotations,
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}],
                "selector": {"app": "web"}, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                "internalTrafficPolicy": "Cluster", "allocateLoadBalancerNodePorts": true},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.18.0.10", "ipMode": "VIP"}]},
                "conditions": [{"type": "x", "status": "True", "lastTransitionTime": "2026-12-06T00:00:00Z",
                    "reason": "r", "message": "m"}]}
        }))
        .unwrap()
    }

    fn slice(ready: bool) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web-x1",
                "labels": {"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "c"},
                "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-06T00:00:00Z"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-2"}]},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.244.1.5"], "nodeName": "a", "zone": "z", "conditions": {"ready": ready, "serving": true},
                    "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-1", "uid": "u-3"}},
                {"addresses": ["10.244.2.5"], "nodeName": "b", "conditions": {"ready": false, "serving": false}}
            ],
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]
        }))
        .unwrap()
    }

    /// As the reflector has it: the object's JSON read into its cached form.
    fn cached<T: serde::de::DeserializeOwned>(o: &impl serde::Serialize) -> T {
        serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap()
    }

    fn slimmed<T: Slim + Clone>(o: &T) -> T {
        let mut o = o.clone();
        o.slim();
        o
    }

    /// Whatever the speaker reads gives the same answer from a slimmed or cached object: the
    /// translation of Services (cached from their JSON, over slimmed Nodes, against the whole
    /// objects' cached forms over whole Nodes; both traffic policies, ready or not, with and
    /// without allow-shared-ip), the Nodes' facts and the peers.
    #[test]
    fn slimmed_objects_translate_as_the_whole_ones() {
        let nodes = [node("a"), node("b")];
        let slim_nodes: Vec<Node> = nodes.iter().map(slimmed).collect();
        let pool: IPAddressPool = serde_json::from_value(json!({
            "metadata": {"namespace": "metallb-system", "name": "p"},
            "spec": {"addresses": ["198.18.0.0/24"]}
        }))
        .unwrap();
        let ad: L2Advertisement = serde_json::from_value(json!({
            "metadata": {"namespace": "metallb-system", "name": "ad"},
            "spec": {"ipAddressPools": ["p"], "nodeSelectors": [{"matchLabels": {"zone": "a"}}]}
        }))
        .unwrap();
        let config = crate::Config::parse(
            std::slice::from_ref(&pool),
            std::slice::from_ref(&ad),
            &nodes,
        )
        .unwrap();
        let slim_config = crate::Config::parse(&[pool], &[ad], &slim_nodes).unwrap();
        let options = Options {
            node_name: "a".into(),
            namespace: "metallb-system".into(),
            speaker_selector: Some(crate::selector::Selector::parse("app=speaker").unwrap()),
            ..Options::default()
        };
        let by_name = node_map(nodes.iter());
        let slim_by_name = node_map(slim_nodes.iter());
        let shared = json!({"metallb.io/allow-shared-ip": "k", "kubectl.kubernetes.io/last-applied-configuration": "{}"});
        for policy in ["Cluster", "Local"] {
            for annotations in [json!({}), shared.clone()] {
                for ready in [true, false] {
                    let svc = service(policy, annotations.clone());
                    let sl = slice(ready);
                    let (slim_svc, slim_sl): (CachedService, CachedSlice) =
                        (cached(&svc), cached(&sl));
                    let (svc, sl) = (CachedService::from(&svc), CachedSlice::from(&sl));
                    assert_eq!(slice_service(&slim_sl), slice_service(&sl));
                    let whole = translate_service(&config, &svc, &[&sl], &by_name, &options);
                    let slim = translate_service(
                        &slim_config,
                        &slim_svc,
                        &[&slim_sl],
                        &slim_by_name,
                        &options,
                    );
                    assert_eq!(
                        format!("{slim:?}"),
                        format!("{whole:?}"),
                        "{policy} {ready}"
                    );
                    if ready && policy == "Cluster" {
                        // Not a trivial answer: node b is eligible (a's network is down).
                        assert_eq!(whole.unwrap().eligible_nodes, ["b".to_string()].into());
                    }
                }
            }
        }
        for (n, s) in nodes.iter().zip(&slim_nodes) {
            assert_eq!(
                super::super::watch::NodeFacts::of(s),
                super::super::watch::NodeFacts::of(n)
            );
            assert_eq!(network_unavailable(Some(s)), network_unavailable(Some(n)));
            assert!(s.status.as_ref().unwrap().images.is_none());
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "metallb-system", "name": "speaker-1", "labels": {"app": "speaker"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "speaker", "uid": "u-4", "controller": true}]},
            "spec": {"nodeName": "b", "hostNetwork": true, "containers": [{"name": "speaker", "image": "x"}]},
            "status": {"podIP": "198.18.1.1", "phase": "Running"}
        }))
        .unwrap();
        let slim_pod = slimmed(&pod);
        assert_eq!(
            peers([&slim_pod], &slim_by_name, &options),
            peers([&pod], &by_name, &options)
        );
        assert_eq!(
            slim_pod.metadata.owner_references,
            pod.metadata.owner_references
        );
        assert!(slim_pod.spec.unwrap().containers.is_empty());
    }
}
