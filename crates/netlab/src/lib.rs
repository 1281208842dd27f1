//! vigil's lab and bench tooling, one implementation each, for the tests, the benches and
//! `vigil lab`:
//!
//! - [`Bridge`]: a throwaway lab, a bridge in a namespace of its own and hosts plugged into it
//!   with veth pairs;
//! - [`netns`]: running a thread of the calling process inside one of those namespaces;
//! - [`prober`]: the failover prober (ARP, neighbour solicitations, ICMP echo) and the outage
//!   arithmetic over what it recorded, used by `vigil-l2-client watch` and `vigil lab`;
//! - the `vigil-l2-client` and `vigil-l2-announce` binaries (`src/bin`), with [`args`].
//!
//! Nothing here touches the root namespace. Every namespace a [`Bridge`] creates carries its
//! unique prefix and is deleted when the `Bridge` is dropped, even when a test fails; the
//! processes a test starts are its own to kill (by PID) before that.

pub mod args;
pub mod netns;
pub mod prober;

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Whether a test may run: it needs root for network namespaces. Without root it fails when
/// `VIGIL_REQUIRE_ROOT=1` (as in CI), and otherwise prints a skip line and says no.
pub fn root_or_skip(test: &str) -> bool {
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

/// Runs a command to completion and panics with its stderr if it fails.
pub fn run(args: &[&str]) -> Output {
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

/// Polls `check` every `every` until it holds (`true`), or gives up after `limit` (`false`):
/// a bound, not a timing assertion, so callers choose generous limits.
pub fn poll(limit: Duration, every: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !check() {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(every);
    }
    true
}

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);

/// A bridge `br0` in a namespace of its own, and the host namespaces plugged into it.
#[derive(Debug)]
pub struct Bridge {
    prefix: String,
    namespaces: Vec<String>,
}

impl Bridge {
    /// Creates the bridge namespace; `tag` names the test suite in the namespace prefix.
    pub fn new(tag: &str) -> Self {
        let prefix = format!(
            "{tag}-{}-{}",
            std::process::id(),
            NEXT_LAB.fetch_add(1, Ordering::Relaxed)
        );
        let mut lab = Self {
            prefix,
            namespaces: Vec::new(),
        };
        let br = lab.add_namespace("br");
        run(&["ip", "-n", &br, "link", "add", "br0", "type", "bridge"]);
        run(&["ip", "-n", &br, "link", "set", "br0", "up"]);
        // Where br_netfilter is loaded, the bridge would run frames through the host's
        // firewall tables and drop malformed ones before they reach the hosts; a switch does
        // not. (Skipped quietly where sysctl or the module is missing.)
        for table in ["arptables", "iptables", "ip6tables"] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &br, "sysctl", "-qw"])
                .arg(format!("net.bridge.bridge-nf-call-{table}=0"))
                .stderr(Stdio::null())
                .status();
        }
        lab
    }

    /// This lab's unique namespace-name prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace of `host`.
    pub fn ns(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    /// Creates the namespace of `host` with its loopback up; returns its name.
    pub fn add_namespace(&mut self, host: &str) -> String {
        let ns = self.ns(host);
        run(&["ip", "netns", "add", &ns]);
        self.namespaces.push(ns.clone());
        run(&["ip", "-n", &ns, "link", "set", "lo", "up"]);
        ns
    }

    /// Plugs a new interface `iface` of `host` into the bridge and brings both ends up.
    pub fn plug(&self, host: &str, iface: &str) {
        let (ns, br) = (self.ns(host), self.ns("br"));
        let port = format!("p-{host}-{iface}");
        run(&[
            "ip", "link", "add", iface, "netns", &ns, "type", "veth", "peer", "name", &port,
            "netns", &br,
        ]);
        run(&["ip", "-n", &br, "link", "set", &port, "master", "br0", "up"]);
        run(&["ip", "-n", &ns, "link", "set", iface, "up"]);
    }

    /// Runs `ip` inside the namespace of `host`; returns its stdout.
    pub fn ip(&self, host: &str, args: &[&str]) -> String {
        let ns = self.ns(host);
        let mut full = vec!["ip", "-n", ns.as_str()];
        full.extend_from_slice(args);
        String::from_utf8_lossy(&run(&full).stdout).into_owned()
    }

    /// The MAC address of `iface` in `host`.
    pub fn mac(&self, host: &str, iface: &str) -> String {
        let out = self.ip(host, &["-o", "link", "show", iface]);
        let after = out.split("link/ether ").nth(1).expect("an Ethernet link");
        after.split_whitespace().next().unwrap().to_string()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}
