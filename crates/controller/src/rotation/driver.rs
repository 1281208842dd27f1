//! The rotation over kube-rs: reflectors on the memberlist Secret, the speakers'
//! acknowledgement Leases, [`plan`] once a second, and the keyring
//! written back.
//!
//! - No local state: every look starts from the Secret and the Leases as cached, so a new
//!   controller (or a new leader) resumes where the Secret says the rotation stands.
//! - Only the leader runs it ([`crate::leader`] starts it when elected and stops it when the
//!   Lease is lost), and every write and event passes the same [`Leadership`] fence as the
//!   allocator's writes, so a replica that lost the Lease without noticing yet does not write.
//! - Every write is an update carrying the resourceVersion the decision was made on, so a
//!   Secret changed meanwhile (another replica, a person) fails with a conflict and the next
//!   look decides again. `secretkey` and the keyring change in that one update.
//! - While the API server is unreachable nothing is read or written: the rotation pauses by
//!   itself, and the speakers keep the keyring they have.

use super::metrics::SharedMetrics;
use super::plan::{self, Decision, PauseReason, Policy, Step};
use crate::driver::FIELD_MANAGER;
use crate::fence::Leadership;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use std::future::Future;
use std::sync::PoisonError;
use std::time::{Duration, SystemTime};
use tokio::task::JoinSet;
use tracing::{info, warn};
use vigil_metallb::key_ack::{self, Acknowledgement};
use vigil_metallb::secret::{KEYRING_ENTRY, KeyringForm, Phase, SECRET_KEY_FILE, key_id};

/// How often the rotation looks at the Secret and the acknowledgements.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// What the rotation needs.
#[derive(Debug, Clone)]
pub struct RotationSettings {
    /// Namespace of the Secret and the acknowledgement Leases.
    pub namespace: String,
    /// The memberlist Secret.
    pub secret_name: String,
    /// Timing.
    pub policy: Policy,
    /// This replica's identity (the reporting instance of its events).
    pub identity: String,
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default()
}

/// Rotates until `shutdown` completes, writing only while `fence` lets it.
pub async fn run(
    settings: RotationSettings,
    client: Client,
    metrics: SharedMetrics,
    fence: Leadership,
    shutdown: impl Future<Output = ()>,
) {
    let ns = settings.namespace.as_str();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    // The watches end with the rotation (dropping the set aborts them).
    let mut watches = JoinSet::new();
    let secret_store = reflect(
        &mut watches,
        secrets.clone(),
        watcher::Config::default().fields(&format!("metadata.name={}", settings.secret_name)),
    );
    let ack_store = reflect(
        &mut watches,
        leases,
        watcher::Config::default().labels(&format!("{}={}", key_ack::LABEL.0, key_ack::LABEL.1)),
    );
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: FIELD_MANAGER.into(),
            instance: Some(settings.identity.clone()),
        },
    );
    let mut rotation = Rotation {
        settings,
        secrets,
        fence,
        recorder,
        metrics,
        announced_pause: None,
    };
    info!(
        event = "key_rotation_on",
        period = %humantime::format_duration(rotation.settings.policy.period),
        "memberlist key rotation on"
    );
    let mut shutdown = std::pin::pin!(shutdown);
    let mut look = tokio::time::interval(LOOK_EVERY);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = look.tick() => {}
        }
        let secret = secret_store
            .state()
            .into_iter()
            .find(|s| s.metadata.name.as_deref() == Some(rotation.settings.secret_name.as_str()));
        let Some(secret) = secret else {
            continue;
        };
        let acks: Vec<Acknowledgement> = ack_store
            .state()
            .iter()
            .filter_map(|l| key_ack::from_lease(l))
            .collect();
        rotation.look(&secret, &acks).await;
    }
}

fn reflect<K>(watches: &mut JoinSet<()>, api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    watches.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                warn!(event = "key_rotation_watch_error", kind = %K::kind(&()), error = %e, "watch failed; retrying");
            }
        }
    });
    reader
}

struct Rotation {
    settings: RotationSettings,
    secrets: Api<Secret>,
    fence: Leadership,
    recorder: Recorder,
    metrics: SharedMetrics,
    /// The pause last reported in an event (so each pause is announced once).
    announced_pause: Option<PauseReason>,
}

impl Rotation {
    fn metrics(&self) -> std::sync::MutexGuard<'_, super::metrics::RotationMetrics> {
        self.metrics.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn look(&mut self, secret: &Secret, acks: &[Acknowledgement]) {
        let entry = |name: &str| {
            secret
                .data
                .as_ref()
                .and_then(|d| d.get(name))
                .map(|b| b.0.clone())
        };
        let created = secret
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(0, |t| u64::try_from(t.0.as_second()).unwrap_or(0));
        let Some(form) = plan::current_form(
            entry(KEYRING_ENTRY).as_deref(),
            entry(SECRET_KEY_FILE).as_deref(),
            created,
        ) else {
            return;
        };
        let now = since_epoch(SystemTime::now());
        {
            let mut m = self.metrics();
            m.step = Some(plan::step(&form));
            m.live_speakers = acks.iter().filter(|a| plan::is_live(a, now)).count() as u64;
        }
        let fresh = match crate::secret::random_key() {
            Ok(k) => k,
            Err(e) => {
                warn!(event = "key_rotation_random_failed", error = %e, "no random source; not rotating");
                return;
            }
        };
        let decision = plan::plan(&form, acks, now, &self.settings.policy, || fresh);
        match decision {
            Decision::Wait(_) => {
                self.metrics().set_paused(None);
                self.announced_pause = None;
            }
            Decision::Paused(reason) => {
                // Announced already: nothing to write, so no need to ask who leads.
                if self.announced_pause.as_ref() == Some(&reason) {
                    return;
                }
                if !self.leading().await {
                    return;
                }
                self.metrics().set_paused(Some(&reason));
                if self.announced_pause.as_ref() != Some(&reason) {
                    warn!(event = "key_rotation_paused", reason = reason.label(), detail = %reason, "memberlist key rotation paused");
                    self.event(
                        secret,
                        EventType::Warning,
                        "KeyRotationPaused",
                        reason.to_string(),
                    )
                    .await;
                    self.announced_pause = Some(reason);
                }
            }
            Decision::Write(next) => {
                if !self.leading().await {
                    return;
                }
                self.metrics().set_paused(None);
                self.announced_pause = None;
                self.write(secret, &form, next).await;
            }
        }
    }

    /// Whether the fence lets this replica write now.
    async fn leading(&self) -> bool {
        match self.fence.check().await {
            Ok(()) => true,
            Err(e) => {
                warn!(event = "key_rotation_not_leading", error = %e, "not rotating");
                false
            }
        }
    }

    async fn write(&mut self, secret: &Secret, from: &KeyringForm, next: KeyringForm) {
        let mut updated = secret.clone();
        let data = updated.data.get_or_insert_with(Default::default);
        data.insert(
            SECRET_KEY_FILE.to_string(),
            ByteString(next.primary().as_bytes().to_vec()),
        );
        data.insert(
            KEYRING_ENTRY.to_string(),
            ByteString(next.to_json().into_bytes()),
        );
        let name = &self.settings.secret_name;
        // `replace` sends the resourceVersion read: a Secret changed since fails (409).
        match self
            .secrets
            .replace(name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {
                let ids = next.key_ids();
                let step = match next.phase {
                    Phase::Steady => Step::Steady,
                    Phase::Adding => Step::Adding,
                    Phase::Switching => Step::Switching,
                };
                {
                    let mut m = self.metrics();
                    m.writes += 1;
                    m.step = Some(step);
                    if next.phase == Phase::Steady && from.phase == Phase::Switching {
                        m.completed += 1;
                    }
                }
                let note = match next.phase {
                    Phase::Adding => format!("adding key {} beside primary {}", ids[1], ids[0]),
                    Phase::Switching => {
                        format!("key {} is primary, {} still accepted", ids[0], ids[1])
                    }
                    Phase::Steady => format!(
                        "rotation complete: key {} alone, {} removed",
                        ids[0],
                        key_id(from.keys[1].as_bytes())
                    ),
                };
                info!(event = "key_rotation_step", step = step.as_str(), keys = ?ids, "{note}");
                self.event(secret, EventType::Normal, "KeyRotation", note)
                    .await;
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                info!(
                    event = "key_rotation_conflict",
                    "the Secret changed meanwhile; deciding again"
                );
            }
            Err(e) => {
                warn!(event = "key_rotation_write_failed", error = %e, "keyring not written; trying again");
            }
        }
    }

    async fn event(&self, secret: &Secret, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: "RotateKey".into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, &secret.object_ref(&())).await {
            warn!(error = %e, reason, "event");
        }
    }
}
