//! vigil's own manifests in tests: `deploy/kubernetes` (kustomize) and `deploy/helm/vigil`
//! rendered with real `kubectl` and `helm` (built by `conformance/build.sh kubectl helm`),
//! applied to `vigil-testenv`, and the speaker's and controller's ServiceAccounts made real
//! through static tokens, so `vigil speaker` and `vigil controller` run with exactly the
//! permissions the manifests grant.
//!
//! [`ACCESSES`] is the one list of what each program does through the API, and why; the
//! tests check it against the manifests' rules both ways (every access allowed, every rule
//! needed by some access, every verb of every rule used), and against the programs themselves
//! (they work with nothing more).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::binary::{found_or_skip, go_bin_dir};
use crate::control_plane::{ControlPlane, StaticToken};
use crate::error::Error;
use crate::manifests::{apply_yaml, documents};

/// The client's file name in the Go bin directory.
pub const KUBECTL_BIN: &str = "kubectl";
/// Helm's file name in the Go bin directory.
pub const HELM_BIN: &str = "helm";
/// The namespace the manifests install into (MetalLB's).
pub const NAMESPACE: &str = "metallb-system";
/// The speaker's ServiceAccount in the base and the chart.
pub const SPEAKER_ACCOUNT: &str = "vigil-speaker";
/// The controller's ServiceAccount in the base and the chart.
pub const CONTROLLER_ACCOUNT: &str = "vigil-controller";
/// The memberlist Secret the controller creates (base and chart).
pub const MEMBERLIST_SECRET: &str = "vigil-memberlist";
/// The overlays under `deploy/kubernetes/overlays`.
pub const OVERLAYS: &[&str] = &["fresh-install", "replace-metallb"];

/// The kinds that make up permissions.
const RBAC_KINDS: &[&str] = &[
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `deploy/kubernetes/overlays/<name>`.
pub fn overlay_dir(name: &str) -> PathBuf {
    deploy_dir().join("kubernetes/overlays").join(name)
}

/// `deploy/helm/vigil`.
pub fn chart_dir() -> PathBuf {
    deploy_dir().join("helm/vigil")
}

/// `kubectl`, or `None` (the caller skips; a panic under `VIGIL_REQUIRE_GO=1`).
pub fn kubectl_binary(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found =
        FOUND.get_or_init(|| go_bin_dir("kubectl", &[KUBECTL_BIN]).map(|d| d.join(KUBECTL_BIN)));
    found_or_skip(test, "kubectl", found).cloned()
}

/// `helm`, or `None` (the caller skips; a panic under `VIGIL_REQUIRE_GO=1`).
pub fn helm_binary(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| go_bin_dir("helm", &[HELM_BIN]).map(|d| d.join(HELM_BIN)));
    found_or_skip(test, "helm", found).cloned()
}

/// Prometheus's `promtool` (`conformance/build.sh promtool`), or `None` (the caller skips; a
/// panic under `VIGIL_REQUIRE_GO=1`).
pub fn promtool_binary(test: &str) -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found =
        FOUND.get_or_init(|| go_bin_dir("promtool", &["promtool"]).map(|d| d.join("promtool")));
    found_or_skip(test, "promtool", found).cloned()
}

/// Runs `program args...` with `stdin`, returning stdout; an error with stderr when it fails.
fn run(mut command: Command, stdin: Option<&str>) -> Result<String, Error> {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // No proxy from the environment may stand between us and the lab.
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("KUBECONFIG")
        .spawn()
        .map_err(|e| Error::Config(format!("{what}: {e}")))?;
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin is piped");
        pipe.write_all(input.as_bytes())
            .map_err(|e| Error::Config(format!("{what}: writing stdin: {e}")))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::Config(format!("{what}: {e}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Config(format!(
            "{what} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// `kubectl kustomize deploy/kubernetes/overlays/<overlay>`.
pub fn kustomize(kubectl: &Path, overlay: &str) -> Result<String, Error> {
    let mut command = Command::new(kubectl);
    command.arg("kustomize").arg(overlay_dir(overlay));
    run(command, None)
}

/// `helm template vigil deploy/helm/vigil --namespace metallb-system --include-crds <args>`.
pub fn helm_template(helm: &Path, args: &[&str]) -> Result<String, Error> {
    let mut command = Command::new(helm);
    command
        .args(["template", "vigil"])
        .arg(chart_dir())
        .args(["--namespace", NAMESPACE, "--include-crds"])
        .args(args);
    helm_home(&mut command);
    run(command, None)
}

/// `helm lint --strict deploy/helm/vigil` (warnings fail too); its report.
pub fn helm_lint(helm: &Path) -> Result<String, Error> {
    let mut command = Command::new(helm);
    command.args(["lint", "--strict"]).arg(chart_dir());
    helm_home(&mut command);
    run(command, None)
}

/// Helm keeps caches and its configuration in the home directory; none of that is wanted.
fn helm_home(command: &mut Command) {
    let base = std::env::temp_dir().join("vigil-helm");
    command
        .env("HELM_CACHE_HOME", base.join("cache"))
        .env("HELM_CONFIG_HOME", base.join("config"))
        .env("HELM_DATA_HOME", base.join("data"));
}

/// `helm <args>` on the control plane's host, as the admin (for `helm install` and friends,
/// which talk to the API server).
pub fn helm_in_lab(cp: &ControlPlane, helm: &Path, args: &[&str]) -> Result<String, Error> {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", cp.ns()])
        .arg(helm)
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .args(args);
    helm_home(&mut command);
    run(command, None)
}

/// `kubectl <args>` on the control plane's host (its address is only reachable inside the
/// lab), as the admin, with `stdin`.
pub fn kubectl_in_lab(
    cp: &ControlPlane,
    kubectl: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> Result<String, Error> {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", cp.ns()])
        .arg(kubectl)
        .arg(format!("--kubeconfig={}", cp.kubeconfig_path().display()))
        .args(args);
    run(command, stdin)
}

/// `kubectl apply --server-side --dry-run=server -f -` of `yaml`: every object validated and
/// admitted by the API server (schemas, defaulting, admission, field ownership) and nothing
/// stored. Returns kubectl's report, one line per object.
pub fn dry_run_apply(cp: &ControlPlane, kubectl: &Path, yaml: &str) -> Result<String, Error> {
    kubectl_in_lab(
        cp,
        kubectl,
        &[
            "apply",
            "--server-side",
            "--dry-run=server",
            "--field-manager=vigil-deploy-test",
            "-f",
            "-",
        ],
        Some(yaml),
    )
}

/// The documents of `yaml` whose kind is one of `kinds`.
pub fn documents_of_kinds(yaml: &str, kinds: &[&str]) -> Result<Vec<Value>, Error> {
    Ok(documents("rendered manifests", yaml)?
        .into_iter()
        .filter(|d| {
            d.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| kinds.contains(&k))
        })
        .collect())
}

/// Applies (for real) the ServiceAccounts, Roles, ClusterRoles and bindings of rendered
/// manifests `yaml`; returns `Kind/name` of each.
pub async fn apply_rbac(client: &Client, yaml: &str) -> Result<Vec<String>, Error> {
    let mut applied = Vec::new();
    for doc in documents_of_kinds(yaml, RBAC_KINDS)? {
        let kind = doc["kind"].as_str().unwrap_or_default().to_string();
        for object in apply_yaml(client, "rendered RBAC", &doc.to_string()).await? {
            applied.push(format!("{kind}/{}", object.name_any()));
        }
    }
    Ok(applied)
}

/// One of the two programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Program {
    /// `vigil speaker` (DaemonSet).
    Speaker,
    /// `vigil controller` (Deployment).
    Controller,
}

impl Program {
    /// Both.
    pub const ALL: [Self; 2] = [Self::Speaker, Self::Controller];

    /// Its ServiceAccount's name in the base and the chart.
    pub fn account(self) -> &'static str {
        match self {
            Self::Speaker => SPEAKER_ACCOUNT,
            Self::Controller => CONTROLLER_ACCOUNT,
        }
    }

    /// The names of its ClusterRole and Role in the base and the chart.
    pub fn roles(self) -> (&'static str, &'static str) {
        match self {
            Self::Speaker => ("vigil:speaker", "vigil-speaker"),
            Self::Controller => ("vigil:controller", "vigil-controller"),
        }
    }

    /// The static token of its ServiceAccount in [`NAMESPACE`].
    pub fn token(self) -> StaticToken {
        StaticToken::service_account(
            NAMESPACE,
            self.account(),
            &format!("vigil-kubelab-deploy-{}", self.account()),
        )
    }
}

/// The static tokens of both ServiceAccounts, for [`crate::ControlPlaneConfig::tokens`].
pub fn service_account_tokens() -> Vec<StaticToken> {
    Program::ALL.iter().map(|p| p.token()).collect()
}

/// A kubeconfig for `program`'s ServiceAccount token, in the control plane's work directory
/// (the control plane must accept [`service_account_tokens`]).
pub fn write_kubeconfig(cp: &ControlPlane, program: Program) -> Result<PathBuf, Error> {
    cp.write_token_kubeconfig(program.account(), &program.token().token)
}

/// Where an access happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In every namespace at once (a cluster-wide list or watch), or on a cluster-scoped kind.
    Cluster,
    /// In the namespace of some user's Service (any namespace): granted by a ClusterRole.
    AnyNamespace,
    /// In the program's own namespace ([`NAMESPACE`]): granted by a Role.
    Own,
}

/// A namespace that stands for "some user's namespace" in access reviews.
pub const USER_NAMESPACE: &str = "some-app";

/// One thing a program does through the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// Who does it.
    pub program: Program,
    /// The verb (get, list, watch, create, update, patch, delete).
    pub verb: &'static str,
    /// The API group ("" is core).
    pub group: &'static str,
    /// The resource (plural).
    pub resource: &'static str,
    /// The subresource, or "".
    pub subresource: &'static str,
    /// Where.
    pub scope: Scope,
    /// The one object's name, for a rule limited by resourceNames.
    pub name: Option<&'static str>,
    /// What for, and where in the code.
    pub why: &'static str,
}

const fn access(
    program: Program,
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    scope: Scope,
    why: &'static str,
) -> Access {
    Access {
        program,
        verb,
        group,
        resource,
        subresource: "",
        scope,
        name: None,
        why,
    }
}

/// `a` on the status subresource.
const fn status(mut a: Access) -> Access {
    a.subresource = "status";
    a
}

/// `a` on the one object `name` (for a rule limited by resourceNames).
const fn named(mut a: Access, name: &'static str) -> Access {
    a.name = Some(name);
    a
}

use Program::{Controller, Speaker};
use Scope::{AnyNamespace, Cluster, Own};

/// Every access of each program, with what it is for. The Leases beyond the leader's and the
/// Secret's reads and writes after its creation are the gossip key rotation's (issue 14:
/// speakers follow the Secret's keyring and acknowledge in Lease `vigil-keyring-<node>`; the
/// controller reads those Leases and rewrites the keyring).
#[rustfmt::skip]
pub const ACCESSES: &[Access] = &[
    // --- the speaker (crates/k8s/src/source.rs, sink.rs, keyring.rs, key_ack.rs) ---
    access(Speaker, "list", "", "services", Cluster, "source: Service reflector"),
    access(Speaker, "watch", "", "services", Cluster, "source: Service reflector"),
    access(Speaker, "list", "", "nodes", Cluster, "source: Node reflector"),
    access(Speaker, "watch", "", "nodes", Cluster, "source: Node reflector"),
    access(Speaker, "list", "discovery.k8s.io", "endpointslices", Cluster, "source: EndpointSlice reflector (Local services)"),
    access(Speaker, "watch", "discovery.k8s.io", "endpointslices", Cluster, "source: EndpointSlice reflector (Local services)"),
    access(Speaker, "create", "", "events", AnyNamespace, "sink: nodeAssigned Event on the Service"),
    access(Speaker, "list", "", "pods", Own, "source: speaker Pod reflector (gossip seeds, own Pod as owner)"),
    access(Speaker, "watch", "", "pods", Own, "source: speaker Pod reflector (else listed every 10 s)"),
    access(Speaker, "list", "metallb.io", "ipaddresspools", Own, "source: pool reflector"),
    access(Speaker, "watch", "metallb.io", "ipaddresspools", Own, "source: pool reflector"),
    access(Speaker, "list", "metallb.io", "l2advertisements", Own, "source: advertisement reflector"),
    access(Speaker, "watch", "metallb.io", "l2advertisements", Own, "source: advertisement reflector"),
    access(Speaker, "list", "metallb.io", "servicel2statuses", Own, "sink: this node's statuses, by label (the watch's list); a lost node's, to sweep"),
    access(Speaker, "watch", "metallb.io", "servicel2statuses", Own, "sink: this node's statuses, reconciled against"),
    access(Speaker, "create", "metallb.io", "servicel2statuses", Own, "sink: a status per announced Service"),
    access(Speaker, "delete", "metallb.io", "servicel2statuses", Own, "sink: withdrawn, left from a previous run, or a lost node's"),
    status(access(Speaker, "patch", "metallb.io", "servicel2statuses", Own, "sink: the status's node, Service, interfaces")),
    access(Speaker, "create", "metallb.io", "configurationstates", Own, "source: its ConfigurationState, first applied (server-side apply creates)"),
    access(Speaker, "patch", "metallb.io", "configurationstates", Own, "source: its ConfigurationState (server-side apply)"),
    status(access(Speaker, "patch", "metallb.io", "configurationstates", Own, "source: the configuration's verdict")),
    access(Speaker, "get", "coordination.k8s.io", "leases", Own, "key_ack: read its acknowledgement Lease"),
    access(Speaker, "create", "coordination.k8s.io", "leases", Own, "key_ack: first acknowledgement (server-side apply creates)"),
    access(Speaker, "update", "coordination.k8s.io", "leases", Own, "key_ack: acknowledge a step (resourceVersion precondition)"),
    access(Speaker, "patch", "coordination.k8s.io", "leases", Own, "key_ack: acknowledgement and heartbeat (server-side apply)"),
    named(access(Speaker, "get", "", "secrets", Own, "keyring: the memberlist Secret read at start"), MEMBERLIST_SECRET),
    named(access(Speaker, "list", "", "secrets", Own, "keyring: the memberlist Secret followed (watch by name)"), MEMBERLIST_SECRET),
    named(access(Speaker, "watch", "", "secrets", Own, "keyring: the memberlist Secret followed (watch by name)"), MEMBERLIST_SECRET),
    // --- the controller (crates/controller/src) ---
    access(Controller, "list", "", "services", Cluster, "engine: Service reflector and metadata watch"),
    access(Controller, "watch", "", "services", Cluster, "engine: Service reflector and metadata watch"),
    access(Controller, "get", "", "services", AnyNamespace, "engine: the Service read again before each write"),
    status(access(Controller, "update", "", "services", AnyNamespace, "engine: status.loadBalancer.ingress")),
    access(Controller, "list", "", "namespaces", Cluster, "engine: namespace labels for serviceAllocation"),
    access(Controller, "watch", "", "namespaces", Cluster, "engine: namespace labels for serviceAllocation"),
    access(Controller, "create", "events.k8s.io", "events", AnyNamespace, "events: allocation events (kube Recorder)"),
    access(Controller, "patch", "events.k8s.io", "events", AnyNamespace, "events: a repeated event's count"),
    access(Controller, "list", "metallb.io", "ipaddresspools", Own, "engine: pool reflector"),
    access(Controller, "watch", "metallb.io", "ipaddresspools", Own, "engine: pool reflector"),
    status(access(Controller, "patch", "metallb.io", "ipaddresspools", Own, "pools: assigned/available counters")),
    access(Controller, "get", "coordination.k8s.io", "leases", Own, "leader: the leader Lease, read before each write"),
    access(Controller, "create", "coordination.k8s.io", "leases", Own, "leader: the Lease when missing"),
    access(Controller, "patch", "coordination.k8s.io", "leases", Own, "leader: renew and take over"),
    access(Controller, "update", "coordination.k8s.io", "leases", Own, "leader/rotation: replace with a resourceVersion precondition"),
    access(Controller, "list", "coordination.k8s.io", "leases", Own, "rotation: the speakers' acknowledgement Leases (by label)"),
    access(Controller, "watch", "coordination.k8s.io", "leases", Own, "rotation: the speakers' acknowledgement Leases (by label)"),
    access(Controller, "create", "", "secrets", Own, "secret: create it with a random key"),
    named(access(Controller, "list", "", "secrets", Own, "secret/rotation: is it there; followed (list/watch by name)"), MEMBERLIST_SECRET),
    named(access(Controller, "watch", "", "secrets", Own, "rotation: the keyring followed (watch by name)"), MEMBERLIST_SECRET),
    named(access(Controller, "get", "", "secrets", Own, "rotation: the keyring read"), MEMBERLIST_SECRET),
    named(access(Controller, "update", "", "secrets", Own, "rotation: the keyring written (resourceVersion precondition)"), MEMBERLIST_SECRET),
    named(access(Controller, "patch", "", "secrets", Own, "rotation: the keyring written"), MEMBERLIST_SECRET),
    named(access(Controller, "get", "apps", "deployments", Own, "secret: its own Deployment, the Secret's owner"), "vigil-controller"),
    access(Controller, "create", "metallb.io", "configurationstates", Own, "state: ConfigurationState controller, first applied (server-side apply creates)"),
    access(Controller, "patch", "metallb.io", "configurationstates", Own, "state: ConfigurationState controller (server-side apply)"),
    status(access(Controller, "patch", "metallb.io", "configurationstates", Own, "state: pools valid, replication, BGP objects")),
    access(Controller, "list", "metallb.io", "bgppeers", Own, "state: BGP objects said not served"),
    access(Controller, "list", "metallb.io", "bgpadvertisements", Own, "state: BGP objects said not served"),
    access(Controller, "list", "metallb.io", "bfdprofiles", Own, "state: BGP objects said not served"),
    access(Controller, "list", "metallb.io", "communities", Own, "state: BGP objects said not served"),
];

/// The namespace of an access review for `scope`.
fn review_namespace(scope: Scope) -> Option<String> {
    match scope {
        Cluster => None,
        AnyNamespace => Some(USER_NAMESPACE.to_string()),
        Own => Some(NAMESPACE.to_string()),
    }
}

/// Whether `user` may do `access`, by a SubjectAccessReview (the API server's own RBAC
/// authorizer answers).
pub async fn allowed(client: &Client, user: &StaticToken, access: &Access) -> Result<bool, Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.user.clone()),
            uid: Some(user.uid.clone()),
            groups: Some(user.groups.clone()),
            resource_attributes: Some(ResourceAttributes {
                namespace: review_namespace(access.scope),
                verb: Some(access.verb.to_string()),
                group: Some(access.group.to_string()),
                resource: Some(access.resource.to_string()),
                subresource: (!access.subresource.is_empty())
                    .then(|| access.subresource.to_string()),
                name: access.name.map(str::to_string),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// One RBAC rule, as the manifests write it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rule {
    /// `apiGroups`.
    pub groups: Vec<String>,
    /// `resources` (with `/subresource`).
    pub resources: Vec<String>,
    /// `verbs`.
    pub verbs: Vec<String>,
    /// `resourceNames`.
    pub names: Vec<String>,
}

impl Rule {
    fn from_json(rule: &Value) -> Self {
        let list = |key: &str| -> Vec<String> {
            rule.get(key)
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            groups: list("apiGroups"),
            resources: list("resources"),
            verbs: list("verbs"),
            names: list("resourceNames"),
        }
    }

    /// The rule as RBAC JSON.
    pub fn to_json(&self) -> Value {
        let mut rule = serde_json::json!({
            "apiGroups": self.groups,
            "resources": self.resources,
            "verbs": self.verbs,
        });
        if !self.names.is_empty() {
            rule["resourceNames"] = serde_json::json!(self.names);
        }
        rule
    }

    /// Whether this rule, alone, grants `access` (as RBAC matches: group, resource with
    /// subresource, verb, and resourceNames when the rule has any).
    pub fn grants(&self, access: &Access) -> bool {
        let resource = if access.subresource.is_empty() {
            access.resource.to_string()
        } else {
            format!("{}/{}", access.resource, access.subresource)
        };
        self.groups.iter().any(|g| g == access.group)
            && self.resources.contains(&resource)
            && self.verbs.iter().any(|v| v == access.verb)
            && (self.names.is_empty()
                || access
                    .name
                    .is_some_and(|n| self.names.iter().any(|x| x == n)))
    }
}

impl ProgramRules {
    /// Whether these rules grant `access`: a ClusterRole rule anywhere, a Role rule only in
    /// [`NAMESPACE`].
    pub fn grant(&self, access: &Access) -> bool {
        self.cluster.iter().any(|r| r.grants(access))
            || (access.scope == Own && self.namespaced.iter().any(|r| r.grants(access)))
    }
}

/// The rules of `program`'s ClusterRole and Role in rendered manifests `yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRules {
    /// The ClusterRole's rules.
    pub cluster: Vec<Rule>,
    /// The Role's rules (in [`NAMESPACE`]).
    pub namespaced: Vec<Rule>,
}

/// Finds `program`'s ClusterRole and Role in `yaml` (by the base's names).
pub fn program_rules(yaml: &str, program: Program) -> Result<ProgramRules, Error> {
    let (cluster_role, role) = program.roles();
    let find = |kind: &str, name: &str| -> Result<Vec<Rule>, Error> {
        let docs = documents_of_kinds(yaml, &[kind])?;
        let doc = docs
            .iter()
            .find(|d| d["metadata"]["name"].as_str() == Some(name))
            .ok_or_else(|| Error::Config(format!("no {kind} {name} in the manifests")))?;
        Ok(doc["rules"]
            .as_array()
            .map(|rules| rules.iter().map(Rule::from_json).collect())
            .unwrap_or_default())
    };
    Ok(ProgramRules {
        cluster: find("ClusterRole", cluster_role)?,
        namespaced: find("Role", role)?,
    })
}

/// Applies a ClusterRole and a Role with `rules`, bound to ServiceAccount `account` in
/// [`NAMESPACE`] (for variants of a program's permissions; names derive from `account`).
pub async fn apply_rules_for(
    client: &Client,
    account: &str,
    rules: &ProgramRules,
) -> Result<(), Error> {
    let json = |rules: &[Rule]| Value::Array(rules.iter().map(Rule::to_json).collect());
    let subject =
        serde_json::json!([{ "kind": "ServiceAccount", "name": account, "namespace": NAMESPACE }]);
    let objects = serde_json::json!([
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
          "metadata": { "name": format!("probe:{account}") }, "rules": json(&rules.cluster) },
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
          "metadata": { "name": format!("probe-{account}"), "namespace": NAMESPACE },
          "rules": json(&rules.namespaced) },
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
          "metadata": { "name": format!("probe:{account}") },
          "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("probe:{account}") },
          "subjects": subject },
        { "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
          "metadata": { "name": format!("probe-{account}"), "namespace": NAMESPACE },
          "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("probe-{account}") },
          "subjects": subject },
    ]);
    for object in objects.as_array().into_iter().flatten() {
        apply_yaml(
            client,
            &format!("probe RBAC for {account}"),
            &object.to_string(),
        )
        .await?;
    }
    Ok(())
}
