//! The bench's lab: the real API server (vigil-testenv, with its audit log on) on `cp`, five
//! speaker hosts `h1`..`h5` and a client on one bridge, MetalLB's CRDs, RBAC, Secret and
//! Pods/Nodes, and one IPAddressPool with its L2Advertisement. Every system is measured in
//! this one lab, one after the other.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use vigil_kubelab::metallb::{
    self, ControllerConfig, METALLB_NAMESPACE, MemberlistKey, MetalLbKubeconfigs, SpeakerConfig,
};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, StaticToken, TestNode, apply_yaml, create_node, create_pod,
    ensure_namespace,
};
use vigil_l2::wire::ethernet::Address as Mac;

use futures::StreamExt;

use crate::audit;
use crate::probe::Client;

/// Real speaker hosts of the failover, controller and scale phases: what two shared cores bear
/// next to the API server and seven other engineers' builds with 5,000 Services (the remaining
/// Nodes of a scale run are objects only). The fleet phase adds hosts up to [`MAX_HOSTS`].
pub(crate) const HOSTS: usize = 5;
/// The most hosts the lab plugs (`198.18.0.11`..`198.18.0.98`, below the client's address).
pub(crate) const MAX_HOSTS: usize = 88;
/// The client's address.
pub(crate) const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
/// Namespace of the measured Services.
pub(crate) const SERVICE_NS: &str = "bench";
/// The pool: the failover and creation Services from the first range, scale runs from the
/// second.
const POOL_AND_AD: &str = r#"
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: bench
  namespace: metallb-system
spec:
  addresses:
    - 198.18.0.200-198.18.0.254
    - 198.18.32.0/19
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata:
  name: bench
  namespace: metallb-system
spec:
  ipAddressPools:
    - bench
  interfaces:
    - eth0
"#;
/// The user vigil's controller runs as (its own token, in `system:masters`: vigil's controller
/// elects on a Lease, which MetalLB's controller role does not cover), so the audit log tells
/// it from the bench's own admin client.
pub(crate) const VIGIL_CONTROLLER_USER: &str = "vigil-bench:vigil-controller";
/// MetalLB's controller's user (its ServiceAccount).
pub(crate) const METALLB_CONTROLLER_USER: &str = "system:serviceaccount:metallb-system:controller";

/// One speaker host.
#[derive(Debug, Clone)]
pub(crate) struct Host {
    /// Lab host name (`h1`..).
    pub(crate) name: String,
    /// Node name (`node-1`..).
    pub(crate) node: String,
    /// Its address on the bridge.
    pub(crate) ip: Ipv4Addr,
    /// Its eth0's MAC.
    pub(crate) mac: Mac,
}

/// The lab with everything both systems need installed.
pub(crate) struct Bench {
    /// The lab and its API server.
    pub(crate) lab: KubeLab,
    /// The speaker hosts.
    pub(crate) hosts: Vec<Host>,
    /// MetalLB's view of each host (also used for vigil's speakers' flags).
    pub(crate) speakers: Vec<SpeakerConfig>,
    /// The probing client.
    pub(crate) client: Client,
    /// The memberlist secret.
    pub(crate) key: MemberlistKey,
    /// Kubeconfigs of MetalLB's ServiceAccounts.
    pub(crate) kubeconfigs: MetalLbKubeconfigs,
    /// Kubeconfig of vigil's controller.
    pub(crate) vigil_controller_kubeconfig: PathBuf,
    /// The bench's admin client (use on the control plane's runtime).
    pub(crate) kube: kube::Client,
    /// The API server's audit log.
    pub(crate) audit_log: PathBuf,
    /// The bench's own files (configs, logs).
    pub(crate) dir: PathBuf,
}

/// `198.18.0.(11 + i)`.
fn host_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, 11 + u8::try_from(i).expect("few hosts"))
}

fn plug(lab: &mut KubeLab, host: &str, ip: Ipv4Addr) {
    let bridge = lab.bridge_mut();
    bridge.add_namespace(host);
    bridge.plug(host, "eth0");
    bridge.ip(host, &["addr", "add", &format!("{ip}/16"), "dev", "eth0"]);
}

impl Bench {
    /// Builds the lab in `dir` with `hosts` speaker hosts plugged (at least [`HOSTS`], at most
    /// [`MAX_HOSTS`]), of which the first [`HOSTS`] get their Node and speaker Pod now (the
    /// others in [`Self::register_fleet`]); an error when not root or vigil-testenv is missing.
    pub(crate) fn setup(dir: &Path, hosts: usize) -> Result<Self, String> {
        let plugged = hosts.clamp(HOSTS, MAX_HOSTS);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let policy = dir.join("audit-policy.yaml");
        std::fs::write(&policy, audit::POLICY).map_err(|e| e.to_string())?;
        let audit_log = dir.join("audit.log");
        let mut tokens = metallb::metallb_service_account_tokens();
        let controller_token = StaticToken {
            token: "vigil-bench-vigil-controller".to_string(),
            user: VIGIL_CONTROLLER_USER.to_string(),
            uid: "vigil-bench-vigil-controller".to_string(),
            groups: vec!["system:masters".to_string()],
        };
        tokens.push(controller_token.clone());
        let mut apiserver_args = audit::apiserver_args(&policy, &audit_log);
        // Room for 5,000 LoadBalancer Services: each takes a ClusterIP and a NodePort, and
        // vigil-testenv's defaults (a /24, 2,768 ports) hold about 250 and 2,768.
        apiserver_args.extend([
            "--service-cluster-ip-range=10.0.0.0/16,2001:db8:ffff::/112".to_string(),
            "--service-node-port-range=30000-39999".to_string(),
        ]);
        let config = ControlPlaneConfig {
            tokens,
            apiserver_args,
            ..ControlPlaneConfig::default()
        };
        let mut lab = KubeLab::start("vbk8s", "vigil-bench-k8s", config).ok_or(
            "skipped: needs root and vigil-testenv (VIGIL_GO_BIN_DIR or conformance/build.sh)",
        )?;
        let mut hosts = Vec::new();
        for i in 0..plugged {
            let name = format!("h{}", i + 1);
            plug(&mut lab, &name, host_ip(i));
            let (_, mac) = vigil_netlab::link(&lab.bridge().ns(&name), "eth0")?;
            hosts.push(Host {
                node: format!("node-{}", i + 1),
                name,
                ip: host_ip(i),
                mac,
            });
        }
        plug(&mut lab, "client", CLIENT_IP);
        let client_ns = lab.bridge().ns("client");
        let (ifindex, mac) = vigil_netlab::link(&client_ns, "eth0")?;
        let client = Client {
            ns: client_ns,
            ifindex,
            mac,
            ip: CLIENT_IP,
        };
        let kube = lab.cp().client().map_err(|e| e.to_string())?;
        let key = MemberlistKey::random().map_err(|e| e.to_string())?;
        let kubeconfigs =
            metallb::write_metallb_kubeconfigs(lab.cp()).map_err(|e| e.to_string())?;
        let vigil_controller_kubeconfig = lab
            .cp()
            .write_token_kubeconfig("vigil-controller", &controller_token.token)
            .map_err(|e| e.to_string())?;
        let speakers: Vec<SpeakerConfig> = hosts
            .iter()
            .map(|h| {
                let mut c = SpeakerConfig::new(&h.name, &h.node, IpAddr::V4(h.ip));
                c.kubeconfig = Some(kubeconfigs.speaker.clone());
                c
            })
            .collect();
        lab.cp()
            .block_on(async {
                metallb::install_metallb(&kube, METALLB_NAMESPACE, &key).await?;
                metallb::install_metallb_rbac(&kube).await?;
                metallb::register_speakers(&kube, &speakers[..HOSTS]).await?;
                create_pod(&kube, &ControllerConfig::default().pod()).await?;
                apply_yaml(&kube, "pool and L2Advertisement", POOL_AND_AD).await?;
                ensure_namespace(&kube, SERVICE_NS).await?;
                Ok::<_, vigil_kubelab::Error>(())
            })
            .map_err(|e| format!("installing MetalLB's objects: {e}"))?;
        Ok(Self {
            lab,
            hosts,
            speakers,
            client,
            key,
            kubeconfigs,
            vigil_controller_kubeconfig,
            kube,
            audit_log,
            dir: dir.to_path_buf(),
        })
    }

    /// The addresses of the first [`HOSTS`] speaker hosts (the phases' speakers).
    pub(crate) fn node_ips(&self) -> Vec<IpAddr> {
        self.node_ips_of(HOSTS)
    }

    /// The addresses of the first `n` speaker hosts.
    pub(crate) fn node_ips_of(&self, n: usize) -> Vec<IpAddr> {
        self.hosts
            .iter()
            .take(n)
            .map(|h| IpAddr::V4(h.ip))
            .collect()
    }

    /// The node names of the first [`HOSTS`] hosts (every Service's endpoints are there).
    pub(crate) fn nodes(&self) -> Vec<&str> {
        self.nodes_of(HOSTS)
    }

    /// The node names of the first `n` hosts.
    pub(crate) fn nodes_of(&self, n: usize) -> Vec<&str> {
        self.hosts.iter().take(n).map(|h| h.node.as_str()).collect()
    }

    /// Gives hosts [`HOSTS`]..`n` their Node and speaker Pod (a Node object of the same name
    /// that a scale run left, with an address of no host, is replaced first).
    pub(crate) fn register_fleet(&self, n: usize) -> Result<(), String> {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Api, DeleteParams};
        let n = n.min(self.hosts.len());
        let nodes: Api<Node> = Api::all(self.kube.clone());
        self.lab
            .cp()
            .block_on(async {
                for config in &self.speakers[HOSTS..n] {
                    match nodes.delete(&config.node, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.is_not_found() => {}
                        Err(e) => return Err(vigil_kubelab::Error::from(e)),
                    }
                    while nodes.get_opt(&config.node).await?.is_some() {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
                metallb::register_speakers(&self.kube, &self.speakers[HOSTS..n]).await
            })
            .map_err(|e| format!("fleet Nodes and Pods: {e}"))
    }

    /// Patches the status of every Node as a kubelet's heartbeat does: each condition of the
    /// Node keeps its status, only `lastHeartbeatTime` moves (a strategic merge keyed by
    /// type). Returns how many Nodes were patched.
    pub(crate) fn heartbeat_nodes(&self) -> Result<usize, String> {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Api, ListParams, Patch, PatchParams};
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        self.lab
            .cp()
            .block_on(async {
                let list = nodes.list(&ListParams::default()).await?;
                let patches: Vec<(String, serde_json::Value)> = list
                    .items
                    .iter()
                    .filter_map(|node| {
                        let name = node.metadata.name.clone()?;
                        let conditions: Vec<serde_json::Value> = node
                            .status
                            .as_ref()
                            .and_then(|s| s.conditions.as_ref())
                            .map(|cs| {
                                cs.iter()
                                    .map(|c| {
                                        serde_json::json!({
                                            "type": c.type_, "status": c.status,
                                            "lastHeartbeatTime": now,
                                        })
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        Some((
                            name,
                            serde_json::json!({ "status": { "conditions": conditions } }),
                        ))
                    })
                    .collect();
                let done = futures::stream::iter(patches)
                    .map(|(name, patch)| {
                        let nodes = nodes.clone();
                        async move {
                            nodes
                                .patch_status(
                                    &name,
                                    &PatchParams::default(),
                                    &Patch::Strategic(&patch),
                                )
                                .await
                        }
                    })
                    .buffer_unordered(16)
                    .collect::<Vec<_>>()
                    .await;
                let patched = done.iter().filter(|r| r.is_ok()).count();
                if let Some(Err(e)) = done.into_iter().find(Result::is_err) {
                    return Err(e);
                }
                Ok(patched)
            })
            .map_err(|e| format!("Node heartbeats: {e}"))
    }

    /// Creates Node objects `node-(HOSTS+1)`..`node-total` (no speaker runs there), so the
    /// cluster has `total` Nodes.
    pub(crate) fn add_object_nodes(&self, total: usize) -> Result<(), String> {
        self.lab
            .cp()
            .block_on(async {
                for i in HOSTS..total {
                    let ip = Ipv4Addr::new(198, 18, 1, u8::try_from(i % 250).unwrap_or(0));
                    let node =
                        TestNode::new(&format!("node-{}", i + 1)).internal_ip(IpAddr::V4(ip));
                    create_node(&self.kube, &node).await?;
                }
                Ok::<_, vigil_kubelab::Error>(())
            })
            .map_err(|e| format!("object Nodes: {e}"))
    }

    /// Unplugs (`up == false`) or plugs back host `name`'s cable at the bridge.
    pub(crate) fn set_link(&self, name: &str, up: bool) -> Result<(), String> {
        let bridge = self.lab.bridge();
        let port = bridge.port(name, "eth0");
        bridge
            .try_ip(
                "br",
                &["link", "set", &port, if up { "up" } else { "down" }],
            )
            .map(|_| ())
    }
}
