//! ServiceL2Status after a node's loss (issue 23): a lost node cannot delete its own statuses,
//! so the survivors do (`vigil_k8s::sink::sweep`), and `kubectl get servicel2statuses` names one
//! announcing node per Service again, never the lost one; when the node comes back it writes
//! what it announces again.
//!
//! A real kube-apiserver and three `vigil speaker`s (see `k8s_support`), four `Cluster`
//! Services with ready endpoints everywhere and one `Local` Service whose only endpoint is on
//! the node that is lost (nobody takes it over: its status must go all the same). The lost
//! node's host loses its link (which also cuts it off from the API server). Objects are
//! counted; the time until the statuses were right is printed, not asserted.
//!
//! Root and the Go programs are needed (skips otherwise; fails under `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`).

mod k8s_support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use vigil_kubelab::cluster::{Cluster as LabCluster, LbService};
use vigil_kubelab::metallb::{L2Status, METALLB_NAMESPACE, l2_statuses};

use k8s_support::{Cluster, Mode, SERVICE_NAMESPACE, SETTLE, Svc, WEB4, WEB6, pool_and_ad};

const WEB: [IpAddr; 2] = [IpAddr::V4(WEB4), IpAddr::V6(WEB6)];
const S1: [IpAddr; 1] = [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 201))];
const S2: [IpAddr; 1] = [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 202))];
const S3: [IpAddr; 1] = [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 203))];
const LOCAL: [IpAddr; 1] = [IpAddr::V4(Ipv4Addr::new(198, 18, 0, 204))];

/// The `Cluster` Services: name and ingress IPs (the first is the election key).
const CLUSTER_SERVICES: [(&str, &[IpAddr]); 4] =
    [("web", &WEB), ("s1", &S1), ("s2", &S2), ("s3", &S3)];

/// The announcing nodes per Service of the tests' namespace.
fn by_service(all: &[L2Status]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in all
        .iter()
        .filter(|s| s.service_namespace == SERVICE_NAMESPACE)
    {
        out.entry(s.service_name.clone())
            .or_default()
            .push(s.node.clone());
    }
    for nodes in out.values_mut() {
        nodes.sort();
    }
    out
}

/// Lists the statuses every 50 ms until `done` accepts them or [`SETTLE`] passes; the last
/// list and how long it took.
fn wait_statuses(
    c: &Cluster,
    done: impl Fn(&BTreeMap<String, Vec<String>>) -> bool + Sync,
) -> (BTreeMap<String, Vec<String>>, Duration) {
    let start = Instant::now();
    c.block_on(async {
        loop {
            let listed = l2_statuses(c.client(), METALLB_NAMESPACE)
                .await
                .unwrap_or_default();
            let seen = by_service(&listed);
            if done(&seen) || start.elapsed() > SETTLE {
                break (seen, start.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// What the statuses must say: each `Cluster` Service announced by the node MetalLB's election
/// ranks first among `live`, the `Local` one by `local_owner` (or by nobody).
fn expected(live: &[&str], local_owner: Option<&str>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = CLUSTER_SERVICES
        .iter()
        .map(|(name, ips)| (name.to_string(), vec![Cluster::first(live, ips[0])]))
        .collect();
    if let Some(node) = local_owner {
        out.insert("local".into(), vec![node.to_string()]);
    }
    out
}

#[test]
fn a_lost_nodes_statuses_are_removed_by_the_survivors_and_written_again_when_it_returns() {
    const TEST: &str =
        "a_lost_nodes_statuses_are_removed_by_the_survivors_and_written_again_when_it_returns";
    let started = Instant::now();
    let services: Vec<Svc<'_>> = CLUSTER_SERVICES
        .iter()
        .map(|(name, ips)| Svc { name, ips })
        .collect();
    let Some(mut c) = Cluster::new(TEST, "vkl-lost", &[], &pool_and_ad(), &services) else {
        return;
    };
    let all: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let lost = Cluster::first(&all, IpAddr::V4(WEB4));
    LabCluster::add_service(
        &c,
        &LbService::new(SERVICE_NAMESPACE, "local")
            .endpoint(IpAddr::V4(Ipv4Addr::new(198, 18, 1, 50)), &lost)
            .ingress(&LOCAL)
            .local(),
    );
    c.start_all(Mode::Kubernetes);
    c.assert_only(&format!("{TEST}: settled"), &WEB, &lost);

    let before = expected(&all, Some(&lost));
    let (seen, _) = wait_statuses(&c, |s| *s == before);
    assert_eq!(
        seen,
        before,
        "{TEST}: one status per Service before\n{}",
        c.logs()
    );
    let naming_lost = seen.values().flatten().filter(|n| **n == lost).count();

    // The host is lost: the survivors take its Services and remove its statuses.
    c.set_link(&lost, false);
    let survivors: Vec<&str> = all.iter().copied().filter(|n| *n != lost).collect();
    let after = expected(&survivors, None);
    let (seen, took) = wait_statuses(&c, |s| *s == after);
    assert_eq!(
        seen,
        after,
        "{TEST}: after {lost} was lost, one status per Cluster Service from a survivor, none \
         for the Local one, none naming {lost}\n{}",
        c.logs()
    );
    let swept: usize = c
        .daemons
        .iter()
        .filter(|d| d.node != lost)
        .map(|d| {
            d.log_text()
                .lines()
                .filter(|l| {
                    l.contains("\"event\":\"l2status_swept\"")
                        && l.contains(&format!("\"node\":\"{lost}\""))
                })
                .count()
        })
        .sum();
    assert!(
        swept >= 1,
        "{TEST}: no survivor logged a sweep of {lost}\n{}",
        c.logs()
    );
    eprintln!(
        "{TEST}: {lost} lost: its {naming_lost} statuses gone and {} Services announced by \
         survivors {} ms after the link went down (listed every 50 ms); {swept} sweep(s) logged",
        after.len(),
        took.as_millis()
    );

    // Back: it takes its Services again and writes their statuses; one per Service.
    c.set_link(&lost, true);
    c.assert_only(&format!("{TEST}: {lost} back"), &WEB, &lost);
    let (seen, _) = wait_statuses(&c, |s| *s == before);
    assert_eq!(
        seen,
        before,
        "{TEST}: one status per Service once {lost} is back\n{}",
        c.logs()
    );
    for d in &mut c.daemons {
        d.check_running();
        assert!(d.terminate(), "{} stops on SIGTERM", d.node);
    }
    eprintln!("{TEST}: total {:?}", started.elapsed());
}
