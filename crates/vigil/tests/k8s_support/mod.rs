//! The lab of the Kubernetes-mode failover tests: a real kube-apiserver (vigil-testenv) on
//! `cp` (198.18.0.2), three speaker hosts `a`, `b`, `c` (198.18.0.11-13, nodes `node-a`..
//! `node-c`) and a client (198.18.0.100, 2001:db8::100) on one bridge, every host in a network
//! namespace of its own. The speakers are `vigil speaker` processes under MetalLB's speaker
//! ServiceAccount and RBAC (MetalLB's CRDs come from the Go module cache), or `vigil
//! standalone` on the same hosts for the side-by-side figures.
//!
//! The client's questions go through the one failover prober (`vigil_netlab::prober`) on a
//! packet socket opened inside the client's namespace: ARP for an IPv4 VIP and a neighbour
//! solicitation for an IPv6 one, every round. Processes are killed by PID on drop; the
//! namespaces go with the [`KubeLab`]. No duration is asserted anywhere: waits are bounded
//! polls, and outages are printed.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, Patch, PatchParams};
use vigil_kubelab::metallb::{self, METALLB_NAMESPACE, MemberlistKey, SpeakerConfig};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, TestEndpoint, TestService, TestSlice, apply_yaml,
    create_endpoint_slice, create_service, ensure_namespace,
};
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::prober::{self, Answer, Ipv6Question, Kind, WatchConfig};

pub const CLIENT4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100);
/// The API server's address on the bridge (kubelab's default).
pub const API_SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The speaker hosts: (lab host, node name, address).
pub const SPEAKERS: [(&str, &str, [u8; 4]); 3] = [
    ("a", "node-a", [198, 18, 0, 11]),
    ("b", "node-b", [198, 18, 0, 12]),
    ("c", "node-c", [198, 18, 0, 13]),
];
/// The namespace of the tests' Services.
pub const SERVICE_NAMESPACE: &str = "failover";
/// Pool `lab` (both families) and its L2Advertisement on eth0: our own objects, MetalLB's API.
pub const POOL_AND_AD: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: lab
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.200-198.18.0.209
    - 2001:db8::200-2001:db8::209
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
/// Bound on every wait for a settled state (two shared cores, other tests beside).
pub const SETTLE: Duration = Duration::from_secs(60);

/// A `vigil speaker` or `vigil standalone` process on a lab host; SIGKILLed when dropped.
pub struct Daemon {
    pub node: String,
    pub host: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Daemon {
    fn spawn(node: &str, host: &str, log: PathBuf, mut command: Command) -> Self {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let child = command
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start vigil");
        Self {
            node: node.to_string(),
            host: host.to_string(),
            child: Some(child),
            log,
        }
    }

    /// Whether it runs.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Panics (with its log) when it has exited by itself.
    pub fn check_running(&mut self) {
        if let Some(child) = &mut self.child
            && let Some(status) = child.try_wait().expect("try_wait")
        {
            panic!(
                "vigil on {} exited ({status}); log ends:\n{}",
                self.node,
                self.log_tail(30)
            );
        }
    }

    /// The whole log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait (at most 15 s, then SIGKILL): whether it exited by itself with 0.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
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

/// The lab and its speakers.
pub struct Cluster {
    pub speakers: Vec<Daemon>,
    pub configs: Vec<SpeakerConfig>,
    pub macs: Vec<String>,
    key: MemberlistKey,
    speaker_kubeconfig: PathBuf,
    /// Dropped last: the control plane, then the namespaces.
    pub lab: KubeLab,
}

/// A Service of the tests: `name` in [`SERVICE_NAMESPACE`] with `ips` as its ingress (the
/// first is MetalLB's election key), ready endpoints on every node.
pub struct Svc<'a> {
    pub name: &'a str,
    pub ips: &'a [IpAddr],
}

fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
}

impl Cluster {
    /// The lab, MetalLB's CRDs, RBAC, namespace and Secret, the speakers' Nodes and Pods,
    /// `config_yaml` (pools and advertisements) and `services`; no speaker started yet.
    /// `None` when the test must skip (no root, no vigil-testenv).
    pub fn new(
        test: &str,
        tag: &str,
        apiserver_args: &[&str],
        config_yaml: &str,
        services: &[Svc<'_>],
    ) -> Option<Self> {
        if !vigil_netlab::root_or_skip(test) {
            return None;
        }
        let cp_config = ControlPlaneConfig {
            tokens: metallb::metallb_service_account_tokens(),
            apiserver_args: apiserver_args.iter().map(ToString::to_string).collect(),
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
        plug(&mut lab, "client", CLIENT4);
        lab.bridge().ip(
            "client",
            &[
                "addr",
                "add",
                &format!("{CLIENT6}/64"),
                "dev",
                "eth0",
                "nodad",
            ],
        );
        let macs = configs
            .iter()
            .map(|c| lab.bridge().mac(&c.host, "eth0"))
            .collect();
        let key = MemberlistKey::random().expect("a memberlist key");
        let kubeconfigs =
            metallb::write_metallb_kubeconfigs(lab.cp()).expect("MetalLB kubeconfigs");
        let cluster = Self {
            speakers: Vec::new(),
            configs,
            macs,
            key,
            speaker_kubeconfig: kubeconfigs.speaker,
            lab,
        };
        let client = cluster.lab.cp().client().expect("admin client");
        cluster.lab.cp().block_on(async {
            metallb::install_metallb(&client, METALLB_NAMESPACE, &cluster.key)
                .await
                .expect("install MetalLB's CRDs, namespace and Secret");
            metallb::install_metallb_rbac(&client)
                .await
                .expect("MetalLB's RBAC");
            metallb::register_speakers(&client, &cluster.configs)
                .await
                .expect("speaker Nodes and Pods");
            apply_yaml(&client, "pools and advertisements", config_yaml)
                .await
                .expect("apply the pools and advertisements");
            ensure_namespace(&client, SERVICE_NAMESPACE)
                .await
                .expect("namespace");
        });
        for svc in services {
            cluster.add_service(svc);
        }
        Some(cluster)
    }

    /// Creates the Service with ready endpoints on every node and writes its ingress IPs, as
    /// MetalLB's controller would (through the status subresource).
    pub fn add_service(&self, svc: &Svc<'_>) {
        let client = self.lab.cp().client().expect("admin client");
        let nodes: Vec<String> = self.configs.iter().map(|c| c.node.clone()).collect();
        self.lab.cp().block_on(async {
            let mut spec = TestService::load_balancer(SERVICE_NAMESPACE, svc.name);
            if svc.ips.iter().any(IpAddr::is_ipv6) && svc.ips.iter().any(IpAddr::is_ipv4) {
                spec = spec.dual_stack();
            }
            create_service(&client, &spec).await.expect("service");
            let mut slice = TestSlice::for_service(SERVICE_NAMESPACE, svc.name);
            for (i, node) in nodes.iter().enumerate() {
                let endpoint = IpAddr::from([198, 18, 1, 10 + u8::try_from(i).unwrap()]);
                slice = slice.endpoint(TestEndpoint::ready(endpoint, node));
            }
            create_endpoint_slice(&client, &slice)
                .await
                .expect("endpoint slice");
            let ingress: Vec<serde_json::Value> = svc
                .ips
                .iter()
                .map(|ip| serde_json::json!({ "ip": ip.to_string() }))
                .collect();
            let services: Api<Service> = Api::namespaced(client.clone(), SERVICE_NAMESPACE);
            let status =
                serde_json::json!({ "status": { "loadBalancer": { "ingress": ingress } } });
            services
                .patch_status(svc.name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .expect("write status.loadBalancer.ingress");
        });
    }

    /// Node names, in [`SPEAKERS`] order.
    pub fn nodes(&self) -> Vec<&str> {
        self.configs.iter().map(|c| c.node.as_str()).collect()
    }

    /// The index of `node`.
    pub fn index(&self, node: &str) -> usize {
        self.configs
            .iter()
            .position(|c| c.node == node)
            .unwrap_or_else(|| panic!("no node {node}"))
    }

    /// The MAC of `node`'s eth0.
    pub fn mac(&self, node: &str) -> &str {
        &self.macs[self.index(node)]
    }

    /// The lab host of `node`.
    pub fn host(&self, node: &str) -> &str {
        &self.configs[self.index(node)].host
    }

    /// Starts vigil on every host (in `mode`); any running one is killed first.
    pub fn start_all(&mut self, mode: Mode) {
        for s in &mut self.speakers {
            s.kill();
        }
        self.speakers.clear();
        let nodes: Vec<String> = self.configs.iter().map(|c| c.node.clone()).collect();
        for node in nodes {
            let daemon = self.spawn(&node, mode);
            self.speakers.push(daemon);
        }
    }

    /// Starts vigil on `node` again (in `mode`), after a kill or a stop.
    pub fn restart(&mut self, node: &str, mode: Mode) {
        let i = self.index(node);
        assert!(!self.speakers[i].running(), "{node} still runs");
        self.speakers[i] = self.spawn(node, mode);
    }

    fn spawn(&self, node: &str, mode: Mode) -> Daemon {
        let config = &self.configs[self.index(node)];
        let dir = self.lab.cp().work_dir().join("vigil").join(&config.node);
        std::fs::create_dir_all(&dir).expect("speaker dir");
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.lab.bridge().ns(&config.host)])
            .arg(env!("CARGO_BIN_EXE_vigil"));
        match mode {
            Mode::Kubernetes => {
                let key_dir = dir.join("memberlist-key");
                std::fs::create_dir_all(&key_dir).expect("key dir");
                std::fs::write(key_dir.join("secretkey"), self.key.as_str()).expect("key file");
                command
                    .arg("speaker")
                    .arg(format!(
                        "--kubeconfig={}",
                        self.speaker_kubeconfig.display()
                    ))
                    .arg(format!("--namespace={}", config.namespace))
                    .arg(format!("--node-name={}", config.node))
                    .arg(format!("--pod-name={}", config.pod_name()))
                    .arg(format!("--ml-bindaddr={}", config.ip))
                    .arg(format!("--ml-bindport={}", config.memberlist_port))
                    .arg(format!("--ml-labels={}", metallb::speaker_label_selector()))
                    .arg(format!("--ml-secret-key-path={}", key_dir.display()))
                    .args(["--port=0", "--log-level=info"]);
            }
            Mode::Standalone => {
                let keyring = dir.join("keyring.json");
                if !keyring.exists() {
                    let shared = self.lab.cp().work_dir().join("vigil").join("keyring.json");
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
                command
                    .arg("standalone")
                    .arg("--config")
                    .arg(&file)
                    .args(["--log-level", "info"]);
            }
        }
        let log = dir.join(format!("{}.log", mode.name()));
        Daemon::spawn(&config.node, &config.host, log, command)
    }

    /// `vigil standalone`'s file for `config`'s host: the same names, addresses, port, key
    /// length and VIPs as the Kubernetes lab's Service `web`.
    fn standalone_config(&self, config: &SpeakerConfig, keyring: &Path) -> String {
        let seeds: Vec<String> = self.configs.iter().map(|c| c.ip.to_string()).collect();
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
        for s in &mut self.speakers {
            s.check_running();
        }
    }

    /// The tails of every speaker's log.
    pub fn logs(&self) -> String {
        self.speakers
            .iter()
            .map(|s| format!("--- {}\n{}", s.node, s.log_tail(25)))
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
            &self.lab.bridge().ns("client"),
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
        vigil_lb::rank(nodes.iter().copied(), key)[0].to_string()
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
