//! Real processes for the mixed-cluster tests: `vigil agent` and the Go memberlist peer
//! (`conformance/cmd/vigil-gopeer`, Debian's memberlist 0.2.2), each killed by PID when its
//! guard drops, test failure or not.

#![allow(dead_code, unreachable_pub)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Upper bound for anything that should happen "within a few seconds".
pub const WAIT: Duration = Duration::from_secs(20);
/// Upper bound for failure detection with Go's LAN timings (suspicion up to 24 s before
/// confirmations shrink it).
pub const DETECT: Duration = Duration::from_secs(40);

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Go peer binary, or `None` (skip) when Go is missing and `VIGIL_REQUIRE_GO` is not 1.
/// Built once per test process (tests run in parallel; `build.sh` must not race itself).
pub fn gopeer_bin() -> Option<PathBuf> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(find_gopeer).clone()
}

fn find_gopeer() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("VIGIL_GOPEER_BIN") {
        return Some(PathBuf::from(p));
    }
    if let Ok(p) = std::env::var("VIGIL_CONFORMANCE_BIN") {
        let peer = Path::new(&p).with_file_name("vigil-gopeer");
        if peer.exists() {
            return Some(peer);
        }
    }
    let out = Command::new("bash")
        .arg(repo_root().join("conformance/build.sh"))
        .arg("conformance")
        .output();
    let why = match out {
        Ok(out) if out.status.success() => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let last = stdout.lines().last().unwrap_or_default().trim().to_string();
            let peer = Path::new(&last).join("vigil-gopeer");
            if peer.exists() {
                return Some(peer);
            }
            format!("{} missing after build", peer.display())
        }
        Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
        Err(e) => e.to_string(),
    };
    if std::env::var("VIGIL_REQUIRE_GO").as_deref() == Ok("1") {
        panic!("VIGIL_REQUIRE_GO=1 but the Go peer did not build: {why}");
    }
    eprintln!("skipping Go interop: Go peer unavailable: {why}");
    None
}

pub fn vigil_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vigil"))
}

fn log_dir() -> PathBuf {
    let d = std::env::temp_dir().join("vigil-interop");
    let _ = std::fs::create_dir_all(&d);
    d
}

/// Polls `cond` every 100 ms until it holds; panics with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    loop {
        if cond() {
            return;
        }
        if Instant::now() > end {
            panic!("timed out after {limit:?} waiting for: {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Vigil,
    Go,
}

/// A running node; killed (SIGKILL) when dropped.
pub struct Node {
    pub name: String,
    pub kind: Kind,
    /// The gossip address peers use.
    pub addr: SocketAddr,
    /// The admin endpoint (vigil only).
    pub admin: Option<SocketAddr>,
    child: Child,
    stdin: Option<ChildStdin>,
    events: Arc<Mutex<Vec<Value>>>,
    log: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let ev = self.events.lock().unwrap();
            eprintln!(
                "--- {} ({:?}, {}): {} events, stderr in {}",
                self.name,
                self.kind,
                self.addr,
                ev.len(),
                self.log.display()
            );
            for e in ev
                .iter()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                eprintln!("    {e}");
            }
        }
    }
}

pub fn spawn(name: &str, kind: Kind, mut cmd: Command) -> Node {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let log = log_dir().join(format!("{}-{n}-{name}.log", std::process::id()));
    let stderr = std::fs::File::create(&log).expect("log file");
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .stdin(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let stdout = child.stdout.take().expect("piped");
    let stdin = child.stdin.take();
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v = serde_json::from_str(&line)
                .unwrap_or_else(|_| serde_json::json!({ "event": "raw", "line": line }));
            sink.lock().unwrap().push(v);
        }
    });
    let mut node = Node {
        name: name.to_string(),
        kind,
        addr: "0.0.0.0:0".parse().unwrap(),
        admin: None,
        child,
        stdin,
        events,
        log,
    };
    let mut ready = None;
    wait_until(&format!("{name}: ready"), WAIT, || {
        if let Ok(Some(status)) = node.child.try_wait() {
            let log = std::fs::read_to_string(&node.log).unwrap_or_default();
            panic!("{name} exited before it was ready ({status}):\n{log}");
        }
        ready = node.matching("ready", |_| true).into_iter().next();
        ready.is_some()
    });
    let ready = ready.unwrap();
    let field = |k: &str| ready[k].as_str().map(str::to_string);
    match kind {
        Kind::Vigil => {
            node.addr = field("addr").unwrap().parse().unwrap();
            node.admin = field("admin").map(|a| a.parse().unwrap());
        }
        Kind::Go => {
            let ip: std::net::IpAddr = field("addr").unwrap().parse().unwrap();
            node.addr = SocketAddr::new(ip, ready["port"].as_u64().unwrap() as u16);
        }
    }
    node
}

/// The token the agents' admin routes are started with (`--admin-token-file`); [`Node::http`]
/// presents it.
pub const ADMIN_TOKEN: &str = "interop-admin-token";

fn admin_token_file() -> PathBuf {
    static FILE: OnceLock<PathBuf> = OnceLock::new();
    FILE.get_or_init(|| {
        let path = log_dir().join(format!("{}-admin-token", std::process::id()));
        std::fs::write(&path, format!("{ADMIN_TOKEN}\n")).expect("write the admin token file");
        path
    })
    .clone()
}

/// Starts `vigil agent` bound to `bind` (port 0 picks one) with an admin endpoint and its
/// admin routes on.
pub fn vigil(name: &str, bind: &str, seeds: &[SocketAddr], extra: &[&str]) -> Node {
    let mut cmd = Command::new(vigil_bin());
    cmd.args(["agent", "--name", name, "--bind", bind, "--profile", "lan"]);
    cmd.args(["--admin", "127.0.0.1:0"]);
    cmd.arg("--admin-token-file").arg(admin_token_file());
    for s in seeds {
        cmd.args(["--seed", &s.to_string()]);
    }
    cmd.args(extra);
    spawn(name, Kind::Vigil, cmd)
}

/// Starts the Go peer on `ip:port` (port 0 picks one) with Go's LAN defaults.
pub fn go(
    bin: &Path,
    name: &str,
    ip: &str,
    port: u16,
    seeds: &[SocketAddr],
    extra: &[&str],
) -> Node {
    let mut cmd = Command::new(bin);
    cmd.args([
        "-name",
        name,
        "-bind",
        ip,
        "-advertise",
        ip,
        "-profile",
        "lan",
    ]);
    cmd.args(["-port", &port.to_string()]);
    if !seeds.is_empty() {
        let list: Vec<String> = seeds.iter().map(ToString::to_string).collect();
        cmd.args(["-seeds", &list.join(",")]);
    }
    cmd.args(extra);
    spawn(name, Kind::Go, cmd)
}

impl Node {
    /// Every event so far.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap().clone()
    }

    /// Events named `event` matching `pred`, so far.
    pub fn matching(&self, event: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == event && pred(e))
            .cloned()
            .collect()
    }

    /// Waits for an event named `event` matching `pred` (earlier ones count).
    pub fn wait_event(&self, event: &str, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let mut found = None;
        wait_until(&format!("{}: event {event}", self.name), limit, || {
            found = self.matching(event, &pred).into_iter().next();
            found.is_some()
        });
        found.unwrap()
    }

    /// Waits for a `event` about `node`.
    pub fn wait_about(&self, event: &str, node: &str, limit: Duration) -> Value {
        self.wait_event(event, limit, |e| e["node"] == node)
    }

    /// Sends a command line to the Go peer.
    pub fn cmd(&mut self, line: &str) {
        assert_eq!(self.kind, Kind::Go, "commands are for Go peers");
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{line}").expect("write command");
        stdin.flush().unwrap();
    }

    /// Runs a Go command and waits for its "ok"; panics on "error".
    pub fn cmd_ok(&mut self, line: &str) {
        let before = self.events.lock().unwrap().len();
        self.cmd(line);
        let name = line.split(' ').next().unwrap().to_string();
        let mut outcome = None;
        wait_until(&format!("{}: command {line}", self.name), WAIT, || {
            outcome = self.events.lock().unwrap()[before..]
                .iter()
                .find(|e| e["cmd"] == name.as_str())
                .cloned();
            outcome.is_some()
        });
        let outcome = outcome.unwrap();
        assert_eq!(outcome["event"], "ok", "{}: {line}: {outcome}", self.name);
    }

    /// Members and their states, as this node sees them (itself included).
    pub fn members(&mut self) -> BTreeMap<String, String> {
        let list = match self.kind {
            Kind::Vigil => {
                let (status, body) = self.http("GET", "/members", "");
                assert_eq!(status, 200, "{body}");
                serde_json::from_str::<Value>(&body).unwrap()
            }
            Kind::Go => {
                let before = self.events.lock().unwrap().len();
                self.cmd("members");
                let mut found = None;
                wait_until(&format!("{}: members", self.name), WAIT, || {
                    found = self.events.lock().unwrap()[before..]
                        .iter()
                        .find(|e| e["event"] == "members")
                        .cloned();
                    found.is_some()
                });
                found.unwrap()["members"].clone()
            }
        };
        list.as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["node"].as_str().unwrap().to_string(),
                    m["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Names of members this node sees alive.
    pub fn alive(&mut self) -> Vec<String> {
        self.members()
            .into_iter()
            .filter(|(_, s)| s == "alive")
            .map(|(n, _)| n)
            .collect()
    }

    /// One request to the admin endpoint, with the admin token: (status, body).
    pub fn http(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let admin = self.admin.expect("vigil node with an admin endpoint");
        let mut s = TcpStream::connect(admin).expect("admin connect");
        s.set_read_timeout(Some(WAIT)).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ADMIN_TOKEN}\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).expect("admin response");
        let status = resp
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = resp
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }

    /// One Prometheus sample from /metrics (`name` with its labels, as written).
    pub fn metric(&self, name: &str) -> u64 {
        let (_, text) = self.http("GET", "/metrics", "");
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
    }

    /// Sends SIGKILL and waits for the process to go.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM (vigil: graceful leave, then exit) and waits up to `WAIT` for the exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(ok.success());
        let end = Instant::now() + WAIT;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                Instant::now() < end,
                "{} did not exit on SIGTERM",
                self.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Waits until each node sees exactly `names` alive.
pub fn wait_converged(nodes: &mut [&mut Node], names: &[&str], limit: Duration) {
    let mut want: Vec<String> = names.iter().map(ToString::to_string).collect();
    want.sort();
    for n in nodes.iter_mut() {
        let who = n.name.clone();
        wait_until(&format!("{who} sees {want:?} alive"), limit, || {
            n.alive() == want
        });
    }
}
