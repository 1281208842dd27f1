//! MetalLB's `metallb.io/v1beta1` objects that the L2 speaker reads or writes, with MetalLB's
//! field names (the CRD YAML in MetalLB's `config/crd/bases` is the schema; vigil installs that,
//! never a schema of its own).
//!
//! Every field is optional and defaulted, and unknown fields are ignored, so objects written by
//! a newer or older MetalLB still decode. The root types are written out rather than derived
//! with kube's `CustomResource`: the derived root requires a `spec`, but MetalLB's own
//! documentation creates L2Advertisements with no `spec` at all (announce every pool), and
//! ConfigurationState has no spec by design. [`kube_core::Resource`] is implemented by hand the way
//! the derive would, so `kube::Api<IPAddressPool>` works (the speaker and the controller use
//! it so).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// MetalLB's API group.
pub const GROUP: &str = "metallb.io";
/// The version vigil reads and writes.
pub const VERSION: &str = "v1beta1";

macro_rules! metallb_resource {
    ($ty:ident, $kind:literal, $plural:literal) => {
        impl kube_core::Resource for $ty {
            type DynamicType = ();
            type Scope = kube_core::NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                VERSION.into()
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                "metallb.io/v1beta1".into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
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

/// `IPAddressPool`: ranges MetalLB's controller allocates from. The speaker uses it to check
/// that a Service's IPs belong to some pool, and to find the pool's L2Advertisements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IPAddressPool {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The pool.
    #[serde(default)]
    pub spec: IPAddressPoolSpec,
    /// Counters the controller writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<IPAddressPoolStatus>,
}
metallb_resource!(IPAddressPool, "IPAddressPool", "ipaddresspools");

/// `IPAddressPool.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IPAddressPoolSpec {
    /// CIDR prefixes (`198.18.0.0/24`) or `start-end` ranges.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// Whether the controller may assign from the pool without a request (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_assign: Option<bool>,
    /// Skip `.0` and `.255` addresses when allocating.
    #[serde(rename = "avoidBuggyIPs", skip_serializing_if = "Option::is_none")]
    pub avoid_buggy_ips: Option<bool>,
    /// Which namespaces and services may allocate from the pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_allocation: Option<ServiceAllocation>,
}

/// `IPAddressPool.spec.serviceAllocation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceAllocation {
    /// Lower is preferred.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Namespaces by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// Namespaces by labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selectors: Option<Vec<LabelSelector>>,
    /// Services by labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<LabelSelector>>,
}

/// `IPAddressPool.status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IPAddressPoolStatus {
    /// Assigned IPv4 addresses.
    #[serde(rename = "assignedIPv4", skip_serializing_if = "Option::is_none")]
    pub assigned_ipv4: Option<i64>,
    /// Assigned IPv6 addresses.
    #[serde(rename = "assignedIPv6", skip_serializing_if = "Option::is_none")]
    pub assigned_ipv6: Option<i64>,
    /// Free IPv4 addresses.
    #[serde(rename = "availableIPv4", skip_serializing_if = "Option::is_none")]
    pub available_ipv4: Option<i64>,
    /// Free IPv6 addresses.
    #[serde(rename = "availableIPv6", skip_serializing_if = "Option::is_none")]
    pub available_ipv6: Option<i64>,
}

/// `L2Advertisement`: which pools are announced over ARP/NDP, from which nodes and interfaces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct L2Advertisement {
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The advertisement; absent means every pool, every node, every interface.
    #[serde(default)]
    pub spec: L2AdvertisementSpec,
}
metallb_resource!(L2Advertisement, "L2Advertisement", "l2advertisements");

/// `L2Advertisement.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct L2AdvertisementSpec {
    /// Pools by name.
    #[serde(rename = "ipAddressPools", skip_serializing_if = "Option::is_none")]
    pub ip_address_pools: Option<Vec<String>>,
    /// Pools by labels. With neither this nor `ipAddressPools`, the ad applies to every pool.
    #[serde(
        rename = "ipAddressPoolSelectors",
        skip_serializing_if = "Option::is_none"
    )]
    pub ip_address_pool_selectors: Option<Vec<LabelSelector>>,
    /// Nodes that may announce (OR of the selectors); empty means every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selectors: Option<Vec<LabelSelector>>,
    /// Interfaces to announce from; empty means every interface.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,
    /// Services the ad applies to (OR of the selectors); empty means every service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_selectors: Option<Vec<LabelSelector>>,
    /// Soft, weighted node preferences for the election (MetalLB v0.16.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preferred_node_selectors: Option<Vec<PreferredNodeSelector>>,
}

/// One entry of `L2Advertisement.spec.preferredNodeSelectors`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreferredNodeSelector {
    /// 1..=100; weights of every matching entry add up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// The nodes that get the weight; an empty selector matches every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preference: Option<LabelSelector>,
}

/// `ServiceL2Status`: which node announces a service, written by that node's speaker.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceL2Status {
    /// Object metadata (MetalLB: `generateName: l2-`, labels naming node and service, owned by
    /// the speaker Pod).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Empty.
    #[serde(default)]
    pub spec: ServiceL2StatusSpec,
    /// The status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ServiceL2StatusStatus>,
}
metallb_resource!(ServiceL2Status, "ServiceL2Status", "servicel2statuses");

/// `ServiceL2Status.spec`: empty in MetalLB.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceL2StatusSpec {}

/// `ServiceL2Status.status` (`node`, `serviceName`, `serviceNamespace` are immutable in
/// MetalLB's CRD: moving a status to another node means delete and create).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceL2StatusStatus {
    /// The announcing node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The service's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The service's namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_namespace: Option<String>,
    /// Interfaces announced from, filled only when the advertisements name interfaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<InterfaceInfo>>,
}

/// One entry of `ServiceL2Status.status.interfaces`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InterfaceInfo {
    /// Interface name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `ConfigurationState`: a status-only object each MetalLB component keeps about the
/// configuration it last tried to load (speakers: `speaker-<node>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationState {
    /// Object metadata (labels `metallb.io/component-type=speaker`, `metallb.io/node-name`).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConfigurationStateStatus>,
}
metallb_resource!(
    ConfigurationState,
    "ConfigurationState",
    "configurationstates"
);

/// `ConfigurationState.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigurationStateStatus {
    /// `Valid`, `Invalid` or `Unknown`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The messages of the failing conditions, one a line; empty when valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_summary: Option<String>,
    /// One condition per reconciler (the speaker's: `configReconcilerValid`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The label MetalLB puts on ConfigurationState objects naming the component.
pub const LABEL_COMPONENT_TYPE: &str = "metallb.io/component-type";
/// The label MetalLB puts on a speaker's ConfigurationState naming its node.
pub const LABEL_NODE_NAME: &str = "metallb.io/node-name";
/// ServiceL2Status label: the announcing node.
pub const LABEL_ANNOUNCE_NODE: &str = "metallb.io/node";
/// ServiceL2Status label: the service's name.
pub const LABEL_SERVICE_NAME: &str = "metallb.io/service-name";
/// ServiceL2Status label: the service's namespace.
pub const LABEL_SERVICE_NAMESPACE: &str = "metallb.io/service-namespace";

/// The name of a speaker's ConfigurationState object.
pub fn configuration_state_name(node: &str) -> String {
    format!("speaker-{node}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_core::Resource;

    #[test]
    fn decodes_metallb_objects_with_unknown_and_missing_fields() {
        let ad: L2Advertisement = serde_norway::from_str(
            "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: all, namespace: metallb-system}\n",
        )
        .unwrap();
        assert_eq!(ad.spec, L2AdvertisementSpec::default());
        let pool: IPAddressPool = serde_norway::from_str(
            "metadata: {name: p}\nspec:\n  addresses: [198.18.0.0/24]\n  avoidBuggyIPs: true\n  futureField: 3\nstatus: {assignedIPv4: 1, availableIPv4: 255}\n",
        )
        .unwrap();
        assert_eq!(pool.spec.avoid_buggy_ips, Some(true));
        assert_eq!(pool.status.unwrap().available_ipv4, Some(255));
        let state: ConfigurationState = serde_json::from_str(
            r#"{"metadata":{"name":"speaker-a"},"status":{"result":"Invalid","errorSummary":"x","conditions":[{"type":"configReconcilerValid","status":"False","reason":"ConfigurationError","message":"x","lastTransitionTime":"2026-12-01T00:00:00Z"}]}}"#,
        )
        .unwrap();
        assert_eq!(state.status.unwrap().result.as_deref(), Some("Invalid"));
    }

    #[test]
    fn resource_paths_are_metallbs() {
        assert_eq!(
            IPAddressPool::url_path(&(), Some("metallb-system")),
            "/apis/metallb.io/v1beta1/namespaces/metallb-system/ipaddresspools"
        );
        assert_eq!(ServiceL2Status::plural(&()), "servicel2statuses");
        assert_eq!(ConfigurationState::kind(&()), "ConfigurationState");
    }

    #[test]
    fn status_serialises_with_metallb_names() {
        let s = ServiceL2StatusStatus {
            node: Some("a".into()),
            service_name: Some("web".into()),
            service_namespace: Some("default".into()),
            interfaces: Some(vec![InterfaceInfo {
                name: Some("eth0".into()),
            }]),
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"{"node":"a","serviceName":"web","serviceNamespace":"default","interfaces":[{"name":"eth0"}]}"#
        );
    }
}
