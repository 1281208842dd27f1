//! Running a program as a Pod of MetalLB's manifests would run it, on a lab host with no
//! kubelet: the container's `args` (the image's ENTRYPOINT is the program: MetalLB's binary,
//! or a link named after it to `vigil`), its `env` with every `fieldRef` resolved to the Pod's
//! facts, and each volume mounted where the container says (Secrets and ConfigMaps read from
//! the API server and written as files, an optional ConfigMap that does not exist as an empty
//! directory), in a private mount namespace whose `/etc` is an overlay, so nothing of the
//! host's changes.
//!
//! Two stand-ins remain for what only a kubelet provides: the ServiceAccount token mount is a
//! `--kubeconfig` holding the same account's token, and its `namespace` file is
//! `METALLB_NAMESPACE` (both programs read either). Both are given to MetalLB and to vigil
//! alike.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::Value;
use vigil_kubelab::cluster::{Cluster, LabProcess, Output, fresh_log};

/// The Pod facts a `fieldRef` may ask for.
#[derive(Debug, Clone)]
pub(crate) struct PodFacts {
    /// `metadata.name`.
    pub(crate) name: String,
    /// `metadata.namespace`.
    pub(crate) namespace: String,
    /// `spec.nodeName`.
    pub(crate) node: String,
    /// `status.podIP` and `status.hostIP` (host networking: the same).
    pub(crate) ip: IpAddr,
}

/// The first container of the one workload of `kind` in the rendered manifests.
pub(crate) fn container(docs: &[Value], kind: &str) -> (Value, Value) {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind} in the manifests");
    let pod_spec = found[0]["spec"]["template"]["spec"].clone();
    (pod_spec["containers"][0].clone(), pod_spec)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The container's `args`.
pub(crate) fn args(container: &Value) -> Vec<String> {
    assert!(
        container.get("command").is_none(),
        "MetalLB's manifests give only args (the image's ENTRYPOINT runs)"
    );
    strings(&container["args"])
}

/// The container's `env`, every `fieldRef` resolved from `pod`.
pub(crate) fn env(container: &Value, pod: &PodFacts) -> Vec<(String, String)> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let name = e["name"].as_str().expect("env name").to_string();
            if let Some(v) = e["value"].as_str() {
                return (name, v.to_string());
            }
            let path = e["valueFrom"]["fieldRef"]["fieldPath"]
                .as_str()
                .unwrap_or_else(|| panic!("env {name}: only values and fieldRefs are emulated"));
            let value = match path {
                "metadata.name" => pod.name.clone(),
                "metadata.namespace" => pod.namespace.clone(),
                "spec.nodeName" => pod.node.clone(),
                "status.podIP" | "status.hostIP" => pod.ip.to_string(),
                other => panic!("env {name}: fieldRef {other} is not emulated"),
            };
            (name, value)
        })
        .collect()
}

/// Each `volumeMount` of the container as (mount path, host directory holding the volume's
/// files), the directories made under `dir` from the API server's objects now.
pub(crate) fn volumes(
    c: &Cluster,
    container: &Value,
    pod_spec: &Value,
    dir: &Path,
) -> Vec<(String, PathBuf)> {
    let volumes: BTreeMap<String, Value> = pod_spec["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v.clone(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let name = mount["name"].as_str().expect("mount name");
        let path = mount["mountPath"].as_str().expect("mountPath").to_string();
        let volume = &volumes[name];
        let host = dir.join("volumes").join(name);
        let _ = std::fs::remove_dir_all(&host);
        std::fs::create_dir_all(&host).expect("volume dir");
        let files = volume_files(c, volume);
        for (file, bytes) in files {
            std::fs::write(host.join(&file), bytes).expect("volume file");
        }
        out.push((path, host));
    }
    // Parents before children (/etc/metallb before /etc/metallb/memberlist).
    out.sort_by_key(|(path, _)| path.len());
    out
}

/// A Secret's or ConfigMap's keys as files; none for an optional object that does not exist.
fn volume_files(c: &Cluster, volume: &Value) -> Vec<(String, Vec<u8>)> {
    let namespace = vigil_kubelab::metallb::METALLB_NAMESPACE;
    if let Some(name) = volume["secret"]["secretName"].as_str() {
        let api: Api<Secret> = Api::namespaced(c.client().clone(), namespace);
        let secret = c
            .block_on(api.get_opt(name))
            .unwrap_or_else(|e| panic!("Secret {name}: {e}"))
            .unwrap_or_else(|| panic!("Secret {name} (the Pod would not start without it)"));
        return secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
    }
    if let Some(name) = volume["configMap"]["name"].as_str() {
        let optional = volume["configMap"]["optional"].as_bool().unwrap_or(false);
        let api: Api<ConfigMap> = Api::namespaced(c.client().clone(), namespace);
        let Some(map) = c
            .block_on(api.get_opt(name))
            .unwrap_or_else(|e| panic!("ConfigMap {name}: {e}"))
        else {
            assert!(optional, "ConfigMap {name} is missing and not optional");
            return Vec::new();
        };
        return map
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
    }
    panic!("volume {volume}: only Secrets and ConfigMaps are emulated");
}

/// In the private mount namespace: `/etc` an overlay on a tmpfs, each volume bound at its
/// path (made when missing: under `/etc` only in the overlay), then the program `exec`ed.
/// Arguments: a scratch directory, pairs of mount path and host directory, `--`, the program
/// and its arguments.
const POD_MOUNTS: &str = r#"set -eu
scratch=$1
shift
mount -t tmpfs vigil-swap "$scratch"
mkdir "$scratch/upper" "$scratch/work"
mount -t overlay vigil-swap -o "lowerdir=/etc,upperdir=$scratch/upper,workdir=$scratch/work" /etc
while [ "$1" != "--" ]; do
  mkdir -p "$1"
  mount --bind "$2" "$1"
  shift 2
done
shift
exec "$@"
"#;

/// Starts `program` (its path is its argv[0]) in lab namespace `netns` as the Pod would run
/// it: `args`, then the stand-in `--kubeconfig`; `env` plus the stand-in `METALLB_NAMESPACE`;
/// `mounts` bound in place. Standard output and error go to `<dir>/<stem>.log`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_as_pod(
    name: &str,
    netns: &str,
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    mounts: &[(String, PathBuf)],
    kubeconfig: &Path,
    dir: &Path,
) -> LabProcess {
    let scratch = dir.join("mnt");
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", netns])
        .args(["unshare", "--mount", "--propagation", "private"])
        .args(["sh", "-c", POD_MOUNTS, "vigil-swap-pod"])
        .arg(&scratch);
    for (path, host) in mounts {
        command.arg(path).arg(host);
    }
    command
        .arg("--")
        .arg(program)
        .args(args)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .env_remove("KUBECONFIG")
        .env_remove("METALLB_BGP_TYPE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(
            "METALLB_NAMESPACE",
            vigil_kubelab::metallb::METALLB_NAMESPACE,
        );
    LabProcess::start(name, command, fresh_log(dir, name), Output::Both)
        .unwrap_or_else(|e| panic!("start {name}: {e}"))
}

/// `<dir>/<name>`: a link named `name` to the vigil binary, as the images have `/speaker` and
/// `/controller` (the binary runs the subcommand its name says).
pub(crate) fn vigil_as(dir: &Path, name: &str) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    let link = bin.join(name);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_vigil"), &link).expect("link");
    link
}
