//! Same seed, same trace: every datagram, stream and event, hashed, is identical across runs;
//! a different seed gives a different trace.

use core::time::Duration;
use vigil_gossip::{Config, Profile};
use vigil_sim::{Link, Scenario, ScenarioKind, Sim, SimConfig, test_seed};

/// A script that uses every fault the simulator has, on lossy, jittery links.
fn eventful_run(seed: u64) -> (u64, u64, usize) {
    let mut cfg = SimConfig::new(Config::fast(), seed);
    cfg.trace = true;
    cfg.link = Link {
        loss: 0.05,
        latency: Duration::from_micros(200),
        jitter: Duration::from_micros(300),
    };
    let mut sim = Sim::new(cfg);
    sim.add_nodes(12);
    sim.bootstrap();
    let s = Duration::from_millis;
    sim.run_for(s(500));
    sim.crash(3, false);
    sim.freeze_for(4, s(120));
    sim.set_slow(5, Some(s(30)));
    sim.run_for(s(800));
    sim.crash(6, true);
    sim.leave(7, s(500));
    sim.partition(&[&[0, 1, 2]]);
    sim.run_for(s(1500));
    sim.heal();
    sim.restart(3, &[0, 1]);
    sim.set_slow(5, None);
    let joiner = sim.add_node();
    sim.join(joiner, &[8]);
    sim.run_for(s(3000));
    let m = sim.metrics();
    (sim.trace_hash(), m.traffic.packets, m.false_positives.len())
}

#[test]
fn same_seed_same_trace() {
    let (seed, _g) = test_seed("same_seed_same_trace", 21);
    let a = eventful_run(seed);
    let b = eventful_run(seed);
    assert_eq!(a, b, "two runs with seed {seed} differ");
    let c = eventful_run(seed + 1);
    assert_ne!(
        a.0,
        c.0,
        "seeds {seed} and {} gave the same trace",
        seed + 1
    );
}

#[test]
fn scenarios_replay_exactly() {
    let (seed, _g) = test_seed("scenarios_replay_exactly", 22);
    let run = |seed| {
        let mut s = Scenario::new(ScenarioKind::Detect, 30, Profile::Fast, seed);
        s.trials = 3;
        s.link = Link::LAN.with_loss(0.02);
        s.trace = true;
        let r = s.run(None);
        (r.trace_hash, r.first, r.all, r.traffic)
    };
    let a = run(seed);
    assert_eq!(a, run(seed));
    assert_ne!(a.0, run(seed + 1).0);
}
