//! MetalLB's webhooks in a lab: MetalLB's webhook objects from `metallb-native.yaml`, the
//! webhook Service routed to the host where the controller runs, and checks through the API
//! server (`k8s_webhook`, and the swap test's webhook part).
//!
//! For a test that runs MetalLB's install with vigil (or MetalLB) as the controller:
//! 1. start the cluster with [`APISERVER_ARGS`] in `ClusterSpec::apiserver_args`;
//! 2. keep MetalLB's webhook objects (`metallb-native.yaml` has them) and call
//!    [`route_webhook_service`] with the controller host's IP;
//! 3. [`wait_serving`] once the controller runs, then [`verdicts`] (dry-run writes: nothing
//!    stays) and compare the map between vigil and MetalLB, or check it alone with
//!    [`assert_metallb_verdicts`]. vigil serves the certificate from memory; MetalLB's own
//!    controller reads it from `/tmp/k8s-webhook-server/serving-certs` (its Pod's Secret
//!    mount), see [`CERT_MOUNT`].

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use vigil_kubelab::cluster::{Cluster, LabProcess, Output, fresh_log};
use vigil_kubelab::documents;
use vigil_kubelab::metallb::{self, METALLB_NAMESPACE};

/// The API server flag that lets it call a webhook Service through its Endpoints (no
/// kube-proxy or cluster DNS in the lab).
pub const APISERVER_ARGS: &[&str] = &["--enable-aggregator-routing=true"];
pub const SECRET: &str = "metallb-webhook-cert";
pub const SERVICE: &str = "metallb-webhook-service";
pub const WEBHOOKS: &str = "metallb-webhook-configuration";
pub const BGPPEERS: &str = "bgppeers.metallb.io";
/// Bound on every wait (two shared cores).
pub const LIMIT: Duration = Duration::from_secs(45);

/// MetalLB's webhook objects from its release manifest, as shipped.
pub fn webhook_objects() -> Vec<Value> {
    let path = metallb::metallb_module_dir()
        .expect("MetalLB module")
        .join("config/manifests/metallb-native.yaml");
    let yaml = std::fs::read_to_string(&path).expect("metallb-native.yaml");
    documents(&path.display().to_string(), &yaml)
        .expect("documents")
        .into_iter()
        .filter(|d| {
            let (kind, name) = (d["kind"].as_str(), d["metadata"]["name"].as_str());
            matches!(
                (kind, name),
                (Some("Secret"), Some(SECRET))
                    | (Some("Service"), Some(SERVICE))
                    | (Some("ValidatingWebhookConfiguration"), Some(WEBHOOKS))
                    | (Some("CustomResourceDefinition"), Some(BGPPEERS))
            )
        })
        .collect()
}

/// The webhook Service's endpoints: `ip`, port 9443 (what the controller Pod there would get
/// from the endpoint controllers, which do not run in the lab). The API server routes to them
/// with [`APISERVER_ARGS`].
pub fn endpoints(ip: &str) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": SERVICE, "namespace": METALLB_NAMESPACE},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"port": 9443, "protocol": "TCP"}]}],
        }),
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{SERVICE}-lab"), "namespace": METALLB_NAMESPACE,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": [{"port": 9443, "protocol": "TCP"}],
        }),
    ]
}

pub fn api(
    client: &kube::Client,
    version: &str,
    kind: &str,
    plural: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", version, kind);
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// One write's outcome: `Ok` with what is worth comparing, or the API server's message.
pub type Outcome = Result<String, String>;

pub async fn create(api: &Api<DynamicObject>, object: Value) -> Outcome {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok("created".into()),
        Err(kube::Error::Api(s)) => Err(s.message.clone()),
        Err(e) => Err(format!("transport: {e}")),
    }
}

pub fn pool(name: &str, ns: &str, addresses: &[&str]) -> Value {
    json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
           "metadata": {"name": name, "namespace": ns}, "spec": {"addresses": addresses}})
}

pub fn l2(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
           "metadata": {"name": name, "namespace": METALLB_NAMESPACE}, "spec": spec})
}

pub fn secret_data(c: &Cluster) -> BTreeMap<String, Vec<u8>> {
    let secrets: Api<Secret> = Api::namespaced(c.client().clone(), METALLB_NAMESPACE);
    let s = c.block_on(secrets.get(SECRET)).expect("the webhook Secret");
    s.data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// The CA bundles of every webhook and of the CRD's conversion.
pub fn ca_bundles(c: &Cluster) -> Vec<Option<Vec<u8>>> {
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(c.client().clone());
    let crds: Api<CustomResourceDefinition> = Api::all(c.client().clone());
    let config = c
        .block_on(hooks.get(WEBHOOKS))
        .expect("webhook configuration");
    let mut out: Vec<Option<Vec<u8>>> = config
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.client_config.ca_bundle.map(|b| b.0))
        .collect();
    let crd = c.block_on(crds.get(BGPPEERS)).expect("BGPPeer CRD");
    out.push(
        crd.spec
            .conversion
            .and_then(|c| c.webhook)
            .and_then(|w| w.client_config)
            .and_then(|c| c.ca_bundle)
            .map(|b| b.0),
    );
    out
}

/// Until the webhook answers: a write that only a webhook refuses is refused by it (while no
/// server answers, the API server's message is about calling the webhook instead).
pub fn wait_serving(c: &Cluster, who: &str, log: &dyn Fn() -> String) {
    let client = c.client().clone();
    let pools = api(
        &client,
        "v1beta1",
        "IPAddressPool",
        "ipaddresspools",
        "default",
    );
    let start = Instant::now();
    loop {
        let answer = c.block_on(create(&pools, pool("probe", "default", &["198.18.2.0/24"])));
        match answer {
            Err(m) if m.contains("denied the request") => return,
            other => assert!(
                start.elapsed() < LIMIT,
                "{who}'s webhook not answering within {LIMIT:?}: {other:?}\n{}",
                log()
            ),
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Writes the webhook Service's Endpoints and EndpointSlice to `ip`:9443.
pub fn route_webhook_service(c: &Cluster, ip: &str) {
    for doc in endpoints(ip) {
        c.apply("the webhook Service's endpoints", &doc.to_string());
    }
}

async fn dry_run(api: &Api<DynamicObject>, object: Value) -> Outcome {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api.create(&pp, &object).await {
        Ok(_) => Ok("created".into()),
        Err(kube::Error::Api(s)) => Err(s.message.clone()),
        Err(e) => Err(format!("transport: {e}")),
    }
}

/// Dry-run writes through the API server and the webhook (nothing is stored): a pool of
/// `free` (addresses no pool has), a pool overlapping `taken` (an address range an existing
/// pool holds), a pool in another namespace. Compare the map between programs.
pub fn verdicts(c: &Cluster, free: &str, taken: &str) -> BTreeMap<&'static str, Outcome> {
    let client = c.client().clone();
    c.block_on(async {
        let pools = api(
            &client,
            "v1beta1",
            "IPAddressPool",
            "ipaddresspools",
            METALLB_NAMESPACE,
        );
        let elsewhere = api(
            &client,
            "v1beta1",
            "IPAddressPool",
            "ipaddresspools",
            "default",
        );
        let mut out = BTreeMap::new();
        out.insert(
            "valid",
            dry_run(&pools, pool("webhook-valid", METALLB_NAMESPACE, &[free])).await,
        );
        out.insert(
            "overlap",
            dry_run(&pools, pool("webhook-overlap", METALLB_NAMESPACE, &[taken])).await,
        );
        out.insert(
            "namespace",
            dry_run(&elsewhere, pool("webhook-elsewhere", "default", &[free])).await,
        );
        out
    })
}

/// [`verdicts`] as MetalLB v0.16.2 answers them: the valid pool accepted, the others refused
/// by `ipaddresspoolvalidationwebhook.metallb.io` with MetalLB's messages.
pub fn assert_metallb_verdicts(v: &BTreeMap<&'static str, Outcome>) {
    let denied =
        "admission webhook \"ipaddresspoolvalidationwebhook.metallb.io\" denied the request: ";
    assert_eq!(v["valid"], Ok("created".into()), "{v:#?}");
    assert!(
        v["overlap"].as_ref().is_err_and(|m| m.starts_with(denied)
            && m.contains("in pool \"webhook-overlap\" overlaps with already defined CIDR")),
        "{v:#?}"
    );
    assert_eq!(
        v["namespace"],
        Err(format!(
            "{denied}resource must be created in {METALLB_NAMESPACE} namespace"
        )),
        "{v:#?}"
    );
}

/// The shell step before MetalLB's controller: its webhook server reads the certificate from
/// `/tmp/k8s-webhook-server/serving-certs` whatever `--cert-dir` says (controller-runtime's
/// default; MetalLB passes `--cert-dir` to the rotator only), where its Pod mounts the Secret.
/// In a private mount namespace `/tmp` becomes an overlay (upper layer on a tmpfs that
/// vanishes with the namespace) and the given directory is bound there; then the program is
/// `exec`ed. Arguments: the certificate directory, then the command line.
pub const CERT_MOUNT: &str = r#"set -eu
certs=$1
shift
mount -t tmpfs vigil-webhook /mnt
mkdir /mnt/upper /mnt/work
mount -t overlay vigil-webhook -o "lowerdir=/tmp,upperdir=/mnt/upper,workdir=/mnt/work" /tmp
mkdir -p /tmp/k8s-webhook-server/serving-certs
mount --bind "$certs" /tmp/k8s-webhook-server/serving-certs
exec "$@"
"#;

/// MetalLB's controller, webhook only, with MetalLB's controller ServiceAccount, on the
/// control plane's host, serving the certificate in `certs` (`tls.crt`, `tls.key`).
pub fn start_metallb_webhook(c: &Cluster, binary: &Path, certs: &Path) -> LabProcess {
    let mut command = std::process::Command::new("ip");
    command
        .args(["netns", "exec", c.lab.cp().ns()])
        .args(["unshare", "--mount", "--propagation", "private"])
        .args(["sh", "-c", CERT_MOUNT, "metallb-cert-mount"])
        .arg(certs)
        .arg(binary)
        .arg(format!(
            "--kubeconfig={}",
            c.kubeconfigs.controller.display()
        ))
        .arg(format!("--namespace={METALLB_NAMESPACE}"))
        .arg("--pod-name=controller-0")
        .arg("--webhook-mode=onlywebhook")
        .arg("--port=0")
        .arg("--log-level=info")
        .env_remove("KUBECONFIG");
    LabProcess::start(
        "metallb-controller",
        command,
        fresh_log(&c.dir("metallb-controller"), "controller"),
        Output::Both,
    )
    .expect("start MetalLB's controller")
}
