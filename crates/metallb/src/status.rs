//! The status objects a MetalLB speaker writes, built as MetalLB builds them (the writing
//! itself belongs to the API half).
//!
//! - `ServiceL2Status` (`internal/k8s/controllers/layer2_status_controller.go`): one per
//!   announcing node and Service, `generateName: l2-`, labelled with the node and the
//!   Service; `status.interfaces` filled only when the advertisements name interfaces; owned
//!   by the speaker Pod (the owner reference is the caller's: it needs the Pod's uid).
//! - `ConfigurationState` `speaker-<node>`, labelled as a speaker's
//!   (`internal/k8s/k8s.go`), with the status from [`crate::state::ConfigTracker::status`].

use crate::crd::{
    ConfigurationState, ConfigurationStateStatus, InterfaceInfo, LABEL_ANNOUNCE_NODE,
    LABEL_COMPONENT_TYPE, LABEL_NODE_NAME, LABEL_SERVICE_NAME, LABEL_SERVICE_NAMESPACE,
    ServiceL2Status, ServiceL2StatusSpec, ServiceL2StatusStatus, configuration_state_name,
};
use crate::translate::Interfaces;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The ServiceL2Status this node keeps while it announces `service_namespace/service_name`.
pub fn service_l2_status(
    namespace: &str,
    node: &str,
    service_namespace: &str,
    service_name: &str,
    interfaces: &Interfaces,
) -> ServiceL2Status {
    let interfaces = match interfaces {
        Interfaces::All => None,
        Interfaces::Only(set) => Some(
            set.iter()
                .map(|i| InterfaceInfo {
                    name: Some(i.clone()),
                })
                .collect(),
        ),
    };
    ServiceL2Status {
        metadata: ObjectMeta {
            generate_name: Some("l2-".into()),
            namespace: Some(namespace.into()),
            labels: Some(
                [
                    (LABEL_ANNOUNCE_NODE.to_string(), node.to_string()),
                    (LABEL_SERVICE_NAME.to_string(), service_name.to_string()),
                    (
                        LABEL_SERVICE_NAMESPACE.to_string(),
                        service_namespace.to_string(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: ServiceL2StatusSpec {},
        status: Some(ServiceL2StatusStatus {
            node: Some(node.into()),
            service_name: Some(service_name.into()),
            service_namespace: Some(service_namespace.into()),
            interfaces,
        }),
    }
}

/// This speaker's ConfigurationState.
pub fn configuration_state(
    namespace: &str,
    node: &str,
    status: ConfigurationStateStatus,
) -> ConfigurationState {
    ConfigurationState {
        metadata: ObjectMeta {
            name: Some(configuration_state_name(node)),
            namespace: Some(namespace.into()),
            labels: Some(
                [
                    (LABEL_COMPONENT_TYPE.to_string(), "speaker".to_string()),
                    (LABEL_NODE_NAME.to_string(), node.to_string()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        status: Some(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_status_as_metallb_writes_it() {
        let s = service_l2_status("metallb-system", "a", "default", "web", &Interfaces::All);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["metadata"]["generateName"], "l2-");
        assert_eq!(json["metadata"]["labels"]["metallb.io/node"], "a");
        assert_eq!(json["metadata"]["labels"]["metallb.io/service-name"], "web");
        assert_eq!(json["status"]["serviceNamespace"], "default");
        assert!(json["status"].get("interfaces").is_none());
        let s = service_l2_status(
            "metallb-system",
            "a",
            "default",
            "web",
            &Interfaces::Only(["eth1".into(), "eth0".into()].into()),
        );
        assert_eq!(
            serde_json::to_value(&s).unwrap()["status"]["interfaces"],
            serde_json::json!([{"name": "eth0"}, {"name": "eth1"}])
        );
    }

    #[test]
    fn configuration_state_is_named_and_labelled_per_node() {
        let c = configuration_state("metallb-system", "b", ConfigurationStateStatus::default());
        assert_eq!(c.metadata.name.as_deref(), Some("speaker-b"));
        let labels = c.metadata.labels.unwrap();
        assert_eq!(labels["metallb.io/component-type"], "speaker");
        assert_eq!(labels["metallb.io/node-name"], "b");
    }
}
