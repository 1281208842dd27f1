//! `vigil speaker` in Kubernetes mode against a real kube-apiserver (vigil-testenv): three
//! lab hosts each run the vigil binary with MetalLB's speaker flags, under MetalLB's own
//! speaker ServiceAccount and RBAC (plus the Role for vigil's key acknowledgement Lease);
//! MetalLB's CRDs come from the Go module cache.
//!
//! Lab (as in kubelab's MetalLB smoke test): the API server on `cp` (198.18.0.2), speaker
//! hosts `a`, `b`, `c` (198.18.0.11-13), a client (198.18.0.100), one bridge. The test writes
//! the Service's `status.loadBalancer.ingress` itself (198.18.0.200, inside the pool), so no
//! controller is involved. Root and the Go programs are needed (skips otherwise, fails under
//! `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). No durations are asserted: every wait is a
//! bounded poll; the outage the client saw is printed.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, ListParams, Patch, PatchParams};
use vigil_kubelab::metallb::{self, METALLB_NAMESPACE, MemberlistKey, SpeakerConfig};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, TestEndpoint, TestService, TestSlice, apply_yaml, arp_ask,
    create_endpoint_slice, create_service, ensure_namespace,
};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
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
/// What a vigil speaker needs beyond MetalLB's speaker RBAC: its key acknowledgement Lease
/// (`vigil_k8s::key_ack`, for key rotation; docs/KUBERNETES.md, "Key rotation").
const KEY_ACK_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: vigil-speaker-keyring
  namespace: metallb-system
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["get", "create", "update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: vigil-speaker-keyring
  namespace: metallb-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: vigil-speaker-keyring
subjects:
  - kind: ServiceAccount
    name: speaker
    namespace: metallb-system
"#;
/// Bounds on the waits (generous: two shared cores).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// The lab, its speakers, their settings and their hosts' MACs.
type Cluster = (KubeLab, Vec<VigilSpeaker>, Vec<SpeakerConfig>, Vec<String>);

/// One `vigil speaker` process on a lab host, killed (SIGKILL) when dropped.
struct VigilSpeaker {
    node: String,
    child: Option<Child>,
    log: PathBuf,
}

impl VigilSpeaker {
    /// `vigil controller` in the control plane's namespace, with the admin's kubeconfig
    /// (vigil's controller elects on a Lease, which MetalLB's controller role does not cover).
    fn start_controller(lab: &KubeLab) -> Self {
        let dir = lab.cp().work_dir().join("vigil").join("controller");
        std::fs::create_dir_all(&dir).expect("controller dir");
        let log = dir.join("controller.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", lab.cp().ns()])
            .arg(env!("CARGO_BIN_EXE_vigil"))
            .arg("controller")
            .arg(format!(
                "--kubeconfig={}",
                lab.cp().kubeconfig_path().display()
            ))
            .arg(format!("--namespace={METALLB_NAMESPACE}"))
            .arg("--identity=controller-0")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start vigil controller");
        Self {
            node: "controller".into(),
            child: Some(child),
            log,
        }
    }

    fn start(
        lab: &KubeLab,
        config: &SpeakerConfig,
        kubeconfig: &Path,
        key: &MemberlistKey,
        extra_args: &[String],
    ) -> Self {
        let dir = lab.cp().work_dir().join("vigil").join(&config.node);
        let key_dir = dir.join("memberlist-key");
        std::fs::create_dir_all(&key_dir).expect("speaker dir");
        std::fs::write(key_dir.join("secretkey"), key.as_str()).expect("key file");
        let log = dir.join("speaker.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", &lab.bridge().ns(&config.host)])
            .arg(env!("CARGO_BIN_EXE_vigil"))
            .arg("speaker")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={}", config.namespace))
            .arg(format!("--node-name={}", config.node))
            .arg(format!("--pod-name={}", config.pod_name()))
            .arg(format!("--ml-bindaddr={}", config.ip))
            .arg(format!("--ml-bindport={}", config.memberlist_port))
            .arg(format!("--ml-labels={}", metallb::speaker_label_selector()))
            .arg(format!("--ml-secret-key-path={}", key_dir.display()))
            .args((!extra_args.iter().any(|a| a.starts_with("--port="))).then_some("--port=0"))
            .arg("--log-level=info")
            .args(extra_args)
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start vigil speaker");
        Self {
            node: config.node.clone(),
            child: Some(child),
            log,
        }
    }

    fn check_running(&mut self) {
        if let Some(child) = &mut self.child
            && let Some(status) = child.try_wait().expect("try_wait")
        {
            panic!(
                "vigil speaker {} exited ({status}); log ends:\n{}",
                self.node,
                self.log_tail(30)
            );
        }
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (bounded): whether it exited by itself.
    fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for VigilSpeaker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
}

/// The lab with MetalLB's CRDs, RBAC, namespace and Secret, the speakers' Nodes and Pods,
/// the pool and advertisement, and Service `smoke/web` at [`VIP`] with ready endpoints on
/// every node; then the three vigil speakers. Returns the speakers, their configs and MACs.
fn start_cluster(test: &str, tag: &str, allocate: Allocate) -> Option<Cluster> {
    start_cluster_with(test, tag, allocate, |_, _| Vec::new())
}

/// [`start_cluster`], each speaker started with the extra arguments `extra_args` gives for
/// its configuration (and its own directory).
fn start_cluster_with(
    test: &str,
    tag: &str,
    allocate: Allocate,
    extra_args: impl Fn(&SpeakerConfig, &Path) -> Vec<String>,
) -> Option<Cluster> {
    if !vigil_netlab::root_or_skip(test) {
        return None;
    }
    let cp_config = ControlPlaneConfig {
        tokens: metallb::metallb_service_account_tokens(),
        ..ControlPlaneConfig::default()
    };
    let mut lab = KubeLab::start(tag, test, cp_config)?;
    let configs: Vec<SpeakerConfig> = SPEAKERS
        .iter()
        .map(|(host, node, ip)| SpeakerConfig::new(host, node, IpAddr::from(*ip)))
        .collect();
    for (host, _, ip) in SPEAKERS {
        plug(&mut lab, host, Ipv4Addr::from(ip));
    }
    plug(&mut lab, "client", CLIENT_IP);
    let macs: Vec<String> = configs
        .iter()
        .map(|c| lab.bridge().mac(&c.host, "eth0"))
        .collect();
    let client = lab.cp().client().expect("admin client");
    let key = MemberlistKey::random().expect("a memberlist key");
    let kubeconfigs = metallb::write_metallb_kubeconfigs(lab.cp()).expect("MetalLB kubeconfigs");
    lab.cp().block_on(async {
        metallb::install_metallb(&client, METALLB_NAMESPACE, &key)
            .await
            .expect("install MetalLB's CRDs, namespace and Secret");
        metallb::install_metallb_rbac(&client)
            .await
            .expect("MetalLB's RBAC");
        apply_yaml(&client, "key acknowledgement RBAC", KEY_ACK_RBAC)
            .await
            .expect("the speakers' key acknowledgement Role");
        metallb::register_speakers(&client, &configs)
            .await
            .expect("speaker Nodes and Pods");
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
        if allocate == Allocate::VigilController {
            return;
        }
        // What a controller would write: the IP, through the status subresource.
        let services: Api<Service> = Api::namespaced(client.clone(), "smoke");
        let status = serde_json::json!({
            "status": { "loadBalancer": { "ingress": [ { "ip": VIP.to_string() } ] } }
        });
        services
            .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("write status.loadBalancer.ingress");
    });
    let mut speakers: Vec<VigilSpeaker> = configs
        .iter()
        .map(|c| {
            let dir = lab.cp().work_dir().join("vigil").join(&c.node);
            std::fs::create_dir_all(&dir).expect("speaker dir");
            let extra = extra_args(c, &dir);
            VigilSpeaker::start(&lab, c, &kubeconfigs.speaker, &key, &extra)
        })
        .collect();
    if allocate == Allocate::VigilController {
        let mut controller = VigilSpeaker::start_controller(&lab);
        let ingress = wait_ingress(&lab, &mut controller);
        assert_eq!(
            ingress,
            Some(IpAddr::V4(VIP)),
            "vigil controller: the first free IP of the pool expected; log ends:\n{}",
            controller.log_tail(30)
        );
        speakers.push(controller);
    }
    Some((lab, speakers, configs, macs))
}

/// Who writes the Service's ingress IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allocate {
    /// The test, through the status subresource.
    Test,
    /// `vigil controller`, from the pool.
    VigilController,
}

/// The first ingress IP of smoke/web, once there is one (bounded).
fn wait_ingress(lab: &KubeLab, controller: &mut VigilSpeaker) -> Option<IpAddr> {
    let services: Api<Service> = Api::namespaced(lab.cp().client().expect("admin client"), "smoke");
    let end = Instant::now() + SETTLE_LIMIT;
    while Instant::now() < end {
        controller.check_running();
        let svc = lab
            .cp()
            .block_on(services.get("web"))
            .expect("get the service");
        let ip = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|lb| lb.ingress)
            .and_then(|ingress| ingress.into_iter().find_map(|i| i.ip));
        if let Some(ip) = ip {
            return Some(ip.parse().expect("an IP in status.loadBalancer.ingress"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Asks until only `mac` answers (or `limit` passes); the last answers.
fn wait_only(
    lab: &KubeLab,
    speakers: &mut [VigilSpeaker],
    mac: &str,
    limit: Duration,
) -> Vec<vigil_kubelab::ArpAnswer> {
    let ns = lab.bridge().ns("client");
    let end = Instant::now() + limit;
    loop {
        let answers = arp_ask(&ns, "eth0", CLIENT_IP, VIP, Duration::from_millis(200))
            .expect("ask ARP from the client");
        if (!answers.is_empty() && answers.iter().all(|a| a.mac == mac)) || Instant::now() > end {
            return answers;
        }
        for s in speakers.iter_mut() {
            s.check_running();
        }
    }
}

fn logs(speakers: &[VigilSpeaker]) -> String {
    speakers
        .iter()
        .map(|s| format!("--- {}\n{}", s.node, s.log_tail(20)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until a ServiceL2Status names `node` for smoke/web on eth0; all statuses seen.
fn wait_status(lab: &KubeLab, node: &str) -> Vec<metallb::L2Status> {
    let client = lab.cp().client().expect("admin client");
    let expected = metallb::L2Status {
        node: node.to_string(),
        service_namespace: "smoke".to_string(),
        service_name: "web".to_string(),
        interfaces: vec!["eth0".to_string()],
    };
    lab.cp().block_on(async {
        let end = Instant::now() + SETTLE_LIMIT;
        loop {
            let statuses = metallb::l2_statuses(&client, METALLB_NAMESPACE)
                .await
                .expect("list ServiceL2Status");
            if statuses.contains(&expected) || Instant::now() > end {
                break statuses;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Waits until a `nodeAssigned` Event on smoke/web names `node`; the messages seen.
fn wait_node_assigned(lab: &KubeLab, node: &str) -> Vec<String> {
    let client = lab.cp().client().expect("admin client");
    let events: Api<Event> = Api::namespaced(client, "smoke");
    let wanted = format!("announcing from node \"{node}\" with protocol \"layer2\"");
    lab.cp().block_on(async {
        let end = Instant::now() + SETTLE_LIMIT;
        loop {
            let list = events
                .list(&ListParams::default().fields("involvedObject.name=web,reason=nodeAssigned"))
                .await
                .expect("list events");
            let messages: Vec<String> = list.items.into_iter().filter_map(|e| e.message).collect();
            if messages.contains(&wanted) || Instant::now() > end {
                break messages;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// `Kind/name` of the owners of `node`'s ServiceL2Status objects.
fn status_owners(lab: &KubeLab, node: &str) -> Vec<String> {
    let client = lab.cp().client().expect("admin client");
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", "ServiceL2Status");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "servicel2statuses");
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, METALLB_NAMESPACE, &resource);
    let list = lab
        .cp()
        .block_on(api.list(&ListParams::default().labels(&format!("metallb.io/node={node}"))))
        .expect("list ServiceL2Status");
    list.items
        .iter()
        .flat_map(|o| o.metadata.owner_references.clone().unwrap_or_default())
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

/// `status.result` of ConfigurationState `speaker-<node>`, once it is set (bounded).
fn wait_configuration_result(lab: &KubeLab, node: &str) -> Option<String> {
    let client = lab.cp().client().expect("admin client");
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", "ConfigurationState");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "configurationstates");
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, METALLB_NAMESPACE, &resource);
    lab.cp().block_on(async {
        let end = Instant::now() + SETTLE_LIMIT;
        loop {
            let result = api
                .get_opt(&format!("speaker-{node}"))
                .await
                .expect("get ConfigurationState")
                .and_then(|o| o.data["status"]["result"].as_str().map(str::to_string));
            if result.is_some() || Instant::now() > end {
                break result;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// The first node MetalLB's election ranks for [`VIP`] among `nodes`.
fn first(nodes: &[&str]) -> String {
    vigil_lb::rank(nodes.iter().copied(), IpAddr::V4(VIP))[0].to_string()
}

/// SIGKILLs the owner and waits for the next node to answer alone; prints the outage.
fn kill_owner_and_wait(
    test: &str,
    lab: &KubeLab,
    speakers: &mut [VigilSpeaker],
    configs: &[SpeakerConfig],
    macs: &[String],
    owner: &str,
) -> String {
    let owner_index = configs.iter().position(|c| c.node == owner).expect("owner");
    let rest: Vec<&str> = configs
        .iter()
        .map(|c| c.node.as_str())
        .filter(|n| *n != owner)
        .collect();
    let next = first(&rest);
    let next_index = configs.iter().position(|c| c.node == next).expect("next");
    let killed_at = Instant::now();
    speakers[owner_index].kill();
    let ns = lab.bridge().ns("client");
    let end = killed_at + FAILOVER_LIMIT;
    let (mut asked, mut unanswered) = (0u32, 0u32);
    let answered = loop {
        let answers = arp_ask(&ns, "eth0", CLIENT_IP, VIP, Duration::from_millis(20))
            .expect("ask ARP from the client");
        asked += 1;
        if answers.is_empty() {
            unanswered += 1;
        }
        if answers.iter().any(|a| a.mac == macs[next_index]) {
            break Some(killed_at.elapsed());
        }
        if Instant::now() > end {
            break None;
        }
    };
    let Some(answered) = answered else {
        panic!(
            "{test}: no answer from {next} within {FAILOVER_LIMIT:?} after {owner} was killed; logs:\n{}",
            logs(speakers)
        );
    };
    let settled = wait_only(lab, speakers, &macs[next_index], SETTLE_LIMIT);
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[next_index]),
        "{test}: after the kill expected only {next} to answer, got {settled:?}"
    );
    eprintln!(
        "{test}: {owner} SIGKILLed; the client's first answer from {next} came {answered:?} after the kill \
         (ARP questions asked meanwhile: {asked}, unanswered: {unanswered}; each waits 20 ms plus the probe's own setup, which bounds the resolution)"
    );
    next
}

#[test]
fn vigil_speakers_elect_as_metallb_and_fail_over_on_sigkill() {
    const TEST: &str = "vigil_speakers_elect_as_metallb_and_fail_over_on_sigkill";
    let started = Instant::now();
    let Some((lab, mut speakers, configs, macs)) = start_cluster(TEST, "vk-spk", Allocate::Test)
    else {
        return;
    };
    let nodes: Vec<&str> = configs.iter().map(|c| c.node.as_str()).collect();
    let owner = first(&nodes);
    let owner_index = nodes.iter().position(|n| *n == owner).expect("owner");
    let settled = wait_only(&lab, &mut speakers, &macs[owner_index], SETTLE_LIMIT);
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[owner_index]),
        "{VIP}: expected only {owner} ({}) to answer, got {settled:?}; logs:\n{}",
        macs[owner_index],
        logs(&speakers)
    );
    let settled_at = started.elapsed();
    let statuses = wait_status(&lab, &owner);
    assert!(
        statuses
            .iter()
            .any(|s| s.node == owner && s.interfaces == ["eth0"]),
        "no ServiceL2Status naming {owner}: {statuses:?}; logs:\n{}",
        logs(&speakers)
    );
    assert!(
        statuses.iter().all(|s| s.node == owner),
        "only the owner keeps a ServiceL2Status: {statuses:?}"
    );

    assert_eq!(
        status_owners(&lab, &owner),
        [format!("Pod/speaker-{owner}")],
        "the owner's ServiceL2Status is owned by its speaker Pod"
    );
    // Every speaker reports the configuration Valid in its ConfigurationState, as MetalLB's do.
    for node in &nodes {
        let result = wait_configuration_result(&lab, node);
        assert_eq!(
            result.as_deref(),
            Some("Valid"),
            "ConfigurationState speaker-{node}"
        );
    }
    let messages = wait_node_assigned(&lab, &owner);
    assert!(
        messages.iter().any(|m| m.contains(&format!("{owner:?}"))),
        "no nodeAssigned event naming {owner}: {messages:?}; logs:\n{}",
        logs(&speakers)
    );

    let next = kill_owner_and_wait(TEST, &lab, &mut speakers, &configs, &macs, &owner);
    let statuses = wait_status(&lab, &next);
    assert!(
        statuses.iter().any(|s| s.node == next),
        "no ServiceL2Status naming {next} after the failover: {statuses:?}"
    );
    // Everything above ran under MetalLB's own speaker RBAC plus the key acknowledgement
    // Lease Role: nothing vigil asked was refused.
    for s in &speakers {
        let log = std::fs::read_to_string(&s.log).unwrap_or_default();
        let refused: Vec<&str> = log.lines().filter(|l| l.contains("forbidden")).collect();
        assert!(
            refused.is_empty(),
            "{}: requests refused by MetalLB's RBAC:\n{}",
            s.node,
            refused.join("\n")
        );
    }
    for s in &mut speakers {
        if s.child.is_some() {
            s.check_running();
            assert!(s.stop(), "vigil speaker {} stops on SIGTERM", s.node);
        }
    }
    eprintln!(
        "{TEST}: {owner} answered alone after {settled_at:?}; total {:?}",
        started.elapsed()
    );
}

#[test]
fn vigil_speakers_fail_over_while_the_api_server_is_paused() {
    const TEST: &str = "vigil_speakers_fail_over_while_the_api_server_is_paused";
    let Some((mut lab, mut speakers, configs, macs)) =
        start_cluster(TEST, "vk-spp", Allocate::Test)
    else {
        return;
    };
    let nodes: Vec<&str> = configs.iter().map(|c| c.node.as_str()).collect();
    let owner = first(&nodes);
    let owner_index = nodes.iter().position(|n| *n == owner).expect("owner");
    let settled = wait_only(&lab, &mut speakers, &macs[owner_index], SETTLE_LIMIT);
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[owner_index]),
        "expected only {owner} to answer, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    lab.cp_mut().pause();
    let next = kill_owner_and_wait(TEST, &lab, &mut speakers, &configs, &macs, &owner);
    lab.cp_mut().resume();
    // After the API server is back, the survivors' caches resume and the answer stays right.
    let next_index = nodes.iter().position(|n| *n == next).expect("next");
    let statuses = wait_status(&lab, &next);
    assert!(
        statuses.iter().any(|s| s.node == next),
        "no ServiceL2Status naming {next} once the API server is back: {statuses:?}; logs:\n{}",
        logs(&speakers)
    );
    let after = wait_only(&lab, &mut speakers, &macs[next_index], SETTLE_LIMIT);
    assert!(
        !after.is_empty() && after.iter().all(|a| a.mac == macs[next_index]),
        "after the API server resumed expected only {next}, got {after:?}"
    );
}

#[test]
fn vigil_controller_allocates_and_vigil_speakers_announce() {
    const TEST: &str = "vigil_controller_allocates_and_vigil_speakers_announce";
    let started = Instant::now();
    let Some((lab, mut speakers, configs, macs)) =
        start_cluster(TEST, "vk-spc", Allocate::VigilController)
    else {
        return;
    };
    let nodes: Vec<&str> = configs.iter().map(|c| c.node.as_str()).collect();
    let owner = first(&nodes);
    let owner_index = nodes.iter().position(|n| *n == owner).expect("owner");
    let settled = wait_only(&lab, &mut speakers, &macs[owner_index], SETTLE_LIMIT);
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[owner_index]),
        "expected only {owner} to answer for the allocated {VIP}, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    let statuses = wait_status(&lab, &owner);
    assert!(
        statuses.iter().any(|s| s.node == owner),
        "no ServiceL2Status naming {owner}: {statuses:?}"
    );
    for s in &mut speakers {
        s.check_running();
        assert!(s.stop(), "{} stops on SIGTERM", s.node);
    }
    eprintln!(
        "{TEST}: allocated and answered by {owner}; total {:?}",
        started.elapsed()
    );
}

/// Adds Service `smoke/<name>` at `ip` with ready endpoints on every node.
fn add_service(lab: &KubeLab, configs: &[SpeakerConfig], name: &str, ip: Ipv4Addr) {
    let client = lab.cp().client().expect("admin client");
    lab.cp().block_on(async {
        create_service(&client, &TestService::load_balancer("smoke", name))
            .await
            .expect("service");
        let mut slice = TestSlice::for_service("smoke", name);
        for (i, config) in configs.iter().enumerate() {
            let endpoint = IpAddr::from([198, 18, 1, 20 + u8::try_from(i).unwrap()]);
            slice = slice.endpoint(TestEndpoint::ready(endpoint, &config.node));
        }
        create_endpoint_slice(&client, &slice)
            .await
            .expect("endpoint slice");
        let services: Api<Service> = Api::namespaced(client.clone(), "smoke");
        let status = serde_json::json!({
            "status": { "loadBalancer": { "ingress": [ { "ip": ip.to_string() } ] } }
        });
        services
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .expect("write status.loadBalancer.ingress");
    });
}

/// Asks for `ip` until `mac` alone answers (bounded by [`SETTLE_LIMIT`]); the last answers.
fn wait_only_for(
    lab: &KubeLab,
    speakers: &mut [VigilSpeaker],
    ip: Ipv4Addr,
    mac: &str,
) -> Vec<vigil_kubelab::ArpAnswer> {
    let ns = lab.bridge().ns("client");
    let end = Instant::now() + SETTLE_LIMIT;
    loop {
        let answers = arp_ask(&ns, "eth0", CLIENT_IP, ip, Duration::from_millis(200))
            .expect("ask ARP from the client");
        if (!answers.is_empty() && answers.iter().all(|a| a.mac == mac)) || Instant::now() > end {
            return answers;
        }
        for s in speakers.iter_mut() {
            s.check_running();
        }
    }
}

/// MetalLB's `excludel2.yaml` is a list of regular expressions searched anywhere in the
/// interface name: `th0` excludes `eth0`. The node MetalLB's election ranks first for
/// [`VIP`] excludes its only interface, so it wins and answers nowhere: nobody answers for
/// the VIP (MetalLB does not re-run the election), while a second VIP owned by another node
/// is answered. Restarted with MetalLB's shipped list (which keeps `eth0`), it answers.
#[test]
fn an_interface_excludel2_names_gets_no_arp_answer() {
    const TEST: &str = "an_interface_excludel2_names_gets_no_arp_answer";
    let nodes: Vec<&str> = SPEAKERS.iter().map(|(_, n, _)| *n).collect();
    let owner = first(&nodes);
    let shipped = format!(
        "announcedInterfacesToExclude: {:?}\n",
        vigil_k8s::excludel2::DEFAULT_EXCLUDES
    );
    let write = |dir: &Path, text: &str| {
        let path = dir.join("excludel2.yaml");
        std::fs::write(&path, text).expect("excludel2.yaml");
        vec![format!("--excludel2={}", path.display())]
    };
    let Some((lab, mut speakers, configs, macs)) =
        start_cluster_with(TEST, "vk-spx", Allocate::Test, |c, dir| {
            if c.node == owner {
                write(dir, "announcedInterfacesToExclude:\n  - th0\n")
            } else {
                write(dir, &shipped)
            }
        })
    else {
        return;
    };
    let owner_index = nodes.iter().position(|n| *n == owner).expect("owner");
    // A second VIP whose first-ranked node is another one proves the cluster answers.
    let (other_ip, other_owner) = (201..=209)
        .map(|d| Ipv4Addr::new(198, 18, 0, d))
        .map(|ip| (ip, vigil_lb::rank(nodes.iter().copied(), IpAddr::V4(ip))[0]))
        .find(|(_, o)| *o != owner)
        .expect("a VIP another node owns");
    add_service(&lab, &configs, "other", other_ip);
    let other_index = nodes.iter().position(|n| *n == other_owner).expect("index");
    let answers = wait_only_for(&lab, &mut speakers, other_ip, &macs[other_index]);
    assert!(
        !answers.is_empty() && answers.iter().all(|a| a.mac == macs[other_index]),
        "{other_ip}: expected {other_owner} alone, got {answers:?}; logs:\n{}",
        logs(&speakers)
    );
    // A node that answered before it heard the owner hands over for at most a second
    // (nobody claims the VIP): then ten questions in a row must go unanswered.
    let ns = lab.bridge().ns("client");
    let (mut silent, mut heard) = (0, Vec::new());
    let end = Instant::now() + SETTLE_LIMIT;
    while silent < 10 && Instant::now() < end {
        let answers = arp_ask(&ns, "eth0", CLIENT_IP, VIP, Duration::from_millis(200))
            .expect("ask ARP from the client");
        silent = if answers.is_empty() { silent + 1 } else { 0 };
        heard.extend(answers);
    }
    assert_eq!(
        silent,
        10,
        "{VIP}: {owner} excludes eth0 and wins, so nobody should answer; heard {heard:?}; logs:\n{}",
        logs(&speakers)
    );
    assert!(
        heard.iter().all(|a| a.mac != macs[owner_index]),
        "{owner} answered on its excluded eth0: {heard:?}"
    );
    // The same node with MetalLB's shipped list answers.
    speakers[owner_index].kill();
    let dir = lab.cp().work_dir().join("vigil").join(owner.as_str());
    let key = MemberlistKey::new(
        &std::fs::read_to_string(dir.join("memberlist-key").join("secretkey")).expect("key"),
    );
    let kubeconfigs = metallb::write_metallb_kubeconfigs(lab.cp()).expect("kubeconfigs");
    speakers[owner_index] = VigilSpeaker::start(
        &lab,
        &configs[owner_index],
        &kubeconfigs.speaker,
        &key,
        &write(&dir, &shipped),
    );
    let answers = wait_only_for(&lab, &mut speakers, VIP, &macs[owner_index]);
    assert!(
        !answers.is_empty() && answers.iter().all(|a| a.mac == macs[owner_index]),
        "{VIP}: expected {owner} alone once eth0 is no longer excluded, got {answers:?}; logs:\n{}",
        logs(&speakers)
    );
    eprintln!(
        "{TEST}: {owner} excluding eth0 by 'th0': never answered {VIP}, then 10 questions in a row unanswered ({} answers from others handing over before); {other_owner} answered {other_ip}; restarted with the shipped list, {owner} answered alone",
        heard.len()
    );
}

/// A bad MetalLB file stops `vigil speaker` before anything starts (no API server needed):
/// exit code 2 and a message naming the file and the field.
#[test]
fn bad_speaker_files_stop_the_start_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("vigil-spk-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let none = |name: &str| dir.join(name).display().to_string();
    let run = |excludel2: String, memberlist_config: String| {
        let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
            .args([
                "speaker",
                "--node-name=node-a",
                "--namespace=metallb-system",
                "--ml-bindaddr=127.0.0.1",
                "--ml-labels=app=metallb",
                "--port=0",
            ])
            .arg(format!("--excludel2={excludel2}"))
            .arg(format!("--memberlist-config={memberlist_config}"))
            .env_remove("KUBECONFIG")
            .output()
            .expect("run vigil speaker");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        r#"{"TCPTimeout": "10s", "IndirectChecks": 3, "RetransmitMult": 4, "SuspicionMult": 4,
            "SuspicionMaxTimeoutMult": 6, "PushPullInterval": "30s", "ProbeTimeout": "2s",
            "ProbeInterval": "1s", "DisableTcpPings": false, "AwarenessMaxMultiplier": 8,
            "GossipNodes": 3, "GossipInterval": "200ms", "GossipToTheDeadTime": "30s",
            "GossipVerifyIncoming": true, "GossipVerifyOutgoing": true, "EnableCompression": true,
            "HandoffQueueDepth": 1024, "UDPBufferSize": 1400, "QueueCheckInterval": "30s"}"#,
    )
    .expect("config.json");
    let (code, stderr) = run(none("none.yaml"), config.display().to_string());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("config.json") && stderr.contains("field ProbeTimeout"),
        "{stderr}"
    );
    let exclude = dir.join("excludel2.yaml");
    std::fs::write(&exclude, "announcedInterfacesToExclude: ['^eth(']\n").expect("excludel2");
    let (code, stderr) = run(exclude.display().to_string(), none("none.json"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("excludel2.yaml") && stderr.contains("announcedInterfacesToExclude"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// `/metrics` of the speaker at `ip:port`, fetched from the control plane's host (plain
/// HTTP, as vigil serves it), parsed into `name{labels}` -> value.
fn scrape(lab: &KubeLab, ip: IpAddr, port: u16) -> std::collections::BTreeMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let text = lab.cp().block_on(async {
        let mut s = tokio::net::TcpStream::connect((ip, port))
            .await
            .expect("connect to /metrics");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("ask /metrics");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read /metrics");
        out
    });
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// `status.result` and `status.errorSummary` of ConfigurationState `speaker-<node>` once
/// `done` accepts them (bounded); the last seen.
fn wait_configuration(
    lab: &KubeLab,
    node: &str,
    done: impl Fn(&str, &str) -> bool + Sync,
) -> (String, String) {
    let client = lab.cp().client().expect("admin client");
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", "ConfigurationState");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "configurationstates");
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, METALLB_NAMESPACE, &resource);
    lab.cp().block_on(async {
        let end = Instant::now() + SETTLE_LIMIT;
        loop {
            let status = api
                .get_opt(&format!("speaker-{node}"))
                .await
                .expect("get ConfigurationState")
                .map(|o| o.data["status"].clone())
                .unwrap_or_default();
            let text = |k: &str| status[k].as_str().unwrap_or_default().to_string();
            let (result, summary) = (text("result"), text("errorSummary"));
            if done(&result, &summary) || Instant::now() > end {
                break (result, summary);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

fn delete_metallb_object(lab: &KubeLab, plural: &str, kind: &str, name: &str) {
    let client = lab.cp().client().expect("admin client");
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", kind);
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client, METALLB_NAMESPACE, &resource);
    lab.cp()
        .block_on(api.delete(name, &kube::api::DeleteParams::default()))
        .unwrap_or_else(|e| panic!("delete {kind} {name}: {e}"));
}

const METRICS_PORT: u16 = 9120;

/// memberlist v0.5.1's `DefaultLANConfig` in MetalLB's config.json format.
const MEMBERLIST_LAN_JSON: &str = r#"{"TCPTimeout": "10s", "IndirectChecks": 3, "RetransmitMult": 4,
    "SuspicionMult": 4, "SuspicionMaxTimeoutMult": 6, "PushPullInterval": "30s",
    "ProbeTimeout": "500ms", "ProbeInterval": "1s", "DisableTcpPings": false,
    "AwarenessMaxMultiplier": 8, "GossipNodes": 3, "GossipInterval": "200ms",
    "GossipToTheDeadTime": "30s", "GossipVerifyIncoming": true, "GossipVerifyOutgoing": true,
    "EnableCompression": true, "HandoffQueueDepth": 1024, "UDPBufferSize": 1400,
    "QueueCheckInterval": "30s"}"#;

/// MetalLB's metrics from running `vigil speaker`s on `--port` (names, labels and values as
/// MetalLB's; one speaker gossips with MetalLB's memberlist `config.json`), then issue 13
/// item 5: MetalLB's half-valid configurations, each applied to the
/// real API server while the VIP is announced. An invalid pool and overlapping pools make
/// every speaker's ConfigurationState Invalid with MetalLB's reason and
/// `metallb_k8s_client_config_stale_bool` 1, while the last good configuration keeps the VIP
/// on its owner; an L2Advertisement naming an unknown pool is no error (MetalLB attaches it
/// to nothing); removing the pool of the announced IP is refused by the announcing speaker
/// alone (Invalid, keeps announcing), the others take it. Each repaired case goes back to
/// Valid and stale 0.
#[test]
fn metallb_metrics_and_half_valid_configurations() {
    const TEST: &str = "metallb_metrics_and_half_valid_configurations";
    let started = Instant::now();
    // One speaker that will not own the VIP gossips with MetalLB's memberlist config.json
    // (memberlist's LAN timing), the others with vigil's fast profile.
    let all: Vec<&str> = SPEAKERS.iter().map(|(_, n, _)| *n).collect();
    let tuned = vigil_lb::rank(all.iter().copied(), IpAddr::V4(VIP))[2].to_string();
    let Some((lab, mut speakers, configs, macs)) =
        start_cluster_with(TEST, "vk-spm", Allocate::Test, |c, dir| {
            let mut args = vec![format!("--port={METRICS_PORT}")];
            if c.node == tuned {
                let file = dir.join("config.json");
                std::fs::write(&file, MEMBERLIST_LAN_JSON).expect("config.json");
                args.push(format!("--memberlist-config={}", file.display()));
            }
            args
        })
    else {
        return;
    };
    let nodes: Vec<&str> = configs.iter().map(|c| c.node.as_str()).collect();
    let owner = first(&nodes);
    let owner_index = nodes.iter().position(|n| *n == owner).expect("owner");
    let settled = wait_only(&lab, &mut speakers, &macs[owner_index], SETTLE_LIMIT);
    assert!(
        !settled.is_empty() && settled.iter().all(|a| a.mac == macs[owner_index]),
        "expected only {owner} to answer, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    let announced = |node: &str| {
        format!(
            "metallb_speaker_announced{{ip=\"{VIP}\",node=\"{node}\",protocol=\"layer2\",service=\"smoke/web\"}}"
        )
    };
    let per_ip = |name: &str| format!("{name}{{ip=\"{VIP}\"}}");
    let scrape_all = || -> Vec<std::collections::BTreeMap<String, f64>> {
        configs
            .iter()
            .map(|c| scrape(&lab, c.ip, METRICS_PORT))
            .collect()
    };
    let before = scrape_all();
    for (i, (m, node)) in before.iter().zip(&nodes).enumerate() {
        let series: Vec<&String> = m
            .keys()
            .filter(|k| k.starts_with("metallb_speaker_announced{"))
            .collect();
        if i == owner_index {
            assert_eq!(m.get(&announced(node)), Some(&1.0), "{node}: {series:?}");
        } else {
            assert!(series.is_empty(), "{node} announces nothing: {series:?}");
        }
        assert_eq!(
            m.get("metallb_k8s_client_config_loaded_bool"),
            Some(&1.0),
            "{node}"
        );
        assert_eq!(
            m.get("metallb_k8s_client_config_stale_bool"),
            Some(&0.0),
            "{node}"
        );
        assert!(
            m.get("metallb_k8s_client_updates_total")
                .is_some_and(|v| *v > 0.0),
            "{node}: object updates counted"
        );
        assert_eq!(
            m.get("metallb_k8s_client_update_errors_total"),
            Some(&0.0),
            "{node}"
        );
        // The speaker core's count of membership events: this node saw the other two join.
        let joins = m
            .get("vigil_gossip_member_events_total{event=\"join\"}")
            .copied();
        assert!(joins.is_some_and(|j| j >= 2.0), "{node}: joins {joins:?}");
        let alive = m.get("vigil_gossip_members{state=\"alive\"}").copied();
        assert_eq!(alive, Some(3.0), "{node}: members alive");
    }
    let tuned_log = speakers
        .iter()
        .find(|s| s.node == tuned)
        .map(|s| std::fs::read_to_string(&s.log).unwrap_or_default())
        .unwrap_or_default();
    assert!(
        tuned_log.contains("\"event\":\"memberlist_config_loaded\""),
        "{tuned} gossips with its config.json; log:\n{tuned_log}"
    );
    // Real ARP questions: the owner counts each one it received and answered.
    let ns = lab.bridge().ns("client");
    let mut answered = 0;
    for _ in 0..5 {
        let answers = arp_ask(&ns, "eth0", CLIENT_IP, VIP, Duration::from_millis(200))
            .expect("ask ARP from the client");
        answered += usize::from(answers.iter().any(|a| a.mac == macs[owner_index]));
    }
    assert_eq!(answered, 5, "every question answered by {owner}");
    let after = scrape_all();
    let delta = |i: usize, name: &str| {
        after[i].get(&per_ip(name)).copied().unwrap_or(0.0)
            - before[i].get(&per_ip(name)).copied().unwrap_or(0.0)
    };
    assert!(
        delta(owner_index, "metallb_layer2_requests_received") >= 5.0,
        "{owner}: requests {:?} -> {:?}",
        before[owner_index].get(&per_ip("metallb_layer2_requests_received")),
        after[owner_index].get(&per_ip("metallb_layer2_requests_received"))
    );
    assert!(
        delta(owner_index, "metallb_layer2_responses_sent") >= 5.0,
        "{owner}: responses"
    );
    assert!(
        after[owner_index]
            .get(&per_ip("metallb_layer2_gratuitous_sent"))
            .is_some_and(|v| *v > 0.0),
        "{owner}: its takeover sent gratuitous ARP"
    );
    for (i, node) in nodes.iter().enumerate().filter(|(i, _)| *i != owner_index) {
        // (A node that was alone at its start may have answered then.)
        assert_eq!(
            delta(i, "metallb_layer2_responses_sent"),
            0.0,
            "{node} answered none of the five"
        );
    }

    let client = lab.cp().client().expect("admin client");
    let apply = |what: &str, yaml: &str| {
        lab.cp()
            .block_on(apply_yaml(&client, what, yaml))
            .unwrap_or_else(|e| panic!("apply {what}: {e}"));
    };
    let still_owner = |case: &str, speakers: &mut [VigilSpeaker]| {
        let answers = wait_only(&lab, speakers, &macs[owner_index], SETTLE_LIMIT);
        assert!(
            !answers.is_empty() && answers.iter().all(|a| a.mac == macs[owner_index]),
            "{case}: the last good configuration keeps {VIP} on {owner}, got {answers:?}"
        );
    };
    let all_stale = |case: &str, want: f64| {
        for (c, node) in configs.iter().zip(&nodes) {
            let m = scrape(&lab, c.ip, METRICS_PORT);
            assert_eq!(
                m.get("metallb_k8s_client_config_stale_bool"),
                Some(&want),
                "{case}: {node} stale"
            );
        }
    };
    let all_valid = |case: &str| {
        for node in &nodes {
            let (result, summary) = wait_configuration(&lab, node, |r, _| r == "Valid");
            assert_eq!(result, "Valid", "{case} repaired: {node}: {summary}");
        }
    };
    let bad_pool = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: bad, namespace: metallb-system}
spec: {addresses: ["198.18.2.0/33"]}
"#;
    let overlapping = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: overlap, namespace: metallb-system}
spec: {addresses: ["198.18.0.192/27"]}
"#;
    for (case, yaml, name, reason) in [
        ("invalid pool", bad_pool, "bad", "parsing address pool bad"),
        (
            "overlapping pools",
            overlapping,
            "overlap",
            "overlaps with already defined CIDR",
        ),
    ] {
        apply(case, yaml);
        for node in &nodes {
            let (result, summary) =
                wait_configuration(&lab, node, |r, s| r == "Invalid" && s.contains(reason));
            assert!(
                result == "Invalid" && summary.contains(reason),
                "{case}: {node}: {result} {summary:?}; logs:\n{}",
                logs(&speakers)
            );
        }
        all_stale(case, 1.0);
        still_owner(case, &mut speakers);
        delete_metallb_object(&lab, "ipaddresspools", "IPAddressPool", name);
        all_valid(case);
        // MetalLB's quirk: back to the configuration in force is "unchanged", so the stale
        // flag stays until another configuration is applied.
        all_stale(case, 1.0);
    }
    // A configuration that does not parse is no update error in MetalLB.
    for (c, node) in configs.iter().zip(&nodes) {
        let m = scrape(&lab, c.ip, METRICS_PORT);
        assert_eq!(
            m.get("metallb_k8s_client_update_errors_total"),
            Some(&0.0),
            "{node}"
        );
    }

    // An advertisement naming a pool that does not exist attaches to nothing: no error.
    apply(
        "unknown pool",
        r#"
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: ghost, namespace: metallb-system}
spec: {ipAddressPools: [no-such-pool]}
"#,
    );
    std::thread::sleep(Duration::from_secs(1));
    all_valid("unknown pool");
    still_owner("unknown pool", &mut speakers);

    // The announced IP's pool goes: the announcing speaker refuses, the others accept.
    delete_metallb_object(&lab, "ipaddresspools", "IPAddressPool", "lab");
    let (result, summary) = wait_configuration(&lab, &owner, |r, _| r == "Invalid");
    assert!(
        result == "Invalid" && summary.contains("general handler sync state error"),
        "{owner} announces {VIP}: {result} {summary:?}"
    );
    for node in nodes.iter().filter(|n| **n != owner) {
        let (result, summary) = wait_configuration(&lab, node, |r, _| r == "Valid");
        assert_eq!(
            result, "Valid",
            "{node} announces nothing from lab: {summary}"
        );
    }
    still_owner("pool of the announced IP removed", &mut speakers);
    for (i, (c, node)) in configs.iter().zip(&nodes).enumerate() {
        let m = scrape(&lab, c.ip, METRICS_PORT);
        let refused = i == owner_index;
        // The others applied a new configuration: their stale flag from the repaired
        // cases above clears; the owner refused it.
        assert_eq!(
            m.get("metallb_k8s_client_config_stale_bool"),
            Some(&if refused { 1.0 } else { 0.0 }),
            "{node}: stale after the pool of the announced IP went"
        );
        let errors = m
            .get("metallb_k8s_client_update_errors_total")
            .copied()
            .unwrap_or(0.0);
        assert_eq!(errors > 0.0, refused, "{node}: update errors {errors}");
        if refused {
            assert_eq!(
                m.get(&announced(node)),
                Some(&1.0),
                "{node} still announces"
            );
        }
    }
    apply("the pool back", POOL_AND_AD);
    all_valid("pool back");
    all_stale("pool back", 0.0);
    still_owner("pool back", &mut speakers);
    for s in &mut speakers {
        s.check_running();
    }
    eprintln!(
        "{TEST}: metrics as MetalLB's on {owner} and the others; 4 half-valid cases as MetalLB; total {:?}",
        started.elapsed()
    );
}
