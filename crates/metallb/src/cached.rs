//! What a speaker caches of each Service and EndpointSlice: only what the translation and
//! the Events read, deserialized straight from the API server's JSON.
//!
//! A speaker holds every Service and slice of the cluster. As k8s-openapi's types, even
//! with every unread field emptied, a Service took about 2 KiB and a slice about 2.4 KiB
//! (their structs are wide: every optional field of the API is a slot, and a one-entry
//! label map is a whole B-tree node): about 24 MB of a speaker's heap at 5,000 Services.
//! These types hold the answers instead (`type: LoadBalancer` or not, `Local` or not, each
//! endpoint's node and whether it can serve), and the unread parts of the JSON are skipped
//! as it is parsed, never allocated.
//!
//! The reflector's JSON and a whole object (the benchmark's and tests' path, and
//! [`crate::translate::translate`]) both go through one constructor per type, so they
//! cannot disagree about what is kept.

use crate::translate::{
    ALLOW_SHARED_IP, ALLOW_SHARED_IP_DEPRECATED, SERVICE_NAME_LABEL, can_serve,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::Resource;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Annotations a speaker reads: MetalLB's own (`allow-shared-ip`, either spelling).
fn metallb_annotation(key: &str) -> bool {
    key.starts_with("metallb.universe.tf/") || key.starts_with("metallb.io/")
}

/// A Service as a speaker caches it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "json::Service")]
pub struct CachedService {
    /// Name, namespace, uid and resourceVersion (the Events' object reference), labels
    /// (advertisements' service selectors) and MetalLB's annotations only.
    pub metadata: ObjectMeta,
    /// `spec.type` is `LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`.
    pub load_balancer_class: Option<String>,
    /// `spec.externalTrafficPolicy` is `Local`.
    pub local_traffic: bool,
    /// `status.loadBalancer.ingress[].ip` in order, `""` for an entry without one.
    pub ingress_ips: Vec<String>,
}

impl CachedService {
    /// What is kept of a Service, from its parts as read (the one place that decides it).
    fn new(
        metadata: json::Meta,
        type_: Option<&str>,
        load_balancer_class: Option<String>,
        traffic_policy: Option<&str>,
        ingress_ips: Vec<String>,
    ) -> Self {
        let annotations = metadata.annotations.and_then(|mut a| {
            a.retain(|k, _| metallb_annotation(k));
            (!a.is_empty()).then_some(a)
        });
        Self {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                labels: metadata.labels,
                annotations,
                ..ObjectMeta::default()
            },
            load_balancer: type_ == Some("LoadBalancer"),
            load_balancer_class,
            local_traffic: traffic_policy == Some("Local"),
            ingress_ips,
        }
    }

    /// It carries `allow-shared-ip` (either spelling).
    pub fn shares_ip(&self) -> bool {
        self.metadata.annotations.as_ref().is_some_and(|a| {
            a.contains_key(ALLOW_SHARED_IP) || a.contains_key(ALLOW_SHARED_IP_DEPRECATED)
        })
    }
}

impl From<&Service> for CachedService {
    fn from(svc: &Service) -> Self {
        let spec = svc.spec.as_ref();
        let ingress = svc
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        Self::new(
            json::Meta::from(&svc.metadata),
            spec.and_then(|s| s.type_.as_deref()),
            spec.and_then(|s| s.load_balancer_class.clone()),
            spec.and_then(|s| s.external_traffic_policy.as_deref()),
            ingress
                .into_iter()
                .flatten()
                .map(|i| i.ip.clone().unwrap_or_default())
                .collect(),
        )
    }
}

/// An EndpointSlice as a speaker caches it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "json::Slice")]
pub struct CachedSlice {
    /// Name, namespace and resourceVersion only.
    pub metadata: ObjectMeta,
    /// Its Service's name: the `kubernetes.io/service-name` label, when not empty.
    pub service: Option<String>,
    /// Its endpoints.
    pub endpoints: Vec<CachedEndpoint>,
}

/// One endpoint of a slice, as the translation reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedEndpoint {
    /// `nodeName`.
    pub node_name: Option<String>,
    /// It can serve, by MetalLB's rule ([`crate::translate::can_serve`]).
    pub can_serve: bool,
}

impl CachedSlice {
    /// What is kept of a slice, from its parts as read (the one place that decides it).
    fn new(
        metadata: json::Meta,
        labels: Option<&BTreeMap<String, String>>,
        endpoints: Vec<CachedEndpoint>,
    ) -> Self {
        Self {
            service: labels
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .filter(|n| !n.is_empty())
                .cloned(),
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                // The watch resumes from the last object's version: without it, kube's
                // watcher fails every watch and relists.
                resource_version: metadata.resource_version,
                ..ObjectMeta::default()
            },
            endpoints,
        }
    }
}

impl From<&EndpointSlice> for CachedSlice {
    fn from(slice: &EndpointSlice) -> Self {
        let endpoints = slice
            .endpoints
            .iter()
            .map(|e| CachedEndpoint {
                node_name: e.node_name.clone(),
                can_serve: can_serve(
                    e.conditions.as_ref().and_then(|c| c.ready),
                    e.conditions.as_ref().and_then(|c| c.serving),
                ),
            })
            .collect();
        Self::new(
            json::Meta::from(&slice.metadata),
            slice.metadata.labels.as_ref(),
            endpoints,
        )
    }
}

/// The API's kinds these stand for: a watch of a `CachedService` lists and watches
/// `v1/services`, of a `CachedSlice` `discovery.k8s.io/v1/endpointslices`.
macro_rules! cached_resource {
    ($cached:ty, $whole:ty) => {
        impl Resource for $cached {
            type DynamicType = ();
            type Scope = <$whole as Resource>::Scope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$whole as Resource>::kind(dt)
            }
            fn group(dt: &()) -> Cow<'_, str> {
                <$whole as Resource>::group(dt)
            }
            fn version(dt: &()) -> Cow<'_, str> {
                <$whole as Resource>::version(dt)
            }
            fn plural(dt: &()) -> Cow<'_, str> {
                <$whole as Resource>::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

cached_resource!(CachedService, Service);
cached_resource!(CachedSlice, EndpointSlice);

/// The JSON as the API server sends it, only the fields read: serde skips the rest without
/// allocating it.
mod json {
    use super::{CachedEndpoint, CachedService, CachedSlice};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Default, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) struct Meta {
        pub(super) name: Option<String>,
        pub(super) namespace: Option<String>,
        pub(super) uid: Option<String>,
        pub(super) resource_version: Option<String>,
        pub(super) labels: Option<BTreeMap<String, String>>,
        pub(super) annotations: Option<BTreeMap<String, String>>,
    }

    impl From<&ObjectMeta> for Meta {
        fn from(m: &ObjectMeta) -> Self {
            Self {
                name: m.name.clone(),
                namespace: m.namespace.clone(),
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                labels: m.labels.clone(),
                annotations: m.annotations.clone(),
            }
        }
    }

    #[derive(Debug, Deserialize)]
    pub(super) struct Service {
        #[serde(default)]
        metadata: Meta,
        spec: Option<ServiceSpec>,
        status: Option<ServiceStatus>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ServiceSpec {
        #[serde(rename = "type")]
        type_: Option<String>,
        load_balancer_class: Option<String>,
        external_traffic_policy: Option<String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct ServiceStatus {
        load_balancer: Option<LoadBalancerStatus>,
    }

    #[derive(Debug, Deserialize)]
    struct LoadBalancerStatus {
        ingress: Option<Vec<Ingress>>,
    }

    #[derive(Debug, Deserialize)]
    struct Ingress {
        ip: Option<String>,
    }

    impl From<Service> for CachedService {
        fn from(svc: Service) -> Self {
            let spec = svc.spec;
            let ingress = svc
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|lb| lb.ingress);
            Self::new(
                svc.metadata,
                spec.as_ref().and_then(|s| s.type_.as_deref()),
                spec.as_ref().and_then(|s| s.load_balancer_class.clone()),
                spec.as_ref()
                    .and_then(|s| s.external_traffic_policy.as_deref()),
                ingress
                    .into_iter()
                    .flatten()
                    .map(|i| i.ip.unwrap_or_default())
                    .collect(),
            )
        }
    }

    #[derive(Debug, Deserialize)]
    pub(super) struct Slice {
        #[serde(default)]
        metadata: Meta,
        // Required by the API; a slice without it has no endpoints to read.
        #[serde(default)]
        endpoints: Option<Vec<Endpoint>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Endpoint {
        node_name: Option<String>,
        conditions: Option<Conditions>,
    }

    #[derive(Debug, Deserialize)]
    struct Conditions {
        ready: Option<bool>,
        serving: Option<bool>,
    }

    impl From<Slice> for CachedSlice {
        fn from(slice: Slice) -> Self {
            let endpoints = slice
                .endpoints
                .into_iter()
                .flatten()
                .map(|e| CachedEndpoint {
                    can_serve: super::can_serve(
                        e.conditions.as_ref().and_then(|c| c.ready),
                        e.conditions.as_ref().and_then(|c| c.serving),
                    ),
                    node_name: e.node_name,
                })
                .collect();
            let mut metadata = slice.metadata;
            let labels = metadata.labels.take();
            Self::new(metadata, labels.as_ref(), endpoints)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn service(policy: &str, annotations: Value, status: Value, class: Value) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "web", "uid": "u-2", "resourceVersion": "7",
                "labels": {"app": "web"}, "annotations": annotations,
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"type": "LoadBalancer", "externalTrafficPolicy": policy,
                "loadBalancerClass": class,
                "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}],
                "selector": {"app": "web"}, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None"},
            "status": status
        })
    }

    fn slice(labels: Value, endpoints: Value) -> Value {
        json!({
            "metadata": {"namespace": "ns", "name": "web-x1", "resourceVersion": "8", "labels": labels,
                "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-06T00:00:00Z"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web", "uid": "u-2"}]},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]
        })
    }

    /// The reflector's path (the JSON) and the whole object's path keep the same thing.
    fn both<W, C>(v: &Value) -> C
    where
        W: serde::de::DeserializeOwned,
        C: serde::de::DeserializeOwned + for<'a> From<&'a W> + PartialEq + std::fmt::Debug,
    {
        let whole: W = serde_json::from_value(v.clone()).unwrap();
        let cached: C = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(C::from(&whole), cached, "{v}");
        cached
    }

    #[test]
    fn a_service_keeps_what_the_speaker_reads_by_either_path() {
        let lb = json!({"loadBalancer": {"ingress": [{"ip": "198.18.0.10", "ipMode": "VIP"}, {"hostname": "x"}]},
            "conditions": [{"type": "x", "status": "True", "lastTransitionTime": "2026-12-06T00:00:00Z",
                "reason": "r", "message": "m"}]});
        let shared = json!({"metallb.io/allow-shared-ip": "k",
            "kubectl.kubernetes.io/last-applied-configuration": "{\"big\": true}"});
        for policy in ["Cluster", "Local"] {
            for annotations in [json!(null), json!({}), shared.clone()] {
                for status in [json!(null), json!({}), lb.clone()] {
                    for class in [json!(null), json!("other")] {
                        let v = service(policy, annotations.clone(), status.clone(), class.clone());
                        let c: CachedService = both::<Service, _>(&v);
                        assert!(c.load_balancer);
                        assert_eq!(c.local_traffic, policy == "Local");
                        assert_eq!(c.load_balancer_class.is_some(), !class.is_null());
                        assert_eq!(c.shares_ip(), annotations == shared);
                        assert_eq!(c.metadata.uid.as_deref(), Some("u-2"));
                        assert_eq!(c.metadata.resource_version.as_deref(), Some("7"));
                        assert!(c.metadata.managed_fields.is_none());
                        let only_metallb = c
                            .metadata
                            .annotations
                            .iter()
                            .flatten()
                            .all(|(k, _)| metallb_annotation(k));
                        assert!(only_metallb);
                        let ips: Vec<&str> = c.ingress_ips.iter().map(String::as_str).collect();
                        if status == lb {
                            assert_eq!(ips, ["198.18.0.10", ""]);
                        } else {
                            assert!(ips.is_empty());
                        }
                    }
                }
            }
        }
        let not_lb: CachedService =
            both::<Service, _>(&json!({"metadata": {"name": "a"}, "spec": {"type": "ClusterIP"}}));
        assert!(!not_lb.load_balancer);
        let bare: CachedService = both::<Service, _>(&json!({"metadata": {"name": "a"}}));
        assert_eq!(bare.metadata.name.as_deref(), Some("a"));
    }

    #[test]
    fn a_slice_keeps_its_service_and_each_endpoints_node_and_readiness_by_either_path() {
        let endpoints = json!([
            {"addresses": ["10.244.1.5"], "nodeName": "a", "zone": "z", "conditions": {"ready": true, "serving": true},
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "web-1", "uid": "u-3"}},
            {"addresses": ["10.244.2.5"], "nodeName": "b", "conditions": {"ready": false, "serving": false}},
            {"addresses": ["10.244.2.6"], "nodeName": "c", "conditions": {"ready": false, "serving": true}},
            {"addresses": ["10.244.2.7"], "conditions": {}},
            {"addresses": ["10.244.2.8"], "nodeName": "d"}
        ]);
        let labels = json!({"kubernetes.io/service-name": "web", "endpointslice.kubernetes.io/managed-by": "c"});
        let s: CachedSlice = both::<EndpointSlice, _>(&slice(labels, endpoints));
        assert_eq!(s.service.as_deref(), Some("web"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(s.metadata.resource_version.as_deref(), Some("8"));
        assert!(s.metadata.labels.is_none() && s.metadata.annotations.is_none());
        let read: Vec<(Option<&str>, bool)> = s
            .endpoints
            .iter()
            .map(|e| (e.node_name.as_deref(), e.can_serve))
            .collect();
        assert_eq!(
            read,
            [
                (Some("a"), true),
                (Some("b"), false),
                (Some("c"), true),
                (None, true),
                (Some("d"), true)
            ]
        );
        for labels in [
            json!(null),
            json!({}),
            json!({"kubernetes.io/service-name": ""}),
        ] {
            let s: CachedSlice = both::<EndpointSlice, _>(&slice(labels, json!([])));
            assert_eq!(s.service, None);
        }
        let empty: CachedSlice = both::<EndpointSlice, _>(&slice(json!(null), json!(null)));
        assert!(empty.endpoints.is_empty());
    }

    #[test]
    fn the_cached_kinds_are_the_apis_services_and_slices() {
        assert_eq!(
            CachedService::url_path(&(), Some("ns")),
            Service::url_path(&(), Some("ns"))
        );
        assert_eq!(
            CachedSlice::url_path(&(), None),
            EndpointSlice::url_path(&(), None)
        );
        assert_eq!(CachedService::api_version(&()), "v1");
        assert_eq!(CachedSlice::kind(&()), "EndpointSlice");
    }
}
