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
