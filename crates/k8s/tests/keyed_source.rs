//! The keyed source against the whole translation: random watch events (Services created,
//! changed and deleted; slices created, flipped, moved to another Service and deleted; Nodes
//! excluded, unavailable, or only heartbeating) through the keyed builder, and after every
//! one the keyed state equals a whole translation of the stores, and the full check counts
//! no difference.

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use vigil_k8s::source::KeyedBench;
use vigil_k8s::translate::Options;

const NODES: usize = 6;

fn node(i: usize, excluded: bool, unavailable: bool, beat: u64) -> Node {
    let mut labels = json!({"kubernetes.io/hostname": format!("n{i}")});
    if excluded {
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = json!("");
    }
    serde_json::from_value(json!({
        "metadata": {"name": format!("n{i}"), "labels": labels},
        "status": {"conditions": [
            {"type": "NetworkUnavailable", "status": if unavailable { "True" } else { "False" }},
            {"type": "Ready", "status": "True", "lastHeartbeatTime": format!("2026-12-06T00:00:{:02}Z", beat % 60)}
        ]}
    }))
    .unwrap()
}

fn service(i: usize, ip: usize, local: bool) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": format!("s{i}")},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": if local { "Local" } else { "Cluster" }},
        "status": {"loadBalancer": {"ingress": [{"ip": format!("198.18.0.{}", ip % 200 + 1)}]}}
    }))
    .unwrap()
}

fn slice(name: usize, owner: usize, ready: bool, node: usize) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": format!("sl{name}"),
            "labels": {"kubernetes.io/service-name": format!("s{owner}")}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": format!("n{node}"), "conditions": {"ready": ready}}]
    }))
    .unwrap()
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

#[test]
fn keyed_state_equals_a_whole_translation_after_every_event() {
    let pool = serde_json::from_value(json!({
        "metadata": {"namespace": "metallb-system", "name": "p"},
        "spec": {"addresses": ["198.18.0.0/24"]}
    }))
    .unwrap();
    let ad = serde_json::from_value(json!({
        "metadata": {"namespace": "metallb-system", "name": "a"},
        "spec": {"ipAddressPools": ["p"]}
    }))
    .unwrap();
    let options = Options {
        node_name: "n0".into(),
        namespace: "metallb-system".into(),
        ..Options::default()
    };
    let (mut bench, initial) = KeyedBench::new(
        options,
        vec![pool],
        vec![ad],
        (0..NODES).map(|i| node(i, false, false, 0)).collect(),
        (0..10).map(|i| service(i, i, i % 3 == 0)).collect(),
        (0..10).map(|i| slice(i, i, true, i % NODES)).collect(),
        Vec::new(),
    );
    assert_eq!(initial.services.len(), 10);
    let mut rng = Rng(7);
    let mut slices: Vec<Option<EndpointSlice>> = (0..10)
        .map(|i| Some(slice(i, i, true, i % NODES)))
        .collect();
    let mut services: Vec<Option<Service>> =
        (0..10).map(|i| Some(service(i, i, i % 3 == 0))).collect();
    slices.resize(16, None);
    services.resize(14, None);
    for step in 0..600 {
        match rng.below(7) {
            0 => {
                let i = rng.below(services.len());
                let s = service(i, rng.below(40), rng.below(2) == 0);
                services[i] = Some(s.clone());
                bench.apply_service(s);
            }
            1 => {
                let i = rng.below(services.len());
                if let Some(s) = services[i].take() {
                    bench.delete_service(s);
                }
            }
            2 | 3 => {
                let i = rng.below(slices.len());
                let owner = rng.below(services.len());
                let s = slice(i, owner, rng.below(3) != 0, rng.below(NODES));
                slices[i] = Some(s.clone());
                bench.apply_slice(s);
            }
            4 => {
                let i = rng.below(slices.len());
                if let Some(s) = slices[i].take() {
                    bench.delete_slice(s);
                }
            }
            5 => {
                let n = node(rng.below(NODES), rng.below(3) == 0, rng.below(4) == 0, 0);
                bench.apply_node(n);
            }
            _ => {
                // A heartbeat: nothing the translation reads.
                let beat = 1 + rng.below(50) as u64;
                let i = rng.below(NODES);
                let before = bench.keyed_state();
                let changes = bench.apply_node(node(i, false, false, beat));
                if changes.is_empty() {
                    assert_eq!(bench.keyed_state(), before);
                }
            }
        }
        let mut whole = bench.whole_snapshot().services;
        whole.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(bench.keyed_state(), whole, "step {step}");
        assert_eq!(bench.check(), 0, "step {step}");
    }
}

/// The speaker Pods against a real API server (vigil-kubelab: root and vigil-testenv, else
/// skipped): a speaker whose role may watch Pods follows them by watch and lists them once,
/// one whose role may only list them (MetalLB's `pod-lister`) lists them again every 10 s.
/// Counted in the API server's own request counter, not timed.
#[test]
fn speaker_pods_are_watched_where_the_role_allows_and_listed_where_not() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use std::time::{Duration, Instant};
    use vigil_kubelab::{
        ControlPlaneConfig, KubeLab, StaticToken, TestPod, apply_yaml, create_pod, ensure_namespace,
    };
    use vigil_speaker::observe::SourceCounters;

    const TEST: &str = "keyed_source_pods";
    const NS: &str = "metallb-system";
    let lister = StaticToken::service_account(NS, "speaker", "pod-lister-token");
    let config = ControlPlaneConfig {
        tokens: vec![lister.clone()],
        ..ControlPlaneConfig::default()
    };
    let Some(lab) = KubeLab::start("kspods", TEST, config) else {
        return;
    };
    let admin = lab.cp().client().expect("admin client");
    let listing = lab
        .cp()
        .client_with_token(&lister.token)
        .expect("token client");
    let role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: pod-lister, namespace: {NS}}}\n\
         rules: [{{apiGroups: [\"\"], resources: [pods], verbs: [list, get]}}]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: pod-lister, namespace: {NS}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-lister}}\n\
         subjects: [{{kind: ServiceAccount, name: speaker, namespace: {NS}}}]\n"
    );
    /// LIST requests on Pods the API server has served so far.
    async fn pod_lists(admin: &kube::Client) -> f64 {
        let request = kube::core::Request::new("/metrics")
            .list(&Default::default())
            .expect("request");
        let text = admin.request_text(request).await.expect("/metrics");
        text.lines()
            .filter(|l| {
                l.starts_with("apiserver_request_total{")
                    && l.contains(r#"resource="pods""#)
                    && l.contains(r#"verb="LIST""#)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
    /// Waits (bounded) until `store` holds `n` Pods.
    async fn holds(store: &kube::runtime::reflector::Store<Pod>, n: usize) -> bool {
        let limit = Instant::now() + Duration::from_secs(30);
        while store.state().len() != n && Instant::now() < limit {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        store.state().len() == n
    }
    lab.cp().block_on(async move {
        ensure_namespace(&admin, NS).await.expect("namespace");
        apply_yaml(&admin, "pod-lister", &role).await.expect("role");
        for name in ["speaker-a", "speaker-b"] {
            let pod = TestPod::new(NS, name).label("app", "metallb");
            create_pod(&admin, &pod).await.expect("pod");
        }
        // One more Pod while each store runs, then a window longer than the list period.
        let mut seen = Vec::new();
        for (who, client) in [("watch", admin.clone()), ("list", listing)] {
            let before = pod_lists(&admin).await;
            let store = vigil_k8s::source::speaker_pods(
                Api::namespaced(client, NS),
                SourceCounters::default(),
            )
            .await;
            assert!(
                holds(&store, seen.len() + 2).await,
                "{who}: the Pods listed"
            );
            let pod = TestPod::new(NS, &format!("speaker-{who}")).label("app", "metallb");
            create_pod(&admin, &pod).await.expect("pod");
            seen.push(who);
            assert!(
                holds(&store, seen.len() + 2).await,
                "{who}: the new Pod seen"
            );
            tokio::time::sleep(Duration::from_secs(11)).await;
            let lists = pod_lists(&admin).await - before;
            println!("{TEST}: {who}: {lists} Pod lists");
            if who == "watch" {
                assert_eq!(lists, 1.0, "watched: listed once");
            } else {
                assert!(lists >= 2.0, "list only: listed again ({lists})");
            }
            drop(store);
        }
    });
}
