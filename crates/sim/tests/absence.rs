//! Proof of absence on the simulator: when only a member's process dies, its host answers our
//! datagrams with ICMP port unreachable and refuses our TCP connections, and the `fast`
//! profile (`use_strong_evidence`) declares the member dead as soon as a probe's own TCP
//! fallback ping is refused, without Lifeguard's suspicion timeout. A lost host (silence)
//! still goes through a suspicion or the watch's confirmed silence. Everything is asserted in virtual time;
//! `SIM_SEED=<seed> cargo test -p vigil-sim --test absence` replays another seed.

use core::time::Duration;
use vigil_gossip::{Config, Profile};
use vigil_sim::{Link, Report, Scenario, ScenarioKind, test_seed};

/// Crash trials at `n` nodes: process only, or the whole host.
fn detect(n: usize, process_crash: bool, link: Link, seed: u64) -> Report {
    let mut s = Scenario::new(ScenarioKind::Detect, n, Profile::Fast, seed);
    s.trials = 20;
    s.process_crash = process_crash;
    s.link = link;
    let r = s.run(None);
    println!("{r}");
    r
}

/// The shortest suspicion timeout at `n` nodes: no verdict reached through a suspicion can
/// come sooner after the probe that raised it.
fn min_suspicion(c: &Config, n: usize) -> Duration {
    let log = ((n as f64).log10().max(1.0) * 1000.0).floor() / 1000.0;
    c.probe_interval.mul_f64(c.suspicion_mult as f64 * log)
}

fn assert_clean(r: &Report, what: &str) {
    assert_eq!(r.undetected, (0, 0), "{what}: every crash known everywhere");
    assert_eq!(r.false_positives, 0, "{what}: no live node declared dead");
    assert!(r.notes.is_empty(), "{what}: {:?}", r.notes);
}

/// A killed process is known everywhere sooner than a lost host is known anywhere, and at
/// its median sooner than any suspicion could have expired; the restarted process is taken
/// back every time.
#[test]
fn a_killed_process_is_found_before_a_lost_host() {
    let (seed, _g) = test_seed("a_killed_process_is_found_before_a_lost_host", 31);
    let fast = Config::fast();
    for n in [5, 20] {
        let killed = detect(n, true, Link::LAN, seed);
        let lost = detect(n, false, Link::LAN, seed);
        assert_clean(&killed, "process crash");
        assert_clean(&lost, "host loss");
        let killed_first = killed.first.p50.expect("samples");
        let killed_last = killed.last.p50.expect("samples");
        let lost_first = lost.first.p50.expect("samples");
        assert!(
            killed_first < min_suspicion(&fast, n),
            "{n} nodes: first verdict p50 {killed_first:?} cannot have been proven"
        );
        // Silence proves a death only once it has lasted: a suspicion's shortest timeout, or
        // the watch's silence bound (counted from the last ack, at most a watch interval
        // before the crash).
        let shortest_silence =
            min_suspicion(&fast, n).min(fast.watch_dead_after - fast.watch_interval);
        assert!(
            lost_first >= shortest_silence,
            "{n} nodes: silence proves nothing, yet p50 {lost_first:?}"
        );
        assert!(
            killed_last < lost_first,
            "{n} nodes: process crash known everywhere at p50 {killed_last:?}, host loss \
             known first at p50 {lost_first:?}"
        );
        assert!(
            killed.last.max.expect("samples") < lost.last.max.expect("samples"),
            "{n} nodes: worst cases"
        );
    }
}

/// The same on lossy links (5% per host each way): probes and refusals get lost too, yet a
/// killed process is still found sooner, every crash is known everywhere, and no live node
/// is declared dead.
#[test]
fn under_loss_a_killed_process_is_still_found_sooner_and_nobody_else_dies() {
    let (seed, _g) = test_seed(
        "under_loss_a_killed_process_is_still_found_sooner_and_nobody_else_dies",
        32,
    );
    let link = Link::LAN.with_loss(1.0 - 0.95 * 0.95);
    let killed = detect(5, true, link, seed);
    let lost = detect(5, false, link, seed);
    assert_clean(&killed, "process crash");
    assert_clean(&lost, "host loss");
    assert!(
        killed.last.p50.expect("samples") < lost.first.p50.expect("samples"),
        "process crash known everywhere later than a host loss is first known"
    );
}
