//! MetalLB's own speakers (v0.16.2, Go) and `vigil speaker`s in one memberlist cluster, against
//! a real kube-apiserver (vigil-testenv): the migration a MetalLB user makes by swapping the
//! speaker DaemonSet's image.
//!
//! - [`mixed_cluster_elects_one_owner_per_service`]: two MetalLB and two vigil speakers, two
//!   pools (one advertised on `eth0` only, one to `zone=east` nodes only), `Cluster` and `Local`
//!   services; after each change (endpoints move, a node label changes, a `Local` service loses
//!   its last endpoint) every VIP must be answered by exactly the node MetalLB's election picks,
//!   with one `ServiceL2Status` naming it (whichever program wrote it), and every vigil speaker's
//!   `/status` naming the same owner.
//! - [`rolling_migration_gap_is_no_worse_than_metallbs_own`]: four MetalLB speakers, one VIP
//!   owned by each node, a client asking ARP for every VIP every 25 ms. First MetalLB's own
//!   rolling restart of one node (SIGTERM, the Pod replaced, MetalLB started again) gives the
//!   baseline; then each node in turn gets the same treatment with vigil started instead. The
//!   longest gap without an answer is measured per VIP and per phase (the old speaker leaving,
//!   the new one joining) and compared with the baseline of the same phase in the same run.
//!   Afterwards exactly one node answers for each VIP; then one node is rolled back to MetalLB
//!   (the way back), held to the same allowance.
//!
//! Lab: `vigil_kubelab::cluster`: the API server on `cp` (198.18.0.2), speaker hosts `a`..`d`
//! (198.18.0.11-14), a client (198.18.0.100), one bridge. The tests write each Service's
//! `status.loadBalancer.ingress` themselves (no controller), with IPs inside the pools. Every
//! speaker runs under MetalLB's speaker ServiceAccount and RBAC; MetalLB's and vigil's are
//! both `LabProcess`es. Root and the Go programs are needed (skips otherwise, fails
//! under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`). Waits are bounded polls; the only
//! timing assertion is a ratio between figures of the same run.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use vigil_kubelab::cluster::{
    CLIENT, CLIENT4, Cluster, ClusterSpec, LabProcess, LbService, metallb_first,
};
use vigil_kubelab::metallb::{self, L2Status, MetalLbBinaries, MetalLbSpeaker};
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::prober::{Heard, hear};

/// How many speaker hosts (`a`..`d`, nodes `node-a`..`node-d`).
const NODES: usize = 4;
/// vigil speakers serve `/status` here (on their memberlist address).
const STATUS_PORT: u16 = 7472;
/// The namespace of the test Services.
const APPS: &str = "apps";
/// How long a SIGTERMed speaker (either program) gets to leave memberlist and exit.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Time between two rounds of ARP questions (one per VIP per round).
const PROBE_INTERVAL: Duration = Duration::from_millis(25);
/// The answers a settled VIP must have in this trailing window: only the owner's MAC.
const SETTLED_WINDOW: Duration = Duration::from_millis(600);
/// Bounds on the waits (generous: two shared cores).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// The allowance of the migration assertion: a phase of a migration step may leave a VIP
/// unanswered at most this many times as long as the same phase did in MetalLB's own restart
/// ...
const GAP_RATIO: u32 = 2;
/// ... plus this many probe intervals (the figures are quantised by the probe interval, and
/// one late answer on a loaded machine costs one interval).
const GAP_SLACK_PROBES: u32 = 4;

/// The `vigil` binary under test.
fn vigil() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_vigil"))
}

/// Our own configuration objects for the mixed cluster (MetalLB's API, in our words): pool
/// `west` announced on `eth0` only, from every node; pool `east` on every interface, from
/// `zone=east` nodes only.
const MIXED_CONFIG: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: west
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.200-198.18.0.219
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: east
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.220-198.18.0.239
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: west-on-eth0
  namespace: metallb-system
spec:
  ipAddressPools:
    - west
  interfaces:
    - eth0
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: east-zone
  namespace: metallb-system
spec:
  ipAddressPools:
    - east
  nodeSelectors:
    - matchLabels:
        zone: east
"#;

/// The migration test's configuration: one pool, advertised everywhere.
const MIGRATION_CONFIG: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: west
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.200-198.18.0.239
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: west
  namespace: metallb-system
spec:
  ipAddressPools:
    - west
"#;

// ---------------------------------------------------------------------------------------------
// Speakers
// ---------------------------------------------------------------------------------------------

/// Whichever program speaks for a node: MetalLB's speaker (kept whole for its files) or
/// `vigil speaker`; either way one [`LabProcess`] to check, stop and read.
enum Speaker {
    MetalLb(Box<MetalLbSpeaker>),
    Vigil(LabProcess),
}

impl Speaker {
    fn program(&self) -> &'static str {
        match self {
            Self::MetalLb(_) => "MetalLB",
            Self::Vigil(_) => "vigil",
        }
    }

    fn process(&self) -> &LabProcess {
        match self {
            Self::MetalLb(s) => s.process().lab_process(),
            Self::Vigil(p) => p,
        }
    }

    fn process_mut(&mut self) -> &mut LabProcess {
        match self {
            Self::MetalLb(s) => s.process_mut().lab_process_mut(),
            Self::Vigil(p) => p,
        }
    }

    /// Panics with the end of its log if it has exited.
    fn check_running(&mut self, node: &str) {
        if let Some(status) = self.process_mut().exited() {
            panic!(
                "{} speaker {node} exited ({status}); log ends:\n{}",
                self.program(),
                self.process().log_tail(30)
            );
        }
    }

    /// SIGTERM, as the kubelet stops a Pod, and a bounded wait: whether it exited by itself.
    fn terminate(&mut self) -> bool {
        self.process_mut().terminate(STOP_GRACE).is_some()
    }

    fn log_tail(&self, lines: usize) -> String {
        self.process().log_tail(lines)
    }
}

// ---------------------------------------------------------------------------------------------
// The client: ARP questions for every VIP, every answer recorded
// ---------------------------------------------------------------------------------------------

/// One answer to one of the client's questions (gratuitous announcements are not counted: the
/// figure is how long a client asking got no answer).
#[derive(Debug, Clone)]
struct Answer {
    at: Duration,
    vip: Ipv4Addr,
    mac: String,
    round: u64,
}

/// Asks ARP for every VIP each [`PROBE_INTERVAL`] from the client's namespace, on one packet
/// socket, until dropped or `limit` passes; records every answer.
struct Prober {
    started: Instant,
    answers: Arc<Mutex<Vec<Answer>>>,
    rounds: Arc<AtomicU64>,
    /// When each round was sent: a pause of the client itself (a loaded machine) shows here.
    sent: Arc<Mutex<Vec<Duration>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

/// The most answers a prober keeps (a bound on memory; far more than a test produces).
const MAX_ANSWERS: usize = 2_000_000;

impl Prober {
    fn start(ns: String, vips: Vec<Ipv4Addr>, limit: Duration) -> Self {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let rounds = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let (answers, rounds, stop) = (answers.clone(), rounds.clone(), stop.clone());
            let sent = sent.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let (ifindex, mac) = vigil_netlab::link(&ns, "eth0")?;
                vigil_netlab::netns::enter(&ns).map_err(|e| e.to_string())?;
                let socket = PacketSocket::open(ifindex, Filter::Answers)
                    .map_err(|e| format!("packet socket: {e}"))?;
                let questions: Vec<Vec<u8>> = vips
                    .iter()
                    .map(|vip| vigil_l2::frames::arp_request(mac, CLIENT4, *vip))
                    .collect();
                let mut buf = vec![0u8; 2048];
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) && started.elapsed() < limit {
                    let now = Instant::now();
                    if now >= next {
                        for q in &questions {
                            let _ = socket.send(q);
                        }
                        rounds.fetch_add(1, Ordering::Relaxed);
                        let mut sent = sent.lock().expect("sent");
                        if sent.len() < MAX_ANSWERS {
                            sent.push(started.elapsed());
                        }
                        while next <= now {
                            next += PROBE_INTERVAL;
                        }
                    }
                    while let Some(n) = socket.recv(&mut buf).map_err(|e| e.to_string())? {
                        let at = started.elapsed();
                        let round = rounds.load(Ordering::Relaxed);
                        for vip in &vips {
                            if let Some(Heard::Arp {
                                mac,
                                gratuitous: false,
                            }) = hear(&buf[..n], CLIENT4, *vip, 0)
                            {
                                let mut list = answers.lock().expect("answers");
                                if list.len() < MAX_ANSWERS {
                                    list.push(Answer {
                                        at,
                                        vip: *vip,
                                        mac: mac.to_string(),
                                        round,
                                    });
                                }
                            }
                        }
                    }
                    let wait = next.saturating_duration_since(Instant::now());
                    socket
                        .wait_readable(wait.min(Duration::from_millis(5)))
                        .map_err(|e| e.to_string())?;
                }
                Ok(())
            })
        };
        Self {
            started,
            answers,
            rounds,
            sent,
            stop,
            thread: Some(thread),
        }
    }

    /// Time on the prober's clock.
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The answers for `vip` that arrived in `[from, to]`.
    fn answers(&self, vip: Ipv4Addr, from: Duration, to: Duration) -> Vec<Answer> {
        self.answers
            .lock()
            .expect("answers")
            .iter()
            .filter(|a| a.vip == vip && a.at >= from && a.at <= to)
            .cloned()
            .collect()
    }

    /// The MACs that answered for `vip` in the last `window`.
    fn recent_macs(&self, vip: Ipv4Addr, window: Duration) -> BTreeSet<String> {
        let now = self.now();
        self.answers(vip, now.saturating_sub(window), now)
            .into_iter()
            .map(|a| a.mac)
            .collect()
    }

    /// The longest span in `[from, to]` without an answer for `vip` (the whole span if none).
    fn longest_gap(&self, vip: Ipv4Addr, from: Duration, to: Duration) -> Duration {
        let mut last = from;
        let mut longest = Duration::ZERO;
        for a in self.answers(vip, from, to) {
            longest = longest.max(a.at - last);
            last = a.at;
        }
        longest.max(to.saturating_sub(last))
    }

    /// The longest pause between two rounds the client sent in `[from, to]`: time in which
    /// nobody could have answered because nobody was asked.
    fn longest_pause(&self, from: Duration, to: Duration) -> Duration {
        let sent = self.sent.lock().expect("sent");
        let mut last = from;
        let mut longest = Duration::ZERO;
        for at in sent.iter().filter(|at| **at >= from && **at <= to) {
            longest = longest.max(*at - last);
            last = *at;
        }
        longest
    }

    /// Rounds in `[from, to]` in which two or more MACs answered for `vip`.
    fn conflicts(&self, vip: Ipv4Addr, from: Duration, to: Duration) -> usize {
        let mut by_round: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
        for a in self.answers(vip, from, to) {
            by_round.entry(a.round).or_default().insert(a.mac);
        }
        by_round.values().filter(|macs| macs.len() > 1).count()
    }

    /// Whether the prober is still asking.
    fn check_running(&mut self) {
        if self.thread.as_ref().is_some_and(JoinHandle::is_finished) {
            let result = self.thread.take().expect("thread").join();
            panic!(
                "the ARP prober stopped after {:?} rounds: {result:?}",
                self.rounds.load(Ordering::Relaxed)
            );
        }
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The lab
// ---------------------------------------------------------------------------------------------

/// The lab cluster (four speaker hosts, MetalLB's CRDs, RBAC, namespace, Secret, every
/// speaker's Node and Pod), a configuration and namespace [`APPS`]; the speakers running on it.
struct Rig {
    // Dropped first: speakers stop before the lab goes away.
    speakers: BTreeMap<String, Speaker>,
    binaries: MetalLbBinaries,
    c: Cluster,
}

impl Rig {
    /// `labels` are (node, key, value) Node labels; `configuration` the pools and
    /// advertisements. No speaker runs yet.
    fn start(
        test: &str,
        tag: &str,
        labels: &[(&str, &str, &str)],
        configuration: &str,
    ) -> Option<Self> {
        if !vigil_netlab::root_or_skip(test) {
            return None;
        }
        let binaries = metallb::metallb_binaries(test)?;
        let spec = ClusterSpec {
            node_labels: labels
                .iter()
                .map(|(n, k, v)| ((*n).to_string(), (*k).to_string(), (*v).to_string()))
                .collect(),
            ..ClusterSpec::nodes(NODES)
        };
        let c = Cluster::start(test, tag, &spec)?;
        c.apply("pools and L2Advertisements", configuration);
        c.namespace(APPS);
        Some(Self {
            speakers: BTreeMap::new(),
            binaries,
            c,
        })
    }

    /// The node names, owned (the rig changes while they are in use).
    fn nodes(&self) -> Vec<String> {
        self.c.nodes().into_iter().map(str::to_string).collect()
    }

    fn start_metallb(&mut self, node: &str) {
        let speaker = MetalLbSpeaker::start(
            &self.c.lab,
            &self.binaries,
            self.c.config(node),
            &self.c.key,
        )
        .expect("start a MetalLB speaker");
        self.speakers
            .insert(node.to_string(), Speaker::MetalLb(Box::new(speaker)));
    }

    /// `vigil speaker` with MetalLB's flags, `/status` on [`STATUS_PORT`] (each start logs
    /// to a fresh file).
    fn start_vigil(&mut self, node: &str) {
        let args = [format!("--port={STATUS_PORT}")];
        let process = self.c.vigil_speaker(vigil(), self.c.index(node), &args);
        self.speakers
            .insert(node.to_string(), Speaker::Vigil(process));
    }

    /// SIGTERMs `node`'s speaker and waits for it to exit; then replaces its Pod (and collects
    /// the statuses the old Pod owned), as a DaemonSet update does.
    fn terminate(&mut self, node: &str) {
        let mut speaker = self.speakers.remove(node).expect("a running speaker");
        let program = speaker.program();
        assert!(
            speaker.terminate(),
            "{program} speaker {node} did not exit on SIGTERM; log ends:\n{}",
            speaker.log_tail(20)
        );
        self.c
            .block_on(metallb::replace_speaker_pod(
                self.c.client(),
                self.c.config(node),
            ))
            .expect("replace the speaker Pod");
    }

    fn check_running(&mut self) {
        for (node, s) in &mut self.speakers {
            s.check_running(node);
        }
    }

    fn logs(&self) -> String {
        self.speakers
            .iter()
            .map(|(n, s)| format!("--- {} {n}\n{}", s.program(), s.log_tail(15)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Creates LoadBalancer Service `name` (`Local` or `Cluster`) with `ip` as its ingress, and
    /// an EndpointSlice with a ready endpoint on each of `endpoint_nodes`.
    fn add_service(&self, name: &str, ip: Ipv4Addr, local: bool, endpoint_nodes: &[&str]) {
        let mut svc = LbService::new(APPS, name).ingress(&[IpAddr::V4(ip)]);
        for (i, node) in endpoint_nodes.iter().enumerate() {
            svc = svc.endpoint(endpoint_ip(name, i), node);
        }
        if local {
            svc = svc.local();
        }
        self.c.add_service(&svc);
    }

    /// Replaces the endpoints of Service `name`'s slice: one ready endpoint on each of
    /// `nodes` (none for an empty list), as the endpointslice controller updates it when pods
    /// move.
    fn move_endpoints(&self, name: &str, nodes: &[&str]) {
        let endpoints: Vec<serde_json::Value> = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                serde_json::json!({
                    "addresses": [endpoint_ip(name, i).to_string()],
                    "nodeName": node,
                    "conditions": { "ready": true, "serving": true, "terminating": false },
                })
            })
            .collect();
        let slices: Api<EndpointSlice> = Api::namespaced(self.c.client().clone(), APPS);
        let patch = serde_json::json!({ "endpoints": endpoints });
        self.c
            .block_on(slices.patch(
                &format!("{name}-kubelab"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ))
            .expect("update the endpoint slice");
    }

    /// Sets (or, with `None`, removes) label `key` on Node `node`.
    fn label_node(&self, node: &str, key: &str, value: Option<&str>) {
        let nodes: Api<Node> = Api::all(self.c.client().clone());
        let patch = serde_json::json!({ "metadata": { "labels": { key: value } } });
        self.c
            .block_on(nodes.patch(node, &PatchParams::default(), &Patch::Merge(&patch)))
            .expect("label the node");
    }

    /// VIP → owner as vigil speaker `node` reports it on `/status` (`None`: no owner, or the
    /// VIP is not listed); `None` overall when `/status` cannot be read.
    fn vigil_owners(&self, node: &str) -> Option<BTreeMap<Ipv4Addr, Option<String>>> {
        let addr = SocketAddr::new(self.c.config(node).ip, STATUS_PORT);
        let answer = self.c.scrape(&self.c.ns(CLIENT), addr, "/status").ok()?;
        if answer.status != 200 {
            return None;
        }
        let status: serde_json::Value = serde_json::from_str(&answer.body).ok()?;
        let mut owners = BTreeMap::new();
        for vip in status["vips"].as_array()? {
            let ip: Ipv4Addr = vip["vip"].as_str()?.parse().ok()?;
            owners.insert(ip, vip["owner"].as_str().map(str::to_string));
        }
        Some(owners)
    }
}

/// A pod IP for endpoint `i` of Service `name` (198.19.x.y: never asked about, never routed).
fn endpoint_ip(name: &str, i: usize) -> IpAddr {
    let h = name
        .bytes()
        .fold(0u8, |h, b| h.wrapping_mul(31).wrapping_add(b));
    IpAddr::from([198, 19, h, 10 + u8::try_from(i).expect("few endpoints")])
}

/// The node MetalLB's election picks for `ip` among `candidates` (none: nobody announces).
fn first(candidates: &[String], ip: Ipv4Addr) -> Option<String> {
    metallb_first(candidates, IpAddr::V4(ip))
}

// ---------------------------------------------------------------------------------------------
// Test 1: the mixed cluster
// ---------------------------------------------------------------------------------------------

/// A Service of the mixed test as the test tracks it.
struct MixedService {
    name: &'static str,
    ip: Ipv4Addr,
    /// Pool `east` (node selector `zone=east`, every interface) rather than `west` (`eth0`).
    east: bool,
    /// `externalTrafficPolicy: Local`.
    local: bool,
    /// Nodes with a ready endpoint.
    endpoints: Vec<&'static str>,
}

impl MixedService {
    /// What every speaker must agree on: the owner (MetalLB's election over the nodes the
    /// advertisement selects, and for `Local` those with an endpoint), and the interfaces its
    /// `ServiceL2Status` names (only when the advertisement names some).
    fn expected(&self, zone_east: &BTreeSet<String>, nodes: &[String]) -> Option<L2Status> {
        let candidates: Vec<String> = nodes
            .iter()
            .filter(|n| !self.east || zone_east.contains(*n))
            .filter(|n| !self.local || self.endpoints.contains(&n.as_str()))
            .filter(|_| !self.endpoints.is_empty())
            .cloned()
            .collect();
        first(&candidates, self.ip).map(|node| L2Status {
            node,
            service_namespace: APPS.to_string(),
            service_name: self.name.to_string(),
            interfaces: if self.east {
                Vec::new()
            } else {
                vec!["eth0".to_string()]
            },
        })
    }
}

/// What disagrees with the expectation right now, one line each (empty: all agree).
fn disagreements(
    rig: &Rig,
    prober: &Prober,
    services: &[MixedService],
    zone_east: &BTreeSet<String>,
) -> Vec<String> {
    let nodes = rig.nodes();
    let statuses = rig.c.l2_statuses();
    let vigil_nodes: Vec<String> = rig
        .speakers
        .iter()
        .filter(|(_, s)| matches!(s, Speaker::Vigil(_)))
        .map(|(n, _)| n.clone())
        .collect();
    let owners: BTreeMap<String, Option<BTreeMap<Ipv4Addr, Option<String>>>> = vigil_nodes
        .iter()
        .map(|n| (n.clone(), rig.vigil_owners(n)))
        .collect();
    let mut wrong = Vec::new();
    for svc in services {
        let expected = svc.expected(zone_east, &nodes);
        let owner = expected.as_ref().map(|e| e.node.clone());
        // The client: only the owner's MAC answers (nobody, when there is no owner).
        let heard: BTreeSet<String> = prober
            .recent_macs(svc.ip, SETTLED_WINDOW)
            .iter()
            .map(|m| rig.c.node_of_mac(m))
            .collect();
        let want: BTreeSet<String> = owner.iter().cloned().collect();
        if heard != want {
            wrong.push(format!(
                "{} {}: answered by {heard:?}, expected {want:?}",
                svc.name, svc.ip
            ));
        }
        // MetalLB's account and vigil's, in the same objects: one status, the owner's.
        let mine: Vec<&L2Status> = statuses
            .iter()
            .filter(|s| s.service_name == svc.name && s.service_namespace == APPS)
            .collect();
        let want_status: Vec<&L2Status> = expected.iter().collect();
        if mine != want_status {
            wrong.push(format!(
                "{}: ServiceL2Status {mine:?}, expected {want_status:?}",
                svc.name
            ));
        }
        // Every vigil speaker's own election.
        for (node, seen) in &owners {
            let seen = seen.as_ref().map(|o| o.get(&svc.ip).cloned().flatten());
            if seen != Some(owner.clone()) {
                wrong.push(format!(
                    "{}: vigil on {node} says the owner is {seen:?}, expected {owner:?}",
                    svc.name
                ));
            }
        }
    }
    wrong
}

/// Waits (bounded) until everything agrees; panics with what does not.
fn wait_agreement(
    step: &str,
    rig: &mut Rig,
    prober: &mut Prober,
    services: &[MixedService],
    zone_east: &BTreeSet<String>,
) {
    let started = Instant::now();
    let changed_at = prober.now();
    loop {
        rig.check_running();
        prober.check_running();
        // The trailing window must lie wholly after the change.
        let window_after_change = prober.now() >= changed_at + SETTLED_WINDOW;
        let wrong = disagreements(rig, prober, services, zone_east);
        if wrong.is_empty() && window_after_change {
            let owners: Vec<String> = services
                .iter()
                .map(|s| {
                    let o = s.expected(zone_east, &rig.nodes());
                    let node = o.map_or_else(|| "nobody".to_string(), |o| o.node);
                    let program = rig.speakers.get(&node).map_or("", |sp| sp.program());
                    format!("{}={node}({program})", s.name)
                })
                .collect();
            eprintln!(
                "mixed: {step}: all agree after {:?}: {}",
                started.elapsed(),
                owners.join(" ")
            );
            return;
        }
        assert!(
            started.elapsed() < SETTLE_LIMIT,
            "mixed: {step}: no agreement within {SETTLE_LIMIT:?}:\n  {}\nlogs:\n{}",
            wrong.join("\n  "),
            rig.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn mixed_cluster_elects_one_owner_per_service() {
    const TEST: &str = "mixed_cluster_elects_one_owner_per_service";
    let started = Instant::now();
    let labels = [("node-a", "zone", "east"), ("node-b", "zone", "east")];
    let Some(mut rig) = Rig::start(TEST, "vk-mix", &labels, MIXED_CONFIG) else {
        return;
    };
    let mut zone_east: BTreeSet<String> = ["node-a", "node-b"].map(String::from).into();
    let all = ["node-a", "node-b", "node-c", "node-d"];
    let mut services = vec![
        MixedService {
            name: "web",
            ip: Ipv4Addr::new(198, 18, 0, 200),
            east: false,
            local: false,
            endpoints: all.to_vec(),
        },
        MixedService {
            name: "api",
            ip: Ipv4Addr::new(198, 18, 0, 201),
            east: false,
            local: false,
            endpoints: vec!["node-c"],
        },
        MixedService {
            name: "shop",
            ip: Ipv4Addr::new(198, 18, 0, 220),
            east: true,
            local: false,
            endpoints: all.to_vec(),
        },
        MixedService {
            name: "local-west",
            ip: Ipv4Addr::new(198, 18, 0, 202),
            east: false,
            local: true,
            endpoints: vec!["node-b"],
        },
        MixedService {
            name: "local-east",
            ip: Ipv4Addr::new(198, 18, 0, 221),
            east: true,
            local: true,
            endpoints: vec!["node-a", "node-b"],
        },
    ];
    for s in &services {
        rig.add_service(s.name, s.ip, s.local, &s.endpoints);
    }
    // Two of each, interleaved, so that both programs own something.
    rig.start_metallb("node-a");
    rig.start_vigil("node-b");
    rig.start_metallb("node-c");
    rig.start_vigil("node-d");
    let vips: Vec<Ipv4Addr> = services.iter().map(|s| s.ip).collect();
    let mut prober = Prober::start(rig.c.ns(CLIENT), vips, Duration::from_secs(300));
    wait_agreement("start", &mut rig, &mut prober, &services, &zone_east);

    // The Local services' endpoints move to the other nodes (pods rescheduled).
    let local_west = services
        .iter()
        .position(|s| s.name == "local-west")
        .unwrap();
    let local_east = services
        .iter()
        .position(|s| s.name == "local-east")
        .unwrap();
    let owner = |s: &MixedService, zone: &BTreeSet<String>, r: &Rig| {
        s.expected(zone, &r.nodes()).map(|e| e.node)
    };
    // Move local-west's only endpoint to a node of the other program, then off its owner.
    for target in ["node-a", "node-d", "node-c"] {
        services[local_west].endpoints = vec![target];
        rig.move_endpoints("local-west", &[target]);
        wait_agreement(
            &format!("local-west endpoint moved to {target}"),
            &mut rig,
            &mut prober,
            &services,
            &zone_east,
        );
        assert_eq!(
            owner(&services[local_west], &zone_east, &rig).as_deref(),
            Some(target)
        );
    }
    // local-east: its current owner's endpoint goes away, the other stays.
    let was = owner(&services[local_east], &zone_east, &rig).expect("an owner");
    let stays: Vec<&'static str> = services[local_east]
        .endpoints
        .iter()
        .copied()
        .filter(|n| *n != was)
        .collect();
    services[local_east].endpoints = stays.clone();
    rig.move_endpoints("local-east", &stays);
    wait_agreement(
        &format!("local-east endpoint on {was} removed"),
        &mut rig,
        &mut prober,
        &services,
        &zone_east,
    );

    // A node joins zone east: the east pool's candidates grow (with node-c, a MetalLB node,
    // and node-d, a vigil node, in turn), then node-a leaves the zone.
    for node in ["node-c", "node-d"] {
        zone_east.insert(node.to_string());
        rig.label_node(node, "zone", Some("east"));
        wait_agreement(
            &format!("{node} labelled zone=east"),
            &mut rig,
            &mut prober,
            &services,
            &zone_east,
        );
    }
    zone_east.remove("node-a");
    rig.label_node("node-a", "zone", None);
    wait_agreement(
        "node-a unlabelled",
        &mut rig,
        &mut prober,
        &services,
        &zone_east,
    );

    // local-west loses its last endpoint: nobody may announce it (MetalLB's rule), and it
    // comes back when an endpoint does.
    services[local_west].endpoints = Vec::new();
    rig.move_endpoints("local-west", &[]);
    wait_agreement(
        "local-west without endpoints",
        &mut rig,
        &mut prober,
        &services,
        &zone_east,
    );
    services[local_west].endpoints = vec!["node-b"];
    rig.move_endpoints("local-west", &["node-b"]);
    wait_agreement(
        "local-west endpoint back on node-b",
        &mut rig,
        &mut prober,
        &services,
        &zone_east,
    );

    // Over the whole run, count the rounds where two nodes answered one VIP (MetalLB itself
    // allows a short overlap while speakers re-evaluate; printed, not asserted).
    let end = prober.now();
    for s in &services {
        eprintln!(
            "mixed: {} {}: rounds with two answering nodes over the run: {}",
            s.name,
            s.ip,
            prober.conflicts(s.ip, Duration::ZERO, end)
        );
    }
    // Every speaker ran under MetalLB's speaker RBAC. The one request of vigil's it refuses is
    // the key-rotation acknowledgement Lease (vigil's own addition, used only once vigil's
    // controller rotates keys); anything else refused would break the image-only swap.
    for (node, s) in &rig.speakers {
        if let Speaker::Vigil(v) = s {
            let log = v.log_text();
            let refused: Vec<&str> = log
                .lines()
                .filter(|l| {
                    l.contains("forbidden")
                        && !l.contains(r#""event":"key_ack_failed""#)
                        && !l.contains(r#""event":"key_ack_forbidden""#)
                })
                .collect();
            assert!(
                refused.is_empty(),
                "{node}: requests refused by MetalLB's speaker RBAC:\n{}",
                refused.join("\n")
            );
        }
    }
    eprintln!("{TEST}: total {:?}", started.elapsed());
}

// ---------------------------------------------------------------------------------------------
// Test 2: the rolling migration
// ---------------------------------------------------------------------------------------------

/// The longest gaps of one phase of one step, per VIP.
#[derive(Debug, Clone)]
struct PhaseGaps {
    gaps: BTreeMap<Ipv4Addr, Duration>,
    conflicts: usize,
    /// The client's own longest pause between two rounds of questions.
    client_pause: Duration,
}

impl PhaseGaps {
    fn measure(prober: &Prober, vips: &[Ipv4Addr], from: Duration, to: Duration) -> Self {
        Self {
            gaps: vips
                .iter()
                .map(|v| (*v, prober.longest_gap(*v, from, to)))
                .collect(),
            conflicts: vips.iter().map(|v| prober.conflicts(*v, from, to)).sum(),
            client_pause: prober.longest_pause(from, to),
        }
    }

    fn max(&self) -> Duration {
        self.gaps.values().copied().max().unwrap_or_default()
    }

    fn render(&self) -> String {
        self.gaps
            .iter()
            .map(|(v, g)| format!("{v}={}", g.as_millis()))
            .chain(std::iter::once(format!(
                "(client's own longest pause {} ms, rounds with two answers: {})",
                self.client_pause.as_millis(),
                self.conflicts
            )))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Waits (bounded) until every VIP is answered only by its owner among `live` nodes, for a
/// whole [`SETTLED_WINDOW`] after `since`; the prober time it held.
fn wait_owners(
    step: &str,
    rig: &mut Rig,
    prober: &mut Prober,
    vips: &[Ipv4Addr],
    live: &[String],
    since: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        rig.check_running();
        prober.check_running();
        let wrong: Vec<String> = vips
            .iter()
            .filter_map(|vip| {
                let owner = first(live, *vip).expect("a live node");
                let heard: BTreeSet<String> = prober
                    .recent_macs(*vip, SETTLED_WINDOW)
                    .iter()
                    .map(|m| rig.c.node_of_mac(m))
                    .collect();
                (heard != BTreeSet::from([owner.clone()]))
                    .then(|| format!("{vip}: answered by {heard:?}, expected {owner}"))
            })
            .collect();
        if wrong.is_empty() && prober.now() >= since + SETTLED_WINDOW {
            return prober.now();
        }
        assert!(
            started.elapsed() < SETTLE_LIMIT,
            "migration: {step}: owners not settled within {SETTLE_LIMIT:?}:\n  {}\nlogs:\n{}",
            wrong.join("\n  "),
            rig.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One restart of `node`'s speaker as a DaemonSet rolls it: SIGTERM, the Pod replaced, the new
/// speaker (`vigil` or MetalLB) started once the old one's VIPs have moved. Returns the gaps of
/// the leave phase (SIGTERM until the rest answer for everything) and the join phase (start
/// until the new speaker answers for its VIPs and nobody else does).
fn restart(
    step: &str,
    rig: &mut Rig,
    prober: &mut Prober,
    vips: &[Ipv4Addr],
    node: &str,
    vigil: bool,
) -> (PhaseGaps, PhaseGaps) {
    let all = rig.nodes();
    let rest: Vec<String> = all.iter().filter(|n| *n != node).cloned().collect();
    let leave_from = prober.now();
    rig.terminate(node);
    let leave_to = wait_owners(
        &format!("{step}: {node} left"),
        rig,
        prober,
        vips,
        &rest,
        leave_from,
    );
    let join_from = prober.now();
    if vigil {
        rig.start_vigil(node);
    } else {
        rig.start_metallb(node);
    }
    let join_to = wait_owners(
        &format!("{step}: {node} joined"),
        rig,
        prober,
        vips,
        &all,
        join_from,
    );
    let leave = PhaseGaps::measure(prober, vips, leave_from, leave_to);
    let join = PhaseGaps::measure(prober, vips, join_from, join_to);
    eprintln!(
        "migration: {step}: {node}: leave {:?}, longest gap per VIP (ms): {}; \
         join {:?}, longest gap per VIP (ms): {}",
        leave_to - leave_from,
        leave.render(),
        join_to - join_from,
        join.render(),
    );
    (leave, join)
}

#[test]
fn rolling_migration_gap_is_no_worse_than_metallbs_own() {
    const TEST: &str = "rolling_migration_gap_is_no_worse_than_metallbs_own";
    let started = Instant::now();
    let Some(mut rig) = Rig::start(TEST, "vk-mig", &[], MIGRATION_CONFIG) else {
        return;
    };
    let nodes = rig.nodes();
    // One VIP owned by each node (the first IP of the pool each node ranks first for), so every
    // restart moves a VIP away and back.
    let mut vips = Vec::new();
    for node in &nodes {
        let vip = (200..=239)
            .map(|last| Ipv4Addr::new(198, 18, 0, last))
            .find(|ip| first(&nodes, *ip).as_deref() == Some(node.as_str()))
            .expect("some IP of the pool ranks each node first");
        vips.push(vip);
    }
    for (i, vip) in vips.iter().enumerate() {
        let all: Vec<&str> = nodes.iter().map(String::as_str).collect();
        rig.add_service(&format!("svc-{i}"), *vip, false, &all);
    }
    for node in &nodes {
        rig.start_metallb(node);
    }
    let mut prober = Prober::start(rig.c.ns(CLIENT), vips.clone(), Duration::from_secs(400));
    let now = prober.now();
    wait_owners("MetalLB start", &mut rig, &mut prober, &vips, &nodes, now);

    // MetalLB's own rolling restart of one node, while the rest are MetalLB: the baseline.
    let baseline_node = nodes[0].clone();
    let (base_leave, base_join) = restart(
        "baseline (MetalLB restarted as MetalLB)",
        &mut rig,
        &mut prober,
        &vips,
        &baseline_node,
        false,
    );

    // The migration: each node's MetalLB speaker replaced by vigil, one by one.
    let mut steps = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let step = format!(
            "step {} of {} (MetalLB replaced by vigil)",
            i + 1,
            nodes.len()
        );
        steps.push((
            format!("{node} (MetalLB -> vigil)"),
            restart(&step, &mut rig, &mut prober, &vips, node, true),
        ));
    }

    // Afterwards: only vigil speakers, and exactly one node answers for each VIP, the one
    // MetalLB's election picks.
    let now = prober.now();
    let settled_at = wait_owners(
        "after the migration",
        &mut rig,
        &mut prober,
        &vips,
        &nodes,
        now,
    );
    let tail = PhaseGaps::measure(&prober, &vips, settled_at - SETTLED_WINDOW, settled_at);
    assert_eq!(tail.conflicts, 0, "two nodes answered after the migration");
    assert!(
        rig.speakers
            .values()
            .all(|s| matches!(s, Speaker::Vigil(_))),
        "every node runs vigil"
    );

    // The way back: one node rolled back to MetalLB (vigil leaving to vigil, MetalLB joining
    // a vigil cluster), held to the same allowance; then again exactly one node per VIP.
    let back = nodes[1].clone();
    steps.push((
        format!("{back} (vigil -> MetalLB)"),
        restart(
            "rollback (vigil replaced by MetalLB)",
            &mut rig,
            &mut prober,
            &vips,
            &back,
            false,
        ),
    ));
    let now = prober.now();
    let settled_at = wait_owners(
        "after the rollback",
        &mut rig,
        &mut prober,
        &vips,
        &nodes,
        now,
    );
    let tail = PhaseGaps::measure(&prober, &vips, settled_at - SETTLED_WINDOW, settled_at);
    assert_eq!(tail.conflicts, 0, "two nodes answered after the rollback");

    let worst_leave = steps
        .iter()
        .map(|(_, (l, _))| l.max())
        .max()
        .unwrap_or_default();
    let worst_join = steps
        .iter()
        .map(|(_, (_, j))| j.max())
        .max()
        .unwrap_or_default();
    let allowed = |baseline: Duration| baseline * GAP_RATIO + PROBE_INTERVAL * GAP_SLACK_PROBES;
    eprintln!(
        "migration: summary (ms, longest gap of any VIP): MetalLB's own restart: leave {} join {}; \
         migration and rollback steps: leave {} join {}; allowed: leave {} join {} \
         ({GAP_RATIO} x MetalLB's + {GAP_SLACK_PROBES} probe intervals of {} ms); total {:?}",
        base_leave.max().as_millis(),
        base_join.max().as_millis(),
        worst_leave.as_millis(),
        worst_join.as_millis(),
        allowed(base_leave.max()).as_millis(),
        allowed(base_join.max()).as_millis(),
        PROBE_INTERVAL.as_millis(),
        started.elapsed()
    );
    // A pause of the client itself (the test process starved on a loaded machine) is no
    // speaker's doing: it is added to the allowance of the phase it fell in.
    let paused = |phase: &PhaseGaps| phase.client_pause.saturating_sub(PROBE_INTERVAL);
    for (node, (leave, join)) in &steps {
        assert!(
            leave.max() <= allowed(base_leave.max()) + paused(leave),
            "{node}: the old speaker leaving left a VIP unanswered for {:?} ({}), MetalLB's own leave {:?}",
            leave.max(),
            leave.render(),
            base_leave.max()
        );
        assert!(
            join.max() <= allowed(base_join.max()) + paused(join),
            "{node}: the new speaker joining left a VIP unanswered for {:?} ({}), MetalLB's own join {:?}",
            join.max(),
            join.render(),
            base_join.max()
        );
    }
}
