//! The systems measured and how each one's programs are started, failed and stopped on the
//! lab's hosts: vigil in Kubernetes mode (`vigil speaker` + `vigil controller`), MetalLB
//! v0.16.2's own speaker and controller with memberlist's defaults and with the tuning its
//! users apply, and vigil standalone (no API server) as a reference.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use vigil_kubelab::MetalLbSpeaker;
use vigil_kubelab::metallb::{
    self, ControllerConfig, METALLB_NAMESPACE, MetalLbBinaries, MetalLbProcess,
};

use crate::lab::{Bench, HOSTS, METALLB_CONTROLLER_USER, VIGIL_CONTROLLER_USER};

/// The memberlist tuning MetalLB's users ask for (PR #2956, which added the file: probe every
/// 100 ms with a 50 ms timeout); every other field stays at memberlist's LAN default, since
/// MetalLB reads them all and a missing number would silently become 0.
pub(crate) const TUNED_MEMBERLIST: &str = r#"{
  "TCPTimeout": "10s", "IndirectChecks": 3, "RetransmitMult": 4, "SuspicionMult": 4,
  "SuspicionMaxTimeoutMult": 6, "PushPullInterval": "30s", "ProbeTimeout": "50ms",
  "ProbeInterval": "100ms", "DisableTcpPings": false, "AwarenessMaxMultiplier": 8,
  "GossipNodes": 3, "GossipInterval": "200ms", "GossipToTheDeadTime": "30s",
  "GossipVerifyIncoming": true, "GossipVerifyOutgoing": true, "EnableCompression": true,
  "HandoffQueueDepth": 1024, "UDPBufferSize": 1400, "QueueCheckInterval": "30s"
}
"#;

/// A system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    /// `vigil speaker` (profile fast) and `vigil controller`.
    Vigil,
    /// MetalLB's speaker and controller, memberlist LAN defaults.
    MetalLbDefault,
    /// MetalLB with [`TUNED_MEMBERLIST`].
    MetalLbTuned,
    /// `vigil standalone` (profile fast), one VIP from its file; no API server.
    VigilStandalone,
}

impl System {
    /// Every system, in the order they run.
    pub(crate) const ALL: [Self; 4] = [
        Self::Vigil,
        Self::MetalLbDefault,
        Self::MetalLbTuned,
        Self::VigilStandalone,
    ];

    /// Its name on the command line and in tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Vigil => "vigil",
            Self::MetalLbDefault => "metallb",
            Self::MetalLbTuned => "metallb-tuned",
            Self::VigilStandalone => "vigil-standalone",
        }
    }

    /// Parses [`Self::name`].
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                format!("unknown system {s:?} (vigil, metallb, metallb-tuned, vigil-standalone)")
            })
    }

    /// Whether it runs against the API server.
    pub(crate) fn uses_api(self) -> bool {
        self != Self::VigilStandalone
    }

    /// The user its controller runs as.
    pub(crate) fn controller_user(self) -> &'static str {
        match self {
            Self::Vigil => VIGIL_CONTROLLER_USER,
            Self::MetalLbDefault | Self::MetalLbTuned => METALLB_CONTROLLER_USER,
            Self::VigilStandalone => "",
        }
    }

    /// How long a failover watch may last before the trial counts as "never moved".
    pub(crate) fn failover_bound(self) -> Duration {
        match self {
            Self::Vigil | Self::VigilStandalone => Duration::from_secs(5),
            Self::MetalLbTuned => Duration::from_secs(15),
            Self::MetalLbDefault => Duration::from_secs(40),
        }
    }
}

/// A program the bench started, stopped by PID when dropped.
pub(crate) enum Proc {
    /// A vigil process (its log beside it).
    Vigil {
        /// The process.
        child: Option<Child>,
        /// Its log.
        log: PathBuf,
    },
    /// A MetalLB speaker.
    MetalLbSpeaker(Box<MetalLbSpeaker>),
    /// MetalLB's controller.
    MetalLbController(MetalLbProcess),
}

impl Proc {
    fn spawn_vigil(mut command: Command, log: PathBuf) -> Result<Self, String> {
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let child = command
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .map_err(|e| format!("starting vigil: {e}"))?;
        Ok(Self::Vigil {
            child: Some(child),
            log,
        })
    }

    /// Its PID while it runs.
    pub(crate) fn pid(&self) -> Option<i32> {
        match self {
            Self::Vigil { child, .. } => child.as_ref().and_then(|c| i32::try_from(c.id()).ok()),
            Self::MetalLbSpeaker(s) => s.process().pid().map(Pid::as_raw),
            Self::MetalLbController(p) => p.pid().map(Pid::as_raw),
        }
    }

    /// Sends `signal` (nothing if it is not running).
    pub(crate) fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// Whether it is still running (reaps it if not).
    pub(crate) fn running(&mut self) -> bool {
        match self {
            Self::Vigil { child, .. } => {
                let done = child
                    .as_mut()
                    .is_none_or(|c| !matches!(c.try_wait(), Ok(None)));
                if done {
                    *child = None;
                }
                !done
            }
            Self::MetalLbSpeaker(s) => s.process_mut().check_running().is_ok(),
            Self::MetalLbController(p) => p.check_running().is_ok(),
        }
    }

    /// SIGKILL, reaped.
    pub(crate) fn kill(&mut self) {
        match self {
            Self::Vigil { child, .. } => {
                if let Some(mut c) = child.take() {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Self::MetalLbSpeaker(s) => s.process_mut().kill(),
            Self::MetalLbController(p) => p.kill(),
        }
    }

    /// SIGTERM and wait up to 10 s (then SIGKILL).
    pub(crate) fn stop(&mut self) {
        match self {
            Self::Vigil { child, .. } => {
                if let Some(mut c) = child.take() {
                    if let Ok(pid) = i32::try_from(c.id()) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                    }
                    let end = Instant::now() + Duration::from_secs(10);
                    while Instant::now() < end && matches!(c.try_wait(), Ok(None)) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Self::MetalLbSpeaker(s) => {
                let _ = s.process_mut().stop();
            }
            Self::MetalLbController(p) => {
                let _ = p.stop();
            }
        }
    }

    /// Its log file.
    pub(crate) fn log(&self) -> &Path {
        match self {
            Self::Vigil { log, .. } => log,
            Self::MetalLbSpeaker(s) => s.process().log_path(),
            Self::MetalLbController(p) => p.log_path(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Self::Vigil { child: Some(c), .. } = self {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What the bench needs to start programs.
pub(crate) struct Programs {
    /// The `vigil` binary.
    pub(crate) vigil: PathBuf,
    /// MetalLB's two binaries.
    pub(crate) metallb: MetalLbBinaries,
    /// vigil standalone's keyring file.
    pub(crate) keyring: PathBuf,
}

/// The standalone VIP (no API server involved).
pub(crate) const STANDALONE_VIP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 0, 250);

/// vigil standalone's file for host `i`.
fn standalone_config(bench: &Bench, programs: &Programs, i: usize) -> String {
    let seeds: Vec<String> = bench
        .hosts
        .iter()
        .take(HOSTS)
        .map(|h| h.ip.to_string())
        .collect();
    format!(
        "node: {{name: {}}}\n\
         gossip: {{bind: \"{}:7946\", seeds: [{}], profile: fast, keyring_file: {}}}\n\
         interfaces: {{include: [eth0]}}\n\
         http: {{listen: \"127.0.0.1:7472\"}}\n\
         services:\n  - name: web\n    vips: [{STANDALONE_VIP}]\n",
        bench.hosts[i].node,
        bench.hosts[i].ip,
        seeds.join(", "),
        programs.keyring.display()
    )
}

/// Starts `system`'s speaker on host `i`.
pub(crate) fn start_speaker(
    bench: &Bench,
    programs: &Programs,
    system: System,
    i: usize,
) -> Result<Proc, String> {
    let host = &bench.hosts[i];
    let config = &bench.speakers[i];
    let ns = bench.lab.bridge().ns(&host.name);
    let dir = bench.dir.join(system.name()).join(&host.node);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match system {
        System::Vigil => {
            let key_dir = dir.join("memberlist-key");
            std::fs::create_dir_all(&key_dir).map_err(|e| e.to_string())?;
            std::fs::write(key_dir.join("secretkey"), bench.key.as_str())
                .map_err(|e| e.to_string())?;
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", &ns])
                .arg(&programs.vigil)
                .arg("speaker")
                .arg(format!(
                    "--kubeconfig={}",
                    bench.kubeconfigs.speaker.display()
                ))
                .arg(format!("--namespace={METALLB_NAMESPACE}"))
                .arg(format!("--node-name={}", config.node))
                .arg(format!("--pod-name={}", config.pod_name()))
                .arg(format!("--ml-bindaddr={}", config.ip))
                .arg(format!("--ml-bindport={}", config.memberlist_port))
                .arg(format!("--ml-labels={}", metallb::speaker_label_selector()))
                .arg(format!("--ml-secret-key-path={}", key_dir.display()))
                .arg("--port=0")
                .arg("--log-level=info");
            Proc::spawn_vigil(command, dir.join("speaker.log"))
        }
        System::MetalLbDefault | System::MetalLbTuned => {
            let mut config = config.clone();
            if system == System::MetalLbTuned {
                config.memberlist_config = Some(TUNED_MEMBERLIST.to_string());
            } else {
                // The speaker's /etc/metallb outlives it: an earlier tuned run's file must go.
                let stale = bench
                    .lab
                    .cp()
                    .work_dir()
                    .join("metallb")
                    .join(&config.node)
                    .join("etc/memberlist/config.json");
                let _ = std::fs::remove_file(stale);
            }
            MetalLbSpeaker::start(&bench.lab, &programs.metallb, &config, &bench.key)
                .map(|s| Proc::MetalLbSpeaker(Box::new(s)))
                .map_err(|e| format!("MetalLB speaker {}: {e}", config.node))
        }
        System::VigilStandalone => {
            let file = dir.join("standalone.yaml");
            std::fs::write(&file, standalone_config(bench, programs, i))
                .map_err(|e| e.to_string())?;
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", &ns])
                .arg(&programs.vigil)
                .arg("standalone")
                .arg("--config")
                .arg(&file)
                .arg("--log-level")
                .arg("info");
            Proc::spawn_vigil(command, dir.join("standalone.log"))
        }
    }
}

/// Starts `system`'s controller (none for standalone).
pub(crate) fn start_controller(
    bench: &Bench,
    programs: &Programs,
    system: System,
) -> Result<Option<Proc>, String> {
    match system {
        System::Vigil => {
            let dir = bench.dir.join(system.name()).join("controller");
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let mut command = Command::new("ip");
            command
                .args(["netns", "exec", bench.lab.cp().ns()])
                .arg(&programs.vigil)
                .arg("controller")
                .arg(format!(
                    "--kubeconfig={}",
                    bench.vigil_controller_kubeconfig.display()
                ))
                .arg(format!("--namespace={METALLB_NAMESPACE}"))
                .arg("--identity=controller-0");
            Proc::spawn_vigil(command, dir.join("controller.log")).map(Some)
        }
        System::MetalLbDefault | System::MetalLbTuned => {
            let config = ControllerConfig {
                kubeconfig: Some(bench.kubeconfigs.controller.clone()),
                ..ControllerConfig::default()
            };
            metallb::start_controller(bench.lab.cp(), &programs.metallb, &config)
                .map(|p| Some(Proc::MetalLbController(p)))
                .map_err(|e| format!("MetalLB controller: {e}"))
        }
        System::VigilStandalone => Ok(None),
    }
}

/// One system's running programs.
pub(crate) struct Running {
    /// Which.
    pub(crate) system: System,
    /// Its controller.
    pub(crate) controller: Option<Proc>,
    /// Its speakers, by host index.
    pub(crate) speakers: Vec<Proc>,
}

impl Running {
    /// Starts the controller, then a speaker on each of the first [`HOSTS`] hosts.
    pub(crate) fn start(
        bench: &Bench,
        programs: &Programs,
        system: System,
    ) -> Result<Self, String> {
        Self::start_on(bench, programs, system, HOSTS)
    }

    /// Starts the controller, then a speaker on each of the first `hosts` hosts.
    pub(crate) fn start_on(
        bench: &Bench,
        programs: &Programs,
        system: System,
        hosts: usize,
    ) -> Result<Self, String> {
        let controller = start_controller(bench, programs, system)?;
        let speakers = (0..hosts.min(bench.hosts.len()))
            .map(|i| start_speaker(bench, programs, system, i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            system,
            controller,
            speakers,
        })
    }

    /// Replaces speaker `i` with a fresh one (the old one is killed first).
    pub(crate) fn restart(
        &mut self,
        bench: &Bench,
        programs: &Programs,
        i: usize,
    ) -> Result<(), String> {
        self.speakers[i].kill();
        self.speakers[i] = start_speaker(bench, programs, self.system, i)?;
        Ok(())
    }

    /// Names the programs that exited, with their logs.
    pub(crate) fn dead(&mut self) -> Vec<String> {
        let mut dead = Vec::new();
        for (i, s) in self.speakers.iter_mut().enumerate() {
            if !s.running() {
                dead.push(format!("speaker {} (log {})", i + 1, s.log().display()));
            }
        }
        if let Some(c) = &mut self.controller
            && !c.running()
        {
            dead.push(format!("controller (log {})", c.log().display()));
        }
        dead
    }

    /// Stops everything (SIGTERM, bounded).
    pub(crate) fn stop(&mut self) {
        for s in &mut self.speakers {
            s.stop();
        }
        if let Some(c) = &mut self.controller {
            c.stop();
        }
    }
}
