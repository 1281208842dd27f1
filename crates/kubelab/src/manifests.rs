//! Applying YAML manifests (multi-document) with server-side apply, as `kubectl apply
//! --server-side` would: each document's kind is looked up in the API server's discovery, and
//! a CustomResourceDefinition is waited on until Established before the next document, so a
//! file may define a kind and then use it.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde::Deserialize;

use crate::error::Error;

/// The field manager of everything this crate applies.
pub const FIELD_MANAGER: &str = "vigil-kubelab";

/// How long a new CRD may take to become Established.
const ESTABLISH_LIMIT: Duration = Duration::from_secs(30);

/// Splits multi-document YAML into its non-empty documents, as JSON values.
pub fn documents(source_name: &str, yaml: &str) -> Result<Vec<serde_json::Value>, Error> {
    let mut docs = Vec::new();
    for (index, doc) in serde_norway::Deserializer::from_str(yaml).enumerate() {
        let value = serde_json::Value::deserialize(doc).map_err(|e| Error::Manifest {
            source_name: source_name.to_string(),
            index,
            reason: e.to_string(),
        })?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// Applies every document of `yaml` (server-side apply, forced, as [`FIELD_MANAGER`]) and
/// returns the objects as the API server stored them. Namespaced objects without a namespace
/// go to `default`. CRDs are waited on until Established.
pub async fn apply_yaml(
    client: &Client,
    source_name: &str,
    yaml: &str,
) -> Result<Vec<DynamicObject>, Error> {
    let mut applied = Vec::new();
    for (index, doc) in documents(source_name, yaml)?.into_iter().enumerate() {
        let bad = |reason: String| Error::Manifest {
            source_name: source_name.to_string(),
            index,
            reason,
        };
        let object: DynamicObject =
            serde_json::from_value(doc.clone()).map_err(|e| bad(e.to_string()))?;
        let types = object
            .types
            .as_ref()
            .ok_or_else(|| bad("no apiVersion/kind".into()))?;
        let gvk = GroupVersionKind::try_from(types).map_err(|e| bad(e.to_string()))?;
        let name = object
            .metadata
            .name
            .clone()
            .ok_or_else(|| bad("no metadata.name".into()))?;
        let (resource, caps) = discovery::pinned_kind(client, &gvk)
            .await
            .map_err(|e| bad(format!("{}/{}: {e}", gvk.api_version(), gvk.kind)))?;
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = object.metadata.namespace.as_deref().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let stored = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&doc),
            )
            .await
            .map_err(|e| bad(format!("{} {name}: {e}", gvk.kind)))?;
        if gvk.group == "apiextensions.k8s.io" && gvk.kind == "CustomResourceDefinition" {
            wait_crd_established(client, &name, ESTABLISH_LIMIT).await?;
        }
        applied.push(stored);
    }
    Ok(applied)
}

/// [`apply_yaml`] on a file.
pub async fn apply_yaml_file(client: &Client, path: &Path) -> Result<Vec<DynamicObject>, Error> {
    let yaml = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    apply_yaml(client, &path.display().to_string(), &yaml).await
}

/// Applies CRD files (each may hold several documents; every document must be a
/// CustomResourceDefinition) and waits until each is Established; returns their names.
pub async fn apply_crds(client: &Client, paths: &[&Path]) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for path in paths {
        let yaml = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let source_name = path.display().to_string();
        for (index, doc) in documents(&source_name, &yaml)?.iter().enumerate() {
            if doc.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                return Err(Error::Manifest {
                    source_name,
                    index,
                    reason: "not a CustomResourceDefinition".into(),
                });
            }
        }
        names.extend(
            apply_yaml(client, &source_name, &yaml)
                .await?
                .iter()
                .map(ResourceExt::name_any),
        );
    }
    Ok(names)
}

/// Waits until CRD `name` has condition Established=True.
pub async fn wait_crd_established(
    client: &Client,
    name: &str,
    limit: Duration,
) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = await_condition(crds, name, conditions::is_crd_established());
    match tokio::time::timeout(limit, established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Config(format!("watching CRD {name}: {e}"))),
        Err(_) => Err(Error::Timeout {
            what: format!("CRD {name} to be Established"),
            limit,
        }),
    }
}
