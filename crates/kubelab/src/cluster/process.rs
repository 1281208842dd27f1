//! A program the test runs on a lab host (`vigil speaker`, `vigil controller`, `vigil
//! standalone`, MetalLB's speaker and controller, ...): started with `ip netns exec` in the
//! host's namespace, its output in a log file of its own, killed by PID when its guard drops
//! (also when a test panics). The one process wrapper of the labs: MetalLB's
//! ([`crate::metallb::MetalLbProcess`]) is this one with MetalLB's stop-on-drop.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// What of a process's output goes into its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Standard error only (vigil logs there); standard output as the command set it.
    StderrOnly,
    /// Standard output and standard error (MetalLB logs to standard output).
    Both,
}

/// One process on a lab host; SIGKILLed when dropped.
#[derive(Debug)]
pub struct LabProcess {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl LabProcess {
    /// Runs `program` with `args` and `envs` in network namespace `ns`, stdin and stdout
    /// closed, stderr into `log` (created afresh; its directory too). `KUBECONFIG` is removed
    /// from the environment, so only a `--kubeconfig` flag says which cluster it talks to.
    /// Panics when it cannot be started (test support).
    pub fn spawn(
        name: &str,
        ns: &str,
        program: &Path,
        args: &[String],
        envs: &[(String, String)],
        log: PathBuf,
    ) -> Self {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", ns])
            .arg(program)
            .args(args)
            .env_remove("KUBECONFIG")
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null());
        Self::start(name, command, log, Output::StderrOnly)
            .unwrap_or_else(|e| panic!("start {name} ({}): {e}", program.display()))
    }

    /// Runs `command` as it is built (its launcher puts it in a namespace: `ip netns exec`,
    /// `unshare`, a shell that `exec`s the program, so the PID held is the program's), stdin
    /// closed, the output `output` names into `log` (created afresh; its directory too).
    pub fn start(
        name: &str,
        mut command: Command,
        log: PathBuf,
        output: Output,
    ) -> io::Result<Self> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let stderr = File::create(&log)?;
        if output == Output::Both {
            command.stdout(stderr.try_clone()?);
        }
        let child = command.stdin(Stdio::null()).stderr(stderr).spawn()?;
        Ok(Self {
            name: name.to_string(),
            child: Some(child),
            log,
        })
    }

    /// What it is (a node name, a controller identity).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it was started and neither stopped nor killed by the test since.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Its PID while it runs.
    pub fn pid(&self) -> Option<Pid> {
        self.child
            .as_ref()
            .map(|c| Pid::from_raw(i32::try_from(c.id()).expect("a Linux PID fits in i32")))
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The whole log (empty when it cannot be read).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Its exit status if it has exited by itself since the last look (it no longer runs
    /// then); `None` while it runs, or when it was not running.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().expect("try_wait")?;
        self.child = None;
        Some(status)
    }

    /// Panics, with the end of its log, when it has exited by itself.
    pub fn check_running(&mut self) {
        if let Some(status) = self.exited() {
            panic!(
                "{} exited ({status}); log ends:\n{}",
                self.name,
                self.log_tail(30)
            );
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, ...) while it runs.
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, signal);
        }
    }

    /// SIGTERM, and a wait of at most `grace`: its exit status if it exited by itself; `None`
    /// if it was not running or had to be killed (SIGKILL) after `grace`.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("a Linux PID fits in i32"));
        let _ = kill(pid, Signal::SIGTERM);
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of the file at `path` (at most its last 1 MiB is read; empty when
/// it cannot be read).
fn tail(path: &Path, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(1 << 20)));
        let _ = f.take(1 << 20).read_to_string(&mut text);
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
