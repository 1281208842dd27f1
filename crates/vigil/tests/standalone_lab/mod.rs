//! A throwaway cluster for `vigil standalone` in network namespaces: a bridge in a namespace of
//! its own, a client `cl` (198.18.0.1/24) and hosts `n1`..`nN` (198.18.0.11.., each with a
//! speaker). Nothing touches the root namespace; addresses come from 198.18.0.0/15 only.
//! Speakers are killed by PID and namespaces and files removed on drop, even when a test
//! fails. Waits are bounded polls; nothing asserts a duration.

// Each test binary uses its own part of the lab.
#![allow(dead_code)]

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
/// The port of the hosts' TCP service (see [`Cluster::start_services`]).
pub(crate) const SERVICE_PORT: u16 = 8080;
/// Bound on the waits for a lab to settle (two shared cores, other tests beside).
const SETTLE: Duration = Duration::from_secs(60);

/// vigil-l2-client, built by `cargo test --workspace` next to the vigil binary.
fn l2_client() -> PathBuf {
    let path = PathBuf::from(VIGIL).with_file_name("vigil-l2-client");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p vigil-netlab` (cargo test --workspace does)",
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
    /// More `key: value` pairs for every host's `gossip:` map (e.g. `rejoin_interval: 1s`).
    pub(crate) gossip_extra: String,
    /// Other processes of this lab (probers), killed by PID on drop.
    helpers: Vec<Child>,
    /// Dropped last, after `Drop for Cluster` has killed the speakers: deletes the namespaces.
    net: Bridge,
}

impl Cluster {
    /// The bridge, the client and `n` hosts, with no speaker started yet.
    pub(crate) fn new(n: usize) -> Self {
        let mut lab = Self {
            hosts: Vec::new(),
            gossip_extra: String::new(),
            helpers: Vec::new(),
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
    /// exists (two failures in a row: with `fall: 1`, one `sh` slower than the 100 ms timeout
    /// on a loaded machine moved the VIP in the soak test), then `extra` (YAML appended under `services:` or as more top-level keys).
    pub(crate) fn config(&self, host: &str, election: &str, extra_services: &str) -> String {
        let index: usize = host[1..].parse().unwrap();
        let seeds: Vec<String> = (1..=self.hosts.len())
            .map(|i| format!("198.18.0.{}", 10 + i))
            .collect();
        let mut text = String::new();
        let _ = write!(
            text,
            "node: {{name: {host}}}\n\
             gossip: {{bind: \"198.18.0.{}:7946\", seeds: [{}], keyring_file: {}, label: lab{}}}\n\
             interfaces: {{include: [eth0]}}\n\
             http: {{listen: \"127.0.0.1:7472\"}}\n\
             election: {{{election}}}\n\
             services:\n  \
             - name: web\n    \
               vips: [{VIP}, \"{VIP6}\"]\n    \
               health_check: {{command: [/bin/sh, -c, \"test ! -e {}\"], interval: 100ms, fall: 2}}\n{extra_services}",
            10 + index,
            seeds.join(", "),
            self.keyring_path().display(),
            if self.gossip_extra.is_empty() {
                String::new()
            } else {
                format!(", {}", self.gossip_extra)
            },
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
    /// answers to this question (one 300 ms window). Gratuitous replies, whose target is the
    /// VIP itself, are not answers.
    pub(crate) fn arp_answers(&self) -> Vec<String> {
        self.answers(
            "arp",
            CLIENT4,
            VIP,
            "arp-reply",
            &format!("target_ip={CLIENT4}"),
        )
    }

    /// Asks for [`VIP6`] with a neighbour solicitation from the client and returns the
    /// target link-layer addresses of the advertisements answering it.
    pub(crate) fn ns_answers(&self) -> Vec<String> {
        self.answers("ns", CLIENT6, VIP6, "na ", &format!("dst={CLIENT6}"))
    }

    /// Runs `vigil-l2-client QUESTION` from the client for `target` (one 300 ms window) and
    /// returns the `mac=` of every printed line that starts with `kind` and has the word
    /// `to_us` (what makes it an answer to this question).
    fn answers(
        &self,
        question: &str,
        src: &str,
        target: &str,
        kind: &str,
        to_us: &str,
    ) -> Vec<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("cl")])
            .arg(l2_client())
            .args([
                question, "--iface", "eth0", "--src-ip", src, "--target", target,
            ])
            .args(["--wait-ms", "300"])
            .stdin(Stdio::null())
            .output()
            .expect("vigil-l2-client");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with(kind) && l.split_whitespace().any(|w| w == to_us))
            .filter_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix("mac="))
                    .map(str::to_string)
            })
            .collect()
    }

    /// `host`'s address on the bridge.
    pub(crate) fn addr(&self, host: &str) -> String {
        let index: usize = host[1..].parse().unwrap();
        format!("198.18.0.{}", 10 + index)
    }

    /// The PID of `host`'s speaker, if running.
    pub(crate) fn pid(&self, host: &str) -> Option<u32> {
        let h = self.hosts.iter().find(|h| h.name == host)?;
        h.child.as_ref().map(Child::id)
    }

    /// Runs a command inside `host`'s namespace; its output, whatever its exit status.
    pub(crate) fn exec(&self, host: &str, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(host)])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("ip netns exec")
    }

    /// Gives every host an IPv6 address on the bridge (2001:db8::11.. /64, no DAD), so that
    /// it can answer the client's IPv6 traffic to a VIP it holds.
    pub(crate) fn add_host_ipv6(&self) {
        for (i, host) in self.names().iter().enumerate() {
            let cidr = format!("2001:db8::{}/64", 11 + i);
            self.net
                .ip(host, &["addr", "add", &cidr, "dev", "eth0", "nodad"]);
        }
    }

    /// Whether `host` holds `ip` as an address on `device`.
    pub(crate) fn holds(&self, host: &str, device: &str, ip: &str) -> bool {
        let out = self.net.ip(host, &["-o", "addr", "show", "dev", device]);
        out.split_whitespace()
            .any(|w| w.split('/').next() == Some(ip))
    }

    /// `net.ipv4.conf.<device>.<name>` in `host`'s namespace.
    pub(crate) fn sysctl(&self, host: &str, device: &str, name: &str) -> String {
        let path = format!("/proc/sys/net/ipv4/conf/{device}/{name}");
        let out = self.exec(host, &["cat", &path]);
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Writes `net.ipv4.conf.<device>.<name>` in `host`'s namespace.
    pub(crate) fn set_sysctl(&self, host: &str, device: &str, name: &str, value: &str) {
        let path = format!("/proc/sys/net/ipv4/conf/{device}/{name}");
        let out = self.exec(host, &["sh", "-c", &format!("echo {value} > {path}")]);
        assert!(out.status.success(), "{host}: cannot write {path}");
    }

    /// Forgets the client's neighbour entry for `ip`, so the next packet resolves it afresh.
    pub(crate) fn forget_client_neighbour(&self, ip: &str) {
        let _ = self.exec("cl", &["ip", "neigh", "flush", "to", ip]);
    }

    /// The MAC the client's neighbour table holds for `ip`, if any.
    pub(crate) fn client_neighbour(&self, ip: &str) -> Option<String> {
        let out = self.net.ip("cl", &["neigh", "show", ip]);
        let mut words = out.split_whitespace();
        words.find(|w| *w == "lladdr")?;
        words.next().map(str::to_string)
    }

    /// Starts a TCP service on port [`SERVICE_PORT`] in every host's namespace (IPv4 and
    /// IPv6, any local address) that answers each connection with the host's name and
    /// closes. Bounded: each exits by itself after `max_s` seconds, or is killed on drop.
    pub(crate) fn start_services(&mut self, max_s: u32) {
        for host in self.names() {
            let child = Command::new("ip")
                .args(["netns", "exec", &self.ns(&host), "python3", "-c", SERVICE])
                .args([&host, &SERVICE_PORT.to_string(), &max_s.to_string()])
                .stdin(Stdio::null())
                .spawn()
                .expect("python3");
            self.helpers.push(child);
        }
    }

    /// From the client: one ICMP echo to `ip` (IPv4 or IPv6), waiting at most a second for
    /// the reply. Whether it came.
    pub(crate) fn ping(&self, ip: &str) -> bool {
        let out = self.exec("cl", &["python3", "-c", CLIENT_TOOL, "ping", ip]);
        out.status.success()
    }

    /// From the client: a TCP connection to `ip`:[`SERVICE_PORT`] (at most two seconds);
    /// what the service said (the name of the host that took the connection).
    pub(crate) fn connect(&self, ip: &str) -> Option<String> {
        let out = self.exec("cl", &["python3", "-c", CLIENT_TOOL, "tcp", ip]);
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !text.is_empty()).then_some(text)
    }

    /// Waits (bounded) for `host`'s speaker to exit by itself; its exit status, or `None`
    /// if it still runs at the limit (then it is left to [`Cluster::kill`] or drop).
    pub(crate) fn wait_exit(
        &mut self,
        host: &str,
        limit: Duration,
    ) -> Option<std::process::ExitStatus> {
        let h = self.hosts.iter_mut().find(|h| h.name == host).unwrap();
        let child = h.child.as_mut()?;
        let mut status = None;
        poll(limit, Duration::from_millis(50), || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        });
        if status.is_some() {
            h.child = None;
        }
        status
    }

    /// Loads an nftables script in `host`'s namespace.
    fn nft(&self, host: &str, script: &str) {
        let path = format!("/tmp/{}-{host}.nft", self.net.prefix());
        std::fs::write(&path, script).unwrap();
        run(&["ip", "netns", "exec", &self.ns(host), "nft", "-f", &path]);
        let _ = std::fs::remove_file(path);
    }

    /// Cuts the cluster into `sides`: every host drops IP traffic from and to the hosts of the
    /// other sides (nftables in its own namespace). ARP still flows, as when a partition cuts
    /// the hosts' routes but not the client's segment: each side's owner keeps answering.
    pub(crate) fn partition(&self, sides: &[&[&str]]) {
        for side in sides {
            let others: Vec<String> = sides
                .iter()
                .filter(|s| *s != side)
                .flat_map(|s| s.iter().map(|h| self.addr(h)))
                .collect();
            let set = others.join(", ");
            for host in *side {
                self.nft(
                    host,
                    &format!(
                        "table inet vigil_lab_partition {{\n\
                         chain input {{ type filter hook input priority 0; ip saddr {{ {set} }} drop; }}\n\
                         chain output {{ type filter hook output priority 0; ip daddr {{ {set} }} drop; }}\n\
                         }}\n"
                    ),
                );
            }
        }
    }

    /// Undoes [`Cluster::partition`].
    pub(crate) fn heal(&self) {
        for host in self.names() {
            let _ = Command::new("ip")
                .args(["netns", "exec", &self.ns(&host), "nft"])
                .args(["delete", "table", "inet", "vigil_lab_partition"])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Drops `percent`% of `host`'s IP packets at random, both ways (nftables `numgen`).
    pub(crate) fn add_loss(&self, host: &str, percent: u64) {
        self.nft(
            host,
            &format!(
                "table inet vigil_lab_loss {{\n\
                 chain input {{ type filter hook input priority 0; numgen random mod 100 < {percent} drop; }}\n\
                 chain output {{ type filter hook output priority 0; numgen random mod 100 < {percent} drop; }}\n\
                 }}\n"
            ),
        );
    }

    /// Starts the ARP prober in the client namespace (`vigil-l2-client watch`, vigil-netlab's
    /// prober): a question every `interval_ms`, each from its own sender address so that every
    /// answer names the question it answers, until [`Cluster::stop_prober`] (or `max_s`
    /// seconds), then a second of listening for late answers. Returns its output file.
    pub(crate) fn start_prober(&mut self, interval_ms: u32, max_s: u32) -> PathBuf {
        let prefix = self.net.prefix().to_string();
        let out = PathBuf::from(format!("/tmp/{prefix}-prober.out"));
        let file = std::fs::File::create(&out).unwrap();
        let _ = std::fs::remove_file(self.prober_stop_flag());
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns("cl")])
            .arg(l2_client())
            .args([
                "watch", "--iface", "eth0", "--src-ip", CLIENT4, "--target", VIP,
            ])
            .args(["--interval-ms", &interval_ms.to_string()])
            .args(["--duration-ms", &(u64::from(max_s) * 1000).to_string()])
            // 198.18.1.1 to 198.18.3.254: 762 senders, none the client's own.
            .args(["--sender-first", "198.18.1.1", "--sender-count", "762"])
            .args(["--linger-ms", "1000", "--rounds", "--answers"])
            .arg("--stop-file")
            .arg(self.prober_stop_flag())
            .stdin(Stdio::null())
            .stdout(file)
            .spawn()
            .expect("vigil-l2-client watch");
        self.helpers.push(child);
        out
    }

    fn prober_stop_flag(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/{}-prober.stop", self.net.prefix()))
    }

    /// Stops the prober and waits (bounded) for it to write its record.
    pub(crate) fn stop_prober(&mut self) -> ProbeRecord {
        std::fs::write(self.prober_stop_flag(), "").unwrap();
        let out = PathBuf::from(format!("/tmp/{}-prober.out", self.net.prefix()));
        let mut done = false;
        for child in &mut self.helpers {
            done |= poll(Duration::from_secs(30), Duration::from_millis(50), || {
                matches!(child.try_wait(), Ok(Some(_)))
            });
        }
        assert!(done, "the prober did not stop");
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let _ = std::fs::remove_file(out);
        ProbeRecord::parse(&text)
    }

    /// Starts `vigil-l2-client watch` in the client namespace for `duration`, asking for
    /// [`VIP`] every `interval_ms`; [`Cluster::watch_output`] reads its report.
    pub(crate) fn start_watch(&mut self, interval_ms: u32, duration: Duration) -> PathBuf {
        let out = PathBuf::from(format!("/tmp/{}-watch.out", self.net.prefix()));
        let file = std::fs::File::create(&out).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns("cl")])
            .arg(l2_client())
            .args([
                "watch", "--iface", "eth0", "--src-ip", CLIENT4, "--target", VIP,
            ])
            .args(["--interval-ms", &interval_ms.to_string()])
            .args(["--duration-ms", &duration.as_millis().to_string()])
            .stdin(Stdio::null())
            .stdout(file)
            .spawn()
            .expect("vigil-l2-client watch");
        self.helpers.push(child);
        out
    }

    /// Waits (bounded) for the helpers to exit by themselves.
    pub(crate) fn wait_helpers(&mut self, limit: Duration) -> bool {
        let helpers = &mut self.helpers;
        poll(limit, Duration::from_millis(100), || {
            helpers
                .iter_mut()
                .all(|c| matches!(c.try_wait(), Ok(Some(_))))
        })
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

    /// Starts vigil on every host on [`Cluster::config`]`(host, election, extra_services)`;
    /// returns the owner MetalLB's election gives [`VIP`].
    pub(crate) fn start_all(&mut self, election: &str, extra_services: &str) -> String {
        let names = self.names();
        for host in &names {
            self.write_config(host, &self.config(host, election, extra_services));
            self.start(host);
        }
        expected_owner(&names)
    }

    /// Waits until every host sees all hosts alive and names `owner`, and `owner`'s MAC alone
    /// answers the client's ARP.
    pub(crate) fn wait_agreed(&self, owner: &str) {
        let names = self.names();
        self.wait_for(
            &format!("every host to see all alive and agree on {owner}"),
            SETTLE,
            || {
                names.iter().all(|h| {
                    self.alive_seen_by(h).len() == names.len()
                        && self.owner_seen_by(h).as_deref() == Some(owner)
                })
            },
        );
        let mac = self.mac(owner);
        self.wait_for(&format!("{owner} alone to answer ARP"), SETTLE, || {
            self.arp_answers() == [mac.clone()]
        });
    }
}

/// The host MetalLB's election ranks first for [`VIP`] among `names`.
pub(crate) fn expected_owner<S: AsRef<str>>(names: &[S]) -> String {
    vigil_lb::rank(names.iter().map(AsRef::as_ref), VIP.parse().unwrap())[0].to_string()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for mut child in self.helpers.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
        for suffix in ["prober.py", "prober.out", "prober.stop", "watch.out"] {
            let _ = std::fs::remove_file(format!("/tmp/{}-{suffix}", self.net.prefix()));
        }
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

/// What the prober recorded: its questions and who answered each, and the gratuitous
/// announcements it heard, in arrival order.
#[derive(Debug, Default)]
pub(crate) struct ProbeRecord {
    /// Questions sent.
    pub(crate) probes: usize,
    /// For each question, the MACs that answered it, in arrival order.
    pub(crate) answers: Vec<Vec<String>>,
    /// Every line, for failure messages.
    pub(crate) lines: Vec<String>,
}

impl ProbeRecord {
    /// Reads `vigil-l2-client watch --rounds --answers` output: `round n=K` lines are the
    /// questions (numbered from 1), `answer ... kind=arp ... gratuitous=0 round=K` lines the
    /// answers to question K (gratuitous announcements answer nothing).
    fn parse(text: &str) -> Self {
        let field = |line: &str, key: &str| -> Option<String> {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_string)
        };
        let mut record = Self::default();
        for line in text.lines() {
            if line.starts_with("round ") {
                let k: usize = field(line, "n").unwrap().parse().unwrap();
                record.probes = record.probes.max(k);
                record.answers.resize(record.probes, Vec::new());
            } else if line.starts_with("answer ")
                && field(line, "kind").as_deref() == Some("arp")
                && field(line, "gratuitous").as_deref() == Some("0")
            {
                let k: usize = field(line, "round").unwrap().parse().unwrap();
                if let Some(macs) = k.checked_sub(1).and_then(|i| record.answers.get_mut(i)) {
                    macs.push(field(line, "mac").unwrap());
                }
            }
            record.lines.push(line.to_string());
        }
        record
    }

    /// Questions nobody answered.
    pub(crate) fn unanswered(&self) -> Vec<usize> {
        (0..self.probes)
            .filter(|k| self.answers[*k].is_empty())
            .collect()
    }

    /// Questions that more than one MAC answered.
    pub(crate) fn answered_twice(&self) -> usize {
        self.answers
            .iter()
            .filter(|macs| {
                let mut m = (*macs).clone();
                m.sort();
                m.dedup();
                m.len() > 1
            })
            .count()
    }

    /// The owners the client saw, in order: the MAC of each question one MAC alone answered,
    /// with repeats merged (questions both the old and the new owner answered, during a
    /// handover, are left out).
    pub(crate) fn owners(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for macs in &self.answers {
            let Some(first) = macs.first() else { continue };
            if macs.iter().all(|m| m == first) && out.last() != Some(first) {
                out.push(first.clone());
            }
        }
        out
    }
}

/// The hosts' TCP service (python3): answers each connection with the host's name on any
/// local address, IPv4 and IPv6; exits after its maximum duration.
const SERVICE: &str = r#"
import select, socket, sys, time
name, port, max_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", port))
s.listen(64)
end = time.monotonic() + max_s
while time.monotonic() < end:
    if not select.select([s], [], [], 0.5)[0]:
        continue
    c, _ = s.accept()
    try:
        c.sendall((name + "\n").encode())
    except OSError:
        pass
    c.close()
"#;

/// The client's probes (python3, root): `ping ADDR` sends one ICMP echo (IPv4 or IPv6) and
/// exits 0 on its reply within a second; `tcp ADDR` connects to the hosts' service and
/// prints what it says (two seconds at most).
const CLIENT_TOOL: &str = r#"
import os, select, socket, struct, sys, time
mode, addr = sys.argv[1], sys.argv[2]
v6 = ":" in addr
if mode == "tcp":
    s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect((addr, 8080))
        data = s.recv(256)
    except OSError:
        sys.exit(1)
    print(data.decode(errors="replace").strip())
    sys.exit(0 if data else 1)
def checksum(b):
    if len(b) % 2:
        b += b"\0"
    total = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return (~total) & 0xFFFF
ident = os.getpid() & 0xFFFF
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    request_type, reply_type = 128, 129
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    request_type, reply_type = 8, 0
header = struct.pack("!BBHHH", request_type, 0, 0, ident, 1)
payload = b"vigil-lab"
# The kernel fills in the ICMPv6 checksum (it needs the addresses).
sum_ = 0 if v6 else checksum(header + payload)
s.sendto(struct.pack("!BBHHH", request_type, 0, sum_, ident, 1) + payload, (addr, 0))
end = time.monotonic() + 1.0
while True:
    left = end - time.monotonic()
    if left <= 0 or not select.select([s], [], [], left)[0]:
        sys.exit(1)
    data, src = s.recvfrom(2048)
    icmp = data if v6 else data[(data[0] & 0x0F) * 4:]
    if len(icmp) >= 8 and icmp[0] == reply_type and struct.unpack("!H", icmp[4:6])[0] == ident and src[0] == addr:
        sys.exit(0)
"#;
