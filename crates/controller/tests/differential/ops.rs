//! The operations a sequence applies to both API servers, and how they are applied.

use crate::{APP_NAMESPACES, MANAGER, NS};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use vigil_metallb::crd::IPAddressPool;

/// A Service as the test writes it (server-side apply: fields left out are removed).
#[derive(Debug, Clone, Default)]
pub(crate) struct Svc {
    ns: &'static str,
    name: String,
    /// `spec.type` (LoadBalancer when empty).
    type_: &'static str,
    /// TCP ports.
    ports: Vec<u16>,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    load_balancer_ip: Option<String>,
    /// `spec.ipFamilyPolicy` and `spec.ipFamilies`.
    families: Option<(&'static str, Vec<&'static str>)>,
    local: bool,
    selector: BTreeMap<String, String>,
    class: Option<&'static str>,
}

impl Svc {
    pub(crate) fn lb(ns: &'static str, name: &str) -> Self {
        Self {
            ns,
            name: name.to_string(),
            ports: vec![80],
            ..Self::default()
        }
    }
    pub(crate) fn ann(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }
    pub(crate) fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
    pub(crate) fn ports(mut self, ports: &[u16]) -> Self {
        self.ports = ports.to_vec();
        self
    }
    pub(crate) fn ip(mut self, ip: &str) -> Self {
        self.load_balancer_ip = Some(ip.into());
        self
    }
    pub(crate) fn families(mut self, policy: &'static str, families: &[&'static str]) -> Self {
        self.families = Some((policy, families.to_vec()));
        self
    }
    pub(crate) fn local(mut self, app: &str) -> Self {
        self.local = true;
        self.selector.insert("app".into(), app.into());
        self
    }
    pub(crate) fn type_(mut self, t: &'static str) -> Self {
        self.type_ = t;
        self
    }
    pub(crate) fn class(mut self, c: &'static str) -> Self {
        self.class = Some(c);
        self
    }

    fn manifest(&self) -> Value {
        let ports: Vec<Value> = self
            .ports
            .iter()
            .map(|p| json!({"name": format!("p{p}"), "port": p, "protocol": "TCP"}))
            .collect();
        let mut spec = json!({
            "type": if self.type_.is_empty() { "LoadBalancer" } else { self.type_ },
            "ports": ports,
        });
        if let Some(ip) = &self.load_balancer_ip {
            spec["loadBalancerIP"] = json!(ip);
        }
        if let Some((policy, families)) = &self.families {
            spec["ipFamilyPolicy"] = json!(policy);
            spec["ipFamilies"] = json!(families);
        }
        if self.local {
            spec["externalTrafficPolicy"] = json!("Local");
        }
        if !self.selector.is_empty() {
            spec["selector"] = json!(self.selector);
        }
        if let Some(c) = self.class {
            spec["loadBalancerClass"] = json!(c);
        }
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": self.name, "namespace": self.ns,
                         "annotations": self.annotations, "labels": self.labels},
            "spec": spec,
        })
    }
}

/// One operation, applied to both API servers.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Create or update IPAddressPool `name` with `spec`.
    Pool(String, Value),
    DeletePool(String),
    /// Create or update a Service.
    Svc(Svc),
    DeleteSvc(&'static str, String),
    /// Set a namespace's labels.
    NsLabels(&'static str, BTreeMap<String, String>),
    /// Delete every Service and pool (the end of a sequence), as one step.
    Clear,
}

pub(crate) fn pool(name: &str, spec: Value) -> Op {
    Op::Pool(name.into(), spec)
}
pub(crate) fn svc(s: Svc) -> Op {
    Op::Svc(s)
}
pub(crate) fn del(ns: &'static str, name: &str) -> Op {
    Op::DeleteSvc(ns, name.into())
}
pub(crate) fn ns_labels(ns: &'static str, labels: &[(&str, &str)]) -> Op {
    Op::NsLabels(
        ns,
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Applies `op` through `client`; an API refusal is returned as text (it must be the same
/// on both sides).
pub(crate) async fn apply(client: &Client, op: &Op) -> Result<(), String> {
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    let r = match op {
        Op::Pool(name, spec) => {
            let doc = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                             "metadata": {"name": name, "namespace": NS}, "spec": spec});
            pools
                .patch(name, &apply_params(), &Patch::Apply(&doc))
                .await
                .map(drop)
        }
        Op::DeletePool(name) => pools.delete(name, &DeleteParams::default()).await.map(drop),
        Op::Svc(s) => Api::<Service>::namespaced(client.clone(), s.ns)
            .patch(&s.name, &apply_params(), &Patch::Apply(&s.manifest()))
            .await
            .map(drop),
        Op::DeleteSvc(ns, name) => Api::<Service>::namespaced(client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop),
        Op::NsLabels(ns, labels) => {
            let doc = json!({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns, "labels": labels}});
            Api::<Namespace>::all(client.clone())
                .patch(ns, &apply_params(), &Patch::Apply(&doc))
                .await
                .map(drop)
        }
        Op::Clear => {
            for ns in APP_NAMESPACES {
                let api: Api<Service> = Api::namespaced(client.clone(), ns);
                for s in api.list(&ListParams::default()).await.unwrap().items {
                    let _ = api.delete(&s.name_any(), &DeleteParams::default()).await;
                }
            }
            for p in pools.list(&ListParams::default()).await.unwrap().items {
                let _ = pools.delete(&p.name_any(), &DeleteParams::default()).await;
            }
            Ok(())
        }
    };
    r.map_err(|e| match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        other => other.to_string(),
    })
}
