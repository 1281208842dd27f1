//! The lab itself: a bridge in a namespace of its own, a client and N hosts plugged into it
//! with veth pairs, a configuration file and a speaker per host. Nothing is made in the root
//! namespace; every namespace carries the lab's prefix. [`Lab`] owns all of it, and dropping
//! it (after an error, a panic or Ctrl-C) kills the speakers by PID and deletes the
//! namespaces and files, unless the lab was kept on purpose.

use super::Stop;
use crate::cmd::keygen::new_keyring;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as Mac;
use vigil_netlab::Bridge;
pub(super) use vigil_netlab::{namespaces_with, remove_namespace};

/// The client's IPv4 address.
pub(super) const CLIENT4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The client's IPv6 address.
pub(super) const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
/// The IPv4 VIP.
pub(super) const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
/// The IPv6 VIP, of the same service (so it has the same owner).
pub(super) const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100);
/// Where each speaker serves `/status`, on its own namespace's loopback.
pub(super) const HTTP: &str = "127.0.0.1:7472";

/// The namespace of the bridge, the client or a host.
pub(super) fn ns_name(prefix: &str, what: &str) -> String {
    format!("{prefix}-{what}")
}

/// The directory holding a lab's key, configurations and logs.
pub(super) fn work_dir(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(prefix)
}

/// Runs `ip` with `args`; its stdout, or an error with its stderr.
pub(super) fn ip(args: &[&str]) -> Result<String, String> {
    let mut full = vec!["ip"];
    full.extend_from_slice(args);
    let out = vigil_netlab::try_run(&full)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One host of the lab.
#[derive(Debug)]
pub(super) struct Host {
    /// Its node name, `host-1`..
    pub(super) name: String,
    /// Its namespace.
    pub(super) ns: String,
    /// Its address.
    pub(super) ip: Ipv4Addr,
    /// Its eth0's MAC: what the client sees when this host answers.
    pub(super) mac: Mac,
    /// Its speaker, while running.
    pub(super) speaker: Option<Child>,
    /// The speaker's PID (kept after the process is gone, for messages).
    pub(super) pid: Option<u32>,
}

/// The lab: created step by step, torn down on drop unless kept.
#[derive(Debug)]
pub(super) struct Lab {
    /// Key, configurations and logs.
    pub(super) dir: PathBuf,
    /// The namespaces and the bridge (vigil-netlab's, as the tests use).
    net: Bridge,
    /// The hosts.
    pub(super) hosts: Vec<Host>,
    /// The client's interface index and MAC.
    pub(super) client: (u32, Mac),
    kept: bool,
    torn_down: bool,
}

impl Lab {
    /// Makes the namespaces, the bridge, the client and `nodes` hosts with their addresses.
    /// Whatever was made is removed again if a step fails.
    pub(super) fn create(prefix: &str, nodes: usize) -> Result<Self, Stop> {
        let dir = work_dir(prefix);
        std::fs::create_dir(&dir).map_err(|e| Stop::failed(format!("{}: {e}", dir.display())))?;
        let net = match Bridge::named(prefix) {
            Ok(net) => net,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(Stop::failed(e));
            }
        };
        let mut lab = Self {
            dir,
            net,
            hosts: Vec::new(),
            client: (0, Mac::default()),
            kept: false,
            torn_down: false,
        };
        let client = lab.plug("client", &format!("{CLIENT4}/24"))?;
        ip(&[
            "-n",
            &client,
            "addr",
            "add",
            &format!("{CLIENT6}/64"),
            "dev",
            "eth0",
            "nodad",
        ])?;
        lab.client = link(&client)?;
        for i in 1..=nodes {
            super::check_interrupt()?;
            let name = format!("host-{i}");
            let addr = host_ip(i);
            let ns = lab.plug(&name, &format!("{addr}/24"))?;
            let (_, mac) = link(&ns)?;
            lab.hosts.push(Host {
                name,
                ns,
                ip: addr,
                mac,
                speaker: None,
                pid: None,
            });
        }
        Ok(lab)
    }

    /// A namespace for `what` whose eth0 is plugged into the bridge and holds `cidr`.
    fn plug(&mut self, what: &str, cidr: &str) -> Result<String, Stop> {
        super::check_interrupt()?;
        let ns = self.net.try_add_namespace(what)?;
        self.net.try_plug(what, "eth0")?;
        self.net
            .try_ip(what, &["addr", "add", cidr, "dev", "eth0"])?;
        Ok(ns)
    }

    /// The bridge port of `host`'s eth0: down is an unplugged cable.
    pub(super) fn port(&self, host: &str) -> String {
        self.net.port(host, "eth0")
    }

    /// The bridge's namespace.
    pub(super) fn bridge_ns(&self) -> String {
        self.net.ns("br")
    }

    /// The client's namespace.
    pub(super) fn client_ns(&self) -> String {
        self.net.ns("client")
    }

    /// The host whose eth0 has `mac`.
    pub(super) fn host_by_mac(&self, mac: Mac) -> Option<&Host> {
        self.hosts.iter().find(|h| h.mac == mac)
    }

    /// Who `mac` is, for the report: `host-2 (02:..)`, or the MAC alone.
    pub(super) fn who(&self, mac: Mac) -> String {
        self.host_by_mac(mac)
            .map_or_else(|| mac.to_string(), |h| format!("{} ({mac})", h.name))
    }

    /// The host named `name`.
    pub(super) fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// A host's configuration file.
    pub(super) fn config_path(&self, host: &str) -> PathBuf {
        self.dir.join(format!("{host}.yaml"))
    }

    /// A host's speaker log.
    pub(super) fn log_path(&self, host: &str) -> PathBuf {
        self.dir.join(format!("{host}.log"))
    }

    /// Writes a fresh keyring and every host's configuration.
    pub(super) fn write_configs(&self, profile: &str) -> Result<(), Stop> {
        let keyring = self.dir.join("keyring.json");
        let key = new_keyring().map_err(|e| Stop::failed(format!("no OS randomness: {e}")))?;
        write_private(&keyring, &key)?;
        let seeds: Vec<String> = self.hosts.iter().map(|h| h.ip.to_string()).collect();
        for h in &self.hosts {
            let text = config_text(&h.name, h.ip, &seeds, profile, &keyring);
            write_private(&self.config_path(&h.name), &text)?;
        }
        Ok(())
    }

    /// Starts every host's speaker: `ip netns exec NS <vigil> standalone --config ...`.
    pub(super) fn start_speakers(&mut self, exe: &Path) -> Result<(), Stop> {
        for i in 0..self.hosts.len() {
            let config = self.config_path(&self.hosts[i].name);
            let args = [
                OsString::from("standalone"),
                OsString::from("--config"),
                config.into_os_string(),
                OsString::from("--log-level"),
                OsString::from("info"),
            ];
            self.start_speaker(i, exe, &args, &[])?;
        }
        Ok(())
    }

    /// Starts `exe ARGS` as host `i`'s speaker in its namespace, its stderr to the host's log
    /// (`ip netns exec` execs, so the child's PID is the speaker's). Each speaker has a
    /// process group of its own, so a Ctrl-C at the terminal reaches only the lab, which then
    /// stops them itself.
    pub(super) fn start_speaker(
        &mut self,
        i: usize,
        exe: &Path,
        args: &[OsString],
        env: &[(&str, &str)],
    ) -> Result<(), Stop> {
        let (name, ns) = (self.hosts[i].name.clone(), self.hosts[i].ns.clone());
        let child = spawn_in(&ns, exe, args, env, &self.log_path(&name))
            .map_err(|e| Stop::failed(format!("starting {name}'s speaker: {e}")))?;
        self.hosts[i].pid = Some(child.id());
        self.hosts[i].speaker = Some(child);
        Ok(())
    }

    /// Sends `signal` to `host`'s speaker.
    pub(super) fn signal(&self, host: &str, signal: Signal) -> Result<(), Stop> {
        let pid = self
            .host(host)
            .and_then(|h| h.speaker.as_ref())
            .map(Child::id)
            .ok_or_else(|| Stop::failed(format!("{host}'s speaker is not running")))?;
        let pid = i32::try_from(pid).map_err(|_| Stop::failed("PID out of range"))?;
        kill(Pid::from_raw(pid), signal)
            .map_err(|e| Stop::failed(format!("{signal} to {host}'s speaker: {e}")))
    }

    /// Waits (at most `limit`) for `host`'s speaker to exit; its exit status as text, `None`
    /// while it still runs.
    pub(super) fn wait_exit(&mut self, host: &str, limit: Duration) -> Option<String> {
        let h = self.hosts.iter_mut().find(|h| h.name == host)?;
        let child = h.speaker.as_mut()?;
        let start = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                h.speaker = None;
                return Some(status.to_string());
            }
            if start.elapsed() > limit || super::check_interrupt().is_err() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Speakers that exited on their own, with their status (a speaker that refused its
    /// configuration, say).
    pub(super) fn exited(&mut self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for h in &mut self.hosts {
            if let Some(child) = h.speaker.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                out.push((h.name.clone(), status.to_string()));
                h.speaker = None;
            }
        }
        out
    }

    /// The last `n` lines of every host's log, for failure messages.
    pub(super) fn log_tails(&self, n: usize) -> String {
        let mut out = String::new();
        for h in &self.hosts {
            let text = std::fs::read_to_string(self.log_path(&h.name)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let _ = writeln!(out, "--- {} ({})", h.name, self.log_path(&h.name).display());
            for l in &lines[lines.len().saturating_sub(n)..] {
                let _ = writeln!(out, "{l}");
            }
        }
        out
    }

    /// Leaves everything running when the lab is dropped.
    pub(super) fn keep(&mut self) {
        self.kept = true;
        self.net.keep();
    }

    /// The lab's bridge and namespaces, to add a host of another kind (an API server).
    pub(super) fn net_mut(&mut self) -> &mut Bridge {
        &mut self.net
    }

    /// Kills every speaker still running (by PID) and reaps it.
    pub(super) fn kill_speakers(&mut self) {
        for h in &mut self.hosts {
            if let Some(mut child) = h.speaker.take() {
                // SIGKILL works on a stopped process too.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// Kills the speakers (by PID), then anything else left in the namespaces, deletes the
    /// namespaces and the work directory. Returns how many namespaces were deleted.
    pub(super) fn teardown(&mut self) -> usize {
        if self.torn_down {
            return 0;
        }
        self.torn_down = true;
        self.kill_speakers();
        // Hosts and client first, the bridge last (it was made first).
        let namespaces = self.net.teardown();
        let _ = std::fs::remove_dir_all(&self.dir);
        namespaces
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.kept {
            self.teardown();
        }
    }
}

/// Starts `exe ARGS` with `env` in namespace `ns` (through `ip netns exec`, which execs: the
/// child's PID is the program's) in a process group of its own, stdout discarded and stderr
/// appended to `log`.
pub(super) fn spawn_in(
    ns: &str,
    exe: &Path,
    args: &[OsString],
    env: &[(&str, &str)],
    log: &Path,
) -> Result<Child, String> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(args)
        .envs(env.iter().copied())
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("ip netns exec {ns} {}: {e}", exe.display()))
}

/// Host `i`'s address (1-based): 198.18.0.11 on.
pub(super) fn host_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, 10 + u8::try_from(i).unwrap_or(u8::MAX - 10))
}

/// The interface index and MAC of eth0 in `ns`.
pub(super) fn link(ns: &str) -> Result<(u32, Mac), String> {
    vigil_netlab::link(ns, "eth0")
}

/// A host's `vigil standalone` configuration.
pub(super) fn config_text(
    name: &str,
    addr: Ipv4Addr,
    seeds: &[String],
    profile: &str,
    keyring: &Path,
) -> String {
    format!(
        "# Written by `vigil lab` for its throwaway lab.\n\
         node:\n  name: {name}\n\
         gossip:\n  bind: \"{addr}:7946\"\n  seeds: [{seeds}]\n  profile: {profile}\n  \
         keyring_file: \"{keyring}\"\n  label: vigil-lab\n\
         interfaces:\n  include: [eth0]\n\
         http:\n  listen: \"{HTTP}\"\n\
         services:\n  - name: web\n    vips: [\"{VIP4}\", \"{VIP6}\"]\n",
        seeds = seeds.join(", "),
        keyring = keyring.display(),
    )
}

/// Writes `text` to a new file readable by root only.
pub(super) fn write_private(path: &Path, text: &str) -> Result<(), Stop> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| Stop::failed(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::standalone::config::Config;

    #[test]
    fn the_written_configuration_is_valid() {
        let dir = std::env::temp_dir().join(format!("vigil-lab-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let keyring = dir.join("keyring.json");
        std::fs::write(&keyring, new_keyring().unwrap()).unwrap();
        let seeds = vec!["198.18.0.11".to_string(), "198.18.0.12".to_string()];
        let path = dir.join("host-2.yaml");
        std::fs::write(
            &path,
            config_text("host-2", host_ip(2), &seeds, "lan", &keyring),
        )
        .unwrap();
        let c = Config::load(&path, None).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(c.node.name, "host-2");
        assert_eq!(c.gossip.bind, "198.18.0.12:7946".parse().unwrap());
        assert_eq!(c.gossip.profile.name(), "lan");
        assert_eq!(c.gossip.keyring_file.as_deref(), Some(keyring.as_path()));
        assert_eq!(c.http_listen, Some(HTTP.parse().unwrap()));
        assert_eq!(c.services.len(), 1);
        assert_eq!(
            c.services[0].vips,
            vec![VIP4.into(), std::net::IpAddr::V6(VIP6)]
        );
    }

    #[test]
    fn hosts_are_numbered_from_eleven() {
        assert_eq!(host_ip(1), Ipv4Addr::new(198, 18, 0, 11));
        assert_eq!(host_ip(16), Ipv4Addr::new(198, 18, 0, 26));
    }
}
