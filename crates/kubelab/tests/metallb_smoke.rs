//! MetalLB itself, run against vigil-testenv in a lab: its controller allocates a
//! LoadBalancer IP from an IPAddressPool and one of its speakers answers ARP for it.
//!
//! Lab: the API server (and MetalLB's controller) on host `cp` (198.18.0.2), three speaker
//! hosts `a`, `b`, `c` (198.18.0.11-13), a client (198.18.0.100), all on one bridge; the pool
//! is 198.18.0.200-198.18.0.209, inside the lab's subnet, so the client asks for the IP
//! directly. Root and the Go programs are needed (skips otherwise, fails under
//! `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). No durations are asserted: every wait is a
//! bounded poll.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use vigil_kubelab::cluster::{Cluster, ClusterSpec, LbService, pool_yaml};
use vigil_kubelab::create_pod;
use vigil_kubelab::metallb::{self, ControllerConfig, MetalLbSpeaker};

const TEST: &str = "metallb_controller_allocates_and_a_speaker_answers_arp";
/// Bounds on the waits (generous: two shared cores, and MetalLB's first reconcile).
const ALLOCATION_LIMIT: Duration = Duration::from_secs(90);
const ANSWER_LIMIT: Duration = Duration::from_secs(90);

#[test]
fn metallb_controller_allocates_and_a_speaker_answers_arp() {
    let started = Instant::now();
    // Root first: without it there is no point finding (or building) MetalLB.
    if !vigil_netlab::root_or_skip(TEST) {
        return;
    }
    let Some(binaries) = metallb::metallb_binaries(TEST) else {
        return;
    };
    // What a cluster would have before MetalLB starts: its CRDs, namespace and Secret, the
    // Nodes, and the Pods it looks itself (and its peers) up by. MetalLB runs under its own
    // ServiceAccounts and the RBAC of its release manifest.
    let Some(c) = Cluster::start(TEST, "kl-mlb", &ClusterSpec::nodes(3)) else {
        return;
    };
    let ready = started.elapsed();
    let crds = &c.installed.crds;
    assert!(
        crds.iter().any(|c| c == "ipaddresspools.metallb.io"),
        "{crds:?}"
    );
    let rbac = &c.installed.rbac;
    assert!(
        rbac.iter()
            .any(|o| o == "ClusterRole/metallb-system:speaker"),
        "{rbac:?}"
    );
    let controller_config = ControllerConfig {
        kubeconfig: Some(c.kubeconfigs.controller.clone()),
        ..ControllerConfig::default()
    };
    c.block_on(create_pod(c.client(), &controller_config.pod()))
        .expect("controller Pod");

    let mut controller = metallb::start_controller(c.lab.cp(), &binaries, &controller_config)
        .expect("start MetalLB's controller");
    let mut speakers: Vec<MetalLbSpeaker> = c
        .speakers
        .iter()
        .map(|s| MetalLbSpeaker::start(&c.lab, &binaries, s, &c.key).expect("start a speaker"))
        .collect();

    // The configuration and a Service with ready endpoints on every node.
    c.apply(
        "pool and L2Advertisement",
        &pool_yaml(&["198.18.0.200-198.18.0.209"], &["eth0"]),
    );
    c.namespace("smoke");
    c.add_service(&LbService::new("smoke", "web").endpoints_on(&c.nodes(), 10));
    let allocated = c.wait_ingress("smoke", "web", ALLOCATION_LIMIT, || {
        controller.check_running().expect("the controller runs");
    });
    let Some(IpAddr::V4(vip)) = allocated else {
        panic!(
            "MetalLB's controller wrote no IPv4 ingress within {ALLOCATION_LIMIT:?} ({allocated:?}); its log ends:\n{}",
            controller.log_tail(40)
        );
    };
    let in_pool = (200..=209).map(|last| Ipv4Addr::new(198, 18, 0, last));
    assert!(
        in_pool.clone().any(|ip| ip == vip),
        "{vip} is not from the pool"
    );
    let allocated_at = started.elapsed();

    // The client asks until some speaker answers; every answer must carry a speaker's MAC.
    let end = Instant::now() + ANSWER_LIMIT;
    let answers = loop {
        let answers = c.arp(vip, Duration::from_millis(300));
        if !answers.is_empty() || Instant::now() > end {
            break answers;
        }
        for speaker in &mut speakers {
            speaker.process_mut().check_running().expect("speaker runs");
        }
    };
    let answered_at = started.elapsed();
    assert!(
        !answers.is_empty(),
        "no ARP answer for {vip} within {ANSWER_LIMIT:?}; speaker logs end:\n{}",
        speakers
            .iter()
            .map(|s| format!("--- {}\n{}", s.process().name(), s.process().log_tail(20)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for answer in &answers {
        assert!(
            c.macs.contains(&answer.mac) && answer.mac == answer.eth_src,
            "answer {answer:?} is not from a speaker host ({:?})",
            c.macs
        );
    }

    // MetalLB elects by SHA-256(node "#" ip) among its memberlist members: once all three
    // have joined, the answer comes from the node vigil's election ranks first too.
    let owner = c.first(IpAddr::V4(vip));
    let winner = c.mac(&owner).to_string();
    let end = Instant::now() + ANSWER_LIMIT;
    let settled = loop {
        let answers = c.arp(vip, Duration::from_millis(300));
        let only_winner = !answers.is_empty() && answers.iter().all(|a| a.mac == winner);
        if only_winner || Instant::now() > end {
            break answers;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let settled_at = started.elapsed();
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == winner),
        "{vip}: expected only {owner} ({winner}) to answer, got {settled:?}"
    );

    // MetalLB's own account agrees: one ServiceL2Status, written by the owner, naming the
    // interface the L2Advertisement selected.
    // (A speaker that announced for a moment before memberlist converged deletes its own
    // status when it stops announcing: wait for the one that stays.)
    let expected = metallb::L2Status {
        node: owner.clone(),
        service_namespace: "smoke".to_string(),
        service_name: "web".to_string(),
        interfaces: vec!["eth0".to_string()],
    };
    let statuses = c.wait_l2_statuses(ANSWER_LIMIT, |s| s == std::slice::from_ref(&expected));
    assert_eq!(statuses, [expected]);

    for speaker in &mut speakers {
        speaker.process_mut().check_running().expect("speaker runs");
        assert!(
            speaker.process_mut().stop().is_some(),
            "speaker stops on SIGTERM"
        );
    }
    assert!(controller.stop().is_some(), "controller stops on SIGTERM");
    eprintln!(
        "{TEST}: lab, control plane and MetalLB's objects ready after {ready:?}, IP {vip} allocated after {allocated_at:?}, \
         first ARP answer after {answered_at:?}, owner {owner} settled after {settled_at:?}, total {:?}",
        started.elapsed()
    );
}
