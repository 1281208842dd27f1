//! MetalLB's own speaker and controller as test peers, run outside a cluster against
//! `vigil-testenv` (the release pinned by `conformance/metallb/go.mod`, built by
//! `conformance/build.sh metallb`).
//!
//! In a cluster, Kubernetes gives MetalLB things that here the test has to make:
//! - its CRDs, installed from the downloaded module's `config/crd/bases` (at test time; none
//!   are copied into the repo; the BGPPeer conversion patch is left out, it points at the
//!   webhook service);
//! - a Pod object per speaker and one for the controller: each GETs its own Pod at start-up
//!   (it owns their status objects), and speakers find their memberlist peers by listing the
//!   Pods that match `--ml-labels` and reading `status.podIP`, which no kubelet writes here,
//!   so [`register_speakers`] writes it through the status subresource;
//! - Node objects named like `--node-name`;
//! - the memberlist Secret (the controller only creates it when missing) and, for each
//!   speaker, the key as a file, as the Secret volume would mount it;
//! - the files a speaker reads from hard-coded paths (`/etc/metallb/excludel2.yaml`,
//!   `/etc/metallb/memberlist/config.json`): each speaker runs in a private mount namespace
//!   in which `/etc` is an overlay and `/etc/metallb` is a directory of that host's own, so
//!   the machine's `/etc` is never read or written.
//!
//! The controller runs with webhooks disabled (nothing would call them), in the control
//! plane's namespace (it never touches the network); each speaker runs in its host's network
//! namespace as root, for its raw ARP/NDP sockets. Metrics are off (`--port=0`); health probes
//! stay on their defaults, one per namespace. Processes are stopped by PID when their guards
//! drop, also when a test panics (then their logs are kept and their paths printed).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Client, ResourceExt};
use nix::unistd::Pid;

use crate::KubeLab;
use crate::binary::{found_or_skip, go_bin_dir};
use crate::cluster::{LabProcess, Output};
use crate::control_plane::{ControlPlane, StaticToken};
use crate::error::Error;
use crate::fixtures::{TestNode, TestPod, create_node, create_pod, ensure_namespace};
use crate::manifests::{apply_crds, apply_yaml, documents};

/// The speaker's file name in the Go bin directory.
pub const SPEAKER_BIN: &str = "metallb-speaker";
/// The controller's file name in the Go bin directory.
pub const CONTROLLER_BIN: &str = "metallb-controller";
/// The namespace MetalLB's manifests install into, and the helpers' default.
pub const METALLB_NAMESPACE: &str = "metallb-system";
/// The speaker Pod labels of MetalLB's plain manifests, and the `--ml-labels` selecting them.
pub const SPEAKER_LABELS: &[(&str, &str)] = &[("app", "metallb"), ("component", "speaker")];
/// The memberlist Secret's name in MetalLB's manifests (`--ml-secret-name`).
pub const MEMBERLIST_SECRET: &str = "memberlist";
/// The key of the memberlist Secret, and the file name the speaker reads in its key directory.
pub const MEMBERLIST_SECRET_KEY: &str = "secretkey";
/// memberlist's default port, which MetalLB's manifests keep.
pub const MEMBERLIST_PORT: u16 = 7946;

/// Our build module's go.mod: the one place the MetalLB version is written.
const BUILD_GO_MOD: &str = include_str!("../../../conformance/metallb/go.mod");

/// How long a SIGTERM'd MetalLB process gets (a speaker leaves memberlist first).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The MetalLB release the build module requires (e.g. `v0.16.2`).
pub fn metallb_version() -> &'static str {
    BUILD_GO_MOD
        .lines()
        .find_map(|l| l.trim().strip_prefix("go.universe.tf/metallb "))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("conformance/metallb/go.mod requires go.universe.tf/metallb")
}

/// The MetalLB module's directory in the shared Go module cache (`VIGIL_GO_CACHE`, default
/// `/var/cache/vigil/go`, as in `conformance/build.sh`), where the build downloaded it.
pub fn metallb_module_dir() -> Result<PathBuf, Error> {
    let cache = std::env::var_os("VIGIL_GO_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/vigil/go"), PathBuf::from);
    let dir = cache
        .join("mod/go.universe.tf")
        .join(format!("metallb@{}", metallb_version()));
    if dir.join("go.mod").is_file() {
        Ok(dir)
    } else {
        Err(Error::Config(format!(
            "MetalLB {} is not in the Go module cache at {} (conformance/build.sh metallb downloads it)",
            metallb_version(),
            dir.display()
        )))
    }
}

/// MetalLB's CRD files (`config/crd/bases/*.yaml` of the downloaded module), sorted.
pub fn metallb_crd_files() -> Result<Vec<PathBuf>, Error> {
    let bases = metallb_module_dir()?.join("config/crd/bases");
    let mut files: Vec<PathBuf> = fs::read_dir(&bases)
        .map_err(|e| Error::io(&bases, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::Config(format!("no CRDs in {}", bases.display())));
    }
    Ok(files)
}

/// The two MetalLB programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalLbBinaries {
    /// `metallb-speaker`.
    pub speaker: PathBuf,
    /// `metallb-controller`.
    pub controller: PathBuf,
}

/// MetalLB's binaries from `VIGIL_GO_BIN_DIR` (set by `scripts/test.sh`), else built once per
/// test process through `conformance/build.sh metallb`; `None` (the caller skips) when neither
/// works, a panic instead under `VIGIL_REQUIRE_GO=1`.
pub fn metallb_binaries(test: &str) -> Option<MetalLbBinaries> {
    static FOUND: OnceLock<Result<MetalLbBinaries, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        go_bin_dir("metallb", &[SPEAKER_BIN, CONTROLLER_BIN]).map(|dir| MetalLbBinaries {
            speaker: dir.join(SPEAKER_BIN),
            controller: dir.join(CONTROLLER_BIN),
        })
    });
    found_or_skip(test, "MetalLB", found).cloned()
}

/// The memberlist secret every speaker of a cluster shares: the bytes of the `secretkey` file
/// (MetalLB derives the AES key from them; see the research notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberlistKey(String);

impl MemberlistKey {
    /// A given secret.
    pub fn new(secret: &str) -> Self {
        Self(secret.to_string())
    }

    /// 16 random bytes from the kernel, hex-encoded (32 characters: MetalLB then uses them
    /// verbatim as its AES-256 key).
    pub fn random() -> Result<Self, Error> {
        let path = Path::new("/dev/urandom");
        let mut bytes = [0u8; 16];
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| Error::io(path, e))?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The secret as the file holds it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Installs what MetalLB needs before it starts: namespace `namespace`, MetalLB's CRDs from
/// the module cache (waited on until Established) and the memberlist Secret holding `key`
/// (kept if one exists). Returns the CRD names.
pub async fn install_metallb(
    client: &Client,
    namespace: &str,
    key: &MemberlistKey,
) -> Result<Vec<String>, Error> {
    ensure_namespace(client, namespace).await?;
    let files = metallb_crd_files()?;
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let crds = apply_crds(client, &paths).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": { "name": MEMBERLIST_SECRET },
        "stringData": { MEMBERLIST_SECRET_KEY: key.as_str() },
    }))
    .map_err(|e| Error::Config(format!("memberlist secret: {e}")))?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(e) => return Err(e.into()),
    }
    Ok(crds)
}

/// The kinds of MetalLB's release manifest that make up its permissions.
const RBAC_KINDS: &[&str] = &[
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// Applies MetalLB's own ServiceAccounts, Roles, ClusterRoles and their bindings, as its
/// release manifest (`config/manifests/metallb-native.yaml` of the downloaded module, which
/// puts them in [`METALLB_NAMESPACE`]) defines them; the rest of the manifest (Deployments,
/// webhooks, CRDs) is skipped. Returns `Kind/name` of each object applied.
pub async fn install_metallb_rbac(client: &Client) -> Result<Vec<String>, Error> {
    let path = metallb_module_dir()?.join("config/manifests/metallb-native.yaml");
    let yaml = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let source = path.display().to_string();
    let mut applied = Vec::new();
    for doc in documents(&source, &yaml)? {
        let kind = doc.get("kind").and_then(serde_json::Value::as_str);
        let Some(kind) = kind.filter(|k| RBAC_KINDS.contains(k)) else {
            continue;
        };
        let kind = kind.to_string();
        // JSON is YAML: apply the one document as it stands.
        for object in apply_yaml(client, &source, &doc.to_string()).await? {
            applied.push(format!("{kind}/{}", object.name_any()));
        }
    }
    Ok(applied)
}

/// The static tokens of MetalLB's two ServiceAccounts (controller, speaker) in
/// [`METALLB_NAMESPACE`], for [`crate::ControlPlaneConfig::tokens`]: with them, and
/// [`install_metallb_rbac`], MetalLB runs under exactly the permissions its manifests grant.
pub fn metallb_service_account_tokens() -> Vec<StaticToken> {
    ["controller", "speaker"]
        .iter()
        .map(|sa| {
            StaticToken::service_account(
                METALLB_NAMESPACE,
                sa,
                &format!("vigil-kubelab-metallb-{sa}"),
            )
        })
        .collect()
}

/// Kubeconfigs for MetalLB's two ServiceAccounts (the control plane must accept
/// [`metallb_service_account_tokens`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetalLbKubeconfigs {
    /// For the controller ([`ControllerConfig::kubeconfig`]).
    pub controller: PathBuf,
    /// For every speaker ([`SpeakerConfig::kubeconfig`]).
    pub speaker: PathBuf,
}

/// Writes [`MetalLbKubeconfigs`] into the control plane's work directory.
pub fn write_metallb_kubeconfigs(cp: &ControlPlane) -> Result<MetalLbKubeconfigs, Error> {
    let tokens = metallb_service_account_tokens();
    Ok(MetalLbKubeconfigs {
        controller: cp.write_token_kubeconfig("metallb-controller", &tokens[0].token)?,
        speaker: cp.write_token_kubeconfig("metallb-speaker", &tokens[1].token)?,
    })
}

/// What a MetalLB speaker reports about one Service it announces in layer-2 mode (its
/// `ServiceL2Status` object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2Status {
    /// The announcing node (`status.node`).
    pub node: String,
    /// `status.serviceNamespace`.
    pub service_namespace: String,
    /// `status.serviceName`.
    pub service_name: String,
    /// The interfaces it announces on (`status.interfaces[].name`).
    pub interfaces: Vec<String>,
}

/// The `ServiceL2Status` objects MetalLB's speakers wrote in `namespace` (MetalLB's own account
/// of who announces what).
pub async fn l2_statuses(client: &Client, namespace: &str) -> Result<Vec<L2Status>, Error> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ServiceL2Status");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "servicel2statuses");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let text = |v: &serde_json::Value, key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|o| o.data.get("status"))
        .map(|status| L2Status {
            node: text(status, "node"),
            service_namespace: text(status, "serviceNamespace"),
            service_name: text(status, "serviceName"),
            interfaces: status
                .get("interfaces")
                .and_then(serde_json::Value::as_array)
                .map(|list| list.iter().map(|i| text(i, "name")).collect())
                .unwrap_or_default(),
        })
        .collect())
}

/// One MetalLB speaker: where it runs and who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeakerConfig {
    /// The lab host (namespace suffix) it runs on; it must exist and be plugged in.
    pub host: String,
    /// Its node name (`--node-name`, the memberlist name, the Node object's name).
    pub node: String,
    /// The host's lab address: the Pod's `status.podIP`, the Node's InternalIP and
    /// `--ml-bindaddr`.
    pub ip: IpAddr,
    /// The namespace of its Pod and of MetalLB's configuration.
    pub namespace: String,
    /// `--ml-bindport`.
    pub memberlist_port: u16,
    /// The Node object's labels (for L2Advertisement node selectors).
    pub node_labels: BTreeMap<String, String>,
    /// The contents of `/etc/metallb/memberlist/config.json` (memberlist tuning), if any.
    pub memberlist_config: Option<String>,
    /// The contents of `/etc/metallb/excludel2.yaml` (interfaces not to announce on), if any;
    /// absent means none is excluded.
    pub exclude_l2: Option<String>,
    /// A kubeconfig to run with instead of the admin's (e.g. one for MetalLB's ServiceAccount,
    /// from [`ControlPlane::write_token_kubeconfig`]).
    pub kubeconfig: Option<PathBuf>,
    /// `--log-level` (all, debug, info, warn, error, none).
    pub log_level: String,
    /// Further flags, appended last.
    pub extra_args: Vec<String>,
}

impl SpeakerConfig {
    /// Speaker `node` on lab host `host` at `ip`, in [`METALLB_NAMESPACE`], memberlist on its
    /// default port, log level info.
    pub fn new(host: &str, node: &str, ip: IpAddr) -> Self {
        Self {
            host: host.to_string(),
            node: node.to_string(),
            ip,
            namespace: METALLB_NAMESPACE.to_string(),
            memberlist_port: MEMBERLIST_PORT,
            node_labels: BTreeMap::new(),
            memberlist_config: None,
            exclude_l2: None,
            kubeconfig: None,
            log_level: "info".to_string(),
            extra_args: Vec::new(),
        }
    }

    /// Its Pod's name (`--pod-name`).
    pub fn pod_name(&self) -> String {
        format!("speaker-{}", self.node)
    }

    /// Its Pod: labelled for `--ml-labels`, on its node, ready, with its IP as pod and host IP
    /// (speakers run with host networking).
    pub fn pod(&self) -> TestPod {
        let mut pod = TestPod::new(&self.namespace, &self.pod_name())
            .on_node(&self.node)
            .ip(self.ip)
            .host_ip(self.ip);
        for (k, v) in SPEAKER_LABELS {
            pod = pod.label(k, v);
        }
        pod
    }

    /// Its Node: ready, with its IP as InternalIP and [`Self::node_labels`].
    pub fn test_node(&self) -> TestNode {
        let mut node = TestNode::new(&self.node).internal_ip(self.ip);
        for (k, v) in &self.node_labels {
            node = node.label(k, v);
        }
        node
    }
}

/// `--ml-labels` for [`SPEAKER_LABELS`].
pub fn speaker_label_selector() -> String {
    SPEAKER_LABELS
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Creates each speaker's Node and Pod (with `status.podIP`). Do this for every speaker before
/// starting any: a Go speaker reads its peers' pod IPs at start-up and then only every five
/// minutes.
pub async fn register_speakers(client: &Client, speakers: &[SpeakerConfig]) -> Result<(), Error> {
    for speaker in speakers {
        create_node(client, &speaker.test_node()).await?;
        create_pod(client, &speaker.pod()).await?;
    }
    Ok(())
}

/// Replaces the speaker's Pod as a DaemonSet update does once the old speaker has exited: the
/// old Pod is deleted (at once: no kubelet runs here to finish a graceful deletion) and a new
/// one is created under the same name, with a new UID, ready and with the same IP (speakers use
/// host networking). vigil-testenv runs no garbage collector, so the `ServiceL2Status` objects
/// the old Pod owned are deleted here, as Kubernetes' collector would delete them. Returns how
/// many were collected.
pub async fn replace_speaker_pod(client: &Client, speaker: &SpeakerConfig) -> Result<usize, Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &speaker.namespace);
    let name = speaker.pod_name();
    let old_uid = pods.get(&name).await?.metadata.uid.unwrap_or_default();
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match pods.delete(&name, &now).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(e) => return Err(e.into()),
    }
    // A deletion with grace 0 is immediate, but wait until the name is free all the same.
    let end = Instant::now() + Duration::from_secs(10);
    while pods.get_opt(&name).await?.is_some() {
        if Instant::now() > end {
            return Err(Error::Config(format!(
                "Pod {name} still exists after its deletion"
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ServiceL2Status");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "servicel2statuses");
    let statuses: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &speaker.namespace, &resource);
    let mut collected = 0;
    for status in statuses.list(&ListParams::default()).await? {
        let owned = status
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.kind == "Pod" && r.uid == old_uid);
        if owned {
            match statuses
                .delete(&status.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => collected += 1,
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    create_pod(client, &speaker.pod()).await?;
    Ok(collected)
}

/// The MetalLB controller's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// The namespace of its Pod, its configuration and the memberlist Secret.
    pub namespace: String,
    /// Its Pod's name (`--pod-name`).
    pub pod_name: String,
    /// A kubeconfig to run with instead of the admin's.
    pub kubeconfig: Option<PathBuf>,
    /// `--log-level`.
    pub log_level: String,
    /// Further flags, appended last.
    pub extra_args: Vec<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            namespace: METALLB_NAMESPACE.to_string(),
            pod_name: "controller-0".to_string(),
            kubeconfig: None,
            log_level: "info".to_string(),
            extra_args: Vec::new(),
        }
    }
}

impl ControllerConfig {
    /// Its Pod (labels of MetalLB's manifests; it needs no IP).
    pub fn pod(&self) -> TestPod {
        TestPod::new(&self.namespace, &self.pod_name)
            .label("app", "metallb")
            .label("component", "controller")
    }
}

/// A running MetalLB program: a [`LabProcess`] logging standard output and error (MetalLB
/// logs JSON lines to standard output) whose guard stops it gracefully (SIGTERM, then
/// SIGKILL after 10 s) when dropped, or kills it at once and prints where its log is kept
/// when the test panics.
#[derive(Debug)]
pub struct MetalLbProcess {
    process: LabProcess,
}

impl MetalLbProcess {
    fn spawn(name: &str, command: Command, log: PathBuf) -> Result<Self, Error> {
        let process = LabProcess::start(name, command, log, Output::Both)
            .map_err(|e| Error::io(Path::new(name), e))?;
        Ok(Self { process })
    }

    /// What it is (`speaker <node>` or `controller`).
    pub fn name(&self) -> &str {
        self.process.name()
    }

    /// Its PID while it runs (the program itself: every launcher in between `exec`s).
    pub fn pid(&self) -> Option<Pid> {
        self.process.pid()
    }

    /// Its log (stdout and stderr; MetalLB logs JSON lines).
    pub fn log_path(&self) -> &Path {
        self.process.log_path()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        self.process.log_tail(lines)
    }

    /// An error with the end of its log if it has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        if !self.process.running() {
            return Err(Error::Config(format!(
                "MetalLB {} was stopped",
                self.name()
            )));
        }
        match self.process.exited() {
            None => Ok(()),
            Some(status) => Err(Error::Config(format!(
                "MetalLB {} exited ({status}); its log ends:\n{}",
                self.name(),
                self.log_tail(30)
            ))),
        }
    }

    /// Stops it with SIGTERM and waits for it (SIGKILL after 10 s); its exit status, `None`
    /// if it was not running or had to be killed.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        self.process.terminate(STOP_GRACE)
    }

    /// Kills it at once (SIGKILL), as a crash would end it.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// The process as every lab process is handled (a test that runs MetalLB and vigil side
    /// by side checks, stops and reads them alike).
    pub fn lab_process(&self) -> &LabProcess {
        &self.process
    }

    /// The process, mutably.
    pub fn lab_process_mut(&mut self) -> &mut LabProcess {
        &mut self.process
    }
}

impl Drop for MetalLbProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.kill();
            eprintln!(
                "vigil-kubelab: MetalLB {} log kept at {}",
                self.name(),
                self.log_path().display()
            );
        } else {
            let _ = self.stop();
        }
    }
}

/// The shell step between `unshare` and the speaker: in the private mount namespace, `/etc`
/// becomes an overlay (its upper layer on a tmpfs that vanishes with the namespace) so that
/// `/etc/metallb` can be made and bound to the host's own directory, then the speaker is
/// `exec`ed (so the PID the test holds is the speaker's). Arguments: the host's directory,
/// a scratch mount point, then the speaker's command line.
const SPEAKER_MOUNTS: &str = r#"set -eu
etc_dir=$1 scratch=$2
shift 2
mount -t tmpfs vigil-kubelab "$scratch"
mkdir "$scratch/upper" "$scratch/work"
mount -t overlay vigil-kubelab -o "lowerdir=/etc,upperdir=$scratch/upper,workdir=$scratch/work" /etc
mkdir -p /etc/metallb
mount --bind "$etc_dir" /etc/metallb
exec "$@"
"#;

fn write(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    fs::write(path, text).map_err(|e| Error::io(path, e))
}

/// A MetalLB speaker running on a lab host.
#[derive(Debug)]
pub struct MetalLbSpeaker {
    process: MetalLbProcess,
    config: SpeakerConfig,
    dir: PathBuf,
}

impl MetalLbSpeaker {
    /// Starts the speaker of `config` on its host of `lab`, against the lab's control plane,
    /// with memberlist secret `key`. Its Node and Pod must exist ([`register_speakers`]). Its
    /// files live in `<cp work dir>/metallb/<node>/`: `etc/` (seen by the speaker as
    /// `/etc/metallb`), `memberlist-key/secretkey`, `speaker.log`.
    pub fn start(
        lab: &KubeLab,
        binaries: &MetalLbBinaries,
        config: &SpeakerConfig,
        key: &MemberlistKey,
    ) -> Result<Self, Error> {
        let cp = lab.cp();
        let dir = cp.work_dir().join("metallb").join(&config.node);
        let etc = dir.join("etc");
        let key_dir = dir.join("memberlist-key");
        let scratch = dir.join("mnt");
        for d in [&etc, &key_dir, &scratch] {
            fs::create_dir_all(d).map_err(|e| Error::io(d, e))?;
        }
        write(&key_dir.join(MEMBERLIST_SECRET_KEY), key.as_str())?;
        if let Some(json) = &config.memberlist_config {
            write(&etc.join("memberlist/config.json"), json)?;
        }
        if let Some(yaml) = &config.exclude_l2 {
            write(&etc.join("excludel2.yaml"), yaml)?;
        }
        let kubeconfig = config
            .kubeconfig
            .clone()
            .unwrap_or_else(|| cp.kubeconfig_path().to_path_buf());
        let ns = lab.bridge().ns(&config.host);
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &ns])
            .args(["unshare", "--mount", "--propagation", "private"])
            .args(["sh", "-c", SPEAKER_MOUNTS, "metallb-speaker-mounts"])
            .arg(&etc)
            .arg(&scratch)
            .arg(&binaries.speaker)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--namespace={}", config.namespace))
            .arg(format!("--node-name={}", config.node))
            .arg(format!("--pod-name={}", config.pod_name()))
            .arg(format!("--ml-bindaddr={}", config.ip))
            .arg(format!("--ml-bindport={}", config.memberlist_port))
            .arg(format!("--ml-labels={}", speaker_label_selector()))
            .arg(format!("--ml-secret-key-path={}", key_dir.display()))
            .arg("--port=0")
            .arg(format!("--log-level={}", config.log_level))
            .args(&config.extra_args)
            // Layer-2 tests: native BGP mode, which starts nothing while no BGPPeer exists.
            .env_remove("METALLB_BGP_TYPE");
        let process = MetalLbProcess::spawn(
            &format!("speaker {}", config.node),
            command,
            dir.join("speaker.log"),
        )?;
        Ok(Self {
            process,
            config: config.clone(),
            dir,
        })
    }

    /// Its settings.
    pub fn config(&self) -> &SpeakerConfig {
        &self.config
    }

    /// Its files (`etc/`, `memberlist-key/`, `speaker.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The process, to stop, kill or read the log of.
    pub fn process(&self) -> &MetalLbProcess {
        &self.process
    }

    /// The process, mutably.
    pub fn process_mut(&mut self) -> &mut MetalLbProcess {
        &mut self.process
    }
}

/// Starts the MetalLB controller in the control plane's namespace (it only talks to the API
/// server). Its Pod must exist (`create_pod(client, &config.pod())`). Webhooks are disabled;
/// `--ml-secret-name` names the memberlist Secret, which [`install_metallb`] made, so the
/// controller never needs its Deployment object. Log: `<cp work dir>/metallb/controller.log`.
pub fn start_controller(
    cp: &ControlPlane,
    binaries: &MetalLbBinaries,
    config: &ControllerConfig,
) -> Result<MetalLbProcess, Error> {
    let dir = cp.work_dir().join("metallb");
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let kubeconfig = config
        .kubeconfig
        .clone()
        .unwrap_or_else(|| cp.kubeconfig_path().to_path_buf());
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", cp.ns()])
        .arg(&binaries.controller)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={}", config.namespace))
        .arg(format!("--pod-name={}", config.pod_name))
        .arg("--webhook-mode=disabled")
        .arg(format!("--ml-secret-name={MEMBERLIST_SECRET}"))
        .arg("--deployment=controller")
        .arg("--port=0")
        .arg(format!("--log-level={}", config.log_level))
        .args(&config.extra_args);
    MetalLbProcess::spawn("controller", command, dir.join("controller.log"))
}
