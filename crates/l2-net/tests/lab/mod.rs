//! A throwaway Layer-2 lab in network namespaces: a bridge in a namespace of its own, a client
//! and announcing hosts each plugged into it with a veth pair. Nothing touches the root
//! namespace, addresses come from 198.18.0.0/15 and 2001:db8::/32, and everything (processes by
//! PID, then namespaces) is torn down on drop, even when a test fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub(crate) const CLIENT4: &str = "198.18.0.1";
pub(crate) const CLIENT6: &str = "2001:db8::1";
pub(crate) const VIP4: &str = "198.18.0.100";
pub(crate) const VIP6: &str = "2001:db8::100";

pub(crate) const ANNOUNCE: &str = env!("CARGO_BIN_EXE_vigil-l2-announce");
pub(crate) const CLIENT: &str = env!("CARGO_BIN_EXE_vigil-l2-client");

/// Whether this test may run: root, and `ip netns` works. Without root it fails when
/// `VIGIL_REQUIRE_ROOT=1` (CI), and otherwise prints a skip line and says no.
pub(crate) fn root_or_skip(test: &str) -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .unwrap_or_default();
    if uid == "0" {
        return true;
    }
    assert!(
        std::env::var("VIGIL_REQUIRE_ROOT").as_deref() != Ok("1"),
        "{test}: needs root (VIGIL_REQUIRE_ROOT=1)"
    );
    eprintln!("skipping {test}: needs root for network namespaces");
    false
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// A running announcer.
pub(crate) struct Speaker {
    /// Index of its process in the lab, for [`Lab::alive`].
    pub(crate) process: usize,
    stdin: ChildStdin,
    stats_file: String,
}

pub(crate) struct Lab {
    prefix: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
    files: Vec<String>,
}

impl Lab {
    /// A bridge, a client `c` with 198.18.0.1/24 and 2001:db8::1/64 on eth0, and `hosts`
    /// with eth0 plugged into the bridge (no addresses: the VIPs are all they announce).
    pub(crate) fn new(hosts: &[&str]) -> Self {
        let prefix = format!(
            "vgl2-{}-{}",
            std::process::id(),
            NEXT_LAB.fetch_add(1, Ordering::Relaxed)
        );
        let mut lab = Self {
            prefix,
            namespaces: Vec::new(),
            children: Vec::new(),
            files: Vec::new(),
        };
        let br = lab.add_namespace("br");
        run(&["ip", "-n", &br, "link", "add", "br0", "type", "bridge"]);
        run(&["ip", "-n", &br, "link", "set", "br0", "up"]);
        // Where br_netfilter is loaded, the bridge would run IPv6 frames through ip6tables and
        // drop the malformed ones before they reach the hosts; a real switch does not.
        for table in ["arptables", "iptables", "ip6tables"] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &br, "sysctl", "-qw"])
                .arg(format!("net.bridge.bridge-nf-call-{table}=0"))
                .stderr(Stdio::null())
                .status();
        }
        let c = lab.add_namespace("c");
        lab.plug("c", "eth0");
        run(&[
            "ip",
            "-n",
            &c,
            "addr",
            "add",
            "198.18.0.1/24",
            "dev",
            "eth0",
        ]);
        run(&[
            "ip",
            "-n",
            &c,
            "addr",
            "add",
            "2001:db8::1/64",
            "dev",
            "eth0",
            "nodad",
        ]);
        for host in hosts {
            lab.add_namespace(host);
            lab.plug(host, "eth0");
        }
        lab
    }

    pub(crate) fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn add_namespace(&mut self, name: &str) -> String {
        let ns = self.ns(name);
        run(&["ip", "netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// Plugs a new interface `iface` of `host` into the bridge and brings both ends up.
    pub(crate) fn plug(&self, host: &str, iface: &str) {
        let (ns, br) = (self.ns(host), self.ns("br"));
        let port = format!("p-{host}-{iface}");
        run(&[
            "ip", "link", "add", iface, "netns", &ns, "type", "veth", "peer", "name", &port,
            "netns", &br,
        ]);
        run(&["ip", "-n", &br, "link", "set", &port, "master", "br0", "up"]);
        run(&["ip", "-n", &ns, "link", "set", iface, "up"]);
    }

    /// Runs `ip` inside a host's namespace.
    pub(crate) fn ip(&self, host: &str, args: &[&str]) -> String {
        let ns = self.ns(host);
        let mut full = vec!["ip", "-n", ns.as_str()];
        full.extend_from_slice(args);
        String::from_utf8_lossy(&run(&full).stdout).into_owned()
    }

    /// Sets a sysctl inside a host's namespace.
    pub(crate) fn sysctl(&self, host: &str, setting: &str) {
        let ns = self.ns(host);
        run(&["ip", "netns", "exec", &ns, "sysctl", "-qw", setting]);
    }

    pub(crate) fn mac(&self, host: &str, iface: &str) -> String {
        let out = self.ip(host, &["-o", "link", "show", iface]);
        let after = out.split("link/ether ").nth(1).expect("an Ethernet link");
        after.split_whitespace().next().unwrap().to_string()
    }

    /// Starts an announcer in `host` and waits until its sockets are open.
    pub(crate) fn speaker(&mut self, host: &str, args: &[&str]) -> Speaker {
        let stats_file = format!("/tmp/{}-{host}.stats", self.prefix);
        self.files.push(stats_file.clone());
        let ns = self.ns(host);
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns, ANNOUNCE, "--stats-file", &stats_file])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn announcer");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let process = self.children.len();
        self.children.push(child);
        let mut line = String::new();
        stdout.read_line(&mut line).expect("announcer output");
        assert_eq!(line.trim(), "ready", "announcer in {host} did not start");
        let speaker = Speaker {
            process,
            stdin,
            stats_file,
        };
        wait_for(&format!("{host} stats"), Duration::from_secs(5), || {
            speaker.stats().contains_key("frames_received")
        });
        speaker
    }

    /// Runs the client in the client namespace and returns its output lines.
    pub(crate) fn client(&self, args: &[&str]) -> Vec<String> {
        let ns = self.ns("c");
        let mut full = vec!["ip", "netns", "exec", ns.as_str(), CLIENT];
        full.extend_from_slice(args);
        String::from_utf8_lossy(&run(&full).stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Starts the client in the background; collect its lines with [`Lab::finish`].
    pub(crate) fn client_background(&mut self, args: &[&str]) -> usize {
        let ns = self.ns("c");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, CLIENT])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn client");
        self.children.push(child);
        self.children.len() - 1
    }

    /// Waits for a background client (bounded by its own `--wait-ms`) and returns its lines.
    pub(crate) fn finish(&mut self, index: usize) -> Vec<String> {
        let mut out = String::new();
        let child = &mut self.children[index];
        std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
        let _ = child.wait();
        out.lines().map(str::to_string).collect()
    }

    /// Whether a speaker's process is still running.
    pub(crate) fn alive(&mut self, speaker: &Speaker) -> bool {
        matches!(self.children[speaker.process].try_wait(), Ok(None))
    }

    /// The client's neighbour entry for `addr`, as `ip -j neigh` prints it.
    pub(crate) fn client_neighbour(&self, addr: &str) -> String {
        self.ip("c", &["-j", "neigh", "show", addr, "dev", "eth0"])
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for child in &mut self.children {
            // By PID: `ip netns exec` execs the program, so this is the program itself.
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
    }
}

impl Speaker {
    /// Sends a command line (`own ...`, `release`).
    pub(crate) fn command(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("announcer stdin");
        self.stdin.flush().unwrap();
    }

    pub(crate) fn stats(&self) -> BTreeMap<String, String> {
        std::fs::read_to_string(&self.stats_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    pub(crate) fn stat(&self, name: &str) -> u64 {
        self.stats()
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// Polls `check` every 50 ms until it holds; panics after `limit` (a bound, not a timing
/// assertion: the limit is generous).
pub(crate) fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Lines of one kind whose `key=value` words include all of `want`.
pub(crate) fn matching<'a>(
    lines: &'a [String],
    kind: &str,
    want: &[(&str, &str)],
) -> Vec<&'a String> {
    lines
        .iter()
        .filter(|line| {
            let mut words = line.split_whitespace();
            words.next() == Some(kind)
                && want.iter().all(|(k, v)| {
                    line.split_whitespace()
                        .any(|w| w.split_once('=') == Some((k, v)))
                })
        })
        .collect()
}
