//! The cluster most Kubernetes tests run on, set up once here: a [`KubeLab`] (the API server
//! on `cp`, 198.18.0.2) whose bridge has N speaker hosts `a`, `b`, ... (nodes `node-a`, ...,
//! 198.18.0.11 on) and a client (198.18.0.100, and 2001:db8::100 if asked for); MetalLB's
//! CRDs, RBAC, namespace and memberlist Secret; every speaker's Node and Pod (or none of
//! these, for a test that installs our own manifests: [`Install::Nothing`]); the kubeconfigs
//! of MetalLB's ServiceAccounts. On it: configuration objects, Services
//! ([`LbService`]), `vigil speaker` and `vigil controller` processes ([`LabProcess`]), ARP
//! questions from the client and the ServiceL2Status objects.
//!
//! A test fixture: its methods panic with a message when the lab does not do what a test
//! needs. Processes are the caller's (drop them before the cluster); the namespaces, the API
//! server and its files go with the [`Cluster`].

mod http;
mod process;
mod service;

pub use http::{HttpAnswer, http_get, https_get};
pub use process::{LabProcess, Output};
pub use service::{LbService, create_lb_service, first_ingress};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::DynamicObject;

use crate::KubeLab;
use crate::arp::{ArpAnswer, arp_ask};
use crate::control_plane::{ControlPlaneConfig, StaticToken};
use crate::deploy;
use crate::fixtures::ensure_namespace;
use crate::manifests::apply_yaml;
use crate::metallb::{
    self, L2Status, METALLB_NAMESPACE, MemberlistKey, MetalLbKubeconfigs, SpeakerConfig,
};

/// The client's lab host.
pub const CLIENT: &str = "client";
/// The client's IPv4 address.
pub const CLIENT4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
/// The client's IPv6 address (when [`ClusterSpec::client_ipv6`]).
pub const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100);

/// How many questions in a row one host must answer alone for
/// [`Cluster::wait_single_answer`] (200 ms each).
pub const SINGLE_ANSWER_STREAK: usize = 3;

/// What a vigil speaker needs beyond MetalLB's speaker RBAC: its key acknowledgement Lease
/// (`vigil_k8s::key_ack`, for key rotation; docs/KUBERNETES.md, "Key rotation").
pub const KEY_ACK_RBAC: &str = r#"
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

/// The scraper's ServiceAccount (a Prometheus's, `monitoring/prometheus`): its static token.
pub const SCRAPER_TOKEN: &str = "vigil-kubelab-scraper";
/// The scraper's namespace.
pub const SCRAPER_NAMESPACE: &str = "monitoring";
/// The scraper's ServiceAccount.
pub const SCRAPER_ACCOUNT: &str = "prometheus";

/// What scraping a metrics port takes, as MetalLB's chart and prometheus overlay grant it:
/// the programs (MetalLB's and vigil's ServiceAccounts) may create TokenReviews and
/// SubjectAccessReviews, and the scraper may `get` the non-resource URLs `/metrics` and
/// `/status` ([`Cluster::allow_scrapes`]).
pub const SCRAPE_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vigil-lab-metrics-reviews
rules:
  - apiGroups: ["authentication.k8s.io"]
    resources: ["tokenreviews"]
    verbs: ["create"]
  - apiGroups: ["authorization.k8s.io"]
    resources: ["subjectaccessreviews"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vigil-lab-metrics-reviews
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vigil-lab-metrics-reviews
subjects:
  - kind: ServiceAccount
    name: speaker
    namespace: metallb-system
  - kind: ServiceAccount
    name: controller
    namespace: metallb-system
  - kind: ServiceAccount
    name: vigil-speaker
    namespace: metallb-system
  - kind: ServiceAccount
    name: vigil-controller
    namespace: metallb-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: vigil-lab-metrics-reader
rules:
  - nonResourceURLs: ["/metrics", "/status"]
    verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: vigil-lab-metrics-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: vigil-lab-metrics-reader
subjects:
  - kind: ServiceAccount
    name: prometheus
    namespace: monitoring
"#;

/// IPAddressPool `lab` with `addresses` and L2Advertisement `lab` of it, in
/// [`METALLB_NAMESPACE`]; the advertisement names `interfaces` when there are any (MetalLB's
/// API, our own objects).
pub fn pool_yaml(addresses: &[&str], interfaces: &[&str]) -> String {
    let list = |items: &[&str], indent: &str| -> String {
        items.iter().map(|i| format!("{indent}- {i}\n")).collect()
    };
    let mut yaml = format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NAMESPACE}\n\
         spec:\n  addresses:\n{}---\n\
         apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\n\
         metadata:\n  name: lab\n  namespace: {METALLB_NAMESPACE}\n\
         spec:\n  ipAddressPools:\n    - lab\n",
        list(addresses, "    ")
    );
    if !interfaces.is_empty() {
        yaml.push_str("  interfaces:\n");
        yaml.push_str(&list(interfaces, "    "));
    }
    yaml
}

/// Speaker host `i` (from 0): lab host `a`, node `node-a`, 198.18.0.11; `b`, `node-b`, .12; ...
pub fn speaker_host(i: usize) -> SpeakerConfig {
    let letter = char::from(b'a' + u8::try_from(i).expect("at most 26 hosts"));
    let ip = Ipv4Addr::new(198, 18, 0, 11 + u8::try_from(i).expect("at most 26 hosts"));
    SpeakerConfig::new(
        &letter.to_string(),
        &format!("node-{letter}"),
        IpAddr::V4(ip),
    )
}

/// Adds lab host `host` on the bridge as `eth0` with `ip`/24.
pub fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
}

/// The node MetalLB's election ranks first for `key` among `nodes` (`None`: no candidate).
pub fn metallb_first<S: AsRef<str>>(nodes: &[S], key: IpAddr) -> Option<String> {
    vigil_lb::rank(nodes.iter().map(AsRef::as_ref), key)
        .first()
        .map(ToString::to_string)
}

/// How to build the [`Cluster`].
#[derive(Debug, Clone, Default)]
pub struct ClusterSpec {
    /// How many speaker hosts ([`speaker_host`]); every one gets a Node and a speaker Pod.
    pub nodes: usize,
    /// Node labels as (node, key, value).
    pub node_labels: Vec<(String, String, String)>,
    /// Extra kube-apiserver flags.
    pub apiserver_args: Vec<String>,
    /// Whether the client also gets [`CLIENT6`].
    pub client_ipv6: bool,
    /// What [`Cluster::start`] installs.
    pub install: Install,
}

/// What [`Cluster::start`] installs in the API server. Either way the API server knows the
/// static tokens of MetalLB's ServiceAccounts ([`metallb::metallb_service_account_tokens`])
/// and of ours ([`deploy::service_account_tokens`]): each is worth what the installed RBAC
/// grants it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Install {
    /// MetalLB's CRDs, RBAC, namespace and memberlist Secret, and every speaker's Node and
    /// Pod (labelled for MetalLB's `--ml-labels`).
    #[default]
    MetalLb,
    /// Nothing: the test installs our own manifests (`kubectl apply -k`, which brings the
    /// CRDs, namespace and RBAC) and the Nodes and Pods their workloads would have.
    Nothing,
}

impl ClusterSpec {
    /// `nodes` speaker hosts, nothing else.
    pub fn nodes(nodes: usize) -> Self {
        Self {
            nodes,
            ..Self::default()
        }
    }
}

/// What [`Cluster::start`] installed, as the API server reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    /// MetalLB's CRDs, by name.
    pub crds: Vec<String>,
    /// MetalLB's RBAC objects, as `Kind/name`.
    pub rbac: Vec<String>,
}

/// The lab, MetalLB's objects and the speaker hosts; no process runs yet.
pub struct Cluster {
    /// The speaker hosts, in [`speaker_host`] order; each one's `kubeconfig` is MetalLB's
    /// speaker ServiceAccount's.
    pub speakers: Vec<SpeakerConfig>,
    /// The MAC of each speaker host's eth0, in the same order.
    pub macs: Vec<String>,
    /// The memberlist secret in the Secret and every speaker's key file.
    pub key: MemberlistKey,
    /// The kubeconfigs of MetalLB's two ServiceAccounts.
    pub kubeconfigs: MetalLbKubeconfigs,
    /// MetalLB's CRDs and RBAC objects.
    pub installed: Installed,
    client: Client,
    /// [`SCRAPE_RBAC`] applied, before the first [`Cluster::scrape`].
    scrape_rbac: std::sync::Once,
    /// Dropped last: the control plane, then the namespaces.
    pub lab: KubeLab,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // kube's Client has no Debug.
        f.debug_struct("Cluster")
            .field("speakers", &self.speakers)
            .field("macs", &self.macs)
            .field("installed", &self.installed)
            .field("lab", &self.lab)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Builds the lab and, as [`ClusterSpec::install`] says, installs MetalLB's CRDs, RBAC,
    /// namespace and memberlist Secret and every speaker's Node and Pod (all of them before
    /// any speaker starts: a Go speaker reads its peers' pod IPs at start-up only). `None` when `test` must skip (no root, no
    /// vigil-testenv; a failure instead under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`).
    pub fn start(test: &str, tag: &str, spec: &ClusterSpec) -> Option<Self> {
        if !vigil_netlab::root_or_skip(test) {
            return None;
        }
        let mut tokens = metallb::metallb_service_account_tokens();
        tokens.extend(deploy::service_account_tokens());
        tokens.push(StaticToken::service_account(
            SCRAPER_NAMESPACE,
            SCRAPER_ACCOUNT,
            SCRAPER_TOKEN,
        ));
        let cp_config = ControlPlaneConfig {
            tokens,
            apiserver_args: spec.apiserver_args.clone(),
            ..ControlPlaneConfig::default()
        };
        let mut lab = KubeLab::start(tag, test, cp_config)?;
        let kubeconfigs =
            metallb::write_metallb_kubeconfigs(lab.cp()).expect("MetalLB kubeconfigs");
        let speakers: Vec<SpeakerConfig> = (0..spec.nodes)
            .map(|i| {
                let mut c = speaker_host(i);
                for (node, k, v) in &spec.node_labels {
                    if *node == c.node {
                        c.node_labels.insert(k.clone(), v.clone());
                    }
                }
                c.kubeconfig = Some(kubeconfigs.speaker.clone());
                c
            })
            .collect();
        for c in &speakers {
            let IpAddr::V4(ip) = c.ip else {
                unreachable!("speaker hosts are IPv4")
            };
            plug(&mut lab, &c.host, ip);
        }
        plug(&mut lab, CLIENT, CLIENT4);
        if spec.client_ipv6 {
            let addr = format!("{CLIENT6}/64");
            lab.bridge()
                .ip(CLIENT, &["addr", "add", &addr, "dev", "eth0", "nodad"]);
        }
        let macs = speakers
            .iter()
            .map(|c| lab.bridge().mac(&c.host, "eth0"))
            .collect();
        let client = lab.cp().client().expect("admin client");
        let key = MemberlistKey::random().expect("a memberlist key");
        let installed = match spec.install {
            Install::MetalLb => install_metallb(&lab, &client, &key, &speakers),
            Install::Nothing => Installed::default(),
        };
        Some(Self {
            speakers,
            macs,
            key,
            kubeconfigs,
            installed,
            client,
            scrape_rbac: std::sync::Once::new(),
            lab,
        })
    }

    /// The admin client (use it inside [`Self::block_on`]).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs `fut` inside the lab.
    pub fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        self.lab.cp().block_on(fut)
    }

    /// Applies `yaml` (server-side, every document); `what` names it in a failure.
    pub fn apply(&self, what: &str, yaml: &str) -> Vec<DynamicObject> {
        self.block_on(apply_yaml(&self.client, what, yaml))
            .unwrap_or_else(|e| panic!("apply {what}: {e}"))
    }

    /// Lets the scraper ([`SCRAPER_TOKEN`]) read every program's metrics port ([`SCRAPE_RBAC`]).
    pub fn allow_scrapes(&self) {
        self.apply("the scrape RBAC", SCRAPE_RBAC);
    }

    /// `GET path` over HTTPS at `addr` from lab namespace `ns` with the scraper's token
    /// ([`Self::allow_scrapes`] done first, once).
    pub fn scrape(&self, ns: &str, addr: SocketAddr, path: &str) -> std::io::Result<HttpAnswer> {
        self.scrape_rbac.call_once(|| self.allow_scrapes());
        https_get(ns, addr, path, Some(SCRAPER_TOKEN))
    }

    /// Creates namespace `name` (an existing one is fine).
    pub fn namespace(&self, name: &str) {
        self.block_on(ensure_namespace(&self.client, name))
            .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
    }

    /// Creates the Service, its endpoints and (when it has them) its ingress IPs.
    pub fn add_service(&self, svc: &LbService) {
        self.block_on(create_lb_service(&self.client, svc))
            .unwrap_or_else(|e| panic!("Service {}/{}: {e}", svc.namespace, svc.name));
    }

    /// The node names, in [`Self::speakers`] order.
    pub fn nodes(&self) -> Vec<&str> {
        self.speakers.iter().map(|c| c.node.as_str()).collect()
    }

    /// The index of `node` in [`Self::speakers`].
    pub fn index(&self, node: &str) -> usize {
        self.speakers
            .iter()
            .position(|c| c.node == node)
            .unwrap_or_else(|| panic!("no node {node}"))
    }

    /// `node`'s settings.
    pub fn config(&self, node: &str) -> &SpeakerConfig {
        &self.speakers[self.index(node)]
    }

    /// The MAC of `node`'s eth0.
    pub fn mac(&self, node: &str) -> &str {
        &self.macs[self.index(node)]
    }

    /// The node whose eth0 has `mac` (`? (<mac>)` for none).
    pub fn node_of_mac(&self, mac: &str) -> String {
        self.macs
            .iter()
            .position(|m| m == mac)
            .map_or_else(|| format!("? ({mac})"), |i| self.speakers[i].node.clone())
    }

    /// The node MetalLB's election ranks first for `key` among all of them.
    pub fn first(&self, key: IpAddr) -> String {
        metallb_first(&self.nodes(), key).expect("the cluster has nodes")
    }

    /// The namespace of lab host `host`.
    pub fn ns(&self, host: &str) -> String {
        self.lab.bridge().ns(host)
    }

    /// A directory for `name`'s files (created) under the control plane's work directory:
    /// `vigil/<name>`.
    pub fn dir(&self, name: &str) -> PathBuf {
        let dir = self.lab.cp().work_dir().join("vigil").join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        dir
    }

    /// Starts `vigil speaker` (the binary `vigil`) on speaker host `i` with MetalLB's speaker
    /// flags: the speaker ServiceAccount's kubeconfig, its node, Pod, gossip address, MetalLB's
    /// `--ml-labels`, the key as a file in `vigil/<node>/memberlist-key`, `--log-level=info`
    /// and `--port=0` unless `args` (appended last) give a port. Each start logs to a fresh
    /// file in `vigil/<node>/`; earlier ones are kept.
    pub fn vigil_speaker(&self, vigil: &Path, i: usize, args: &[String]) -> LabProcess {
        let config = &self.speakers[i];
        let dir = self.dir(&config.node);
        let key_dir = dir.join("memberlist-key");
        std::fs::create_dir_all(&key_dir).expect("key directory");
        std::fs::write(
            key_dir.join(metallb::MEMBERLIST_SECRET_KEY),
            self.key.as_str(),
        )
        .expect("key file");
        let kubeconfig = config
            .kubeconfig
            .as_deref()
            .unwrap_or(&self.kubeconfigs.speaker);
        let mut all = vec![
            "speaker".to_string(),
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--namespace={}", config.namespace),
            format!("--node-name={}", config.node),
            format!("--pod-name={}", config.pod_name()),
            format!("--ml-bindaddr={}", config.ip),
            format!("--ml-bindport={}", config.memberlist_port),
            format!("--ml-labels={}", metallb::speaker_label_selector()),
            format!("--ml-secret-key-path={}", key_dir.display()),
            "--log-level=info".to_string(),
        ];
        if !args.iter().any(|a| a.starts_with("--port=")) {
            all.push("--port=0".to_string());
        }
        all.extend(args.iter().cloned());
        LabProcess::spawn(
            &config.node,
            &self.ns(&config.host),
            vigil,
            &all,
            &[],
            fresh_log(&dir, "speaker"),
        )
    }

    /// Starts `vigil controller` in the control plane's namespace with the admin's kubeconfig
    /// (vigil's controller elects on a Lease, which MetalLB's controller role does not
    /// cover), namespace [`METALLB_NAMESPACE`], `--identity=<identity>`,
    /// `--webhook-mode=disabled` (no webhook objects here), `--port=0` unless `args` give a
    /// port (replicas share the namespace), then `args`. Logs to a fresh file in
    /// `vigil/<identity>/`.
    pub fn vigil_controller(&self, vigil: &Path, identity: &str, args: &[String]) -> LabProcess {
        let dir = self.dir(identity);
        let mut all = vec![
            "controller".to_string(),
            format!("--kubeconfig={}", self.lab.cp().kubeconfig_path().display()),
            format!("--namespace={METALLB_NAMESPACE}"),
            format!("--identity={identity}"),
            // No webhook objects here (MetalLB's default would serve them on 9443).
            "--webhook-mode=disabled".to_string(),
        ];
        if !args.iter().any(|a| a.starts_with("--port=")) {
            all.push("--port=0".to_string());
        }
        all.extend(args.iter().cloned());
        LabProcess::spawn(
            identity,
            self.lab.cp().ns(),
            vigil,
            &all,
            &[],
            fresh_log(&dir, "controller"),
        )
    }

    /// One broadcast ARP question for `ip` from the client; the answers within `wait`.
    pub fn arp(&self, ip: Ipv4Addr, wait: Duration) -> Vec<ArpAnswer> {
        arp_ask(&self.ns(CLIENT), "eth0", CLIENT4, ip, wait).expect("ask ARP from the client")
    }

    /// Asks ARP for `ip` (each question waits 200 ms) until only `mac` answers or `limit`
    /// passes, calling `between` after each question that did not settle it (to check the
    /// processes); the last answers.
    pub fn wait_only(
        &self,
        ip: Ipv4Addr,
        mac: &str,
        limit: Duration,
        mut between: impl FnMut(),
    ) -> Vec<ArpAnswer> {
        let end = Instant::now() + limit;
        loop {
            let answers = self.arp(ip, Duration::from_millis(200));
            if (!answers.is_empty() && answers.iter().all(|a| a.mac == mac)) || Instant::now() > end
            {
                return answers;
            }
            between();
        }
    }

    /// Asks ARP for `ip` (each question waits 200 ms) until exactly one host, the same one,
    /// answers [`SINGLE_ANSWER_STREAK`] questions in a row, or `limit` passes, calling
    /// `between` after each question that did not settle it (to check the processes): the
    /// node that answered ([`Self::node_of_mac`]), or the last answers. One answer is not
    /// enough: while speakers start one by one, the first to join holds the VIP alone for a
    /// few tens of milliseconds before handing it to the node the election ranks first.
    pub fn wait_single_answer(
        &self,
        ip: Ipv4Addr,
        limit: Duration,
        between: impl FnMut(),
    ) -> Result<String, Vec<ArpAnswer>> {
        self.wait_single_answer_from(ip, None, limit, between)
    }

    /// [`Self::wait_single_answer`], settled only by `node`'s answers when it is given: a
    /// host that holds the VIP alone for a while before the node the election ranks first
    /// takes it (a speaker that has not yet heard of a newcomer) does not settle it.
    pub fn wait_single_answer_from(
        &self,
        ip: Ipv4Addr,
        node: Option<&str>,
        limit: Duration,
        mut between: impl FnMut(),
    ) -> Result<String, Vec<ArpAnswer>> {
        let end = Instant::now() + limit;
        let wanted = node.map(|n| self.mac(n));
        let mut streak: Option<(String, usize)> = None;
        loop {
            let answers = self.arp(ip, Duration::from_millis(200));
            streak = match (answers.as_slice(), streak) {
                ([one], _) if wanted.is_some_and(|mac| mac != one.mac) => None,
                ([one], Some((mac, n))) if one.mac == mac => Some((mac, n + 1)),
                ([one], _) => Some((one.mac.clone(), 1)),
                _ => None,
            };
            if let Some((mac, n)) = &streak
                && *n >= SINGLE_ANSWER_STREAK
            {
                return Ok(self.node_of_mac(mac));
            }
            if Instant::now() > end {
                return Err(answers);
            }
            between();
        }
    }

    /// The ServiceL2Status objects in [`METALLB_NAMESPACE`].
    pub fn l2_statuses(&self) -> Vec<L2Status> {
        self.block_on(metallb::l2_statuses(&self.client, METALLB_NAMESPACE))
            .expect("list ServiceL2Status")
    }

    /// Lists the ServiceL2Status objects every 200 ms until `done` accepts them or `limit`
    /// passes; the last list (a list that fails, as while the API server restarts, counts as
    /// empty).
    pub fn wait_l2_statuses(
        &self,
        limit: Duration,
        done: impl Fn(&[L2Status]) -> bool + Sync,
    ) -> Vec<L2Status> {
        self.block_on(async {
            let end = Instant::now() + limit;
            loop {
                let statuses = metallb::l2_statuses(&self.client, METALLB_NAMESPACE)
                    .await
                    .unwrap_or_default();
                if done(&statuses) || Instant::now() > end {
                    break statuses;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    /// Runs `probe` inside the lab every 200 ms until it gives `Some` or `limit` passes
    /// (`None`), calling `between` after each try that gave `None` (to check the processes).
    pub fn wait_for<T, F>(
        &self,
        limit: Duration,
        mut between: impl FnMut(),
        mut probe: impl FnMut() -> F,
    ) -> Option<T>
    where
        F: Future<Output = Option<T>> + Send,
        T: Send,
    {
        let end = Instant::now() + limit;
        loop {
            if let Some(v) = self.block_on(probe()) {
                return Some(v);
            }
            between();
            if Instant::now() > end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The first ingress IP of Service `namespace/name`, polled every 200 ms (calling
    /// `between` each time, to check the controller) until there is one or `limit` passes.
    pub fn wait_ingress(
        &self,
        namespace: &str,
        name: &str,
        limit: Duration,
        mut between: impl FnMut(),
    ) -> Option<IpAddr> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            between();
            let ip = self
                .block_on(first_ingress(&self.client, namespace, name))
                .unwrap_or_else(|e| panic!("Service {namespace}/{name}: {e}"));
            if ip.is_some() {
                return ip;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        None
    }
}

/// [`Install::MetalLb`]: MetalLB's CRDs, namespace, memberlist Secret (`key`) and RBAC, then
/// every speaker's Node and Pod.
fn install_metallb(
    lab: &KubeLab,
    client: &Client,
    key: &MemberlistKey,
    speakers: &[SpeakerConfig],
) -> Installed {
    lab.cp().block_on(async {
        let crds = metallb::install_metallb(client, METALLB_NAMESPACE, key)
            .await
            .expect("install MetalLB's CRDs, namespace and Secret");
        let rbac = metallb::install_metallb_rbac(client)
            .await
            .expect("MetalLB's RBAC");
        metallb::register_speakers(client, speakers)
            .await
            .expect("speaker Nodes and Pods");
        Installed { crds, rbac }
    })
}

/// `<dir>/<stem>.log`, or the first of `<stem>-2.log`, `<stem>-3.log`, ... that does not exist
/// yet: a restarted process logs afresh and the earlier log stays for the post-mortem.
pub fn fresh_log(dir: &Path, stem: &str) -> PathBuf {
    let first = dir.join(format!("{stem}.log"));
    if !first.exists() {
        return first;
    }
    (2..)
        .map(|n| dir.join(format!("{stem}-{n}.log")))
        .find(|p| !p.exists())
        .expect("some free name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifests::documents;

    #[test]
    fn the_pool_yaml_is_one_pool_and_one_advertisement_of_it() {
        let yaml = pool_yaml(
            &["198.18.0.200-198.18.0.209", "2001:db8::200-2001:db8::209"],
            &["eth0"],
        );
        let docs = documents("pool", &yaml).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "IPAddressPool");
        assert_eq!(docs[0]["metadata"]["name"], "lab");
        assert_eq!(docs[0]["metadata"]["namespace"], METALLB_NAMESPACE);
        assert_eq!(
            docs[0]["spec"]["addresses"],
            serde_json::json!(["198.18.0.200-198.18.0.209", "2001:db8::200-2001:db8::209"])
        );
        assert_eq!(docs[1]["kind"], "L2Advertisement");
        assert_eq!(
            docs[1]["spec"]["ipAddressPools"],
            serde_json::json!(["lab"])
        );
        assert_eq!(docs[1]["spec"]["interfaces"], serde_json::json!(["eth0"]));
        let everywhere =
            documents("pool", &pool_yaml(&["198.18.0.200-198.18.0.209"], &[])).unwrap();
        assert!(everywhere[1]["spec"].get("interfaces").is_none());
    }

    #[test]
    fn speaker_hosts_are_lettered_from_a_at_198_18_0_11() {
        let c = speaker_host(4);
        assert_eq!((c.host.as_str(), c.node.as_str()), ("e", "node-e"));
        assert_eq!(c.ip, IpAddr::from([198, 18, 0, 15]));
    }

    #[test]
    fn a_fresh_log_never_overwrites_an_earlier_one() {
        let dir = std::env::temp_dir().join(format!("kubelab-fresh-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = fresh_log(&dir, "speaker");
        assert_eq!(first, dir.join("speaker.log"));
        std::fs::write(&first, "run 1").unwrap();
        let second = fresh_log(&dir, "speaker");
        assert_eq!(second, dir.join("speaker-2.log"));
        std::fs::write(&second, "run 2").unwrap();
        assert_eq!(fresh_log(&dir, "speaker"), dir.join("speaker-3.log"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
