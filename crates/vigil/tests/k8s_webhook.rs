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

mod webhook_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject};
use serde_json::json;
use vigil_kubelab::cluster::{Cluster, ClusterSpec, LabProcess, fresh_log};
use vigil_kubelab::create_pod;
use vigil_kubelab::metallb::{ControllerConfig, METALLB_NAMESPACE};
use webhook_support::*;

/// The control plane's address: the programs run on its host.
const HOST: &str = "198.18.0.2";
/// Cases whose messages differ, with the verdicts alike (asserted). The In selector without
/// values: the shared selector reader (`vigil_lb::selector`) words the first line as older
/// apimachinery did (`key "k": for 'in', 'notin' operators, values set can't be empty`);
/// MetalLB v0.16.2's apimachinery says `values: Invalid value: null: ...`. The rest of the
/// message is MetalLB's.
const KNOWN_DIFFERENCES: &[&str] = &["l2 bad node selector"];

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

#[test]
fn metallb_webhooks_answer_from_vigil_as_from_metallb() {
    const TEST: &str = "metallb_webhooks_answer_from_vigil_as_from_metallb";
    let Some(binaries) = vigil_kubelab::metallb_binaries(TEST) else {
        return;
    };
    let spec = ClusterSpec {
        apiserver_args: APISERVER_ARGS.iter().map(|a| a.to_string()).collect(),
        ..ClusterSpec::nodes(0)
    };
    let Some(c) = Cluster::start(TEST, "wh", &spec) else {
        return;
    };
    let client = c.client().clone();
    for doc in webhook_objects() {
        c.apply("MetalLB's webhook objects", &doc.to_string());
    }
    route_webhook_service(&c, HOST);

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
    // A pool that stays through both phases, for the dry-run checks (the swap test's).
    let held = api(
        &client,
        "v1beta1",
        "IPAddressPool",
        "ipaddresspools",
        METALLB_NAMESPACE,
    );
    let created = c.block_on(create(
        &held,
        pool("held", METALLB_NAMESPACE, &["198.18.4.0/24"]),
    ));
    assert_eq!(created, Ok("created".into()));
    let from_vigil = c.block_on(round(&client));
    let dry_vigil = verdicts(&c, "198.18.5.0/24", "198.18.4.8/30");
    assert_metallb_verdicts(&dry_vigil);
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
    let mut go = start_metallb_webhook(&c, &binaries.controller, &cert_dir);
    wait_serving(&c, "MetalLB", &|| go.log_tail(30));
    let from_metallb = c.block_on(round(&client));
    let dry_metallb = verdicts(&c, "198.18.5.0/24", "198.18.4.8/30");
    assert_metallb_verdicts(&dry_metallb);
    assert_eq!(
        dry_vigil, dry_metallb,
        "dry-run verdicts, vigil against MetalLB"
    );
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
