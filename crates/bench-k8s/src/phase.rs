//! One system's run in the lab: start it, announce one Service, measure it idle, time Service
//! creations to their first ARP answer, then fail the owner over and over (host loss, speaker
//! SIGKILL, speaker SIGTERM) while the client probes, and stop it again.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant, SystemTime};

use nix::sys::signal::Signal;
use vigil_l2::wire::ethernet::Address as Mac;
use vigil_netlab::prober::{self, Kind};

use crate::lab::{Bench, CLIENT_IP, SERVICE_NS};
use crate::objects;
use crate::probe::{Plan, Watch};
use crate::procstat::{self, Reading};
use crate::system::{Programs, Running, STANDALONE_VIP, System};

/// The failover Service's IP (Kubernetes systems).
pub(crate) const WEB_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
/// Creation trial `k` asks for `198.18.0.(201 + k)`.
const FIRST_CREATE_IP: u8 = 201;
/// The most creation trials the pool's first range holds.
pub(crate) const MAX_CREATE_TRIALS: usize = 48;
/// Between ARP questions.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_millis(5);
/// A watch ends this long after the answering MAC changed.
const AFTER_CHANGE: Duration = Duration::from_millis(400);
/// The owner is failed this long into the watch.
const FAIL_AFTER: Duration = Duration::from_millis(300);
/// Bound on a settle (a MetalLB speaker's restart and rejoin included).
const SETTLE_LIMIT: Duration = Duration::from_secs(120);
/// Bound on a creation trial's wait for the first answer.
pub(crate) const CREATE_LIMIT: Duration = Duration::from_secs(60);

/// How the owner is failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scenario {
    /// Its cable is pulled at the bridge: the host is gone, kernel and all.
    HostLoss,
    /// Its speaker is SIGKILLed.
    Kill,
    /// Its speaker is SIGTERMed (a rolling update, a drain).
    Term,
}

impl Scenario {
    /// Every scenario.
    pub(crate) const ALL: [Self; 3] = [Self::HostLoss, Self::Kill, Self::Term];

    /// Command-line name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::HostLoss => "link",
            Self::Kill => "kill",
            Self::Term => "term",
        }
    }

    /// Table label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::HostLoss => "host loss (link down)",
            Self::Kill => "speaker SIGKILL",
            Self::Term => "speaker SIGTERM",
        }
    }

    /// Parses [`Self::name`].
    pub(crate) fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| format!("unknown scenario {s:?} (link, kill, term)"))
    }
}

/// One failover trial as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Trial {
    /// The longest span without an ARP answer.
    pub(crate) outage: Duration,
    /// Whether the answers ended on the expected successor's MAC.
    pub(crate) moved: bool,
    /// Rounds in which two MACs answered.
    pub(crate) conflicts: u64,
}

/// A time window of the run, for the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// Start.
    pub(crate) from: SystemTime,
    /// End.
    pub(crate) to: SystemTime,
}

impl Window {
    /// Its length.
    pub(crate) fn length(&self) -> Duration {
        self.to.duration_since(self.from).unwrap_or(Duration::ZERO)
    }
}

/// The speakers' CPU and memory over a window.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Usage {
    /// CPU per speaker over the window, percent of one core (mean, max).
    pub(crate) cpu_percent: (f64, f64),
    /// CPU time per speaker over the window, seconds (mean, max).
    pub(crate) cpu_seconds: (f64, f64),
    /// RSS per speaker at the end, MiB (mean, max).
    pub(crate) rss_mib: (f64, f64),
    /// Peak RSS per speaker, MiB (max).
    pub(crate) hwm_mib: f64,
    /// The controller's CPU time over the window, seconds, and its RSS at the end, MiB.
    pub(crate) controller: Option<(f64, f64)>,
}

/// Readings of every speaker and of the controller.
pub(crate) fn read_all(running: &Running) -> (Vec<Option<Reading>>, Option<Reading>) {
    let speakers = running
        .speakers
        .iter()
        .map(|s| s.pid().and_then(procstat::read))
        .collect();
    let controller = running
        .controller
        .as_ref()
        .and_then(|c| c.pid())
        .and_then(procstat::read);
    (speakers, controller)
}

fn mean_max(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (mean, v.iter().copied().fold(0.0, f64::max))
}

/// The usage between two [`read_all`]s `length` apart.
pub(crate) fn usage(
    before: &(Vec<Option<Reading>>, Option<Reading>),
    after: &(Vec<Option<Reading>>, Option<Reading>),
    length: Duration,
) -> Usage {
    let secs = length.as_secs_f64().max(1e-9);
    let mut cpu = Vec::new();
    let mut rss = Vec::new();
    let mut hwm: f64 = 0.0;
    for (b, a) in before.0.iter().zip(&after.0) {
        if let (Some(b), Some(a)) = (b, a) {
            cpu.push(a.cpu.saturating_sub(b.cpu).as_secs_f64());
            rss.push(a.rss_kib as f64 / 1024.0);
            hwm = hwm.max(a.hwm_kib as f64 / 1024.0);
        }
    }
    let cpu_seconds = mean_max(&cpu);
    let controller = match (before.1, after.1) {
        (Some(b), Some(a)) => Some((
            a.cpu.saturating_sub(b.cpu).as_secs_f64(),
            a.rss_kib as f64 / 1024.0,
        )),
        _ => None,
    };
    Usage {
        cpu_percent: (cpu_seconds.0 / secs * 100.0, cpu_seconds.1 / secs * 100.0),
        cpu_seconds,
        rss_mib: mean_max(&rss),
        hwm_mib: hwm,
        controller,
    }
}

/// Everything measured for one system.
#[derive(Debug, Clone)]
pub(crate) struct PhaseResult {
    /// Which system.
    pub(crate) system: System,
    /// Idle with one Service announced.
    pub(crate) idle: Option<(Window, Usage)>,
    /// Creation trials and deletions (the churn window) and how many changes it held.
    pub(crate) churn: Option<(Window, usize)>,
    /// Service created to first ARP answer, per trial.
    pub(crate) create: Vec<Creation>,
    /// Creation trials with no answer within [`CREATE_LIMIT`].
    pub(crate) create_missed: usize,
    /// Failover trials per scenario.
    pub(crate) failover: Vec<(Scenario, Vec<Trial>)>,
    /// What went wrong on the way.
    pub(crate) notes: Vec<String>,
}

/// Asks for `ip` until only `mac` answers, three questions in a row (bounded); how long it
/// took.
pub(crate) fn settle(
    bench: &Bench,
    running: &mut Running,
    ip: Ipv4Addr,
    mac: &Mac,
    limit: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    let want = mac.to_string();
    let mut good = 0;
    let mut last = Vec::new();
    while start.elapsed() < limit {
        let answers = vigil_kubelab::arp_ask(
            &bench.client.ns,
            "eth0",
            CLIENT_IP,
            ip,
            Duration::from_millis(150),
        )
        .map_err(|e| format!("ARP from the client: {e}"))?;
        if !answers.is_empty() && answers.iter().all(|a| a.mac == want) {
            good += 1;
            if good == 3 {
                return Ok(start.elapsed());
            }
        } else {
            good = 0;
        }
        last = answers;
        let dead = running.dead();
        if !dead.is_empty() {
            return Err(format!("exited: {}", dead.join(", ")));
        }
    }
    Err(format!(
        "{ip}: only {want} never answered alone within {limit:?}; last answers {last:?}"
    ))
}

/// The owner and its successor for `ip` among the nodes of the first `hosts` hosts (those
/// running speakers), as host indices.
pub(crate) fn owner_and_next(bench: &Bench, ip: Ipv4Addr, hosts: usize) -> (usize, usize) {
    let nodes = bench.nodes_of(hosts);
    let ranked = vigil_lb::rank(nodes.iter().copied(), IpAddr::V4(ip));
    let index = |n: &str| nodes.iter().position(|x| *x == n).expect("a node");
    (index(ranked[0]), index(ranked[1]))
}

/// One Service's creation to the first ARP answer for its IP, timed from two points.
///
/// The API server's own work on a create (admission, the ClusterIP, the write) grows with
/// the objects it holds: about 13 ms of a lone create at 5,000 Services (its audit log,
/// received to complete) against a few in a small cluster. No load balancer does any of it
/// or sees the Service before it is done, so the time from the stored Service (the create's
/// answer) is each system's own share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Creation {
    /// From the create request going out.
    pub(crate) from_request: Duration,
    /// From the create's answer: the Service stored.
    pub(crate) from_stored: Duration,
}

impl Creation {
    /// The times from the request, trial by trial.
    pub(crate) fn from_request(trials: &[Self]) -> Vec<Duration> {
        trials.iter().map(|c| c.from_request).collect()
    }

    /// The times from the stored Service, trial by trial.
    pub(crate) fn from_stored(trials: &[Self]) -> Vec<Duration> {
        trials.iter().map(|c| c.from_stored).collect()
    }
}

/// Creates a Service asking for `ip` and times it to the first ARP answer for `ip`.
pub(crate) fn time_creation(
    bench: &Bench,
    ns: &str,
    name: &str,
    ip: Ipv4Addr,
) -> Result<Option<Creation>, String> {
    objects::create_slice(bench, ns, name)?;
    let watch = Watch::start(
        &bench.client,
        Plan {
            target: ip,
            interval: PROBE_INTERVAL,
            bound: CREATE_LIMIT,
            after_change: None,
            until_first_answer: true,
        },
    )?;
    std::thread::sleep(Duration::from_millis(50));
    let asked = Instant::now();
    objects::create_lb_service(bench, ns, name, ip)?;
    let stored = Instant::now();
    let (_, first) = watch.finish()?;
    Ok(first.map(|t| Creation {
        from_request: t.saturating_duration_since(asked),
        from_stored: t.saturating_duration_since(stored),
    }))
}

/// One failover trial: settle on the owner, watch, fail it, restore it.
pub(crate) fn failover_trial(
    bench: &Bench,
    programs: &Programs,
    running: &mut Running,
    scenario: Scenario,
    ip: Ipv4Addr,
) -> Result<Trial, String> {
    let (owner, next) = owner_and_next(bench, ip, running.speakers.len());
    settle(bench, running, ip, &bench.hosts[owner].mac, SETTLE_LIMIT)?;
    // Let a restarted speaker's gossip calm down (its push/pull, its peers' refutations).
    std::thread::sleep(Duration::from_millis(1500));
    let watch = Watch::start(
        &bench.client,
        Plan {
            target: ip,
            interval: PROBE_INTERVAL,
            bound: running.system.failover_bound(),
            after_change: Some(AFTER_CHANGE),
            until_first_answer: false,
        },
    )?;
    std::thread::sleep(FAIL_AFTER);
    match scenario {
        Scenario::HostLoss => bench.set_link(&bench.hosts[owner].name, false)?,
        Scenario::Kill => running.speakers[owner].signal(Signal::SIGKILL),
        Scenario::Term => running.speakers[owner].signal(Signal::SIGTERM),
    }
    let result = watch.finish();
    // Restore before judging, so a failed trial leaves the lab whole.
    match scenario {
        Scenario::HostLoss => {
            running.speakers[owner].kill();
            bench.set_link(&bench.hosts[owner].name, true)?;
        }
        Scenario::Kill => running.speakers[owner].kill(),
        Scenario::Term => running.speakers[owner].stop(),
    }
    running.restart(bench, programs, owner)?;
    let (recording, _) = result?;
    let summary = prober::summarize(
        &recording.answers,
        Kind::Arp,
        PROBE_INTERVAL * 4,
        recording.end,
    );
    let last = recording.answers.iter().rev().find(|a| a.kind == Kind::Arp);
    Ok(Trial {
        outage: summary.max_gap,
        moved: last.is_some_and(|a| a.mac == bench.hosts[next].mac),
        conflicts: summary.conflicts,
    })
}

/// The knobs of a phase.
#[derive(Debug, Clone)]
pub(crate) struct PhasePlan {
    /// Failover trials per scenario.
    pub(crate) trials: usize,
    /// Scenarios.
    pub(crate) scenarios: Vec<Scenario>,
    /// Creation trials.
    pub(crate) create_trials: usize,
    /// The idle window.
    pub(crate) idle: Duration,
}

/// Runs everything for `system`.
pub(crate) fn run(
    bench: &Bench,
    programs: &Programs,
    system: System,
    plan: &PhasePlan,
) -> PhaseResult {
    let mut result = PhaseResult {
        system,
        idle: None,
        churn: None,
        create: Vec::new(),
        create_missed: 0,
        failover: Vec::new(),
        notes: Vec::new(),
    };
    let mut running = match Running::start(bench, programs, system) {
        Ok(r) => r,
        Err(e) => {
            result.notes.push(format!("did not start: {e}"));
            return result;
        }
    };
    if let Err(e) = measure(bench, programs, &mut running, plan, &mut result) {
        eprintln!("vigil-bench-k8s: {}: {e}", system.name());
        result.notes.push(e);
    }
    if system.uses_api() {
        let _ = objects::delete_all(bench, SERVICE_NS);
        // The speakers withdraw their ServiceL2Status objects themselves (bounded wait).
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end && objects::count_statuses(bench, SERVICE_NS).unwrap_or(0) > 0 {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    running.stop();
    if system.uses_api() {
        let _ = objects::delete_statuses(bench);
    }
    result
}

fn measure(
    bench: &Bench,
    programs: &Programs,
    running: &mut Running,
    plan: &PhasePlan,
    result: &mut PhaseResult,
) -> Result<(), String> {
    let system = running.system;
    let ip = if system.uses_api() {
        objects::create_slice(bench, SERVICE_NS, "web")?;
        objects::create_lb_service(bench, SERVICE_NS, "web", WEB_IP)?;
        WEB_IP
    } else {
        STANDALONE_VIP
    };
    let (owner, _) = owner_and_next(bench, ip, running.speakers.len());
    let took = settle(bench, running, ip, &bench.hosts[owner].mac, SETTLE_LIMIT)?;
    eprintln!(
        "vigil-bench-k8s: {}: {ip} answered by {} alone {took:?} after the Service existed",
        system.name(),
        bench.hosts[owner].node
    );
    std::thread::sleep(Duration::from_secs(3));

    let before = read_all(running);
    let from = SystemTime::now();
    std::thread::sleep(plan.idle);
    let window = Window {
        from,
        to: SystemTime::now(),
    };
    let after = read_all(running);
    result.idle = Some((window, usage(&before, &after, window.length())));

    if system.uses_api() && plan.create_trials > 0 {
        let from = SystemTime::now();
        let trials = plan.create_trials.min(MAX_CREATE_TRIALS);
        for k in 0..trials {
            let ip = Ipv4Addr::new(198, 18, 0, FIRST_CREATE_IP + u8::try_from(k).expect("few"));
            match time_creation(bench, SERVICE_NS, &format!("c{k}"), ip)? {
                Some(t) => result.create.push(t),
                None => result.create_missed += 1,
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        for k in 0..trials {
            let _ = delete_service(bench, &format!("c{k}"));
        }
        std::thread::sleep(Duration::from_secs(2));
        result.churn = Some((
            Window {
                from,
                to: SystemTime::now(),
            },
            trials * 2,
        ));
        eprintln!(
            "vigil-bench-k8s: {}: {} creations timed ({} unanswered)",
            system.name(),
            result.create.len(),
            result.create_missed
        );
    }

    for &scenario in &plan.scenarios {
        let mut trials = Vec::new();
        for t in 0..plan.trials {
            match failover_trial(bench, programs, running, scenario, ip) {
                Ok(trial) => {
                    eprintln!(
                        "vigil-bench-k8s: {} {} trial {}: {} ms{}{}",
                        system.name(),
                        scenario.name(),
                        t + 1,
                        trial.outage.as_millis(),
                        if trial.moved { "" } else { ", did not move" },
                        if trial.conflicts > 0 {
                            ", two MACs"
                        } else {
                            ""
                        }
                    );
                    trials.push(trial);
                }
                Err(e) => {
                    let note = format!("{} trial {}: {e}", scenario.name(), t + 1);
                    eprintln!("vigil-bench-k8s: {}: {note}", system.name());
                    result.notes.push(note);
                    // Start over from a whole cluster.
                    for i in 0..running.speakers.len() {
                        let _ = bench.set_link(&bench.hosts[i].name, true);
                        if !running.speakers[i].running() {
                            running.restart(bench, programs, i)?;
                        }
                    }
                }
            }
        }
        result.failover.push((scenario, trials));
    }
    Ok(())
}

/// Deletes Service `name` of the bench namespace and its slice.
fn delete_service(bench: &Bench, name: &str) -> Result<(), String> {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::{Api, DeleteParams};
    let services: Api<Service> = Api::namespaced(bench.kube.clone(), SERVICE_NS);
    let slices: Api<EndpointSlice> = Api::namespaced(bench.kube.clone(), SERVICE_NS);
    let name = name.to_string();
    bench
        .lab
        .cp()
        .block_on(async move {
            services.delete(&name, &DeleteParams::default()).await?;
            slices
                .delete(&format!("{name}-kubelab"), &DeleteParams::default())
                .await?;
            Ok::<_, kube::Error>(())
        })
        .map_err(|e| e.to_string())
}
