//! MetalLB's webhooks served by `vigil controller`, called by a real API server through
//! MetalLB v0.16.2's own objects, and compared with MetalLB's controller serving them.
//!
//! MetalLB's `metallb-native.yaml` (from the Go module cache) gives the webhook Secret (empty),
//! the Service `metallb-webhook-service` (443 → 9443), the ValidatingWebhookConfiguration
//! `metallb-webhook-configuration` (failurePolicy Fail) and the BGPPeer CRD with its
//! conversion webhook, applied as shipped. No kubelet or endpoints controller runs, so the
//! Service's Endpoints and EndpointSlice are written here, pointing at the control plane's
//! host, where the programs run; the API server routes to them (`--enable-aggregator-routing`).
//!
//! 1. `vigil controller --webhook-mode=onlywebhook` with MetalLB's controller ServiceAccount
//!    (MetalLB's RBAC exactly) fills the Secret with MetalLB's four keys and patches the CA into
//!    every webhook and the CRD's conversion; then a round of writes goes through the API server:
//!    valid and invalid pools (overlap, bad address, other namespace), valid and invalid
//!    L2Advertisements, a BGPAdvertisement, a BGPPeer outside the namespace, and a v1beta1
//!    BGPPeer (stored as v1beta2 through `/convert`) read back in both versions.
//! 2. vigil stops; MetalLB's controller (`--webhook-mode=onlywebhook`) starts on the same
//!    Secret (its `tls.crt`/`tls.key` copied to its `--cert-dir`, as the kubelet's mount
//!    would) and the same round runs again: every verdict and message must be the same, and
//!    MetalLB keeps vigil's certificate (it would replace one it judged invalid).
//!
//! Root and the Go programs (vigil-testenv, metallb-controller) needed: skips otherwise, fails
//! under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`. No durations are asserted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};
use vigil_kubelab::cluster::{Cluster, ClusterSpec, LabProcess, Output, fresh_log};
use vigil_kubelab::metallb::{self, ControllerConfig, METALLB_NAMESPACE};
use vigil_kubelab::{create_pod, documents};

/// The control plane's address: the programs run on its host.
const HOST: &str = "198.18.0.2";
const SECRET: &str = "metallb-webhook-cert";
const SERVICE: &str = "metallb-webhook-service";
const WEBHOOKS: &str = "metallb-webhook-configuration";
const BGPPEERS: &str = "bgppeers.metallb.io";
/// Cases whose messages differ, with the verdicts alike (asserted). The In selector without
/// values: the shared selector reader (`vigil_lb::selector`) words the first line as older
/// apimachinery did (`key "k": for 'in', 'notin' operators, values set can't be empty`);
/// MetalLB v0.16.2's apimachinery says `values: Invalid value: null: ...`. The rest of the
/// message is MetalLB's.
const KNOWN_DIFFERENCES: &[&str] = &["l2 bad node selector"];
/// Bound on every wait (two shared cores).
const LIMIT: Duration = Duration::from_secs(45);

/// MetalLB's webhook objects from its release manifest, as shipped.
fn webhook_objects() -> Vec<Value> {
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

/// The Service's endpoints: the control plane's host, port 9443 (what a controller Pod there
/// would get from the endpoint controllers).
fn endpoints() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": SERVICE, "namespace": METALLB_NAMESPACE},
            "subsets": [{"addresses": [{"ip": HOST}], "ports": [{"port": 9443, "protocol": "TCP"}]}],
        }),
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{SERVICE}-lab"), "namespace": METALLB_NAMESPACE,
                         "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [HOST], "conditions": {"ready": true}}],
            "ports": [{"port": 9443, "protocol": "TCP"}],
        }),
    ]
}

fn api(
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
type Outcome = Result<String, String>;

async fn create(api: &Api<DynamicObject>, object: Value) -> Outcome {
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok("created".into()),
        Err(kube::Error::Api(s)) => Err(s.message.clone()),
        Err(e) => Err(format!("transport: {e}")),
    }
}

fn pool(name: &str, ns: &str, addresses: &[&str]) -> Value {
    json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
           "metadata": {"name": name, "namespace": ns}, "spec": {"addresses": addresses}})
}

fn l2(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "metallb.io/v1beta1", "kind": "L2Advertisement",
           "metadata": {"name": name, "namespace": METALLB_NAMESPACE}, "spec": spec})
}

/// The round of writes, each through the API server and the webhook; everything created is
/// deleted at the end (deletes of these kinds are not reviewed), so the round can run again.
async fn round(client: &kube::Client) -> BTreeMap<&'static str, Outcome> {
    let ns = METALLB_NAMESPACE;
    let pools = api(client, "v1beta1", "IPAddressPool", "ipaddresspools", ns);
    let other_pools = api(
        client,
        "v1beta1",
        "IPAddressPool",
        "ipaddresspools",
        "default",
    );
    let ads = api(client, "v1beta1", "L2Advertisement", "l2advertisements", ns);
    let bgp_ads = api(
        client,
        "v1beta1",
        "BGPAdvertisement",
        "bgpadvertisements",
        ns,
    );
    let peers1 = api(client, "v1beta1", "BGPPeer", "bgppeers", ns);
    let peers2 = api(client, "v1beta2", "BGPPeer", "bgppeers", ns);
    let other_peers = api(client, "v1beta2", "BGPPeer", "bgppeers", "default");
    let mut out = BTreeMap::new();
    out.insert(
        "pool valid",
        create(&pools, pool("web", ns, &["198.18.0.200-198.18.0.209"])).await,
    );
    // Named to sort before "web": MetalLB reads the reviewed pool last whatever its name.
    out.insert(
        "pool overlapping",
        create(&pools, pool("a-overlap", ns, &["198.18.0.204/30"])).await,
    );
    out.insert(
        "pool bad address",
        create(&pools, pool("bad", ns, &["198.18.0.300/24"])).await,
    );
    out.insert(
        "pool bad range",
        create(&pools, pool("bad", ns, &["198.18.0.9-198.18.0.1"])).await,
    );
    out.insert(
        "pool other namespace",
        create(
            &other_pools,
            pool("elsewhere", "default", &["198.18.1.0/24"]),
        )
        .await,
    );
    out.insert(
        "l2 valid",
        create(&ads, l2("web", json!({"ipAddressPools": ["web"]}))).await,
    );
    out.insert(
        "l2 duplicate pool",
        create(&ads, l2("twice", json!({"ipAddressPools": ["web", "web"]}))).await,
    );
    out.insert(
        "l2 bad node selector",
        create(
            &ads,
            l2(
                "badsel",
                json!({"nodeSelectors": [{"matchExpressions": [{"key": "k", "operator": "In"}]}]}),
            ),
        )
        .await,
    );
    out.insert(
        "bgp advertisement",
        create(
            &bgp_ads,
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPAdvertisement",
                                 "metadata": {"name": "adv", "namespace": ns}, "spec": {}}),
        )
        .await,
    );
    out.insert(
        "bgppeer other namespace",
        create(&other_peers, json!({"apiVersion": "metallb.io/v1beta2", "kind": "BGPPeer",
                                     "metadata": {"name": "p", "namespace": "default"},
                                     "spec": {"myASN": 64512, "peerASN": 64513, "peerAddress": "198.18.0.1"}}))
        .await,
    );
    let peer = json!({"apiVersion": "metallb.io/v1beta1", "kind": "BGPPeer",
                      "metadata": {"name": "legacy", "namespace": ns},
                      "spec": {"myASN": 64512, "peerASN": 64513, "peerAddress": "198.18.0.1",
                               "nodeSelectors": [{"matchLabels": {"rack": "r1"}},
                                                 {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}});
    let created = create(&peers1, peer).await;
    let read_back = |api: Api<DynamicObject>| async move {
        match api.get("legacy").await {
            Ok(o) => Ok(o.data["spec"].to_string()),
            Err(e) => Err(e.to_string()),
        }
    };
    out.insert("bgppeer v1beta1 created", created.clone());
    if created.is_ok() {
        out.insert("bgppeer read as v1beta2", read_back(peers2.clone()).await);
        out.insert("bgppeer read as v1beta1", read_back(peers1.clone()).await);
    }
    let dp = DeleteParams::default();
    let _ = pools.delete("web", &dp).await;
    let _ = ads.delete("web", &dp).await;
    let _ = bgp_ads.delete("adv", &dp).await;
    let _ = peers2.delete("legacy", &dp).await;
    out
}

/// Waits for `check` to give `Some`, at most [`LIMIT`].
fn wait<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn secret_data(c: &Cluster) -> BTreeMap<String, Vec<u8>> {
    let secrets: Api<Secret> = Api::namespaced(c.client().clone(), METALLB_NAMESPACE);
    let s = c.block_on(secrets.get(SECRET)).expect("the webhook Secret");
    s.data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

/// The CA bundles of every webhook and of the CRD's conversion.
fn ca_bundles(c: &Cluster) -> Vec<Option<Vec<u8>>> {
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
fn wait_serving(c: &Cluster, who: &str, log: &dyn Fn() -> String) {
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

fn start_vigil(c: &Cluster, kubeconfig: &Path) -> LabProcess {
    let args = [
        "controller".to_string(),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--namespace={METALLB_NAMESPACE}"),
        "--identity=vigil-webhook".to_string(),
        "--webhook-mode=onlywebhook".to_string(),
        format!("--cert-dir={}", c.dir("vigil-certs").display()),
        "--health-probe-port=0".to_string(),
        "--log-level=info".to_string(),
    ];
    LabProcess::spawn(
        "vigil-controller",
        c.lab.cp().ns(),
        Path::new(env!("CARGO_BIN_EXE_vigil")),
        &args,
        &[],
        fresh_log(&c.dir("vigil-controller"), "controller"),
    )
}

/// The shell step before MetalLB's controller: its webhook server reads the certificate from
/// `/tmp/k8s-webhook-server/serving-certs` whatever `--cert-dir` says (controller-runtime's
/// default; MetalLB passes `--cert-dir` to the rotator only), where its Pod mounts the Secret.
/// In a private mount namespace `/tmp` becomes an overlay (upper layer on a tmpfs that
/// vanishes with the namespace) and the test's copy of the Secret is bound there; then the
/// controller is `exec`ed. Arguments: the certificate directory, then the command line.
const CERT_MOUNT: &str = r#"set -eu
certs=$1
shift
mount -t tmpfs vigil-webhook /mnt
mkdir /mnt/upper /mnt/work
mount -t overlay vigil-webhook -o "lowerdir=/tmp,upperdir=/mnt/upper,workdir=/mnt/work" /tmp
mkdir -p /tmp/k8s-webhook-server/serving-certs
mount --bind "$certs" /tmp/k8s-webhook-server/serving-certs
exec "$@"
"#;

/// MetalLB's controller as its manifest's Pod runs it, webhook only, with MetalLB's
/// controller ServiceAccount, on the control plane's host.
fn start_metallb_controller(c: &Cluster, binary: &Path, certs: &Path) -> LabProcess {
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

#[test]
fn metallb_webhooks_answer_from_vigil_as_from_metallb() {
    const TEST: &str = "metallb_webhooks_answer_from_vigil_as_from_metallb";
    let Some(binaries) = vigil_kubelab::metallb_binaries(TEST) else {
        return;
    };
    let spec = ClusterSpec {
        apiserver_args: vec!["--enable-aggregator-routing=true".into()],
        ..ClusterSpec::nodes(0)
    };
    let Some(c) = Cluster::start(TEST, "wh", &spec) else {
        return;
    };
    let client = c.client().clone();
    for doc in webhook_objects().into_iter().chain(endpoints()) {
        c.apply("MetalLB's webhook objects", &doc.to_string());
    }

    // 1. vigil, under MetalLB's controller ServiceAccount.
    let mut vigil = start_vigil(&c, &c.kubeconfigs.controller);
    let data = wait(
        "vigil's certificate in the Secret and the CA bundles",
        || {
            let data = secret_data(&c);
            let ca = data.get("ca.crt")?.clone();
            let bundles = ca_bundles(&c);
            (bundles.len() == 7 && bundles.iter().all(|b| b.as_ref() == Some(&ca))).then_some(data)
        },
    );
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["ca.crt", "ca.key", "tls.crt", "tls.key"],
        "MetalLB's Secret keys"
    );
    assert!(
        String::from_utf8_lossy(&data["ca.key"]).starts_with("-----BEGIN RSA PRIVATE KEY-----"),
        "the CA key in PKCS#1, as MetalLB reads it"
    );
    wait_serving(&c, "vigil", &|| vigil.log_tail(30));
    let from_vigil = c.block_on(round(&client));
    vigil.check_running();
    assert!(
        vigil.terminate(Duration::from_secs(10)).is_some(),
        "vigil stops on SIGTERM"
    );

    // 2. MetalLB's controller on the same Secret.
    let cert_dir: PathBuf = c.dir("metallb-certs");
    std::fs::create_dir_all(&cert_dir).expect("cert dir");
    for key in ["tls.crt", "tls.key"] {
        std::fs::write(cert_dir.join(key), &data[key]).expect("cert file");
    }
    let pod = ControllerConfig::default();
    c.block_on(create_pod(&client, &pod.pod()))
        .expect("controller Pod");
    let mut go = start_metallb_controller(&c, &binaries.controller, &cert_dir);
    wait_serving(&c, "MetalLB", &|| go.log_tail(30));
    let from_metallb = c.block_on(round(&client));
    go.check_running();
    let after = secret_data(&c);
    go.terminate(Duration::from_secs(10));

    eprintln!("vigil:   {from_vigil:#?}\nMetalLB: {from_metallb:#?}");
    // Same verdicts everywhere; the same messages except where a difference is known.
    let verdicts = |r: &BTreeMap<&str, Outcome>| -> Vec<(String, bool)> {
        r.iter().map(|(k, v)| (k.to_string(), v.is_ok())).collect()
    };
    assert_eq!(
        verdicts(&from_vigil),
        verdicts(&from_metallb),
        "verdicts, vigil against MetalLB"
    );
    let without_known = |r: &BTreeMap<&'static str, Outcome>| {
        let mut r = r.clone();
        r.retain(|k, _| !KNOWN_DIFFERENCES.contains(k));
        r
    };
    assert_eq!(
        without_known(&from_vigil),
        without_known(&from_metallb),
        "messages, vigil against MetalLB"
    );
    // The round itself must have meant something.
    assert_eq!(from_vigil["pool valid"], Ok("created".into()));
    assert!(
        from_vigil["pool overlapping"]
            .as_ref()
            .is_err_and(|m| m.contains("overlaps"))
    );
    assert_eq!(from_vigil["bgppeer v1beta1 created"], Ok("created".into()));
    assert_eq!(after["ca.crt"], data["ca.crt"], "MetalLB kept vigil's CA");
    assert_eq!(
        after["tls.crt"], data["tls.crt"],
        "MetalLB kept vigil's serving certificate"
    );
}
