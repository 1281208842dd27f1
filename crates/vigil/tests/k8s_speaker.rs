//! `vigil speaker` in Kubernetes mode against a real kube-apiserver (vigil-testenv): three
//! lab hosts each run the vigil binary with MetalLB's speaker flags, under MetalLB's own
//! speaker ServiceAccount and RBAC (plus the Role for vigil's key acknowledgement Lease);
//! MetalLB's CRDs come from the Go module cache.
//!
//! Lab: `vigil_kubelab::cluster` with three speaker hosts: the API server on `cp`
//! (198.18.0.2), speaker hosts `a`, `b`, `c` (198.18.0.11-13), a client (198.18.0.100), one
//! bridge. The test writes the Service's `status.loadBalancer.ingress` itself (198.18.0.200,
//! inside the pool), so no controller is involved. Root and the Go programs are needed (skips
//! otherwise, fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). No durations are
//! asserted: every wait is a bounded poll; the outage the client saw is printed.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use vigil_kubelab::cluster::{
    Cluster, ClusterSpec, KEY_ACK_RBAC, LabProcess, LbService, metallb_first, pool_yaml,
};
use vigil_kubelab::metallb::{L2Status, METALLB_NAMESPACE, SpeakerConfig};

const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
/// The pool the VIP comes from, announced on eth0 (our own configuration objects: MetalLB's
/// API, in our words).
const POOL: &str = "198.18.0.200-198.18.0.209";
/// Bounds on the waits (generous: two shared cores).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// The `vigil` binary under test.
fn vigil() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_vigil"))
}

/// The cluster with three speakers, MetalLB's RBAC plus the key acknowledgement Role, the pool
/// and advertisement, and Service `smoke/web` at [`VIP`] with ready endpoints on every node;
/// then the three vigil speakers (and, with [`Allocate::VigilController`], the controller,
/// last). `None` when the test must skip.
fn start_cluster(test: &str, tag: &str, allocate: Allocate) -> Option<(Cluster, Vec<LabProcess>)> {
    start_cluster_with(test, tag, allocate, |_, _| Vec::new())
}

/// [`start_cluster`], each speaker started with the extra arguments `extra_args` gives for
/// its configuration (and its own directory).
fn start_cluster_with(
    test: &str,
    tag: &str,
    allocate: Allocate,
    extra_args: impl Fn(&SpeakerConfig, &Path) -> Vec<String>,
) -> Option<(Cluster, Vec<LabProcess>)> {
    let c = Cluster::start(test, tag, &ClusterSpec::nodes(3))?;
    c.apply("key acknowledgement RBAC", KEY_ACK_RBAC);
    c.apply("pool and L2Advertisement", &pool_yaml(&[POOL], &["eth0"]));
    c.namespace("smoke");
    let mut web = LbService::new("smoke", "web").endpoints_on(&c.nodes(), 10);
    if allocate == Allocate::Test {
        // What a controller would write: the IP, through the status subresource.
        web = web.ingress(&[IpAddr::V4(VIP)]);
    }
    c.add_service(&web);
    let mut speakers: Vec<LabProcess> = (0..c.speakers.len())
        .map(|i| {
            let extra = extra_args(&c.speakers[i], &c.dir(&c.speakers[i].node));
            c.vigil_speaker(vigil(), i, &extra)
        })
        .collect();
    if allocate == Allocate::VigilController {
        let mut controller = c.vigil_controller(vigil(), "controller-0", &[]);
        let ingress = c.wait_ingress("smoke", "web", SETTLE_LIMIT, || {
            controller.check_running();
        });
        assert_eq!(
            ingress,
            Some(IpAddr::V4(VIP)),
            "vigil controller: the first free IP of the pool expected; log ends:\n{}",
            controller.log_tail(30)
        );
        speakers.push(controller);
    }
    Some((c, speakers))
}

/// Who writes the Service's ingress IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Allocate {
    /// The test, through the status subresource.
    Test,
    /// `vigil controller`, from the pool.
    VigilController,
}

/// Asks for `ip` until only `node` answers (or `limit` passes), checking the processes
/// between questions; the last answers.
fn wait_only(
    c: &Cluster,
    processes: &mut [LabProcess],
    ip: Ipv4Addr,
    node: &str,
    limit: Duration,
) -> Vec<vigil_kubelab::ArpAnswer> {
    c.wait_only(ip, c.mac(node), limit, || {
        processes.iter_mut().for_each(LabProcess::check_running);
    })
}

/// Whether `answers` come from `node` alone.
fn only(c: &Cluster, answers: &[vigil_kubelab::ArpAnswer], node: &str) -> bool {
    !answers.is_empty() && answers.iter().all(|a| a.mac == c.mac(node))
}

fn logs(processes: &[LabProcess]) -> String {
    processes
        .iter()
        .map(|p| format!("--- {}\n{}", p.name(), p.log_tail(20)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until a ServiceL2Status names `node` for smoke/web on eth0; all statuses seen.
fn wait_status(c: &Cluster, node: &str) -> Vec<L2Status> {
    let expected = L2Status {
        node: node.to_string(),
        service_namespace: "smoke".to_string(),
        service_name: "web".to_string(),
        interfaces: vec!["eth0".to_string()],
    };
    c.wait_l2_statuses(SETTLE_LIMIT, |statuses| statuses.contains(&expected))
}

/// Waits until a `nodeAssigned` Event on smoke/web names `node`; the messages seen.
fn wait_node_assigned(c: &Cluster, node: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(c.client().clone(), "smoke");
    let wanted = format!("announcing from node \"{node}\" with protocol \"layer2\"");
    c.block_on(async {
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

/// MetalLB's namespaced objects of `kind` (`plural`), through the admin client.
fn metallb_api(c: &Cluster, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(c.client().clone(), METALLB_NAMESPACE, &resource)
}

/// `Kind/name` of the owners of `node`'s ServiceL2Status objects.
fn status_owners(c: &Cluster, node: &str) -> Vec<String> {
    let api = metallb_api(c, "ServiceL2Status", "servicel2statuses");
    let list = c
        .block_on(api.list(&ListParams::default().labels(&format!("metallb.io/node={node}"))))
        .expect("list ServiceL2Status");
    list.items
        .iter()
        .flat_map(|o| o.metadata.owner_references.clone().unwrap_or_default())
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

/// SIGKILLs the owner and waits for the next node to answer alone; prints the outage.
fn kill_owner_and_wait(
    test: &str,
    c: &Cluster,
    speakers: &mut [LabProcess],
    owner: &str,
) -> String {
    let rest: Vec<&str> = c.nodes().into_iter().filter(|n| *n != owner).collect();
    let next = metallb_first(&rest, IpAddr::V4(VIP)).expect("another node");
    let killed_at = Instant::now();
    speakers[c.index(owner)].kill();
    let end = killed_at + FAILOVER_LIMIT;
    let (mut asked, mut unanswered) = (0u32, 0u32);
    let answered = loop {
        let answers = c.arp(VIP, Duration::from_millis(20));
        asked += 1;
        if answers.is_empty() {
            unanswered += 1;
        }
        if answers.iter().any(|a| a.mac == c.mac(&next)) {
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
    let settled = wait_only(c, speakers, VIP, &next, SETTLE_LIMIT);
    assert!(
        only(c, &settled, &next),
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
    let Some((c, mut speakers)) = start_cluster(TEST, "vk-spk", Allocate::Test) else {
        return;
    };
    let owner = c.first(IpAddr::V4(VIP));
    let settled = wait_only(&c, &mut speakers, VIP, &owner, SETTLE_LIMIT);
    assert!(
        only(&c, &settled, &owner),
        "{VIP}: expected only {owner} ({}) to answer, got {settled:?}; logs:\n{}",
        c.mac(&owner),
        logs(&speakers)
    );
    let settled_at = started.elapsed();
    let statuses = wait_status(&c, &owner);
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
        status_owners(&c, &owner),
        [format!("Pod/speaker-{owner}")],
        "the owner's ServiceL2Status is owned by its speaker Pod"
    );
    // Every speaker reports the configuration Valid in its ConfigurationState, as MetalLB's do.
    for node in c.nodes() {
        let (result, summary) = wait_configuration(&c, node, |r, _| !r.is_empty());
        assert_eq!(
            result, "Valid",
            "ConfigurationState speaker-{node}: {summary}"
        );
    }
    let messages = wait_node_assigned(&c, &owner);
    assert!(
        messages.iter().any(|m| m.contains(&format!("{owner:?}"))),
        "no nodeAssigned event naming {owner}: {messages:?}; logs:\n{}",
        logs(&speakers)
    );

    let next = kill_owner_and_wait(TEST, &c, &mut speakers, &owner);
    let statuses = wait_status(&c, &next);
    assert!(
        statuses.iter().any(|s| s.node == next),
        "no ServiceL2Status naming {next} after the failover: {statuses:?}"
    );
    // Everything above ran under MetalLB's own speaker RBAC plus the key acknowledgement
    // Lease Role: nothing vigil asked was refused.
    for s in &speakers {
        let log = s.log_text();
        let refused: Vec<&str> = log.lines().filter(|l| l.contains("forbidden")).collect();
        assert!(
            refused.is_empty(),
            "{}: requests refused by MetalLB's RBAC:\n{}",
            s.name(),
            refused.join("\n")
        );
    }
    for s in &mut speakers {
        if s.running() {
            s.check_running();
            assert!(
                s.terminate(Duration::from_secs(10)).is_some(),
                "vigil speaker {} stops on SIGTERM",
                s.name()
            );
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
    let Some((mut c, mut speakers)) = start_cluster(TEST, "vk-spp", Allocate::Test) else {
        return;
    };
    let owner = c.first(IpAddr::V4(VIP));
    let settled = wait_only(&c, &mut speakers, VIP, &owner, SETTLE_LIMIT);
    assert!(
        only(&c, &settled, &owner),
        "expected only {owner} to answer, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    c.lab.cp_mut().pause();
    let next = kill_owner_and_wait(TEST, &c, &mut speakers, &owner);
    c.lab.cp_mut().resume();
    // After the API server is back, the survivors' caches resume and the answer stays right.
    let statuses = wait_status(&c, &next);
    assert!(
        statuses.iter().any(|s| s.node == next),
        "no ServiceL2Status naming {next} once the API server is back: {statuses:?}; logs:\n{}",
        logs(&speakers)
    );
    let after = wait_only(&c, &mut speakers, VIP, &next, SETTLE_LIMIT);
    assert!(
        only(&c, &after, &next),
        "after the API server resumed expected only {next}, got {after:?}"
    );
}

#[test]
fn vigil_controller_allocates_and_vigil_speakers_announce() {
    const TEST: &str = "vigil_controller_allocates_and_vigil_speakers_announce";
    let started = Instant::now();
    let Some((c, mut speakers)) = start_cluster(TEST, "vk-spc", Allocate::VigilController) else {
        return;
    };
    let owner = c.first(IpAddr::V4(VIP));
    let settled = wait_only(&c, &mut speakers, VIP, &owner, SETTLE_LIMIT);
    assert!(
        only(&c, &settled, &owner),
        "expected only {owner} to answer for the allocated {VIP}, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    let statuses = wait_status(&c, &owner);
    assert!(
        statuses.iter().any(|s| s.node == owner),
        "no ServiceL2Status naming {owner}: {statuses:?}"
    );
    for s in &mut speakers {
        s.check_running();
        assert!(
            s.terminate(Duration::from_secs(10)).is_some(),
            "{} stops on SIGTERM",
            s.name()
        );
    }
    eprintln!(
        "{TEST}: allocated and answered by {owner}; total {:?}",
        started.elapsed()
    );
}

/// MetalLB's `excludel2.yaml` is a list of regular expressions searched anywhere in the
/// interface name: `th0` excludes `eth0`. The node MetalLB's election ranks first for
/// [`VIP`] excludes its only interface, so it wins and answers nowhere: nobody answers for
/// the VIP (MetalLB does not re-run the election), while a second VIP owned by another node
/// is answered. Restarted with MetalLB's shipped list (which keeps `eth0`), it answers.
#[test]
fn an_interface_excludel2_names_gets_no_arp_answer() {
    const TEST: &str = "an_interface_excludel2_names_gets_no_arp_answer";
    // Speaker hosts 0..3 are node-a, node-b, node-c (`cluster::speaker_host`).
    let nodes = ["node-a", "node-b", "node-c"];
    let owner = metallb_first(&nodes, IpAddr::V4(VIP)).expect("an owner");
    let shipped = format!(
        "announcedInterfacesToExclude: {:?}\n",
        vigil_k8s::excludel2::DEFAULT_EXCLUDES
    );
    let write = |dir: &Path, text: &str| {
        let path = dir.join("excludel2.yaml");
        std::fs::write(&path, text).expect("excludel2.yaml");
        vec![format!("--excludel2={}", path.display())]
    };
    let Some((c, mut speakers)) =
        start_cluster_with(TEST, "vk-spx", Allocate::Test, |config, dir| {
            if config.node == owner {
                write(dir, "announcedInterfacesToExclude:\n  - th0\n")
            } else {
                write(dir, &shipped)
            }
        })
    else {
        return;
    };
    assert_eq!(c.nodes(), nodes, "the cluster's node names");
    // A second VIP whose first-ranked node is another one proves the cluster answers.
    let (other_ip, other_owner) = (201..=209)
        .map(|d| Ipv4Addr::new(198, 18, 0, d))
        .map(|ip| (ip, c.first(IpAddr::V4(ip))))
        .find(|(_, o)| *o != owner)
        .expect("a VIP another node owns");
    c.add_service(
        &LbService::new("smoke", "other")
            .endpoints_on(&c.nodes(), 20)
            .ingress(&[IpAddr::V4(other_ip)]),
    );
    let answers = wait_only(&c, &mut speakers, other_ip, &other_owner, SETTLE_LIMIT);
    assert!(
        only(&c, &answers, &other_owner),
        "{other_ip}: expected {other_owner} alone, got {answers:?}; logs:\n{}",
        logs(&speakers)
    );
    // A node that answered before it heard the owner hands over for at most a second
    // (nobody claims the VIP): then ten questions in a row must go unanswered.
    let (mut silent, mut heard) = (0, Vec::new());
    let end = Instant::now() + SETTLE_LIMIT;
    while silent < 10 && Instant::now() < end {
        let answers = c.arp(VIP, Duration::from_millis(200));
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
        heard.iter().all(|a| a.mac != c.mac(&owner)),
        "{owner} answered on its excluded eth0: {heard:?}"
    );
    // The same node with MetalLB's shipped list answers.
    let owner_index = c.index(&owner);
    speakers[owner_index].kill();
    let extra = write(&c.dir(&owner), &shipped);
    speakers[owner_index] = c.vigil_speaker(vigil(), owner_index, &extra);
    let answers = wait_only(&c, &mut speakers, VIP, &owner, SETTLE_LIMIT);
    assert!(
        only(&c, &answers, &owner),
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

/// `/metrics` of the speaker at `ip:port`, fetched from the control plane's host (HTTPS with
/// a scraper's token, as MetalLB serves it), parsed into `name{labels}` -> value.
fn scrape(c: &Cluster, ip: IpAddr, port: u16) -> BTreeMap<String, f64> {
    let answer = c
        .scrape(c.lab.cp().ns(), SocketAddr::new(ip, port), "/metrics")
        .unwrap_or_else(|e| panic!("GET /metrics at {ip}:{port}: {e}"));
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

/// `status.result` and `status.errorSummary` of ConfigurationState `speaker-<node>` once
/// `done` accepts them (bounded); the last seen.
fn wait_configuration(
    c: &Cluster,
    node: &str,
    done: impl Fn(&str, &str) -> bool + Sync,
) -> (String, String) {
    let api = metallb_api(c, "ConfigurationState", "configurationstates");
    c.block_on(async {
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

fn delete_metallb_object(c: &Cluster, plural: &str, kind: &str, name: &str) {
    c.block_on(metallb_api(c, kind, plural).delete(name, &DeleteParams::default()))
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
    // Speaker hosts 0..3 are node-a, node-b, node-c (`cluster::speaker_host`).
    let all = ["node-a", "node-b", "node-c"];
    let tuned = vigil_lb::rank(all.iter().copied(), IpAddr::V4(VIP))[2].to_string();
    let Some((c, mut speakers)) =
        start_cluster_with(TEST, "vk-spm", Allocate::Test, |config, dir| {
            let mut args = vec![format!("--port={METRICS_PORT}")];
            if config.node == tuned {
                let file = dir.join("config.json");
                std::fs::write(&file, MEMBERLIST_LAN_JSON).expect("config.json");
                args.push(format!("--memberlist-config={}", file.display()));
            }
            args
        })
    else {
        return;
    };
    assert_eq!(c.nodes(), all, "the cluster's node names");
    let nodes = c.nodes();
    let owner = c.first(IpAddr::V4(VIP));
    let owner_index = c.index(&owner);
    let settled = wait_only(&c, &mut speakers, VIP, &owner, SETTLE_LIMIT);
    assert!(
        only(&c, &settled, &owner),
        "expected only {owner} to answer, got {settled:?}; logs:\n{}",
        logs(&speakers)
    );
    let announced = |node: &str| {
        format!(
            "metallb_speaker_announced{{ip=\"{VIP}\",node=\"{node}\",protocol=\"layer2\",service=\"smoke/web\"}}"
        )
    };
    let per_ip = |name: &str| format!("{name}{{ip=\"{VIP}\"}}");
    let scrape_all = || -> Vec<BTreeMap<String, f64>> {
        c.speakers
            .iter()
            .map(|s| scrape(&c, s.ip, METRICS_PORT))
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
        .find(|s| s.name() == tuned)
        .map(LabProcess::log_text)
        .unwrap_or_default();
    assert!(
        tuned_log.contains("\"event\":\"memberlist_config_loaded\""),
        "{tuned} gossips with its config.json; log:\n{tuned_log}"
    );
    // Real ARP questions: the owner counts each one it received and answered.
    let mut answered = 0;
    for _ in 0..5 {
        let answers = c.arp(VIP, Duration::from_millis(200));
        answered += usize::from(answers.iter().any(|a| a.mac == c.mac(&owner)));
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

    let apply = |what: &str, yaml: &str| {
        c.apply(what, yaml);
    };
    let still_owner = |case: &str, speakers: &mut [LabProcess]| {
        let answers = wait_only(&c, speakers, VIP, &owner, SETTLE_LIMIT);
        assert!(
            only(&c, &answers, &owner),
            "{case}: the last good configuration keeps {VIP} on {owner}, got {answers:?}"
        );
    };
    let all_stale = |case: &str, want: f64| {
        for (s, node) in c.speakers.iter().zip(&nodes) {
            let m = scrape(&c, s.ip, METRICS_PORT);
            assert_eq!(
                m.get("metallb_k8s_client_config_stale_bool"),
                Some(&want),
                "{case}: {node} stale"
            );
        }
    };
    let all_valid = |case: &str| {
        for node in &nodes {
            let (result, summary) = wait_configuration(&c, node, |r, _| r == "Valid");
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
                wait_configuration(&c, node, |r, s| r == "Invalid" && s.contains(reason));
            assert!(
                result == "Invalid" && summary.contains(reason),
                "{case}: {node}: {result} {summary:?}; logs:\n{}",
                logs(&speakers)
            );
        }
        all_stale(case, 1.0);
        still_owner(case, &mut speakers);
        delete_metallb_object(&c, "ipaddresspools", "IPAddressPool", name);
        all_valid(case);
        // MetalLB's quirk: back to the configuration in force is "unchanged", so the stale
        // flag stays until another configuration is applied.
        all_stale(case, 1.0);
    }
    // A configuration that does not parse is no update error in MetalLB.
    for (s, node) in c.speakers.iter().zip(&nodes) {
        let m = scrape(&c, s.ip, METRICS_PORT);
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
    delete_metallb_object(&c, "ipaddresspools", "IPAddressPool", "lab");
    let (result, summary) = wait_configuration(&c, &owner, |r, _| r == "Invalid");
    assert!(
        result == "Invalid" && summary.contains("general handler sync state error"),
        "{owner} announces {VIP}: {result} {summary:?}"
    );
    for node in nodes.iter().filter(|n| **n != owner) {
        let (result, summary) = wait_configuration(&c, node, |r, _| r == "Valid");
        assert_eq!(
            result, "Valid",
            "{node} announces nothing from lab: {summary}"
        );
    }
    still_owner("pool of the announced IP removed", &mut speakers);
    for (i, (s, node)) in c.speakers.iter().zip(&nodes).enumerate() {
        let m = scrape(&c, s.ip, METRICS_PORT);
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
    apply("the pool back", &pool_yaml(&[POOL], &["eth0"]));
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
