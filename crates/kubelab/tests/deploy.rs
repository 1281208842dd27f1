//! vigil's manifests (`deploy/kubernetes`, `deploy/helm/vigil`) against the real thing:
//! - our CRDs against MetalLB v0.16.2's (read from the Go module cache), field for field;
//! - the chart against the kustomize base (same CRD files, same RBAC rules);
//! - `kubectl kustomize` of each overlay and `helm template` applied with a server-side dry
//!   run to a real kube-apiserver (vigil-testenv);
//! - sample pools and advertisements accepted or rejected by our CRDs exactly as by MetalLB's;
//! - the RBAC: every access in `deploy::ACCESSES` allowed by a SubjectAccessReview, every verb
//!   of every rule used by some access, and every rule needed (without it some access is
//!   denied).
//!
//! `vigil speaker` and `vigil controller` running with exactly these permissions is
//! `crates/vigil/tests/k8s_rbac.rs`. Tests needing kubectl, helm, the module cache or
//! vigil-testenv skip without them, and fail instead under `VIGIL_REQUIRE_GO=1`; the API server
//! tests need root (`VIGIL_REQUIRE_ROOT=1` makes that a failure too).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use vigil_kubelab::deploy::{
    self, ACCESSES, Access, NAMESPACE, Program, ProgramRules, Rule, Scope,
};
use vigil_kubelab::metallb::{self, MemberlistKey};
use vigil_kubelab::{
    ControlPlaneConfig, KubeLab, apply_crds, apply_yaml, documents, ensure_namespace,
    wait_crd_established,
};

/// The four kinds vigil ships CRDs for (MetalLB's file names).
const OUR_CRDS: &[&str] = &[
    "ipaddresspools",
    "l2advertisements",
    "servicel2statuses",
    "configurationstates",
];

fn our_crd_file(plural: &str) -> PathBuf {
    deploy::deploy_dir().join(format!("kubernetes/base/crds/{plural}.yaml"))
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut docs = documents(&path.display().to_string(), &text).expect("YAML");
    assert_eq!(docs.len(), 1, "{}: one document", path.display());
    docs.remove(0)
}

/// MetalLB's CRD directory in the module cache, or `None` (skip; a failure under
/// `VIGIL_REQUIRE_GO=1`).
fn metallb_crd_dir(test: &str) -> Option<PathBuf> {
    match metallb::metallb_module_dir() {
        Ok(dir) => Some(dir.join("config/crd/bases")),
        Err(e) => {
            assert!(
                std::env::var("VIGIL_REQUIRE_GO").as_deref() != Ok("1"),
                "{test}: VIGIL_REQUIRE_GO=1 but {e}"
            );
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

/// Every difference between two schemas (descriptions aside: ours are in our words), as
/// `path: what`. `theirs` is MetalLB's: a key it has that we lack is reported as lacking.
fn schema_differences(ours: &Value, theirs: &Value, path: &str, out: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, their) in b {
                if key == "description" {
                    continue;
                }
                match a.get(key) {
                    None => out.push(format!("{path}.{key}: we lack it (MetalLB: {their})")),
                    Some(our) => schema_differences(our, their, &format!("{path}.{key}"), out),
                }
            }
            for key in a.keys() {
                if key != "description" && !b.contains_key(key) {
                    out.push(format!("{path}.{key}: MetalLB has no such key"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            // Lists of names (required, enum) are sets; lists of objects go in order.
            if a.iter().all(Value::is_string) && b.iter().all(Value::is_string) {
                let set = |l: &Vec<Value>| l.iter().map(Value::to_string).collect::<BTreeSet<_>>();
                if set(a) != set(b) {
                    out.push(format!("{path}: ours {ours}, MetalLB's {theirs}"));
                }
            } else {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    schema_differences(x, y, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ if ours == theirs => {}
        _ => out.push(format!("{path}: ours {ours}, MetalLB's {theirs}")),
    }
}

#[test]
fn our_crds_match_metallbs_field_for_field() {
    let test = "our_crds_match_metallbs_field_for_field";
    let Some(dir) = metallb_crd_dir(test) else {
        return;
    };
    let mut differences = Vec::new();
    let mut fields = 0;
    for plural in OUR_CRDS {
        let ours = read_yaml(&our_crd_file(plural));
        let theirs = read_yaml(&dir.join(format!("metallb.io_{plural}.yaml")));
        // Everything under spec: group, names, scope, versions with their schemas, printer
        // columns and subresources.
        schema_differences(&ours["spec"], &theirs["spec"], plural, &mut differences);
        fields += count_properties(&theirs["spec"]);
    }
    assert!(
        differences.is_empty(),
        "our CRDs differ from MetalLB {}'s:\n{}",
        metallb::metallb_version(),
        differences.join("\n")
    );
    assert!(fields > 50, "MetalLB's CRDs have only {fields} properties?");
    println!(
        "our 4 CRDs match MetalLB {}'s: {fields} schema properties compared",
        metallb::metallb_version()
    );
}

fn count_properties(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            m.get("properties")
                .and_then(Value::as_object)
                .map_or(0, serde_json::Map::len)
                + m.values().map(count_properties).sum::<usize>()
        }
        Value::Array(l) => l.iter().map(count_properties).sum(),
        _ => 0,
    }
}

/// The RBAC rules of each program in rendered manifests.
fn rules_of(yaml: &str) -> BTreeMap<Program, ProgramRules> {
    Program::ALL
        .iter()
        .map(|&p| {
            (
                p,
                deploy::program_rules(yaml, p).expect("the program's roles"),
            )
        })
        .collect()
}

#[test]
fn the_chart_has_the_kustomize_bases_crds_and_rbac() {
    let test = "the_chart_has_the_kustomize_bases_crds_and_rbac";
    for plural in OUR_CRDS {
        let base = std::fs::read(our_crd_file(plural)).expect("base CRD");
        let chart = std::fs::read(deploy::chart_dir().join(format!("crds/{plural}.yaml")))
            .expect("chart CRD");
        assert!(
            base == chart,
            "deploy/helm/vigil/crds/{plural}.yaml differs from the base's"
        );
    }
    let (Some(kubectl), Some(helm)) = (deploy::kubectl_binary(test), deploy::helm_binary(test))
    else {
        return;
    };
    // The image tag and the chart's versions are the workspace's version.
    let version = env!("CARGO_PKG_VERSION");
    let chart_meta = read_yaml(&deploy::chart_dir().join("Chart.yaml"));
    assert_eq!(chart_meta["appVersion"], version, "Chart.yaml appVersion");
    assert_eq!(chart_meta["version"], version, "Chart.yaml version");
    let kustomization = read_yaml(&deploy::deploy_dir().join("kubernetes/base/kustomization.yaml"));
    assert_eq!(
        kustomization["images"][0]["newTag"], version,
        "the base's image tag"
    );
    let lint = deploy::helm_lint(&helm).expect("helm lint --strict");
    assert!(lint.contains("0 chart(s) failed"), "helm lint:\n{lint}");
    let fresh = deploy::kustomize(&kubectl, "fresh-install").expect("kustomize fresh-install");
    let chart = deploy::helm_template(&helm, &[]).expect("helm template");
    assert_eq!(
        rules_of(&chart),
        rules_of(&fresh),
        "the chart's RBAC rules are the base's"
    );
    // The replace-metallb overlay changes only the names rules are limited to: MetalLB's
    // Secret and Deployment.
    let replace =
        deploy::kustomize(&kubectl, "replace-metallb").expect("kustomize replace-metallb");
    let mut expected = rules_of(&fresh);
    for rules in expected.values_mut() {
        for rule in rules.cluster.iter_mut().chain(rules.namespaced.iter_mut()) {
            for name in &mut rule.names {
                *name = match name.as_str() {
                    "vigil-memberlist" => "memberlist".into(),
                    "vigil-controller" => "controller".into(),
                    other => panic!("a rule limited to {other}"),
                };
            }
        }
    }
    assert_eq!(rules_of(&replace), expected, "replace-metallb's RBAC rules");
    // The optional ServiceMonitors are off by default and, as MetalLB's, scrape both programs'
    // metrics ports over https with the scraper's token.
    let kinds = |yaml: &str| -> Vec<String> {
        documents("helm", yaml)
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert!(!kinds(&chart).contains(&"ServiceMonitor".to_string()));
    let monitored = deploy::helm_template(&helm, &["--set", "serviceMonitor.enabled=true"])
        .expect("helm template with the ServiceMonitor");
    let docs = documents("helm", &monitored).unwrap();
    for component in ["speaker", "controller"] {
        let monitor = docs
            .iter()
            .find(|d| {
                d["kind"] == "ServiceMonitor"
                    && d["metadata"]["name"] == format!("vigil-{component}").as_str()
            })
            .unwrap_or_else(|| panic!("the {component}'s ServiceMonitor"));
        let endpoint = &monitor["spec"]["endpoints"][0];
        assert_eq!(endpoint["port"], "metricshttps", "{component}");
        assert_eq!(endpoint["scheme"], "https", "{component}");
        assert_eq!(
            endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "{component}"
        );
    }
    let service = docs
        .iter()
        .find(|d| d["kind"] == "Service" && d["metadata"]["name"] == "vigil-speaker-metrics")
        .expect("the metrics Service");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/component"],
        "speaker"
    );
}

/// Checks of the rendered speaker DaemonSet that tie the manifests to the speaker: the gossip
/// label selector selects the DaemonSet's own Pods, the key is mounted where the speaker reads
/// it, and it adds exactly one capability.
fn check_speaker_daemonset(yaml: &str, what: &str) {
    let docs = deploy::documents_of_kinds(yaml, &["DaemonSet"]).unwrap();
    assert_eq!(docs.len(), 1, "{what}: one DaemonSet");
    let ds = &docs[0];
    let pod = &ds["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let env = |name: &str| -> String {
        container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("{what}: env {name}"))
            .to_string()
    };
    for selector in env("METALLB_ML_LABELS").split(',') {
        let (k, v) = selector.split_once('=').expect("key=value");
        assert_eq!(
            pod["metadata"]["labels"][k], v,
            "{what}: METALLB_ML_LABELS selects the speaker Pods"
        );
        assert_eq!(
            ds["spec"]["selector"]["matchLabels"][k], v,
            "{what}: and the DaemonSet's selector"
        );
    }
    let key_path = env("METALLB_ML_SECRET_KEY_PATH");
    let mounts = container["volumeMounts"].as_array().unwrap();
    let key_mount = mounts
        .iter()
        .find(|m| m["mountPath"] == key_path.as_str())
        .expect("key mount");
    let volume = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == key_mount["name"])
        .expect("key volume");
    assert!(
        volume["secret"]["secretName"].is_string(),
        "{what}: the key is a Secret"
    );
    assert!(
        mounts.iter().any(|m| m["mountPath"] == "/etc/metallb"),
        "{what}: excludel2 at /etc/metallb"
    );
    // MetalLB v0.16's memberlist tuning, where MetalLB mounts it, optional as in MetalLB.
    let tuning = mounts
        .iter()
        .find(|m| m["mountPath"] == "/etc/metallb/memberlist")
        .unwrap_or_else(|| panic!("{what}: memberlist config at /etc/metallb/memberlist"));
    let volume = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == tuning["name"])
        .expect("memberlist config volume");
    assert_eq!(
        volume["configMap"],
        json!({"name": "metallb-memberlist-config", "optional": true}),
        "{what}: MetalLB's optional ConfigMap"
    );
    assert_eq!(pod["spec"]["hostNetwork"], true, "{what}: host network");
    let caps = &container["securityContext"]["capabilities"];
    assert_eq!(caps["add"], json!(["NET_RAW"]), "{what}: NET_RAW only");
    assert_eq!(
        caps["drop"],
        json!(["ALL"]),
        "{what}: everything else dropped"
    );
    // No gossip key anywhere: no Secret with data in the manifests.
    let secrets = deploy::documents_of_kinds(yaml, &["Secret"]).unwrap();
    assert!(
        secrets.is_empty(),
        "{what}: no Secret (the controller makes the key)"
    );
}

#[test]
fn manifests_and_chart_are_accepted_by_the_api_server() {
    let test = "manifests_and_chart_are_accepted_by_the_api_server";
    let (Some(kubectl), Some(helm)) = (deploy::kubectl_binary(test), deploy::helm_binary(test))
    else {
        return;
    };
    let Some(lab) = KubeLab::start("dp-dry", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().expect("admin client");
    let fresh = deploy::kustomize(&kubectl, "fresh-install").expect("kustomize");
    let replace = deploy::kustomize(&kubectl, "replace-metallb").expect("kustomize");
    let chart = deploy::helm_template(&helm, &[]).expect("helm template");
    check_speaker_daemonset(&fresh, "fresh-install");
    check_speaker_daemonset(&replace, "replace-metallb");
    check_speaker_daemonset(&chart, "helm");

    // A dry run does not create the namespace its objects go into.
    lab.cp()
        .block_on(ensure_namespace(&client, NAMESPACE))
        .expect("namespace");
    for (what, yaml) in [("fresh-install", &fresh), ("helm template", &chart)] {
        let report = deploy::dry_run_apply(lab.cp(), &kubectl, yaml)
            .unwrap_or_else(|e| panic!("{what}: server-side dry run refused: {e}"));
        let objects = documents(what, yaml).unwrap().len();
        assert_eq!(
            report.lines().count(),
            objects,
            "{what}: one line per object:\n{report}"
        );
        assert!(
            report.lines().all(|l| l.ends_with("(server dry run)")),
            "{what}:\n{report}"
        );
        println!("{what}: {objects} objects accepted (server-side dry run)");
    }

    // replace-metallb over an installed MetalLB: its CRDs, RBAC, Secret, and its speaker
    // DaemonSet and controller Deployment as its release manifest has them.
    let key = MemberlistKey::random().expect("key");
    lab.cp().block_on(async {
        metallb::install_metallb(&client, NAMESPACE, &key)
            .await
            .expect("MetalLB's CRDs");
        metallb::install_metallb_rbac(&client)
            .await
            .expect("MetalLB's RBAC");
    });
    let native = metallb::metallb_module_dir()
        .expect("MetalLB module")
        .join("config/manifests/metallb-native.yaml");
    let native = std::fs::read_to_string(&native).expect("metallb-native.yaml");
    let workloads: Vec<Value> =
        deploy::documents_of_kinds(&native, &["DaemonSet", "Deployment", "ConfigMap"]).unwrap();
    lab.cp().block_on(async {
        for doc in &workloads {
            apply_yaml(&client, "MetalLB's workloads", &doc.to_string())
                .await
                .expect("MetalLB's DaemonSet/Deployment");
        }
    });
    // The documented swap: MetalLB's DaemonSet and Deployment deleted with their Pods orphaned
    // (so no node loses its speaker, and the memberlist Secret, owned by the Deployment, is
    // kept), then ours applied under the same names: the new DaemonSet adopts the running Pods
    // (same selector) and replaces them one by one. No garbage collector runs here, so the
    // test removes the `orphan` finalizer as it would, once the (here: no) Pods are orphaned.
    lab.cp().block_on(async {
        let orphan = DeleteParams {
            propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
            ..DeleteParams::default()
        };
        let no_finalizers = json!({ "metadata": { "finalizers": null } });
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
        daemonsets
            .delete("speaker", &orphan)
            .await
            .expect("delete MetalLB's DaemonSet, orphaning");
        daemonsets
            .patch(
                "speaker",
                &PatchParams::default(),
                &Patch::Merge(&no_finalizers),
            )
            .await
            .expect("finalizer");
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
        deployments
            .delete("controller", &orphan)
            .await
            .expect("delete MetalLB's Deployment, orphaning");
        deployments
            .patch(
                "controller",
                &PatchParams::default(),
                &Patch::Merge(&no_finalizers),
            )
            .await
            .expect("finalizer");
        let end = Instant::now() + Duration::from_secs(30);
        while daemonsets.get_opt("speaker").await.expect("get").is_some()
            || deployments
                .get_opt("controller")
                .await
                .expect("get")
                .is_some()
        {
            assert!(
                Instant::now() < end,
                "MetalLB's DaemonSet/Deployment not gone"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let report = deploy::dry_run_apply(lab.cp(), &kubectl, &replace)
        .unwrap_or_else(|e| panic!("replace-metallb: server-side dry run refused: {e}"));
    let objects = documents("replace-metallb", &replace).unwrap().len();
    assert_eq!(
        report.lines().count(),
        objects,
        "replace-metallb:\n{report}"
    );
    deploy::kubectl_in_lab(
        lab.cp(),
        &kubectl,
        &["apply", "--server-side", "-f", "-"],
        Some(&replace),
    )
    .expect("replace-metallb applied for real");
    let (ds, secret_kept) = lab.cp().block_on(async {
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
        let secrets: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(client.clone(), NAMESPACE);
        (
            daemonsets.get("speaker").await.expect("DaemonSet speaker"),
            secrets
                .get_opt(metallb::MEMBERLIST_SECRET)
                .await
                .expect("get")
                .is_some(),
        )
    });
    assert!(secret_kept, "MetalLB's memberlist Secret is kept");
    let spec = ds.spec.expect("spec");
    assert_eq!(
        spec.selector.match_labels,
        Some(BTreeMap::from([
            ("app".into(), "metallb".into()),
            ("component".into(), "speaker".into())
        ]))
    );
    let pod = spec.template.spec.expect("pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("speaker"));
    let container = &pod.containers[0];
    assert!(
        container
            .image
            .as_deref()
            .is_some_and(|i| i.starts_with("ghcr.io/vigil-lb/vigil:")),
        "{:?}",
        container.image
    );
    let probe = container
        .liveness_probe
        .as_ref()
        .and_then(|p| p.http_get.as_ref())
        .expect("probe");
    // vigil's probe is MetalLB's own: the health-probe port on loopback.
    assert_eq!(probe.host.as_deref(), Some("127.0.0.1"), "the probe's host");
    assert_eq!(
        probe.port,
        k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(17472),
        "the probe's port"
    );
    println!(
        "replace-metallb: {objects} objects accepted (server-side dry run) and applied over MetalLB {}: DaemonSet speaker runs vigil",
        metallb::metallb_version()
    );
}

#[test]
fn helm_installs_and_uninstalls_the_chart() {
    let test = "helm_installs_and_uninstalls_the_chart";
    let Some(helm) = deploy::helm_binary(test) else {
        return;
    };
    let Some(lab) = KubeLab::start("dp-helm", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().expect("admin client");
    let chart = deploy::chart_dir().display().to_string();
    let args = [
        "install",
        "vigil",
        chart.as_str(),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
    ];
    let out = deploy::helm_in_lab(lab.cp(), &helm, &args).expect("helm install");
    assert!(out.contains("STATUS: deployed"), "helm install:\n{out}");
    let (ds, crds) = lab.cp().block_on(async {
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut names = Vec::new();
        for plural in OUR_CRDS {
            let name = format!("{plural}.metallb.io");
            wait_crd_established(&client, &name, Duration::from_secs(30))
                .await
                .expect("CRD installed by helm");
            names.push(
                crds.get(&name)
                    .await
                    .expect("CRD")
                    .metadata
                    .name
                    .unwrap_or_default(),
            );
        }
        (
            daemonsets.get_opt("vigil-speaker").await.expect("get"),
            names,
        )
    });
    assert!(ds.is_some(), "the speaker DaemonSet was installed");
    assert_eq!(crds.len(), OUR_CRDS.len());
    let out = deploy::helm_in_lab(
        lab.cp(),
        &helm,
        &["uninstall", "vigil", "--namespace", NAMESPACE],
    )
    .expect("helm uninstall");
    assert!(out.contains("uninstalled"), "helm uninstall:\n{out}");
    let gone = lab.cp().block_on(async {
        let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
        daemonsets
            .get_opt("vigil-speaker")
            .await
            .expect("get")
            .is_none()
    });
    assert!(gone, "helm uninstall removed the DaemonSet");
    println!(
        "helm install and uninstall of deploy/helm/vigil: deployed, CRDs established, removed"
    );
}

/// A sample object and what MetalLB's schema says of it.
struct Sample {
    name: &'static str,
    kind: &'static str,
    plural: &'static str,
    body: Value,
    accepted: bool,
}

fn samples() -> Vec<Sample> {
    let pool = |name: &'static str, spec: Value, accepted| Sample {
        name,
        kind: "IPAddressPool",
        plural: "ipaddresspools",
        body: json!({ "spec": spec }),
        accepted,
    };
    let ad = |name: &'static str, spec: Value, accepted| Sample {
        name,
        kind: "L2Advertisement",
        plural: "l2advertisements",
        body: json!({ "spec": spec }),
        accepted,
    };
    vec![
        pool(
            "pool-range",
            json!({ "addresses": ["198.18.0.200-198.18.0.209"] }),
            true,
        ),
        pool(
            "pool-full",
            json!({ "addresses": ["198.18.0.0/24", "2001:db8::/120"], "autoAssign": false, "avoidBuggyIPs": true,
            "serviceAllocation": { "priority": 5, "namespaces": ["a"], "namespaceSelectors": [{ "matchLabels": { "team": "x" } }],
                "serviceSelectors": [{ "matchExpressions": [{ "key": "tier", "operator": "In", "values": ["web"] }] }] } }),
            true,
        ),
        Sample {
            name: "pool-no-spec",
            kind: "IPAddressPool",
            plural: "ipaddresspools",
            body: json!({}),
            accepted: false,
        },
        pool("pool-no-addresses", json!({ "autoAssign": true }), false),
        pool(
            "pool-addresses-not-a-list",
            json!({ "addresses": "198.18.0.0/24" }),
            false,
        ),
        pool(
            "pool-auto-assign-text",
            json!({ "addresses": ["198.18.0.0/24"], "autoAssign": "yes" }),
            false,
        ),
        pool(
            "pool-priority-text",
            json!({ "addresses": ["198.18.0.0/24"], "serviceAllocation": { "priority": "high" } }),
            false,
        ),
        pool(
            "pool-expression-no-operator",
            json!({ "addresses": ["198.18.0.0/24"],
            "serviceAllocation": { "serviceSelectors": [{ "matchExpressions": [{ "key": "tier" }] }] } }),
            false,
        ),
        pool(
            "pool-unknown-field",
            json!({ "addresses": ["198.18.0.0/24"], "color": "blue" }),
            true,
        ),
        Sample {
            name: "ad-no-spec",
            kind: "L2Advertisement",
            plural: "l2advertisements",
            body: json!({}),
            accepted: true,
        },
        ad(
            "ad-full",
            json!({ "ipAddressPools": ["a"], "ipAddressPoolSelectors": [{ "matchLabels": { "x": "y" } }],
            "nodeSelectors": [{ "matchLabels": { "kubernetes.io/hostname": "n1" } }], "interfaces": ["eth0"],
            "serviceSelectors": [{ "matchLabels": { "app": "web" } }],
            "preferredNodeSelectors": [{ "weight": 50, "preference": { "matchLabels": { "zone": "a" } } }] }),
            true,
        ),
        ad(
            "ad-weight-0",
            json!({ "preferredNodeSelectors": [{ "weight": 0, "preference": {} }] }),
            false,
        ),
        ad(
            "ad-weight-101",
            json!({ "preferredNodeSelectors": [{ "weight": 101, "preference": {} }] }),
            false,
        ),
        ad(
            "ad-preference-missing",
            json!({ "preferredNodeSelectors": [{ "weight": 10 }] }),
            false,
        ),
        ad(
            "ad-interfaces-not-strings",
            json!({ "interfaces": [1, 2] }),
            false,
        ),
        ad(
            "ad-node-selector-labels-not-strings",
            json!({ "nodeSelectors": [{ "matchLabels": { "a": 1 } }] }),
            false,
        ),
    ]
}

/// What the API server did with each sample: `Some(stored spec)` when accepted (defaults
/// applied, unknown fields pruned), `None` when refused; plus the immutability of a
/// ServiceL2Status's node and the enums of a ConfigurationState.
async fn outcomes(client: &kube::Client, ns: &str) -> BTreeMap<String, Option<Value>> {
    let mut out = BTreeMap::new();
    for s in samples() {
        let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", s.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, s.plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
        let mut body = s.body.clone();
        body["apiVersion"] = json!("metallb.io/v1beta1");
        body["kind"] = json!(s.kind);
        body["metadata"] = json!({ "name": s.name });
        let object: DynamicObject = serde_json::from_value(body).unwrap();
        let stored = match api.create(&PostParams::default(), &object).await {
            Ok(o) => Some(o.data.get("spec").cloned().unwrap_or(Value::Null)),
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => None,
            Err(e) => panic!("{}: {e}", s.name),
        };
        assert_eq!(
            stored.is_some(),
            s.accepted,
            "{}: accepted as MetalLB's schema says? {stored:?}",
            s.name
        );
        out.insert(s.name.to_string(), stored);
        let _ = api.delete(s.name, &DeleteParams::default()).await;
    }
    // ServiceL2Status: its node is fixed once written.
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ServiceL2Status");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "servicel2statuses");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "ServiceL2Status", "metadata": { "name": "l2s" } })).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .expect("a ServiceL2Status");
    let set_node = |node: &str| {
        json!({ "status": { "node": node, "serviceName": "web", "serviceNamespace": "app",
        "interfaces": [{ "name": "eth0" }] } })
    };
    let first = api
        .patch_status(
            "l2s",
            &PatchParams::default(),
            &Patch::Merge(&set_node("n1")),
        )
        .await;
    assert!(first.is_ok(), "the first status write: {first:?}");
    let moved = api
        .patch_status(
            "l2s",
            &PatchParams::default(),
            &Patch::Merge(&set_node("n2")),
        )
        .await;
    out.insert(
        "l2status-node-moved".into(),
        moved.ok().map(|o| o.data["status"].clone()),
    );
    let _ = api.delete("l2s", &DeleteParams::default()).await;
    // ConfigurationState: result and condition status are enums.
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "ConfigurationState");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "configurationstates");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "metallb.io/v1beta1", "kind": "ConfigurationState", "metadata": { "name": "cs" } })).unwrap();
    api.create(&PostParams::default(), &object)
        .await
        .expect("a ConfigurationState");
    for (name, status) in [
        (
            "state-valid",
            json!({ "result": "Valid", "conditions": [{ "type": "Ready", "status": "True", "reason": "Loaded",
            "message": "ok", "lastTransitionTime": "2026-12-02T00:00:00Z" }] }),
        ),
        ("state-result-bogus", json!({ "result": "Bogus" })),
        (
            "state-condition-maybe",
            json!({ "conditions": [{ "type": "Ready", "status": "Maybe", "reason": "X",
            "message": "", "lastTransitionTime": "2026-12-02T00:00:00Z" }] }),
        ),
        (
            "state-reason-empty",
            json!({ "conditions": [{ "type": "Ready", "status": "True", "reason": "",
            "message": "", "lastTransitionTime": "2026-12-02T00:00:00Z" }] }),
        ),
    ] {
        let r = api
            .patch_status(
                "cs",
                &PatchParams::default(),
                &Patch::Merge(&json!({ "status": status })),
            )
            .await;
        out.insert(name.into(), r.ok().map(|o| o.data["status"].clone()));
    }
    let _ = api.delete("cs", &DeleteParams::default()).await;
    out
}

#[test]
fn our_crds_accept_and_reject_what_metallbs_do() {
    let test = "our_crds_accept_and_reject_what_metallbs_do";
    let Some(dir) = metallb_crd_dir(test) else {
        return;
    };
    let Some(lab) = KubeLab::start("dp-crd", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().expect("admin client");
    let ours: Vec<PathBuf> = OUR_CRDS.iter().map(|p| our_crd_file(p)).collect();
    let theirs: Vec<PathBuf> = OUR_CRDS
        .iter()
        .map(|p| dir.join(format!("metallb.io_{p}.yaml")))
        .collect();
    let (with_ours, with_theirs) = lab.cp().block_on(async {
        ensure_namespace(&client, "crd-samples")
            .await
            .expect("namespace");
        let paths: Vec<&Path> = ours.iter().map(PathBuf::as_path).collect();
        apply_crds(&client, &paths).await.expect("our CRDs");
        let with_ours = outcomes(&client, "crd-samples").await;
        // Our CRDs deleted (and gone) before MetalLB's are created, so no answer below can
        // come from ours.
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for plural in OUR_CRDS {
            crds.delete(&format!("{plural}.metallb.io"), &DeleteParams::default())
                .await
                .expect("delete our CRD");
        }
        let end = Instant::now() + Duration::from_secs(60);
        for plural in OUR_CRDS {
            while crds
                .get_opt(&format!("{plural}.metallb.io"))
                .await
                .expect("get CRD")
                .is_some()
            {
                assert!(
                    Instant::now() < end,
                    "our CRD {plural} was not deleted in time"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let paths: Vec<&Path> = theirs.iter().map(PathBuf::as_path).collect();
        apply_crds(&client, &paths).await.expect("MetalLB's CRDs");
        for plural in OUR_CRDS {
            wait_crd_established(
                &client,
                &format!("{plural}.metallb.io"),
                Duration::from_secs(30),
            )
            .await
            .expect("established");
        }
        let with_theirs = outcomes(&client, "crd-samples").await;
        (with_ours, with_theirs)
    });
    for (name, ours) in &with_ours {
        assert_eq!(
            Some(ours),
            with_theirs.get(name),
            "{name}: ours vs MetalLB's CRDs"
        );
    }
    // Defaults and pruning are the schema's too.
    let range = with_ours["pool-range"].as_ref().unwrap();
    assert_eq!(
        (range["autoAssign"].clone(), range["avoidBuggyIPs"].clone()),
        (json!(true), json!(false))
    );
    assert!(
        with_ours["pool-unknown-field"]
            .as_ref()
            .unwrap()
            .get("color")
            .is_none(),
        "unknown fields are pruned"
    );
    assert!(
        with_ours["l2status-node-moved"].is_none(),
        "a ServiceL2Status's node is immutable"
    );
    assert!(with_ours["state-valid"].is_some());
    for refused in [
        "state-result-bogus",
        "state-condition-maybe",
        "state-reason-empty",
    ] {
        assert!(with_ours[refused].is_none(), "{refused} is refused");
    }
    let accepted = with_ours.values().filter(|v| v.is_some()).count();
    println!(
        "{} samples: {accepted} accepted, {} refused, identically by our CRDs and MetalLB {}'s",
        with_ours.len(),
        with_ours.len() - accepted,
        metallb::metallb_version()
    );
}

/// Polls `allowed` for every access until each answer is `want(access)`; the accesses that
/// never got there (after `limit`: RBAC changes reach the authorizer through an informer).
async fn await_answers(
    client: &kube::Client,
    user: &vigil_kubelab::StaticToken,
    accesses: &[Access],
    want: impl Fn(&Access) -> bool,
    limit: Duration,
) -> Vec<(Access, bool)> {
    let end = Instant::now() + limit;
    loop {
        let mut wrong = Vec::new();
        for a in accesses {
            let got = deploy::allowed(client, user, a)
                .await
                .expect("SubjectAccessReview");
            if got != want(a) {
                wrong.push((*a, got));
            }
        }
        if wrong.is_empty() || Instant::now() > end {
            return wrong;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn describe(a: &Access) -> String {
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let group = if a.group.is_empty() { "core" } else { a.group };
    let scope = match a.scope {
        Scope::Cluster => "cluster-wide",
        Scope::AnyNamespace => "any namespace",
        Scope::Own => "own namespace",
    };
    format!(
        "{} {group}/{resource}{} ({scope}): {}",
        a.verb,
        a.name.map(|n| format!(" {n}")).unwrap_or_default(),
        a.why
    )
}

#[test]
fn each_rbac_rule_allows_what_the_programs_do_and_none_is_dead() {
    let test = "each_rbac_rule_allows_what_the_programs_do_and_none_is_dead";
    let Some(kubectl) = deploy::kubectl_binary(test) else {
        return;
    };
    let Some(lab) = KubeLab::start("dp-rbac", test, ControlPlaneConfig::default()) else {
        return;
    };
    let client = lab.cp().client().expect("admin client");
    let fresh = deploy::kustomize(&kubectl, "fresh-install").expect("kustomize");
    let rules = rules_of(&fresh);

    // Every verb of every rule is some access's (pure: RBAC's matching, on the table).
    for (program, r) in &rules {
        let mine: Vec<&Access> = ACCESSES.iter().filter(|a| a.program == *program).collect();
        for (origin, list) in [("ClusterRole", &r.cluster), ("Role", &r.namespaced)] {
            for rule in list {
                for verb in &rule.verbs {
                    for resource in &rule.resources {
                        let used = mine.iter().any(|a| {
                            let res = if a.subresource.is_empty() {
                                a.resource.to_string()
                            } else {
                                format!("{}/{}", a.resource, a.subresource)
                            };
                            a.verb == verb
                                && &res == resource
                                && rule.groups.iter().any(|g| g == a.group)
                                && ((origin == "Role") == (a.scope == Scope::Own))
                        });
                        assert!(
                            used,
                            "{program:?} {origin} grants {verb} {resource} ({:?}) but no access in deploy::ACCESSES needs it",
                            rule.groups
                        );
                    }
                }
            }
        }
    }

    lab.cp().block_on(async {
        ensure_namespace(&client, NAMESPACE)
            .await
            .expect("namespace");
        let applied = deploy::apply_rbac(&client, &fresh).await.expect("our RBAC");
        assert_eq!(
            applied.len(),
            10,
            "2 ServiceAccounts, 4 roles, 4 bindings: {applied:?}"
        );

        // The table: each access, allowed for its program, and which rule allows it.
        println!("{:<11} {:<20} access", "program", "rule");
        for program in Program::ALL {
            let user = program.token();
            let mine: Vec<Access> = ACCESSES
                .iter()
                .filter(|a| a.program == program)
                .copied()
                .collect();
            let denied =
                await_answers(&client, &user, &mine, |_| true, Duration::from_secs(20)).await;
            assert!(
                denied.is_empty(),
                "{program:?}: denied by our RBAC: {:#?}",
                denied.iter().map(|(a, _)| describe(a)).collect::<Vec<_>>()
            );
            let r = &rules[&program];
            for a in &mine {
                let (cluster_role, role) = program.roles();
                let rule = r
                    .cluster
                    .iter()
                    .position(|x| x.grants(a))
                    .map(|i| format!("{cluster_role}#{i}"))
                    .or_else(|| {
                        r.namespaced
                            .iter()
                            .position(|x| x.grants(a))
                            .map(|i| format!("{role}#{i}"))
                    })
                    .expect("some rule grants it");
                println!("{:<11} {rule:<20} {}", format!("{program:?}"), describe(a));
            }
            // The other program's accesses it has no business doing are denied (the roles are
            // not shared by accident).
            let others: Vec<Access> = ACCESSES
                .iter()
                .filter(|a| a.program != program && !r.grant(a))
                .copied()
                .collect();
            let wrongly =
                await_answers(&client, &user, &others, |_| false, Duration::from_secs(5)).await;
            assert!(
                wrongly.is_empty(),
                "{program:?} may do what only the other program should: {wrongly:?}"
            );
        }

        // Each rule needed: a variant without it, bound to a probe account, denies some access.
        let mut variants = Vec::new();
        for program in Program::ALL {
            let r = &rules[&program];
            let count = r.cluster.len() + r.namespaced.len();
            for i in 0..count {
                let mut without = r.clone();
                let removed: Rule = if i < r.cluster.len() {
                    without.cluster.remove(i)
                } else {
                    without.namespaced.remove(i - r.cluster.len())
                };
                let account = format!("probe-{}-{i}", program.account());
                deploy::apply_rules_for(&client, &account, &without)
                    .await
                    .expect("variant RBAC");
                variants.push((program, account, removed, without));
            }
        }
        for (program, account, removed, without) in &variants {
            let user = vigil_kubelab::StaticToken::service_account(NAMESPACE, account, "unused");
            let mine: Vec<Access> = ACCESSES
                .iter()
                .filter(|a| a.program == *program)
                .copied()
                .collect();
            let lost: Vec<&Access> = mine.iter().filter(|a| !without.grant(a)).collect();
            assert!(
                !lost.is_empty(),
                "{program:?}: rule {removed:?} grants nothing the others do not: it is dead"
            );
            // Every access the remaining rules grant comes through (so the variant is in the
            // authorizer's cache), and every one only the removed rule granted is denied.
            let wrong = await_answers(
                &client,
                &user,
                &mine,
                |a| without.grant(a),
                Duration::from_secs(20),
            )
            .await;
            assert!(
                wrong.is_empty(),
                "{program:?} without {removed:?}: unexpected answers {:#?}",
                wrong
                    .iter()
                    .map(|(a, got)| (describe(a), got))
                    .collect::<Vec<_>>()
            );
            println!(
                "{program:?} without {:?} {:?}: {} access(es) denied, e.g. {}",
                removed.resources,
                removed.verbs,
                lost.len(),
                describe(lost[0])
            );
        }
        println!(
            "{} accesses allowed; {} rules, each needed",
            ACCESSES.len(),
            variants.len()
        );
    });
}
