//! The run's figures as markdown tables (stdout) and JSON (`--results`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::audit::{self, Cost, Request};
use crate::controller::ControllerResult;
use crate::fleet::FleetResult;
use crate::phase::{Creation, PhaseResult, Scenario, Usage, Window};
use crate::scale::ScaleResult;
use crate::stats::{ms, ratio, spread};
use crate::system::System;

/// The per-trial times of creation trials, taken one way (from the request, or from the
/// stored Service).
type Times = fn(&[Creation]) -> Vec<Duration>;

/// What the audit log says about one window of `system`.
fn cost(requests: &[Request], nodes: &[IpAddr], system: System, w: &Window) -> Cost {
    audit::cost(requests, w.from, w.to, nodes, system.controller_user())
}

fn spread_cells(samples: &[Duration]) -> String {
    spread(samples).map_or("- | - | -".to_string(), |s| {
        format!("{} | {} | {}", ms(s.p50), ms(s.p90), ms(s.max))
    })
}

fn ratio_cells(samples: &[Duration], reference: Option<&[Duration]>) -> String {
    match (spread(samples), reference.and_then(spread)) {
        (Some(s), Some(r)) => format!("{} | {}", ratio(s.p50, r.p50), ratio(s.max, r.max)),
        _ => "- | -".to_string(),
    }
}

fn outages(result: &PhaseResult, scenario: Scenario) -> Option<Vec<Duration>> {
    result
        .failover
        .iter()
        .find(|(s, _)| *s == scenario)
        .map(|(_, trials)| trials.iter().map(|t| t.outage).collect())
}

/// The tables of the first phase: failover, Service to ARP, API requests, speaker cost.
fn phase_tables(out: &mut String, phases: &[PhaseResult], requests: &[Request], nodes: &[IpAddr]) {
    let vigil = phases.iter().find(|p| p.system == System::Vigil);
    let _ = writeln!(
        out,
        "### Failover: longest ARP silence the client saw (ms), probing every 5 ms\n\n\
         | system | scenario | n | p50 | p90 | max | moved | two MACs | p50 / vigil | max / vigil |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for p in phases {
        for (scenario, trials) in &p.failover {
            let samples: Vec<Duration> = trials.iter().map(|t| t.outage).collect();
            let reference = vigil.and_then(|v| outages(v, *scenario));
            let moved = trials.iter().filter(|t| t.moved).count();
            let conflicts = trials.iter().filter(|t| t.conflicts > 0).count();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {moved}/{} | {conflicts}/{} | {} |",
                p.system.name(),
                scenario.label(),
                trials.len(),
                spread_cells(&samples),
                trials.len(),
                trials.len(),
                ratio_cells(&samples, reference.as_deref())
            );
        }
    }
    let _ = writeln!(
        out,
        "\n### Service created to its first ARP answer (ms; controller and speaker)\n\n\
         From the create request, and from its answer (the Service stored: the API server's own \
         work on the create left out: no system does any of it).\n\n\
         | system | from | n | p50 | p90 | max | unanswered | p50 / vigil | max / vigil |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|"
    );
    let timings: [(&str, Times); 2] = [
        ("the request", Creation::from_request),
        ("the stored Service", Creation::from_stored),
    ];
    for (from, times) in timings {
        let reference = vigil.map(|v| times(&v.create));
        for p in phases.iter().filter(|p| p.system.uses_api()) {
            let samples = times(&p.create);
            let _ = writeln!(
                out,
                "| {} | {from} | {} | {} | {} | {} |",
                p.system.name(),
                samples.len(),
                spread_cells(&samples),
                p.create_missed,
                ratio_cells(&samples, reference.as_deref())
            );
        }
    }
    let _ = writeln!(
        out,
        "\n### API requests per second (kube-apiserver audit log), {} speaker nodes\n\n\
         | system | idle: per node | idle: writes per node | churn: per node | churn: writes per node | churn: busiest node | controller idle | controller churn | churn changes/s |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|",
        nodes.len()
    );
    for p in phases.iter().filter(|p| p.system.uses_api()) {
        let idle = p
            .idle
            .as_ref()
            .map(|(w, _)| cost(requests, nodes, p.system, w));
        let churn = p.churn.map(|(w, _)| cost(requests, nodes, p.system, &w));
        let rate = p
            .churn
            .map(|(w, n)| n as f64 / w.length().as_secs_f64().max(1e-9));
        let f = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            p.system.name(),
            f(idle.as_ref().map(|c| c.per_node)),
            f(idle.as_ref().map(|c| c.writes_per_node)),
            f(churn.as_ref().map(|c| c.per_node)),
            f(churn.as_ref().map(|c| c.writes_per_node)),
            f(churn.as_ref().map(|c| c.max_node)),
            f(idle.as_ref().map(|c| c.controller)),
            f(churn.as_ref().map(|c| c.controller)),
            f(rate)
        );
    }
    let _ = writeln!(
        out,
        "\n### Speaker cost, idle with one Service (from /proc)\n\n\
         | system | CPU per speaker, mean / max (% of a core) | RSS per speaker, mean / max (MiB) | controller RSS (MiB) |\n\
         |---|---:|---:|---:|"
    );
    for p in phases {
        if let Some((_, u)) = &p.idle {
            let _ = writeln!(
                out,
                "| {} | {:.2} / {:.2} | {:.1} / {:.1} | {} |",
                p.system.name(),
                u.cpu_percent.0,
                u.cpu_percent.1,
                u.rss_mib.0,
                u.rss_mib.1,
                u.controller
                    .map_or("-".to_string(), |(_, rss)| format!("{rss:.1}"))
            );
        }
    }
}

/// The markdown report. `nodes`: the phases' speaker hosts' addresses, then the fleet's.
pub(crate) fn markdown(
    phases: &[PhaseResult],
    controllers: &[ControllerResult],
    scales: &[ScaleResult],
    fleets: &[FleetResult],
    requests: &[Request],
    (nodes, fleet_nodes): (&[IpAddr], &[IpAddr]),
    total_nodes: usize,
) -> String {
    let mut out = String::new();
    if !phases.is_empty() {
        phase_tables(&mut out, phases, requests, nodes);
    }
    controller_tables(&mut out, controllers, requests);
    if !scales.is_empty() {
        let _ = writeln!(
            out,
            "\n### Scale: {total_nodes} Nodes ({} with a real speaker)\n\n\
             | system | Services | all ServiceL2Status after (s) | speaker CPU during it, mean / max (s) | idle CPU per speaker (%) | RSS per speaker mean / max (MiB) | peak RSS (MiB) | API per node: sync / idle (req/s) | one more Service to ARP: n, p50 / max (ms) | drained (s) |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            nodes.len()
        );
        for s in scales {
            let sync_cost = cost(requests, nodes, s.system, &s.sync_window.0);
            let idle_cost = cost(requests, nodes, s.system, &s.idle.0);
            let u = &s.idle.1;
            let change = spread(&Creation::from_request(&s.change)).map_or("-".to_string(), |x| {
                format!("{}, {} / {}", s.change.len(), ms(x.p50), ms(x.max))
            });
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1} / {:.1} | {:.2} | {:.1} / {:.1} | {:.1} | {:.2} / {:.2} | {change}{} | {} |",
                s.system.name(),
                s.services,
                s.sync.map_or(
                    format!("not within the bound ({} of {})", s.statuses, s.services),
                    |d| format!("{:.1}", d.as_secs_f64())
                ),
                s.sync_window.1.cpu_seconds.0,
                s.sync_window.1.cpu_seconds.1,
                u.cpu_percent.0,
                u.rss_mib.0,
                u.rss_mib.1,
                s.sync_window.1.hwm_mib.max(u.hwm_mib),
                sync_cost.per_node,
                idle_cost.per_node,
                if s.change_missed > 0 {
                    format!(" ({} unanswered)", s.change_missed)
                } else {
                    String::new()
                },
                s.drain
                    .map_or("-".to_string(), |d| format!("{:.1}", d.as_secs_f64()))
            );
        }
    }
    scale_ratio_tables(&mut out, scales, requests, nodes);
    fleet_table(&mut out, fleets, requests, fleet_nodes);
    let notes: Vec<String> = phases
        .iter()
        .flat_map(|p| {
            p.notes
                .iter()
                .map(move |n| format!("{}: {n}", p.system.name()))
        })
        .chain(controllers.iter().flat_map(|c| {
            c.notes
                .iter()
                .map(move |n| format!("controller {}: {n}", c.system.name()))
        }))
        .chain(scales.iter().flat_map(|s| {
            s.notes
                .iter()
                .map(move |n| format!("scale {}: {n}", s.system.name()))
        }))
        .chain(fleets.iter().flat_map(|f| {
            f.notes
                .iter()
                .map(move |n| format!("fleet {}: {n}", f.system.name()))
        }))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(out, "\nNotes:");
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
    out
}

/// Per Service count, vigil's and MetalLB's scale figures side by side with their ratio, and
/// the Node churn window's where the run had one.
fn scale_ratio_tables(
    out: &mut String,
    scales: &[ScaleResult],
    requests: &[Request],
    nodes: &[IpAddr],
) {
    let mut counts: Vec<usize> = scales.iter().map(|s| s.services).collect();
    counts.dedup();
    let header = "| figure | vigil | MetalLB | vigil / MetalLB |\n|---|---:|---:|---:|";
    for services in counts {
        let find = |system: System| {
            scales
                .iter()
                .find(|s| s.services == services && s.system == system)
        };
        let (vigil, metallb) = (find(System::Vigil), find(System::MetalLbDefault));
        let pair =
            |f: &dyn Fn(&ScaleResult) -> Option<f64>| (vigil.and_then(f), metallb.and_then(f));
        let _ = writeln!(
            out,
            "\n### Scale, {services} Services: vigil against MetalLB\n\n{header}"
        );
        let secs = |d: Duration| d.as_secs_f64();
        let msf = |d: Duration| d.as_secs_f64() * 1000.0;
        let (v, m) = pair(&|s| s.sync.map(secs));
        ratio_row(out, "every ServiceL2Status written (s)", v, m, 1);
        let (v, m) = pair(&|s| Some(s.sync_window.1.cpu_seconds.0));
        ratio_row(out, "speaker CPU during the sync, mean (s)", v, m, 2);
        let (v, m) = pair(&|s| Some(s.sync_window.1.cpu_seconds.1));
        ratio_row(out, "speaker CPU during the sync, max (s)", v, m, 2);
        let (v, m) = pair(&|s| s.sync_window.1.controller.map(|c| c.0));
        ratio_row(out, "controller CPU during the sync (s)", v, m, 2);
        let (v, m) = pair(&|s| Some(s.idle.1.cpu_percent.0));
        ratio_row(out, "idle CPU per speaker (% of a core)", v, m, 2);
        let (v, m) = pair(&|s| Some(s.idle.1.rss_mib.0));
        ratio_row(out, "RSS per speaker, mean (MiB)", v, m, 1);
        let (v, m) = pair(&|s| Some(s.sync_window.1.hwm_mib.max(s.idle.1.hwm_mib)));
        ratio_row(out, "peak RSS of a speaker (MiB)", v, m, 1);
        let cost_of = |s: &ScaleResult, w: &Window| cost(requests, nodes, s.system, w);
        let (v, m) = pair(&|s| Some(cost_of(s, &s.sync_window.0).per_node));
        ratio_row(
            out,
            "API requests per node during the sync (req/s)",
            v,
            m,
            2,
        );
        let (v, m) = pair(&|s| {
            let c = cost_of(s, &s.sync_window.0);
            Some(c.per_node * s.sync_window.0.length().as_secs_f64())
        });
        ratio_row(
            out,
            "API requests per node during the sync (total)",
            v,
            m,
            0,
        );
        let (v, m) = pair(&|s| Some(cost_of(s, &s.idle.0).per_node));
        ratio_row(out, "API requests per node idle (req/s)", v, m, 3);
        let timings: [(&str, Times, usize); 2] = [
            ("", Creation::from_request, 0),
            (" from the stored Service", Creation::from_stored, 1),
        ];
        for (from, times, digits) in timings {
            let (v, m) = pair(&|s| spread(&times(&s.change)).map(|x| msf(x.p50)));
            let label = format!("one more Service to first ARP{from}, p50 (ms)");
            ratio_row(out, &label, v, m, digits);
            let (v, m) = pair(&|s| spread(&times(&s.change)).map(|x| msf(x.max)));
            let label = format!("one more Service to first ARP{from}, max (ms)");
            ratio_row(out, &label, v, m, digits);
        }
        let (v, m) = pair(&|s| s.drain.map(secs));
        ratio_row(out, "drained (s)", v, m, 1);
        let (v, m) = pair(&|s| Some(secs(s.delete_took)));
        ratio_row(
            out,
            "the bench's deletes took (s; a floor under the drain)",
            v,
            m,
            1,
        );
        let (v, m) = pair(&|s| s.drain.map(|d| secs(d.saturating_sub(s.delete_took))));
        ratio_row(
            out,
            "deletes returned to no ServiceL2Status left (s)",
            v,
            m,
            1,
        );
        let (v, m) = pair(&|s| Some(s.create_took.as_secs_f64()));
        ratio_row(
            out,
            "the bench's creates took (s; a floor under the sync)",
            v,
            m,
            1,
        );
        let (v, m) = pair(&|s| s.sync.map(|d| secs(d.saturating_sub(s.create_took))));
        ratio_row(out, "last create to every ServiceL2Status (s)", v, m, 1);
        if vigil.or(metallb).is_some_and(|s| s.restart.is_some()) {
            let (v, m) = pair(&|s| s.restart.as_ref().and_then(|r| r.took.map(secs)));
            ratio_row(
                out,
                "restart sync: speakers started to every ServiceL2Status (s)",
                v,
                m,
                1,
            );
            let (v, m) = pair(&|s| s.restart.as_ref().map(|r| r.statuses.1 as f64));
            ratio_row(out, "restart sync: ServiceL2Status found", v, m, 0);
            let (v, m) = pair(&|s| s.restart.as_ref().map(|r| r.window.1.cpu_seconds.0));
            ratio_row(out, "restart sync: speaker CPU, mean (s)", v, m, 2);
            let (v, m) = pair(&|s| s.restart.as_ref().map(|r| r.window.1.cpu_seconds.1));
            ratio_row(out, "restart sync: speaker CPU, max (s)", v, m, 2);
            let (v, m) = pair(&|s| s.restart.as_ref().map(|r| r.window.1.rss_mib.0));
            ratio_row(
                out,
                "restart sync: RSS per speaker at its end, mean (MiB)",
                v,
                m,
                1,
            );
            let (v, m) = pair(&|s| s.restart.as_ref().map(|r| cost_of(s, &r.window.0).per_node));
            ratio_row(out, "restart sync: API requests per node (req/s)", v, m, 2);
            let (v, m) = pair(&|s| {
                s.restart
                    .as_ref()
                    .map(|r| cost_of(s, &r.window.0).per_node * r.window.0.length().as_secs_f64())
            });
            ratio_row(out, "restart sync: API requests per node (total)", v, m, 0);
        }
        if vigil.or(metallb).is_some_and(|s| s.node_churn.is_some()) {
            let rounds = vigil.or(metallb).and_then(churn).map_or(0, |c| c.rounds);
            let _ = writeln!(
                out,
                "\n### Node churn at {services} Services: every Node's status heartbeat-patched, {rounds} rounds\n\n{header}"
            );
            let (v, m) = pair(&|s| churn(s).map(|c| c.window.1.cpu_seconds.0));
            ratio_row(out, "speaker CPU in the window, mean (s)", v, m, 2);
            let (v, m) = pair(&|s| churn(s).map(|c| c.window.1.cpu_seconds.1));
            ratio_row(out, "speaker CPU in the window, max (s)", v, m, 2);
            let (v, m) = pair(&|s| churn(s).map(|c| c.window.1.cpu_percent.0));
            ratio_row(out, "speaker CPU in the window (% of a core)", v, m, 2);
            let (v, m) = pair(&|s| Some(s.idle.1.cpu_percent.0));
            ratio_row(
                out,
                "the same speakers idle before it (% of a core)",
                v,
                m,
                2,
            );
            let (v, m) = pair(&|s| churn(s).map(|c| c.window.1.controller.map_or(0.0, |x| x.0)));
            ratio_row(out, "controller CPU in the window (s)", v, m, 2);
            let (v, m) = pair(&|s| churn(s).map(|c| cost_of(s, &c.window.0).per_node));
            ratio_row(out, "API requests per node in the window (req/s)", v, m, 3);
            let (v, m) = pair(&|s| churn(s).map(|c| cost_of(s, &c.window.0).writes_per_node));
            ratio_row(out, "API writes per node in the window (req/s)", v, m, 3);
            let (v, m) = pair(&|s| churn(s).map(|c| c.patches as f64));
            ratio_row(out, "Node status patches", v, m, 0);
            let (v, m) = pair(&|s| churn(s).map(|c| c.statuses.1 as f64 - c.statuses.0 as f64));
            ratio_row(
                out,
                "ServiceL2Status change over the window (should be 0)",
                v,
                m,
                0,
            );
        }
    }
}

fn churn(s: &ScaleResult) -> Option<&crate::scale::NodeChurn> {
    s.node_churn.as_ref()
}

/// The fleet phase: vigil's and MetalLB's figures side by side with their ratio.
fn fleet_table(out: &mut String, fleets: &[FleetResult], requests: &[Request], nodes: &[IpAddr]) {
    let find = |system: System| fleets.iter().find(|f| f.system == system);
    let (vigil, metallb) = (find(System::Vigil), find(System::MetalLbDefault));
    let Some(any) = vigil.or(metallb) else {
        return;
    };
    let pair = |f: &dyn Fn(&FleetResult) -> Option<f64>| (vigil.and_then(f), metallb.and_then(f));
    let _ = writeln!(
        out,
        "\n### Fleet: {} real speakers (a lab host, Node and speaker Pod each), {} Services\n\n\
         | figure | vigil | MetalLB | vigil / MetalLB |\n|---|---:|---:|---:|",
        any.speakers, any.services
    );
    let secs = |d: Duration| d.as_secs_f64();
    let msf = |d: Duration| d.as_secs_f64() * 1000.0;
    let cost_of = |f: &FleetResult, w: &Window| cost(requests, nodes, f.system, w);
    let (v, m) = pair(&|f| f.sync.map(secs));
    ratio_row(out, "every ServiceL2Status written (s)", v, m, 1);
    let (v, m) = pair(&|f| Some(f.statuses as f64));
    ratio_row(out, "ServiceL2Status at the end of the wait", v, m, 0);
    let (v, m) = pair(&|f| Some(f.sync_window.1.cpu_seconds.0));
    ratio_row(out, "speaker CPU during the sync, mean (s)", v, m, 2);
    let (v, m) = pair(&|f| Some(f.sync_window.1.cpu_seconds.1));
    ratio_row(out, "speaker CPU during the sync, max (s)", v, m, 2);
    let (v, m) = pair(&|f| Some(f.idle.1.cpu_percent.0));
    ratio_row(out, "idle CPU per speaker, mean (% of a core)", v, m, 2);
    let (v, m) = pair(&|f| Some(f.idle.1.cpu_percent.1));
    ratio_row(out, "idle CPU per speaker, max (% of a core)", v, m, 2);
    let (v, m) = pair(&|f| Some(f.idle.1.rss_mib.0));
    ratio_row(out, "RSS per speaker, mean (MiB)", v, m, 1);
    let (v, m) = pair(&|f| Some(f.idle.1.rss_mib.1));
    ratio_row(out, "RSS per speaker, max (MiB)", v, m, 1);
    let (v, m) = pair(&|f| Some(cost_of(f, &f.sync_window.0).per_node));
    ratio_row(
        out,
        "API requests per node during the sync (req/s)",
        v,
        m,
        2,
    );
    let (v, m) = pair(&|f| {
        Some(cost_of(f, &f.sync_window.0).per_node * f.sync_window.0.length().as_secs_f64())
    });
    ratio_row(
        out,
        "API requests per node during the sync (total)",
        v,
        m,
        0,
    );
    let (v, m) = pair(&|f| Some(cost_of(f, &f.idle.0).per_node));
    ratio_row(out, "API requests per node idle (req/s)", v, m, 3);
    let outages = |f: &FleetResult| f.failover.iter().map(|t| t.outage).collect::<Vec<_>>();
    let (v, m) = pair(&|f| Some(f.failover.len() as f64));
    ratio_row(out, "host-loss trials", v, m, 0);
    let (v, m) = pair(&|f| spread(&outages(f)).map(|x| msf(x.p50)));
    ratio_row(out, "host loss: ARP outage p50 (ms)", v, m, 0);
    let (v, m) = pair(&|f| spread(&outages(f)).map(|x| msf(x.max)));
    ratio_row(out, "host loss: ARP outage max (ms)", v, m, 0);
    let (v, m) = pair(&|f| Some(f.failover.iter().filter(|t| t.moved).count() as f64));
    ratio_row(
        out,
        "host loss: trials moved to the expected successor",
        v,
        m,
        0,
    );
    let (v, m) = pair(&|f| f.drain.map(secs));
    ratio_row(out, "drained (s)", v, m, 1);
}

/// The controller's requests in `w`, by verb.
fn controller_verbs(requests: &[Request], system: System, w: &Window) -> BTreeMap<String, u64> {
    audit::verbs_of(requests, w.from, w.to, system.controller_user())
}

/// "get 3, update 2".
fn verbs_line(verbs: &BTreeMap<String, u64>) -> String {
    if verbs.is_empty() {
        return "none".to_string();
    }
    verbs
        .iter()
        .map(|(v, n)| format!("{v} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One row of a vigil-against-MetalLB table: both figures and their ratio.
fn ratio_row(
    out: &mut String,
    label: &str,
    vigil: Option<f64>,
    metallb: Option<f64>,
    digits: usize,
) {
    let cell = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.digits$}"));
    let ratio = match (vigil, metallb) {
        (Some(v), Some(m)) if m > 0.0 => format!("{:.2}x", v / m),
        _ => "-".to_string(),
    };
    let _ = writeln!(
        out,
        "| {label} | {} | {} | {ratio} |",
        cell(vigil),
        cell(metallb)
    );
}

/// The controller phase's tables: vigil and MetalLB side by side.
fn controller_tables(out: &mut String, controllers: &[ControllerResult], requests: &[Request]) {
    let find = |s: System| controllers.iter().find(|c| c.system == s);
    let (vigil, metallb) = (find(System::Vigil), find(System::MetalLbDefault));
    let pair =
        |f: &dyn Fn(&ControllerResult) -> Option<f64>| (vigil.and_then(f), metallb.and_then(f));
    let header = "| figure | vigil | MetalLB | vigil / MetalLB |\n|---|---:|---:|---:|";
    let churns: Vec<_> = controllers
        .iter()
        .filter_map(|c| c.churn.as_ref())
        .collect();
    if let Some(first) = churns.first() {
        let _ = writeln!(
            out,
            "\n### Controller churn: Service created to its ingress, controller alone ({} trials; a watch sees the ingress)\n\n{header}",
            first.changes / 2
        );
        let spread_of = |c: &ControllerResult| c.churn.as_ref().and_then(|x| spread(&x.times));
        let msf = |d: Duration| d.as_secs_f64() * 1000.0;
        let (v, m) = pair(&|c| spread_of(c).map(|s| msf(s.p50)));
        ratio_row(out, "create to ingress p50 (ms)", v, m, 1);
        let (v, m) = pair(&|c| spread_of(c).map(|s| msf(s.p90)));
        ratio_row(out, "create to ingress p90 (ms)", v, m, 1);
        let (v, m) = pair(&|c| spread_of(c).map(|s| msf(s.max)));
        ratio_row(out, "create to ingress max (ms)", v, m, 1);
        let p50_of =
            |c: &ControllerResult, pick: &dyn Fn(&crate::controller::Churn) -> &[Duration]| {
                c.churn
                    .as_ref()
                    .and_then(|x| spread(pick(x)))
                    .map(|s| msf(s.p50))
            };
        let (v, m) = pair(&|c| p50_of(c, &|x| &x.floor));
        ratio_row(
            out,
            "create to the watch's first event p50 (ms; API server and watch alone)",
            v,
            m,
            1,
        );
        let (v, m) = pair(&|c| p50_of(c, &|x| &x.share));
        ratio_row(
            out,
            "first event to ingress p50 (ms; the controller's share)",
            v,
            m,
            1,
        );
        let (v, m) = pair(&|c| c.churn.as_ref().map(|x| x.missed as f64));
        ratio_row(out, "trials without ingress", v, m, 0);
        let per_change = |c: &ControllerResult, writes: bool| {
            c.churn.as_ref().map(|x| {
                let (all, w) = audit::totals(&controller_verbs(requests, c.system, &x.window));
                (if writes { w } else { all }) as f64 / x.changes.max(1) as f64
            })
        };
        let (v, m) = pair(&|c| per_change(c, false));
        ratio_row(out, "API requests per change (reads and writes)", v, m, 2);
        let (v, m) = pair(&|c| per_change(c, true));
        ratio_row(out, "API writes per change", v, m, 2);
        let (v, m) = pair(&|c| {
            c.churn
                .as_ref()
                .and_then(|x| x.cpu.map(|d| msf(d) / x.changes.max(1) as f64))
        });
        ratio_row(out, "controller CPU per change (ms)", v, m, 1);
    }
    let passes: Vec<_> = controllers
        .iter()
        .filter_map(|c| c.reprocess.as_ref())
        .collect();
    if let Some(first) = passes.first() {
        let _ = writeln!(
            out,
            "\n### Controller reprocess: {} waiting Services, their pool created to every ingress (controller alone)\n\n{header}",
            first.services
        );
        let secs = |d: Duration| d.as_secs_f64();
        let (v, m) = pair(&|c| c.reprocess.as_ref().and_then(|x| x.all.map(secs)));
        ratio_row(out, "pool created to every ingress (s)", v, m, 2);
        let (v, m) = pair(&|c| {
            c.reprocess
                .as_ref()
                .and_then(|x| x.first.map(|d| d.as_secs_f64() * 1000.0))
        });
        ratio_row(out, "pool created to the first ingress (ms)", v, m, 1);
        let (v, m) = pair(&|c| c.reprocess.as_ref().map(|x| x.admitted as f64));
        ratio_row(out, "Services with an ingress at the end", v, m, 0);
        let (v, m) = pair(&|c| c.reprocess.as_ref().and_then(|x| x.cpu.map(secs)));
        ratio_row(out, "controller CPU during it (s)", v, m, 2);
        let totals = |c: &ControllerResult| {
            c.reprocess
                .as_ref()
                .map(|x| audit::totals(&controller_verbs(requests, c.system, &x.window)))
        };
        let (v, m) = pair(&|c| totals(c).map(|t| t.0 as f64));
        ratio_row(out, "API requests during it (reads and writes)", v, m, 0);
        let (v, m) = pair(&|c| totals(c).map(|t| t.1 as f64));
        ratio_row(out, "API writes during it", v, m, 0);
        let (v, m) = pair(&|c| {
            c.reprocess
                .as_ref()
                .zip(totals(c))
                .map(|(x, t)| t.0 as f64 / x.services.max(1) as f64)
        });
        ratio_row(out, "API requests per Service", v, m, 2);
        let quiet = |c: &ControllerResult| {
            c.reprocess
                .as_ref()
                .map(|x| audit::totals(&controller_verbs(requests, c.system, &x.until_quiet)))
        };
        let (v, m) = pair(&|c| quiet(c).map(|t| t.0 as f64));
        ratio_row(
            out,
            "API requests from the pool until quiet (reads and writes)",
            v,
            m,
            0,
        );
        let (v, m) = pair(&|c| quiet(c).map(|t| t.1 as f64));
        ratio_row(out, "API writes from the pool until quiet", v, m, 0);
        let (v, m) = pair(&|c| c.reprocess.as_ref().map(|x| secs(x.settled)));
        ratio_row(out, "before the pool: created and quiet after (s)", v, m, 1);
        let (v, m) = pair(&|c| c.reprocess.as_ref().map(|x| x.premature as f64));
        ratio_row(
            out,
            "ingress before the pool existed (should be 0)",
            v,
            m,
            0,
        );
    }
    if !churns.is_empty() || !passes.is_empty() {
        let _ = writeln!(out, "\nThe controller's requests by verb:");
        for c in controllers {
            if let Some(x) = &c.churn {
                let verbs = controller_verbs(requests, c.system, &x.window);
                let _ = writeln!(out, "- {} churn: {}", c.system.name(), verbs_line(&verbs));
            }
            if let Some(x) = &c.reprocess {
                let verbs = controller_verbs(requests, c.system, &x.window);
                let _ = writeln!(
                    out,
                    "- {} reprocess: {}",
                    c.system.name(),
                    verbs_line(&verbs)
                );
            }
        }
    }
}

fn ms_list(v: &[Duration]) -> Value {
    json!(
        v.iter()
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect::<Vec<_>>()
    )
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "cpu_percent_mean": u.cpu_percent.0, "cpu_percent_max": u.cpu_percent.1,
        "cpu_seconds_mean": u.cpu_seconds.0, "cpu_seconds_max": u.cpu_seconds.1,
        "rss_mib_mean": u.rss_mib.0, "rss_mib_max": u.rss_mib.1, "hwm_mib": u.hwm_mib,
        "controller_cpu_seconds": u.controller.map(|c| c.0),
        "controller_rss_mib": u.controller.map(|c| c.1),
    })
}

fn cost_json(c: &Cost) -> Value {
    json!({
        "per_node": c.per_node, "writes_per_node": c.writes_per_node, "max_node": c.max_node,
        "controller": c.controller, "speaker_verbs": c.speaker_verbs,
    })
}

/// Every sample, as JSON.
pub(crate) fn json(
    phases: &[PhaseResult],
    controllers: &[ControllerResult],
    scales: &[ScaleResult],
    fleets: &[FleetResult],
    requests: &[Request],
    (nodes, fleet_nodes): (&[IpAddr], &[IpAddr]),
) -> Value {
    let phases: Vec<Value> = phases
        .iter()
        .map(|p| {
            json!({
                "system": p.system.name(),
                "failover": p.failover.iter().map(|(s, trials)| json!({
                    "scenario": s.name(),
                    "outage_ms": ms_list(&trials.iter().map(|t| t.outage).collect::<Vec<_>>()),
                    "moved": trials.iter().map(|t| t.moved).collect::<Vec<_>>(),
                    "conflicts": trials.iter().map(|t| t.conflicts).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "create_ms": ms_list(&Creation::from_request(&p.create)),
                "create_from_stored_ms": ms_list(&Creation::from_stored(&p.create)),
                "create_missed": p.create_missed,
                "idle": p.idle.as_ref().map(|(w, u)| json!({
                    "seconds": w.length().as_secs_f64(),
                    "usage": usage_json(u),
                    "api": cost_json(&cost(requests, nodes, p.system, w)),
                })),
                "churn": p.churn.map(|(w, n)| json!({
                    "seconds": w.length().as_secs_f64(), "changes": n,
                    "api": cost_json(&cost(requests, nodes, p.system, &w)),
                })),
                "notes": p.notes,
            })
        })
        .collect();
    let scales: Vec<Value> = scales
        .iter()
        .map(|s| {
            json!({
                "system": s.system.name(), "services": s.services,
                "sync_seconds": s.sync.map(|d| d.as_secs_f64()), "statuses": s.statuses,
                "create_seconds": s.create_took.as_secs_f64(),
                "sync_usage": usage_json(&s.sync_window.1),
                "sync_api": cost_json(&cost(requests, nodes, s.system, &s.sync_window.0)),
                "idle_usage": usage_json(&s.idle.1),
                "idle_api": cost_json(&cost(requests, nodes, s.system, &s.idle.0)),
                "node_churn": s.node_churn.as_ref().map(|c| json!({
                    "seconds": c.window.0.length().as_secs_f64(), "rounds": c.rounds,
                    "patches": c.patches, "usage": usage_json(&c.window.1),
                    "api": cost_json(&cost(requests, nodes, s.system, &c.window.0)),
                    "statuses_before": c.statuses.0, "statuses_after": c.statuses.1,
                })),
                "change_ms": ms_list(&Creation::from_request(&s.change)),
                "change_from_stored_ms": ms_list(&Creation::from_stored(&s.change)),
                "change_missed": s.change_missed,
                "restart_sync": s.restart.as_ref().map(|r| json!({
                    "seconds": r.took.map(|d| d.as_secs_f64()),
                    "statuses_wanted": r.statuses.0, "statuses_found": r.statuses.1,
                    "usage": usage_json(&r.window.1),
                    "api": cost_json(&cost(requests, nodes, s.system, &r.window.0)),
                })),
                "drain_seconds": s.drain.map(|d| d.as_secs_f64()),
                "delete_seconds": s.delete_took.as_secs_f64(), "notes": s.notes,
            })
        })
        .collect();
    let controllers: Vec<Value> = controllers
        .iter()
        .map(|c| {
            json!({
                "system": c.system.name(),
                "churn": c.churn.as_ref().map(|x| json!({
                    "seconds": x.window.length().as_secs_f64(), "changes": x.changes,
                    "ingress_ms": ms_list(&x.times), "missed": x.missed,
                    "first_event_ms": ms_list(&x.floor), "controller_share_ms": ms_list(&x.share),
                    "cpu_seconds": x.cpu.map(|d| d.as_secs_f64()),
                    "verbs": controller_verbs(requests, c.system, &x.window),
                })),
                "reprocess": c.reprocess.as_ref().map(|x| json!({
                    "services": x.services, "settled_seconds": x.settled.as_secs_f64(),
                    "premature": x.premature,
                    "first_seconds": x.first.map(|d| d.as_secs_f64()),
                    "all_seconds": x.all.map(|d| d.as_secs_f64()),
                    "admitted": x.admitted,
                    "cpu_seconds": x.cpu.map(|d| d.as_secs_f64()),
                    "verbs": controller_verbs(requests, c.system, &x.window),
                    "quiet_seconds": x.until_quiet.length().as_secs_f64(),
                    "verbs_until_quiet": controller_verbs(requests, c.system, &x.until_quiet),
                })),
                "notes": c.notes,
            })
        })
        .collect();
    let fleets: Vec<Value> = fleets
        .iter()
        .map(|f| {
            json!({
                "system": f.system.name(), "speakers": f.speakers, "services": f.services,
                "sync_seconds": f.sync.map(|d| d.as_secs_f64()), "statuses": f.statuses,
                "sync_usage": usage_json(&f.sync_window.1),
                "sync_api": cost_json(&cost(requests, fleet_nodes, f.system, &f.sync_window.0)),
                "idle_usage": usage_json(&f.idle.1),
                "idle_api": cost_json(&cost(requests, fleet_nodes, f.system, &f.idle.0)),
                "link_outage_ms": ms_list(&f.failover.iter().map(|t| t.outage).collect::<Vec<_>>()),
                "link_moved": f.failover.iter().map(|t| t.moved).collect::<Vec<_>>(),
                "drain_seconds": f.drain.map(|d| d.as_secs_f64()), "notes": f.notes,
            })
        })
        .collect();
    json!({ "phases": phases, "controller": controllers, "scale": scales, "fleet": fleets })
}
