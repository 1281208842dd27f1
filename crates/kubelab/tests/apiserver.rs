//! The real kube-apiserver (vigil-testenv) in a lab, driven with kube-rs: create, watch and
//! delete objects, a watch that lives through an API server restart, RBAC for a token user,
//! and the Node/Pod/Service/EndpointSlice/CRD helpers.
//!
//! Needs root (network namespaces) and vigil-testenv (`VIGIL_GO_BIN_DIR`, else built through
//! `conformance/build.sh testenv`); skips without them unless `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`.

use std::net::IpAddr;
use std::sync::mpsc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, StaticToken, TestEndpoint, TestNode, TestPod, TestService,
    TestSlice, apply_crds, apply_yaml, create_endpoint_slice, create_node, create_pod,
    create_service, ensure_namespace, set_node_condition,
};

/// Bound on anything the API server should do "soon" (watch events, RBAC cache refresh).
const SOON: Duration = Duration::from_secs(30);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "data": { "written-by": "kubelab test" },
    }))
    .unwrap()
}

/// Waits until the watcher reports `want` ("apply NAME" or "delete NAME"); other events are
/// skipped. Panics after `SOON`.
fn expect_event(events: &mpsc::Receiver<String>, want: &str) {
    let deadline = std::time::Instant::now() + SOON;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(event) if event == want => return,
            Ok(_) => {}
            Err(e) => panic!("no watch event {want:?} within {SOON:?}: {e}"),
        }
    }
}

#[test]
fn watch_sees_creates_and_deletes_across_an_api_server_restart() {
    let test = "watch_sees_creates_and_deletes_across_an_api_server_restart";
    let Some(mut lab) = KubeLab::start("klw", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    lab.cp()
        .block_on(ensure_namespace(&client, "kl-watch"))
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kl-watch");

    // One watcher stream for the whole test, on the lab runtime; it reports what it sees.
    let (tx, events) = mpsc::channel();
    let stream_api = cms.clone();
    let watch = lab.cp().runtime().handle().spawn(async move {
        let mut stream = std::pin::pin!(
            watcher::watcher(stream_api, watcher::Config::default()).default_backoff()
        );
        while let Some(event) = stream.next().await {
            let line = match event {
                Ok(Event::Apply(cm) | Event::InitApply(cm)) => format!("apply {}", cm.name_any()),
                Ok(Event::Delete(cm)) => format!("delete {}", cm.name_any()),
                Ok(Event::Init) => "init".to_string(),
                Ok(Event::InitDone) => "init-done".to_string(),
                Err(e) => format!("error {e}"),
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    expect_event(&events, "init-done");

    let pp = PostParams::default();
    lab.cp().block_on(async {
        cms.create(&pp, &config_map("before-restart"))
            .await
            .unwrap();
        cms.create(&pp, &config_map("kept")).await.unwrap();
    });
    expect_event(&events, "apply before-restart");
    expect_event(&events, "apply kept");
    lab.cp()
        .block_on(cms.delete("before-restart", &DeleteParams::default()))
        .unwrap();
    expect_event(&events, "delete before-restart");

    // SIGTERM: a clean stop (exit 0), then the same data directory again.
    let status = lab.cp_mut().restart().unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "vigil-testenv did not exit cleanly on SIGTERM: {status:?}"
    );

    // The same stream sees what is created after the restart, and etcd kept the data.
    lab.cp()
        .block_on(cms.create(&pp, &config_map("after-restart")))
        .unwrap();
    expect_event(&events, "apply after-restart");
    let names: Vec<String> = lab
        .cp()
        .block_on(cms.list(&ListParams::default()))
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(names.contains(&"kept".to_string()), "{names:?}");
    assert!(!names.contains(&"before-restart".to_string()), "{names:?}");
    lab.cp()
        .block_on(cms.delete("after-restart", &DeleteParams::default()))
        .unwrap();
    expect_event(&events, "delete after-restart");

    // SIGKILL: no graceful shutdown; etcd recovers its data and the same stream goes on.
    lab.cp_mut().crash();
    lab.cp_mut().start_again().unwrap();
    lab.cp()
        .block_on(cms.create(&pp, &config_map("after-crash")))
        .unwrap();
    expect_event(&events, "apply after-crash");

    // SIGSTOP: the server holds its connections but answers nothing; SIGCONT: it answers.
    lab.cp_mut().pause();
    let frozen = lab
        .cp()
        .block_on(async { tokio::time::timeout(Duration::from_secs(2), cms.get("kept")).await });
    assert!(frozen.is_err(), "a paused API server answered: {frozen:?}");
    lab.cp_mut().resume();
    lab.cp().block_on(cms.get("kept")).unwrap();

    watch.abort();
}

#[test]
fn rbac_denies_a_token_user_until_a_role_binds_it() {
    let test = "rbac_denies_a_token_user_until_a_role_binds_it";
    let token = "kubelab-speaker-token";
    let config = ControlPlaneConfig {
        tokens: vec![StaticToken::service_account(
            "metallb-system",
            "speaker",
            token,
        )],
        ..ControlPlaneConfig::default()
    };
    let Some(lab) = KubeLab::start("klr", test, config) else {
        return;
    };
    let admin = lab.cp().client().unwrap();
    let speaker = lab.cp().client_with_token(token).unwrap();
    let forbidden = |client: &Client, ns: &str| {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        match lab.cp().block_on(pods.list(&ListParams::default())) {
            Ok(_) => false,
            Err(kube::Error::Api(status)) if status.code == 403 => true,
            Err(e) => panic!("listing pods in {ns}: {e}"),
        }
    };

    lab.cp()
        .block_on(ensure_namespace(&admin, "metallb-system"))
        .unwrap();
    assert!(
        forbidden(&speaker, "metallb-system"),
        "no role yet, but allowed"
    );
    assert!(
        !forbidden(&admin, "metallb-system"),
        "the admin is forbidden"
    );

    let rbac = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: pod-reader
  namespace: metallb-system
rules:
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: speaker-reads-pods
  namespace: metallb-system
subjects:
- kind: ServiceAccount
  name: speaker
  namespace: metallb-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: pod-reader
"#;
    let applied = lab.cp().block_on(apply_yaml(&admin, "rbac", rbac)).unwrap();
    assert_eq!(applied.len(), 2);
    // The authorizer sees new bindings through its informers: allowed within a bound.
    assert!(
        vigil_netlab::poll(SOON, Duration::from_millis(200), || !forbidden(
            &speaker,
            "metallb-system"
        )),
        "still forbidden after the Role and RoleBinding"
    );
    // A Role is namespaced: elsewhere the user is still denied.
    assert!(forbidden(&speaker, "default"));

    // The same user through a kubeconfig file, as a Go program on a lab host would use it.
    let path = lab.cp().write_token_kubeconfig("speaker", token).unwrap();
    let from_file = lab.cp().block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    });
    assert!(!forbidden(&from_file, "metallb-system"));
    assert!(forbidden(&from_file, "default"));
}

#[test]
fn helpers_write_nodes_pods_services_slices_and_crds() {
    let test = "helpers_write_nodes_pods_services_slices_and_crds";
    let Some(lab) = KubeLab::start("klh", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let cp = lab.cp();
    cp.block_on(ensure_namespace(&client, "kl-h")).unwrap();

    // Node: labels on the object; addresses and conditions through nodes/status.
    let node = TestNode::new("n1")
        .label("vigil.invalid/zone", "a")
        .internal_ip(ip("198.18.0.11"))
        .condition("NetworkUnavailable", "False");
    cp.block_on(create_node(&client, &node)).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let stored = cp.block_on(nodes.get("n1")).unwrap();
    assert_eq!(
        stored
            .labels()
            .get("vigil.invalid/zone")
            .map(String::as_str),
        Some("a")
    );
    let status = stored.status.clone().unwrap();
    let addresses = status.addresses.unwrap();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "198.18.0.11"),
        "{addresses:?}"
    );
    let condition = |n: &Node, kind: &str| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == kind))
            .map(|c| c.status.clone())
    };
    assert_eq!(condition(&stored, "Ready").as_deref(), Some("True"));
    // One condition changes; the other stays (merged by type).
    let changed = cp
        .block_on(set_node_condition(&client, "n1", "Ready", "False"))
        .unwrap();
    assert_eq!(condition(&changed, "Ready").as_deref(), Some("False"));
    assert_eq!(
        condition(&changed, "NetworkUnavailable").as_deref(),
        Some("False")
    );

    // Pod: podIP visible once written through pods/status.
    let pod = TestPod::new("kl-h", "speaker-n1")
        .label("app", "speaker")
        .on_node("n1")
        .ip(ip("10.244.1.5"))
        .host_ip(ip("198.18.0.11"));
    cp.block_on(create_pod(&client, &pod)).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kl-h");
    let stored = cp.block_on(pods.get("speaker-n1")).unwrap();
    let status = stored.status.unwrap();
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.1.5"));
    assert_eq!(status.pod_ips.unwrap()[0].ip, "10.244.1.5");
    assert_eq!(status.phase.as_deref(), Some("Running"));

    // Service: the API server allocates its ClusterIP from the service range.
    let svc = cp
        .block_on(create_service(
            &client,
            &TestService::load_balancer("kl-h", "web"),
        ))
        .unwrap();
    let cluster_ip = svc.spec.unwrap().cluster_ip.unwrap();
    assert!(cluster_ip.starts_with("10.0.0."), "{cluster_ip}");

    // A dual-stack Service gets a ClusterIP of each family.
    let dual = cp
        .block_on(create_service(
            &client,
            &TestService::load_balancer("kl-h", "web-dual").dual_stack(),
        ))
        .unwrap();
    let cluster_ips = dual.spec.unwrap().cluster_ips.unwrap();
    assert_eq!(cluster_ips.len(), 2, "{cluster_ips:?}");
    assert!(
        cluster_ips[1].starts_with("2001:db8:ffff::"),
        "{cluster_ips:?}"
    );
    let slice6 = TestSlice::for_service("kl-h", "web-dual")
        .endpoint(TestEndpoint::ready(ip("2001:db8:244::5"), "n1"));
    let stored6 = cp
        .block_on(create_endpoint_slice(&client, &slice6))
        .unwrap();
    assert_eq!(stored6.address_type, "IPv6");

    // EndpointSlice: accepted with a pod address, refused with a loopback one.
    let slice =
        TestSlice::for_service("kl-h", "web").endpoint(TestEndpoint::ready(ip("10.244.1.5"), "n1"));
    cp.block_on(create_endpoint_slice(&client, &slice)).unwrap();
    let mut looped =
        TestSlice::for_service("kl-h", "web").endpoint(TestEndpoint::ready(ip("127.0.0.1"), "n1"));
    looped.name = "web-loopback".to_string();
    match cp.block_on(create_endpoint_slice(&client, &looped)) {
        Err(vigil_kubelab::Error::Kube(kube::Error::Api(status))) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("loopback"), "{}", status.message);
        }
        other => panic!("a loopback endpoint was not refused: {other:?}"),
    }

    // CRDs: two in one file, both Established; then an object of one of them.
    let crds = cp.work_dir().join("crds.yaml");
    std::fs::write(&crds, crd_yaml(&["widget", "gadget"])).unwrap();
    let names = cp.block_on(apply_crds(&client, &[&crds])).unwrap();
    assert_eq!(
        names,
        [
            "widgets.kubelab.vigil.invalid",
            "gadgets.kubelab.vigil.invalid"
        ]
    );
    let widget = "apiVersion: kubelab.vigil.invalid/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: kl-h\nspec:\n  size: 3\n";
    let applied = cp.block_on(apply_yaml(&client, "widget", widget)).unwrap();
    assert_eq!(applied[0].data["spec"]["size"], 3);
}

/// A file of namespaced CRDs `kubelab.vigil.invalid/v1` named after `kinds` (lower case).
fn crd_yaml(kinds: &[&str]) -> String {
    kinds
        .iter()
        .map(|k| {
            let kind = format!("{}{}", k[..1].to_uppercase(), &k[1..]);
            format!(
                "---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {k}s.kubelab.vigil.invalid
spec:
  group: kubelab.vigil.invalid
  scope: Namespaced
  names: {{ plural: {k}s, singular: {k}, kind: {kind}, listKind: {kind}List }}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{ type: integer }}
"
            )
        })
        .collect()
}
