//! The speaker's memberlist keyring, followed live from the memberlist Secret, and its key
//! acknowledgement (`key_ack`) kept up to date.
//!
//! Where the keys come from:
//! - at start, the Secret read through the API (always current; MetalLB's speaker Role
//!   `pod-lister` allows secrets get/list/watch in the speaker's namespace), else, when the
//!   API read fails, the mounted Secret directory (`--ml-secret-key-path`: `secretkey` and
//!   `vigil-keyring`, as the kubelet writes them);
//! - then a watch on that one Secret (field selector on its name). A mounted file is not
//!   polled: the kubelet refreshes it a minute or more late, while a rotation steps in
//!   seconds, and the controller keeps the old key long enough for a speaker that starts
//!   from a late file anyway.
//!
//! The keyring is the Secret's [`KEYRING_ENTRY`] when it is valid
//! ([`KeyringForm::parse`], its primary equal to `secretkey`), else `secretkey` alone (no
//! rotation has run: MetalLB's Secret as it is). Bad keyring data is logged
//! (`keyring_rejected`), counted in the speaker's rejected-reload counter, and the last good
//! keyring stays; it never stops the speaker.

use crate::key_ack::{AckWriter, Report};
use crate::secret::{KEYRING_ENTRY, KeyDerivation, KeyringError, KeyringForm, SECRET_KEY_FILE};
use crate::secret::{key_id, memberlist_key};
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{info, warn};
use vigil_gossip::wire::SecretKey;
use vigil_speaker::StatusSink;
use vigil_speaker::core::{Action, Member};
use vigil_speaker::observe::SourceCounters;

/// Where the keyring is followed from.
#[derive(Debug, Clone)]
pub struct KeyringOptions {
    /// The speaker's namespace (the Secret's and the acknowledgement Lease's).
    pub namespace: String,
    /// The memberlist Secret's name.
    pub secret_name: String,
    /// The mounted Secret directory, read when the API read fails at start.
    pub key_dir: Option<PathBuf>,
    /// MetalLB's key derivation in use.
    pub derivation: KeyDerivation,
    /// This node (the Lease's holder).
    pub node: String,
    /// The acknowledgement's heartbeat.
    pub ack_interval: Duration,
}

/// A keyring: secrets, primary first (empty: no encryption).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Secrets(pub Vec<Vec<u8>>);

impl Secrets {
    /// The [`key_id`]s, primary first.
    pub fn ids(&self) -> Vec<String> {
        self.0.iter().map(|s| key_id(s)).collect()
    }

    /// The memberlist keys, primary first.
    pub fn keys(&self, derivation: KeyDerivation) -> Result<Vec<SecretKey>, KeyringError> {
        self.0
            .iter()
            .filter_map(|s| memberlist_key(s, derivation))
            .map(|k| SecretKey::new(&k).map_err(|e| KeyringError::Key(e.to_string())))
            .collect()
    }
}

/// The keyring the Secret's entries stand for (pure): the keyring entry when present (an
/// error when it is bad), else `secretkey` alone, else none.
pub fn secrets_of(
    secret_key: Option<&[u8]>,
    keyring: Option<&[u8]>,
) -> Result<Secrets, KeyringError> {
    match keyring {
        Some(entry) => {
            let form = KeyringForm::parse(entry, secret_key)?;
            Ok(Secrets(
                form.keys.into_iter().map(String::into_bytes).collect(),
            ))
        }
        None => Ok(Secrets(
            secret_key
                .filter(|s| !s.is_empty())
                .map(|s| vec![s.to_vec()])
                .unwrap_or_default(),
        )),
    }
}

/// What [`start`] returns: the keys to start gossip with, later keyrings, and the status
/// sink wrapper that acknowledges what gossip installed.
pub struct Follow<K> {
    /// The keys at start, primary first.
    pub initial_keys: Vec<SecretKey>,
    /// Later keyrings (for `Source::keyrings`).
    pub keyrings: K,
    /// Reports installs and members into the Lease.
    pub acks: Acks,
}

/// The acknowledgement side: wrap the speaker's sink with [`Acks::sink`].
#[derive(Clone)]
pub struct Acks {
    writer: AckWriter,
    /// Key ids by derived key bytes (what the runner hands back after `set_keyring`).
    ids: Arc<Mutex<BTreeMap<Vec<u8>, String>>>,
}

impl Acks {
    /// `inner` with acknowledgements.
    pub fn sink<S: StatusSink>(self, inner: S) -> AckSink<S> {
        AckSink { inner, acks: self }
    }

    fn remember(&self, secrets: &Secrets, keys: &[SecretKey]) {
        let mut ids = self.ids.lock().unwrap_or_else(PoisonError::into_inner);
        for (key, id) in keys.iter().zip(secrets.ids()) {
            ids.insert(key.as_bytes().to_vec(), id);
        }
    }
}

/// A [`StatusSink`] that passes everything to the inner sink and acknowledges installed
/// keyrings and the gossip view in this node's Lease.
pub struct AckSink<S> {
    inner: S,
    acks: Acks,
}

impl<S: StatusSink> StatusSink for AckSink<S> {
    fn notice(&mut self, action: &Action) {
        self.inner.notice(action);
    }

    fn ownership_changed(&mut self, change: &vigil_speaker::core::OwnershipChange) {
        self.inner.ownership_changed(change);
    }

    fn members(&mut self, members: &[Member]) {
        self.inner.members(members);
        let live = members
            .iter()
            .filter(|m| m.live())
            .map(|m| m.name.clone())
            .collect();
        self.acks.writer.update(|r| r.members = Some(live));
    }

    fn keyring(&mut self, keys: &[SecretKey], result: Result<(), String>) {
        self.inner.keyring(keys, result.clone());
        if result.is_err() {
            return;
        }
        let installed: Vec<String> = {
            let ids = self.acks.ids.lock().unwrap_or_else(PoisonError::into_inner);
            keys.iter()
                .map(|k| {
                    ids.get(k.as_bytes())
                        .cloned()
                        .unwrap_or_else(|| "unknown".into())
                })
                .collect()
        };
        self.acks.writer.update(|r| r.installed = installed);
    }
}

/// Reads the keyring (API, else the mounted directory), starts the acknowledgement Lease
/// and the Secret watch.
pub async fn start(
    client: Client,
    options: KeyringOptions,
    counters: SourceCounters,
) -> Result<Follow<impl Stream<Item = Vec<SecretKey>> + Unpin + use<>>, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let initial = match api.get_opt(&options.secret_name).await {
        Ok(Some(secret)) => from_secret(&secret).unwrap_or_else(|e| {
            counters.count_rejected();
            warn!(event = "keyring_rejected", error = %e, "bad keyring in the Secret; using secretkey alone");
            secrets_of(entry(&secret, SECRET_KEY_FILE).as_deref(), None).unwrap_or_default()
        }),
        found => {
            let why = match found {
                Err(e) => e.to_string(),
                _ => "not found".to_string(),
            };
            warn!(event = "keyring_from_file", secret = %options.secret_name, why = %why, "cannot read the memberlist Secret; using the mounted files");
            from_dir(options.key_dir.as_ref(), &counters)?
        }
    };
    let initial_keys = initial
        .keys(options.derivation)
        .map_err(|e| format!("memberlist key: {e}"))?;
    info!(event = "keyring_loaded", keys = ?initial.ids(), "memberlist keyring at start");
    let writer = AckWriter::start(
        client,
        &options.namespace,
        &options.node,
        options.ack_interval,
        Report {
            installed: initial.ids(),
            members: None,
        },
    );
    let acks = Acks {
        writer,
        ids: Arc::default(),
    };
    acks.remember(&initial, &initial_keys);
    let (tx, mut rx) = mpsc::channel(1);
    tokio::spawn(watch_secret(
        api,
        options,
        initial,
        acks.clone(),
        counters,
        tx,
    ));
    Ok(Follow {
        initial_keys,
        keyrings: futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)),
        acks,
    })
}

fn entry(secret: &Secret, name: &str) -> Option<Vec<u8>> {
    secret.data.as_ref()?.get(name).map(|b| b.0.clone())
}

fn from_secret(secret: &Secret) -> Result<Secrets, KeyringError> {
    secrets_of(
        entry(secret, SECRET_KEY_FILE).as_deref(),
        entry(secret, KEYRING_ENTRY).as_deref(),
    )
}

/// The mounted directory's files; an unreadable `secretkey` is an error (as before rotation
/// existed), a bad keyring file is counted and `secretkey` used alone.
fn from_dir(dir: Option<&PathBuf>, counters: &SourceCounters) -> Result<Secrets, String> {
    let Some(dir) = dir else {
        return Ok(Secrets::default());
    };
    let file = dir.join(SECRET_KEY_FILE);
    let key = std::fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let ring = std::fs::read(dir.join(KEYRING_ENTRY)).ok();
    match secrets_of(Some(&key), ring.as_deref()) {
        Ok(s) => Ok(s),
        Err(e) => {
            counters.count_rejected();
            warn!(event = "keyring_rejected", error = %e, "bad keyring file; using secretkey alone");
            Ok(secrets_of(Some(&key), None).unwrap_or_default())
        }
    }
}

/// Follows the Secret: each new keyring that differs from the one in force is sent; a bad
/// one is logged and counted and the one in force stays; a deleted Secret changes nothing.
async fn watch_secret(
    api: Api<Secret>,
    options: KeyringOptions,
    mut current: Secrets,
    acks: Acks,
    counters: SourceCounters,
    tx: mpsc::Sender<Vec<SecretKey>>,
) {
    let config =
        watcher::Config::default().fields(&format!("metadata.name={}", options.secret_name));
    let stream = watcher(api, config).default_backoff().applied_objects();
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        let secret = match event {
            Ok(s) => s,
            Err(e) => {
                warn!(event = "keyring_watch_error", error = %e, "memberlist Secret watch failed; retrying, the keyring in force stays");
                continue;
            }
        };
        let next = match from_secret(&secret) {
            Ok(next) => next,
            Err(e) => {
                counters.count_rejected();
                warn!(event = "keyring_rejected", error = %e, "bad keyring in the Secret; the keyring in force stays");
                continue;
            }
        };
        if next == current {
            continue;
        }
        let keys = match next.keys(options.derivation) {
            Ok(k) if !k.is_empty() => k,
            Ok(_) => {
                counters.count_rejected();
                warn!(
                    event = "keyring_rejected",
                    "the Secret has no key; the keyring in force stays"
                );
                continue;
            }
            Err(e) => {
                counters.count_rejected();
                warn!(event = "keyring_rejected", error = %e, "the keyring in force stays");
                continue;
            }
        };
        counters.count_applied();
        info!(event = "keyring_changed", keys = ?next.ids(), "memberlist keyring changed");
        acks.remember(&next, &keys);
        current = next;
        if tx.send(keys).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_the_keyring_else_secretkey() {
        let form = KeyringForm {
            phase: crate::secret::Phase::Switching,
            keys: vec!["new".into(), "old".into()],
            ..KeyringForm::steady(String::new(), 0)
        };
        let json = form.to_json();
        assert_eq!(
            secrets_of(Some(b"new"), Some(json.as_bytes())),
            Ok(Secrets(vec![b"new".to_vec(), b"old".to_vec()]))
        );
        // Inconsistent with secretkey, or garbage: an error (the caller keeps the last good).
        assert_eq!(
            secrets_of(Some(b"old"), Some(json.as_bytes())),
            Err(KeyringError::NotSecretKey)
        );
        assert!(secrets_of(Some(b"old"), Some(b"\xff\x00")).is_err());
        assert_eq!(
            secrets_of(Some(b"old"), None),
            Ok(Secrets(vec![b"old".to_vec()]))
        );
        assert_eq!(secrets_of(Some(b""), None), Ok(Secrets::default()));
        let keys = Secrets(vec![b"new".to_vec(), b"old".to_vec()])
            .keys(KeyDerivation::Sha256)
            .unwrap();
        assert_eq!(keys.len(), 2);
    }
}
