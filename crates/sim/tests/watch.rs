//! The watch (`Config::watch_neighbours`, crates/gossip/src/engine/watch.rs) on the
//! simulator: a lost or frozen host is declared dead from its watchers' confirmed silence,
//! sooner than SWIM's round-robin and suspicion alone find it, while an owner starved the way
//! the soak starves it (CPU bandwidth control: it runs a few milliseconds of every 100 ms,
//! under 5% loss per host each way) is never declared dead. Everything is virtual time;
//! `SIM_SEED=<seed> cargo test -p vigil-sim --test watch` replays another seed.

use core::time::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vigil_gossip::{Config, MemberState, Profile};
use vigil_sim::{
    Link, NodeId, Report, Scenario, ScenarioKind, Sim, SimConfig, net::name_of, test_seed,
};

/// 5% loss at the sender's host and 5% at the receiver's.
const LOSS: f64 = 1.0 - 0.95 * 0.95;

fn detect(no_watch: bool, link: Link, seed: u64) -> Report {
    let mut s = Scenario::new(ScenarioKind::Detect, 5, Profile::Fast, seed);
    s.trials = 30;
    s.no_watch = no_watch;
    s.link = link;
    let r = s.run(None);
    println!("watch {}: {r}", if no_watch { "off" } else { "on" });
    r
}

fn assert_clean(r: &Report, what: &str) {
    assert_eq!(r.undetected, (0, 0), "{what}: every crash known everywhere");
    assert_eq!(r.false_positives, 0, "{what}: no live node declared dead");
    assert!(r.notes.is_empty(), "{what}: {:?}", r.notes);
}

/// Five nodes, 30 lost hosts each way: with the watch the worst first verdict comes before
/// the median one without it, and within the watch's silence bound plus one watch interval
/// (the last ack can be that old when the host goes) and a helper round.
#[test]
fn the_watch_finds_a_lost_host_sooner_than_swim_alone() {
    let (seed, _g) = test_seed("the_watch_finds_a_lost_host_sooner_than_swim_alone", 51);
    let fast = Config::fast();
    for link in [Link::LAN, Link::LAN.with_loss(LOSS)] {
        let on = detect(false, link, seed);
        let off = detect(true, link, seed);
        assert_clean(&on, "watch on");
        assert_clean(&off, "watch off");
        let on_max = on.first.max.expect("samples");
        let off_p50 = off.first.p50.expect("samples");
        assert!(
            on_max < off_p50,
            "watch max {on_max:?}, SWIM alone p50 {off_p50:?}"
        );
        if link.loss == 0.0 {
            assert!(
                on.last.max.expect("samples") <= fast.watch_dead_after + fast.probe_timeout,
                "known everywhere after {:?}",
                on.last.max
            );
        }
    }
}

/// The soak's starved owner: it runs `quota` of every 100 ms period (jittered by up to a
/// millisecond) and is stopped the rest, for `soak` of virtual time, on lossy links. Returns
/// (dead events about anyone, suspicions of the starved node, periods).
fn starved_owner(n: usize, quota: Duration, soak: Duration, seed: u64) -> (u32, u32, u32) {
    let mut cfg = SimConfig::new(Config::fast(), seed);
    cfg.link = Link::LAN.with_loss(LOSS);
    let mut sim = Sim::new(cfg);
    sim.add_nodes(n);
    sim.bootstrap();
    sim.run_for(Duration::from_secs(1));
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x0c_f5);
    let starved: NodeId = 0;
    let dead0: u32 = sim.metrics().declared_dead.iter().sum();
    let susp0 = sim.metrics().suspected[starved];
    let end = sim.now() + soak;
    let mut periods = 0;
    while sim.now() < end {
        let run = quota + Duration::from_micros(rng.gen_range(0..1_000));
        let stop = Duration::from_millis(100) - quota;
        sim.run_for(run);
        sim.freeze_for(starved, stop);
        sim.run_for(stop);
        periods += 1;
    }
    for i in 0..n {
        if let Some(e) = sim.engine(i) {
            let st = e.stats();
            if st.deaths_declared > 0 {
                println!(
                    "node {i}: {} deaths declared, {} by the watch, {} proven absent",
                    st.deaths_declared, st.watch_deaths_declared, st.absences_proven
                );
            }
        }
    }
    let m = sim.metrics();
    (
        m.declared_dead.iter().sum::<u32>() - dead0,
        m.suspected[starved] - susp0,
        periods,
    )
}

/// Starved to 10 ms and to 2 ms of every 100 ms (stopped 90 and 98 ms at a time), 5% loss
/// per host each way: suspected (the scenario bites), never declared dead.
#[test]
fn a_starved_owner_is_suspected_but_never_declared_dead() {
    let (seed, _g) = test_seed("a_starved_owner_is_suspected_but_never_declared_dead", 52);
    for quota_ms in [10, 2] {
        let quota = Duration::from_millis(quota_ms);
        let (dead, suspicions, periods) = starved_owner(5, quota, Duration::from_secs(120), seed);
        println!(
            "5 nodes, {:.2}% loss per datagram, owner runs {quota_ms} ms of every 100 ms for \
             {periods} periods: {dead} dead events, {suspicions} suspicions of it",
            LOSS * 100.0
        );
        assert!(
            suspicions > 0,
            "quota {quota_ms} ms: the starvation never bit"
        );
        assert_eq!(
            dead, 0,
            "quota {quota_ms} ms: a live node was declared dead"
        );
    }
}

/// A frozen host (every process stopped for good, as the benchmark's SIGSTOP) is found by
/// its watchers just as a lost one is, and sooner than without the watch.
#[test]
fn a_frozen_host_is_found_by_its_watchers() {
    let (seed, _g) = test_seed("a_frozen_host_is_found_by_its_watchers", 53);
    let mut times = [Duration::ZERO; 2];
    for (k, watch) in [true, false].into_iter().enumerate() {
        let mut c = Config::fast();
        if !watch {
            c.watch_neighbours = 0;
        }
        let mut cfg = SimConfig::new(c, seed);
        cfg.link = Link::LAN;
        let mut sim = Sim::new(cfg);
        sim.add_nodes(5);
        sim.bootstrap();
        sim.run_for(Duration::from_secs(1));
        let victim: NodeId = 2;
        let name = name_of(victim);
        sim.freeze(victim);
        let frozen = sim.now();
        let known_dead = |s: &Sim| {
            [0, 1, 3, 4].iter().all(|&i| {
                s.engine(i)
                    .and_then(|e| e.member(&name))
                    .is_some_and(|m| m.state == MemberState::Dead)
            })
        };
        let step = Duration::from_millis(1);
        assert!(
            sim.run_until_cond(frozen + Duration::from_secs(2), step, known_dead),
            "watch {watch}: not dead everywhere within 2 s"
        );
        times[k] = sim.now() - frozen;
        let by_watch: u64 = [0, 1, 3, 4]
            .iter()
            .map(|&i| sim.engine(i).expect("up").stats().watch_deaths_declared)
            .sum();
        println!(
            "watch {watch}: known dead everywhere after {:?}, {by_watch} by the watch",
            sim.now() - frozen
        );
        assert_eq!(by_watch > 0, watch, "watch {watch}: declared by the watch");
    }
    println!(
        "frozen host known dead everywhere: watch {:?}, SWIM alone {:?}",
        times[0], times[1]
    );
    assert!(times[0] < times[1]);
}
