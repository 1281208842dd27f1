//! Named scenarios, as `vigil sim` and the tests run them, and their report.

use crate::metrics::{FailureKind, Spread, Traffic};
use crate::net::{Link, NodeId};
use crate::sim::{Progress, Sim, SimConfig};
use core::fmt;
use core::time::Duration;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vigil_gossip::{Config, MemberState, Profile};

/// What a scenario does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScenarioKind {
    /// Crash one node at a time (host vanishes), measure how long until the first and every
    /// live node declares it dead, restart it, repeat `trials` times.
    Detect,
    /// A healthy cluster on lossy links for `duration`: count `Dead` verdicts about live nodes.
    FalsePositives,
    /// Nodes join one by one through random earlier nodes; measure convergence.
    Join,
    /// One node freezes briefly (shorter than the suspicion timeout), is suspected and
    /// refutes with a higher incarnation; nobody may declare it dead.
    Refute,
    /// One node leaves cleanly while another crashes: measure both.
    Leave,
    /// The cluster splits in two for `duration`, then heals.
    Partition,
    /// One node processes every input late (`slow`): count false positives.
    Slow,
}

impl ScenarioKind {
    /// Every scenario.
    pub const ALL: [Self; 7] = [
        Self::Detect,
        Self::FalsePositives,
        Self::Join,
        Self::Refute,
        Self::Leave,
        Self::Partition,
        Self::Slow,
    ];

    /// The name `vigil sim` uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Detect => "detect",
            Self::FalsePositives => "false-positives",
            Self::Join => "join",
            Self::Refute => "refute",
            Self::Leave => "leave",
            Self::Partition => "partition",
            Self::Slow => "slow",
        }
    }
}

impl fmt::Display for ScenarioKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for ScenarioKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown scenario {s:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A scenario with its parameters.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// What to do.
    pub kind: ScenarioKind,
    /// Cluster size.
    pub nodes: usize,
    /// The gossip profile (see [`Scenario::gossip`] for the config actually used).
    pub profile: Profile,
    /// Seed for everything.
    pub seed: u64,
    /// Links (loss, latency, jitter).
    pub link: Link,
    /// Crash trials (`detect`).
    pub trials: usize,
    /// How long the measured phase lasts (`false-positives`, `slow`, `partition`).
    pub duration: Duration,
    /// Turn Lifeguard off (to measure what it is worth).
    pub no_lifeguard: bool,
    /// Turn the watch off (`Config::watch_neighbours` 0: SWIM's round-robin alone).
    pub no_watch: bool,
    /// Crash only the process: the host answers with ICMP port unreachable and TCP
    /// refusals, which `use_strong_evidence` takes as a proof of absence (a probe whose TCP
    /// fallback ping is refused declares the member dead at once).
    pub process_crash: bool,
    /// Extra processing delay of the slow node (`slow`).
    pub slow_delay: Duration,
    /// Hash the whole trace (for determinism checks).
    pub trace: bool,
    /// Print every engine event (and with `log_packets` every datagram) to stderr.
    pub log_events: bool,
    /// Print every datagram to stderr.
    pub log_packets: bool,
}

/// How often a node that restarted joins again while it misses members, as the speaker's
/// `gossip.rejoin_interval` (5 s).
const REJOIN_INTERVAL: Duration = Duration::from_secs(5);

/// Whether node `by` runs and holds `of` alive.
fn holds_alive(s: &Sim, by: NodeId, of: NodeId) -> bool {
    s.engine(by)
        .and_then(|e| e.member(&crate::net::name_of(of)))
        .is_some_and(|m| m.state == MemberState::Alive)
}

/// Whether every running node and `node` hold each other alive.
fn everyone_holds_alive(s: &Sim, node: NodeId) -> bool {
    s.running()
        .filter(|&n| n != node)
        .all(|n| holds_alive(s, n, node) && holds_alive(s, node, n))
}

impl Scenario {
    /// Defaults for a scenario: 10 trials, 60 s, a clean LAN.
    pub fn new(kind: ScenarioKind, nodes: usize, profile: Profile, seed: u64) -> Self {
        Self {
            kind,
            nodes,
            profile,
            seed,
            link: Link::LAN,
            trials: 10,
            duration: Duration::from_secs(60),
            no_lifeguard: false,
            no_watch: false,
            process_crash: false,
            slow_delay: Duration::ZERO,
            trace: false,
            log_events: false,
            log_packets: false,
        }
    }

    /// The engine configuration the nodes run.
    pub fn gossip(&self) -> Config {
        let mut c = Config::profile(self.profile);
        if self.no_lifeguard {
            c.lifeguard = false;
        }
        if self.no_watch {
            c.watch_neighbours = 0;
        }
        c
    }

    /// Runs it. `progress` is called now and then during long runs.
    pub fn run(&self, progress: Option<Box<dyn FnMut(Progress)>>) -> Report {
        let mut cfg = SimConfig::new(self.gossip(), self.seed);
        cfg.link = self.link;
        cfg.trace = self.trace;
        cfg.log_events = self.log_events;
        cfg.log_packets = self.log_packets;
        let mut sim = Sim::new(cfg);
        if let Some(p) = progress {
            sim.set_progress(200_000, p);
        }
        let mut report = Report::new(self);
        let wall = std::time::Instant::now(); // for the speed figure only
        let cpu = thread_cpu_time();
        match self.kind {
            ScenarioKind::Detect => self.detect(&mut sim, &mut report),
            ScenarioKind::FalsePositives => self.false_positives(&mut sim, &mut report, None),
            ScenarioKind::Slow => {
                let delay = if self.slow_delay.is_zero() {
                    self.gossip().probe_timeout * 2
                } else {
                    self.slow_delay
                };
                self.false_positives(&mut sim, &mut report, Some(delay));
            }
            ScenarioKind::Join => self.join(&mut sim, &mut report),
            ScenarioKind::Refute => self.refute(&mut sim, &mut report),
            ScenarioKind::Leave => self.leave(&mut sim, &mut report),
            ScenarioKind::Partition => self.partition(&mut sim, &mut report),
        }
        report.virtual_time = sim.now();
        report.wall_time = wall.elapsed();
        report.cpu_time = thread_cpu_time().zip(cpu).map(|(b, a)| b.saturating_sub(a));
        let m = sim.metrics();
        report.false_suspicions = m.false_suspicions;
        report.sim_events = m.sim_events;
        report.engine_spins = m.engine_spins;
        report.trace_hash = sim.trace_hash();
        report
    }

    fn rng(&self) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.seed ^ 0x5ce7_a210)
    }

    /// Long enough for every node's timers to have started and the cluster to settle.
    fn warmup(&self) -> Duration {
        (self.gossip().probe_interval * 5).max(Duration::from_secs(1))
    }

    /// Worst-case time for a crash to be known everywhere, with slack.
    fn detect_limit(&self) -> Duration {
        let c = self.gossip();
        let log = (self.nodes.max(1) as f64).log10().max(1.0);
        let susp_max = c
            .probe_interval
            .mul_f64(c.suspicion_mult as f64 * log * c.suspicion_max_timeout_mult as f64);
        let probe_cycle = c.probe_interval * (self.nodes.min(100) as u32);
        susp_max + probe_cycle + c.probe_interval * 20 + Duration::from_secs(5)
    }

    fn build(&self, sim: &mut Sim, report: &mut Report) {
        let t = std::time::Instant::now(); // for the speed figure only
        let cpu = thread_cpu_time();
        sim.add_nodes(self.nodes);
        sim.bootstrap();
        report.setup_wall = t.elapsed();
        report.setup_cpu = thread_cpu_time().zip(cpu).map(|(b, a)| b.saturating_sub(a));
    }

    fn detect(&self, sim: &mut Sim, report: &mut Report) {
        let mut rng = self.rng();
        self.build(sim, report);
        sim.run_for(self.warmup());
        let start = (sim.now(), sim.metrics().traffic);
        let fp_start = sim.metrics().false_positives.len();
        let step = (self.gossip().probe_interval / 5).max(Duration::from_millis(5));
        for _ in 0..self.trials {
            let up: Vec<NodeId> = sim.running().collect();
            if up.len() < 2 {
                break;
            }
            let victim = *up.choose(&mut rng).expect("non-empty");
            sim.crash(victim, self.process_crash);
            let f = sim.metrics().failures.len() - 1;
            let deadline = sim.now() + self.detect_limit();
            sim.run_until_cond(deadline, step, |s| s.metrics().failures[f].complete());
            // Bring it back and wait until everyone holds it alive again.
            let seeds: Vec<NodeId> = up
                .iter()
                .copied()
                .filter(|&n| n != victim)
                .collect::<Vec<_>>()
                .choose_multiple(&mut rng, 3)
                .copied()
                .collect();
            sim.restart(victim, &seeds);
            let deadline = sim.now() + self.detect_limit() + self.gossip().push_pull_interval * 4;
            let back = loop {
                // The speaker joins again every `rejoin_interval` while it misses members: a
                // join whose push/pulls all fail (lossy TCP handshakes) leaves the restarted
                // node knowing nobody, so that it would not see the next crash.
                let until = (sim.now() + REJOIN_INTERVAL).min(deadline);
                if sim.run_until_cond(until, step * 5, |s| everyone_holds_alive(s, victim)) {
                    break true;
                }
                if sim.now() >= deadline {
                    break false;
                }
                sim.join(victim, &seeds);
            };
            let name = crate::net::name_of(victim);
            if !back {
                report
                    .notes
                    .push(format!("{name} was not alive everywhere after its restart"));
            }
            sim.run_for(self.warmup());
        }
        report.measured = sim.now() - start.0;
        report.traffic = sim.metrics().traffic - start.1;
        report.false_positives = sim.metrics().false_positives.len() - fp_start;
        report.set_failures(sim, FailureKind::Crash);
    }

    fn false_positives(&self, sim: &mut Sim, report: &mut Report, slow: Option<Duration>) {
        // Build on a clean network, then turn the loss on for the measured phase.
        let link = sim.network().default_link;
        sim.network_mut().default_link = Link { loss: 0.0, ..link };
        self.build(sim, report);
        sim.run_for(self.warmup());
        sim.network_mut().default_link = link;
        if let Some(delay) = slow {
            sim.set_slow(0, Some(delay));
            report
                .notes
                .push(format!("node-00000 is slow by {delay:?}"));
        }
        let start = (sim.now(), sim.metrics().traffic);
        let fp_start = sim.metrics().false_positives.len();
        sim.run_for(self.duration);
        report.measured = sim.now() - start.0;
        report.traffic = sim.metrics().traffic - start.1;
        report.false_positives = sim.metrics().false_positives.len() - fp_start;
        if slow.is_some() {
            report.false_positives_about_slow = sim.metrics().false_positives[fp_start..]
                .iter()
                .filter(|f| f.about == 0)
                .count();
        }
    }

    fn join(&self, sim: &mut Sim, report: &mut Report) {
        let mut rng = self.rng();
        let n = self.nodes;
        let c = self.gossip();
        // Nodes arrive spread over one probe interval per ten nodes, each joining through up
        // to three random nodes that are already there.
        let spread = c.probe_interval.mul_f64((n as f64 / 10.0).max(1.0));
        let mut arrivals: Vec<Duration> = (1..n).map(|_| spread.mul_f64(rng.r#gen())).collect();
        arrivals.sort();
        sim.add_node();
        let start = sim.now();
        let traffic0 = sim.metrics().traffic;
        for (k, at) in arrivals.into_iter().enumerate() {
            sim.run_until(start + at);
            let id = sim.add_node();
            let earlier: Vec<NodeId> = (0..=k).collect();
            let seeds: Vec<NodeId> = earlier.choose_multiple(&mut rng, 3).copied().collect();
            sim.join(id, &seeds);
        }
        let last_join = sim.now();
        let deadline = last_join + self.detect_limit() + c.push_pull_interval * 10;
        let converged = sim.run_until_cond(deadline, c.probe_interval, |s| {
            s.running()
                .all(|i| s.engine(i).is_some_and(|e| e.num_live() == n))
        });
        report.converged = Some(converged.then(|| sim.now() - last_join));
        report.measured = sim.now() - start;
        report.traffic = sim.metrics().traffic - traffic0;
        report.false_positives = sim.metrics().false_positives.len();
    }

    fn refute(&self, sim: &mut Sim, report: &mut Report) {
        let c = self.gossip();
        self.build(sim, report);
        sim.run_for(self.warmup());
        let start = (sim.now(), sim.metrics().traffic);
        let fp_start = sim.metrics().false_positives.len();
        let victim = 0;
        let step = (c.probe_interval / 10).max(Duration::from_millis(1));
        let settle = self.detect_limit();
        report.trials = self.trials;
        for _ in 0..self.trials {
            // Freeze it until someone suspects it, then let it run: it must refute.
            let suspected = sim.metrics().suspected[victim];
            let dead = sim.metrics().declared_dead[victim];
            let incarnation = sim.engine(victim).map_or(0, |e| e.incarnation());
            sim.freeze(victim);
            let deadline = sim.now() + settle;
            let was_suspected = sim.run_until_cond(deadline, step, |s| {
                s.metrics().suspected[victim] > suspected
            });
            sim.thaw(victim);
            let deadline = sim.now() + settle;
            let back = sim.run_until_cond(deadline, step, |s| {
                s.running()
                    .all(|n| n == victim || holds_alive(s, n, victim))
            });
            sim.run_for(c.probe_interval * 10);
            let refuted = sim.engine(victim).map_or(0, |e| e.incarnation()) > incarnation;
            if was_suspected && back && refuted && sim.metrics().declared_dead[victim] == dead {
                report.refuted += 1;
            } else {
                report.notes.push(format!(
                    "trial at {:.3} s: suspected {was_suspected}, alive everywhere again {back}, \
                     refuted {refuted}, dead verdicts {}",
                    sim.now().as_secs_f64(),
                    sim.metrics().declared_dead[victim] - dead
                ));
            }
        }
        report.refuted_incarnation = sim.engine(victim).map(|e| e.incarnation());
        report.dead_about_victim = sim.metrics().declared_dead[victim] as usize;
        report.measured = sim.now() - start.0;
        report.traffic = sim.metrics().traffic - start.1;
        report.false_positives = sim.metrics().false_positives.len() - fp_start;
        report.expected_deaths = sim.metrics().expected_deaths;
    }

    fn leave(&self, sim: &mut Sim, report: &mut Report) {
        let c = self.gossip();
        self.build(sim, report);
        sim.run_for(self.warmup());
        let start = (sim.now(), sim.metrics().traffic);
        let step = (c.probe_interval / 5).max(Duration::from_millis(5));
        let leaver = 0;
        let crasher = self.nodes - 1;
        sim.leave(leaver, c.probe_interval * 10);
        let f = sim.metrics().failures.len() - 1;
        let deadline = sim.now() + self.detect_limit();
        sim.run_until_cond(deadline, step, |s| {
            s.metrics().failures[f].complete() && !s.status(leaver).is_running()
        });
        sim.crash(crasher, self.process_crash);
        let f = sim.metrics().failures.len() - 1;
        let deadline = sim.now() + self.detect_limit();
        sim.run_until_cond(deadline, step, |s| s.metrics().failures[f].complete());
        report.measured = sim.now() - start.0;
        report.traffic = sim.metrics().traffic - start.1;
        report.false_positives = sim.metrics().false_positives.len();
        report.set_failures(sim, FailureKind::Crash);
        report.set_leaves(sim);
    }

    fn partition(&self, sim: &mut Sim, report: &mut Report) {
        let c = self.gossip();
        let mut rng = self.rng();
        self.build(sim, report);
        sim.run_for(self.warmup());
        let start = (sim.now(), sim.metrics().traffic);
        let n = self.nodes;
        let half: Vec<NodeId> = (0..n / 2).collect();
        let other: Vec<NodeId> = (n / 2..n).collect();
        sim.partition(&[&half]);
        sim.run_for(self.duration);
        let split = (0..n).all(|i| {
            let side = if i < half.len() {
                half.len()
            } else {
                other.len()
            };
            sim.engine(i).is_some_and(|e| e.num_live() == side)
        });
        report.partition_split = Some(split);
        let fp_during = sim.metrics().false_positives.len();
        sim.heal();
        let healed_at = sim.now();
        let whole = |s: &Sim| {
            s.running()
                .all(|i| s.engine(i).is_some_and(|e| e.num_live() == n))
        };
        // Does it heal by itself (within the time a crash takes to be detected)?
        let deadline = healed_at + self.detect_limit();
        let healed = sim.run_until_cond(deadline, c.probe_interval, whole);
        report.healed_by_itself = Some(healed);
        if healed {
            report.converged = Some(Some(sim.now() - healed_at));
        } else {
            // memberlist does not merge clusters that hold each other dead (Serf's reconnect
            // does): join every node of the second half to one random node of the first.
            for &b in &other {
                let seed = *half.choose(&mut rng).expect("two halves");
                sim.join(b, &[seed]);
            }
            let rejoined_at = sim.now();
            let deadline = rejoined_at + self.detect_limit() + c.push_pull_interval * 4;
            let ok = sim.run_until_cond(deadline, c.probe_interval, whole);
            report.converged = Some(ok.then(|| sim.now() - rejoined_at));
        }
        report.measured = sim.now() - start.0;
        report.traffic = sim.metrics().traffic - start.1;
        report.false_positives = fp_during;
        let after = sim.metrics().false_positives.len() - fp_during;
        if after > 0 {
            report.notes.push(format!(
                "{after} dead verdicts after the heal (suspicions raised during the partition, \
                 not counted as false positives)"
            ));
        }
        report.expected_deaths = sim.metrics().expected_deaths;
    }
}

/// What a scenario measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Scenario name.
    pub scenario: ScenarioKind,
    /// Cluster size.
    pub nodes: usize,
    /// Gossip profile.
    pub profile: Profile,
    /// Whether Lifeguard was on.
    pub lifeguard: bool,
    /// Seed.
    pub seed: u64,
    /// Datagram loss rate.
    pub loss: f64,
    /// Crash detections: time to the first node's `Dead`, one sample per crash.
    pub first: Spread,
    /// Crash detections: time to each live node's `Dead`, one sample per (crash, node).
    pub all: Spread,
    /// Crash detections: time until the last node knew, one sample per crash.
    pub last: Spread,
    /// Crashes (and the number of node-crash pairs) that were not learned before the limit.
    pub undetected: (usize, usize),
    /// Clean leaves: time to each live node's `Left`.
    pub leave_all: Spread,
    /// Nodes that recorded a leaving node as `Dead` rather than `Left`.
    pub leave_as_dead: usize,
    /// `Dead` verdicts about healthy nodes in the measured phase.
    pub false_positives: usize,
    /// Of those, about the slow node (`slow`).
    pub false_positives_about_slow: usize,
    /// `Suspect` events about healthy nodes (whole run).
    pub false_suspicions: u64,
    /// Correct `Dead` verdicts about frozen or partitioned nodes.
    pub expected_deaths: u64,
    /// Join / heal convergence: `Some(None)` if it did not converge.
    pub converged: Option<Option<Duration>>,
    /// Whether each side held exactly itself alive during a partition.
    pub partition_split: Option<bool>,
    /// The refuting node's incarnation at the end (`refute`).
    pub refuted_incarnation: Option<u32>,
    /// Trials run (`refute`).
    pub trials: usize,
    /// Trials in which the frozen node was suspected, refuted with a higher incarnation and
    /// was alive everywhere again, with no `Dead` verdict about it (`refute`).
    pub refuted: usize,
    /// `Dead` verdicts about the refuting node, whole run (`refute`).
    pub dead_about_victim: usize,
    /// Whether a partition healed without help (`partition`).
    pub healed_by_itself: Option<bool>,
    /// Traffic in the measured phase.
    pub traffic: Traffic,
    /// Length of the measured phase.
    pub measured: Duration,
    /// Total virtual time.
    pub virtual_time: Duration,
    /// Wall-clock time of the whole run (bootstrap included).
    pub wall_time: Duration,
    /// Wall-clock time spent creating and bootstrapping the nodes (part of `wall_time`).
    pub setup_wall: Duration,
    /// CPU time of the simulating thread over the whole run, where the OS tells it (Linux):
    /// on a busy machine the honest measure of what one core does.
    pub cpu_time: Option<Duration>,
    /// CPU time spent creating and bootstrapping the nodes (part of `cpu_time`).
    pub setup_cpu: Option<Duration>,
    /// Simulator events processed.
    pub sim_events: u64,
    /// Times the simulator had to nudge a node that asked to be woken in the past.
    pub engine_spins: u64,
    /// Trace hash (when tracing).
    pub trace_hash: u64,
    /// Anything odd.
    pub notes: Vec<String>,
}

impl Report {
    fn new(s: &Scenario) -> Self {
        Self {
            scenario: s.kind,
            nodes: s.nodes,
            profile: s.profile,
            lifeguard: !s.no_lifeguard,
            seed: s.seed,
            loss: s.link.loss,
            first: Spread::default(),
            all: Spread::default(),
            last: Spread::default(),
            undetected: (0, 0),
            leave_all: Spread::default(),
            leave_as_dead: 0,
            false_positives: 0,
            false_positives_about_slow: 0,
            false_suspicions: 0,
            expected_deaths: 0,
            converged: None,
            partition_split: None,
            refuted_incarnation: None,
            trials: 0,
            refuted: 0,
            dead_about_victim: 0,
            healed_by_itself: None,
            traffic: Traffic::default(),
            measured: Duration::ZERO,
            virtual_time: Duration::ZERO,
            wall_time: Duration::ZERO,
            setup_wall: Duration::ZERO,
            cpu_time: None,
            setup_cpu: None,
            sim_events: 0,
            engine_spins: 0,
            trace_hash: 0,
            notes: Vec::new(),
        }
    }

    fn set_failures(&mut self, sim: &Sim, kind: FailureKind) {
        let crashes: Vec<_> = sim
            .metrics()
            .failures
            .iter()
            .filter(|f| f.kind == kind)
            .collect();
        self.first = Spread::of(crashes.iter().filter_map(|f| f.first()).collect());
        self.last = Spread::of(crashes.iter().filter_map(|f| f.all()).collect());
        self.all = Spread::of(
            crashes
                .iter()
                .flat_map(|f| f.learned.iter().map(|&(_, d)| d))
                .collect(),
        );
        self.undetected = (
            crashes.iter().filter(|f| !f.complete()).count(),
            crashes
                .iter()
                .map(|f| f.observers.saturating_sub(f.learned.len()))
                .sum(),
        );
    }

    fn set_leaves(&mut self, sim: &Sim) {
        let leaves: Vec<_> = sim
            .metrics()
            .failures
            .iter()
            .filter(|f| f.kind == FailureKind::Leave)
            .collect();
        self.leave_all = Spread::of(
            leaves
                .iter()
                .flat_map(|f| f.learned.iter().map(|&(_, d)| d))
                .collect(),
        );
        self.leave_as_dead = leaves.iter().map(|f| f.as_dead).sum();
    }

    /// Datagrams per node per second in the measured phase.
    pub fn packets_per_node_sec(&self) -> f64 {
        self.per_node_sec(self.traffic.packets)
    }

    /// UDP bytes per node per second in the measured phase.
    pub fn bytes_per_node_sec(&self) -> f64 {
        self.per_node_sec(self.traffic.bytes)
    }

    /// TCP bytes per node per second in the measured phase.
    pub fn stream_bytes_per_node_sec(&self) -> f64 {
        self.per_node_sec(self.traffic.stream_bytes)
    }

    fn per_node_sec(&self, x: u64) -> f64 {
        let secs = self.measured.as_secs_f64();
        if secs == 0.0 || self.nodes == 0 {
            return 0.0;
        }
        x as f64 / self.nodes as f64 / secs
    }

    /// Virtual seconds simulated per wall-clock second, setup (bootstrap) excluded.
    pub fn speed(&self) -> f64 {
        let wall = self.wall_time.saturating_sub(self.setup_wall);
        self.virtual_time.as_secs_f64() / wall.as_secs_f64().max(1e-9)
    }

    /// Virtual seconds simulated per second of CPU time (one core), setup excluded.
    pub fn cpu_speed(&self) -> Option<f64> {
        let run = self.cpu_time?.saturating_sub(self.setup_cpu?);
        Some(self.virtual_time.as_secs_f64() / run.as_secs_f64().max(1e-9))
    }
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.3} s", d.as_secs_f64()))
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "scenario {} | {} nodes | profile {} | lifeguard {} | loss {:.1}% | seed {}",
            self.scenario,
            self.nodes,
            self.profile,
            if self.lifeguard { "on" } else { "off" },
            self.loss * 100.0,
            self.seed
        )?;
        if self.first.n > 0 || self.undetected.0 > 0 {
            writeln!(
                f,
                "detection, first node   p50 {}  p99 {}  max {}  ({} crashes)",
                secs(self.first.p50),
                secs(self.first.p99),
                secs(self.first.max),
                self.first.n
            )?;
            writeln!(
                f,
                "detection, all nodes    p50 {}  p99 {}  max {}  ({} node-crash pairs)",
                secs(self.all.p50),
                secs(self.all.p99),
                secs(self.all.max),
                self.all.n
            )?;
            writeln!(
                f,
                "detection, last node    p50 {}  p99 {}  max {}",
                secs(self.last.p50),
                secs(self.last.p99),
                secs(self.last.max)
            )?;
            if self.undetected.0 > 0 {
                writeln!(
                    f,
                    "undetected              {} crashes ({} node-crash pairs) not known everywhere in time",
                    self.undetected.0, self.undetected.1
                )?;
            }
        }
        if self.leave_all.n > 0 {
            writeln!(
                f,
                "leave, all nodes        p50 {}  p99 {}  max {}  ({} saw it as dead)",
                secs(self.leave_all.p50),
                secs(self.leave_all.p99),
                secs(self.leave_all.max),
                self.leave_as_dead
            )?;
        }
        if let Some(c) = self.converged {
            writeln!(
                f,
                "converged               {}",
                c.map_or_else(
                    || "no".into(),
                    |d| format!("after {:.3} s", d.as_secs_f64())
                )
            )?;
        }
        if let Some(s) = self.partition_split {
            writeln!(
                f,
                "partition split cleanly {}",
                if s { "yes" } else { "no" }
            )?;
        }
        if let Some(i) = self.refuted_incarnation {
            writeln!(
                f,
                "refutations             {} of {} freezes refuted, incarnation now {i}, {} dead verdicts about it",
                self.refuted, self.trials, self.dead_about_victim
            )?;
        }
        if let Some(h) = self.healed_by_itself {
            writeln!(
                f,
                "healed by itself        {}",
                if h { "yes" } else { "no (nodes re-joined)" }
            )?;
        }
        writeln!(
            f,
            "false positives         {} dead verdicts about healthy nodes in {:.0} s{}",
            self.false_positives,
            self.measured.as_secs_f64(),
            if self.scenario == ScenarioKind::Slow {
                format!(" ({} about the slow node)", self.false_positives_about_slow)
            } else {
                String::new()
            }
        )?;
        writeln!(
            f,
            "false suspicions        {} suspect events about healthy nodes",
            self.false_suspicions
        )?;
        if self.expected_deaths > 0 {
            writeln!(
                f,
                "expected deaths         {} (frozen or partitioned nodes)",
                self.expected_deaths
            )?;
        }
        writeln!(
            f,
            "traffic per node        {:.1} msg/s  {:.0} B/s UDP  {:.0} B/s TCP ({} streams)",
            self.packets_per_node_sec(),
            self.bytes_per_node_sec(),
            self.stream_bytes_per_node_sec(),
            self.traffic.streams
        )?;
        writeln!(
            f,
            "simulator               {:.1} virtual s in {:.1} wall s (+{:.1} s setup) = {:.2}x real time ({} events)",
            self.virtual_time.as_secs_f64(),
            self.wall_time.saturating_sub(self.setup_wall).as_secs_f64(),
            self.setup_wall.as_secs_f64(),
            self.speed(),
            self.sim_events
        )?;
        if let (Some(cpu), Some(setup), Some(speed)) =
            (self.cpu_time, self.setup_cpu, self.cpu_speed())
        {
            writeln!(
                f,
                "simulator CPU           {:.1} CPU s (+{:.1} s setup) = {:.2}x real time on one core",
                cpu.saturating_sub(setup).as_secs_f64(),
                setup.as_secs_f64(),
                speed
            )?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// CPU time used by the calling thread so far (Linux: `/proc/thread-self/schedstat`, whose
/// first field is nanoseconds on a CPU); `None` elsewhere. For the speed figure only: wall
/// time on a shared machine counts other processes' turns too.
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(nanos))
}
