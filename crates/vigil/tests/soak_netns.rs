//! Soak (root, network namespaces; CI runs it): three hosts on the `fast` profile, 5% random
//! packet loss on every host both ways (nftables `numgen random`), and the VIP's owner starved
//! of CPU, for 60 s (`VIGIL_SOAK_SECS` to lengthen it). No node is killed, so the VIP must not
//! move: the test fails on any false failover, counted both from the speakers' own log
//! (`vip_taken` / `vip_released`) and from the client (ARP answers from any other MAC). Gossip
//! false positives (`member_failed`) and suspicions are reported, not asserted: the election
//! counts suspect members as candidates, so a suspicion alone moves nothing.
//!
//! Starvation is SIGSTOP/SIGCONT duty-cycling of the owner's speaker process: stopped
//! [`STOPPED`] out of every [`PERIOD`]. Unlike a cgroup CPU quota it works the same under
//! cgroup v1, v2 and in containers without delegated controllers, and it gives a hard,
//! known worst case (every stall is exactly [`STOPPED`] long, twice the fast profile's
//! 25 ms probe timeout), where CFS throttling gives a statistical one.

mod standalone_lab;

use standalone_lab::{Cluster, expected_owner, root_or_skip};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const GENEROUS: Duration = Duration::from_secs(30);
/// Hosts in the cluster (`VIGIL_SOAK_HOSTS`): three, the lab's default and the hardest case,
/// since a probe of a node then has a single indirect helper.
///
/// History: before f16db04/0308971 (refutations sent to each peer once, stale accusations
/// ignored, a stalled prober judging its own probe, timers run before waiting datagrams),
/// three hosts failed this soak with 7-10 `member_failed` and 12-36 ownership changes per
/// minute on a loaded 2-core machine; after them, 0 and 0 in every run (3 x 60 s, 2 x 180 s,
/// 1 x 120 s), and five hosts 0 and 0 before and after.
const HOSTS: usize = 3;
/// Random loss on every host, both ways (`VIGIL_SOAK_LOSS` to change it when investigating).
const LOSS_PERCENT: u64 = 5;
/// The starvation cycle: the owner's speaker is stopped this long (`VIGIL_SOAK_STALL_MS`)...
const STOPPED: Duration = Duration::from_millis(50);
/// ...out of every this long (`VIGIL_SOAK_PERIOD_MS`).
const PERIOD: Duration = Duration::from_millis(250);
/// The client's question interval.
const WATCH_INTERVAL_MS: u32 = 20;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn soak_duration() -> Duration {
    Duration::from_secs(env_or("VIGIL_SOAK_SECS", 60).clamp(1, 3600))
}

/// Duty-cycles a process with SIGSTOP/SIGCONT on a thread; stops (and leaves the process
/// running) on drop, even when the test fails.
struct Starver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<u64>>,
    pid: u32,
}

impl Starver {
    /// Stops `pid` for `stopped` out of every `period`; with `stopped` zero, never.
    fn start(pid: u32, stopped: Duration, period: Duration) -> Self {
        let period = period.max(stopped + Duration::from_millis(1));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut cycles = 0;
            while !flag.load(Ordering::Relaxed) {
                if !stopped.is_zero() {
                    signal(pid, "STOP");
                    std::thread::sleep(stopped);
                    signal(pid, "CONT");
                    cycles += 1;
                }
                std::thread::sleep(period - stopped);
            }
            cycles
        });
        Self {
            stop,
            thread: Some(thread),
            pid,
        }
    }

    /// Stops starving; returns the number of stall cycles.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Starver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        signal(self.pid, "CONT");
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status();
}

/// Lines of `text` past `from` bytes whose event is `event`.
fn events(text: &str, from: usize, event: &str) -> Vec<String> {
    let needle = format!("\"event\":\"{event}\"");
    text.get(from..)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(str::to_string)
        .collect()
}

/// The value of `key=` in the watch's ARP summary line.
fn summary_field<'a>(report: &'a str, key: &str) -> Option<&'a str> {
    let line = report.lines().find(|l| l.starts_with("summary kind=arp"))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn five_percent_loss_and_a_starved_owner_cause_no_false_failover() {
    if !root_or_skip("five_percent_loss_and_a_starved_owner_cause_no_false_failover") {
        return;
    }
    let soak = soak_duration();
    let hosts = usize::try_from(env_or("VIGIL_SOAK_HOSTS", HOSTS as u64))
        .unwrap_or(HOSTS)
        .clamp(3, 9);
    let loss = env_or("VIGIL_SOAK_LOSS", LOSS_PERCENT).min(100);
    let stopped = Duration::from_millis(env_or("VIGIL_SOAK_STALL_MS", STOPPED.as_millis() as u64));
    let period = Duration::from_millis(env_or("VIGIL_SOAK_PERIOD_MS", PERIOD.as_millis() as u64));
    let mut lab = Cluster::new(hosts);
    let names = lab.names();
    for host in &names {
        // The soak is about gossip under loss and stalls, not the lab's 100 ms command check:
        // on a loaded 2-core machine that check (an `sh` every 100 ms, 100 ms to answer)
        // failed twice in a row on several hosts and moved the VIP. Here it runs every second
        // with three failures to fall, so only gossip can move the VIP.
        let config = lab.config(host, "", "");
        let slow_check = config.replace("interval: 100ms, fall: 2", "interval: 1s, fall: 3");
        assert_ne!(
            config, slow_check,
            "the lab's health check changed; update the soak"
        );
        lab.write_config(host, &slow_check);
        lab.start(host);
    }
    let owner = expected_owner(&names);
    lab.wait_agreed(&owner);
    let owner_mac = lab.mac(&owner);

    // From here on nothing is killed: any change of owner is a false failover.
    let offsets: Vec<usize> = names.iter().map(|h| lab.log(h).len()).collect();
    for host in &names {
        lab.add_loss(host, loss);
    }
    let watch = lab.start_watch(WATCH_INTERVAL_MS, soak);
    let starver = Starver::start(lab.pid(&owner).expect("the owner runs"), stopped, period);
    let started = Instant::now();
    assert!(
        lab.wait_helpers(soak + GENEROUS),
        "the client's watch did not end"
    );
    let cycles = starver.finish();
    let soaked = started.elapsed();
    let report = std::fs::read_to_string(&watch).unwrap_or_default();

    let mut moves = Vec::new();
    let (mut failed, mut suspected) = (Vec::new(), 0);
    for (host, from) in names.iter().zip(&offsets) {
        let log = lab.log(host);
        for event in ["vip_taken", "vip_released"] {
            moves.extend(
                events(&log, *from, event)
                    .into_iter()
                    .map(|l| format!("{host}: {l}")),
            );
        }
        failed.extend(
            events(&log, *from, "member_failed")
                .into_iter()
                .map(|l| format!("{host}: {l}")),
        );
        suspected += events(&log, *from, "member_suspect").len();
    }
    let macs = summary_field(&report, "macs").unwrap_or("none");
    let mac_changes: u64 = summary_field(&report, "mac_changes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    println!(
        "soak: {soaked:?} with {loss}% loss on every host and {owner} stopped {stopped:?} \
         of every {period:?} ({cycles} stalls): {} ownership changes in the speakers' logs, \
         client saw macs={macs} mac_changes={mac_changes}; gossip false positives \
         (member_failed): {}, suspicions: {suspected}",
        moves.len(),
        failed.len()
    );
    for line in &failed {
        println!("false positive: {line}");
    }
    println!(
        "client: {}",
        report
            .lines()
            .filter(|l| l.starts_with("summary"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    assert!(
        cycles > 0 || stopped.is_zero(),
        "the owner was never starved"
    );
    assert!(
        moves.is_empty(),
        "false failover: the VIP's owner changed while no node was killed:\n{}\n{}",
        moves.join("\n"),
        lab.logs()
    );
    assert_eq!(
        (macs, mac_changes),
        (owner_mac.as_str(), 0),
        "false failover seen by the client:\n{report}"
    );
}
