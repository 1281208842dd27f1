//! Runs every fixture under `tests/vectors/k8s/<case>/`: the objects of each step
//! (`objects.yaml`, then `objects.2.yaml`, ...) go through MetalLB's configuration handling
//! and translation once per node, as each speaker would see them, and every node's decisions
//! are compared with `expected.yaml`, written by reasoning from MetalLB's code (each file
//! cites the functions it follows).
//!
//! A step may carry one extra document, `kind: Fixture`, with the speaker settings and the
//! gossip view: `members` (default: every Node), `lbClass`, `ignoreExcludeLb`, `namespace`
//! (default `metallb-system`), `mlLabels` (default `app=metallb,component=speaker`).

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use vigil_metallb::crd::{IPAddressPool, L2Advertisement};
use vigil_metallb::selector::Selector;
use vigil_metallb::{Cluster, Config, ConfigTracker, Interfaces, Options, translate};

mod election;

#[derive(Default)]
struct Objects {
    pools: Vec<IPAddressPool>,
    ads: Vec<L2Advertisement>,
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    fixture: FixtureDoc,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct FixtureDoc {
    members: Option<Vec<String>>,
    lb_class: Option<String>,
    ignore_exclude_lb: bool,
    namespace: Option<String>,
    ml_labels: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Expected {
    steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Step {
    config: ConfigResult,
    #[serde(default)]
    config_by_node: BTreeMap<String, ConfigResult>,
    #[serde(default)]
    services: BTreeMap<String, ServiceResult>,
    peers: Option<Vec<IpAddr>>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ConfigResult {
    result: String,
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServiceResult {
    /// Nodes that announce the service's IPs.
    announcers: Option<Vec<String>>,
    /// The eligible set every node computes.
    eligible: Option<Vec<String>>,
    /// The announcers' interfaces: `all` or a list.
    interfaces: Option<serde_norway::Value>,
    /// The VIPs (normalised) in order.
    vips: Option<Vec<IpAddr>>,
    /// Why nobody announces (`NoServableEndpoint`, ...).
    nobody: Option<String>,
    /// Why the speaker ignores the service (`OtherClass`, ...).
    ignored: Option<String>,
}

fn load(path: &Path) -> Objects {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut objects = Objects::default();
    for doc in serde_norway::Deserializer::from_str(&text) {
        let value = serde_json::Value::deserialize(doc)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        let at = format!("{}: {kind}", path.display());
        match kind.as_str() {
            "IPAddressPool" => objects.pools.push(decode(value, &at)),
            "L2Advertisement" => objects.ads.push(decode(value, &at)),
            "Service" => objects.services.push(decode(value, &at)),
            "EndpointSlice" => objects.slices.push(decode(value, &at)),
            "Node" => objects.nodes.push(decode(value, &at)),
            "Pod" => objects.pods.push(decode(value, &at)),
            "Fixture" => objects.fixture = decode(value, &at),
            other => panic!("{}: unknown kind {other:?}", path.display()),
        }
    }
    objects
}

fn decode<T: serde::de::DeserializeOwned>(value: serde_json::Value, at: &str) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{at}: {e}"))
}

fn step_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![dir.join("objects.yaml")];
    for i in 2.. {
        let f = dir.join(format!("objects.{i}.yaml"));
        if !f.exists() {
            break;
        }
        files.push(f);
    }
    files
}

fn interfaces_value(i: &Interfaces) -> serde_norway::Value {
    match i {
        Interfaces::All => serde_norway::Value::String("all".into()),
        Interfaces::Only(set) => serde_norway::Value::Sequence(
            set.iter()
                .map(|s| serde_norway::Value::String(s.clone()))
                .collect(),
        ),
    }
}

/// Runs one fixture; returns the failures.
fn run(dir: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let expected: Expected = {
        let path = dir.join("expected.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let files = step_files(dir);
    assert_eq!(
        files.len(),
        expected.steps.len(),
        "{name}: one expected step per objects file"
    );
    let mut trackers: BTreeMap<String, ConfigTracker> = BTreeMap::new();
    let mut announced: BTreeMap<String, BTreeMap<String, Vec<IpAddr>>> = BTreeMap::new();
    let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    for (step_no, (file, want)) in files.iter().zip(&expected.steps).enumerate() {
        let objects = load(file);
        let mut fail = |msg: String| failures.push(format!("{name} step {}: {msg}", step_no + 1));
        let node_names: Vec<String> = objects
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let members = objects
            .fixture
            .members
            .clone()
            .unwrap_or_else(|| node_names.clone());
        let selector = Selector::parse(
            objects
                .fixture
                .ml_labels
                .as_deref()
                .unwrap_or("app=metallb,component=speaker"),
        )
        .unwrap();
        let cluster = Cluster {
            services: &objects.services,
            endpoint_slices: &objects.slices,
            nodes: &objects.nodes,
            pods: &objects.pods,
        };
        // Every node's decisions: service id -> (announces?, view of the service).
        let mut announcers: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut views = Vec::new();
        for node in &node_names {
            let tracker = trackers.entry(node.clone()).or_default();
            let parsed = Config::parse(&objects.pools, &objects.ads, &objects.nodes);
            tracker.reconcile(parsed, announced.get(node).unwrap_or(&BTreeMap::new()));
            let want_cfg = want
                .config_by_node
                .get(node)
                .unwrap_or(&want.config)
                .clone();
            let status = tracker.status(now.clone());
            if status.result.as_deref() != Some(want_cfg.result.as_str())
                || status.error_summary != want_cfg.message
            {
                fail(format!(
                    "node {node}: config {:?} {:?}, want {:?} {:?}",
                    status.result, status.error_summary, want_cfg.result, want_cfg.message
                ));
            }
            let mine = announced.entry(node.clone()).or_default();
            mine.clear();
            let Some(config) = tracker.config() else {
                continue;
            };
            let opts = Options {
                node_name: node.clone(),
                namespace: objects
                    .fixture
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "metallb-system".into()),
                lb_class: objects.fixture.lb_class.clone(),
                ignore_exclude_lb: objects.fixture.ignore_exclude_lb,
                speaker_selector: Some(selector.clone()),
            };
            let view = translate(config, &cluster, &opts);
            for svc in &view.services {
                let owner = election::owner(svc, members.iter().map(String::as_str));
                if owner.as_deref() == Some(node.as_str()) {
                    announcers
                        .entry(svc.id.clone())
                        .or_default()
                        .insert(node.clone());
                    mine.insert(svc.id.clone(), svc.vips.clone());
                }
            }
            // The running speaker decides through the speaker core, not `election`: it must
            // announce exactly the same (service, VIP) pairs.
            let by_core = core_announces(node, &view, &members);
            let by_metallb: BTreeSet<(String, IpAddr)> = mine
                .iter()
                .flat_map(|(id, vips)| vips.iter().map(move |v| (id.clone(), *v)))
                .collect();
            if by_core != by_metallb {
                fail(format!(
                    "node {node}: the speaker core announces {by_core:?}, MetalLB's election {by_metallb:?}"
                ));
            }
            views.push(view);
        }
        for (id, want_svc) in &want.services {
            if let Some(want_nodes) = &want_svc.announcers {
                let got = announcers.get(id).cloned().unwrap_or_default();
                let want_nodes: BTreeSet<String> = want_nodes.iter().cloned().collect();
                if got != want_nodes {
                    fail(format!("{id}: announced by {got:?}, want {want_nodes:?}"));
                }
            }
            for view in &views {
                let node = &view.node;
                let handled = view.services.iter().find(|s| &s.id == id);
                let ignored = view
                    .ignored
                    .iter()
                    .find(|(i, _)| i == id)
                    .map(|(_, why)| why);
                if let Some(want_why) = &want_svc.ignored {
                    let got = ignored.map(|w| format!("{w:?}"));
                    if got.as_deref().map(|g| g.split('(').next().unwrap_or(g)) != Some(want_why) {
                        fail(format!("{id} on {node}: ignored {got:?}, want {want_why}"));
                    }
                    continue;
                }
                let wants_view = want_svc.eligible.is_some()
                    || want_svc.nobody.is_some()
                    || want_svc.vips.is_some()
                    || want_svc.interfaces.is_some();
                if !wants_view {
                    continue;
                }
                let Some(svc) = handled else {
                    fail(format!("{id} on {node}: not handled ({ignored:?})"));
                    continue;
                };
                if let Some(want_eligible) = &want_svc.eligible {
                    let want_eligible: BTreeSet<String> = want_eligible.iter().cloned().collect();
                    if svc.eligible_nodes != want_eligible {
                        fail(format!(
                            "{id} on {node}: eligible {:?}, want {want_eligible:?}",
                            svc.eligible_nodes
                        ));
                    }
                }
                let got_nobody = svc.nobody.map(|n| format!("{n:?}"));
                if got_nobody != want_svc.nobody {
                    fail(format!(
                        "{id} on {node}: nobody {got_nobody:?}, want {:?}",
                        want_svc.nobody
                    ));
                }
                if let Some(vips) = &want_svc.vips
                    && &svc.vips != vips
                {
                    fail(format!(
                        "{id} on {node}: vips {:?}, want {vips:?}",
                        svc.vips
                    ));
                }
                let announces = announcers.get(id).is_some_and(|a| a.contains(node));
                if let Some(want_ifs) = &want_svc.interfaces
                    && announces
                    && &interfaces_value(&svc.interfaces) != want_ifs
                {
                    fail(format!(
                        "{id} on {node}: interfaces {:?}, want {want_ifs:?}",
                        svc.interfaces
                    ));
                }
            }
        }
        if let Some(want_peers) = &want.peers {
            for view in &views {
                let got: Vec<IpAddr> = view.peers.iter().map(|p| p.addr).collect();
                if &got != want_peers {
                    fail(format!(
                        "peers on {}: {got:?}, want {want_peers:?}",
                        view.node
                    ));
                }
            }
        }
    }
    failures
}

/// What the speaker core, fed the snapshot the Kubernetes source builds, announces on `node`
/// once it has joined with every member alive.
fn core_announces(
    node: &str,
    view: &vigil_metallb::NodeView,
    members: &[String],
) -> BTreeSet<(String, IpAddr)> {
    use std::time::Instant;
    use vigil_speaker::core::{Member, MemberState, SpeakerCore};
    use vigil_speaker::model::StaticSettings;
    let settings = StaticSettings::new(node, "198.18.0.1:7946".parse().unwrap());
    let now = Instant::now();
    let desired = vigil_k8s::source::desired_state(view, 7946);
    let mut core = SpeakerCore::new(&settings, desired, now);
    core.handle_first_join(
        now,
        members.iter().map(|m| Member {
            name: m.clone(),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state: MemberState::Alive,
            meta: Default::default(),
        }),
    );
    core.announced().into_iter().collect()
}

#[test]
fn every_fixture_matches_metallb() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/k8s");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("expected.yaml").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 20,
        "expected the fixture set, found {}",
        dirs.len()
    );
    let failures: Vec<String> = dirs.iter().flat_map(|d| run(d)).collect();
    println!("{} fixtures, {} failures", dirs.len(), failures.len());
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
