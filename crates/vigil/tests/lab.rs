//! `vigil lab` end to end, as root: each scenario moves the VIP to another host and leaves no
//! namespace or process behind; Ctrl-C in the middle tears the lab down; `--keep` leaves it up
//! for `--down` to remove; a second lab under the same prefix is refused. Every wait is a bound,
//! not a timing assertion.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use vigil_netlab::{poll, root_or_skip};

const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");

/// A unique namespace prefix per test.
fn prefix(test: &str) -> String {
    format!("vtl{}-{test}", std::process::id() % 100_000)
}

/// Namespaces whose names carry `prefix`.
fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .map(str::to_string)
        .collect()
}

/// PIDs of processes whose command line names the lab's files (its speakers).
fn speakers(prefix: &str) -> Vec<i32> {
    let needle = format!("/{prefix}/host-");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
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

fn lab(args: &[&str]) -> Output {
    Command::new(VIGIL)
        .arg("lab")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run vigil lab")
}

/// The `key=value` of the lab's `result:` line.
fn result_field(stdout: &str, key: &str) -> Option<String> {
    let line = stdout.lines().find(|l| l.starts_with("result: "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
}

fn scenario_moves_the_vip_and_leaves_nothing(test: &str, scenario: &str) {
    if !root_or_skip(test) {
        return;
    }
    let p = prefix(scenario);
    let _cleanup = Cleanup(p.clone());
    let out = lab(&["--nodes", "3", "--scenario", scenario, "--prefix", &p]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{scenario}: {stdout}\n{stderr}");
    let old = result_field(&stdout, "old_owner").expect("an old owner");
    let new = result_field(&stdout, "new_owner").expect("a new owner");
    assert!(
        old.starts_with("host-") && new.starts_with("host-"),
        "{stdout}"
    );
    assert_ne!(old, new, "{stdout}");
    assert!(result_field(&stdout, "silent_ms").is_some(), "{stdout}");
    assert_eq!(namespaces(&p), Vec::<String>::new(), "namespaces left");
    assert_eq!(speakers(&p), Vec::<i32>::new(), "speakers left");
    assert!(!std::env::temp_dir().join(&p).exists(), "files left");
}

#[test]
fn a_crash_moves_the_vip_and_leaves_nothing() {
    scenario_moves_the_vip_and_leaves_nothing("a_crash_moves_the_vip_and_leaves_nothing", "crash");
}

#[test]
fn a_host_loss_moves_the_vip_and_leaves_nothing() {
    scenario_moves_the_vip_and_leaves_nothing(
        "a_host_loss_moves_the_vip_and_leaves_nothing",
        "host-loss",
    );
}

#[test]
fn a_frozen_owner_loses_the_vip_and_leaves_nothing() {
    scenario_moves_the_vip_and_leaves_nothing(
        "a_frozen_owner_loses_the_vip_and_leaves_nothing",
        "freeze",
    );
}

#[test]
fn a_graceful_stop_moves_the_vip_and_leaves_nothing() {
    scenario_moves_the_vip_and_leaves_nothing(
        "a_graceful_stop_moves_the_vip_and_leaves_nothing",
        "graceful",
    );
}

/// Ctrl-C while the lab waits for the takeover (the wan profile detects a lost host only after
/// tens of seconds, so the lab is surely waiting): it exits 130 and leaves nothing.
#[test]
fn ctrl_c_tears_the_lab_down() {
    if !root_or_skip("ctrl_c_tears_the_lab_down") {
        return;
    }
    let p = prefix("int");
    let _cleanup = Cleanup(p.clone());
    let mut child: Child = Command::new(VIGIL)
        .args([
            "lab",
            "--scenario",
            "host-loss",
            "--profile",
            "wan",
            "--prefix",
            &p,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let waiting = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains("host loss:") {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let running = speakers(&p);
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGINT).unwrap();
    let mut status = None;
    poll(Duration::from_secs(60), Duration::from_millis(50), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("vigil lab did not stop after SIGINT\n{seen}");
    };
    let _ = reader.join();
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr);
    assert!(
        waiting,
        "the lab never reached the failure step\n{seen}\n{stderr}"
    );
    assert_eq!(
        running.len(),
        3,
        "three speakers ran before the signal\n{seen}"
    );
    assert_eq!(status.code(), Some(130), "{seen}\n{stderr}");
    assert!(stderr.contains("torn down"), "{stderr}");
    assert_eq!(namespaces(&p), Vec::<String>::new(), "namespaces left");
    assert_eq!(speakers(&p), Vec::<i32>::new(), "speakers left");
    for pid in running {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "speaker {pid} still exists"
        );
    }
}

/// `--keep` leaves a working lab: `vigil status` answers in a host's namespace, a second lab
/// under the same prefix is refused before anything is made, and `--down` removes it all.
#[test]
fn a_kept_lab_stays_up_until_down() {
    if !root_or_skip("a_kept_lab_stays_up_until_down") {
        return;
    }
    let p = prefix("keep");
    let _cleanup = Cleanup(p.clone());
    let out = lab(&[
        "--nodes",
        "2",
        "--scenario",
        "none",
        "--keep",
        "--prefix",
        &p,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("lab --down --prefix {p}")),
        "{stdout}"
    );
    assert_eq!(namespaces(&p).len(), 4, "bridge, client, two hosts");
    assert_eq!(speakers(&p).len(), 2);

    let status = Command::new("ip")
        .args(["netns", "exec", &format!("{p}-host-1"), VIGIL, "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success() && text.contains("198.18.0.100"),
        "{text}"
    );

    let again = lab(&["--prefix", &p]);
    assert_eq!(again.status.code(), Some(2));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        err.contains("already there") && err.contains("--down"),
        "{err}"
    );
    assert_eq!(
        speakers(&p).len(),
        2,
        "the refused run touched the kept lab"
    );

    let down = lab(&["--down", "--prefix", &p]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert_eq!(namespaces(&p), Vec::<String>::new());
    assert!(poll(
        Duration::from_secs(10),
        Duration::from_millis(50),
        || speakers(&p).is_empty()
    ));
    assert!(!std::env::temp_dir().join(&p).exists());
}

/// Bad options fail before anything starts, with or without root.
#[test]
fn bad_options_are_refused_before_anything_starts() {
    for args in [
        &["--nodes", "1"][..],
        &["--nodes", "17"],
        &["--scenario", "flood"],
    ] {
        let out = lab(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[0]), "{args:?}: {err}");
    }
}

/// Without `ip`, or without root, the lab says what is missing and makes nothing.
#[test]
fn missing_ip_or_root_is_a_clear_error() {
    if !root_or_skip("missing_ip_or_root_is_a_clear_error") {
        return;
    }
    let p = prefix("pre");
    let _cleanup = Cleanup(p.clone());
    let out = Command::new(VIGIL)
        .args(["lab", "--prefix", &p])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("install iproute2"), "{err}");

    // As nobody (through setpriv, where util-linux has it): a copy of the binary in /tmp, so
    // that the build directory's permissions do not matter.
    if Command::new("setpriv").arg("--help").output().is_ok() {
        let copy = std::env::temp_dir().join(format!("{p}-vigil"));
        std::fs::copy(VIGIL, &copy).unwrap();
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&copy)
            .args(["lab", "--prefix", &p])
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&copy);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("vigil lab: needs root to create network namespaces"),
            "{err}"
        );
    }
    assert_eq!(namespaces(&p), Vec::<String>::new());
}
