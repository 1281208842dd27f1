//! Scale: one system with many Services and many Nodes. The five real speakers stay; the other
//! Nodes are objects (no speaker could run there on two shared cores). Measured: how long
//! until every Service has its ServiceL2Status (controller and speakers together), the
//! speakers' CPU over that and when idle, their memory, the API requests, and the time from
//! creating one more Service to its first ARP answer.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant, SystemTime};

use crate::lab::Bench;
use crate::objects;
use crate::phase::{self, Usage, Window};
use crate::system::{Programs, Running, System};

/// The scale namespace.
pub(crate) const SCALE_NS: &str = "bench-scale";
/// Scale Services ask for `198.18.32.0` upward.
const FIRST_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 32, 0);
/// Services created at once.
const PARALLEL: usize = 16;

/// The knobs of a scale run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScalePlan {
    /// Services.
    pub(crate) services: usize,
    /// Creation trials once all are announced.
    pub(crate) trials: usize,
    /// The idle window.
    pub(crate) idle: Duration,
    /// Bound on the wait for every ServiceL2Status.
    pub(crate) sync_limit: Duration,
    /// The Node churn window after the idle one, if this run has one.
    pub(crate) node_churn: Option<NodeChurnPlan>,
    /// Whether to end with a restart sync: every speaker stopped, every ServiceL2Status
    /// deleted, the speakers started again with every Service already assigned.
    pub(crate) restart_sync: bool,
}

/// The restart sync: the speakers alone, every Service already assigned by the controller.
#[derive(Debug, Clone)]
pub(crate) struct RestartSync {
    /// From starting the speakers to every ServiceL2Status (`None`: not within the bound).
    pub(crate) took: Option<Duration>,
    /// ServiceL2Status objects wanted (as many as before the stop) and found at the end.
    pub(crate) statuses: (usize, usize),
    /// The window and the new speakers' usage over it (their whole life: start-up included).
    pub(crate) window: (Window, Usage),
}

/// Node churn: every Node's status patched as a kubelet heartbeat patches it (only
/// `lastHeartbeatTime` moves), every `every` for `window`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeChurnPlan {
    /// How long.
    pub(crate) window: Duration,
    /// Between rounds of patches.
    pub(crate) every: Duration,
}

/// What a Node churn window measured.
#[derive(Debug, Clone)]
pub(crate) struct NodeChurn {
    /// The window and the speakers' usage over it.
    pub(crate) window: (Window, Usage),
    /// Rounds of patches.
    pub(crate) rounds: usize,
    /// Node status patches made, all rounds together.
    pub(crate) patches: usize,
    /// ServiceL2Status objects before and after the window (heartbeats must change none).
    pub(crate) statuses: (usize, usize),
}

/// What a scale run measured.
#[derive(Debug, Clone)]
pub(crate) struct ScaleResult {
    /// Which system.
    pub(crate) system: System,
    /// How many Services.
    pub(crate) services: usize,
    /// From the first create to the last ServiceL2Status (`None`: not within the bound).
    pub(crate) sync: Option<Duration>,
    /// ServiceL2Status objects when the wait ended.
    pub(crate) statuses: usize,
    /// Creating the Services (the bench's own requests) took this long.
    pub(crate) create_took: Duration,
    /// The sync window and the speakers' usage over it.
    pub(crate) sync_window: (Window, Usage),
    /// Idle afterwards.
    pub(crate) idle: (Window, Usage),
    /// The Node churn window.
    pub(crate) node_churn: Option<NodeChurn>,
    /// One more Service to its first ARP answer.
    pub(crate) change: Vec<phase::Creation>,
    /// The restart sync, if the run had one.
    pub(crate) restart: Option<RestartSync>,
    /// Creation trials unanswered.
    pub(crate) change_missed: usize,
    /// From the calls deleting every Service and slice to no ServiceL2Status left (`None`: not
    /// within the bound).
    pub(crate) drain: Option<Duration>,
    /// How long the calls deleting every Service and slice took: the API server deletes a
    /// collection one object at a time, so this is a floor under the drain, as `create_took`
    /// is under the sync.
    pub(crate) delete_took: Duration,
    /// What went wrong.
    pub(crate) notes: Vec<String>,
}

/// Runs `system` with `plan.services` Services.
pub(crate) fn run(
    bench: &Bench,
    programs: &Programs,
    system: System,
    plan: ScalePlan,
) -> Result<ScaleResult, String> {
    objects::ensure_ns(bench, SCALE_NS)?;
    let mut running = Running::start(bench, programs, system)?;
    let result = measure(bench, programs, &mut running, plan);
    // The drain is timed from the delete calls themselves (the speakers start withdrawing
    // while the collection is still being deleted).
    let drain_start = Instant::now();
    let deleted = objects::delete_all(bench, SCALE_NS);
    let delete_took = drain_start.elapsed();
    let mut drain = None;
    while drain_start.elapsed() < plan.sync_limit {
        if objects::count_statuses(bench, SCALE_NS).unwrap_or(usize::MAX) == 0 {
            drain = Some(drain_start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
    running.stop();
    let _ = objects::delete_statuses(bench);
    result.map(|mut r| {
        r.drain = drain;
        r.delete_took = delete_took;
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
    plan: ScalePlan,
) -> Result<ScaleResult, String> {
    let system = running.system;
    // Let the speakers join and list before the burst.
    std::thread::sleep(Duration::from_secs(5));
    let before = phase::read_all(running);
    let from = SystemTime::now();
    let start = Instant::now();
    objects::create_many(bench, SCALE_NS, FIRST_IP, plan.services, PARALLEL)?;
    let create_took = start.elapsed();
    eprintln!(
        "vigil-bench-k8s: scale {} {}: {} Services created in {create_took:?}",
        system.name(),
        plan.services,
        plan.services
    );
    let mut sync = None;
    let mut statuses = 0;
    let mut notes = Vec::new();
    while start.elapsed() < plan.sync_limit {
        statuses = objects::count_statuses(bench, SCALE_NS)?;
        if statuses >= plan.services {
            sync = Some(start.elapsed());
            break;
        }
        let dead = running.dead();
        if !dead.is_empty() {
            return Err(format!("exited: {}", dead.join(", ")));
        }
        std::thread::sleep(Duration::from_secs(2));
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
        "vigil-bench-k8s: scale {} {}: {statuses} ServiceL2Status after {:?}",
        system.name(),
        plan.services,
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
    let node_churn = match plan.node_churn {
        Some(churn) => Some(node_churn(bench, running, churn)?),
        None => None,
    };
    let mut change = Vec::new();
    let mut change_missed = 0;
    let base = u32::from(FIRST_IP) + u32::try_from(plan.services).map_err(|e| e.to_string())?;
    for k in 0..plan.trials {
        let ip = Ipv4Addr::from(base + u32::try_from(k).map_err(|e| e.to_string())?);
        match phase::time_creation(bench, SCALE_NS, &format!("extra{k}"), ip)? {
            Some(t) => change.push(t),
            None => change_missed += 1,
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let restart = if plan.restart_sync {
        Some(restart_sync(bench, programs, running, plan.sync_limit)?)
    } else {
        None
    };
    Ok(ScaleResult {
        system,
        restart,
        services: plan.services,
        sync,
        statuses,
        create_took,
        sync_window,
        idle,
        node_churn,
        change,
        change_missed,
        drain: None,
        delete_took: Duration::ZERO,
        notes,
    })
}

/// Heartbeats every Node every `plan.every` for `plan.window`, the speakers measured over it.
fn node_churn(
    bench: &Bench,
    running: &mut Running,
    plan: NodeChurnPlan,
) -> Result<NodeChurn, String> {
    let before_statuses = objects::count_statuses(bench, SCALE_NS)?;
    let before = phase::read_all(running);
    let from = SystemTime::now();
    let start = Instant::now();
    let rounds = usize::try_from(plan.window.as_millis() / plan.every.as_millis().max(1))
        .unwrap_or(1)
        .max(1);
    let mut patches = 0;
    for k in 0..rounds {
        patches += bench.heartbeat_nodes()?;
        let next = plan.every * u32::try_from(k + 1).unwrap_or(u32::MAX);
        if let Some(wait) = next.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let window = Window {
        from,
        to: SystemTime::now(),
    };
    let after = phase::read_all(running);
    let after_statuses = objects::count_statuses(bench, SCALE_NS)?;
    eprintln!(
        "vigil-bench-k8s: scale {}: {rounds} rounds of Node heartbeats ({patches} patches) in {:?}",
        running.system.name(),
        start.elapsed()
    );
    Ok(NodeChurn {
        window: (window, phase::usage(&before, &after, window.length())),
        rounds,
        patches,
        statuses: (before_statuses, after_statuses),
    })
}

/// Stops every speaker, deletes every ServiceL2Status, starts the speakers again and times them
/// to every status (the controller keeps running: every Service keeps its IP).
fn restart_sync(
    bench: &Bench,
    programs: &Programs,
    running: &mut Running,
    limit: Duration,
) -> Result<RestartSync, String> {
    let want = objects::count_statuses(bench, SCALE_NS)?;
    for speaker in &mut running.speakers {
        speaker.stop();
    }
    objects::delete_statuses(bench)?;
    let gone = Instant::now();
    while objects::count_statuses(bench, SCALE_NS)? > 0 && gone.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(200));
    }
    // The new processes' CPU counts from zero: their start-up is part of the sync.
    let mut before = phase::read_all(running);
    before.0 = vec![Some(crate::procstat::Reading::default()); running.speakers.len()];
    let from = SystemTime::now();
    let start = Instant::now();
    for i in 0..running.speakers.len() {
        running.restart(bench, programs, i)?;
    }
    let mut took = None;
    let mut found = 0;
    while start.elapsed() < limit {
        found = objects::count_statuses(bench, SCALE_NS)?;
        if found >= want {
            took = Some(start.elapsed());
            break;
        }
        let dead = running.dead();
        if !dead.is_empty() {
            return Err(format!("exited: {}", dead.join(", ")));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let window = Window {
        from,
        to: SystemTime::now(),
    };
    let after = phase::read_all(running);
    eprintln!(
        "vigil-bench-k8s: scale {}: restarted speakers wrote {found} of {want} ServiceL2Status in {:?}",
        running.system.name(),
        start.elapsed()
    );
    Ok(RestartSync {
        took,
        statuses: (want, found),
        window: (window, phase::usage(&before, &after, window.length())),
    })
}
