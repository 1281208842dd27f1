//! The controller's allocation path with no cluster: a pool and N Services that already
//! hold their IPs (what a new leader lists), through the sans-IO [`AllocatorCore`] alone.
//!
//! Prints, for each N, the start (the Services listed until the first writes are asked
//! for) and the cost of one event: a new Service allocated (its watch event until its status
//! write is asked for), that write's answer and its echo from the watch, a Service changed in
//! a way allocation ignores (a label), and a Service deleted (which makes MetalLB's
//! controller, and so this one, look at every Service again: O(N) by design). Run:
//!
//! ```text
//! cargo run --release -p vigil-controller --example controller_path [N ...]
//! ```

use k8s_openapi::api::core::v1::Service;
use serde_json::json;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vigil_controller::core::{AllocatorCore, Write, WriteId, WriteResult};
use vigil_metallb::crd::IPAddressPool;

/// Events timed per kind; the mean is printed.
const EVENTS: usize = 200;
/// The pool: 198.18.0.0/15 holds every N this bench is run with.
const POOL: &str = "198.18.0.0/15";
const NS: &str = "bench";

fn pool() -> IPAddressPool {
    serde_json::from_value(json!({
        "metadata": {"namespace": "metallb-system", "name": "bench", "uid": "uid-pool",
                     "resourceVersion": "1"},
        "spec": {"addresses": [POOL]},
    }))
    .expect("pool")
}

/// The `i`-th IP of the pool.
fn nth_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + u32::try_from(i).expect("u32"))
}

/// LoadBalancer Service `name` at version `rv`, with `labels`, holding `ip` if given.
fn service(name: &str, rv: u64, labels: &[(&str, &str)], ip: Option<Ipv4Addr>) -> Arc<Service> {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let status = match ip {
        Some(ip) => json!({"loadBalancer": {"ingress": [{"ip": ip.to_string()}]}}),
        None => json!({}),
    };
    let annotations = match ip {
        Some(_) => json!({"metallb.io/ip-allocated-from-pool": "bench"}),
        None => json!({}),
    };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"namespace": NS, "name": name, "uid": format!("uid-{name}"),
                         "resourceVersion": rv.to_string(), "labels": labels,
                         "annotations": annotations},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10",
                     "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack",
                     "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": status,
        }))
        .expect("service"),
    )
}

/// Every write the core asks for, each answered as stored (Services at `rv`), with the
/// Service writes' objects returned.
fn answer_all(core: &mut AllocatorCore, rv: &mut u64) -> Vec<Service> {
    let mut written = Vec::new();
    while let Some(write) = core.poll_write() {
        *rv += 1;
        let stored = WriteResult::Written {
            resource_version: Some(rv.to_string()),
            uid: None,
        };
        match write {
            Write::ServiceStatus(svc) => {
                let key = format!("{NS}/{}", svc.metadata.name.clone().unwrap_or_default());
                let mut svc = *svc;
                svc.metadata.resource_version = Some(rv.to_string());
                core.handle_written(&WriteId::Service(key), stored);
                written.push(svc);
            }
            Write::PoolStatus { name, .. } => core.handle_written(&WriteId::Pool(name), stored),
            Write::Event { .. } => {}
        }
    }
    written
}

fn per_event(total: Duration) -> String {
    format!("{:.1} µs", total.as_secs_f64() * 1e6 / EVENTS as f64)
}

fn run(n: usize) {
    let mut rv = 10;
    let services: Vec<Arc<Service>> = (0..n)
        .map(|i| service(&format!("svc-{i}"), 2, &[], Some(nth_ip(i))))
        .collect();
    let started = Instant::now();
    let mut core = AllocatorCore::new(None);
    core.handle_config(
        [pool()],
        BTreeMap::from([(NS.to_string(), BTreeMap::new())]),
    );
    core.handle_services_listed(services);
    let first = core.poll_write().is_some();
    let start = started.elapsed();
    answer_all(&mut core, &mut rv);

    // A new Service: its event until its status write is asked for; then the write's answer
    // and the watch's echo of it.
    let (mut allocate, mut echo) = (Duration::ZERO, Duration::ZERO);
    for k in 0..EVENTS {
        let svc = service(&format!("new-{k}"), rv, &[], None);
        let t = Instant::now();
        core.handle_service(svc);
        let asked = core.poll_write();
        allocate += t.elapsed();
        let Some(Write::ServiceStatus(svc)) = asked else {
            panic!("new-{k}: no status write asked for: {asked:?}");
        };
        rv += 1;
        let mut svc = *svc;
        svc.metadata.resource_version = Some(rv.to_string());
        let t = Instant::now();
        core.handle_written(
            &WriteId::Service(format!("{NS}/new-{k}")),
            WriteResult::Written {
                resource_version: Some(rv.to_string()),
                uid: None,
            },
        );
        core.handle_service(Arc::new(svc));
        answer_all(&mut core, &mut rv);
        echo += t.elapsed();
    }

    // A label changed: nothing to allocate.
    let mut relabel = Duration::ZERO;
    for k in 0..EVENTS {
        rv += 1;
        let svc = service(&format!("svc-{k}"), rv, &[("k", "v")], Some(nth_ip(k)));
        let t = Instant::now();
        core.handle_service(svc);
        answer_all(&mut core, &mut rv);
        relabel += t.elapsed();
    }

    // Deleted: its IP back, every Service looked at again.
    let mut delete = Duration::ZERO;
    for k in 0..EVENTS {
        let t = Instant::now();
        core.handle_service_deleted(&format!("{NS}/new-{k}"), Some(&format!("uid-new-{k}")));
        answer_all(&mut core, &mut rv);
        delete += t.elapsed();
    }
    println!(
        "{n:>6} Services: start {:>8.1} ms (first write asked: {first}); per event: \
         new Service to its write {:>9}, write answered + echo {:>9}, label changed {:>9}, \
         deleted {:>9}",
        start.as_secs_f64() * 1e3,
        per_event(allocate),
        per_event(echo),
        per_event(relabel),
        per_event(delete),
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a Service count"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 5000, 20000]
    } else {
        sizes
    };
    for n in sizes {
        run(n);
    }
}
