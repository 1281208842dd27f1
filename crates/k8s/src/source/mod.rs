//! The speaker's Kubernetes source: kube-runtime reflectors over every object MetalLB's
//! speaker reads, turned into keyed deltas for `vigil_speaker::run`.
//!
//! - Nothing is sent before every store has listed once: a speaker never announces (or
//!   withdraws) from a partial cache. The first desired state is whole.
//! - After that, every watch event marks what it touches ([`watch`]): a Service, a slice with
//!   its Service, the Nodes only when a field the translation reads changed, the
//!   configuration, the peers. The builder ([`keyed`]) takes what is marked, translates only
//!   those Services (each from its own slices, through a slice→Service index), and sends
//!   only what changed ([`DesiredUpdate::Changes`]); what is marked meanwhile forms the next
//!   batch, so bursts coalesce with no fixed delay.
//! - The keyed state is checked against a whole translation after every relist, once
//!   changes settle and every few minutes (`vigil_k8s_keyed_state_differences_total`, and
//!   a repair when it differs).
//! - The configuration goes through [`ConfigTracker`]: an invalid or refused one is logged
//!   and counted, and the last good one stays in force, as in MetalLB. A refused one (it
//!   would orphan IPs this node announces) is tried again with backoff, 200 ms doubling to
//!   60 s, as MetalLB's reconciler requeues it: it may pass once those Services are gone.
//! - When the API server is down, the stores keep what they had (the watchers retry with
//!   kube's default backoff and relist after `410 Gone`), so the state in force stays and
//!   gossip failover goes on without the API.
//! - The memberlist key is MetalLB's `secretkey` file (the Secret mounted by the DaemonSet),
//!   derived as MetalLB does and watched for changes: a new key goes out as a keyring.

mod bench;
mod dirty;
mod keyed;
mod sent;
mod slim;
mod watch;

use crate::ConfigTracker;
use crate::cached::{CachedService, CachedSlice};
use crate::crd::{IPAddressPool, L2Advertisement};
use crate::secret::{KeyDerivation, memberlist_key};
use crate::settings::SpeakerSettings;
use crate::translate::{Announceable, Interfaces, NodeView};
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc;
use tracing::{info, warn};
use vigil_gossip::wire::SecretKey;
use vigil_speaker::model::{DesiredState, DesiredUpdate, ServiceSpec, SharedVips};
use vigil_speaker::observe::SourceCounters;
use vigil_speaker::{HealthReport, Source};

pub use bench::KeyedBench;

/// How often the memberlist key file is looked at.
const KEY_POLL: Duration = Duration::from_secs(1);

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

    /// Whether this node answers for any VIP of `service` now.
    pub fn announces(&self, service: &str) -> bool {
        self.lock()
            .announced
            .get(service)
            .is_some_and(|vips| !vips.is_empty())
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
    pub services: Store<CachedService>,
    slices: Store<CachedSlice>,
    nodes: Store<Node>,
    pub(crate) pods: Store<Pod>,
}

/// One handled Service as the speaker core takes it: its candidates are exactly MetalLB's
/// eligible nodes (an empty set when a rule says nobody announces), ranked by its
/// preference scores.
pub fn service_spec(a: &Announceable) -> ServiceSpec {
    ServiceSpec {
        id: a.id.clone(),
        vips: a.vips.clone(),
        nodes: Some(Arc::new(if a.nobody.is_some() {
            Default::default()
        } else {
            a.eligible_nodes.clone()
        })),
        node_selector: BTreeMap::new(),
        health_checked: false,
        interfaces: match &a.interfaces {
            Interfaces::All => None,
            Interfaces::Only(set) => Some(set.clone()),
        },
        preferences: a.preferences.clone(),
    }
}

/// Maps what MetalLB decides onto the speaker core's snapshot: every handled Service
/// becomes a [`ServiceSpec`] ([`service_spec`]), elected on its own even when it shares an
/// IP ([`SharedVips::PerService`], as MetalLB); seeds are the peers' addresses at the
/// gossip port (this node's own left out).
pub fn desired_state(view: &NodeView, gossip_port: u16) -> DesiredState {
    let services = view.services.iter().map(service_spec).collect();
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
/// speaker's source (with the first, whole desired state as `initial`, then keyed deltas)
/// and the stores.
pub async fn start(
    client: Client,
    settings: &SpeakerSettings,
    shared: Shared,
) -> Result<
    (
        Source<
            impl Stream<Item = DesiredUpdate> + Unpin + use<>,
            impl Stream<Item = Vec<SecretKey>> + Unpin + use<>,
            impl Stream<Item = HealthReport> + Unpin + use<>,
        >,
        Stores,
    ),
    String,
> {
    let bell = Arc::new(dirty::Bell::default());
    let counters = SourceCounters::default();
    counters.set_kubernetes();
    let ns = &settings.namespace;
    // Speaker Pods: the whole namespace is watched; translate applies METALLB_ML_LABELS.
    let options = settings.translate_options();
    let pod_ns = options.namespace.clone();
    let all = watcher::Config::default();
    let watch = watch::Watch {
        bell: Arc::clone(&bell),
        counters: counters.clone(),
    };
    let stores = Stores {
        pools: watch.reflect(
            Api::namespaced(client.clone(), ns),
            all.clone(),
            watch::ConfigMarker::default(),
        ),
        ads: watch.reflect(
            Api::namespaced(client.clone(), ns),
            all.clone(),
            watch::ConfigMarker::default(),
        ),
        services: watch.reflect(Api::all(client.clone()), all.clone(), watch::ServiceMarker),
        slices: watch.reflect(Api::all(client.clone()), all.clone(), watch::SliceMarker),
        nodes: watch.reflect(Api::all(client.clone()), all, watch::NodeMarker::default()),
        pods: watch.pods(Api::namespaced(client.clone(), &pod_ns)),
    };
    stores.wait_ready().await?;
    let mut builder = keyed::Builder {
        stores: stores.clone(),
        options,
        gossip_port: settings
            .memberlist
            .as_ref()
            .map_or(crate::settings::DEFAULT_ML_PORT, |m| m.bind_port),
        tracker: ConfigTracker::new(),
        state: Some(Api::namespaced(client.clone(), ns)),
        written: None,
        shared,
        counters,
        bell,
        slice_owner: Default::default(),
        slices_of: Default::default(),
        sent: Default::default(),
        seeds: Vec::new(),
        majority_guard: settings.majority_guard,
        expected_members: None,
        refused: false,
    };
    let initial = builder.initial();
    builder.write_state().await;
    info!(
        event = "k8s_synced",
        services = initial.services.len(),
        seeds = initial.seeds.len(),
        "every store listed; first desired state built"
    );
    let counters = builder.counters.clone();
    let (desired_tx, desired_rx) = mpsc::channel(4);
    tokio::spawn(builder.run(desired_tx));

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

/// The speaker Pods' store alone, filled as [`start`] fills it: watched where the role
/// allows it, listed every 10 s where it may only list (MetalLB's). Returns once it has
/// listed. For tests.
pub async fn speaker_pods(api: Api<Pod>, counters: SourceCounters) -> Store<Pod> {
    let watch = watch::Watch {
        bell: Arc::new(dirty::Bell::default()),
        counters,
    };
    let pods = watch.pods(api);
    let _ = pods.wait_until_ready().await;
    pods
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
        assert_eq!(
            web.nodes.as_deref(),
            Some(&["a".to_string(), "b".to_string()].into())
        );
        assert_eq!(web.interfaces, None);
        assert!(!web.health_checked && web.node_selector.is_empty());
        let eth = desired.service("ns/eth").unwrap();
        assert_eq!(eth.interfaces, Some(["eth0".to_string()].into()));
        // A rule that says nobody announces is an empty candidate set, never "any node".
        assert_eq!(
            desired.service("ns/nobody").unwrap().nodes.as_deref(),
            Some(&Default::default())
        );
        // Peers at the gossip port, each once, this node's own left out.
        assert_eq!(desired.seeds, ["198.18.0.12:7946", "198.18.0.13:7946"]);
        assert_eq!(desired.expected_members, None);
    }
}
