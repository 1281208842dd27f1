//! The Kubernetes speaker path with no cluster: synthetic stores of N Services (one
//! EndpointSlice each) and 100 Nodes, through the keyed source and the speaker core.
//!
//! Prints, for each N, the time of the initial sync (stores listed → first election done)
//! and the cost of one event: a Service changed, a slice changed, a Node heartbeat, a member
//! lost; then the same events through the whole-snapshot path the source had before it was
//! keyed (every store cloned, every Service translated scanning every slice, the core given
//! the whole state). Also, for each N: Services arriving one by one into an empty cluster
//! (the first sync's shape: a Service, its address, its slice), the status rebuild the runner
//! does at most every 200 ms, and the resident memory per Service (run one N per process for
//! that figure: memory freed by an earlier N is reused). Run:
//!
//! ```text
//! cargo run --release -p vigil-k8s --example speaker_path [--members=M] [N ...]
//! ```

use cap::Cap;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use std::alloc::System;
use std::time::{Duration, Instant};
use vigil_k8s::source::KeyedBench;
use vigil_k8s::translate::Options;
use vigil_speaker::core::{Member, MemberEventKind, MemberState, SpeakerCore};
use vigil_speaker::model::{DesiredUpdate, ServiceChanges, StaticSettings};

const NODES: usize = 100;

/// The system allocator, counting the bytes live: memory per Service without the noise of
/// pages the allocator keeps.
#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Bytes live on the heap now.
fn live() -> isize {
    ALLOCATOR.allocated() as isize
}

const NS: &str = "bench";

fn node_name(i: usize) -> String {
    format!("node-{i:03}")
}

/// A Node as the API server shows a kubelet's: annotations, capacity, system info, ten
/// images and five conditions beside the fields the speaker reads.
fn node(i: usize, heartbeat: u64) -> Node {
    let name = node_name(i);
    let beat = format!(
        "2026-12-06T00:{:02}:{:02}Z",
        heartbeat / 60 % 60,
        heartbeat % 60
    );
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "lastHeartbeatTime": beat,
            "lastTransitionTime": "2026-12-06T00:00:00Z", "reason": reason,
            "message": format!("kubelet reports {reason}")})
    };
    let images: Vec<_> = (0..10)
        .map(|k| json!({"names": [format!("registry.example/team/image-{k}@sha256:{:064x}", k), format!("registry.example/team/image-{k}:v1.{k}")], "sizeBytes": 10_000_000 + k}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "resourceVersion": format!("{}", 1000 + heartbeat), "creationTimestamp": "2026-12-06T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}},
        "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")],
            "providerID": format!("kind://docker/bench/{name}")},
        "status": {
            "addresses": [{"type": "InternalIP", "address": format!("198.19.{}.{}", i / 250, i % 250 + 1)},
                {"type": "Hostname", "address": name}],
            "conditions": [condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                condition("Ready", "True", "KubeletReady")],
            "capacity": {"cpu": "2", "ephemeral-storage": "100Gi", "memory": "4Gi", "pods": "110"},
            "allocatable": {"cpu": "2", "ephemeral-storage": "100Gi", "memory": "4Gi", "pods": "110"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {"architecture": "amd64", "bootID": "b", "containerRuntimeVersion": "containerd://2.1.1",
                "kernelVersion": "6.12.0", "kubeProxyVersion": "", "kubeletVersion": "v1.33.1",
                "machineID": "m", "operatingSystem": "linux", "osImage": "Debian GNU/Linux 12", "systemUUID": "s"}
        }
    }))
    .unwrap()
}

fn vip(i: usize) -> String {
    format!("198.18.{}.{}", i / 250, i % 250 + 1)
}

/// A Service as the API server shows one a client created: uid, ports, selector, cluster
/// IPs and the defaults it fills in.
fn service(i: usize, ip: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": format!("svc-{i}"),
            "uid": format!("10000000-0000-0000-0000-{i:012}"), "resourceVersion": format!("{}", 5000 + i),
            "creationTimestamp": "2026-12-06T00:00:00Z", "labels": {"app": format!("svc-{i}")}},
        "spec": {"type": "LoadBalancer",
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30000 + i % 2000, "protocol": "TCP"}],
            "selector": {"app": format!("svc-{i}")},
            "clusterIP": format!("10.96.{}.{}", i / 250, i % 250 + 1),
            "clusterIPs": [format!("10.96.{}.{}", i / 250, i % 250 + 1)],
            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
            "allocateLoadBalancerNodePorts": true, "internalTrafficPolicy": "Cluster",
            "externalTrafficPolicy": if i.is_multiple_of(10) { "Local" } else { "Cluster" }},
        "status": {"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "VIP"}]}}
    }))
    .unwrap()
}

/// The Service's slice as the EndpointSlice controller writes it: two endpoints with their
/// Pods, owner, labels and ports.
fn slice(i: usize, ready: bool) -> EndpointSlice {
    let endpoint = |k: usize| {
        json!({"addresses": [format!("10.244.{}.{}", (i + k) % NODES, i % 250 + 1)],
            "nodeName": node_name((i + k) % NODES),
            "conditions": {"ready": ready, "serving": ready, "terminating": false},
            "targetRef": {"kind": "Pod", "namespace": NS, "name": format!("svc-{i}-pod-{k}"),
                "uid": format!("20000000-0000-0000-{k:04}-{i:012}")}})
    };
    serde_json::from_value(json!({
        "metadata": {"namespace": NS, "name": format!("svc-{i}-x1"), "generateName": format!("svc-{i}-"),
            "uid": format!("30000000-0000-0000-0000-{i:012}"), "resourceVersion": format!("{}", 9000 + i),
            "creationTimestamp": "2026-12-06T00:00:00Z",
            "labels": {"kubernetes.io/service-name": format!("svc-{i}"),
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                "app": format!("svc-{i}")},
            "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-06T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": format!("svc-{i}"),
                "uid": format!("10000000-0000-0000-0000-{i:012}"), "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "endpoints": [endpoint(0), endpoint(1)],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    }))
    .unwrap()
}

fn settings(node: &str) -> StaticSettings {
    StaticSettings::new(node, "198.18.0.1:7946".parse().unwrap())
}

/// How many Nodes run a speaker (live gossip members): every one unless `--members=M`
/// (the Kubernetes bench runs 5 real speakers beside 100 Nodes).
static MEMBERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(NODES);

fn members(dead: Option<usize>) -> Vec<Member> {
    (0..MEMBERS.load(std::sync::atomic::Ordering::Relaxed))
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

/// This process's resident memory, KiB (`VmRSS`; 0 where /proc is not there).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// What the runner rebuilds for `/status` and `/metrics` (at most every 200 ms).
fn status_rebuild(core: &SpeakerCore) -> usize {
    let status = core.status();
    let changes = core.ownership_changes(Instant::now());
    let announced = core.announced();
    let configured = core.desired().vips();
    status.vips.len() + changes.len() + announced.len() + configured.len()
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

/// Services arriving one by one into a cluster with none, as in a first sync: each created
/// without an address, then given one, then its slice. Mean cost per Service over the first
/// and the last tenth, in microseconds.
fn arrival(n: usize) -> (f64, f64) {
    let empty = Objects {
        services: Vec::new(),
        slices: Vec::new(),
        ..objects(0)
    };
    let (mut bench, initial) = stores(empty);
    let mut core = SpeakerCore::new(&settings(&node_name(0)), initial, Instant::now());
    core.handle_first_join(Instant::now(), members(None));
    drain(&mut core);
    let tenth = (n / 10).max(1);
    let mut first = 0.0;
    let mut last = 0.0;
    for i in 0..n {
        let t = Instant::now();
        let mut bare = service(i, "");
        bare.status = None;
        let changes = bench.apply_service(bare);
        feed(&mut core, changes);
        let changes = bench.apply_service(service(i, &vip(i)));
        feed(&mut core, changes);
        let changes = bench.apply_slice(slice(i, true));
        feed(&mut core, changes);
        let us = t.elapsed().as_secs_f64() * 1e6;
        if i < tenth {
            first += us;
        } else if i >= n - tenth {
            last += us;
        }
    }
    assert_eq!(bench.check(), 0, "keyed state equals a whole translation");
    (first / tenth as f64, last / tenth as f64)
}

fn main() {
    for a in std::env::args().skip(1) {
        if let Some(m) = a.strip_prefix("--members=").and_then(|m| m.parse().ok()) {
            MEMBERS.store(
                usize::min(m, NODES).max(2),
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 5_000, 20_000]
    } else {
        sizes
    };
    let mut extra = Vec::new();
    println!(
        "| Services | path | initial sync | Service changed | slice changed | Node heartbeat | member lost |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|");
    for n in sizes {
        // Keyed: from stores listed to the first election done.
        let rss_start = rss_kib();
        let heap_start = live();
        let o = objects(n);
        let heap_objects = live() - heap_start;
        let t = Instant::now();
        let (mut bench, initial) = stores(o);
        let b = live();
        let copy = initial.clone();
        let initial_bytes = live() - b;
        drop(copy);
        let heap_source = live() - heap_start - initial_bytes;
        let mut core = SpeakerCore::new(&settings(&node_name(0)), initial, Instant::now());
        core.handle_first_join(Instant::now(), members(None));
        drain(&mut core);
        let sync = t.elapsed();
        let heap_core = live() - heap_start - heap_source;
        let rss = rss_kib().saturating_sub(rss_start);
        let check_us = mean_us(3, |_| assert_eq!(bench.check(), 0));
        let rebuild_us = mean_us(10, |_| {
            std::hint::black_box(status_rebuild(&core));
        });
        let owned = core.owned_vips().len();
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
            let gone = 1 + r % (MEMBERS.load(std::sync::atomic::Ordering::Relaxed) - 1);
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
        drop((bench, core));
        let per = |bytes: isize| bytes as f64 / 1024.0 / n as f64;
        let arrival = arrival(n);
        extra.push(format!(
            "| {n} | {:.2} | {:.2} / {:.2} | {:.2} | {rebuild_us:.0} µs ({owned} owned) | {check_us:.0} µs | {:.0} / {:.0} µs |",
            per(heap_objects),
            per(heap_source),
            per(heap_core),
            rss as f64 / n as f64,
            arrival.0,
            arrival.1,
        ));

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
    println!();
    println!(
        "| Services | objects as parsed, KiB per Service | heap: source / core, KiB per Service | RSS, KiB per Service | status rebuild | full check | arrival per Service, first / last tenth |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for line in extra {
        println!("{line}");
    }
}
