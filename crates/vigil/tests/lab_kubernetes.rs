//! `vigil lab --kubernetes` end to end, as root, against the real API server (vigil-testenv):
//! each main scenario moves the Service's IP to another host, the report shows the
//! allocation, the ServiceL2Status before and after and the client's timeline, and nothing is
//! left behind (namespaces, files, processes); with `api-down` the IP moves while the API
//! server is stopped and the status follows once it is back; Ctrl-C tears the lab down. No
//! durations are asserted: the lab bounds every wait itself, and this file bounds the run.
//!
//! Needs root and vigil-testenv (skips otherwise; fails under `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`).

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use vigil_netlab::root_or_skip;

const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");
/// Bound on one lab run (it takes about 10-20 s; the machine may be busy).
const RUN_LIMIT: Duration = Duration::from_secs(240);

/// A unique namespace prefix per test (at most 24 characters).
fn prefix(test: &str) -> String {
    format!("vlk{}-{test}", std::process::id() % 100_000)
}

/// Namespaces whose names carry `prefix`.
fn namespaces(prefix: &str) -> Vec<String> {
    vigil_netlab::namespaces_with(prefix).expect("ip netns list")
}

/// PIDs of processes whose command line names the lab's files (its speakers, its
/// controller) or its API server's directory.
fn lab_processes(prefix: &str) -> Vec<i32> {
    let needles = [format!("/{prefix}/"), format!("vigil-kubelab-{prefix}-cp")];
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c);
                needles.iter().any(|n| c.contains(n.as_str()))
            })
        })
        .collect()
}

/// The lab's own files and its API server's.
fn lab_dirs(prefix: &str) -> [PathBuf; 2] {
    let tmp = std::env::temp_dir();
    [
        tmp.join(prefix),
        tmp.join(format!("vigil-kubelab-{prefix}-cp")),
    ]
}

/// Removes whatever a failed test left, by the lab's own teardown.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new(VIGIL)
            .args(["lab", "--down", "--prefix", &self.0])
            .stdout(Stdio::null())
            .status();
    }
}

/// The Go bin directory holding vigil-testenv, or `None` when `test` skips.
fn go_bin_dir(test: &str) -> Option<PathBuf> {
    if !root_or_skip(test) {
        return None;
    }
    let binary = vigil_kubelab::testenv_binary(test)?;
    Some(binary.parent().expect("a directory").to_path_buf())
}

/// A running `vigil lab --kubernetes`, killed (and its lab removed by [`Cleanup`]) if the
/// test fails.
struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Run {
    fn start(bin_dir: &PathBuf, args: &[&str]) -> Self {
        let mut child = Command::new(VIGIL)
            .args(["lab", "--kubernetes"])
            .args(args)
            .env("VIGIL_GO_BIN_DIR", bin_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run vigil lab --kubernetes");
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            text
        });
        Self {
            child,
            lines,
            stdout: Vec::new(),
            stderr,
        }
    }

    /// Reads stdout until a line contains `needle` (bounded); whether one did.
    fn wait_line(&mut self, needle: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(needle);
                    self.stdout.push(line);
                    if found {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Waits for the exit (bounded; killed after): exit code, stdout, stderr.
    fn finish(mut self) -> (Option<i32>, String, String) {
        let end = Instant::now() + RUN_LIMIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break Some(status);
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.stdout.push(line);
        }
        let stderr = self.stderr.join().unwrap_or_default();
        (
            status.and_then(|s| s.code()),
            self.stdout.join("\n"),
            stderr,
        )
    }
}

/// The `key=value` of the lab's `result:` line.
fn result_field(stdout: &str, key: &str) -> Option<String> {
    let line = stdout.lines().find(|l| l.starts_with("result: "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
}

/// The `kubectl get` table printed after `$ command`: its lines up to the next step.
fn table_after<'a>(stdout: &'a str, command: &str, nth: usize) -> Vec<&'a str> {
    let marker = format!("$ {command}\n");
    let mut tables = stdout.split(marker.as_str()).skip(1);
    let Some(text) = tables.nth(nth) else {
        return Vec::new();
    };
    text.lines()
        .take_while(|l| l.starts_with("           ") && !l.trim().starts_with('$'))
        .map(str::trim)
        .collect()
}

/// Nothing of the lab is left: namespaces, files, processes.
fn assert_nothing_left(test: &str, prefix: &str) {
    assert!(
        namespaces(prefix).is_empty(),
        "{test}: namespaces left: {:?}",
        namespaces(prefix)
    );
    for dir in lab_dirs(prefix) {
        assert!(!dir.exists(), "{test}: {} left", dir.display());
    }
    let left = lab_processes(prefix);
    assert!(left.is_empty(), "{test}: processes left: {left:?}");
}

/// Runs one scenario to the end and checks what every scenario's report must say; returns
/// stdout and the old and new owners.
fn scenario(test: &str, short: &str, name: &str) -> Option<(String, String, String)> {
    let bin_dir = go_bin_dir(test)?;
    let p = prefix(short);
    let _cleanup = Cleanup(p.clone());
    let run = Run::start(&bin_dir, &["--scenario", name, "--prefix", &p]);
    let (code, stdout, stderr) = run.finish();
    assert_eq!(
        code,
        Some(0),
        "{test}: vigil lab --kubernetes --scenario {name} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let field = |key: &str| {
        result_field(&stdout, key)
            .unwrap_or_else(|| panic!("{test}: no {key}= in the result line:\n{stdout}"))
    };
    assert_eq!(field("mode"), "kubernetes");
    assert_eq!(field("scenario"), name);
    let (vip, old, new) = (field("vip"), field("old_owner"), field("new_owner"));
    let vip6 = field("vip6");
    assert!(
        vip.starts_with("198.18.0.2") && vip6.starts_with("2001:db8::2"),
        "{test}: the dual-stack Service's IPs come from the pool (198.18.0.200-209, \
         2001:db8::200-209): {vip} {vip6}"
    );
    // Both families were answered by a new owner (the IPv6 one asked by NDP).
    let _ = (field("v6_silent_ms"), field("v6_takeover_ms"));
    assert!(
        old.starts_with("host-") && new.starts_with("host-") && old != new,
        "{test}: the IP moved from one lab host to another: {old} -> {new}\n{stdout}"
    );
    // The controller's allocation as `kubectl get services` shows it.
    let services = table_after(&stdout, "kubectl get services -n demo", 0);
    assert!(
        services.first().is_some_and(|h| h.contains("EXTERNAL-IP")),
        "{test}: the Service table has kubectl's header: {services:?}\n{stdout}"
    );
    assert!(
        services.iter().any(|l| l.starts_with("web ")
            && l.contains("LoadBalancer")
            && l.contains(&format!("{vip},{vip6}"))),
        "{test}: the Service table shows web with {vip},{vip6}: {services:?}"
    );
    // The ServiceL2Status names the old owner alone before, and the new owner after.
    let before = table_after(
        &stdout,
        "kubectl get servicel2statuses -n metallb-system",
        0,
    );
    let after = table_after(
        &stdout,
        "kubectl get servicel2statuses -n metallb-system",
        1,
    );
    let rows_naming = |rows: &[&str], node: &str| {
        rows.iter()
            .skip(1)
            .filter(|l| l.split_whitespace().nth(1) == Some(node))
            .count()
    };
    assert!(
        before.len() == 2 && rows_naming(&before, &old) == 1,
        "{test}: before the failure one ServiceL2Status, naming {old}: {before:?}"
    );
    assert_eq!(
        rows_naming(&after, &new),
        1,
        "{test}: after the failover a ServiceL2Status names {new}: {after:?}"
    );
    assert!(
        field("l2status").split(',').any(|n| n == new),
        "{test}: the result names {new}'s ServiceL2Status"
    );
    // The client's timeline: the old owner answers before the new one, and the new one last
    // (a lone round may go unanswered on a busy machine: an answer that came after the next
    // question counts for that one).
    let timeline: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.contains("the client's ARP questions for"))
        .skip(1)
        .take_while(|l| l.contains(" ms  "))
        .collect();
    let first_old = timeline
        .iter()
        .position(|l| l.contains(&format!("{old} (")));
    let first_new = timeline
        .iter()
        .position(|l| l.contains(&format!("{new} (")));
    let last_answer = timeline.iter().rev().find(|l| !l.contains("no answer"));
    assert!(
        first_old.is_some()
            && first_old < first_new
            && last_answer.is_some_and(|l| l.contains(&format!("{new} ("))),
        "{test}: the timeline has {old} before {new}, and {new} last: {timeline:?}\n{stdout}"
    );
    assert!(
        stdout.contains("torn down:"),
        "{test}: the lab says it is torn down\n{stdout}"
    );
    assert_nothing_left(test, &p);
    eprintln!(
        "{test}: {old} -> {new}, silent_ms={} takeover_ms={} unanswered={}",
        field("silent_ms"),
        field("takeover_ms"),
        field("unanswered")
    );
    Some((stdout, old, new))
}

#[test]
fn a_crash_in_kubernetes_mode_moves_the_ip_and_the_status_follows() {
    let _ = scenario(
        "a_crash_in_kubernetes_mode_moves_the_ip_and_the_status_follows",
        "crash",
        "crash",
    );
}

#[test]
fn a_host_loss_in_kubernetes_mode_moves_the_ip() {
    let _ = scenario(
        "a_host_loss_in_kubernetes_mode_moves_the_ip",
        "loss",
        "host-loss",
    );
}

#[test]
fn a_graceful_stop_in_kubernetes_mode_hands_the_ip_over_and_the_speaker_exits_cleanly() {
    const TEST: &str =
        "a_graceful_stop_in_kubernetes_mode_hands_the_ip_over_and_the_speaker_exits_cleanly";
    let Some((stdout, old, _)) = scenario(TEST, "term", "graceful") else {
        return;
    };
    assert!(
        stdout.contains(&format!("{old}'s speaker: exit status: 0")),
        "{TEST}: {old}'s speaker exits 0 on SIGTERM\n{stdout}"
    );
}

#[test]
fn with_the_api_server_down_the_ip_still_moves_and_the_status_follows_it_back() {
    const TEST: &str = "with_the_api_server_down_the_ip_still_moves_and_the_status_follows_it_back";
    let Some((stdout, _, new)) = scenario(TEST, "api", "api-down") else {
        return;
    };
    let at = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{TEST}: no {needle:?} in\n{stdout}"))
    };
    // In order: the API server stops, the host goes, the new owner answers with the API
    // server still down, then the API server is back and the status names the new owner.
    let stopped = at("the API server is stopped");
    let lost = at("host loss:");
    let answered = at(&format!("answers from {new} ("));
    let back = at("the API server is back");
    assert!(
        stopped < lost && lost < answered && answered < back,
        "{TEST}: steps out of order\n{stdout}"
    );
    assert!(
        stdout[answered..back].contains("with the API server down"),
        "{TEST}: the takeover happened with the API server down\n{stdout}"
    );
}

#[test]
fn ctrl_c_tears_the_kubernetes_lab_down() {
    const TEST: &str = "ctrl_c_tears_the_kubernetes_lab_down";
    let Some(bin_dir) = go_bin_dir(TEST) else {
        return;
    };
    let p = prefix("int");
    let _cleanup = Cleanup(p.clone());
    let mut run = Run::start(&bin_dir, &["--scenario", "crash", "--prefix", &p]);
    // Once the speakers run, everything is up: the API server, the controller, the hosts.
    let started = run.wait_line("started `vigil speaker`", RUN_LIMIT);
    assert!(
        started,
        "{TEST}: the speakers never started: {:?}",
        run.stdout
    );
    assert!(
        !lab_processes(&p).is_empty() && !namespaces(&p).is_empty(),
        "{TEST}: the lab runs"
    );
    let pid = Pid::from_raw(i32::try_from(run.child.id()).expect("pid"));
    kill(pid, Signal::SIGINT).expect("SIGINT to vigil lab");
    let (code, stdout, stderr) = run.finish();
    assert_eq!(
        code,
        Some(130),
        "{TEST}: exit code after Ctrl-C\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("the lab is torn down"),
        "{TEST}: it says so\n{stderr}"
    );
    assert_nothing_left(TEST, &p);
}
