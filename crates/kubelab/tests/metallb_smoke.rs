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

use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use vigil_kubelab::metallb::{
    self, ControllerConfig, METALLB_NAMESPACE, MemberlistKey, MetalLbProcess, MetalLbSpeaker,
    SpeakerConfig,
};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, TestEndpoint, TestService, TestSlice, apply_yaml, arp_ask,
    create_endpoint_slice, create_pod, create_service, ensure_namespace,
};

const TEST: &str = "metallb_controller_allocates_and_a_speaker_answers_arp";
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
const SPEAKERS: [(&str, &str, [u8; 4]); 3] = [
    ("a", "node-a", [198, 18, 0, 11]),
    ("b", "node-b", [198, 18, 0, 12]),
    ("c", "node-c", [198, 18, 0, 13]),
];
/// Our own configuration objects (MetalLB's API, in our words).
const POOL_AND_AD: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: lab
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.200-198.18.0.209
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: lab
  namespace: metallb-system
spec:
  ipAddressPools:
    - lab
  interfaces:
    - eth0
"#;
/// Bounds on the waits (generous: two shared cores, and MetalLB's first reconcile).
const ALLOCATION_LIMIT: Duration = Duration::from_secs(90);
const ANSWER_LIMIT: Duration = Duration::from_secs(90);

fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
}

/// The first ingress IP MetalLB's controller wrote, once there is one (`None` after
/// [`ALLOCATION_LIMIT`]); stops early with the controller's log if it exits.
fn wait_ingress(lab: &KubeLab, controller: &mut MetalLbProcess, name: &str) -> Option<IpAddr> {
    let client = lab.cp().client().expect("admin client");
    let services: Api<Service> = Api::namespaced(client, "smoke");
    let end = Instant::now() + ALLOCATION_LIMIT;
    while Instant::now() < end {
        controller.check_running().expect("the controller runs");
        let svc = lab
            .cp()
            .block_on(services.get(name))
            .expect("get the service");
        let ip = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .and_then(|ingress| ingress.into_iter().find_map(|i| i.ip));
        if let Some(ip) = ip {
            return Some(ip.parse().expect("an IP in status.loadBalancer.ingress"));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    None
}

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
    // MetalLB runs under its own ServiceAccounts and the RBAC of its release manifest.
    let cp_config = ControlPlaneConfig {
        tokens: metallb::metallb_service_account_tokens(),
        ..ControlPlaneConfig::default()
    };
    let Some(mut lab) = KubeLab::start("kl-mlb", TEST, cp_config) else {
        return;
    };
    let ready = started.elapsed();
    let configs: Vec<SpeakerConfig> = SPEAKERS
        .iter()
        .map(|(host, node, ip)| SpeakerConfig::new(host, node, IpAddr::from(*ip)))
        .collect();
    for config in &configs {
        let IpAddr::V4(ip) = config.ip else {
            unreachable!()
        };
        plug(&mut lab, &config.host, ip);
    }
    plug(&mut lab, "client", CLIENT_IP);
    let macs: Vec<String> = configs
        .iter()
        .map(|c| lab.bridge().mac(&c.host, "eth0"))
        .collect();

    // What a cluster would have before MetalLB starts: its CRDs, namespace and Secret, the
    // Nodes, and the Pods it looks itself (and its peers) up by.
    let client = lab.cp().client().expect("admin client");
    let key = MemberlistKey::random().expect("a memberlist key");
    let kubeconfigs = metallb::write_metallb_kubeconfigs(lab.cp()).expect("MetalLB kubeconfigs");
    let controller_config = ControllerConfig {
        kubeconfig: Some(kubeconfigs.controller),
        ..ControllerConfig::default()
    };
    let configs: Vec<SpeakerConfig> = configs
        .into_iter()
        .map(|c| SpeakerConfig {
            kubeconfig: Some(kubeconfigs.speaker.clone()),
            ..c
        })
        .collect();
    lab.cp().block_on(async {
        let crds = metallb::install_metallb(&client, METALLB_NAMESPACE, &key)
            .await
            .expect("install MetalLB's CRDs, namespace and Secret");
        assert!(
            crds.iter().any(|c| c == "ipaddresspools.metallb.io"),
            "{crds:?}"
        );
        let rbac = metallb::install_metallb_rbac(&client)
            .await
            .expect("MetalLB's RBAC");
        assert!(
            rbac.iter()
                .any(|o| o == "ClusterRole/metallb-system:speaker"),
            "{rbac:?}"
        );
        metallb::register_speakers(&client, &configs)
            .await
            .expect("speaker Nodes and Pods");
        create_pod(&client, &controller_config.pod())
            .await
            .expect("controller Pod");
    });

    let mut controller = metallb::start_controller(lab.cp(), &binaries, &controller_config)
        .expect("start MetalLB's controller");
    let mut speakers: Vec<MetalLbSpeaker> = configs
        .iter()
        .map(|c| MetalLbSpeaker::start(&lab, &binaries, c, &key).expect("start a speaker"))
        .collect();

    // The configuration and a Service with ready endpoints on every node.
    lab.cp().block_on(async {
        apply_yaml(&client, "pool and L2Advertisement", POOL_AND_AD)
            .await
            .expect("apply the pool and the L2Advertisement");
        ensure_namespace(&client, "smoke").await.expect("namespace");
        create_service(&client, &TestService::load_balancer("smoke", "web"))
            .await
            .expect("service");
        let mut slice = TestSlice::for_service("smoke", "web");
        for (i, config) in configs.iter().enumerate() {
            let endpoint = IpAddr::from([198, 18, 1, 10 + u8::try_from(i).unwrap()]);
            slice = slice.endpoint(TestEndpoint::ready(endpoint, &config.node));
        }
        create_endpoint_slice(&client, &slice)
            .await
            .expect("endpoint slice");
    });
    let allocated = wait_ingress(&lab, &mut controller, "web");
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
    let client_ns = lab.bridge().ns("client");
    let end = Instant::now() + ANSWER_LIMIT;
    let answers = loop {
        let answers = arp_ask(
            &client_ns,
            "eth0",
            CLIENT_IP,
            vip,
            Duration::from_millis(300),
        )
        .expect("ask ARP from the client");
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
            macs.contains(&answer.mac) && answer.mac == answer.eth_src,
            "answer {answer:?} is not from a speaker host ({macs:?})"
        );
    }

    // MetalLB elects by SHA-256(node "#" ip) among its memberlist members: once all three
    // have joined, the answer comes from the node vigil's election ranks first too.
    let ranked = vigil_lb::rank(configs.iter().map(|c| c.node.as_str()), IpAddr::V4(vip));
    let winner = configs
        .iter()
        .position(|c| c.node == ranked[0])
        .expect("ranked names are the speakers'");
    let end = Instant::now() + ANSWER_LIMIT;
    let settled = loop {
        let answers = arp_ask(
            &client_ns,
            "eth0",
            CLIENT_IP,
            vip,
            Duration::from_millis(300),
        )
        .expect("ask ARP from the client");
        let only_winner = !answers.is_empty() && answers.iter().all(|a| a.mac == macs[winner]);
        if only_winner || Instant::now() > end {
            break answers;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let settled_at = started.elapsed();
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[winner]),
        "{vip}: expected only {} ({}) to answer, got {settled:?}",
        ranked[0],
        macs[winner]
    );

    // MetalLB's own account agrees: one ServiceL2Status, written by the owner, naming the
    // interface the L2Advertisement selected.
    // (A speaker that announced for a moment before memberlist converged deletes its own
    // status when it stops announcing: wait for the one that stays.)
    let expected = metallb::L2Status {
        node: ranked[0].to_string(),
        service_namespace: "smoke".to_string(),
        service_name: "web".to_string(),
        interfaces: vec!["eth0".to_string()],
    };
    let statuses = lab.cp().block_on(async {
        let end = Instant::now() + ANSWER_LIMIT;
        loop {
            let statuses = metallb::l2_statuses(&client, METALLB_NAMESPACE)
                .await
                .expect("list ServiceL2Status");
            if statuses == [expected.clone()] || Instant::now() > end {
                break statuses;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
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
        "{TEST}: control plane ready after {ready:?}, IP {vip} allocated after {allocated_at:?}, \
         first ARP answer after {answered_at:?}, owner {} settled after {:?}, total {:?}",
        ranked[0],
        settled_at,
        started.elapsed()
    );
}
