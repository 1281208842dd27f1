//! The speaker's Kubernetes source: kube-runtime reflectors over every object MetalLB's
//! speaker reads, turned into whole [`DesiredState`] snapshots for `vigil_speaker::run`.
//!
//! - Nothing is sent before every store has listed once: a speaker never announces (or
//!   withdraws) from a partial cache.
//! - Changes are debounced ([`DEBOUNCE`]) and then [`translate`]d whole; a snapshot equal to
//!   the last one sent is not sent again.
//! - The configuration goes through [`ConfigTracker`]: an invalid or refused one is logged
//!   and counted, and the last good one stays in force, as in MetalLB.
//! - When the API server is down, the stores keep what they had (the watchers retry with
//!   kube's default backoff and relist after `410 Gone`), so the last snapshot stays in force
//!   and gossip failover goes on without the API.
//! - The memberlist key is MetalLB's `secretkey` file (the Secret mounted by the DaemonSet),
//!   derived as MetalLB does and watched for changes: a new key goes out as a keyring.

use crate::crd::ConfigurationState;
use crate::crd::{IPAddressPool, L2Advertisement};
use crate::secret::{KeyDerivation, memberlist_key};
use crate::settings::SpeakerSettings;
use crate::state::ReconcilerCondition;
use crate::status::configuration_state;
use crate::translate::{Cluster, Interfaces, NodeView, Options, translate};
use crate::{Config, ConfigTracker, Reload};
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};
use tracing::{info, warn};
use vigil_gossip::wire::SecretKey;
use vigil_speaker::model::{DesiredState, ServiceSpec, SharedVips};
use vigil_speaker::observe::SourceCounters;
use vigil_speaker::{HealthReport, Source};

/// How long a burst of watch events is gathered before one translation.
pub const DEBOUNCE: Duration = Duration::from_millis(100);
/// How often the memberlist key file is looked at.
const KEY_POLL: Duration = Duration::from_secs(1);
/// How often speaker Pods are listed.
const POD_POLL: Duration = Duration::from_secs(10);

/// What the source and the status sink share: the interfaces each Service is announced
/// from (for ServiceL2Status), and what this node announces (for MetalLB's refusal of a
/// configuration that would orphan an announced IP).
#[derive(Debug, Clone, Default)]
pub struct Shared {
    inner: Arc<Mutex<SharedInner>>,
}

#[derive(Debug, Default)]
struct SharedInner {
    interfaces: BTreeMap<String, Interfaces>,
    announced: BTreeMap<String, Vec<IpAddr>>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, SharedInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The interfaces `service` is announced from (all, when not known).
    pub fn interfaces(&self, service: &str) -> Interfaces {
        self.lock()
            .interfaces
            .get(service)
            .cloned()
            .unwrap_or(Interfaces::All)
    }

    /// This node now answers (or no longer answers) for `vip` of `service`.
    pub fn set_announced(&self, service: &str, vip: IpAddr, announced: bool) {
        let mut inner = self.lock();
        let vips = inner.announced.entry(service.to_string()).or_default();
        vips.retain(|v| *v != vip);
        if announced {
            vips.push(vip);
        } else if vips.is_empty() {
            inner.announced.remove(service);
        }
    }
}

/// The cached objects, one reflector store each.
#[derive(Clone)]
pub struct Stores {
    pools: Store<IPAddressPool>,
    ads: Store<L2Advertisement>,
    /// Every Service (the sink reads it for event references).
    pub services: Store<Service>,
    slices: Store<EndpointSlice>,
    nodes: Store<Node>,
    pub(crate) pods: Store<Pod>,
}

/// Maps what MetalLB decides onto the speaker core's snapshot: every handled Service
/// becomes a [`ServiceSpec`] whose candidates are exactly MetalLB's eligible nodes (an empty
/// set when a rule says nobody announces), ranked by its preference scores and elected on
/// its own even when it shares an IP ([`SharedVips::PerService`], as MetalLB); seeds are
/// the peers' addresses at the gossip port (this node's own left out).
pub fn desired_state(view: &NodeView, gossip_port: u16) -> DesiredState {
    let services = view
        .services
        .iter()
        .map(|a| ServiceSpec {
            id: a.id.clone(),
            vips: a.vips.clone(),
            nodes: Some(if a.nobody.is_some() {
                Default::default()
            } else {
                a.eligible_nodes.clone()
            }),
            node_selector: BTreeMap::new(),
            health_checked: false,
            interfaces: match &a.interfaces {
                Interfaces::All => None,
                Interfaces::Only(set) => Some(set.clone()),
            },
            preferences: a.preferences.clone(),
        })
        .collect();
    let mut seeds: Vec<String> = view
        .peers
        .iter()
        .filter(|p| p.node.as_deref() != Some(view.node.as_str()))
        .map(|p| std::net::SocketAddr::new(p.addr, gossip_port).to_string())
        .collect();
    seeds.sort();
    seeds.dedup();
    DesiredState {
        services,
        expected_members: None,
        seeds,
        labels: BTreeMap::new(),
        shared_vips: SharedVips::PerService,
    }
}

/// Starts the reflectors, waits until every store has listed once, and returns the
/// speaker's source (with the first snapshot as `initial`) and the stores.
pub async fn start(
    client: Client,
    settings: &SpeakerSettings,
    shared: Shared,
) -> Result<
    (
        Source<
            impl Stream<Item = DesiredState> + Unpin + use<>,
            impl Stream<Item = Vec<SecretKey>> + Unpin + use<>,
            impl Stream<Item = HealthReport> + Unpin + use<>,
        >,
        Stores,
    ),
    String,
> {
    let changed = Arc::new(Notify::new());
    let counters = SourceCounters::default();
    counters.set_kubernetes();
    let ns = &settings.namespace;
    // Speaker Pods: the whole namespace is watched; translate applies METALLB_ML_LABELS.
    let options = settings.translate_options();
    let pod_ns = options.namespace.clone();
    let all = watcher::Config::default();
    let watch = Watch {
        changed: Arc::clone(&changed),
        counters: counters.clone(),
    };
    let stores = Stores {
        pools: watch.reflect(Api::namespaced(client.clone(), ns), all.clone()),
        ads: watch.reflect(Api::namespaced(client.clone(), ns), all.clone()),
        services: watch.reflect(Api::all(client.clone()), all.clone()),
        slices: watch.reflect(Api::all(client.clone()), all.clone()),
        nodes: watch.reflect(Api::all(client.clone()), all),
        pods: watch.poll_list(Api::namespaced(client.clone(), &pod_ns)),
    };
    stores.wait_ready().await?;
    let mut builder = Builder {
        stores: stores.clone(),
        options,
        gossip_port: settings
            .memberlist
            .as_ref()
            .map_or(crate::settings::DEFAULT_ML_PORT, |m| m.bind_port),
        tracker: ConfigTracker::new(),
        state: Api::namespaced(client.clone(), ns),
        written: None,
        shared,
        counters,
    };
    let initial = builder.snapshot();
    builder.write_state().await;
    info!(
        event = "k8s_synced",
        services = initial.services.len(),
        seeds = initial.seeds.len(),
        "every store listed; first snapshot built"
    );
    let counters = builder.counters.clone();
    let (desired_tx, desired_rx) = mpsc::channel(4);
    tokio::spawn(builder.run(initial.clone(), changed, desired_tx));

    let (initial_keys, keyrings) = match settings
        .memberlist
        .as_ref()
        .and_then(|m| Some((m.secret_key_file.clone()?, m.key_derivation)))
    {
        Some((file, derivation)) => {
            let (text, key) = read_key(&file, derivation)?;
            let (tx, rx) = mpsc::channel(2);
            tokio::spawn(watch_key(file, derivation, text, tx));
            (key.into_iter().collect(), receiver_stream(rx).boxed())
        }
        None => (Vec::new(), futures_util::stream::pending().boxed()),
    };
    let source = Source {
        initial,
        initial_keys,
        desired: receiver_stream(desired_rx),
        keyrings,
        health: futures_util::stream::pending::<HealthReport>(),
        counters,
    };
    Ok((source, stores))
}

impl Stores {
    async fn wait_ready(&self) -> Result<(), String> {
        let why = |what: &str| format!("the {what} watch stopped before its first list");
        self.pools
            .wait_until_ready()
            .await
            .map_err(|_| why("IPAddressPool"))?;
        self.ads
            .wait_until_ready()
            .await
            .map_err(|_| why("L2Advertisement"))?;
        self.services
            .wait_until_ready()
            .await
            .map_err(|_| why("Service"))?;
        self.slices
            .wait_until_ready()
            .await
            .map_err(|_| why("EndpointSlice"))?;
        self.nodes
            .wait_until_ready()
            .await
            .map_err(|_| why("Node"))?;
        self.pods
            .wait_until_ready()
            .await
            .map_err(|_| why("speaker Pod"))?;
        Ok(())
    }
}

/// What every watch shares: the bell rung on a change, and the counters
/// (`metallb_k8s_client_updates_total` counts each object seen changed or deleted).
struct Watch {
    changed: Arc<Notify>,
    counters: SourceCounters,
}

impl Watch {
    /// One reflector: a watch with kube's default backoff feeding a store; every event (and
    /// every error, logged) rings `changed`.
    fn reflect<K>(&self, api: Api<K>, config: watcher::Config) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (reader, writer) = reflector::store();
        let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
        let changed = Arc::clone(&self.changed);
        let counters = self.counters.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(event) => {
                        if matches!(
                            event,
                            watcher::Event::Apply(_)
                                | watcher::Event::Delete(_)
                                | watcher::Event::InitApply(_)
                        ) {
                            counters.count_update();
                        }
                        changed.notify_one();
                    }
                    Err(e) => warn!(
                        event = "k8s_watch_error",
                        kind = %K::kind(&()),
                        error = %e,
                        "watch failed; retrying, the cache in force stays"
                    ),
                }
            }
        });
        reader
    }

    /// A store filled by listing every [`POD_POLL`], not watching: MetalLB's speaker role may
    /// list speaker Pods but not watch them (MetalLB itself lists them at start and then every
    /// few minutes). A failed list keeps the last one.
    fn poll_list<K>(&self, api: Api<K>) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let (reader, mut writer) = reflector::store();
        let changed = Arc::clone(&self.changed);
        let counters = self.counters.clone();
        tokio::spawn(async move {
            let mut poll = tokio::time::interval(POD_POLL);
            let mut last_versions: Option<Vec<Option<String>>> = None;
            loop {
                poll.tick().await;
                match api.list(&kube::api::ListParams::default()).await {
                    Ok(list) => {
                        let versions = list
                            .items
                            .iter()
                            .map(|o| o.meta().resource_version.clone())
                            .collect();
                        if last_versions.as_ref() == Some(&versions) {
                            continue;
                        }
                        last_versions = Some(versions);
                        writer.apply_watcher_event(&watcher::Event::Init);
                        for object in list.items {
                            counters.count_update();
                            writer.apply_watcher_event(&watcher::Event::InitApply(object));
                        }
                        writer.apply_watcher_event(&watcher::Event::InitDone);
                        changed.notify_one();
                    }
                    Err(e) => warn!(
                        event = "k8s_list_error",
                        kind = %K::kind(&()),
                        error = %e,
                        "list failed; the last one stays"
                    ),
                }
            }
        });
        reader
    }
}
/// Builds snapshots from the stores.
struct Builder {
    stores: Stores,
    options: Options,
    gossip_port: u16,
    tracker: ConfigTracker,
    /// Where this speaker's ConfigurationState goes, and the condition last written there.
    state: Api<ConfigurationState>,
    written: Option<ReconcilerCondition>,
    shared: Shared,
    counters: SourceCounters,
}

fn cloned<K: Resource + Clone>(store: &Store<K>) -> Vec<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state().iter().map(|o| (**o).clone()).collect()
}

impl Builder {
    async fn run(
        mut self,
        mut last: DesiredState,
        changed: Arc<Notify>,
        tx: mpsc::Sender<DesiredState>,
    ) {
        loop {
            changed.notified().await;
            tokio::time::sleep(DEBOUNCE).await;
            let next = self.snapshot();
            self.write_state().await;
            if next != last {
                self.counters.count_applied();
                if tx.send(next.clone()).await.is_err() {
                    return;
                }
                last = next;
            }
        }
    }

    /// Writes this speaker's ConfigurationState when the reconcile's condition changed (the
    /// object by server-side apply, its status through the subresource). A failure is
    /// logged and tried again on the next change.
    async fn write_state(&mut self) {
        let Some(condition) = self.tracker.condition().cloned() else {
            return;
        };
        if self.written.as_ref() == Some(&condition) {
            return;
        }
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let namespace = self.state.namespace().unwrap_or_default().to_string();
        let object = configuration_state(
            &namespace,
            &self.options.node_name,
            self.tracker.status(now),
        );
        let name = object.metadata.name.clone().unwrap_or_default();
        let mut body = serde_json::json!({ "metadata": object.metadata });
        body["apiVersion"] = "metallb.io/v1beta1".into();
        body["kind"] = "ConfigurationState".into();
        let apply = PatchParams::apply("vigil-speaker").force();
        let result = async {
            self.state
                .patch(&name, &apply, &Patch::Apply(&body))
                .await?;
            let status = serde_json::json!({ "status": object.status });
            self.state
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
        }
        .await;
        match result {
            Ok(_) => self.written = Some(condition),
            Err(e) => {
                warn!(event = "configuration_state_failed", error = %e, "ConfigurationState not written")
            }
        }
    }

    fn snapshot(&mut self) -> DesiredState {
        let nodes = cloned(&self.stores.nodes);
        let parsed = Config::parse(
            &cloned(&self.stores.pools),
            &cloned(&self.stores.ads),
            &nodes,
        );
        let announced = self.shared.lock().announced.clone();
        match self.tracker.reconcile(parsed, &announced) {
            Reload::Applied => info!(event = "config_applied", "MetalLB configuration applied"),
            Reload::Unchanged => {}
            Reload::Invalid(e) => {
                self.counters.count_rejected();
                warn!(event = "config_invalid", error = %e.metallb_message(), "configuration rejected; the last good one stays");
            }
            Reload::Refused(services) => {
                self.counters.count_rejected();
                // MetalLB counts an update error for the handler's refusal, not for a
                // configuration that does not parse.
                self.counters.count_update_error();
                warn!(event = "config_refused", services = ?services, "configuration would orphan announced IPs; the last good one stays");
            }
        }
        self.counters
            .set_config_state(self.tracker.loaded(), self.tracker.stale());
        let Some(config) = self.tracker.config() else {
            // MetalLB announces nothing before a configuration is applied.
            return DesiredState::default();
        };
        let (services, slices, pods) = (
            cloned(&self.stores.services),
            cloned(&self.stores.slices),
            cloned(&self.stores.pods),
        );
        let cluster = Cluster {
            services: &services,
            endpoint_slices: &slices,
            nodes: &nodes,
            pods: &pods,
        };
        let view = translate(config, &cluster, &self.options);
        self.shared.lock().interfaces = view
            .services
            .iter()
            .map(|a| (a.id.clone(), a.interfaces.clone()))
            .collect();
        desired_state(&view, self.gossip_port)
    }
}

/// The key file's text and its key (`None`: an empty file, no encryption).
fn read_key(
    file: &PathBuf,
    derivation: KeyDerivation,
) -> Result<(Vec<u8>, Option<SecretKey>), String> {
    let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let key = match memberlist_key(&text, derivation) {
        None => None,
        Some(bytes) => Some(
            SecretKey::new(&bytes)
                .map_err(|e| format!("{}: not a memberlist key: {e}", file.display()))?,
        ),
    };
    Ok((text, key))
}

/// Sends the key again whenever the file's text changes (kubelet rewrites a mounted Secret);
/// a file that cannot be read or used is logged and the old key stays.
async fn watch_key(
    file: PathBuf,
    derivation: KeyDerivation,
    mut text: Vec<u8>,
    tx: mpsc::Sender<Vec<SecretKey>>,
) {
    let mut poll = tokio::time::interval(KEY_POLL);
    loop {
        poll.tick().await;
        match read_key(&file, derivation) {
            Ok((new, _)) if new == text => {}
            Ok((new, Some(key))) => {
                info!(event = "key_changed", file = %file.display(), "memberlist key changed");
                text = new;
                if tx.send(vec![key]).await.is_err() {
                    return;
                }
            }
            Ok((new, None)) => {
                warn!(event = "key_rejected", file = %file.display(), "empty key file; old key kept");
                text = new;
            }
            Err(e) => warn!(event = "key_rejected", error = %e, "old key kept"),
        }
    }
}

fn receiver_stream<T>(mut rx: mpsc::Receiver<T>) -> impl Stream<Item = T> + Unpin {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::{Announceable, Nobody, Peer, PeerSource};

    fn announceable(id: &str, nodes: &[&str], interfaces: Interfaces) -> Announceable {
        Announceable {
            id: id.into(),
            vips: vec!["198.18.0.200".parse().unwrap()],
            pool: "lab".into(),
            eligible_nodes: nodes.iter().map(|n| n.to_string()).collect(),
            preferences: BTreeMap::new(),
            interfaces,
            nobody: None,
        }
    }

    fn peer(ip: &str, node: Option<&str>, source: PeerSource) -> Peer {
        Peer {
            addr: ip.parse().unwrap(),
            node: node.map(str::to_string),
            source,
        }
    }

    #[test]
    fn node_view_maps_onto_desired_state() {
        let mut nobody = announceable("ns/nobody", &["a", "b"], Interfaces::All);
        nobody.nobody = Some(Nobody::NoServableEndpoint);
        let view = NodeView {
            node: "a".into(),
            services: vec![
                announceable("ns/web", &["a", "b"], Interfaces::All),
                announceable(
                    "ns/eth",
                    &["b"],
                    Interfaces::Only(["eth0".to_string()].into()),
                ),
                nobody,
            ],
            ignored: Vec::new(),
            peers: vec![
                peer("198.18.0.11", Some("a"), PeerSource::PodIp),
                peer("198.18.0.12", Some("b"), PeerSource::PodIp),
                peer("198.18.0.12", Some("b"), PeerSource::NodeInternalIp),
                peer("198.18.0.13", None, PeerSource::PodIp),
            ],
        };
        let desired = desired_state(&view, 7946);
        let web = desired.service("ns/web").unwrap();
        assert_eq!(web.nodes, Some(["a".to_string(), "b".to_string()].into()));
        assert_eq!(web.interfaces, None);
        assert!(!web.health_checked && web.node_selector.is_empty());
        let eth = desired.service("ns/eth").unwrap();
        assert_eq!(eth.interfaces, Some(["eth0".to_string()].into()));
        // A rule that says nobody announces is an empty candidate set, never "any node".
        assert_eq!(
            desired.service("ns/nobody").unwrap().nodes,
            Some(Default::default())
        );
        // Peers at the gossip port, each once, this node's own left out.
        assert_eq!(desired.seeds, ["198.18.0.12:7946", "198.18.0.13:7946"]);
        assert_eq!(desired.expected_members, None);
    }
}
