//! Shared test support: a control plane with MetalLB's IPAddressPool CRD, controller replicas
//! each on a tokio runtime of its own inside the lab (so one can be killed outright by
//! dropping its runtime: no Lease release, no goodbye), and polling helpers.
#![allow(dead_code, unreachable_pub)]

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use vigil_controller::{RunError, Settings};
use vigil_kubelab::{
    ControlPlane, ControlPlaneConfig, KubeLab, LabRuntime, StaticToken, apply_crds,
    ensure_namespace,
};

/// The controller's namespace in every test.
pub const NS: &str = "metallb-system";
/// How long anything the controller should do "soon" may take before a test fails.
pub const SOON: Duration = Duration::from_secs(30);

/// A lab with the IPAddressPool CRD installed and namespace [`NS`], or `None` to skip.
pub fn lab(tag: &str, test: &str) -> Option<KubeLab> {
    lab_with(tag, test, ControlPlaneConfig::default())
}

/// [`lab`] whose API server keeps an audit log and accepts the controller's own token
/// ([`controller_kube_config`]), so a test can count what the controller asks.
pub fn audited_lab(tag: &str, test: &str) -> Option<(KubeLab, AuditLog)> {
    let audit = AuditLog::new(tag);
    let config = ControlPlaneConfig {
        tokens: vec![StaticToken {
            token: CONTROLLER_TOKEN.into(),
            user: CONTROLLER_USER.into(),
            uid: CONTROLLER_USER.into(),
            groups: vec!["system:masters".into()],
        }],
        apiserver_args: audit.apiserver_args(),
        ..ControlPlaneConfig::default()
    };
    Some((lab_with(tag, test, config)?, audit))
}

fn lab_with(tag: &str, test: &str, config: ControlPlaneConfig) -> Option<KubeLab> {
    let lab = KubeLab::start(tag, test, config)?;
    let crd = vigil_kubelab::metallb::metallb_module_dir()
        .unwrap_or_else(|e| panic!("{test}: {e}"))
        .join("config/crd/bases/metallb.io_ipaddresspools.yaml");
    let client = lab.cp().client().unwrap();
    lab.cp().block_on(async {
        apply_crds(&client, &[Path::new(&crd)]).await.unwrap();
        ensure_namespace(&client, NS).await.unwrap();
    });
    Some(lab)
}

/// The user the controller runs as in an [`audited_lab`].
pub const CONTROLLER_USER: &str = "vigil-test:controller";
const CONTROLLER_TOKEN: &str = "vigil-test-controller-token";

/// The admin's kube configuration with the controller's own token instead (its requests
/// then carry [`CONTROLLER_USER`] in the audit log).
pub fn controller_kube_config(cp: &ControlPlane) -> kube::Config {
    let mut config = cp.kube_config().unwrap().clone();
    config.auth_info = serde_json::from_value(serde_json::json!({ "token": CONTROLLER_TOKEN }))
        .expect("token credentials");
    config
}

/// kube-apiserver's audit log: the metadata of every request, once, when it is received.
pub struct AuditLog {
    dir: PathBuf,
    path: PathBuf,
}

/// One request as the audit log has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited {
    pub user: String,
    pub verb: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

impl AuditLog {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "vigil-controller-audit-{tag}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\n\
            omitStages: [ResponseStarted, ResponseComplete, Panic]\n\
            rules:\n  - level: Metadata\n";
        std::fs::write(dir.join("policy.yaml"), policy).unwrap();
        let path = dir.join("audit.log");
        Self { dir, path }
    }

    fn apiserver_args(&self) -> Vec<String> {
        vec![
            format!(
                "--audit-policy-file={}",
                self.dir.join("policy.yaml").display()
            ),
            format!("--audit-log-path={}", self.path.display()),
            "--audit-log-format=json".into(),
            "--audit-log-maxbackup=0".into(),
            "--audit-log-maxsize=0".into(),
        ]
    }

    /// Where the log ends now: [`Self::since`] reads from there.
    pub fn mark(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// Every request logged after `mark` (lines that do not parse are skipped).
    pub fn since(&self, mark: u64) -> Vec<Audited> {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let from = usize::try_from(mark).unwrap().min(text.len());
        String::from_utf8_lossy(&text[from..])
            .lines()
            .filter_map(|line| {
                let v: serde_json::Value = serde_json::from_str(line).ok()?;
                let field = |p: &str| v.pointer(p).and_then(|x| x.as_str()).unwrap_or_default();
                let sub = field("/objectRef/subresource");
                let resource = if sub.is_empty() {
                    field("/objectRef/resource").to_string()
                } else {
                    format!("{}/{sub}", field("/objectRef/resource"))
                };
                Some(Audited {
                    user: field("/user/username").into(),
                    verb: field("/verb").into(),
                    resource,
                    namespace: field("/objectRef/namespace").into(),
                    name: field("/objectRef/name").into(),
                })
            })
            .collect()
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Settings for a replica called `identity`, with a short Lease.
pub fn settings(identity: &str) -> Settings {
    Settings {
        namespace: NS.into(),
        ml_secret_name: None,
        deployment: None,
        lb_class: None,
        identity: identity.into(),
        lease_name: "vigil-controller".into(),
        lease_seconds: 4,
        grace_seconds: 1,
    }
}

/// One controller replica on a runtime of its own.
pub struct Replica {
    runtime: Option<LabRuntime>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), RunError>>>,
}

impl Replica {
    /// Starts `vigil_controller::run` with `settings` against the lab's API server, as the
    /// admin.
    pub fn start(cp: &ControlPlane, settings: Settings) -> Self {
        Self::start_with(cp, settings, cp.kube_config().unwrap().clone())
    }

    /// [`Self::start`] with the client made from `config`.
    pub fn start_with(cp: &ControlPlane, settings: Settings, config: kube::Config) -> Self {
        // RUST_LOG=vigil_controller=debug shows the controller's log in a failing test.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let runtime = LabRuntime::new(cp.ns()).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        // The client must be made on the replica's runtime (it spawns its worker there);
        // the JoinHandle is the output, not something to await here.
        #[allow(clippy::async_yields_async)]
        let task = runtime.block_on(async move {
            let client = Client::try_from(config).unwrap();
            tokio::spawn(vigil_controller::run(settings, client, async move {
                let _ = stopped.await;
            }))
        });
        Self {
            runtime: Some(runtime),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Asks the replica to stop and waits for it (it releases the Lease).
    pub fn stop(mut self) -> Result<(), RunError> {
        let _ = self.stop.take().unwrap().send(());
        let task = self.task.take().unwrap();
        let runtime = self.runtime.take().unwrap();
        let out = runtime.block_on(async move {
            tokio::time::timeout(SOON, task)
                .await
                .expect("replica did not stop")
        });
        out.expect("replica task panicked")
    }

    /// Kills the replica: its runtime is dropped with every task in it, mid-flight.
    pub fn kill(mut self) {
        drop(self.runtime.take());
        drop(self.stop.take());
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        drop(self.runtime.take());
    }
}

/// Polls `check` every 100 ms until it gives `Some`, failing after [`SOON`] with `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + SOON;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "not within {SOON:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates IPAddressPool `name` in [`NS`] from its spec.
pub async fn create_pool(client: &Client, name: &str, spec: serde_json::Value) {
    // vigil-k8s's IPAddressPool carries no apiVersion/kind, which a create needs.
    let pool = serde_json::json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
        "metadata": {"name": name, "namespace": NS}, "spec": spec,
    });
    vigil_kubelab::apply_yaml(client, name, &pool.to_string())
        .await
        .unwrap();
}

/// A LoadBalancer Service with TCP `port`, `annotations`, and extra `spec` fields merged in.
pub fn lb_service(
    ns: &str,
    name: &str,
    port: u16,
    annotations: &[(&str, &str)],
    spec: serde_json::Value,
) -> Service {
    let ann: serde_json::Map<String, serde_json::Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect();
    let mut s = serde_json::json!({
        "metadata": {"name": name, "namespace": ns, "annotations": ann},
        "spec": {"type": "LoadBalancer", "ports": [{"port": port, "protocol": "TCP"}]},
    });
    if let serde_json::Value::Object(extra) = spec {
        for (k, v) in extra {
            s["spec"][k] = v;
        }
    }
    serde_json::from_value(s).unwrap()
}

/// Creates the Service.
pub async fn create(client: &Client, svc: &Service) -> Service {
    let api: Api<Service> = Api::namespaced(client.clone(), &svc.namespace().unwrap());
    api.create(&PostParams::default(), svc).await.unwrap()
}

/// The Service now.
pub async fn get(client: &Client, ns: &str, name: &str) -> Service {
    Api::<Service>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

/// The ingress IPs of a Service.
pub fn ingress(svc: &Service) -> Vec<IpAddr> {
    svc.status
        .iter()
        .filter_map(|s| s.load_balancer.as_ref())
        .flat_map(|l| l.ingress.iter().flatten())
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

/// The annotation `metallb.io/ip-allocated-from-pool`.
pub fn pool_of(svc: &Service) -> Option<String> {
    svc.annotations()
        .get("metallb.io/ip-allocated-from-pool")
        .cloned()
}

/// Waits until the Service has exactly `want` as ingress, and returns it.
pub async fn wait_ingress(client: &Client, ns: &str, name: &str, want: &[&str]) -> Service {
    let want: Vec<IpAddr> = want.iter().map(|s| s.parse().unwrap()).collect();
    eventually(&format!("{ns}/{name} has ingress {want:?}"), || async {
        let s = get(client, ns, name).await;
        (ingress(&s) == want).then_some(s)
    })
    .await
}

/// The events (events.k8s.io/v1) the controller wrote about Service `ns/name`, as (type,
/// reason, note). Only the controller's: kube-apiserver's node-port and cluster-IP repair
/// loops write their own Warnings on Services (`PortNotAllocated` when a Service was created
/// between their snapshot and their list), on any Service, whatever its class.
pub async fn events(client: &Client, ns: &str, name: &str) -> Vec<(String, String, String)> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter(|e| e.reporting_controller.as_deref() == Some(vigil_controller::FIELD_MANAGER))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until Service `ns/name` has an event of `type_` with `reason`; returns its note.
pub async fn wait_event(
    client: &Client,
    ns: &str,
    name: &str,
    type_: &str,
    reason: &str,
) -> String {
    eventually(&format!("{ns}/{name}: {type_} event {reason}"), || async {
        events(client, ns, name)
            .await
            .into_iter()
            .find(|(t, r, _)| t == type_ && r == reason)
            .map(|(_, _, n)| n)
    })
    .await
}
