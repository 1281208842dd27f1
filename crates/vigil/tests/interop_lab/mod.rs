//! A network-namespace lab for the mixed-cluster tests: every node, vigil or Go, on a host of
//! its own (a namespace with one veth into a bridge that lives in a namespace of its own),
//! addressed from 198.18.0.0/16 or 2001:db8::/64, all on memberlist's port 7946.
//!
//! Every host knows every other host's MAC address from the start (permanent neighbour
//! entries; the MACs are derived from the host numbers): the kernel's ARP and ND tables are
//! shared by all namespaces and hold at most `gc_thresh3` (1024) learned entries in all, which a
//! 50-node mesh (some 2,500 pairs) overflows, while permanent entries do not count.
//!
//! Each lab has its own namespace prefix (test process id and a counter, from
//! `vigil_netlab::Bridge`), so tests run in parallel. The nodes are killed by PID when their
//! guards drop; declare the lab before its nodes so that it drops (and deletes its namespaces)
//! after them.

#![allow(dead_code, unreachable_pub)]

use crate::support::{self, Kind, Node};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use vigil_netlab::{Bridge, run};

/// The port every node gossips on: each host has an address of its own.
pub const PORT: u16 = 7946;

/// A lab host: its namespace and address.
#[derive(Debug, Clone)]
pub struct Host {
    /// Namespace name.
    pub ns: String,
    /// The host's address on the bridge.
    pub ip: IpAddr,
}

impl Host {
    /// The gossip address of a node on this host.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip, PORT)
    }
}

/// The lab: a bridge and the hosts plugged into it.
pub struct Lab {
    net: Bridge,
    hosts: usize,
    capacity: usize,
}

/// Host `n`'s IPv4 address.
fn ipv4(n: usize) -> IpAddr {
    IpAddr::from([198, 18, (n >> 8) as u8, n as u8])
}

/// Host `n`'s IPv6 address.
fn ipv6(n: usize) -> IpAddr {
    format!("2001:db8::{n:x}").parse().unwrap()
}

/// Host `n`'s MAC address (locally administered).
fn mac(n: usize) -> String {
    format!("02:76:67:00:{:02x}:{:02x}", n >> 8, n & 0xff)
}

impl Lab {
    /// A new lab for up to 16 hosts; `tag` (a few letters) starts its namespace names.
    pub fn new(tag: &str) -> Self {
        Self::with_capacity(tag, 16)
    }

    /// A new lab for up to `capacity` hosts.
    pub fn with_capacity(tag: &str, capacity: usize) -> Self {
        assert!((1..250).contains(&capacity), "1..249 hosts");
        Self {
            net: Bridge::new(tag),
            hosts: 0,
            capacity,
        }
    }

    /// A new host on the bridge with the next IPv4 address, 198.18.0.1 onwards.
    pub fn host(&mut self) -> Host {
        self.add_host(ipv4, 16)
    }

    /// A new host on the bridge with the next IPv6 address, 2001:db8::1 onwards (no duplicate
    /// address detection, so it is usable at once).
    pub fn host_v6(&mut self) -> Host {
        self.add_host(ipv6, 64)
    }

    fn add_host(&mut self, addr: fn(usize) -> IpAddr, prefix_len: u8) -> Host {
        self.hosts += 1;
        let n = self.hosts;
        assert!(n <= self.capacity, "lab made for {} hosts", self.capacity);
        let name = format!("h{n}");
        let ns = self.net.add_namespace(&name);
        self.net.plug(&name, "eth0");
        let ip = addr(n);
        let mac_n = mac(n);
        let cidr = format!("{ip}/{prefix_len}");
        run(&["ip", "-n", &ns, "link", "set", "eth0", "address", &mac_n]);
        let mut args = vec!["ip", "-n", ns.as_str(), "addr", "add", &cidr, "dev", "eth0"];
        if ip.is_ipv6() {
            args.push("nodad");
        }
        run(&args);
        // Every other host of the lab, present or to come, in one batch.
        let batch: String = (1..=self.capacity)
            .filter(|&k| k != n)
            .map(|k| {
                format!(
                    "neigh replace {} lladdr {} dev eth0 nud permanent\n",
                    addr(k),
                    mac(k)
                )
            })
            .collect();
        ip_batch(&ns, &batch);
        Host { ns, ip }
    }

    /// Starts the Go peer of memberlist `bin` on `host` with Go's LAN defaults.
    pub fn go_on(
        &self,
        host: &Host,
        bin: &Path,
        name: &str,
        seeds: &[SocketAddr],
        extra: &[&str],
    ) -> Node {
        let ip = host.ip.to_string();
        let mut cmd = in_netns(&host.ns, bin.as_os_str().to_str().unwrap());
        cmd.args(["-name", name, "-bind", &ip, "-advertise", &ip]);
        cmd.args(["-profile", "lan", "-port", &PORT.to_string()]);
        if !seeds.is_empty() {
            let list: Vec<String> = seeds.iter().map(ToString::to_string).collect();
            cmd.args(["-seeds", &list.join(",")]);
        }
        cmd.args(extra);
        let mut node = support::spawn(name, Kind::Go, cmd);
        node.netns = Some(host.ns.clone());
        node
    }

    /// A new host, and the Go peer on it.
    pub fn go(&mut self, bin: &Path, name: &str, seeds: &[SocketAddr], extra: &[&str]) -> Node {
        let host = self.host();
        self.go_on(&host, bin, name, seeds, extra)
    }

    /// Starts `vigil agent` on `host` with the LAN profile and an admin endpoint on the host's
    /// loopback (reached from inside the namespace, see `Node::http`), its admin routes on.
    pub fn vigil_on(&self, host: &Host, name: &str, seeds: &[SocketAddr], extra: &[&str]) -> Node {
        let mut cmd = in_netns(&host.ns, support::vigil_bin().to_str().unwrap());
        cmd.args(["agent", "--name", name, "--profile", "lan"]);
        cmd.args(["--bind", &host.addr().to_string(), "--admin", "127.0.0.1:0"]);
        cmd.arg("--admin-token-file")
            .arg(support::admin_token_file());
        for s in seeds {
            cmd.args(["--seed", &s.to_string()]);
        }
        cmd.args(extra);
        let mut node = support::spawn(name, Kind::Vigil, cmd);
        node.netns = Some(host.ns.clone());
        node
    }

    /// A new host, and a vigil agent on it.
    pub fn vigil(&mut self, name: &str, seeds: &[SocketAddr], extra: &[&str]) -> Node {
        let host = self.host();
        self.vigil_on(&host, name, seeds, extra)
    }
}

/// Runs `ip -n NS -batch -` over `commands`, one per line; panics if any fails.
fn ip_batch(ns: &str, commands: &str) {
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ip -batch");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(commands.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ip -n {ns} -batch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `program` run inside namespace `ns`. `ip netns exec` execs the program after joining the
/// namespace, so the child's PID is the program's own and killing it by PID stops the node.
fn in_netns(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}
