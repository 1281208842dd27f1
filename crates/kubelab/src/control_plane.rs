//! `vigil-testenv` (kube-apiserver + etcd in one Go process) running in a lab host's network
//! namespace, with a kube client that reaches it from inside the lab.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use vigil_netlab::Bridge;

use crate::error::Error;
use crate::runtime::LabRuntime;

/// A static bearer token the API server accepts (`--token-auth-file`), for acting as a user
/// other than the admin under real RBAC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticToken {
    /// The bearer token itself.
    pub token: String,
    /// The user name it authenticates as.
    pub user: String,
    /// The user's uid.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
}

impl StaticToken {
    /// A token that authenticates as ServiceAccount `name` in `namespace`, with the groups the
    /// API server gives service accounts: RBAC subjects of kind ServiceAccount match it, as
    /// they would match the account's own token in a cluster.
    pub fn service_account(namespace: &str, name: &str, token: &str) -> Self {
        Self {
            token: token.to_string(),
            user: format!("system:serviceaccount:{namespace}:{name}"),
            uid: format!("kubelab-sa-{namespace}-{name}"),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
            ],
        }
    }

    /// The line of this token in a kube-apiserver token file (CSV; groups quoted).
    fn csv_line(&self) -> String {
        format!(
            "{},{},{},\"{}\"\n",
            self.token,
            self.user,
            self.uid,
            self.groups.join(",")
        )
    }
}

/// How to run the control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneConfig {
    /// The lab host (namespace suffix) the API server runs in.
    pub host: String,
    /// Its interface address with prefix length, on the lab bridge (198.18.0.0/15 or
    /// 2001:db8::/32).
    pub address: String,
    /// The API server's port.
    pub port: u16,
    /// Static tokens the API server accepts.
    pub tokens: Vec<StaticToken>,
    /// Extra kube-apiserver flags (appended last, so they win).
    pub apiserver_args: Vec<String>,
    /// Bound on the wait for the ready line, per start.
    pub ready_timeout: Duration,
}

impl Default for ControlPlaneConfig {
    fn default() -> Self {
        Self {
            host: "cp".to_string(),
            address: "198.18.0.2/24".to_string(),
            port: 6443,
            tokens: Vec::new(),
            apiserver_args: Vec::new(),
            ready_timeout: Duration::from_secs(120),
        }
    }
}

/// How long a SIGTERM'd API server gets to shut down before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// A running (or stopped, or paused) `vigil-testenv` in a lab host's namespace. Dropping it
/// kills the process by PID and removes its data, also when a test panics (then its log is
/// kept and its path printed).
#[derive(Debug)]
pub struct ControlPlane {
    child: Option<Child>,
    paused: bool,
    binary: PathBuf,
    args: Vec<String>,
    ns: String,
    listen: SocketAddr,
    work: PathBuf,
    log: PathBuf,
    kubeconfig: PathBuf,
    ready_timeout: Duration,
    config: Option<kube::Config>,
    runtime: LabRuntime,
}

impl ControlPlane {
    /// Adds `config.host` to the lab (plugged into the bridge as `eth0` with
    /// `config.address`), starts `binary` there and waits for its ready line.
    pub fn start(
        bridge: &mut Bridge,
        binary: &Path,
        config: &ControlPlaneConfig,
    ) -> Result<Self, Error> {
        let ip: IpAddr = config
            .address
            .split('/')
            .next()
            .unwrap_or_default()
            .parse()
            .map_err(|e| Error::Config(format!("address {:?}: {e}", config.address)))?;
        let ns = bridge.add_namespace(&config.host);
        bridge.plug(&config.host, "eth0");
        let mut addr = vec!["addr", "add", config.address.as_str(), "dev", "eth0"];
        if ip.is_ipv6() {
            addr.push("nodad");
        }
        bridge.ip(&config.host, &addr);

        let work = std::env::temp_dir().join(format!("vigil-kubelab-{ns}"));
        let _ = fs::remove_dir_all(&work);
        fs::create_dir_all(&work).map_err(|e| Error::io(&work, e))?;
        let listen = SocketAddr::new(ip, config.port);
        let data = work.join("data");
        let mut args = vec![
            "--listen".to_string(),
            listen.to_string(),
            "--data-dir".to_string(),
            data.display().to_string(),
            // The directory outlives each process so that a restart finds its certificates
            // and etcd data; this guard removes it.
            "--keep".to_string(),
            "--ready-timeout".to_string(),
            format!("{}s", config.ready_timeout.as_secs().max(1)),
        ];
        if !config.tokens.is_empty() {
            let tokens = work.join("tokens.csv");
            let csv: String = config.tokens.iter().map(StaticToken::csv_line).collect();
            fs::write(&tokens, csv).map_err(|e| Error::io(&tokens, e))?;
            args.push("--token-auth-file".to_string());
            args.push(tokens.display().to_string());
        }
        if !config.apiserver_args.is_empty() {
            args.push("--".to_string());
            args.extend(config.apiserver_args.iter().cloned());
        }
        let runtime = LabRuntime::new(&ns).map_err(|e| Error::io(Path::new("/run/netns"), e))?;
        let mut cp = Self {
            child: None,
            paused: false,
            binary: binary.to_path_buf(),
            args,
            ns,
            listen,
            log: work.join("testenv.log"),
            kubeconfig: data.join("kubeconfig"),
            work,
            ready_timeout: config.ready_timeout,
            config: None,
            runtime,
        };
        cp.start_again()?;
        Ok(cp)
    }

    /// Starts the API server again over the same data directory (same certificates, same
    /// etcd data) and waits for its ready line. An error when it is already running.
    pub fn start_again(&mut self) -> Result<(), Error> {
        if self.child.is_some() {
            return Err(Error::Config("the control plane is already running".into()));
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| Error::io(&self.log, e))?;
        let log_start = log.metadata().map(|m| m.len()).unwrap_or(0);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .arg(&self.binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| Error::io(&self.binary, e))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        self.child = Some(child);
        self.paused = false;

        // The reader keeps draining stdout until the process exits: a closed pipe would kill
        // the server on its next write there.
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("vigil-testenv: ready ") {
                    let _ = ready_tx.send(Some(line));
                }
            }
            let _ = ready_tx.send(None);
        });
        match ready_rx.recv_timeout(self.ready_timeout) {
            Ok(Some(line)) => {
                if let Some(path) = line
                    .split_whitespace()
                    .find_map(|w| w.strip_prefix("kubeconfig="))
                {
                    self.kubeconfig = PathBuf::from(path);
                }
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.reap(Duration::from_secs(5));
                return Err(Error::Exited {
                    status: status.map_or("still running".into(), |s| s.to_string()),
                    log: tail(&self.log, log_start),
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.kill();
                return Err(Error::NotReady {
                    limit: self.ready_timeout,
                    log: tail(&self.log, log_start),
                });
            }
        }
        if self.config.is_none() {
            let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)?;
            let mut config = self.runtime.block_on(kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &KubeConfigOptions::default(),
            ))?;
            // The server is in our own lab; no proxy from the environment may stand between.
            config.proxy_url = None;
            self.config = Some(config);
        }
        Ok(())
    }

    /// Stops the API server with SIGTERM (after SIGCONT, if paused) and waits for it to exit;
    /// SIGKILL after 30 s. Returns its exit status (`None` if it was not running).
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let pid = self.pid()?;
        if self.paused {
            let _ = kill(pid, Signal::SIGCONT);
            self.paused = false;
        }
        let _ = kill(pid, Signal::SIGTERM);
        let status = self.reap(STOP_GRACE);
        if status.is_none() {
            self.kill();
        }
        status
    }

    /// Kills the API server and its etcd at once (SIGKILL), as a crash or a lost host would:
    /// no graceful shutdown, connections reset. [`Self::start_again`] recovers from the same
    /// data (etcd replays its log).
    pub fn crash(&mut self) {
        self.kill();
    }

    /// Stops the API server (SIGTERM) and starts it again over the same data.
    pub fn restart(&mut self) -> Result<Option<ExitStatus>, Error> {
        let status = self.stop();
        self.start_again()?;
        Ok(status)
    }

    /// Freezes the API server (and its etcd) with SIGSTOP: connections stay open but nothing
    /// answers, as with a hung control plane.
    pub fn pause(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGSTOP);
            self.paused = true;
        }
    }

    /// Lets a paused API server run again (SIGCONT).
    pub fn resume(&mut self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGCONT);
            self.paused = false;
        }
    }

    /// The running process's PID.
    pub fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .map(|c| Pid::from_raw(i32::try_from(c.id()).expect("a Linux PID fits in i32")))
    }

    /// The runtime whose threads live in the control plane's namespace; run kube calls on it.
    pub fn runtime(&self) -> &LabRuntime {
        &self.runtime
    }

    /// Runs `fut` inside the lab (see [`LabRuntime::block_on`]).
    pub fn block_on<F>(&self, fut: F) -> F::Output
    where
        F: Future + Send,
        F::Output: Send,
    {
        self.runtime.block_on(fut)
    }

    /// An admin client (group `system:masters`). Use it on [`Self::runtime`].
    pub fn client(&self) -> Result<kube::Client, Error> {
        self.client_from(self.kube_config()?.clone())
    }

    /// A client that authenticates with bearer `token` (one of [`ControlPlaneConfig::tokens`]).
    pub fn client_with_token(&self, token: &str) -> Result<kube::Client, Error> {
        let mut config = self.kube_config()?.clone();
        config.auth_info = token_auth(token)?;
        self.client_from(config)
    }

    /// The kube client configuration of the admin.
    pub fn kube_config(&self) -> Result<&kube::Config, Error> {
        self.config
            .as_ref()
            .ok_or_else(|| Error::Config("the control plane never became ready".into()))
    }

    /// Writes a kubeconfig for bearer `token` (for a Go program running on a lab host, e.g.
    /// MetalLB under its ServiceAccount's RBAC) and returns its path.
    pub fn write_token_kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, Error> {
        let admin =
            fs::read_to_string(&self.kubeconfig).map_err(|e| Error::io(&self.kubeconfig, e))?;
        let mut kubeconfig = Kubeconfig::from_yaml(&admin)?;
        for user in &mut kubeconfig.auth_infos {
            user.auth_info = Some(token_auth(token)?);
        }
        let text = serde_norway::to_string(&kubeconfig)
            .map_err(|e| Error::Config(format!("kubeconfig for {name}: {e}")))?;
        let path = self.work.join(format!("kubeconfig-{name}"));
        fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        Ok(path)
    }

    fn client_from(&self, config: kube::Config) -> Result<kube::Client, Error> {
        // The client's background task is spawned on the runtime it is made in.
        Ok(self
            .runtime
            .block_on(async { kube::Client::try_from(config) })?)
    }

    /// The admin kubeconfig (certificates inlined).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's address on the lab bridge.
    pub fn addr(&self) -> SocketAddr {
        self.listen
    }

    /// `https://<addr>`.
    pub fn server_url(&self) -> String {
        format!("https://{}", self.listen)
    }

    /// The namespace the API server runs in.
    pub fn ns(&self) -> &str {
        &self.ns
    }

    /// The API server's log (stderr of every start, appended).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// A directory for the test's own files; removed with the control plane.
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// Waits up to `limit` for the process to exit, then takes it off the books.
    fn reap(&mut self, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let end = Instant::now() + limit;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Some(status);
                }
                Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(20)),
                _ => return None,
            }
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Quick, and keep the log for the post-mortem.
            self.kill();
            let _ = fs::remove_dir_all(self.work.join("data"));
            eprintln!(
                "vigil-kubelab: control plane log kept at {}",
                self.log.display()
            );
        } else {
            let _ = self.stop();
            let _ = fs::remove_dir_all(&self.work);
        }
    }
}

/// Bearer-token credentials (built through serde: kube keeps tokens in a secret type).
fn token_auth(token: &str) -> Result<AuthInfo, Error> {
    serde_json::from_value(serde_json::json!({ "token": token }))
        .map_err(|e| Error::Config(format!("token credentials: {e}")))
}

/// The last lines the server logged since `from` (a byte offset in the log).
fn tail(log: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(log) {
        let _ = f.seek(SeekFrom::Start(from));
        let _ = f.take(4 << 20).read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
