//! The run's figures as markdown tables (stdout) and JSON (`--results`).

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use serde_json::{Value, json};

use crate::audit::{self, Cost, Request};
use crate::phase::{PhaseResult, Scenario, Usage, Window};
use crate::scale::ScaleResult;
use crate::stats::{ms, ratio, spread};
use crate::system::System;

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

/// The markdown report.
pub(crate) fn markdown(
    phases: &[PhaseResult],
    scales: &[ScaleResult],
    requests: &[Request],
    nodes: &[IpAddr],
    total_nodes: usize,
) -> String {
    let mut out = String::new();
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
         | system | n | p50 | p90 | max | unanswered | p50 / vigil | max / vigil |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|"
    );
    for p in phases.iter().filter(|p| p.system.uses_api()) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            p.system.name(),
            p.create.len(),
            spread_cells(&p.create),
            p.create_missed,
            ratio_cells(&p.create, vigil.map(|v| v.create.as_slice()))
        );
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
            let change = spread(&s.change).map_or("-".to_string(), |x| {
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
    let notes: Vec<String> = phases
        .iter()
        .flat_map(|p| {
            p.notes
                .iter()
                .map(move |n| format!("{}: {n}", p.system.name()))
        })
        .chain(scales.iter().flat_map(|s| {
            s.notes
                .iter()
                .map(move |n| format!("scale {}: {n}", s.system.name()))
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
    scales: &[ScaleResult],
    requests: &[Request],
    nodes: &[IpAddr],
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
                "create_ms": ms_list(&p.create),
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
                "change_ms": ms_list(&s.change), "change_missed": s.change_missed,
                "drain_seconds": s.drain.map(|d| d.as_secs_f64()), "notes": s.notes,
            })
        })
        .collect();
    json!({ "phases": phases, "scale": scales })
}
