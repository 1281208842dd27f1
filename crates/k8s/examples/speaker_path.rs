//! The Kubernetes speaker path with no cluster: synthetic stores of N Services (one
//! EndpointSlice each) and 100 Nodes, through the keyed source and the speaker core.
//!
//! Prints, for each N, the time of the initial sync (stores listed → first election done)
//! and the cost of one event: a Service changed, a slice changed, a Node heartbeat, a member
//! lost; then the same events through the whole-snapshot path the source had before it was
//! keyed (every store cloned, every Service translated scanning every slice, the core given
//! the whole state). Run:
//!
//! ```text
//! cargo run --release -p vigil-k8s --example speaker_path [N ...]
//! ```

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use std::time::{Duration, Instant};
use vigil_k8s::source::KeyedBench;
use vigil_k8s::translate::Options;
use vigil_speaker::core::{Member, MemberEventKind, MemberState, SpeakerCore};
use vigil_speaker::model::{DesiredUpdate, ServiceChanges, StaticSettings};

const NODES: usize = 100;
const NS: &str = "bench";

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

fn node(i: usize, heartbeat: u64) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": node_name(i), "labels": {"kubernetes.io/hostname": node_name(i)}},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("198.19.{}.{}", i / 250, i % 250 + 1)}],
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": format!("2026-12-06T00:{:02}:{:02}Z", heartbeat / 60 % 60, heartbeat % 60)}]
        }
    }))
    .unwrap()
}

fn vip(i: usize) -> String {
    format!("198.18.{}.{}", i / 250, i % 250 + 1)
}

fn service(i: usize, ip: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": format!("svc-{i}")},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
            "externalTrafficPolicy": if i.is_multiple_of(10) { "Local" } else { "Cluster" }},
        "status": {"loadBalancer": {"ingress": [{"ip": ip}]}}
    }))
    .unwrap()
}

fn slice(i: usize, ready: bool) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": format!("svc-{i}-x1"),
            "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["10.0.0.1"], "nodeName": node_name(i % NODES), "conditions": {"ready": ready}},
            {"addresses": ["10.0.0.2"], "nodeName": node_name((i + 1) % NODES), "conditions": {"ready": ready}}
        ]
    }))
    .unwrap()
}

fn settings(node: &str) -> StaticSettings {
    StaticSettings::new(node, "198.18.0.1:7946".parse().unwrap())
}

fn members(dead: Option<usize>) -> Vec<Member> {
    (0..NODES)
        .map(|i| Member {
            name: node_name(i),
            addr: "198.18.0.1:7946".parse().unwrap(),
            state: if Some(i) == dead {
                MemberState::Dead
            } else {
                MemberState::Alive
            },
            meta: Default::default(),
        })
        .collect()
}

fn drain(core: &mut SpeakerCore) -> usize {
    std::iter::from_fn(|| core.poll_action()).count()
}

fn feed(core: &mut SpeakerCore, changes: ServiceChanges) {
    if !changes.is_empty() {
        core.handle_update(Instant::now(), DesiredUpdate::Changes(changes));
    }
    drain(core);
}

/// The objects of a cluster with `n` Services.
struct Objects {
    pools: Vec<vigil_k8s::crd::IPAddressPool>,
    ads: Vec<vigil_k8s::crd::L2Advertisement>,
    nodes: Vec<Node>,
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
}

fn objects(n: usize) -> Objects {
    let pool = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"namespace": "metallb-system", "name": "bench"},
        "spec": {"addresses": ["198.18.0.0/15"]}
    }))
    .unwrap();
    let ad = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
        "metadata": {"namespace": "metallb-system", "name": "bench"},
        "spec": {"ipAddressPools": ["bench"]}
    }))
    .unwrap();
    Objects {
        pools: vec![pool],
        ads: vec![ad],
        nodes: (0..NODES).map(|i| node(i, 0)).collect(),
        services: (0..n).map(|i| service(i, &vip(i))).collect(),
        slices: (0..n).map(|i| slice(i, true)).collect(),
    }
}

/// The stores listed once, and the first desired state.
fn stores(o: Objects) -> (KeyedBench, vigil_speaker::model::DesiredState) {
    let options = Options {
        node_name: node_name(0),
        namespace: "metallb-system".into(),
        ..Options::default()
    };
    KeyedBench::new(
        options,
        o.pools,
        o.ads,
        o.nodes,
        o.services,
        o.slices,
        Vec::new(),
    )
}

/// Mean time of `f` over `reps` runs, in microseconds.
fn mean_us(reps: usize, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    for r in 0..reps {
        f(r);
    }
    start.elapsed().as_secs_f64() * 1e6 / reps as f64
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 5_000, 20_000]
    } else {
        sizes
    };
    println!(
        "| Services | path | initial sync | Service changed | slice changed | Node heartbeat | member lost |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for n in sizes {
        // Keyed: from stores listed to the first election done.
        let o = objects(n);
        let t = Instant::now();
        let (mut bench, initial) = stores(o);
        let mut core = SpeakerCore::new(&settings(&node_name(0)), initial, Instant::now());
        core.handle_first_join(Instant::now(), members(None));
        drain(&mut core);
        let sync = t.elapsed();
        assert_eq!(bench.check(), 0);
        let reps = 500;
        let svc_us = mean_us(reps, |r| {
            let i = (r * 7919) % n;
            let ip = vip(n + 1 + r);
            let changes = bench.apply_service(service(i, &ip));
            assert_eq!(changes.upserts.len(), 1);
            feed(&mut core, changes);
        });
        let slice_us = mean_us(reps, |r| {
            let i = (r * 104_729) % n;
            let changes = bench.apply_slice(slice(i, r % 2 == 1));
            feed(&mut core, changes);
        });
        let node_us = mean_us(reps, |r| {
            let changes = bench.apply_node(node(r % NODES, r as u64 + 1));
            assert!(changes.is_empty(), "a heartbeat changes nothing");
            feed(&mut core, changes);
        });
        let mut lost_total = Duration::ZERO;
        let lost_reps = 20;
        for r in 0..lost_reps {
            let gone = 1 + r % (NODES - 1);
            let t = Instant::now();
            core.handle_members(
                Instant::now(),
                Some(MemberEventKind::Dead),
                members(Some(gone)),
            );
            drain(&mut core);
            lost_total += t.elapsed();
            core.handle_members(Instant::now(), Some(MemberEventKind::Join), members(None));
            drain(&mut core);
        }
        let lost_us = lost_total.as_secs_f64() * 1e6 / lost_reps as f64;
        assert_eq!(bench.check(), 0, "keyed state equals a whole translation");
        println!(
            "| {n} | keyed | {:.0} ms | {svc_us:.0} µs | {slice_us:.0} µs | {node_us:.1} µs | {lost_us:.0} µs |",
            sync.as_secs_f64() * 1e3
        );

        // Whole snapshots, as before: every event costs a snapshot and a whole election.
        let (mut bench, initial) = stores(objects(n));
        let mut core = SpeakerCore::new(&settings(&node_name(0)), initial, Instant::now());
        core.handle_first_join(Instant::now(), members(None));
        drain(&mut core);
        let reps = if n > 5_000 { 1 } else { 5 };
        let whole = |bench: &mut KeyedBench, core: &mut SpeakerCore| {
            let desired = bench.whole_snapshot();
            core.handle_desired(Instant::now(), desired);
            drain(core);
        };
        let t = Instant::now();
        whole(&mut bench, &mut core);
        let snapshot = t.elapsed();
        let svc_us = mean_us(reps, |r| {
            let _ = bench.apply_service(service(r, &vip(n + 1 + r)));
            whole(&mut bench, &mut core);
        });
        let slice_us = mean_us(reps, |r| {
            let _ = bench.apply_slice(slice(r, r % 2 == 1));
            whole(&mut bench, &mut core);
        });
        let node_us = mean_us(reps, |r| {
            let _ = bench.apply_node(node(r % NODES, r as u64 + 1));
            whole(&mut bench, &mut core);
        });
        println!(
            "| {n} | whole snapshot (before) | {:.0} ms per snapshot | {svc_us:.0} µs | {slice_us:.0} µs | {node_us:.0} µs | (full re-election) |",
            snapshot.as_secs_f64() * 1e3
        );
    }
}
