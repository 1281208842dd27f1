//! `vigil controller` and `vigil speaker` with exactly the permissions our manifests grant:
//! `deploy/kubernetes/overlays/fresh-install` (rendered by real `kubectl kustomize`) is applied
//! for real to vigil-testenv (namespace, CRDs, RBAC, the DaemonSet and Deployment objects: no
//! kubelet runs, so they start no Pods), and the test runs the programs as their Pods would:
//! each with its ServiceAccount's token (a static token the API server maps to the account),
//! the command, arguments and environment taken from the rendered DaemonSet and Deployment.
//! A permission the manifests lack shows up here as a program that does not work (and as a
//! Forbidden in its log).
//!
//! Lab: `vigil_kubelab::cluster` with two speaker hosts and nothing installed
//! ([`Install::Nothing`]): API server on `cp` (198.18.0.2), speaker hosts `a` and `b`
//! (198.18.0.11-12), a client (198.18.0.100). Root, the Go programs (vigil-testenv, kubectl)
//! needed: skips otherwise, fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`. No
//! durations are asserted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use vigil_k8s::key_ack;
use vigil_k8s::secret::{KEYRING_ENTRY, KeyringForm, Phase, SECRET_KEY_FILE, key_id};
use vigil_kubelab::cluster::{
    Cluster, ClusterSpec, Install, LabProcess, LbService, fresh_log, http_get, https_get, pool_yaml,
};
use vigil_kubelab::deploy::{self, NAMESPACE, Program};
use vigil_kubelab::{TestPod, create_node, create_pod, wait_crd_established};

const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
/// The pool the VIP comes from, announced on eth0.
const POOL: &str = "198.18.0.200-198.18.0.209";
/// Bound on every wait (two shared cores).
const LIMIT: Duration = Duration::from_secs(60);
/// The controller's key rotation period here (the default is a day).
const ROTATION_PERIOD: &str = "4s";

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
/// installs it: our binary stands for the image's) with its arguments, `env`, and
/// `--kubeconfig`, in namespace `netns`; it logs to `vigil/<name>/` in the lab.
fn start(
    c: &Cluster,
    name: &str,
    netns: &str,
    container: &Value,
    env: &BTreeMap<String, String>,
    kubeconfig: &Path,
) -> LabProcess {
    let command = strings(&container["command"]);
    assert_eq!(
        command.first().map(String::as_str),
        Some("/usr/bin/vigil"),
        "{name}: command {command:?}"
    );
    let mut args = command[1..].to_vec();
    args.extend(strings(&container["args"]));
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    LabProcess::spawn(
        name,
        netns,
        Path::new(env!("CARGO_BIN_EXE_vigil")),
        &args,
        &env,
        fresh_log(&c.dir(name), "vigil"),
    )
}

fn dynamic(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", kind);
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Every process's whole log, each under its name.
fn logs(processes: &[&mut LabProcess]) -> String {
    processes
        .iter()
        .map(|p| format!("--- {}\n{}", p.name(), p.log_text()))
        .collect()
}

/// The status code of `GET path` at `addr` from lab namespace `ns` (`None`: no answer).
fn http_status(ns: &str, addr: SocketAddr, path: &str) -> Option<u16> {
    http_get(ns, addr, path).ok().map(|a| a.status)
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
    let spec = ClusterSpec {
        install: Install::Nothing,
        ..ClusterSpec::nodes(2)
    };
    let Some(c) = Cluster::start(TEST, "rb-run", &spec) else {
        return;
    };
    let client = c.client().clone();

    // Our install, for real.
    let rendered = deploy::kustomize(&kubectl, "fresh-install").expect("kustomize");
    // The README's command, word for word.
    let overlay = deploy::overlay_dir("fresh-install").display().to_string();
    deploy::kubectl_in_lab(
        c.lab.cp(),
        &kubectl,
        &["apply", "--server-side", "-k", &overlay],
        None,
    )
    .expect("kubectl apply --server-side -k deploy/kubernetes/overlays/fresh-install");
    let speaker = container(&rendered, "DaemonSet");
    let controller = container(&rendered, "Deployment");
    let speaker_env = plain_env(&speaker);
    let labels = speaker_env["METALLB_ML_LABELS"].clone();
    c.block_on(async {
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
    });
    c.apply("pool and advertisement", &pool_yaml(&[POOL], &["eth0"]));
    // What the kubelet and the DaemonSet controller would have made: Nodes, and a speaker Pod
    // per node with the DaemonSet's labels and its IP.
    c.block_on(async {
        for s in &c.speakers {
            create_node(&client, &s.test_node()).await.expect("node");
            let mut pod = TestPod::new(NAMESPACE, &format!("vigil-speaker-{}", s.node))
                .on_node(&s.node)
                .ip(s.ip)
                .host_ip(s.ip);
            for pair in labels.split(',') {
                let (k, v) = pair.split_once('=').expect("label");
                pod = pod.label(k, v);
            }
            create_pod(&client, &pod).await.expect("pod");
        }
    });
    c.namespace("app");
    c.add_service(&LbService::new("app", "web").endpoints_on(&c.nodes(), 10));

    // The controller, as the Deployment's Pod, with the controller's token.
    let mut env = plain_env(&controller);
    env.insert("METALLB_POD_NAME".into(), "vigil-controller-0".into());
    env.insert("METALLB_NAMESPACE".into(), NAMESPACE.into()); // the token mount's namespace file
    let kubeconfig = deploy::write_kubeconfig(c.lab.cp(), Program::Controller).expect("kubeconfig");
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
        &c,
        "controller",
        c.lab.cp().ns(),
        &controller,
        &env,
        &kubeconfig,
    );
    let secret_name = env["METALLB_ML_SECRET_NAME"].clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let key = c
        .wait_for(
            LIMIT,
            || ctl.check_running(),
            || {
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
            },
        )
        .unwrap_or_else(|| {
            panic!(
                "{TEST}: no memberlist Secret {secret_name}; controller log:\n{}",
                ctl.log_text()
            )
        });
    let ingress = c.wait_ingress("app", "web", LIMIT, || ctl.check_running());
    assert_eq!(
        ingress,
        Some(IpAddr::V4(VIP)),
        "{TEST}: allocation; controller log:\n{}",
        ctl.log_text()
    );
    let pools = dynamic(&client, "IPAddressPool", "ipaddresspools");
    let assigned = c.wait_for(
        LIMIT,
        || ctl.check_running(),
        || {
            let pools = pools.clone();
            async move {
                pools.get("lab").await.ok()?.data["status"]["assignedIPv4"]
                    .as_i64()
                    .filter(|n| *n == 1)
            }
        },
    );
    assert_eq!(
        assigned,
        Some(1),
        "{TEST}: pool counters; controller log:\n{}",
        ctl.log_text()
    );
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = c
        .block_on(leases.get("vigil-controller"))
        .expect("leader Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("vigil-controller-0"));

    // The speakers, as the DaemonSet's Pods, with the speaker's token and the key the
    // controller made (mounted from the Secret in a cluster).
    let kubeconfig = deploy::write_kubeconfig(c.lab.cp(), Program::Speaker).expect("kubeconfig");
    // The acknowledgement heartbeat shortened to match the test's rotation steps.
    let mut speaker_fast_acks = speaker.clone();
    speaker_fast_acks["args"]
        .as_array_mut()
        .expect("args")
        .push("--key-ack-interval=1s".into());
    let mut speakers: Vec<LabProcess> = Vec::new();
    for s in &c.speakers {
        let key_dir = c.dir(&s.node).join("secret");
        std::fs::create_dir_all(&key_dir).expect("key dir");
        std::fs::write(key_dir.join("secretkey"), &key).expect("key file");
        let ip = s.ip.to_string();
        let mut env = speaker_env.clone();
        for (k, v) in [
            ("METALLB_NODE_NAME", s.node.clone()),
            ("METALLB_POD_NAME", format!("vigil-speaker-{}", s.node)),
            ("METALLB_HOST", ip.clone()),
            ("METALLB_ML_BIND_ADDR", ip),
            ("METALLB_NAMESPACE", NAMESPACE.to_string()),
            ("METALLB_ML_SECRET_KEY_PATH", key_dir.display().to_string()),
        ] {
            env.insert(k.to_string(), v);
        }
        speakers.push(start(
            &c,
            &s.node,
            &c.ns(&s.host),
            &speaker_fast_acks,
            &env,
            &kubeconfig,
        ));
    }

    // Exactly one node answers ARP for the VIP.
    let owner = c
        .wait_single_answer(VIP, LIMIT, || {
            speakers.iter_mut().for_each(LabProcess::check_running)
        })
        .unwrap_or_else(|answers| {
            let all: Vec<&mut LabProcess> = speakers.iter_mut().collect();
            panic!(
                "{TEST}: no single ARP answer for {VIP}: {answers:?}; logs:\n{}",
                logs(&all)
            )
        });
    assert!(
        c.nodes().contains(&owner.as_str()),
        "{TEST}: the answer comes from a speaker host, not {owner}"
    );

    // What the speakers write: the owner's ServiceL2Status, every speaker's ConfigurationState
    // (Valid), the nodeAssigned Event.
    let statuses = dynamic(&client, "ServiceL2Status", "servicel2statuses");
    let states = dynamic(&client, "ConfigurationState", "configurationstates");
    let events: Api<Event> = Api::namespaced(client.clone(), "app");
    let mut all: Vec<&mut LabProcess> = speakers.iter_mut().collect();
    all.push(&mut ctl);
    let status_node = c.wait_for(
        LIMIT,
        || all.iter_mut().for_each(|p| p.check_running()),
        || {
            let statuses = statuses.clone();
            async move {
                let list = statuses.list(&ListParams::default()).await.ok()?;
                list.items
                    .iter()
                    .find_map(|o| o.data["status"]["node"].as_str().map(str::to_string))
            }
        },
    );
    assert_eq!(
        status_node.as_deref(),
        Some(owner.as_str()),
        "{TEST}: ServiceL2Status of the owner"
    );
    for node in c.nodes() {
        let result = c.wait_for(
            LIMIT,
            || all.iter_mut().for_each(|p| p.check_running()),
            || {
                let states = states.clone();
                async move {
                    let o = states.get_opt(&format!("speaker-{node}")).await.ok()??;
                    o.data["status"]["result"].as_str().map(str::to_string)
                }
            },
        );
        assert_eq!(
            result.as_deref(),
            Some("Valid"),
            "{TEST}: ConfigurationState of {node}"
        );
    }
    let assigned = c.wait_for(
        LIMIT,
        || all.iter_mut().for_each(|p| p.check_running()),
        || {
            let events = events.clone();
            let owner = owner.clone();
            async move {
                let list = events
                    .list(&ListParams::default().fields("reason=nodeAssigned"))
                    .await
                    .ok()?;
                list.items
                    .into_iter()
                    .find_map(|e| e.message.filter(|m| m.contains(&owner)))
            }
        },
    );
    assert!(
        assigned.is_some(),
        "{TEST}: nodeAssigned Event naming {owner}"
    );

    // The DaemonSet's probes (path, port, host: MetalLB's 127.0.0.1:17472) are what the
    // speaker serves.
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(speaker[probe]["httpGet"]["host"], "127.0.0.1", "{probe}");
        let port = speaker[probe]["httpGet"]["port"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .expect("a numbered probe port");
        let path = speaker[probe]["httpGet"]["path"]
            .as_str()
            .expect("probe path");
        for s in &c.speakers {
            let addr = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port);
            assert_eq!(
                http_status(&c.ns(&s.host), addr, path),
                Some(200),
                "{TEST}: {probe} GET {path} on {} ({addr})",
                s.node
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
    let cp_ip = c.lab.cp().addr().ip();
    for probe in ["livenessProbe", "readinessProbe"] {
        let port = controller[probe]["httpGet"]["port"]
            .as_str()
            .expect("a named port");
        let path = controller[probe]["httpGet"]["path"]
            .as_str()
            .expect("probe path");
        let addr = SocketAddr::new(cp_ip, named_port(&controller, port));
        assert_eq!(
            http_status(c.lab.cp().ns(), addr, path),
            Some(200),
            "{TEST}: controller {probe} GET {path} ({addr})"
        );
    }
    // The metrics ports are MetalLB's: HTTPS, a request without a token refused (401) before
    // any review (the reviews' RBAC comes with the prometheus overlay, as MetalLB's).
    let addr = SocketAddr::new(cp_ip, named_port(&controller, "metricshttps"));
    let answer = https_get(c.lab.cp().ns(), addr, "/metrics", None);
    assert_eq!(
        answer.as_ref().ok().map(|a| a.status),
        Some(401),
        "{TEST}: controller GET /metrics ({addr}): {answer:?}"
    );
    let speaker_port = named_port(&speaker, "metricshttps");
    for s in &c.speakers {
        let addr = SocketAddr::new(s.ip, speaker_port);
        let answer = https_get(&c.ns(&s.host), addr, "/metrics", None);
        assert_eq!(
            answer.as_ref().ok().map(|a| a.status),
            Some(401),
            "{TEST}: speaker GET /metrics on {} ({addr}): {answer:?}",
            s.node
        );
    }

    // A key rotation, done under these permissions: the controller rewrites the keyring in the
    // Secret, each speaker follows it and acknowledges in its Lease, until a new key is the
    // only one and every speaker sends with it.
    let first_key = String::from_utf8(key.clone()).expect("utf-8 key");
    let nodes: Vec<String> = c.nodes().iter().map(ToString::to_string).collect();
    let rotated = c.wait_for(
        LIMIT,
        || all.iter_mut().for_each(|p| p.check_running()),
        || {
            let secrets = secrets.clone();
            let leases = leases.clone();
            let (name, first, nodes) = (secret_name.clone(), first_key.clone(), nodes.clone());
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
                let all_ack = nodes.iter().all(|node| {
                    acks.iter()
                        .any(|a| a.node == *node && a.primary.as_deref() == Some(id.as_str()))
                });
                all_ack.then_some(id)
            }
        },
    );
    assert!(
        rotated.is_some(),
        "{TEST}: no key rotation completed and acknowledged by both speakers; logs:\n{}",
        logs(&all)
    );

    // And nobody was refused anything on the way.
    for p in &all {
        let log = p.log_text();
        assert!(
            !log.to_lowercase().contains("forbidden"),
            "{}: a request was Forbidden:\n{log}",
            p.name()
        );
    }
    println!(
        "{TEST}: with only our RBAC, vigil controller allocated {VIP} and created Secret {secret_name}; \
         {owner} announces it (ARP, ServiceL2Status, nodeAssigned), both speakers report Valid; \
         a key rotation completed and both speakers acknowledged the new key"
    );
}
