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
//! prefix and is deleted, with anything still running in it, when the `Bridge` is dropped,
//! even when a test fails; the processes a test starts are its own to kill (by PID) before
//! that.

pub mod args;
pub mod netns;
pub mod prober;

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as Mac;

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

/// Runs a command to completion; its output, or an error naming it with its stderr.
pub fn try_run(args: &[&str]) -> Result<Output, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

/// Runs a command to completion and panics with its stderr if it fails (for tests).
pub fn run(args: &[&str]) -> Output {
    try_run(args).unwrap_or_else(|e| panic!("{e}"))
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
///
/// Dropping it tears the lab down ([`Bridge::teardown`]) unless [`Bridge::keep`] was called.
/// The panicking methods are for tests; `vigil lab` uses the `try_` ones.
#[derive(Debug)]
pub struct Bridge {
    prefix: String,
    namespaces: Vec<String>,
    kept: bool,
}

impl Bridge {
    /// Creates the bridge namespace under a unique prefix; `tag` names the test suite in it.
    /// Panics if that fails (for tests).
    pub fn new(tag: &str) -> Self {
        let prefix = format!(
            "{tag}-{}-{}",
            std::process::id(),
            NEXT_LAB.fetch_add(1, Ordering::Relaxed)
        );
        Self::named(&prefix).unwrap_or_else(|e| panic!("lab {prefix}: {e}"))
    }

    /// Creates the bridge namespace `<prefix>-br` under exactly `prefix` (the caller makes it
    /// unique). What was made before a failing step is removed again.
    pub fn named(prefix: &str) -> Result<Self, String> {
        let mut lab = Self {
            prefix: prefix.to_string(),
            namespaces: Vec::new(),
            kept: false,
        };
        let br = lab.try_add_namespace("br")?;
        try_run(&["ip", "-n", &br, "link", "add", "br0", "type", "bridge"])?;
        try_run(&["ip", "-n", &br, "link", "set", "br0", "up"])?;
        // Where br_netfilter is loaded, the bridge would run frames through the host's
        // firewall tables and drop malformed ones before they reach the hosts; a switch does
        // not. (Skipped quietly where sysctl or the module is missing.)
        for table in ["arptables", "iptables", "ip6tables"] {
            let _ = Command::new("ip")
                .args(["netns", "exec", &br, "sysctl", "-qw"])
                .arg(format!("net.bridge.bridge-nf-call-{table}=0"))
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        Ok(lab)
    }

    /// This lab's namespace-name prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The namespace of `host` (`br` is the bridge's).
    pub fn ns(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    /// The bridge's port for `iface` of `host` (in the bridge namespace): setting it down
    /// unplugs the host's cable.
    pub fn port(&self, host: &str, iface: &str) -> String {
        format!("p-{host}-{iface}")
    }

    /// Creates the namespace of `host` with its loopback up; returns its name. Panics on
    /// failure (for tests).
    pub fn add_namespace(&mut self, host: &str) -> String {
        self.try_add_namespace(host)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Creates the namespace of `host` with its loopback up; returns its name.
    pub fn try_add_namespace(&mut self, host: &str) -> Result<String, String> {
        let ns = self.ns(host);
        try_run(&["ip", "netns", "add", &ns])?;
        self.namespaces.push(ns.clone());
        try_run(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Plugs a new interface `iface` of `host` into the bridge and brings both ends up.
    /// Panics on failure (for tests).
    pub fn plug(&self, host: &str, iface: &str) {
        self.try_plug(host, iface).unwrap_or_else(|e| panic!("{e}"));
    }

    /// Plugs a new interface `iface` of `host` into the bridge and brings both ends up.
    pub fn try_plug(&self, host: &str, iface: &str) -> Result<(), String> {
        let (ns, br) = (self.ns(host), self.ns("br"));
        let port = self.port(host, iface);
        try_run(&[
            "ip", "link", "add", iface, "netns", &ns, "type", "veth", "peer", "name", &port,
            "netns", &br,
        ])?;
        try_run(&["ip", "-n", &br, "link", "set", &port, "master", "br0", "up"])?;
        try_run(&["ip", "-n", &ns, "link", "set", iface, "up"])?;
        Ok(())
    }

    /// Runs `ip` inside the namespace of `host`; returns its stdout. Panics on failure (for
    /// tests).
    pub fn ip(&self, host: &str, args: &[&str]) -> String {
        self.try_ip(host, args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `ip` inside the namespace of `host`; returns its stdout.
    pub fn try_ip(&self, host: &str, args: &[&str]) -> Result<String, String> {
        let ns = self.ns(host);
        let mut full = vec!["ip", "-n", ns.as_str()];
        full.extend_from_slice(args);
        Ok(String::from_utf8_lossy(&try_run(&full)?.stdout).into_owned())
    }

    /// The MAC address of `iface` in `host`.
    pub fn mac(&self, host: &str, iface: &str) -> String {
        let (_, mac) = link(&self.ns(host), iface).unwrap_or_else(|e| panic!("{e}"));
        mac.to_string()
    }

    /// Leaves everything running when the lab is dropped (`vigil lab --keep`).
    pub fn keep(&mut self) {
        self.kept = true;
    }

    /// Kills whatever still runs in the lab's namespaces and deletes them, hosts first and the
    /// bridge last; how many namespaces there were. Doing it twice does nothing more.
    pub fn teardown(&mut self) -> usize {
        let n = self.namespaces.len();
        for ns in self.namespaces.drain(..).rev() {
            remove_namespace(&ns);
        }
        n
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if !self.kept {
            self.teardown();
        }
    }
}

/// The namespaces whose names start with `<prefix>-`, as `ip netns list` shows them.
pub fn namespaces_with(prefix: &str) -> Result<Vec<String>, String> {
    let out = try_run(&["ip", "netns", "list"])?;
    let mine = format!("{prefix}-");
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&mine))
        .map(str::to_string)
        .collect())
}

/// Kills (SIGKILL, by PID) every process left in namespace `ns` and deletes it; how many
/// processes were killed.
pub fn remove_namespace(ns: &str) -> usize {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let mut killed = 0;
    if let Ok(out) = try_run(&["ip", "netns", "pids", ns]) {
        for pid in String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
        {
            if pid != std::process::id() as i32 && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
            {
                killed += 1;
            }
        }
    }
    let _ = Command::new("ip")
        .args(["netns", "del", ns])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    killed
}

/// The interface index and MAC of `iface` in namespace `ns`.
pub fn link(ns: &str, iface: &str) -> Result<(u32, Mac), String> {
    let out = try_run(&["ip", "-n", ns, "-o", "link", "show", iface])?;
    let out = String::from_utf8_lossy(&out.stdout);
    let index = out
        .split(':')
        .next()
        .and_then(|i| i.trim().parse().ok())
        .ok_or_else(|| format!("{ns}: no interface index for {iface} in {out:?}"))?;
    let mac = out
        .split("link/ether ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| format!("{ns}: no MAC for {iface} in {out:?}"))?;
    Ok((index, mac))
}
