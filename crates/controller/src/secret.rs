//! The memberlist Secret: created with a random key when it is missing, never overwritten.
//!
//! The format is MetalLB's controller's (`internal/k8s/k8s.go:CreateMlSecret`, v0.16.2): 16
//! random bytes, standard base64 without padding (22 characters), under the data key
//! `secretkey`; owned by the controller's Deployment when one is named, so deleting the
//! Deployment removes the Secret. MetalLB's speakers and vigil's speakers read that entry and
//! derive the same memberlist key from it (`vigil_metallb::secret`), so they share a cluster
//! during a migration.
//!
//! Room for rotation: a keyring is to live in entries of its own next to `secretkey` (which
//! keeps MetalLB's format and stays the key MetalLB speakers read); nothing here reads or
//! removes other entries, and an existing Secret is left exactly as it is.

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ListParams, PostParams};
use std::collections::BTreeMap;

/// The data key MetalLB's speakers read the memberlist secret from.
pub const SECRET_KEY: &str = "secretkey";

/// Random bytes in a new key (MetalLB: 128 bits).
pub const KEY_BYTES: usize = 16;

/// What [`ensure_memberlist_secret`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretOutcome {
    /// A Secret of that name existed; it was left alone.
    Existed,
    /// It was missing and has been created.
    Created,
}

/// Why the Secret could not be ensured.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The system's random source failed.
    #[error("random key: {0}")]
    Random(getrandom::Error),
    /// An API call failed.
    #[error("memberlist secret {name:?}: {source}")]
    Api {
        /// The Secret's name.
        name: String,
        /// The failure.
        source: kube::Error,
    },
}

/// Encodes key material as MetalLB stores it: standard base64 without padding.
pub fn encode_key(bytes: &[u8; KEY_BYTES]) -> String {
    STANDARD_NO_PAD.encode(bytes)
}

/// A fresh key from the operating system's random source, encoded as MetalLB stores it.
pub fn random_key() -> Result<String, SecretError> {
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::getrandom(&mut bytes).map_err(SecretError::Random)?;
    Ok(encode_key(&bytes))
}

/// The Secret as MetalLB's controller creates it, with `key` under [`SECRET_KEY`].
pub fn memberlist_secret(name: &str, key: &str, owner: Option<OwnerReference>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            SECRET_KEY.to_string(),
            ByteString(key.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

/// Creates Secret `name` in `namespace` with a random key unless one of that name exists
/// (looked up by a list with a field selector, as MetalLB does, so an API error is never
/// taken for absence). When `deployment` is named, the Deployment is read and made the
/// owner. A concurrent creation by another replica counts as [`SecretOutcome::Existed`].
pub async fn ensure_memberlist_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    deployment: Option<&str>,
) -> Result<SecretOutcome, SecretError> {
    let api_err = |source| SecretError::Api {
        name: name.to_string(),
        source,
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let found = secrets
        .list_metadata(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .map_err(api_err)?;
    if !found.items.is_empty() {
        return Ok(SecretOutcome::Existed);
    }
    let owner = match deployment {
        Some(d) => {
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
            let dep = deployments.get(d).await.map_err(api_err)?;
            Some(OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: d.to_string(),
                uid: dep.metadata.uid.unwrap_or_default(),
                ..OwnerReference::default()
            })
        }
        None => None,
    };
    let secret = memberlist_secret(name, &random_key()?, owner);
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(SecretOutcome::Created),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(SecretOutcome::Existed),
        Err(e) => Err(api_err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_metallb_length_and_alphabet() {
        let key = random_key().unwrap();
        assert_eq!(key.len(), 22, "{key}");
        assert!(!key.contains('='));
        assert_eq!(STANDARD_NO_PAD.decode(&key).unwrap().len(), KEY_BYTES);
        assert_eq!(encode_key(&[0xff; 16]), "/////////////////////w");
        assert_ne!(random_key().unwrap(), key);
    }
}
