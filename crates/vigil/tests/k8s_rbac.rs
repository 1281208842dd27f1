//! `vigil controller` and `vigil speaker` with exactly the permissions our manifests grant:
//! `deploy/kubernetes/overlays/fresh-install` (rendered by real `kubectl kustomize`) is applied
//! for real to vigil-testenv (namespace, CRDs, RBAC, the DaemonSet and Deployment objects: no
//! kubelet runs, so they start no Pods), and the test runs the programs as their Pods would:
//! each with its ServiceAccount's token (a static token the API server maps to the account),
//! the command, arguments and environment taken from the rendered DaemonSet and Deployment.
//! A permission the manifests lack shows up here as a program that does not work (and as a
//! Forbidden in its log).
//!
//! Lab: API server on `cp` (198.18.0.2), speaker hosts `a` and `b` (198.18.0.11-12), a client
//! (198.18.0.100). Root, the Go programs (vigil-testenv, kubectl) needed: skips otherwise,
//! fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`. No durations are asserted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret, Service};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use vigil_k8s::key_ack;
use vigil_k8s::secret::{KEYRING_ENTRY, KeyringForm, Phase, SECRET_KEY_FILE, key_id};
use vigil_kubelab::deploy::{self, NAMESPACE, Program};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, TestEndpoint, TestNode, TestPod, TestService, TestSlice,
    apply_yaml, arp_ask, create_endpoint_slice, create_node, create_pod, create_service,
    ensure_namespace, wait_crd_established,
};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
const NODES: [(&str, &str, [u8; 4]); 2] = [
    ("a", "node-a", [198, 18, 0, 11]),
    ("b", "node-b", [198, 18, 0, 12]),
];
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
  ipAddressPools: [lab]
  interfaces: [eth0]
"#;
/// Bound on every wait (two shared cores).
const LIMIT: Duration = Duration::from_secs(60);
/// The controller's key rotation period here (the default is a day).
const ROTATION_PERIOD: &str = "4s";

/// A `vigil` process on a lab host, SIGKILLed when dropped.
struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn check_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!("{} exited ({status}); log:\n{}", self.name, self.log_text());
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The first container of the rendered workload `kind` (DaemonSet or Deployment).
fn container(rendered: &str, kind: &str) -> Value {
    let docs = deploy::documents_of_kinds(rendered, &[kind]).expect("rendered YAML");
    assert_eq!(docs.len(), 1, "one {kind}");
    docs[0]["spec"]["template"]["spec"]["containers"][0].clone()
}

/// The workload's plain `env` values (`valueFrom` ones are the Pod's own facts: the caller
/// sets them, as the kubelet would).
fn plain_env(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            Some((
                e["name"].as_str()?.to_string(),
                e["value"].as_str()?.to_string(),
            ))
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// Starts the workload's command (`[/usr/bin/vigil, <sub>]`, as deploy/image/Containerfile
/// installs it: our binary stands for the image's) with
/// its arguments, `env`, and `--kubeconfig`, in namespace `netns`.
fn start(
    lab: &KubeLab,
    name: &str,
    netns: &str,
    container: &Value,
    env: &BTreeMap<String, String>,
    kubeconfig: &Path,
) -> Process {
    let command = strings(&container["command"]);
    assert_eq!(
        command.first().map(String::as_str),
        Some("/usr/bin/vigil"),
        "{name}: command {command:?}"
    );
    let dir = lab.cp().work_dir().join("rbac").join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("log");
    let child = Command::new("ip")
        .args(["netns", "exec", netns])
        .arg(env!("CARGO_BIN_EXE_vigil"))
        .args(&command[1..])
        .args(strings(&container["args"]))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env_remove("KUBECONFIG")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start vigil");
    Process {
        name: name.to_string(),
        child,
        log,
    }
}

fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
}

fn dynamic(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", kind);
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Polls `probe` (on the lab runtime) until it gives `Some`, checking the processes between
/// tries; `None` after [`LIMIT`].
fn wait_for<T: Send, F: Future<Output = Option<T>> + Send>(
    lab: &KubeLab,
    processes: &mut [&mut Process],
    mut probe: impl FnMut() -> F,
) -> Option<T> {
    let end = Instant::now() + LIMIT;
    loop {
        if let Some(v) = lab.cp().block_on(probe()) {
            return Some(v);
        }
        for p in processes.iter_mut() {
            p.check_running();
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn controller_and_speakers_work_with_exactly_our_rbac() {
    const TEST: &str = "controller_and_speakers_work_with_exactly_our_rbac";
    if !vigil_netlab::root_or_skip(TEST) {
        return;
    }
    let Some(kubectl) = deploy::kubectl_binary(TEST) else {
        return;
    };
    let config = ControlPlaneConfig {
        tokens: deploy::service_account_tokens(),
        ..ControlPlaneConfig::default()
    };
    let Some(mut lab) = KubeLab::start("rb-run", TEST, config) else {
        return;
    };
    for (host, _, ip) in NODES {
        plug(&mut lab, host, Ipv4Addr::from(ip));
    }
    plug(&mut lab, "client", CLIENT_IP);
    let client = lab.cp().client().expect("admin client");

    // Our install, for real.
    let rendered = deploy::kustomize(&kubectl, "fresh-install").expect("kustomize");
    // The README's command, word for word.
    let overlay = deploy::overlay_dir("fresh-install").display().to_string();
    deploy::kubectl_in_lab(
        lab.cp(),
        &kubectl,
        &["apply", "--server-side", "-k", &overlay],
        None,
    )
    .expect("kubectl apply --server-side -k deploy/kubernetes/overlays/fresh-install");
    let speaker = container(&rendered, "DaemonSet");
    let controller = container(&rendered, "Deployment");
    let speaker_env = plain_env(&speaker);
    let labels = speaker_env["METALLB_ML_LABELS"].clone();
    lab.cp().block_on(async {
        for crd in [
            "ipaddresspools",
            "l2advertisements",
            "servicel2statuses",
            "configurationstates",
        ] {
            wait_crd_established(&client, &format!("{crd}.metallb.io"), LIMIT)
                .await
                .expect("CRD");
        }
        apply_yaml(&client, "pool and advertisement", POOL_AND_AD)
            .await
            .expect("pool");
        // What the kubelet and the DaemonSet controller would have made: Nodes, and a
        // speaker Pod per node with the DaemonSet's labels and its IP.
        for (_, node, ip) in NODES {
            let ip = IpAddr::from(ip);
            create_node(&client, &TestNode::new(node).internal_ip(ip))
                .await
                .expect("node");
            let mut pod = TestPod::new(NAMESPACE, &format!("vigil-speaker-{node}"))
                .on_node(node)
                .ip(ip)
                .host_ip(ip);
            for pair in labels.split(',') {
                let (k, v) = pair.split_once('=').expect("label");
                pod = pod.label(k, v);
            }
            create_pod(&client, &pod).await.expect("pod");
        }
        ensure_namespace(&client, "app").await.expect("namespace");
        create_service(&client, &TestService::load_balancer("app", "web"))
            .await
            .expect("service");
        let mut slice = TestSlice::for_service("app", "web");
        for (i, (_, node, _)) in NODES.iter().enumerate() {
            let ip = IpAddr::from([198, 18, 1, 10 + u8::try_from(i).unwrap()]);
            slice = slice.endpoint(TestEndpoint::ready(ip, node));
        }
        create_endpoint_slice(&client, &slice).await.expect("slice");
    });

    // The controller, as the Deployment's Pod, with the controller's token.
    let mut env = plain_env(&controller);
    env.insert("METALLB_POD_NAME".into(), "vigil-controller-0".into());
    env.insert("METALLB_NAMESPACE".into(), NAMESPACE.into()); // the token mount's namespace file
    let kubeconfig = deploy::write_kubeconfig(lab.cp(), Program::Controller).expect("kubeconfig");
    // A short rotation period (the chart's keyRotationPeriod adds exactly this flag), so the
    // rotation's reads and writes run under these permissions too.
    let mut controller = controller;
    controller["args"]
        .as_array_mut()
        .expect("args")
        .push(format!("--key-rotation-period={ROTATION_PERIOD}").into());
    // ... and the test's short steps (the defaults keep the old key for minutes).
    for flag in ["--key-rotation-settle=1s", "--key-rotation-retain=2s"] {
        controller["args"]
            .as_array_mut()
            .expect("args")
            .push(flag.into());
    }
    let mut ctl = start(
        &lab,
        "controller",
        lab.cp().ns(),
        &controller,
        &env,
        &kubeconfig,
    );
    let secret_name = env["METALLB_ML_SECRET_NAME"].clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let key = wait_for(&lab, &mut [&mut ctl], || {
        let secrets = secrets.clone();
        let name = secret_name.clone();
        async move {
            let s = secrets.get_opt(&name).await.ok()??;
            let owners = s.metadata.owner_references.unwrap_or_default();
            assert!(
                owners
                    .iter()
                    .any(|o| o.kind == "Deployment" && o.name == "vigil-controller"),
                "the Secret is owned by the Deployment: {owners:?}"
            );
            s.data?.get("secretkey").map(|k| k.0.clone())
        }
    })
    .unwrap_or_else(|| {
        panic!(
            "{TEST}: no memberlist Secret {secret_name}; controller log:\n{}",
            ctl.log_text()
        )
    });
    let services: Api<Service> = Api::namespaced(client.clone(), "app");
    let ingress = wait_for(&lab, &mut [&mut ctl], || {
        let services = services.clone();
        async move {
            let svc = services.get("web").await.ok()?;
            svc.status?
                .load_balancer?
                .ingress?
                .into_iter()
                .find_map(|i| i.ip)
        }
    });
    assert_eq!(
        ingress.as_deref(),
        Some("198.18.0.200"),
        "{TEST}: allocation; controller log:\n{}",
        ctl.log_text()
    );
    let pools = dynamic(&client, "IPAddressPool", "ipaddresspools");
    let assigned = wait_for(&lab, &mut [&mut ctl], || {
        let pools = pools.clone();
        async move {
            pools.get("lab").await.ok()?.data["status"]["assignedIPv4"]
                .as_i64()
                .filter(|n| *n == 1)
        }
    });
    assert_eq!(
        assigned,
        Some(1),
        "{TEST}: pool counters; controller log:\n{}",
        ctl.log_text()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = lab
        .cp()
        .block_on(leases.get("vigil-controller"))
        .expect("leader Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("vigil-controller-0"));

    // The speakers, as the DaemonSet's Pods, with the speaker's token and the key the
    // controller made (mounted from the Secret in a cluster).
    let kubeconfig = deploy::write_kubeconfig(lab.cp(), Program::Speaker).expect("kubeconfig");
    // The acknowledgement heartbeat shortened to match the test's rotation steps.
    let mut speaker_fast_acks = speaker.clone();
    speaker_fast_acks["args"]
        .as_array_mut()
        .expect("args")
        .push("--key-ack-interval=1s".into());
    let mut speakers: Vec<Process> = Vec::new();
    for (host, node, ip) in NODES {
        let key_dir = lab.cp().work_dir().join("rbac").join(format!("key-{node}"));
        std::fs::create_dir_all(&key_dir).expect("key dir");
        std::fs::write(key_dir.join("secretkey"), &key).expect("key file");
        let ip = Ipv4Addr::from(ip).to_string();
        let mut env = speaker_env.clone();
        for (k, v) in [
            ("METALLB_NODE_NAME", node.to_string()),
            ("METALLB_POD_NAME", format!("vigil-speaker-{node}")),
            ("METALLB_HOST", ip.clone()),
            ("METALLB_ML_BIND_ADDR", ip),
            ("METALLB_NAMESPACE", NAMESPACE.to_string()),
            ("METALLB_ML_SECRET_KEY_PATH", key_dir.display().to_string()),
        ] {
            env.insert(k.to_string(), v);
        }
        let ns = lab.bridge().ns(host);
        speakers.push(start(
            &lab,
            node,
            &ns,
            &speaker_fast_acks,
            &env,
            &kubeconfig,
        ));
    }

    // Exactly one node answers ARP for the VIP.
    let client_ns = lab.bridge().ns("client");
    let macs: Vec<String> = NODES
        .iter()
        .map(|(h, _, _)| lab.bridge().mac(h, "eth0"))
        .collect();
    let end = Instant::now() + LIMIT;
    let owner = loop {
        let answers = arp_ask(
            &client_ns,
            "eth0",
            CLIENT_IP,
            VIP,
            Duration::from_millis(200),
        )
        .expect("ARP");
        if let [one] = answers.as_slice() {
            break macs.iter().position(|m| *m == one.mac).map(|i| NODES[i].1);
        }
        for s in &mut speakers {
            s.check_running();
        }
        assert!(
            Instant::now() < end,
            "{TEST}: no single ARP answer for {VIP}: {answers:?}; logs:\n{}",
            speakers
                .iter()
                .map(|s| format!("--- {}\n{}", s.name, s.log_text()))
                .collect::<String>()
        );
    }
    .expect("the answer comes from a speaker host");

    // What the speakers write: the owner's ServiceL2Status, every speaker's ConfigurationState
    // (Valid), the nodeAssigned Event.
    let statuses = dynamic(&client, "ServiceL2Status", "servicel2statuses");
    let states = dynamic(&client, "ConfigurationState", "configurationstates");
    let events: Api<Event> = Api::namespaced(client.clone(), "app");
    let mut all: Vec<&mut Process> = speakers.iter_mut().collect();
    all.push(&mut ctl);
    let status_node = wait_for(&lab, &mut all, || {
        let statuses = statuses.clone();
        async move {
            let list = statuses.list(&ListParams::default()).await.ok()?;
            list.items
                .iter()
                .find_map(|o| o.data["status"]["node"].as_str().map(str::to_string))
        }
    });
    assert_eq!(
        status_node.as_deref(),
        Some(owner),
        "{TEST}: ServiceL2Status of the owner"
    );
    for (_, node, _) in NODES {
        let result = wait_for(&lab, &mut all, || {
            let states = states.clone();
            async move {
                let o = states.get_opt(&format!("speaker-{node}")).await.ok()??;
                o.data["status"]["result"].as_str().map(str::to_string)
            }
        });
        assert_eq!(
            result.as_deref(),
            Some("Valid"),
            "{TEST}: ConfigurationState of {node}"
        );
    }
    let assigned = wait_for(&lab, &mut all, || {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default().fields("reason=nodeAssigned"))
                .await
                .ok()?;
            list.items
                .into_iter()
                .find_map(|e| e.message.filter(|m| m.contains(owner)))
        }
    });
    assert!(
        assigned.is_some(),
        "{TEST}: nodeAssigned Event naming {owner}"
    );

    // The DaemonSet's probes (path and named port) are what the speaker serves.
    let port = speaker["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "metrics")
        .and_then(|p| p["containerPort"].as_u64())
        .expect("the metrics port");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(speaker[probe]["httpGet"]["port"], "metrics", "{probe}");
        let path = speaker[probe]["httpGet"]["path"]
            .as_str()
            .expect("probe path");
        for (host, node, ip) in NODES {
            let addr = std::net::SocketAddr::from((ip, u16::try_from(port).unwrap()));
            let status =
                vigil_netlab::netns::run_in(&lab.bridge().ns(host), || http_status(addr, path))
                    .expect("enter the host's namespace");
            assert_eq!(
                status.as_deref(),
                Some("200"),
                "{TEST}: {probe} GET {path} on {node} ({addr})"
            );
        }
    }

    // The Deployment's probes and metrics port are what the controller serves.
    let named_port = |c: &Value, name: &str| -> u16 {
        c["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or_else(|| panic!("port {name}"))
    };
    let cp_ip = lab.cp().addr().ip();
    for probe in ["livenessProbe", "readinessProbe"] {
        let port = controller[probe]["httpGet"]["port"]
            .as_str()
            .expect("a named port");
        let path = controller[probe]["httpGet"]["path"]
            .as_str()
            .expect("probe path");
        let addr = std::net::SocketAddr::new(cp_ip, named_port(&controller, port));
        let status = vigil_netlab::netns::run_in(lab.cp().ns(), || http_status(addr, path))
            .expect("enter the control plane's namespace");
        assert_eq!(
            status.as_deref(),
            Some("200"),
            "{TEST}: controller {probe} GET {path} ({addr})"
        );
    }
    let addr = std::net::SocketAddr::new(cp_ip, named_port(&controller, "metrics"));
    let status = vigil_netlab::netns::run_in(lab.cp().ns(), || http_status(addr, "/metrics"))
        .expect("enter the control plane's namespace");
    assert_eq!(
        status.as_deref(),
        Some("200"),
        "{TEST}: controller GET /metrics ({addr})"
    );

    // A key rotation, done under these permissions: the controller rewrites the keyring in the
    // Secret, each speaker follows it and acknowledges in its Lease, until a new key is the
    // only one and every speaker sends with it.
    let first_key = String::from_utf8(key.clone()).expect("utf-8 key");
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let rotated = wait_for(&lab, &mut all, || {
        let secrets = secrets.clone();
        let leases = leases.clone();
        let (name, first) = (secret_name.clone(), first_key.clone());
        async move {
            let data = secrets.get(&name).await.ok()?.data?;
            let entry = |k: &str| data.get(k).map(|b| b.0.clone());
            let form =
                KeyringForm::parse(&entry(KEYRING_ENTRY)?, entry(SECRET_KEY_FILE).as_deref())
                    .ok()?;
            let steady_on_new =
                form.phase == Phase::Steady && form.keys.len() == 1 && form.keys[0] != first;
            if !steady_on_new {
                return None;
            }
            let id = key_id(form.keys[0].as_bytes());
            let acks: Vec<_> = leases
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .filter_map(key_ack::from_lease)
                .collect();
            let all_ack = NODES.iter().all(|(_, node, _)| {
                acks.iter()
                    .any(|a| a.node == *node && a.primary.as_deref() == Some(id.as_str()))
            });
            all_ack.then_some(id)
        }
    });
    assert!(
        rotated.is_some(),
        "{TEST}: no key rotation completed and acknowledged by both speakers; logs:\n{}",
        all.iter()
            .map(|p| format!("--- {}\n{}", p.name, p.log_text()))
            .collect::<String>()
    );

    // And nobody was refused anything on the way.
    for p in &all {
        let log = p.log_text();
        assert!(
            !log.to_lowercase().contains("forbidden"),
            "{}: a request was Forbidden:\n{log}",
            p.name
        );
    }
    println!(
        "{TEST}: with only our RBAC, vigil controller allocated {VIP} and created Secret {secret_name}; \
         {owner} announces it (ARP, ServiceL2Status, nodeAssigned), both speakers report Valid; \
         a key rotation completed and both speakers acknowledged the new key"
    );
}

/// The status code of `GET path` at `addr` (HTTP/1.0, bounded), or `None`.
fn http_status(addr: std::net::SocketAddr, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head[..n]).into_owned();
    line.split_whitespace().nth(1).map(str::to_string)
}
