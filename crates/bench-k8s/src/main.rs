//! `vigil-bench-k8s`: vigil and real MetalLB v0.16.2 measured side by side in one lab against
//! one real kube-apiserver (vigil-testenv), one system after the other, in one run. See
//! bench/kubernetes/README.md for what each figure means; bench/kubernetes/run.sh builds and
//! runs it as root.
//!
//! A benchmark, not a test: it prints numbers and asserts nothing about them.

mod audit;
mod controller;
mod fleet;
mod ingress;
mod lab;
mod objects;
mod phase;
mod probe;
mod procstat;
mod report;
mod scale;
mod stats;
mod system;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

use crate::controller::ControllerPlan;
use crate::fleet::FleetPlan;
use crate::lab::{Bench, HOSTS, MAX_HOSTS};
use crate::phase::{PhasePlan, Scenario};
use crate::scale::{NodeChurnPlan, ScalePlan};
use crate::system::{Programs, System};

/// vigil against MetalLB v0.16.2 in Kubernetes: failover, Service-to-ARP, API cost, controller
/// churn and reprocess, scale.
#[derive(Debug, Parser)]
#[command(name = "vigil-bench-k8s")]
struct Args {
    /// The `vigil` binary (default: `vigil` beside this program).
    #[arg(long)]
    vigil: Option<PathBuf>,
    /// Failover trials per system and scenario.
    #[arg(long, default_value_t = 20)]
    trials: usize,
    /// Failover scenarios: link (host loss), kill (speaker SIGKILL), term (speaker SIGTERM).
    #[arg(long, value_delimiter = ',', default_value = "link,kill,term")]
    scenarios: Vec<String>,
    /// Systems, in order: vigil, metallb, metallb-tuned, vigil-standalone.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "vigil,metallb,metallb-tuned,vigil-standalone"
    )]
    systems: Vec<String>,
    /// Service-creation trials per Kubernetes system (at most 48).
    #[arg(long, default_value_t = 20)]
    create_trials: usize,
    /// The idle window (API requests, CPU).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    idle: Duration,
    /// Churn trials of the controller phase (vigil and metallb only; each a Service created,
    /// timed to its ingress, and deleted); 0 for none.
    #[arg(long, default_value_t = 20)]
    churn_trials: usize,
    /// Waiting Services of the controller phase's reprocess pass (vigil and metallb only);
    /// 0 for none.
    #[arg(long, default_value_t = 1000)]
    reprocess: usize,
    /// Bound on the reprocess pass's wait for every ingress.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    reprocess_limit: Duration,
    /// Service counts of the scale runs (vigil and metallb only); 0 for none.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000")]
    scale: Vec<usize>,
    /// Nodes in the scale runs (the first five run speakers; the rest are objects).
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// Creation trials in each scale run, once everything is announced.
    #[arg(long, default_value_t = 5)]
    scale_trials: usize,
    /// The idle window of a scale run.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    scale_idle: Duration,
    /// Bound on waiting for every ServiceL2Status of a scale run (and for their removal).
    #[arg(long, default_value = "15m", value_parser = humantime::parse_duration)]
    sync_limit: Duration,
    /// The Node churn window of a scale run: every Node's status patched as a kubelet
    /// heartbeat does, every `--node-churn-every`, the speakers measured over it; 0s for none.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    node_churn: Duration,
    /// Between two rounds of Node heartbeats.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    node_churn_every: Duration,
    /// The scale runs (by Service count) that get a Node churn window.
    #[arg(long, value_delimiter = ',', default_value = "5000")]
    node_churn_at: Vec<usize>,
    /// End each scale run with a restart sync: every speaker stopped, every ServiceL2Status
    /// deleted, the speakers started again with every Service assigned, timed to every status.
    #[arg(long)]
    restart_sync: bool,
    /// Real speakers of the fleet phase (vigil and metallb only; each on a lab host of its own,
    /// with its Node and speaker Pod); 0 for none.
    #[arg(long, default_value_t = 0)]
    fleet: usize,
    /// Services of the fleet phase.
    #[arg(long, default_value_t = 1000)]
    fleet_services: usize,
    /// Host-loss trials of the fleet phase.
    #[arg(long, default_value_t = 10)]
    fleet_trials: usize,
    /// Also write every sample as JSON here.
    #[arg(long)]
    results: Option<PathBuf>,
    /// Keep the work directory (logs, audit log) instead of removing it.
    #[arg(long)]
    keep: bool,
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vigil-bench-k8s: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let systems = args
        .systems
        .iter()
        .map(|s| System::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let scenarios = args
        .scenarios
        .iter()
        .map(|s| Scenario::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if args.nodes < HOSTS {
        return Err(format!("--nodes: at least {HOSTS} (the real speakers)"));
    }
    if args.fleet > MAX_HOSTS {
        return Err(format!(
            "--fleet: at most {MAX_HOSTS} (the lab's host addresses)"
        ));
    }
    let vigil = match &args.vigil {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("vigil"),
    };
    if !vigil.is_file() {
        return Err(format!("--vigil: no vigil binary at {}", vigil.display()));
    }
    let metallb = vigil_kubelab::metallb_binaries("vigil-bench-k8s")
        .ok_or("MetalLB's binaries: set VIGIL_GO_BIN_DIR or run conformance/build.sh metallb")?;
    let dir = std::env::temp_dir().join(format!("vigil-bench-k8s-{}", std::process::id()));
    let started = Instant::now();
    eprintln!(
        "vigil-bench-k8s: {} start, load {}, work dir {}",
        now(),
        load(),
        dir.display()
    );
    let bench = Bench::setup(&dir, args.fleet)?;
    let keyring = dir.join("keyring.json");
    let keygen = std::process::Command::new(&vigil)
        .args(["keygen", "--out"])
        .arg(&keyring)
        .output()
        .map_err(|e| format!("vigil keygen: {e}"))?;
    if !keygen.status.success() {
        return Err(format!(
            "vigil keygen: {}",
            String::from_utf8_lossy(&keygen.stderr)
        ));
    }
    let programs = Programs {
        vigil,
        metallb,
        keyring,
    };
    let plan = PhasePlan {
        trials: args.trials,
        scenarios,
        create_trials: args.create_trials,
        idle: args.idle,
    };
    let mut loads = vec![format!("{} start: {}", now(), load())];
    let mut phases = Vec::new();
    // With no failover trial, no creation trial and no idle window, the phase has nothing to
    // measure: skip it (and its speakers' start-up) altogether.
    let phase_has_work = (plan.trials > 0 && !plan.scenarios.is_empty())
        || plan.create_trials > 0
        || !plan.idle.is_zero();
    for &system in systems.iter().filter(|_| phase_has_work) {
        eprintln!(
            "vigil-bench-k8s: {} {}, load {}",
            now(),
            system.name(),
            load()
        );
        phases.push(phase::run(&bench, &programs, system, &plan));
        loads.push(format!("{} after {}: {}", now(), system.name(), load()));
    }
    let controller_plan = ControllerPlan {
        churn_trials: args.churn_trials,
        reprocess: args.reprocess,
        limit: args.reprocess_limit,
    };
    let mut controllers = Vec::new();
    for &system in systems
        .iter()
        .filter(|s| controller_plan.any() && matches!(s, System::Vigil | System::MetalLbDefault))
    {
        eprintln!(
            "vigil-bench-k8s: {} controller {}, load {}",
            now(),
            system.name(),
            load()
        );
        controllers.push(controller::run(&bench, &programs, system, controller_plan));
        loads.push(format!(
            "{} after controller {}: {}",
            now(),
            system.name(),
            load()
        ));
    }
    let mut scales = Vec::new();
    let counts: Vec<usize> = args.scale.iter().copied().filter(|n| *n > 0).collect();
    if !counts.is_empty() {
        bench.add_object_nodes(args.nodes)?;
    }
    for &services in &counts {
        for &system in systems
            .iter()
            .filter(|s| matches!(s, System::Vigil | System::MetalLbDefault))
        {
            eprintln!(
                "vigil-bench-k8s: {} scale {} {services}, load {}",
                now(),
                system.name(),
                load()
            );
            let plan = ScalePlan {
                services,
                trials: args.scale_trials,
                idle: args.scale_idle,
                sync_limit: args.sync_limit,
                node_churn: (!args.node_churn.is_zero() && args.node_churn_at.contains(&services))
                    .then_some(NodeChurnPlan {
                        window: args.node_churn,
                        every: args.node_churn_every,
                    }),
                restart_sync: args.restart_sync,
            };
            match scale::run(&bench, &programs, system, plan) {
                Ok(r) => scales.push(r),
                Err(e) => eprintln!("vigil-bench-k8s: scale {} {services}: {e}", system.name()),
            }
            loads.push(format!(
                "{} after scale {} {services}: {}",
                now(),
                system.name(),
                load()
            ));
        }
    }
    let mut fleets = Vec::new();
    if args.fleet > 0 {
        bench.register_fleet(args.fleet)?;
        for &system in systems
            .iter()
            .filter(|s| matches!(s, System::Vigil | System::MetalLbDefault))
        {
            eprintln!(
                "vigil-bench-k8s: {} fleet {} {} speakers, load {}",
                now(),
                system.name(),
                args.fleet,
                load()
            );
            let plan = FleetPlan {
                speakers: args.fleet,
                services: args.fleet_services,
                trials: args.fleet_trials,
                idle: args.scale_idle,
                sync_limit: args.sync_limit,
            };
            match fleet::run(&bench, &programs, system, plan) {
                Ok(r) => fleets.push(r),
                Err(e) => eprintln!("vigil-bench-k8s: fleet {}: {e}", system.name()),
            }
            loads.push(format!(
                "{} after fleet {} {}: {}",
                now(),
                system.name(),
                args.fleet,
                load()
            ));
        }
    }
    let (requests, bad) = audit::read(&bench.audit_log);
    let nodes = bench.node_ips();
    let fleet_nodes = bench.node_ips_of(args.fleet);
    println!(
        "{}",
        report::markdown(
            &phases,
            &controllers,
            &scales,
            &fleets,
            &requests,
            (&nodes, &fleet_nodes),
            args.nodes
        )
    );
    println!(
        "Run: {:.1} min; audit log: {} requests ({bad} unreadable lines); load average (1, 5, 15 min):",
        started.elapsed().as_secs_f64() / 60.0,
        requests.len()
    );
    for l in &loads {
        println!("- {l}");
    }
    if let Some(path) = &args.results {
        let mut value = report::json(
            &phases,
            &controllers,
            &scales,
            &fleets,
            &requests,
            (&nodes, &fleet_nodes),
        );
        value["load"] = serde_json::json!(loads);
        std::fs::write(
            path,
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    drop(bench);
    if args.keep {
        eprintln!("vigil-bench-k8s: kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
