//! What the driver's network-namespace tests share: each test re-runs its own binary inside a
//! namespace it creates (and deletes however the test ends), builds a veth pair there and
//! waits with a generous bound, never on a duration it asserts.

#![allow(dead_code)] // Each test binary uses its own part.

use std::process::Command;
use std::time::{Duration, Instant};

use vigil_l2_net::Selection;

/// The bound of every wait: failing only when something never happens.
pub(crate) const GENEROUS: Duration = Duration::from_secs(10);

/// Runs `ip` with `args`; panics if it fails.
pub(crate) fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("ip");
    assert!(status.success(), "ip {args:?}");
}

/// Deletes the namespace however the test ends.
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// The index of interface `name`.
pub(crate) fn ifindex(name: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .expect("ifindex")
        .trim()
        .parse()
        .expect("a number")
}

/// Polls `done` every 10 ms; panics naming `what` after [`GENEROUS`].
pub(crate) fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + GENEROUS;
    while !done() {
        assert!(Instant::now() < end, "{what}: not within {GENEROUS:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Test `test` in a namespace of its own: inside (the environment variable `inside_var` set)
/// runs `inside`; outside, creates the namespace `<prefix>-<pid>` and re-runs this test binary
/// there with only `test`, failing if it fails.
pub(crate) fn run_in_namespace(prefix: &str, inside_var: &str, test: &str, inside: fn()) {
    if std::env::var_os(inside_var).is_some() {
        inside();
        return;
    }
    let name = format!("{prefix}-{}", std::process::id());
    ip(&["netns", "add", &name]);
    let _ns = Namespace(name.clone());
    let exe = std::env::current_exe().expect("test binary");
    let status = Command::new("ip")
        .args(["netns", "exec", &name])
        .arg(exe)
        .args(["--exact", test, "--nocapture"])
        .env(inside_var, "1")
        .status()
        .expect("ip netns exec");
    assert!(status.success(), "the test inside the namespace failed");
}

/// The driver's selection of one interface, `name`, alone.
pub(crate) fn only(name: &str) -> Selection {
    Selection {
        exclude: vec![],
        exclude_matching: None,
        include: Some([name.to_string()].into()),
    }
}
