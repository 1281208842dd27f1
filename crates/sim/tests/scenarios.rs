//! Gossip behaviour at scale, on the simulator: join convergence, failure detection against
//! memberlist's analytical model, refutation, leave vs fail, partition and heal, and false
//! positives under loss with Lifeguard on and off.
//!
//! Every test asserts behaviour in virtual time, never wall-clock time. On failure a test
//! prints its seed; `SIM_SEED=<seed> cargo test -p vigil-sim <test>` replays it.

use core::time::Duration;
use vigil_gossip::{Config, Profile};
use vigil_sim::{Link, Report, Scenario, ScenarioKind, test_seed};

/// memberlist's detection-time model (research note, memberlist-protocol.md section 6.1),
/// computed from a configuration for a cluster of `n`.
struct Model {
    /// The shortest suspicion timeout (every confirmation in).
    min: Duration,
    /// Typical time until the first node declares: first probe + probe + `min`.
    typical: Duration,
    /// Worst case until every node knows: a whole probe round at the slowest health, the
    /// longest suspicion timeout, and dissemination.
    bound: Duration,
}

impl Model {
    fn new(c: &Config, n: usize) -> Self {
        let log = ((n as f64).log10().max(1.0) * 1000.0).floor() / 1000.0;
        let pi = c.probe_interval;
        let min = pi.mul_f64(c.suspicion_mult as f64 * log);
        let max = min * c.suspicion_max_timeout_mult as u32;
        let first_probe = pi.mul_f64((n - 1) as f64 / n as f64);
        Self {
            min,
            typical: first_probe + pi + min,
            bound: pi * (n as u32 - 1).min(100)
                + pi * c.awareness_max_multiplier as u32
                + max
                + c.gossip_interval * 20,
        }
    }
}

fn run(s: &Scenario) -> Report {
    let r = s.run(None);
    println!("{r}");
    r
}

fn assert_detection_within_model(r: &Report, model: &Model, crashes: usize) {
    assert_eq!(
        r.undetected,
        (0, 0),
        "every crash must be known to every live node"
    );
    assert_eq!(r.first.n, crashes);
    let first_p50 = r.first.p50.expect("samples");
    let all_max = r.all.max.expect("samples");
    assert!(
        first_p50 >= model.min,
        "first detection p50 {first_p50:?} is below the minimum suspicion timeout {:?}",
        model.min
    );
    assert!(
        first_p50 <= model.typical.mul_f64(1.5),
        "first detection p50 {first_p50:?} is far above the model's typical {:?}",
        model.typical
    );
    assert!(
        all_max <= model.bound,
        "the last node learned after {all_max:?}, beyond the model's bound {:?}",
        model.bound
    );
    assert_eq!(
        r.false_positives, 0,
        "no false positives on a clean network"
    );
}

/// Go's LAN defaults at 5 and 100 nodes: the research note predicts about 6 s and 10 s to the
/// first declaration (minimum suspicion 4 s and 8 s), bounded by about 29 s and 50 s.
#[test]
fn failure_detection_lan_matches_the_model() {
    let (seed, _g) = test_seed("failure_detection_lan_matches_the_model", 11);
    for (n, trials) in [(5, 10), (100, 4)] {
        let mut s = Scenario::new(ScenarioKind::Detect, n, Profile::Lan, seed);
        s.trials = trials;
        let r = run(&s);
        let model = Model::new(&s.gossip(), n);
        assert_detection_within_model(&r, &model, trials);
    }
}

/// vigil's `fast` profile's SWIM timing, with the host vanishing and the watch off (the
/// model is SWIM's; the watch finds a lost host sooner, see `tests/watch.rs`). (When only the
/// process dies its host proves it and the model's suspicion timeout does not apply: see
/// `tests/absence.rs`.)
#[test]
fn failure_detection_fast_matches_the_model() {
    let (seed, _g) = test_seed("failure_detection_fast_matches_the_model", 12);
    for (n, process_crash) in [(5, false), (50, false)] {
        let mut s = Scenario::new(ScenarioKind::Detect, n, Profile::Fast, seed);
        s.trials = 10;
        s.process_crash = process_crash;
        s.no_watch = true;
        let r = run(&s);
        let model = Model::new(&s.gossip(), n);
        assert_detection_within_model(&r, &model, 10);
    }
}

/// 1,000 nodes join one after another through random earlier nodes (memberlist's LAN
/// defaults): every node ends up holding all 1,000 alive, with no false positives.
#[test]
fn a_thousand_nodes_join_and_converge() {
    let (seed, _g) = test_seed("a_thousand_nodes_join_and_converge", 13);
    let s = Scenario::new(ScenarioKind::Join, 1000, Profile::Lan, seed);
    let r = run(&s);
    let after = r
        .converged
        .expect("join reports convergence")
        .expect("every node must see all 1,000 members alive");
    assert!(
        after <= Duration::from_secs(60),
        "converged only {after:?} after the last join"
    );
    assert_eq!(r.false_positives, 0);
}

/// A node freezes until someone suspects it, then thaws: it must refute with a higher
/// incarnation every time, be alive everywhere again, and never be declared dead.
#[test]
fn a_suspected_live_node_refutes() {
    let (seed, _g) = test_seed("a_suspected_live_node_refutes", 14);
    for (profile, n, trials) in [(Profile::Fast, 20, 10), (Profile::Lan, 10, 3)] {
        let mut s = Scenario::new(ScenarioKind::Refute, n, profile, seed);
        s.trials = trials;
        let r = run(&s);
        assert_eq!(r.refuted, trials, "{profile}: {:?}", r.notes);
        assert_eq!(r.dead_about_victim, 0, "{profile}: declared dead");
        assert!(r.refuted_incarnation.expect("refute") > trials as u32);
        assert_eq!(r.false_positives, 0);
    }
}

/// A clean leave is seen as `Left` by everyone, never as `Dead`, and faster than a crash is
/// detected; the crash that follows is seen as `Dead` by everyone.
#[test]
fn leave_is_not_failure() {
    let (seed, _g) = test_seed("leave_is_not_failure", 15);
    for profile in [Profile::Fast, Profile::Lan] {
        let s = Scenario::new(ScenarioKind::Leave, 20, profile, seed);
        let r = run(&s);
        assert_eq!(r.leave_all.n, 19, "{profile}: everyone learns of the leave");
        assert_eq!(r.leave_as_dead, 0, "{profile}: a leave is not a death");
        assert_eq!(r.undetected, (0, 0), "{profile}: the crash is detected");
        let leave = r.leave_all.max.expect("leave samples");
        let crash = r.first.p50.expect("crash samples");
        assert!(
            leave < crash,
            "{profile}: leave took {leave:?}, crash detection {crash:?}"
        );
        assert_eq!(r.false_positives, 0);
    }
}

/// Two halves split: each declares the other dead (correctly: no false positives), and the
/// cluster becomes whole again after the heal (with a re-join, as memberlist needs). A
/// partition shorter than the suspicion timeout heals by itself with no verdict at all.
#[test]
fn partition_and_heal() {
    let (seed, _g) = test_seed("partition_and_heal", 16);
    let mut s = Scenario::new(ScenarioKind::Partition, 20, Profile::Fast, seed);
    s.duration = Duration::from_secs(5);
    let r = run(&s);
    assert_eq!(r.partition_split, Some(true), "each side holds only itself");
    assert_eq!(r.false_positives, 0);
    assert!(r.expected_deaths > 0);
    assert!(
        r.converged.expect("reported").is_some(),
        "whole again after the heal"
    );

    let mut s = Scenario::new(ScenarioKind::Partition, 20, Profile::Fast, seed);
    s.duration = Duration::from_millis(40);
    let r = run(&s);
    assert_eq!(r.healed_by_itself, Some(true));
    assert_eq!(r.expected_deaths, 0, "nobody declared anyone dead");
    assert_eq!(r.false_positives, 0);
}

/// The design promises no false positives at a few percent loss with the `fast` profile,
/// and none against a slow (but alive) node with Lifeguard on.
#[test]
fn no_false_positives_at_a_few_percent_loss() {
    let (seed, _g) = test_seed("no_false_positives_at_a_few_percent_loss", 17);
    for loss in [0.01, 0.05] {
        let mut s = Scenario::new(ScenarioKind::FalsePositives, 20, Profile::Fast, seed);
        s.link = Link::LAN.with_loss(loss);
        s.duration = Duration::from_secs(60);
        let r = run(&s);
        assert_eq!(r.false_positives, 0, "at {:.0}% loss", loss * 100.0);
    }
    let mut s = Scenario::new(ScenarioKind::Slow, 20, Profile::Fast, seed);
    s.duration = Duration::from_secs(60);
    let r = run(&s);
    assert_eq!(r.false_positives, 0, "slow node");
}

/// Lifeguard must cut false positives at 5-20% loss (memberlist's LAN defaults, 50 nodes,
/// 300 virtual seconds per loss rate): the test asserts the direction, the output gives the
/// ratio.
#[test]
fn lifeguard_cuts_false_positives_under_loss() {
    let (seed, _g) = test_seed("lifeguard_cuts_false_positives_under_loss", 18);
    let (mut on, mut off) = (0, 0);
    for loss in [0.05, 0.10, 0.15, 0.20] {
        for no_lifeguard in [false, true] {
            let mut s = Scenario::new(ScenarioKind::FalsePositives, 50, Profile::Lan, seed);
            s.link = Link::LAN.with_loss(loss);
            s.duration = Duration::from_secs(300);
            s.no_lifeguard = no_lifeguard;
            let r = s.run(None);
            println!(
                "loss {:>4.0}%  lifeguard {:<3}  false positives {:>3}  false suspicions {:>5}",
                loss * 100.0,
                if no_lifeguard { "off" } else { "on" },
                r.false_positives,
                r.false_suspicions
            );
            if no_lifeguard {
                off += r.false_positives;
            } else {
                on += r.false_positives;
            }
        }
    }
    println!(
        "false positives: lifeguard on {on}, off {off} (ratio {:.2})",
        on as f64 / off.max(1) as f64
    );
    assert!(
        on < off,
        "Lifeguard must cut false positives: on {on}, off {off}"
    );
}
