//! The swap: MetalLB v0.16.2's own install (`config/manifests/metallb-native.yaml` from the Go
//! module cache, applied as shipped: CRDs, RBAC, ConfigMap, Deployment, DaemonSet), its
//! programs run as those objects say, then vigil in their place with the very same args, env,
//! files and ServiceAccount tokens, invoked through the program names its images use
//! (`/speaker`, `/controller`: links to the one binary), then MetalLB again.
//!
//! [`metallb_native_manifest_swaps_to_vigil_and_back`]: MetalLB's controller and two speakers
//! give three Services their IPs and answer for them; vigil's controller replaces MetalLB's,
//! then each speaker in turn. Checked: no vigil program exits; the Services keep their IPs;
//! every IP is answered (each ARP question counted: answered by one host); vigil's controller
//! allocates a new Service under MetalLB's RBAC (no Lease rights: it runs unreplicated and its
//! ConfigurationState `controller` says so; the pool's counters written with `update`, its
//! Event as a core/v1 Event, the forms MetalLB's roles allow); then MetalLB's programs come back, keep every IP
//! answered and allocate one more Service.
//!
//! [`metallb_chart_without_memberlist_swaps_to_vigil_and_back`]: the same swap from MetalLB's
//! Helm chart in the module cache, rendered by `helm template` (its names and labels, the
//! controller's `--webhook-mode=enabled` and `--health-probe-port`), with
//! `speaker.memberlist.enabled=false`: both programs' speakers then elect from the Node list
//! alone, and in every mixed state one host answers each IP.
//!
//! Each program runs as its Pod would (`k8s_swap_support`): only the stand-ins for the kubelet
//! differ from a cluster (the token through `--kubeconfig`, the namespace through
//! `METALLB_NAMESPACE`), the same for both programs.
//!
//! Lab: `vigil_kubelab::cluster`, nothing preinstalled: API server on `cp` (198.18.0.2),
//! speaker hosts `a`, `b` (nodes `node-a`, `node-b`, 198.18.0.11-12), a client
//! (198.18.0.100). Root and the Go programs (vigil-testenv, MetalLB) are needed: skips
//! otherwise, fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`. No durations are
//! asserted; waits are bounded polls.

mod k8s_swap_support;
mod webhook_support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Secret, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::Value;
use vigil_kubelab::cluster::{Cluster, ClusterSpec, Install, LabProcess, LbService, pool_yaml};
use vigil_kubelab::deploy;
use vigil_kubelab::metallb::{self, METALLB_NAMESPACE, MetalLbBinaries};
use vigil_kubelab::{TestPod, create_node, create_pod, documents};

use k8s_swap_support::{PodFacts, args, container, env, run_as_pod, vigil_as, volumes};

/// The pool MetalLB's and vigil's controllers allocate from.
const POOL: &str = "198.18.0.200-198.18.0.209";
/// The test Services' namespace.
const APPS: &str = "apps";
/// Bound on every wait (two shared cores).
const LIMIT: Duration = Duration::from_secs(60);
/// How long a MetalLB speaker gets before its Services are touched (see [`all_answered`]);
/// it answers within a few seconds when it does not hit its start-up race.
const NUDGE_AFTER: Duration = Duration::from_secs(20);
/// How long a stopped program gets (a speaker hands over and leaves).
const STOP_GRACE: Duration = Duration::from_secs(10);
/// ARP questions per IP at each check; every one must be answered, by one host.
const QUESTIONS: usize = 5;
/// The controller's Pod name (the Deployment's Pod).
const CONTROLLER_POD: &str = "controller-0";

/// What runs in the lab: one controller and a speaker per node, either program.
struct Programs {
    controller: Option<LabProcess>,
    speakers: BTreeMap<String, LabProcess>,
}

impl Programs {
    /// For a failure's message: the end of every running program's log, and a copy of each
    /// whole log in a directory that outlives the lab (its path is in the message).
    fn log_tails(&self, lines: usize) -> String {
        let kept = std::env::temp_dir().join(format!("vigil-k8s-swap-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&kept);
        let all = self.controller.iter().chain(self.speakers.values());
        let tails: Vec<String> = all
            .map(|p| {
                let _ = std::fs::copy(p.log_path(), kept.join(format!("{}.log", p.name())));
                format!("--- {}:\n{}", p.name(), p.log_tail(lines))
            })
            .collect();
        format!(
            "{}\nwhole logs kept in {}",
            tails.join("\n"),
            kept.display()
        )
    }

    /// Panics, with the logs, if any program has exited.
    fn check_running(&mut self) {
        let all = self.controller.iter_mut().chain(self.speakers.values_mut());
        for p in all {
            if !p.running() {
                panic!("{} exited:\n{}", p.name(), p.log_tail(60));
            }
        }
    }
}

/// MetalLB's release manifest, as shipped, from the module cache.
fn metallb_native() -> (String, Vec<Value>) {
    let path = metallb::metallb_module_dir()
        .expect("MetalLB in the Go module cache")
        .join("config/manifests/metallb-native.yaml");
    let yaml = std::fs::read_to_string(&path).expect("metallb-native.yaml");
    let docs = documents("metallb-native.yaml", &yaml).expect("YAML");
    (yaml, docs)
}

/// The swap test's view of the install: each workload's container and Pod spec.
struct Workloads {
    speaker: (Value, Value),
    controller: (Value, Value),
}

fn speaker_facts(c: &Cluster, node: &str) -> PodFacts {
    let config = c.config(node);
    PodFacts {
        name: config.pod_name(),
        namespace: METALLB_NAMESPACE.into(),
        node: node.into(),
        ip: config.ip,
    }
}

fn controller_facts() -> PodFacts {
    PodFacts {
        name: CONTROLLER_POD.into(),
        namespace: METALLB_NAMESPACE.into(),
        node: "node-a".into(),
        ip: IpAddr::from([198, 18, 0, 2]),
    }
}

/// Starts the controller Pod's program (`program`: MetalLB's binary or `controller` -> vigil).
fn start_controller(c: &Cluster, install: &Workloads, program: &Path, tag: &str) -> LabProcess {
    let (container, pod_spec) = &install.controller;
    let dir = c.dir(&format!("controller-{tag}"));
    let mounts = volumes(c, container, pod_spec, &dir);
    run_as_pod(
        "controller",
        c.lab.cp().ns(),
        program,
        &args(container),
        &env(container, &controller_facts()),
        &mounts,
        &c.kubeconfigs.controller,
        &dir,
    )
}

/// Starts the speaker Pod's program on `node`.
fn start_speaker(
    c: &Cluster,
    install: &Workloads,
    program: &Path,
    node: &str,
    tag: &str,
) -> LabProcess {
    let (container, pod_spec) = &install.speaker;
    let dir = c.dir(&format!("speaker-{node}-{tag}"));
    let mounts = volumes(c, container, pod_spec, &dir);
    let host = c.config(node).host.clone();
    run_as_pod(
        &format!("speaker-{node}"),
        &c.ns(&host),
        program,
        &args(container),
        &env(container, &speaker_facts(c, node)),
        &mounts,
        &c.kubeconfigs.speaker,
        &dir,
    )
}

/// Waits until Service `name` has an ingress IP (checking the programs meanwhile).
fn ingress(c: &Cluster, programs: &mut Programs, name: &str) -> Ipv4Addr {
    match c.wait_ingress(APPS, name, LIMIT, || programs.check_running()) {
        Some(IpAddr::V4(ip)) => ip,
        other => panic!("Service {name}: ingress {other:?}"),
    }
}

/// Which program the speaker just started on a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Started {
    MetalLb,
    Vigil,
}

/// Every IP answered: first settled (the node MetalLB's election ranks first answering
/// alone, bounded), then [`QUESTIONS`] ARP questions each, every one answered by exactly one
/// host. Returns the answers counted.
///
/// Settled means by the election's first node, not by any one host: a speaker that has not
/// yet heard of a newcomer answers alone for a while, then both do. A MetalLB speaker back on
/// a node claimed its VIPs on joining memberlist while its peer learned of the join a second
/// later (the peer had seen the leaving vigil speaker leave, and the newcomer had to refute
/// that before the peer re-elected), and a settle on the peer's lone answers saw two.
///
/// After a MetalLB speaker started, an IP still unanswered after [`NUDGE_AFTER`] gets every
/// Service touched, once, and the full [`LIMIT`] again: MetalLB v0.16.2 without memberlist
/// elects among the Nodes its speaker has seen so far (`speakersForAds` takes the node
/// cache's keys), and a Node seen for the first time does not make it elect again
/// (`isNodeAvailableChanged` is false for a new Node). A speaker whose first pass over the
/// Services ran before its Node cache held both Nodes keeps a wrong answer until a Service
/// or its slices change: nobody answers an IP its peer leaves to it. That race is
/// MetalLB's, not a swap's; the line printed says when it was worked around. vigil's
/// speakers get no nudge.
fn all_answered(
    c: &Cluster,
    programs: &mut Programs,
    ips: &[Ipv4Addr],
    when: &str,
    started: Started,
) -> usize {
    let mut answered = 0;
    let mut nudged = false;
    for ip in ips {
        let first_wait = match started {
            Started::MetalLb if !nudged => NUDGE_AFTER,
            _ => LIMIT,
        };
        // Both speakers run: the VIP is the election's first node's, MetalLB's or vigil's.
        let owner = c.first(IpAddr::V4(*ip));
        let settle = |limit, programs: &mut Programs| {
            c.wait_single_answer_from(*ip, Some(&owner), limit, || programs.check_running())
        };
        let mut settled = settle(first_wait, programs);
        if let Err(last) = &settled
            && first_wait == NUDGE_AFTER
        {
            eprintln!(
                "{when}: {ip} not answered by {owner} alone after {NUDGE_AFTER:?} ({last:?}): \
                 MetalLB's election before its Node cache filled; every Service touched"
            );
            touch_services(c);
            nudged = true;
            settled = settle(LIMIT, programs);
        }
        if let Err(last) = settled {
            panic!(
                "{when}: {ip} not answered by {owner} alone: {last:?}\n{}",
                programs.log_tails(40)
            );
        }
        for _ in 0..QUESTIONS {
            let answers = c.arp(*ip, Duration::from_millis(200));
            assert_eq!(
                answers.len(),
                1,
                "{when}: {ip}: one answer per question, got {answers:?}"
            );
            answered += 1;
        }
    }
    programs.check_running();
    answered
}

/// A new annotation on every Service of [`APPS`], so that each speaker converges each again.
fn touch_services(c: &Cluster) {
    c.block_on(async {
        let api: Api<Service> = Api::namespaced(c.client().clone(), APPS);
        let stamp = format!("{:?}", std::time::SystemTime::now());
        let patch = serde_json::json!({"metadata": {"annotations": {"vigil.test/touched": stamp}}});
        for svc in api.list(&ListParams::default()).await?.items {
            let name = svc.metadata.name.unwrap_or_default();
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok::<_, kube::Error>(())
    })
    .expect("the Services touched");
}

/// A LoadBalancer Service with an endpoint on each node, no IP yet.
fn service(c: &Cluster, name: &str) {
    c.add_service(&LbService::new(APPS, name).endpoints_on(&c.nodes(), 10));
}

fn stop(p: Option<LabProcess>) {
    if let Some(mut p) = p {
        p.terminate(STOP_GRACE);
    }
}

/// The workload's Pod template labels.
fn template_labels(docs: &[Value], kind: &str) -> Vec<(String, String)> {
    let doc = docs.iter().find(|d| d["kind"] == kind).expect("workload");
    doc["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The value of the container's plain env `name`.
fn env_value(container: &Value, name: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)?["value"]
        .as_str()
        .map(str::to_string)
}

/// The swap on an install whose rendered objects are `yaml` (`docs`, parsed): MetalLB's
/// programs, vigil's in their place, MetalLB's again (the module doc says what is checked).
fn swap_and_back(test: &str, c: &Cluster, binaries: &MetalLbBinaries, yaml: &str, docs: &[Value]) {
    let vigil_dir = c.dir("vigil");
    let vigil_speaker: PathBuf = vigil_as(&vigil_dir, "speaker");
    let vigil_controller: PathBuf = vigil_as(&vigil_dir, "controller");
    c.apply("MetalLB's install", yaml);
    let install = Workloads {
        speaker: container(docs, "DaemonSet"),
        controller: container(docs, "Deployment"),
    };
    // MetalLB's validating webhook (failurePolicy Fail) points at the controller's Pod. While
    // MetalLB's controller runs here it is deleted (its server reads the certificate from its
    // Pod's Secret mount, which no kubelet makes here); it comes back, as shipped, once
    // vigil's controller runs (see `webhook_answers_from_vigil`).
    let webhooks = webhook_objects(docs);
    delete_webhooks(c);
    // The Pods a kubelet would run, labelled as the workloads' templates: each speaker's (on
    // its node, the node's IP), the controller's.
    let speaker_labels = template_labels(docs, "DaemonSet");
    let controller_labels = template_labels(docs, "Deployment");
    c.block_on(async {
        for node in c.nodes() {
            let config = c.config(node);
            create_node(c.client(), &config.test_node()).await?;
            let mut pod = TestPod::new(METALLB_NAMESPACE, &config.pod_name())
                .on_node(node)
                .ip(config.ip)
                .host_ip(config.ip);
            for (k, v) in &speaker_labels {
                pod = pod.label(k, v);
            }
            create_pod(c.client(), &pod).await?;
        }
        let mut pod = TestPod::new(METALLB_NAMESPACE, CONTROLLER_POD);
        for (k, v) in &controller_labels {
            pod = pod.label(k, v);
        }
        create_pod(c.client(), &pod).await.map(|_| ())
    })
    .expect("the Nodes and Pods");
    c.apply("pool", &pool_yaml(&[POOL], &[]));
    c.namespace(APPS);
    // Without memberlist (the chart's `speaker.memberlist.enabled=false`) there is none.
    let secret_name = env_value(&install.controller.0, "METALLB_ML_SECRET_NAME");

    // MetalLB: the controller first (it makes the memberlist Secret the speakers mount).
    let mut programs = Programs {
        controller: Some(start_controller(
            c,
            &install,
            &binaries.controller,
            "metallb",
        )),
        speakers: BTreeMap::new(),
    };
    if let Some(secret_name) = &secret_name {
        let secret = c.wait_for(
            LIMIT,
            || programs.check_running(),
            || async {
                let api: Api<Secret> = Api::namespaced(c.client().clone(), METALLB_NAMESPACE);
                api.get_opt(secret_name).await.ok().flatten()
            },
        );
        assert!(
            secret.is_some(),
            "MetalLB's controller made Secret {secret_name}"
        );
    }
    for node in c.nodes() {
        let p = start_speaker(c, &install, &binaries.speaker, node, "metallb");
        programs.speakers.insert(node.to_string(), p);
    }
    let names = ["web-0", "web-1", "web-2"];
    for name in names {
        service(c, name);
    }
    let ips: Vec<Ipv4Addr> = names.iter().map(|n| ingress(c, &mut programs, n)).collect();
    let mut counted = all_answered(c, &mut programs, &ips, "MetalLB", Started::MetalLb);

    // vigil in MetalLB's place: the controller, then each speaker in turn.
    stop(programs.controller.take());
    programs.controller = Some(start_controller(c, &install, &vigil_controller, "vigil"));
    for node in c.nodes() {
        stop(programs.speakers.remove(node));
        let p = start_speaker(c, &install, &vigil_speaker, node, "vigil");
        programs.speakers.insert(node.to_string(), p);
        counted += all_answered(
            c,
            &mut programs,
            &ips,
            &format!("vigil speaker on {node}"),
            Started::Vigil,
        );
    }
    for (name, ip) in names.iter().zip(&ips) {
        assert_eq!(ingress(c, &mut programs, name), *ip, "{name} kept its IP");
    }
    // vigil's controller allocates under MetalLB's RBAC, and says it runs unreplicated.
    service(c, "new-under-vigil");
    let new_ip = ingress(c, &mut programs, "new-under-vigil");
    assert!(!ips.contains(&new_ip), "a new IP: {new_ip}");
    counted += all_answered(c, &mut programs, &[new_ip], "vigil", Started::Vigil);
    let state = c.wait_for(
        LIMIT,
        || programs.check_running(),
        || async {
            let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ConfigurationState");
            let api: Api<DynamicObject> = Api::namespaced_with(
                c.client().clone(),
                METALLB_NAMESPACE,
                &ApiResource::from_gvk_with_plural(&gvk, "configurationstates"),
            );
            let state = api.get_opt("controller").await.ok().flatten()?;
            let conditions = state.data["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "vigilReplicated" && c["status"] == "False")
                .then_some(state)
        },
    );
    let state = state.expect("ConfigurationState controller says vigilReplicated=False");
    assert_eq!(
        state.metadata.labels.unwrap_or_default()["metallb.io/component-type"],
        "controller"
    );
    // The writes MetalLB's roles allow only in their older form: the pool's counters (an
    // update of the status; patch is refused) and a core/v1 Event (events.k8s.io is refused).
    let counted_pool = c.wait_for(
        LIMIT,
        || programs.check_running(),
        || async {
            let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
            let api: Api<DynamicObject> = Api::namespaced_with(
                c.client().clone(),
                METALLB_NAMESPACE,
                &ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools"),
            );
            let pool = api.get_opt("lab").await.ok().flatten()?;
            (pool.data["status"]["assignedIPv4"] == 4).then_some(())
        },
    );
    assert!(
        counted_pool.is_some(),
        "vigil's controller wrote the pool's counters (4 assigned) with update"
    );
    let event = c.wait_for(
        LIMIT,
        || programs.check_running(),
        || async {
            let api: Api<CoreEvent> = Api::namespaced(c.client().clone(), APPS);
            let events = api.list(&ListParams::default()).await.ok()?;
            events.items.into_iter().find(|e| {
                e.involved_object.name.as_deref() == Some("new-under-vigil")
                    && e.reason.as_deref() == Some("IPAllocated")
                    && e.reporting_component.as_deref() == Some("vigil-controller")
            })
        },
    );
    assert!(
        event.is_some(),
        "vigil's controller wrote its IPAllocated Event as a core/v1 Event"
    );
    if let Some(webhooks) = &webhooks {
        webhook_answers_from_vigil(c, &programs, webhooks);
    }
    programs.check_running();
    let mut all_ips = ips.clone();
    all_ips.push(new_ip);
    delete_webhooks(c);

    // And back to MetalLB.
    stop(programs.controller.take());
    programs.controller = Some(start_controller(c, &install, &binaries.controller, "back"));
    for node in c.nodes() {
        stop(programs.speakers.remove(node));
        let p = start_speaker(c, &install, &binaries.speaker, node, "back");
        programs.speakers.insert(node.to_string(), p);
        counted += all_answered(
            c,
            &mut programs,
            &all_ips,
            &format!("MetalLB back on {node}"),
            Started::MetalLb,
        );
    }
    service(c, "new-under-metallb");
    let back_ip = ingress(c, &mut programs, "new-under-metallb");
    assert!(!all_ips.contains(&back_ip), "a new IP: {back_ip}");
    for (name, ip) in names.iter().zip(&ips) {
        assert_eq!(ingress(c, &mut programs, name), *ip, "{name} kept its IP");
    }
    eprintln!("{test}: {counted} ARP questions, each answered by one host");
    stop(programs.controller.take());
    for (_, p) in std::mem::take(&mut programs.speakers) {
        stop(Some(p));
    }
}

/// MetalLB's webhook configuration as the install ships it, if the install serves its
/// webhooks through `metallb-webhook-service` (both the manifest and the chart do).
fn webhook_objects(docs: &[Value]) -> Option<Value> {
    let serves = docs
        .iter()
        .any(|d| d["kind"] == "Service" && d["metadata"]["name"] == webhook_support::SERVICE);
    let config = docs.iter().find(|d| {
        d["kind"] == "ValidatingWebhookConfiguration"
            && d["metadata"]["name"] == webhook_support::WEBHOOKS
    })?;
    serves.then(|| config.clone())
}

fn delete_webhooks(c: &Cluster) {
    c.block_on(async {
        let api: Api<ValidatingWebhookConfiguration> = Api::all(c.client().clone());
        match api
            .delete(webhook_support::WEBHOOKS, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    })
    .expect("delete MetalLB's webhook configuration");
}

/// MetalLB's webhook configuration, as shipped, answered by vigil's controller (started with
/// the Deployment's args: the webhook is on by default, as in MetalLB): the Service routed
/// to the controller's host, then a valid pool accepted and an overlapping one and one in
/// another namespace refused with MetalLB's messages (dry-run writes: nothing is stored).
fn webhook_answers_from_vigil(c: &Cluster, programs: &Programs, webhooks: &Value) {
    c.apply("MetalLB's webhook configuration", &webhooks.to_string());
    webhook_support::route_webhook_service(c, "198.18.0.2");
    let log = || {
        programs
            .controller
            .as_ref()
            .map(|p| p.log_tail(60))
            .unwrap_or_default()
    };
    webhook_support::wait_serving(c, "vigil", &log);
    let verdicts = webhook_support::verdicts(c, "198.18.3.0/24", "198.18.0.204/32");
    webhook_support::assert_metallb_verdicts(&verdicts);
}

fn lab(test: &str, tag: &str) -> Option<(Cluster, MetalLbBinaries)> {
    let spec = ClusterSpec {
        install: Install::Nothing,
        apiserver_args: webhook_support::APISERVER_ARGS
            .iter()
            .map(|a| a.to_string())
            .collect(),
        ..ClusterSpec::nodes(2)
    };
    let binaries = metallb::metallb_binaries(test)?;
    let c = Cluster::start(test, tag, &spec)?;
    Some((c, binaries))
}

#[test]
fn metallb_native_manifest_swaps_to_vigil_and_back() {
    const TEST: &str = "metallb_native_manifest_swaps_to_vigil_and_back";
    let Some((c, binaries)) = lab(TEST, "swap") else {
        return;
    };
    let (yaml, docs) = metallb_native();
    swap_and_back(TEST, &c, &binaries, &yaml, &docs);
}

/// MetalLB's Helm chart from the module cache, rendered by `helm template` as `helm install
/// metallb` would render it with `values`.
fn metallb_chart(helm: &Path, dir: &Path, values: &[&str]) -> (String, Vec<Value>) {
    let chart = metallb::metallb_module_dir()
        .expect("MetalLB in the Go module cache")
        .join("charts/metallb");
    let home = dir.join("helm-home");
    let output = Command::new(helm)
        .args(["template", "metallb"])
        .arg(&chart)
        .args(["--namespace", METALLB_NAMESPACE])
        .args(values.iter().flat_map(|v| ["--set", v]))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .expect("run helm");
    assert!(
        output.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let yaml = String::from_utf8(output.stdout).expect("UTF-8");
    let docs = documents("MetalLB's chart", &yaml).expect("YAML");
    (yaml, docs)
}

/// The same swap from MetalLB's Helm chart (its names and labels, `--webhook-mode=enabled`
/// and `--health-probe-port` among the controller's args), with memberlist off
/// (`speaker.memberlist.enabled=false`): MetalLB's and vigil's speakers then elect from the
/// Node list alone, and in every mixed state still one host answers each IP. Values: no
/// frr-k8s (layer 2 only), the ServiceAccounts named as the lab's tokens.
#[test]
fn metallb_chart_without_memberlist_swaps_to_vigil_and_back() {
    const TEST: &str = "metallb_chart_without_memberlist_swaps_to_vigil_and_back";
    let Some(helm) = deploy::helm_binary(TEST) else {
        return;
    };
    let Some((c, binaries)) = lab(TEST, "swch") else {
        return;
    };
    let (yaml, docs) = metallb_chart(
        &helm,
        &c.dir("helm"),
        &[
            "frrk8s.enabled=false",
            "speaker.memberlist.enabled=false",
            "speaker.serviceAccount.name=speaker",
            "controller.serviceAccount.name=controller",
        ],
    );
    let speaker = container(&docs, "DaemonSet").0;
    assert!(
        env_value(&speaker, "METALLB_ML_LABELS").is_none(),
        "the chart's speaker runs without memberlist"
    );
    // `helm install --create-namespace`'s part.
    c.namespace(METALLB_NAMESPACE);
    swap_and_back(TEST, &c, &binaries, &yaml, &docs);
}
