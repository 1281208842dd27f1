//! The Kubernetes lab's processes: the standalone lab's namespaces and hosts ([`Lab`]), the
//! API server on a host of its own (kubelab's [`ControlPlane`]: vigil-testenv), and `vigil
//! controller` beside it. Dropping [`KubeCluster`] (after an error, a panic or Ctrl-C) kills
//! the controller and the speakers by PID, stops the API server (its data goes with it) and
//! deletes the namespaces, in that order.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use vigil_kubelab::deploy::{self, MEMBERLIST_SECRET, Program};
use vigil_kubelab::{ControlPlane, ControlPlaneConfig, TESTENV_BIN};

use super::super::Stop;
use super::super::cluster::{self, Lab};
use super::objects::METALLB_NS;

/// The API server's host and address on the lab's bridge (the client is .2, the hosts .11 on).
pub(super) const CP_HOST: &str = "cp";
const CP_ADDRESS: &str = "198.18.0.5/24";

/// Where the API server's work directory goes for a lab with `prefix` (kubelab's naming), so
/// that `vigil lab --down` can remove what a killed run left.
pub(crate) fn control_plane_dir(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(format!("vigil-kubelab-{prefix}-{CP_HOST}"))
}

/// vigil-testenv: `VIGIL_GO_BIN_DIR` (as the tests set it), else the checkout's
/// `conformance/.build/bin`, where `conformance/build.sh testenv` puts it.
pub(super) fn find_testenv() -> Result<PathBuf, String> {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance/.build/bin");
    let dirs = std::env::var_os("VIGIL_GO_BIN_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain([checkout]);
    let mut looked = Vec::new();
    for dir in dirs {
        let bin = dir.join(TESTENV_BIN);
        if bin.is_file() {
            return Ok(bin);
        }
        looked.push(bin.display().to_string());
    }
    Err(format!(
        "{TESTENV_BIN} (kube-apiserver + etcd) not found (looked for {}): build it with \
         `bash conformance/build.sh testenv` (needs Go >= 1.26), or run `bash scripts/lab.sh \
         --kubernetes`, which does",
        looked.join(", ")
    ))
}

/// The lab with an API server and a controller.
#[derive(Debug)]
pub(super) struct KubeCluster {
    controller: Option<Child>,
    /// The controller's PID (kept for messages).
    pub(super) controller_pid: Option<u32>,
    /// vigil-testenv.
    pub(super) cp: ControlPlane,
    /// The namespaces, hosts and speakers (declared last: dropped last).
    pub(super) lab: Lab,
}

impl KubeCluster {
    /// Starts the API server in `lab` and waits until it is ready.
    pub(super) fn start(mut lab: Lab, testenv: &Path) -> Result<Self, Stop> {
        let config = ControlPlaneConfig {
            host: CP_HOST.to_string(),
            address: CP_ADDRESS.to_string(),
            ready_timeout: Duration::from_secs(120),
            // The speakers and the controller authenticate as their ServiceAccounts; the
            // lab reads the speakers' /status as a scraper would (HTTPS, its own token).
            tokens: deploy::service_account_tokens()
                .into_iter()
                .chain([vigil_kubelab::StaticToken::service_account(
                    vigil_kubelab::cluster::SCRAPER_NAMESPACE,
                    vigil_kubelab::cluster::SCRAPER_ACCOUNT,
                    vigil_kubelab::cluster::SCRAPER_TOKEN,
                )])
                .collect(),
            ..ControlPlaneConfig::default()
        };
        let cp = ControlPlane::start(lab.net_mut(), testenv, &config)
            .map_err(|e| Stop::failed(format!("the API server did not start: {e}")))?;
        Ok(Self {
            controller: None,
            controller_pid: None,
            cp,
            lab,
        })
    }

    /// The controller's log.
    pub(super) fn controller_log(&self) -> PathBuf {
        self.lab.dir.join("controller.log")
    }

    /// A kubeconfig for `program`'s ServiceAccount (its token, which the API server accepts).
    pub(super) fn kubeconfig(&self, program: Program) -> Result<PathBuf, Stop> {
        deploy::write_kubeconfig(&self.cp, program)
            .map_err(|e| Stop::failed(format!("kubeconfig for {}: {e}", program.account())))
    }

    /// Starts `vigil controller` next to the API server, as its ServiceAccount (it elects a
    /// leader on a Lease, creates the memberlist Secret and allocates).
    pub(super) fn start_controller(&mut self, exe: &Path) -> Result<(), Stop> {
        let kubeconfig = self.kubeconfig(Program::Controller)?;
        let args: Vec<OsString> = vec![
            "controller".into(),
            format!("--kubeconfig={}", kubeconfig.display()).into(),
            format!("--namespace={METALLB_NS}").into(),
            format!("--ml-secret-name={MEMBERLIST_SECRET}").into(),
            "--identity=controller-0".into(),
            "--log-level=info".into(),
        ];
        let child = cluster::spawn_in(self.cp.ns(), exe, &args, &[], &self.controller_log())
            .map_err(|e| Stop::failed(format!("starting vigil controller: {e}")))?;
        self.controller_pid = Some(child.id());
        self.controller = Some(child);
        Ok(())
    }

    /// Whether the controller exited by itself: its status.
    pub(super) fn controller_exited(&mut self) -> Option<String> {
        let child = self.controller.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.controller = None;
                Some(status.to_string())
            }
            _ => None,
        }
    }

    /// The last `n` lines of the controller's, the API server's and every speaker's log.
    pub(super) fn log_tails(&self, n: usize) -> String {
        let mut out = String::new();
        for (what, path) in [
            ("vigil controller", self.controller_log()),
            ("API server", self.cp.log_path().to_path_buf()),
        ] {
            out.push_str(&format!("--- {what} ({})\n", path.display()));
            out.push_str(&tail(&path, n));
        }
        out.push_str(&self.lab.log_tails(n));
        out
    }

    /// Stops the controller (SIGTERM, then SIGKILL after 5 s).
    fn stop_controller(&mut self) {
        let Some(mut child) = self.controller.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Tears everything down; how many namespaces were deleted.
    pub(super) fn teardown(&mut self) -> usize {
        self.stop_controller();
        self.lab.kill_speakers();
        let _ = self.cp.stop();
        self.lab.teardown()
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        // The control plane's own guard then removes its data; the lab's, the namespaces.
        self.stop_controller();
        self.lab.kill_speakers();
    }
}

/// The last `n` lines of a log file.
fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines[lines.len().saturating_sub(n)..].join("\n");
    out.push('\n');
    out
}
