//! The lab of the Kubernetes-mode failover tests, on `vigil_kubelab::cluster`: a real
//! kube-apiserver (vigil-testenv) on `cp` (198.18.0.2), three speaker hosts `a`, `b`, `c`
//! (198.18.0.11-13, nodes `node-a`..`node-c`) and a client (198.18.0.100, 2001:db8::100) on
//! one bridge, every host in a network namespace of its own. The speakers are `vigil speaker`
//! processes under MetalLB's speaker ServiceAccount and RBAC (MetalLB's CRDs come from the Go
//! module cache), or `vigil standalone` on the same hosts for the side-by-side figures.
//!
//! The client's questions go through the one failover prober (`vigil_netlab::prober`) on a
//! packet socket opened inside the client's namespace: ARP for an IPv4 VIP and a neighbour
//! solicitation for an IPv6 one, every round. Processes are killed by PID on drop; the
//! namespaces go with the lab cluster. No duration is asserted anywhere: waits are bounded
//! polls, and outages are printed.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::{ControlFlow, Deref, DerefMut};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vigil_kubelab::cluster::{
    CLIENT, CLIENT4, CLIENT6, Cluster as LabCluster, ClusterSpec, LabProcess, LbService, fresh_log,
    metallb_first, pool_yaml,
};
use vigil_kubelab::metallb::SpeakerConfig;
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::prober::{self, Answer, Ipv6Question, Kind, WatchConfig};

/// The API server's address on the bridge (kubelab's default).
pub const API_SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// How many speaker hosts the lab has.
pub const NODES: usize = 3;
/// The namespace of the tests' Services.
pub const SERVICE_NAMESPACE: &str = "failover";
/// Pool `lab`'s IPv4 range.
pub const POOL4: &str = "198.18.0.200-198.18.0.209";
/// Pool `lab`'s IPv6 range.
pub const POOL6: &str = "2001:db8::200-2001:db8::209";
/// Bound on every wait for a settled state (two shared cores, other tests beside).
pub const SETTLE: Duration = Duration::from_secs(60);

/// The `vigil` binary under test.
fn vigil() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_vigil"))
}

/// A `vigil speaker` or `vigil standalone` process on a speaker host, under its node's name;
/// SIGKILLed when dropped.
pub struct Daemon {
    pub node: String,
    pub host: String,
    process: LabProcess,
}

impl Daemon {
    /// Whether it runs.
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// Panics (with the end of its log) when it has exited by itself.
    pub fn check_running(&mut self) {
        self.process.check_running();
    }

    /// The whole log (of this start).
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// SIGSTOP (`freeze`) or SIGCONT (`!freeze`) while it runs: a starved or frozen node.
    pub fn freeze(&self, freeze: bool) {
        if let Some(pid) = self.process.pid() {
            let signal = if freeze { "-STOP" } else { "-CONT" };
            vigil_netlab::run(&["kill", signal, &pid.to_string()]);
        }
    }

    /// SIGTERM and wait (at most 15 s, then SIGKILL): whether it exited by itself with 0.
    pub fn terminate(&mut self) -> bool {
        self.process
            .terminate(Duration::from_secs(15))
            .is_some_and(|status| status.success())
    }
}

/// Which vigil runs on the speaker hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `vigil speaker` against the API server.
    Kubernetes,
    /// `vigil standalone` with a YAML file naming the same VIPs.
    Standalone,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Kubernetes => "kubernetes",
            Self::Standalone => "standalone",
        }
    }
}

/// Pool `lab` (both families) and its L2Advertisement on eth0: our own objects, MetalLB's API.
pub fn pool_and_ad() -> String {
    pool_yaml(&[POOL4, POOL6], &["eth0"])
}

/// The lab cluster (reached through `Deref`: `lab`, `speakers`, `nodes`, `index`, `mac`, ...)
/// and the vigil running on its speaker hosts.
pub struct Cluster {
    /// One per speaker host, in the order of the lab cluster's `speakers`, once started.
    pub daemons: Vec<Daemon>,
    /// Dropped last: the control plane, then the namespaces.
    lab_cluster: LabCluster,
}

impl Deref for Cluster {
    type Target = LabCluster;

    fn deref(&self) -> &LabCluster {
        &self.lab_cluster
    }
}

impl DerefMut for Cluster {
    fn deref_mut(&mut self) -> &mut LabCluster {
        &mut self.lab_cluster
    }
}

/// A Service of the tests: `name` in [`SERVICE_NAMESPACE`] with `ips` as its ingress (the
/// first is MetalLB's election key), ready endpoints on every node.
pub struct Svc<'a> {
    pub name: &'a str,
    pub ips: &'a [IpAddr],
}

impl Cluster {
    /// The lab cluster ([`NODES`] speaker hosts, the client with IPv6 too, MetalLB's CRDs,
    /// RBAC, namespace, Secret, Nodes and Pods), `config_yaml` (pools and advertisements) and
    /// `services`; no speaker started yet. `None` when the test must skip (no root, no
    /// vigil-testenv).
    pub fn new(
        test: &str,
        tag: &str,
        apiserver_args: &[&str],
        config_yaml: &str,
        services: &[Svc<'_>],
    ) -> Option<Self> {
        Self::with_nodes(test, tag, NODES, apiserver_args, config_yaml, services)
    }

    /// [`Cluster::new`] with `nodes` speaker hosts.
    pub fn with_nodes(
        test: &str,
        tag: &str,
        nodes: usize,
        apiserver_args: &[&str],
        config_yaml: &str,
        services: &[Svc<'_>],
    ) -> Option<Self> {
        let spec = ClusterSpec {
            apiserver_args: apiserver_args.iter().map(ToString::to_string).collect(),
            client_ipv6: true,
            ..ClusterSpec::nodes(nodes)
        };
        let lab_cluster = LabCluster::start(test, tag, &spec)?;
        lab_cluster.apply("pools and advertisements", config_yaml);
        lab_cluster.namespace(SERVICE_NAMESPACE);
        let cluster = Self {
            daemons: Vec::new(),
            lab_cluster,
        };
        for svc in services {
            cluster.add_service(svc);
        }
        Some(cluster)
    }

    /// Creates the Service with ready endpoints on every node and writes its ingress IPs, as
    /// MetalLB's controller would (through the status subresource).
    pub fn add_service(&self, svc: &Svc<'_>) {
        self.lab_cluster.add_service(
            &LbService::new(SERVICE_NAMESPACE, svc.name)
                .endpoints_on(&self.nodes(), 10)
                .ingress(svc.ips),
        );
    }

    /// The lab host of `node`.
    pub fn host(&self, node: &str) -> &str {
        &self.config(node).host
    }

    /// Starts vigil on every host (in `mode`); any running one is killed first.
    pub fn start_all(&mut self, mode: Mode) {
        for d in &mut self.daemons {
            d.kill();
        }
        self.daemons.clear();
        for i in 0..self.speakers.len() {
            let daemon = self.spawn(i, mode);
            self.daemons.push(daemon);
        }
    }

    /// Starts vigil on `node` again (in `mode`), after a kill or a stop; it logs afresh.
    pub fn restart(&mut self, node: &str, mode: Mode) {
        let i = self.index(node);
        assert!(!self.daemons[i].running(), "{node} still runs");
        self.daemons[i] = self.spawn(i, mode);
    }

    fn spawn(&self, i: usize, mode: Mode) -> Daemon {
        let config = &self.speakers[i];
        let process = match mode {
            Mode::Kubernetes => self.vigil_speaker(vigil(), i, &[]),
            Mode::Standalone => {
                let dir = self.dir(&config.node);
                let keyring = dir.join("keyring.json");
                if !keyring.exists() {
                    let shared = self.dir("shared").join("keyring.json");
                    if !shared.exists() {
                        vigil_netlab::run(&[
                            env!("CARGO_BIN_EXE_vigil"),
                            "keygen",
                            "--out",
                            &shared.display().to_string(),
                        ]);
                    }
                    std::fs::copy(&shared, &keyring).expect("keyring");
                }
                let file = dir.join("standalone.yaml");
                std::fs::write(&file, self.standalone_config(config, &keyring))
                    .expect("standalone config");
                let args = [
                    "standalone".to_string(),
                    "--config".to_string(),
                    file.display().to_string(),
                    "--log-level".to_string(),
                    "info".to_string(),
                ];
                LabProcess::spawn(
                    &config.node,
                    &self.ns(&config.host),
                    vigil(),
                    &args,
                    &[],
                    fresh_log(&dir, "standalone"),
                )
            }
        };
        Daemon {
            node: config.node.clone(),
            host: config.host.clone(),
            process,
        }
    }

    /// `vigil standalone`'s file for `config`'s host: the same names, addresses, port, key
    /// length and VIPs as the Kubernetes lab's Service `web`.
    fn standalone_config(&self, config: &SpeakerConfig, keyring: &Path) -> String {
        let seeds: Vec<String> = self.speakers.iter().map(|c| c.ip.to_string()).collect();
        format!(
            "node: {{name: {node}}}\n\
             gossip: {{bind: \"{ip}:{port}\", seeds: [{seeds}], keyring_file: {keyring}}}\n\
             interfaces: {{include: [eth0]}}\n\
             http: {{listen: \"127.0.0.1:7472\"}}\n\
             services:\n  \
             - name: web\n    \
               vips: [{vip4}, \"{vip6}\"]\n",
            node = config.node,
            ip = config.ip,
            port = config.memberlist_port,
            seeds = seeds.join(", "),
            keyring = keyring.display(),
            vip4 = WEB4,
            vip6 = WEB6,
        )
    }

    /// Panics (with its log) when a speaker that should run has exited.
    pub fn check_running(&mut self) {
        for d in &mut self.daemons {
            d.check_running();
        }
    }

    /// The tails of every speaker's log.
    pub fn logs(&self) -> String {
        self.daemons
            .iter()
            .map(|d| format!("--- {}\n{}", d.node, d.log_tail(25)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The bridge port of `node`'s cable: down is the host's link lost.
    pub fn set_link(&self, node: &str, up: bool) {
        let bridge = self.lab.bridge();
        let port = bridge.port(self.host(node), "eth0");
        bridge.ip(
            "br",
            &["link", "set", &port, if up { "up" } else { "down" }],
        );
    }

    /// The MACs that answer one round of questions for `ip` (an ARP request for IPv4, a
    /// neighbour solicitation for IPv6): `rounds` rounds 30 ms apart, unsolicited announcements
    /// left out.
    pub fn answering(&self, ip: IpAddr, rounds: u32) -> BTreeSet<String> {
        let interval = Duration::from_millis(30);
        let (target4, ipv6) = targets(ip);
        let recording = Probe::run(
            &self.ns(CLIENT),
            target4,
            ipv6,
            interval,
            interval * rounds,
            Duration::from_millis(150),
        );
        let kind = if ip.is_ipv4() { Kind::Arp } else { Kind::Ndp };
        recording
            .answers
            .iter()
            .filter(|a| a.kind == kind && !a.gratuitous)
            .map(|a| a.mac.to_string())
            .collect()
    }

    /// Waits (bounded) until exactly `node` answers for every IP in `ips`; the answers last
    /// seen for each IP.
    pub fn wait_only(&mut self, ips: &[IpAddr], node: &str) -> Vec<(IpAddr, BTreeSet<String>)> {
        let want = BTreeSet::from([self.mac(node).to_string()]);
        self.wait_answers(ips, &want)
    }

    /// Waits (bounded) until nobody answers for any IP in `ips`.
    pub fn wait_silent(&mut self, ips: &[IpAddr]) -> Vec<(IpAddr, BTreeSet<String>)> {
        self.wait_answers(ips, &BTreeSet::new())
    }

    fn wait_answers(
        &mut self,
        ips: &[IpAddr],
        want: &BTreeSet<String>,
    ) -> Vec<(IpAddr, BTreeSet<String>)> {
        let end = Instant::now() + SETTLE;
        loop {
            let seen: Vec<(IpAddr, BTreeSet<String>)> =
                ips.iter().map(|ip| (*ip, self.answering(*ip, 5))).collect();
            if seen.iter().all(|(_, macs)| macs == want) || Instant::now() > end {
                return seen;
            }
            self.check_running();
        }
    }

    /// Asserts that exactly `node` answers for each of `ips` (after waiting for it).
    pub fn assert_only(&mut self, what: &str, ips: &[IpAddr], node: &str) {
        let seen = self.wait_only(ips, node);
        let want = BTreeSet::from([self.mac(node).to_string()]);
        assert!(
            seen.iter().all(|(_, macs)| *macs == want),
            "{what}: expected only {node} ({}) to answer for {ips:?}, saw {seen:?}\n{}",
            self.mac(node),
            self.logs()
        );
    }

    /// The node MetalLB's election ranks first for `key` among `nodes`.
    pub fn first(nodes: &[&str], key: IpAddr) -> String {
        metallb_first(nodes, key).expect("some node")
    }
}

/// Service `web`'s IPv4 VIP: the election key.
pub const WEB4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
/// Service `web`'s IPv6 VIP: announced with the IPv4 one, from the same node.
pub const WEB6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x200);

/// The prober's IPv4 target and IPv6 question for `ip`. An IPv6 VIP is asked beside an IPv4
/// address nobody holds (the prober always asks ARP too).
fn targets(ip: IpAddr) -> (Ipv4Addr, Option<Ipv6Question>) {
    match ip {
        IpAddr::V4(v4) => (v4, None),
        IpAddr::V6(v6) => (
            Ipv4Addr::new(198, 18, 0, 254),
            Some(Ipv6Question {
                src_ip: CLIENT6,
                target: v6,
            }),
        ),
    }
}

/// A failover watch from the client, running on a thread inside its namespace until
/// [`Probe::finish`]: ARP for an IPv4 VIP and, optionally, NS for an IPv6 one, every
/// `interval`.
pub struct Probe {
    stop: Arc<AtomicBool>,
    origin: Arc<Mutex<Option<Instant>>>,
    answers: Arc<Mutex<Vec<Answer>>>,
    thread: Option<JoinHandle<prober::Recording>>,
}

impl Probe {
    /// Starts watching `v4` (and `v6`).
    pub fn start(ns: &str, v4: Ipv4Addr, v6: Option<Ipv6Addr>, interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let origin = Arc::new(Mutex::new(None));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let ipv6 = v6.map(|target| Ipv6Question {
            src_ip: CLIENT6,
            target,
        });
        let (ns, stop_flag, origin_slot) = (ns.to_string(), stop.clone(), origin.clone());
        let heard = answers.clone();
        let thread = std::thread::spawn(move || {
            watch_in(
                &ns,
                v4,
                ipv6,
                interval,
                Duration::from_secs(120),
                Duration::from_millis(100),
                |event| {
                    if let prober::Event::Answer(answer) = event {
                        heard.lock().expect("answers").push(*answer);
                    }
                    if let prober::Event::Round { at, .. } = event {
                        let mut slot = origin_slot.lock().expect("origin");
                        if slot.is_none() {
                            *slot = Some(Instant::now() - *at);
                        }
                        if stop_flag.load(Ordering::Relaxed) {
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                },
            )
        });
        let probe = Self {
            stop,
            origin,
            answers,
            thread: Some(thread),
        };
        // Bounded: the first round goes out at once.
        vigil_netlab::poll(Duration::from_secs(10), Duration::from_millis(5), || {
            probe.origin.lock().expect("origin").is_some()
        });
        probe
    }

    /// A one-off watch of `duration` (plus `linger` for late answers); its recording.
    pub fn run(
        ns: &str,
        v4: Ipv4Addr,
        ipv6: Option<Ipv6Question>,
        interval: Duration,
        duration: Duration,
        linger: Duration,
    ) -> prober::Recording {
        watch_in(ns, v4, ipv6, interval, duration, linger, |_| {
            ControlFlow::Continue(())
        })
    }

    /// Now, on the watch's clock.
    pub fn now(&self) -> Duration {
        let origin = self.origin.lock().expect("origin").expect("started");
        origin.elapsed()
    }

    /// Whether `mac` has answered (not only announced) a question of `kind` since `since`.
    pub fn heard_since(&self, kind: Kind, mac: &str, since: Duration) -> bool {
        self.answers
            .lock()
            .expect("answers")
            .iter()
            .any(|a| a.kind == kind && a.at >= since && a.mac.to_string() == mac)
    }

    /// Stops the watch; what it recorded.
    pub fn finish(mut self) -> prober::Recording {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .expect("running")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch_in(
    ns: &str,
    v4: Ipv4Addr,
    ipv6: Option<Ipv6Question>,
    interval: Duration,
    duration: Duration,
    linger: Duration,
    on_event: impl FnMut(&prober::Event) -> ControlFlow<()> + Send,
) -> prober::Recording {
    let (ifindex, mac) = vigil_netlab::link(ns, "eth0").expect("the client's eth0");
    vigil_netlab::netns::run_in(ns, move || {
        let socket = PacketSocket::open(ifindex, Filter::Answers).expect("packet socket");
        let config = WatchConfig {
            src_mac: mac,
            src_ip: CLIENT4,
            target: v4,
            interval,
            duration,
            icmp: false,
            icmp_id: 0,
            stop_after_change: None,
            ipv6,
            senders: None,
            linger,
        };
        prober::watch(&socket, &config, on_event).expect("watch")
    })
    .expect("enter the client's namespace")
}

/// What a client saw across one failure at `fault` (on the probe's clock), for answers of
/// `kind`: the longest span without an answer from the last answer before the fault to the
/// first answer from `new` after it, and when that first answer came (after the fault).
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    pub gap: Duration,
    pub moved_after: Duration,
    /// Rounds in which two MACs answered one question.
    pub conflicts: u64,
}

/// The [`Outage`] of `kind` in `recording`, or `None` when `new` never answered after `fault`.
pub fn outage(
    recording: &prober::Recording,
    kind: Kind,
    fault: Duration,
    new: &str,
) -> Option<Outage> {
    let of_kind: Vec<&Answer> = recording
        .answers
        .iter()
        .filter(|a| a.kind == kind)
        .collect();
    let first_new = of_kind
        .iter()
        .position(|a| a.at >= fault && a.mac.to_string() == new)?;
    let start = of_kind
        .iter()
        .rposition(|a| a.at < fault)
        .unwrap_or(first_new);
    let mut gap = Duration::ZERO;
    let mut previous = of_kind[start].at.min(fault);
    for a in &of_kind[start..=first_new] {
        gap = gap.max(a.at.saturating_sub(previous));
        previous = a.at;
    }
    let summary = prober::summarize(
        &recording.answers,
        kind,
        Duration::from_secs(1),
        recording.end,
    );
    Some(Outage {
        gap,
        moved_after: of_kind[first_new].at.saturating_sub(fault),
        conflicts: summary.conflicts,
    })
}

/// `d` in whole milliseconds.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}
