//! Failover of `vigil speaker` in Kubernetes mode (issue 13), end to end: a real kube-apiserver
//! (vigil-testenv), three lab hosts each running `vigil speaker` under MetalLB's speaker
//! ServiceAccount and RBAC, and a client in the lab asking ARP and NDP for a dual-stack
//! Service's VIPs (see `k8s_support` for the lab).
//!
//! - the owner's host loses its link, its speaker is SIGKILLed, its speaker is SIGTERMed: each
//!   time exactly the node MetalLB's election ranks next answers, for both VIPs, and the owner
//!   takes them back once it is back;
//! - the API server is stopped, then the owner's host is lost: the VIPs still move, and after
//!   the API server is back the answer and the ServiceL2Status stay right;
//! - the speakers' watches expire while they are cut off from the API server (etcd compacted
//!   past their resourceVersions): they see `410 Gone`, relist, withdraw what was deleted
//!   meanwhile and announce what was added, never from the stale cache;
//! - `#[ignore]`d: the failover figures of standalone and Kubernetes mode from one run on the
//!   same lab (`VIGIL_FIGURE_RUNS`, default 5).
//!
//! Root and the Go programs are needed (skips otherwise; fails under `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`). No duration is asserted: the outages the client saw are printed.

mod k8s_support;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use vigil_kubelab::cluster::CLIENT;
use vigil_kubelab::metallb::{L2Status, METALLB_NAMESPACE};
use vigil_netlab::prober::Kind;

use k8s_support::{
    API_SERVER, Cluster, Mode, Outage, Probe, SERVICE_NAMESPACE, SETTLE, Svc, WEB4, WEB6, ms,
    outage, pool_and_ad,
};

/// How a test fails the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Its host's cable is pulled (the bridge port goes down).
    HostLoss,
    /// Its vigil is frozen (SIGSTOP) until the trial ends: a hung or starved node.
    Freeze,
    /// Its vigil is SIGKILLed.
    Kill,
    /// Its vigil is SIGTERMed (a graceful handover).
    Term,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Self::HostLoss => "host loss",
            Self::Freeze => "freeze",
            Self::Kill => "SIGKILL",
            Self::Term => "SIGTERM",
        }
    }
}

/// One failure as the client saw it.
#[derive(Debug, Clone, Copy)]
struct Trial {
    arp: Outage,
    ndp: Outage,
}

const WEB: [IpAddr; 2] = [IpAddr::V4(WEB4), IpAddr::V6(WEB6)];

/// The lab with Service `web` on [`WEB`]; `None` when the test skips.
fn web_cluster(test: &str, tag: &str, apiserver_args: &[&str]) -> Option<Cluster> {
    web_cluster_of(test, tag, k8s_support::NODES, apiserver_args)
}

/// [`web_cluster`] with `nodes` speaker hosts.
fn web_cluster_of(test: &str, tag: &str, nodes: usize, apiserver_args: &[&str]) -> Option<Cluster> {
    let web = Svc {
        name: "web",
        ips: &WEB,
    };
    Cluster::with_nodes(test, tag, nodes, apiserver_args, &pool_and_ad(), &[web])
}

/// Fails `owner` with `fault` while the client probes both VIPs every 5 ms, waits until the
/// node ranked next answers alone for both, and returns that node and what the client saw.
fn fail(test: &str, c: &mut Cluster, fault: Fault, owner: &str) -> (String, Trial) {
    let rest: Vec<&str> = c.nodes().into_iter().filter(|n| *n != owner).collect();
    let next = Cluster::first(&rest, IpAddr::V4(WEB4));
    let next_mac = c.mac(&next).to_string();
    let probe = Probe::start(&c.ns(CLIENT), WEB4, Some(WEB6), Duration::from_millis(5));
    std::thread::sleep(Duration::from_millis(300));
    let fault_at = probe.now();
    let i = c.index(owner);
    match fault {
        Fault::HostLoss => c.set_link(owner, false),
        Fault::Freeze => c.daemons[i].freeze(true),
        Fault::Kill => c.daemons[i].kill(),
        Fault::Term => assert!(
            c.daemons[i].terminate(),
            "{test}: {owner} did not stop cleanly on SIGTERM; log ends:\n{}",
            c.daemons[i].log_tail(30)
        ),
    }
    let moved = vigil_netlab::poll(SETTLE, Duration::from_millis(20), || {
        probe.heard_since(Kind::Arp, &next_mac, fault_at)
            && probe.heard_since(Kind::Ndp, &next_mac, fault_at)
    });
    // A little longer, so that an old owner still answering would be seen.
    std::thread::sleep(Duration::from_millis(300));
    let recording = probe.finish();
    assert!(
        moved,
        "{test}: {}: {next} never answered for both VIPs after {owner} failed\n{}",
        fault.name(),
        c.logs()
    );
    // The new owner told the LAN itself (gratuitous ARP, unsolicited NA), not only answered.
    for kind in [Kind::Arp, Kind::Ndp] {
        assert!(
            recording.answers.iter().any(|a| a.kind == kind
                && a.gratuitous
                && a.at >= fault_at
                && a.mac.to_string() == next_mac),
            "{test}: {}: no unsolicited {} announcement from {next} after the fault",
            fault.name(),
            kind.name()
        );
    }
    let arp = outage(&recording, Kind::Arp, fault_at, &next_mac).expect("ARP answer from next");
    let ndp = outage(&recording, Kind::Ndp, fault_at, &next_mac).expect("NDP answer from next");
    c.assert_only(&format!("{test}: after {}", fault.name()), &WEB, &next);
    (next, Trial { arp, ndp })
}

/// Brings `owner` back after `fault` (its cable, or its vigil in `mode`) and waits until it
/// answers alone again (there is no hold-down: MetalLB's default).
fn restore(test: &str, c: &mut Cluster, mode: Mode, fault: Fault, owner: &str) {
    match fault {
        Fault::HostLoss => c.set_link(owner, true),
        Fault::Freeze => c.daemons[c.index(owner)].freeze(false),
        Fault::Kill | Fault::Term => c.restart(owner, mode),
    }
    c.assert_only(
        &format!("{test}: {owner} back after {}", fault.name()),
        &WEB,
        owner,
    );
}

fn print_trial(test: &str, mode: Mode, fault: Fault, owner: &str, next: &str, t: &Trial) {
    eprintln!(
        "{test}: {} mode, {}: {owner} -> {next}: ARP outage {} ms (new owner's first answer {} ms after the fault), \
         NDP outage {} ms (first answer after {} ms); rounds with two MACs answering: ARP {}, NDP {} \
         (probe every 5 ms)",
        mode.name(),
        fault.name(),
        ms(t.arp.gap),
        ms(t.arp.moved_after),
        ms(t.ndp.gap),
        ms(t.ndp.moved_after),
        t.arp.conflicts,
        t.ndp.conflicts,
    );
}

#[test]
fn host_loss_sigkill_and_sigterm_move_both_vips_to_the_node_metallb_ranks_next() {
    const TEST: &str =
        "host_loss_sigkill_and_sigterm_move_both_vips_to_the_node_metallb_ranks_next";
    let started = Instant::now();
    let Some(mut c) = web_cluster(TEST, "vkf-hst", &[]) else {
        return;
    };
    c.start_all(Mode::Kubernetes);
    let owner = Cluster::first(&c.nodes(), IpAddr::V4(WEB4));
    c.assert_only(&format!("{TEST}: settled"), &WEB, &owner);
    for fault in [Fault::HostLoss, Fault::Kill, Fault::Term] {
        let (next, trial) = fail(TEST, &mut c, fault, &owner);
        print_trial(TEST, Mode::Kubernetes, fault, &owner, &next, &trial);
        restore(TEST, &mut c, Mode::Kubernetes, fault, &owner);
    }
    assert_moves_explained(TEST, &c, &owner);
    // The graceful stop was a leave, not a failure, for the others.
    for s in c.daemons.iter().filter(|s| s.node != owner) {
        assert!(
            s.log_text()
                .lines()
                .any(|l| l.contains("\"event\":\"member_left\"")
                    && l.contains(&format!("\"member\":\"{owner}\""))),
            "{TEST}: {} never logged {owner} leaving:\n{}",
            s.node,
            s.log_tail(30)
        );
    }
    for s in &mut c.daemons {
        s.check_running();
        assert!(s.terminate(), "{} stops on SIGTERM", s.node);
    }
    eprintln!("{TEST}: total {:?}", started.elapsed());
}

/// Each move of `web`'s IPs away from `owner` is explained on the Service by the new owner: a
/// `vigilOwnerMoved` Event naming the previous owner and the cause (`member_dead` for the host
/// loss and the SIGKILL, `member_left` for the SIGTERM), beside MetalLB's `nodeAssigned`
/// Events, whose wording is unchanged.
fn assert_moves_explained(test: &str, c: &Cluster, owner: &str) {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(c.client().clone(), SERVICE_NAMESPACE);
    let on_web = || -> Vec<(String, String)> {
        c.block_on(events.list(&ListParams::default()))
            .map(|list| list.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some("web"))
            .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    };
    let from_owner = format!("moved from node {owner:?} to node ");
    let explained = |seen: &[(String, String)], cause: &str| {
        seen.iter().any(|(reason, message)| {
            reason == "vigilOwnerMoved"
                && message.contains(&from_owner)
                && message.contains(&format!(": {cause} {owner};"))
                && message.contains("decision +")
        })
    };
    let mut seen = Vec::new();
    let done = vigil_netlab::poll(SETTLE, Duration::from_millis(200), || {
        seen = on_web();
        explained(&seen, "member_dead") && explained(&seen, "member_left")
    });
    let changes: Vec<String> = c
        .logs()
        .lines()
        .filter(|l| l.contains("ownership_changed") || l.contains("event_failed"))
        .map(str::to_string)
        .collect();
    assert!(
        done,
        "{test}: no vigilOwnerMoved Event explains each move away from {owner}: {seen:#?}\n\
         the speakers' ownership changes:\n{}",
        changes.join("\n")
    );
    for node in c.nodes() {
        let metallb = format!("announcing from node {node:?} with protocol \"layer2\"");
        let assigned = seen
            .iter()
            .any(|(reason, message)| reason == "nodeAssigned" && *message == metallb);
        if node == owner
            || seen
                .iter()
                .any(|(_, m)| m.contains(&format!("to node {node:?}")))
        {
            assert!(
                assigned,
                "{test}: MetalLB's nodeAssigned Event for {node} changed: {seen:#?}"
            );
        }
    }
}

/// The nodes of the ServiceL2Status objects for `failover/web`, sorted (bounded wait until
/// `done` holds).
fn wait_statuses(c: &Cluster, done: impl Fn(&[String]) -> bool + Sync) -> Vec<String> {
    let web = |all: &[L2Status]| -> Vec<String> {
        let mut nodes: Vec<String> = all
            .iter()
            .filter(|s| s.service_namespace == SERVICE_NAMESPACE && s.service_name == "web")
            .map(|s| s.node.clone())
            .collect();
        nodes.sort();
        nodes
    };
    web(&c.wait_l2_statuses(SETTLE, |all| done(&web(all))))
}

#[test]
fn with_the_api_server_stopped_a_lost_owners_vips_still_move_and_stay_right_after() {
    const TEST: &str =
        "with_the_api_server_stopped_a_lost_owners_vips_still_move_and_stay_right_after";
    let Some(mut c) = web_cluster(TEST, "vkf-api", &[]) else {
        return;
    };
    c.start_all(Mode::Kubernetes);
    let owner = Cluster::first(&c.nodes(), IpAddr::V4(WEB4));
    c.assert_only(&format!("{TEST}: settled"), &WEB, &owner);
    let statuses = wait_statuses(&c, |n| n == [owner.clone()]);
    assert_eq!(
        statuses,
        std::slice::from_ref(&owner),
        "{TEST}: ServiceL2Status before"
    );

    let stopped = c.lab.cp_mut().stop();
    assert!(stopped.is_some(), "{TEST}: the API server stopped");
    let (next, trial) = fail(TEST, &mut c, Fault::HostLoss, &owner);
    print_trial(
        TEST,
        Mode::Kubernetes,
        Fault::HostLoss,
        &owner,
        &next,
        &trial,
    );

    c.lab
        .cp_mut()
        .start_again()
        .expect("the API server starts again over its data");
    // The survivors' watches resume; the new owner's status appears, and nothing moves.
    let statuses = wait_statuses(&c, |n| n.contains(&next));
    assert!(
        statuses.contains(&next),
        "{TEST}: no ServiceL2Status naming {next} once the API server is back: {statuses:?}\n{}",
        c.logs()
    );
    c.assert_only(&format!("{TEST}: API server back"), &WEB, &next);

    // The lost host comes back: it takes its VIPs back, and exactly one status remains.
    c.set_link(&owner, true);
    c.assert_only(&format!("{TEST}: {owner} back"), &WEB, &owner);
    let statuses = wait_statuses(&c, |n| n == [owner.clone()]);
    assert_eq!(
        statuses,
        std::slice::from_ref(&owner),
        "{TEST}: exactly the owner's ServiceL2Status at the end\n{}",
        c.logs()
    );
    for s in &mut c.daemons {
        s.check_running();
    }
}

/// The 410 test's configuration: pools `lab`, `b` and `c`, each with its advertisement.
const THREE_POOLS: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lab, namespace: metallb-system}
spec:
  addresses: [198.18.0.200-198.18.0.209]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lab, namespace: metallb-system}
spec:
  ipAddressPools: [lab]
  interfaces: [eth0]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: b, namespace: metallb-system}
spec:
  addresses: [198.18.0.220-198.18.0.229]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: b, namespace: metallb-system}
spec:
  ipAddressPools: [b]
  interfaces: [eth0]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: c, namespace: metallb-system}
spec:
  addresses: [198.18.0.240-198.18.0.249]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: c, namespace: metallb-system}
spec:
  ipAddressPools: [c]
  interfaces: [eth0]
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an IP")
}

/// Cuts (or restores) `host`'s traffic with the API server inside its own namespace: new
/// connections are refused (TCP reset), packets from the server dropped, and the open ones
/// destroyed (`ss -K`), so every watch of its speaker fails at once and cannot resume.
fn cut_api(c: &Cluster, host: &str, cut: bool) {
    let ns = c.ns(host);
    if cut {
        let script = format!(
            "table inet vigil_api_cut {{\n\
               chain out {{ type filter hook output priority 0; policy accept;\n\
                 ip daddr {API_SERVER} tcp dport 6443 reject with tcp reset; }}\n\
               chain in {{ type filter hook input priority 0; policy accept;\n\
                 ip saddr {API_SERVER} tcp sport 6443 drop; }}\n\
             }}\n"
        );
        let file = c.lab.cp().work_dir().join(format!("cut-{host}.nft"));
        std::fs::write(&file, script).expect("nft script");
        vigil_netlab::run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "nft",
            "-f",
            &file.display().to_string(),
        ]);
        vigil_netlab::run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "ss",
            "-K",
            "dst",
            &API_SERVER.to_string(),
            "dport",
            "=",
            "6443",
        ]);
    } else {
        vigil_netlab::run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "nft",
            "delete",
            "table",
            "inet",
            "vigil_api_cut",
        ]);
    }
}

/// The speaker log lines that report a watch ending in `410 Gone` (kube's watcher then
/// relists), for watch kind `kind`.
fn gone_lines(log: &str, kind: &str) -> usize {
    log.lines()
        .filter(|l| {
            l.contains("\"event\":\"k8s_watch_error\"")
                && l.contains(&format!("\"kind\":\"{kind}\""))
                && (l.contains("Expired") || l.contains("Gone") || l.contains("too old"))
        })
        .count()
}

/// Log lines of `event` about `vip` (after byte `from`).
fn vip_events(log: &str, from: usize, event: &str, vip: IpAddr) -> Vec<String> {
    log.get(from..)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.contains(&format!("\"event\":\"{event}\""))
                && l.contains(&format!("\"vip\":\"{vip}\""))
        })
        .map(str::to_string)
        .collect()
}

/// Whether a watch of Services from `version` is refused with 410 (etcd compacted past it).
async fn compacted_past(api: &Api<Service>, version: &str) -> bool {
    use futures_util::StreamExt;
    let Ok(stream) = api.watch(&WatchParams::default().timeout(5), version).await else {
        // The request itself refused (410 as an HTTP status).
        return true;
    };
    let mut stream = std::pin::pin!(stream);
    matches!(
        tokio::time::timeout(Duration::from_secs(6), stream.next()).await,
        Ok(Some(Ok(WatchEvent::Error(status)))) if status.code == 410
    )
}

#[test]
fn after_410_gone_the_speakers_relist_and_never_announce_from_the_stale_cache() {
    const TEST: &str = "after_410_gone_the_speakers_relist_and_never_announce_from_the_stale_cache";
    let started = Instant::now();
    let (keep, gone, ad_removed, pool_removed, added) = (
        ip("198.18.0.200"),
        ip("198.18.0.201"),
        ip("198.18.0.220"),
        ip("198.18.0.240"),
        ip("198.18.0.202"),
    );
    // Watches straight from etcd (no watch cache to replay from), compacted every 2 s: a watch
    // that resumes from before a compaction is answered 410 Gone.
    let Some(mut c) = Cluster::new(
        TEST,
        "vkf-410",
        &["--watch-cache=false", "--etcd-compaction-interval=2s"],
        THREE_POOLS,
        &[
            Svc {
                name: "keep",
                ips: &[keep],
            },
            Svc {
                name: "gone",
                ips: &[gone],
            },
            Svc {
                name: "ad-removed",
                ips: &[ad_removed],
            },
            Svc {
                name: "pool-removed",
                ips: &[pool_removed],
            },
        ],
    ) else {
        return;
    };
    c.start_all(Mode::Kubernetes);
    let nodes: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let owner = |vip: IpAddr| Cluster::first(&names, vip);
    for vip in [keep, gone, ad_removed, pool_removed] {
        c.assert_only(&format!("{TEST}: settled {vip}"), &[vip], &owner(vip));
    }
    let settled_logs: Vec<usize> = c.daemons.iter().map(|s| s.log_text().len()).collect();
    let client = c.client().clone();
    let services: Api<Service> = Api::namespaced(client.clone(), SERVICE_NAMESPACE);
    let before = c
        .block_on(services.list(&ListParams::default()))
        .expect("list services")
        .metadata
        .resource_version
        .expect("a list resourceVersion");

    // Cut every speaker off the API server; their watches fail.
    let hosts: Vec<String> = c.speakers.iter().map(|cfg| cfg.host.clone()).collect();
    for host in &hosts {
        cut_api(&c, host, true);
    }
    let cut_logs: Vec<usize> = c.daemons.iter().map(|s| s.log_text().len()).collect();
    let failed = vigil_netlab::poll(SETTLE, Duration::from_millis(100), || {
        c.daemons.iter().zip(&cut_logs).all(|(s, from)| {
            s.log_text()
                .get(*from..)
                .is_some_and(|l| l.contains("\"event\":\"k8s_watch_error\""))
        })
    });
    assert!(
        failed,
        "{TEST}: the speakers' watches did not fail when cut\n{}",
        c.logs()
    );

    // Meanwhile: a Service deleted, an advertisement deleted, a pool deleted with its
    // Service's IP cleared (as MetalLB's controller does), and a Service added.
    let gvk = |kind: &str| GroupVersionKind::gvk("metallb.io", "v1beta1", kind);
    let ads: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        METALLB_NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk("L2Advertisement"), "l2advertisements"),
    );
    let pools: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        METALLB_NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk("IPAddressPool"), "ipaddresspools"),
    );
    c.block_on(async {
        services
            .delete("gone", &DeleteParams::default())
            .await
            .expect("delete service gone");
        ads.delete("b", &DeleteParams::default())
            .await
            .expect("delete L2Advertisement b");
        let cleared = serde_json::json!({ "status": { "loadBalancer": { "ingress": [] } } });
        services
            .patch_status(
                "pool-removed",
                &PatchParams::default(),
                &Patch::Merge(&cleared),
            )
            .await
            .expect("clear pool-removed's ingress");
        pools
            .delete("c", &DeleteParams::default())
            .await
            .expect("delete pool c");
    });
    c.add_service(&Svc {
        name: "added",
        ips: &[added],
    });
    // The speakers cannot know: every VIP they had is still answered, the new one is not.
    for vip in [keep, gone, ad_removed, pool_removed] {
        let seen = c.answering(vip, 5);
        assert_eq!(
            seen,
            BTreeSet::from([c.mac(&owner(vip)).to_string()]),
            "{TEST}: while cut off, {vip} stays with {} (the last snapshot)",
            owner(vip)
        );
    }
    assert!(
        c.answering(added, 5).is_empty(),
        "{TEST}: {added} unknown while cut off"
    );

    // etcd compacts past every resourceVersion the speakers hold.
    let compacted = c.block_on(async {
        let end = Instant::now() + SETTLE;
        loop {
            if compacted_past(&services, &before).await {
                break true;
            }
            if Instant::now() > end {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    assert!(compacted, "{TEST}: etcd never compacted past {before}");

    let restored_logs: Vec<usize> = c.daemons.iter().map(|s| s.log_text().len()).collect();
    for host in &hosts {
        cut_api(&c, host, false);
    }
    // Every speaker's Service and L2Advertisement watches resume into 410 Gone (so they
    // relisted: the test is not passing on a watch that simply carried on).
    let relisted = vigil_netlab::poll(Duration::from_secs(90), Duration::from_millis(200), || {
        c.daemons.iter().zip(&restored_logs).all(|(s, from)| {
            let log = s.log_text();
            let after = log.get(*from..).unwrap_or_default();
            gone_lines(after, "Service") > 0 && gone_lines(after, "L2Advertisement") > 0
        })
    });
    assert!(
        relisted,
        "{TEST}: not every speaker saw 410 Gone on its Service and L2Advertisement watches\n{}",
        c.logs()
    );
    // The new state, and only that.
    c.assert_only(&format!("{TEST}: {keep} kept"), &[keep], &owner(keep));
    c.assert_only(&format!("{TEST}: {added} added"), &[added], &owner(added));
    let silent = c.wait_silent(&[gone, ad_removed, pool_removed]);
    assert!(
        silent.iter().all(|(_, macs)| macs.is_empty()),
        "{TEST}: the deleted Service, the VIP without advertisement and the VIP whose pool went \
         must be withdrawn after the relist, saw {silent:?}\n{}",
        c.logs()
    );
    for ((s, from), settled) in c.daemons.iter().zip(&restored_logs).zip(&settled_logs) {
        let log = s.log_text();
        for vip in [gone, ad_removed, pool_removed] {
            let taken = vip_events(&log, *from, "vip_taken", vip);
            assert!(
                taken.is_empty(),
                "{TEST}: {} announced {vip} from stale data after the cut: {taken:?}",
                s.node
            );
        }
        let released = vip_events(&log, *settled, "vip_released", keep);
        assert!(
            released.is_empty(),
            "{TEST}: {} released {keep}, which never changed: {released:?}",
            s.node
        );
    }
    for s in &mut c.daemons {
        s.check_running();
    }
    eprintln!(
        "{TEST}: watches cut, etcd compacted past {before}, relisted after 410 Gone; total {:?}",
        started.elapsed()
    );
}

fn percentile(sorted: &[u128], p: f64) -> u128 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The failover figures of issue 13: standalone and Kubernetes mode, one after the other on
/// the same lab (three hosts unless `VIGIL_FIGURE_NODES` says otherwise, `fast` profile, the
/// same names, VIPs and key length), `n` runs per scenario (`VIGIL_FIGURE_RUNS`, default 5),
/// scenarios from `VIGIL_FIGURE_FAULTS` (link,freeze,kill,term; default link,kill,term). Run
/// by hand:
///
/// ```text
/// sudo -E VIGIL_GO_BIN_DIR=conformance/.build/bin VIGIL_FIGURE_RUNS=10 \
///   cargo test -p vigil --test k8s_failover -- --ignored --nocapture figures
/// ```
#[test]
#[ignore = "figures, run by hand: prints outages, asserts only who answers"]
fn figures_standalone_beside_kubernetes() {
    const TEST: &str = "figures_standalone_beside_kubernetes";
    let runs: usize = std::env::var("VIGIL_FIGURE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    // VIGIL_FIGURE_NODES speaker hosts (default 3); VIGIL_FIGURE_FAULTS, a comma-separated
    // subset of link,freeze,kill,term (default link,kill,term).
    let nodes: usize = std::env::var("VIGIL_FIGURE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(k8s_support::NODES);
    let wanted = std::env::var("VIGIL_FIGURE_FAULTS").unwrap_or("link,kill,term".into());
    let faults: Vec<Fault> = wanted
        .split(',')
        .map(|f| match f.trim() {
            "link" => Fault::HostLoss,
            "freeze" => Fault::Freeze,
            "kill" => Fault::Kill,
            "term" => Fault::Term,
            other => panic!("VIGIL_FIGURE_FAULTS: unknown fault {other:?}"),
        })
        .collect();
    let Some(mut c) = web_cluster_of(TEST, "vkf-fig", nodes, &[]) else {
        return;
    };
    let owner = Cluster::first(&c.nodes(), IpAddr::V4(WEB4));
    let mut table: Vec<(Mode, Fault, Vec<u128>, Vec<u128>)> = Vec::new();
    for mode in [Mode::Standalone, Mode::Kubernetes] {
        c.start_all(mode);
        c.assert_only(&format!("{TEST}: {} settled", mode.name()), &WEB, &owner);
        for &fault in &faults {
            let (mut arp, mut ndp) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                let (next, trial) = fail(TEST, &mut c, fault, &owner);
                print_trial(TEST, mode, fault, &owner, &next, &trial);
                arp.push(ms(trial.arp.gap));
                ndp.push(ms(trial.ndp.gap));
                restore(TEST, &mut c, mode, fault, &owner);
                // Let the restarted node's view settle before the next trial.
                std::thread::sleep(Duration::from_secs(1));
            }
            arp.sort_unstable();
            ndp.sort_unstable();
            table.push((mode, fault, arp, ndp));
        }
    }
    eprintln!("{TEST}: outage as the client saw it (probe every 5 ms), {runs} runs each, ms:");
    eprintln!(
        "| scenario | standalone ARP p50 / p99 / max | kubernetes ARP p50 / p99 / max | standalone NDP p50 / p99 / max | kubernetes NDP p50 / p99 / max |"
    );
    eprintln!("|---|---|---|---|---|");
    for &fault in &faults {
        let row = |mode: Mode| {
            table
                .iter()
                .find(|(m, f, _, _)| *m == mode && *f == fault)
                .expect("measured")
        };
        let (s, k) = (row(Mode::Standalone), row(Mode::Kubernetes));
        let cell = |v: &[u128]| {
            format!(
                "{} / {} / {}",
                percentile(v, 50.0),
                percentile(v, 99.0),
                v.last().unwrap_or(&0)
            )
        };
        eprintln!(
            "| {} | {} | {} | {} | {} |",
            fault.name(),
            cell(&s.2),
            cell(&k.2),
            cell(&s.3),
            cell(&k.3)
        );
    }
}
