//! Fleet: many real speakers, each on a lab host of its own with its Node and speaker Pod,
//! against the one API server (not Node objects: every speaker lists and watches, joins the
//! gossip and elects). Measured: how long until every Service has its ServiceL2Status, each
//! speaker's CPU over that and idle, its memory, the API requests per node, a host loss at that
//! size (the owner of one Service's IP loses its cable, as in the failover phase), and the
//! drain.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant, SystemTime};

use crate::lab::Bench;
use crate::objects;
use crate::phase::{self, Scenario, Trial, Usage, Window};
use crate::system::{Programs, Running, System};

/// The fleet namespace.
pub(crate) const FLEET_NS: &str = "bench-fleet";
/// Fleet Services ask for `198.18.48.0` upward (the pool's second range; the scale runs' block
/// starts at `198.18.32.0`).
const FIRST_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 48, 0);
/// Services created at once.
const PARALLEL: usize = 16;
/// How long the speakers get to start, list and join before the Services come.
const JOIN_WAIT: Duration = Duration::from_secs(15);

/// The knobs of a fleet run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FleetPlan {
    /// Real speakers (hosts).
    pub(crate) speakers: usize,
    /// Services.
    pub(crate) services: usize,
    /// Host-loss trials.
    pub(crate) trials: usize,
    /// The idle window.
    pub(crate) idle: Duration,
    /// Bound on the wait for every ServiceL2Status (and for their removal).
    pub(crate) sync_limit: Duration,
}

/// What a fleet run measured.
#[derive(Debug, Clone)]
pub(crate) struct FleetResult {
    /// Which system.
    pub(crate) system: System,
    /// Real speakers.
    pub(crate) speakers: usize,
    /// Services.
    pub(crate) services: usize,
    /// From the first create to the last ServiceL2Status (`None`: not within the bound).
    pub(crate) sync: Option<Duration>,
    /// ServiceL2Status objects when the wait ended.
    pub(crate) statuses: usize,
    /// The sync window and the speakers' usage over it.
    pub(crate) sync_window: (Window, Usage),
    /// Idle afterwards.
    pub(crate) idle: (Window, Usage),
    /// Host-loss trials.
    pub(crate) failover: Vec<Trial>,
    /// From the delete calls to no ServiceL2Status left (`None`: not within the bound).
    pub(crate) drain: Option<Duration>,
    /// What went wrong.
    pub(crate) notes: Vec<String>,
}

/// Runs `system` on `plan.speakers` hosts with `plan.services` Services. The hosts' Nodes and
/// Pods must exist ([`Bench::register_fleet`]).
pub(crate) fn run(
    bench: &Bench,
    programs: &Programs,
    system: System,
    plan: FleetPlan,
) -> Result<FleetResult, String> {
    objects::ensure_ns(bench, FLEET_NS)?;
    let mut running = Running::start_on(bench, programs, system, plan.speakers)?;
    let result = measure(bench, programs, &mut running, plan);
    let drain_start = Instant::now();
    let deleted = objects::delete_all(bench, FLEET_NS);
    let mut drain = None;
    while drain_start.elapsed() < plan.sync_limit {
        if objects::count_statuses(bench, FLEET_NS).unwrap_or(usize::MAX) == 0 {
            drain = Some(drain_start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    running.stop();
    let _ = objects::delete_statuses(bench);
    result.map(|mut r| {
        r.drain = drain;
        if let Err(e) = deleted {
            eprintln!("vigil-bench-k8s: {e}");
            r.notes.push(e);
        }
        r
    })
}

fn measure(
    bench: &Bench,
    programs: &Programs,
    running: &mut Running,
    plan: FleetPlan,
) -> Result<FleetResult, String> {
    let system = running.system;
    std::thread::sleep(JOIN_WAIT);
    let dead = running.dead();
    if !dead.is_empty() {
        return Err(format!("exited: {}", dead.join(", ")));
    }
    let before = phase::read_all(running);
    let from = SystemTime::now();
    let start = Instant::now();
    objects::create_many(bench, FLEET_NS, FIRST_IP, plan.services, PARALLEL)?;
    eprintln!(
        "vigil-bench-k8s: fleet {} {}: {} Services created in {:?}",
        system.name(),
        plan.speakers,
        plan.services,
        start.elapsed()
    );
    let mut sync = None;
    let mut statuses = 0;
    let mut notes = Vec::new();
    while start.elapsed() < plan.sync_limit {
        statuses = objects::count_statuses(bench, FLEET_NS)?;
        if statuses >= plan.services {
            sync = Some(start.elapsed());
            break;
        }
        let dead = running.dead();
        if !dead.is_empty() {
            return Err(format!("exited: {}", dead.join(", ")));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    if sync.is_none() {
        notes.push(format!(
            "{statuses} of {} ServiceL2Status within {:?}",
            plan.services, plan.sync_limit
        ));
    }
    let window = Window {
        from,
        to: SystemTime::now(),
    };
    let after = phase::read_all(running);
    let sync_window = (window, phase::usage(&before, &after, window.length()));
    eprintln!(
        "vigil-bench-k8s: fleet {} {}: {statuses} ServiceL2Status after {:?}",
        system.name(),
        plan.speakers,
        start.elapsed()
    );
    std::thread::sleep(Duration::from_secs(5));
    let before = phase::read_all(running);
    let from = SystemTime::now();
    std::thread::sleep(plan.idle);
    let window = Window {
        from,
        to: SystemTime::now(),
    };
    let after = phase::read_all(running);
    let idle = (window, phase::usage(&before, &after, window.length()));
    let mut failover = Vec::new();
    for t in 0..plan.trials {
        match phase::failover_trial(bench, programs, running, Scenario::HostLoss, FIRST_IP) {
            Ok(trial) => {
                eprintln!(
                    "vigil-bench-k8s: fleet {} {} link trial {}: {} ms{}",
                    system.name(),
                    plan.speakers,
                    t + 1,
                    trial.outage.as_millis(),
                    if trial.moved { "" } else { ", did not move" }
                );
                failover.push(trial);
            }
            Err(e) => {
                let note = format!("link trial {}: {e}", t + 1);
                eprintln!("vigil-bench-k8s: fleet {}: {note}", system.name());
                notes.push(note);
                for i in 0..running.speakers.len() {
                    let _ = bench.set_link(&bench.hosts[i].name, true);
                    if !running.speakers[i].running() {
                        running.restart(bench, programs, i)?;
                    }
                }
            }
        }
    }
    Ok(FleetResult {
        system,
        speakers: plan.speakers,
        services: plan.services,
        sync,
        statuses,
        sync_window,
        idle,
        failover,
        drain: None,
        notes,
    })
}
