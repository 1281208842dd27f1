//! A throwaway cluster for `vigil standalone` in network namespaces: a bridge in a namespace of
//! its own, a client `cl` (198.18.0.1/24) and hosts `n1`..`nN` (198.18.0.11.., each with a
//! speaker). Nothing touches the root namespace; addresses come from 198.18.0.0/15 only.
//! Speakers are killed by PID and namespaces and files removed on drop, even when a test
//! fails. Waits are bounded polls; nothing asserts a duration.

use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vigil_netlab::{Bridge, poll, run};

pub(crate) use vigil_netlab::root_or_skip;

pub(crate) const CLIENT4: &str = "198.18.0.1";
pub(crate) const CLIENT6: &str = "2001:db8::1";
pub(crate) const VIP: &str = "198.18.0.100";
/// The IPv6 VIP of the same service: announced from the same node.
pub(crate) const VIP6: &str = "2001:db8::100";
pub(crate) const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");

/// vigil-l2-client, built by `cargo test --workspace` next to the vigil binary.
fn l2_client() -> PathBuf {
    let path = PathBuf::from(VIGIL).with_file_name("vigil-l2-client");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p vigil-l2-net` (cargo test --workspace does)",
        path.display()
    );
    path
}

/// A host's speaker process, if running.
struct Host {
    name: String,
    child: Option<Child>,
}

pub(crate) struct Cluster {
    hosts: Vec<Host>,
    /// Dropped last, after `Drop for Cluster` has killed the speakers: deletes the namespaces.
    net: Bridge,
}

impl Cluster {
    /// The bridge, the client and `n` hosts, with no speaker started yet.
    pub(crate) fn new(n: usize) -> Self {
        let mut lab = Self {
            hosts: Vec::new(),
            net: Bridge::new("vgsa"),
        };
        lab.plug("cl", &format!("{CLIENT4}/24"));
        run(&[
            "ip",
            "-n",
            &lab.ns("cl"),
            "addr",
            "add",
            &format!("{CLIENT6}/64"),
            "dev",
            "eth0",
            "nodad",
        ]);
        for i in 1..=n {
            let name = format!("n{i}");
            lab.plug(&name, &format!("198.18.0.{}/24", 10 + i));
            lab.hosts.push(Host { name, child: None });
        }
        // Encrypted, labelled gossip, with a key from `vigil keygen` shared by every host.
        run(&[
            VIGIL,
            "keygen",
            "--out",
            &lab.keyring_path().display().to_string(),
        ]);
        lab
    }

    /// The cluster's keyring file.
    pub(crate) fn keyring_path(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/{}.keyring.json", self.net.prefix()))
    }

    fn ns(&self, host: &str) -> String {
        self.net.ns(host)
    }

    /// A namespace for `host` with eth0 plugged into the bridge and given `cidr`.
    fn plug(&mut self, host: &str, cidr: &str) {
        self.net.add_namespace(host);
        self.net.plug(host, "eth0");
        self.net.ip(host, &["addr", "add", cidr, "dev", "eth0"]);
    }

    /// Host names, `n1`..`nN`.
    pub(crate) fn names(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.name.clone()).collect()
    }

    pub(crate) fn mac(&self, host: &str) -> String {
        self.net.mac(host, "eth0")
    }

    pub(crate) fn config_path(&self, host: &str) -> PathBuf {
        PathBuf::from(format!("/tmp/{}-{host}.yaml", self.net.prefix()))
    }

    pub(crate) fn log_path(&self, host: &str) -> PathBuf {
        PathBuf::from(format!("/tmp/{}-{host}.log", self.net.prefix()))
    }

    /// A file whose existence makes `host`'s health check fail (see [`Cluster::config`]).
    pub(crate) fn down_flag(&self, host: &str) -> PathBuf {
        PathBuf::from(format!("/tmp/{}-{host}.down", self.net.prefix()))
    }

    /// A configuration for `host`: every host a seed, answering on eth0, the service `web`
    /// on [`VIP`] with a command health check that fails while [`Cluster::down_flag`]
    /// exists, then `extra` (YAML appended under `services:` or as more top-level keys).
    pub(crate) fn config(&self, host: &str, election: &str, extra_services: &str) -> String {
        let index: usize = host[1..].parse().unwrap();
        let seeds: Vec<String> = (1..=self.hosts.len())
            .map(|i| format!("198.18.0.{}", 10 + i))
            .collect();
        let mut text = String::new();
        let _ = write!(
            text,
            "node: {{name: {host}}}\n\
             gossip: {{bind: \"198.18.0.{}:7946\", seeds: [{}], keyring_file: {}, label: lab}}\n\
             interfaces: {{include: [eth0]}}\n\
             http: {{listen: \"127.0.0.1:7472\"}}\n\
             election: {{{election}}}\n\
             services:\n  \
             - name: web\n    \
               vips: [{VIP}, \"{VIP6}\"]\n    \
               health_check: {{command: [/bin/sh, -c, \"test ! -e {}\"], interval: 100ms}}\n{extra_services}",
            10 + index,
            seeds.join(", "),
            self.keyring_path().display(),
            self.down_flag(host).display()
        );
        text
    }

    /// Writes `host`'s configuration file.
    pub(crate) fn write_config(&self, host: &str, text: &str) {
        // Write then rename, so the daemon never reads half a file.
        let path = self.config_path(host);
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }

    /// Starts `host`'s speaker on its current configuration file.
    pub(crate) fn start(&mut self, host: &str) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(host))
            .unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(host),
                VIGIL,
                "standalone",
                "--config",
            ])
            .arg(self.config_path(host))
            .args(["--log-level", "info"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn vigil standalone");
        let h = self.hosts.iter_mut().find(|h| h.name == host).unwrap();
        assert!(h.child.is_none(), "{host} already runs");
        h.child = Some(child);
    }

    /// Kills `host`'s speaker with SIGKILL (no leave: the others must detect it).
    pub(crate) fn kill(&mut self, host: &str) {
        let h = self.hosts.iter_mut().find(|h| h.name == host).unwrap();
        if let Some(mut child) = h.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops `host`'s speaker with SIGTERM and waits (bounded) for it to exit; SIGKILL if it
    /// does not. Returns whether it exited by itself, successfully.
    pub(crate) fn terminate(&mut self, host: &str) -> bool {
        let h = self.hosts.iter_mut().find(|h| h.name == host).unwrap();
        let Some(mut child) = h.child.take() else {
            return false;
        };
        run(&["kill", "-TERM", &child.id().to_string()]);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `host`'s status document, from `vigil status --json` run in its namespace.
    pub(crate) fn status(&self, host: &str) -> Option<Value> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns(host), VIGIL, "status", "--json"])
            .args(["--addr", "127.0.0.1:7472"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// `vigil status` as a person sees it.
    pub(crate) fn status_text(&self, host: &str) -> String {
        let out = run(&[
            "ip",
            "netns",
            "exec",
            &self.ns(host),
            VIGIL,
            "status",
            "--addr",
            "127.0.0.1:7472",
        ]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `host`'s `/metrics`, fetched with `vigil`'s own status client would need a flag; use
    /// a raw HTTP GET from inside the namespace instead.
    pub(crate) fn metrics(&self, host: &str) -> String {
        let script = "exec 3<>/dev/tcp/127.0.0.1/7472; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; timeout 5 cat <&3";
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns(host), "bash", "-c", script])
            .stdin(Stdio::null())
            .output()
            .expect("bash");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The owner of [`VIP`] as `host` sees it, once `host` sees all `live` hosts alive.
    pub(crate) fn owner_seen_by(&self, host: &str) -> Option<String> {
        let status = self.status(host)?;
        let vip = status["vips"]
            .as_array()?
            .iter()
            .find(|v| v["vip"] == VIP)?
            .clone();
        vip["owner"].as_str().map(str::to_string)
    }

    /// Names of the members `host` sees alive.
    pub(crate) fn alive_seen_by(&self, host: &str) -> Vec<String> {
        self.status(host)
            .and_then(|s| {
                s["members"].as_array().map(|ms| {
                    ms.iter()
                        .filter(|m| m["state"] == "alive")
                        .filter_map(|m| m["name"].as_str().map(str::to_string))
                        .collect()
                })
            })
            .unwrap_or_default()
    }

    /// Asks for [`VIP`] with broadcast ARP from the client and returns the MACs of the
    /// answers to this question (one 300 ms window).
    pub(crate) fn arp_answers(&self) -> Vec<String> {
        let client = l2_client();
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("cl")])
            .arg(client)
            .args([
                "arp",
                "--iface",
                "eth0",
                "--src-ip",
                CLIENT4,
                "--target",
                VIP,
                "--wait-ms",
                "300",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("vigil-l2-client");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            // Answers to this question, not gratuitous replies (whose target is the VIP).
            .filter(|l| {
                l.starts_with("arp-reply")
                    && l.split_whitespace()
                        .any(|w| w == format!("target_ip={CLIENT4}"))
            })
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("mac="))
                    .map(str::to_string)
            })
            .collect()
    }

    /// Asks for [`VIP6`] with a neighbour solicitation from the client and returns the
    /// target link-layer addresses of the advertisements answering it.
    pub(crate) fn ns_answers(&self) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("cl")])
            .arg(l2_client())
            .args([
                "ns",
                "--iface",
                "eth0",
                "--src-ip",
                CLIENT6,
                "--target",
                VIP6,
                "--wait-ms",
                "300",
            ])
            .stdin(Stdio::null())
            .output()
            .expect("vigil-l2-client");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| {
                l.starts_with("na ") && l.split_whitespace().any(|w| w == format!("dst={CLIENT6}"))
            })
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("mac="))
                    .map(str::to_string)
            })
            .collect()
    }

    /// Sends SIGHUP to `host`'s speaker.
    pub(crate) fn hangup(&self, host: &str) {
        let h = self.hosts.iter().find(|h| h.name == host).unwrap();
        let pid = h.child.as_ref().expect("running").id().to_string();
        run(&["kill", "-HUP", &pid]);
    }

    /// `host`'s log so far.
    pub(crate) fn log(&self, host: &str) -> String {
        std::fs::read_to_string(self.log_path(host)).unwrap_or_default()
    }

    /// The speakers' logs, for failure messages.
    pub(crate) fn logs(&self) -> String {
        let mut out = String::new();
        for h in &self.hosts {
            let text = std::fs::read_to_string(self.log_path(&h.name)).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            let _ = writeln!(out, "--- {} (last lines)", h.name);
            for l in tail.iter().rev() {
                let _ = writeln!(out, "{l}");
            }
        }
        out
    }

    /// Polls `check` every 100 ms until it holds; panics with the logs after `limit` (a bound,
    /// not a timing assertion: the limit is generous).
    pub(crate) fn wait_for(&self, what: &str, limit: Duration, check: impl FnMut() -> bool) {
        if !poll(limit, Duration::from_millis(100), check) {
            panic!("timed out waiting for {what}\n{}", self.logs());
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            if let Some(mut child) = h.child.take() {
                // By PID: `ip netns exec` execs the program, so this is vigil itself.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_file(self.keyring_path());
        for h in &self.hosts {
            for path in [
                self.config_path(&h.name),
                self.log_path(&h.name),
                self.down_flag(&h.name),
            ] {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}
