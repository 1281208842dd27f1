//! The keyed Kubernetes source at a few hundred Services against a real kube-apiserver
//! (issue 20): three `vigil speaker`s in the lab cluster (`vigil_kubelab::cluster`), 100
//! Services made before they start and 140 while they run (240: the lab's Service
//! cluster-IP range is a /24), then 30 deleted and 30 left without endpoints. Every speaker's keyed state must equal a whole translation (its
//! `vigil_k8s_keyed_state_differences_total` reads 0 after a check that ran once the changes
//! settled), and the ServiceL2Statuses must be exactly one per announced Service, from its
//! elected node: none missing, none extra. Root and the Go programs are needed (skips
//! otherwise, fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). No durations are
//! asserted: every wait is a bounded poll.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use vigil_kubelab::cluster::{
    Cluster, ClusterSpec, KEY_ACK_RBAC, LabProcess, LbService, pool_yaml,
};

const NS: &str = "keyed";
/// As many as the lab API server's Service cluster-IP range (a /24) holds, with room.
const SERVICES: usize = 240;
const BEFORE_START: usize = 100;
const DELETED: usize = 30;
const UNSERVED: usize = 30;
const METRICS_PORT: u16 = 9120;
const LIMIT: Duration = Duration::from_secs(60);

fn vip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(
        198,
        18,
        4 + (i / 250) as u8,
        (i % 250 + 1) as u8,
    ))
}

fn name(i: usize) -> String {
    format!("svc-{i}")
}

/// `/metrics` of the speaker at `ip`, parsed into `name{labels}` -> value.
fn scrape(c: &Cluster, ip: IpAddr) -> BTreeMap<String, f64> {
    let answer = c
        .scrape(
            c.lab.cp().ns(),
            SocketAddr::new(ip, METRICS_PORT),
            "/metrics",
        )
        .unwrap_or_else(|e| panic!("GET /metrics at {ip}: {e}"));
    answer
        .body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn logs(processes: &[LabProcess]) -> String {
    processes
        .iter()
        .map(|p| format!("--- {}\n{}", p.name(), p.log_tail(20)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn keyed_state_equals_a_whole_translation_at_240_services() {
    const TEST: &str = "keyed_state_equals_a_whole_translation_at_240_services";
    let started = Instant::now();
    let Some(c) = Cluster::start(TEST, "vk-key", &ClusterSpec::nodes(3)) else {
        return;
    };
    c.apply("key acknowledgement RBAC", KEY_ACK_RBAC);
    c.apply(
        "pool and L2Advertisement",
        &pool_yaml(&["198.18.4.0/23"], &["eth0"]),
    );
    c.namespace(NS);
    let nodes: Vec<String> = c.nodes().iter().map(|n| n.to_string()).collect();
    let add = |i: usize| {
        c.add_service(
            &LbService::new(NS, &name(i))
                .endpoints_on(&nodes, 10)
                .ingress(&[vip(i)]),
        );
    };
    (0..BEFORE_START).for_each(add);
    let args = vec![format!("--port={METRICS_PORT}")];
    let mut speakers: Vec<LabProcess> = (0..c.speakers.len())
        .map(|i| c.vigil_speaker(Path::new(env!("CARGO_BIN_EXE_vigil")), i, &args))
        .collect();
    (BEFORE_START..SERVICES).for_each(add);

    // 30 deleted, 30 more left with no endpoint (nobody announces them).
    let services: Api<Service> = Api::namespaced(c.client().clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(c.client().clone(), NS);
    c.block_on(async {
        for i in 0..DELETED {
            services
                .delete(&name(i), &DeleteParams::default())
                .await
                .expect("delete Service");
        }
        for i in DELETED..DELETED + UNSERVED {
            let list = slices
                .list(
                    &ListParams::default()
                        .labels(&format!("kubernetes.io/service-name={}", name(i))),
                )
                .await
                .expect("list slices");
            for s in list.items {
                let slice = s.metadata.name.unwrap_or_default();
                slices
                    .delete(&slice, &DeleteParams::default())
                    .await
                    .expect("delete slice");
            }
        }
    });
    println!(
        "{TEST}: {SERVICES} Services made, {DELETED} deleted, {UNSERVED} without endpoints, after {:?}",
        started.elapsed()
    );

    // One status per announced Service, from its elected node.
    let expected: BTreeSet<(String, String)> = (DELETED + UNSERVED..SERVICES)
        .map(|i| (name(i), c.first(vip(i))))
        .collect();
    let seen = |statuses: &[vigil_kubelab::metallb::L2Status]| -> Vec<(String, String)> {
        statuses
            .iter()
            .filter(|s| s.service_namespace == NS)
            .map(|s| (s.service_name.clone(), s.node.clone()))
            .collect()
    };
    let statuses = c.wait_l2_statuses(LIMIT, |statuses| {
        let seen = seen(statuses);
        seen.len() == expected.len() && seen.iter().cloned().collect::<BTreeSet<_>>() == expected
    });
    speakers.iter_mut().for_each(LabProcess::check_running);
    let seen = seen(&statuses);
    let seen_set: BTreeSet<(String, String)> = seen.iter().cloned().collect();
    let missing: Vec<_> = expected.difference(&seen_set).take(10).collect();
    let extra: Vec<_> = seen_set.difference(&expected).take(10).collect();
    assert!(
        seen.len() == expected.len() && missing.is_empty() && extra.is_empty(),
        "{TEST}: {} statuses for {} announced Services; missing {missing:?}, extra {extra:?}; logs:\n{}",
        seen.len(),
        expected.len(),
        logs(&speakers)
    );
    println!(
        "{TEST}: every ServiceL2Status right ({}) after {:?}",
        expected.len(),
        started.elapsed()
    );

    // A check after the changes settled, on every speaker: no difference.
    let checks = |m: &BTreeMap<String, f64>| {
        m.get("vigil_k8s_keyed_state_checks_total")
            .copied()
            .unwrap_or(0.0)
    };
    let ips: Vec<IpAddr> = c.speakers.iter().map(|s| s.ip).collect();
    let before: Vec<f64> = ips.iter().map(|ip| checks(&scrape(&c, *ip))).collect();
    // One more change, which changes no answer: a check follows it (after the watches settle
    // and the checks' spacing), whenever the last one ran. Without it, a check that ran just
    // before `before` was read would be the last for minutes.
    let touched = name(SERVICES - 1);
    c.block_on(async {
        let patch = serde_json::json!({"metadata": {"labels": {"vigil-test/touched": "1"}}});
        services
            .patch(&touched, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("label a Service");
    });
    let end = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let now: Vec<BTreeMap<String, f64>> = ips.iter().map(|ip| scrape(&c, *ip)).collect();
        let done = now.iter().zip(&before).all(|(m, b)| checks(m) > *b);
        if done || Instant::now() > end {
            break now;
        }
        speakers.iter_mut().for_each(LabProcess::check_running);
        std::thread::sleep(Duration::from_millis(500));
    };
    for ((m, b), node) in after.iter().zip(&before).zip(&nodes) {
        assert!(
            checks(m) > *b,
            "{TEST}: {node} ran no keyed-state check after the changes; logs:\n{}",
            logs(&speakers)
        );
        assert_eq!(
            m.get("vigil_k8s_keyed_state_differences_total").copied(),
            Some(0.0),
            "{TEST}: {node}'s keyed state differed from a whole translation; logs:\n{}",
            logs(&speakers)
        );
    }
    // Every watch ran without a failure: a cached kind that lost what kube's watcher needs
    // (an object's resourceVersion) fails each watch and relists, which still converges.
    for (p, node) in speakers.iter().zip(&nodes) {
        let failures: Vec<String> = p
            .log_text()
            .lines()
            .filter(|l| l.contains("\"k8s_watch_error\""))
            .take(3)
            .map(str::to_owned)
            .collect();
        assert!(
            failures.is_empty(),
            "{TEST}: {node}'s watches failed: {failures:#?}"
        );
    }
    println!(
        "{TEST}: keyed state equals a whole translation on {} speakers; total {:?}",
        nodes.len(),
        started.elapsed()
    );
}
