//! The controller phase: one system's controller alone (no speakers; neither figure needs
//! them), started as the other phases start it, timed by a watch on Services:
//!
//! - churn: Services created one at a time, each timed from just before its `create` call to
//!   the moment the watch sees its `status.loadBalancer.ingress`, then deleted; the
//!   controller's API requests (audit log, by its user) and CPU per change over the trials;
//! - reprocess: N Services created while no pool admits them (they ask for the pool
//!   [`LATER_POOL`], which does not exist yet), every one left waiting; then that pool is
//!   created with room for all of them, and the time from its create call to the last
//!   ingress is measured, with the controller's CPU and API requests in between.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use vigil_kubelab::metallb::METALLB_NAMESPACE;
use vigil_kubelab::{TestService, apply_yaml, create_service};

use crate::ingress::IngressWatch;
use crate::lab::Bench;
use crate::objects;
use crate::phase::{CREATE_LIMIT, Window};
use crate::procstat;
use crate::system::{self, Proc, Programs, System};

/// The controller phase's namespace.
pub(crate) const CONTROLLER_NS: &str = "bench-ctl";
/// The pool the waiting Services ask for; it exists only from the moment measured.
pub(crate) const LATER_POOL: &str = "later";
/// The later pool's addresses start here (inside 198.18.0.0/15, clear of the bench pool).
const LATER_BASE: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 0);
/// Services created at once for the reprocess pass.
const PARALLEL: usize = 16;
/// Bound on the first Service after the controller starts (election, first lists).
const WARMUP_LIMIT: Duration = Duration::from_secs(120);
/// Between churn trials, as the creation trials of the other phase.
const BETWEEN_TRIALS: Duration = Duration::from_millis(200);
/// The controller counts as done with the waiting Services once its CPU time grows by less
/// than this over [`QUIET_SPAN`].
const QUIET_CPU: Duration = Duration::from_millis(20);
/// See [`QUIET_CPU`].
const QUIET_SPAN: Duration = Duration::from_secs(2);
/// Bound on the wait for that quiet.
const QUIET_LIMIT: Duration = Duration::from_secs(300);

/// The knobs of the controller phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ControllerPlan {
    /// Churn trials (each a create and a delete).
    pub(crate) churn_trials: usize,
    /// Services in the reprocess pass (0: none).
    pub(crate) reprocess: usize,
    /// Bound on the reprocess pass's wait for every ingress.
    pub(crate) limit: Duration,
}

impl ControllerPlan {
    /// Whether there is anything to run.
    pub(crate) fn any(&self) -> bool {
        self.churn_trials > 0 || self.reprocess > 0
    }
}

/// The churn figures.
#[derive(Debug, Clone)]
pub(crate) struct Churn {
    /// From the first create to shortly after the last delete.
    pub(crate) window: Window,
    /// Creations and deletions in it.
    pub(crate) changes: usize,
    /// Create call to ingress, per answered trial.
    pub(crate) times: Vec<Duration>,
    /// Create call to the watch's first event of the Service, per answered trial: what the
    /// API server and the watch take with no controller involved.
    pub(crate) floor: Vec<Duration>,
    /// The watch's first event to the ingress, per answered trial: the controller's share.
    pub(crate) share: Vec<Duration>,
    /// Trials with no ingress within [`CREATE_LIMIT`].
    pub(crate) missed: usize,
    /// The controller's CPU time over the window.
    pub(crate) cpu: Option<Duration>,
}

/// The reprocess figures.
#[derive(Debug, Clone)]
pub(crate) struct Reprocess {
    /// Services waiting.
    pub(crate) services: usize,
    /// How long the controller took to go quiet after they were created.
    pub(crate) settled: Duration,
    /// Services that showed an ingress before their pool existed (should be 0).
    pub(crate) premature: usize,
    /// From the pool's create call to the last ingress seen (or to the bound).
    pub(crate) window: Window,
    /// From the pool's create call until the controller went quiet again (its trailing
    /// writes, such as events, included).
    pub(crate) until_quiet: Window,
    /// Pool created to the first ingress.
    pub(crate) first: Option<Duration>,
    /// Pool created to the last ingress, when every Service got one.
    pub(crate) all: Option<Duration>,
    /// Services with an ingress when the wait ended.
    pub(crate) admitted: usize,
    /// The controller's CPU time over the window.
    pub(crate) cpu: Option<Duration>,
}

/// What the controller phase measured for one system.
#[derive(Debug, Clone)]
pub(crate) struct ControllerResult {
    /// Which system.
    pub(crate) system: System,
    /// Churn, if it ran.
    pub(crate) churn: Option<Churn>,
    /// The reprocess pass, if it ran.
    pub(crate) reprocess: Option<Reprocess>,
    /// What went wrong on the way.
    pub(crate) notes: Vec<String>,
}

fn cpu_of(controller: &Proc) -> Option<Duration> {
    controller.pid().and_then(procstat::read).map(|r| r.cpu)
}

/// A LoadBalancer Service of the phase's namespace, asking for `pool` if given.
fn service(name: &str, pool: Option<&str>) -> TestService {
    let svc = TestService::load_balancer(CONTROLLER_NS, name);
    match pool {
        Some(p) => svc.annotation("metallb.io/address-pool", p),
        None => svc,
    }
}

fn create(bench: &Bench, name: &str, pool: Option<&str>) -> Result<(), String> {
    let client = bench.kube.clone();
    let svc = service(name, pool);
    bench
        .lab
        .cp()
        .block_on(async move { create_service(&client, &svc).await.map(|_| ()) })
        .map_err(|e| format!("service {CONTROLLER_NS}/{name}: {e}"))
}

fn delete(bench: &Bench, name: &str) -> Result<(), String> {
    let api: Api<Service> = Api::namespaced(bench.kube.clone(), CONTROLLER_NS);
    let name = name.to_string();
    bench
        .lab
        .cp()
        .block_on(async move {
            api.delete(&name, &DeleteParams::default())
                .await
                .map(|_| ())
        })
        .map_err(|e| format!("deleting a Service: {e}"))
}

fn pools_api(bench: &Bench) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools");
    Api::namespaced_with(bench.kube.clone(), METALLB_NAMESPACE, &resource)
}

/// The later pool with room for `services` (twice as many addresses, a /24 at least).
fn later_pool_yaml(services: usize) -> String {
    let room = (services.max(128) * 2).next_power_of_two();
    let prefix = 32 - room.trailing_zeros().min(16);
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata:\n  name: {LATER_POOL}\n  \
         namespace: {METALLB_NAMESPACE}\nspec:\n  addresses:\n    - {LATER_BASE}/{prefix}\n"
    )
}

fn delete_later_pool(bench: &Bench) {
    let api = pools_api(bench);
    let _ = bench.lab.cp().block_on(async move {
        api.delete(LATER_POOL, &DeleteParams::default())
            .await
            .map(|_| ())
    });
}

/// Starts `system`'s controller alone and waits until it assigns a first Service.
fn start(
    bench: &Bench,
    programs: &Programs,
    system: System,
    watch: &IngressWatch,
) -> Result<Proc, String> {
    let mut controller = system::start_controller(bench, programs, system)?
        .ok_or("this system has no controller")?;
    create(bench, "warmup", None)?;
    let ready = watch.wait_for("warmup", WARMUP_LIMIT);
    let _ = delete(bench, "warmup");
    if ready.is_none() {
        let log = controller.log().display().to_string();
        controller.stop();
        return Err(format!(
            "the controller assigned nothing within {WARMUP_LIMIT:?} (log {log})"
        ));
    }
    watch.wait_gone(&["warmup".to_string()], Duration::from_secs(10));
    std::thread::sleep(Duration::from_secs(2));
    Ok(controller)
}

/// Runs the controller phase for `system`.
pub(crate) fn run(
    bench: &Bench,
    programs: &Programs,
    system: System,
    plan: ControllerPlan,
) -> ControllerResult {
    let mut result = ControllerResult {
        system,
        churn: None,
        reprocess: None,
        notes: Vec::new(),
    };
    if let Err(e) = measure(bench, programs, system, plan, &mut result) {
        eprintln!("vigil-bench-k8s: controller {}: {e}", system.name());
        result.notes.push(e);
    }
    result
}

fn measure(
    bench: &Bench,
    programs: &Programs,
    system: System,
    plan: ControllerPlan,
    result: &mut ControllerResult,
) -> Result<(), String> {
    objects::ensure_ns(bench, CONTROLLER_NS)?;
    // Nothing of an earlier run may be left for this controller to find.
    delete_later_pool(bench);
    let watch = IngressWatch::start(bench, CONTROLLER_NS)?;
    let outcome = match start(bench, programs, system, &watch) {
        Ok(mut controller) => {
            let outcome = passes(bench, &controller, &watch, plan, result);
            clean_up(bench);
            if !controller.running() {
                result.notes.push(format!(
                    "the controller exited (log {})",
                    controller.log().display()
                ));
            }
            controller.stop();
            outcome
        }
        Err(e) => {
            clean_up(bench);
            Err(e)
        }
    };
    if watch.errors() > 0 {
        result
            .notes
            .push(format!("the bench's watch failed {} times", watch.errors()));
    }
    outcome
}

fn passes(
    bench: &Bench,
    controller: &Proc,
    watch: &IngressWatch,
    plan: ControllerPlan,
    result: &mut ControllerResult,
) -> Result<(), String> {
    if plan.churn_trials > 0 {
        result.churn = Some(churn(bench, controller, watch, plan.churn_trials)?);
    }
    if plan.reprocess > 0 {
        result.reprocess = Some(reprocess(bench, controller, watch, plan)?);
    }
    Ok(())
}

/// Removes the phase's Services while the controller still runs (it may hold them with a
/// finalizer), then the later pool.
fn clean_up(bench: &Bench) {
    let _ = objects::delete_all(bench, CONTROLLER_NS);
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end && count_services(bench).unwrap_or(0) > 0 {
        std::thread::sleep(Duration::from_millis(500));
    }
    delete_later_pool(bench);
}

fn count_services(bench: &Bench) -> Result<usize, String> {
    let api: Api<Service> = Api::namespaced(bench.kube.clone(), CONTROLLER_NS);
    bench
        .lab
        .cp()
        .block_on(async move { api.list(&ListParams::default()).await })
        .map(|l| l.items.len())
        .map_err(|e| format!("listing Services: {e}"))
}

fn churn(
    bench: &Bench,
    controller: &Proc,
    watch: &IngressWatch,
    trials: usize,
) -> Result<Churn, String> {
    let cpu_before = cpu_of(controller);
    let from = SystemTime::now();
    let mut times = Vec::new();
    let mut floor = Vec::new();
    let mut share = Vec::new();
    let mut missed = 0;
    for k in 0..trials {
        let name = format!("churn-{k}");
        let created = Instant::now();
        create(bench, &name, None)?;
        match watch.wait_for(&name, CREATE_LIMIT) {
            Some(at) => {
                times.push(at.saturating_duration_since(created));
                if let Some(first) = watch.first_seen(&name) {
                    floor.push(first.saturating_duration_since(created));
                    share.push(at.saturating_duration_since(first));
                }
            }
            None => missed += 1,
        }
        delete(bench, &name)?;
        watch.wait_gone(&[name], Duration::from_secs(10));
        std::thread::sleep(BETWEEN_TRIALS);
    }
    // The deletions' own work (releasing the addresses) belongs to the window.
    std::thread::sleep(Duration::from_secs(2));
    let to = SystemTime::now();
    let cpu = cpu_of(controller)
        .zip(cpu_before)
        .map(|(a, b)| a.saturating_sub(b));
    eprintln!(
        "vigil-bench-k8s: controller churn: {} timed, {missed} without ingress",
        times.len()
    );
    Ok(Churn {
        window: Window { from, to },
        changes: trials * 2,
        times,
        floor,
        share,
        missed,
        cpu,
    })
}

/// Creates `names` asking for the later pool, [`PARALLEL`] at a time.
fn create_waiting(bench: &Bench, names: &[String]) -> Result<(), String> {
    let client = bench.kube.clone();
    let jobs: Vec<TestService> = names.iter().map(|n| service(n, Some(LATER_POOL))).collect();
    bench.lab.cp().block_on(async move {
        futures::stream::iter(jobs)
            .map(|svc| {
                let client = client.clone();
                async move { create_service(&client, &svc).await.map(|_| ()) }
            })
            .buffer_unordered(PARALLEL)
            .try_collect::<Vec<()>>()
            .await
            .map(|_| ())
            .map_err(|e| format!("creating waiting Services: {e}"))
    })
}

/// Waits (bounded) until the controller's CPU time stops growing; how long that took.
fn wait_quiet(controller: &Proc) -> Duration {
    let start = Instant::now();
    let mut last = cpu_of(controller);
    while start.elapsed() < QUIET_LIMIT {
        std::thread::sleep(QUIET_SPAN);
        let now = cpu_of(controller);
        if let (Some(a), Some(b)) = (now, last)
            && a.saturating_sub(b) < QUIET_CPU
        {
            break;
        }
        last = now;
    }
    start.elapsed()
}

fn reprocess(
    bench: &Bench,
    controller: &Proc,
    watch: &IngressWatch,
    plan: ControllerPlan,
) -> Result<Reprocess, String> {
    let names: Vec<String> = (0..plan.reprocess).map(|i| format!("wait-{i}")).collect();
    let created = Instant::now();
    create_waiting(bench, &names)?;
    eprintln!(
        "vigil-bench-k8s: controller reprocess: {} waiting Services created in {:?}",
        names.len(),
        created.elapsed()
    );
    std::thread::sleep(Duration::from_secs(5));
    let settled = created.elapsed() + wait_quiet(controller);
    let premature = watch.stamps(&names).len();
    let cpu_before = cpu_of(controller);
    let from = SystemTime::now();
    let start = Instant::now();
    let yaml = later_pool_yaml(plan.reprocess);
    let client = bench.kube.clone();
    bench
        .lab
        .cp()
        .block_on(async move { apply_yaml(&client, "the later pool", &yaml).await })
        .map_err(|e| format!("creating the later pool: {e}"))?;
    let stamps = watch.wait_all(&names, plan.limit);
    let cpu_after = cpu_of(controller);
    let last = stamps.iter().max().copied();
    let first = stamps
        .iter()
        .min()
        .map(|t| t.saturating_duration_since(start));
    let complete = stamps.len() == names.len();
    let span = match (complete, last) {
        (true, Some(t)) => t.saturating_duration_since(start),
        _ => start.elapsed(),
    };
    eprintln!(
        "vigil-bench-k8s: controller reprocess: {} of {} with ingress {span:?} after the pool",
        stamps.len(),
        names.len()
    );
    wait_quiet(controller);
    let until_quiet = Window {
        from,
        to: SystemTime::now(),
    };
    Ok(Reprocess {
        services: names.len(),
        settled,
        premature,
        window: Window {
            from,
            to: from + span,
        },
        until_quiet,
        first,
        all: complete.then_some(span),
        admitted: stamps.len(),
        cpu: cpu_after.zip(cpu_before).map(|(a, b)| a.saturating_sub(b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_later_pool_holds_twice_the_services() {
        assert!(later_pool_yaml(1000).contains("198.19.0.0/21"));
        assert!(later_pool_yaml(100).contains("198.19.0.0/24"));
        assert!(later_pool_yaml(5000).contains("198.19.0.0/18"));
        assert!(later_pool_yaml(1_000_000).contains("198.19.0.0/16"));
    }
}
