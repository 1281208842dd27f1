//! A throwaway Layer-2 lab in network namespaces: a bridge in a namespace of its own, a client
//! and announcing hosts each plugged into it with a veth pair. Nothing touches the root
//! namespace, addresses come from 198.18.0.0/15 and 2001:db8::/32, and everything (processes by
//! PID, then namespaces) is torn down on drop, even when a test fails.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;
use vigil_netlab::{Bridge, poll, run};

pub(crate) use vigil_netlab::root_or_skip;

pub(crate) const CLIENT4: &str = "198.18.0.1";
pub(crate) const CLIENT6: &str = "2001:db8::1";
pub(crate) const VIP4: &str = "198.18.0.100";
pub(crate) const VIP6: &str = "2001:db8::100";

pub(crate) const ANNOUNCE: &str = env!("CARGO_BIN_EXE_vigil-l2-announce");
pub(crate) const CLIENT: &str = env!("CARGO_BIN_EXE_vigil-l2-client");

/// A running announcer.
pub(crate) struct Speaker {
    /// Index of its process in the lab, for [`Lab::alive`].
    pub(crate) process: usize,
    stdin: ChildStdin,
    stats_file: String,
}

pub(crate) struct Lab {
    children: Vec<Child>,
    files: Vec<String>,
    /// Dropped last, after `Drop for Lab` has killed the processes: deletes the namespaces.
    net: Bridge,
}

impl Lab {
    /// A bridge, a client `c` with 198.18.0.1/24 and 2001:db8::1/64 on eth0, and `hosts`
    /// with eth0 plugged into the bridge (no addresses: the VIPs are all they announce).
    pub(crate) fn new(hosts: &[&str]) -> Self {
        let mut lab = Self {
            children: Vec::new(),
            files: Vec::new(),
            net: Bridge::new("vgl2"),
        };
        let c = lab.net.add_namespace("c");
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
            lab.net.add_namespace(host);
            lab.plug(host, "eth0");
        }
        lab
    }

    pub(crate) fn ns(&self, name: &str) -> String {
        self.net.ns(name)
    }

    /// Plugs a new interface `iface` of `host` into the bridge and brings both ends up.
    pub(crate) fn plug(&self, host: &str, iface: &str) {
        self.net.plug(host, iface);
    }

    /// Runs `ip` inside a host's namespace.
    pub(crate) fn ip(&self, host: &str, args: &[&str]) -> String {
        self.net.ip(host, args)
    }

    /// Sets a sysctl inside a host's namespace.
    pub(crate) fn sysctl(&self, host: &str, setting: &str) {
        let ns = self.ns(host);
        run(&["ip", "netns", "exec", &ns, "sysctl", "-qw", setting]);
    }

    pub(crate) fn mac(&self, host: &str, iface: &str) -> String {
        self.net.mac(host, iface)
    }

    /// Starts an announcer in `host` and waits until its sockets are open.
    pub(crate) fn speaker(&mut self, host: &str, args: &[&str]) -> Speaker {
        let stats_file = format!("/tmp/{}-{host}.stats", self.net.prefix());
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
pub(crate) fn wait_for(what: &str, limit: Duration, check: impl FnMut() -> bool) {
    let held = poll(limit, Duration::from_millis(50), check);
    assert!(held, "timed out waiting for {what}");
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
