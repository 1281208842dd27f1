//! Living with a kept lab: `--down` removes it, `--watch` follows who answers for its VIPs.

use super::cluster::{self, CLIENT4, CLIENT6, VIP4, VIP6};
use super::demo::ms;
use super::probe::{Family, Prober, Questions};
use super::{Stop, pause};
use std::process::ExitCode;
use std::time::Duration;
use vigil_l2::wire::ethernet::Address as Mac;

/// `vigil lab --down`: kills what runs in the lab's namespaces, deletes them and its files.
pub(super) fn down(prefix: &str) -> ExitCode {
    let namespaces = match cluster::namespaces_with(prefix) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vigil lab: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = cluster::work_dir(prefix);
    // A Kubernetes lab's API server keeps its data beside it.
    let cp_dir = super::kubernetes::control_plane_dir(prefix);
    if cp_dir.exists() {
        let _ = std::fs::remove_dir_all(&cp_dir);
    }
    if namespaces.is_empty() && !dir.exists() {
        println!("vigil lab: no lab with prefix {prefix}");
        return ExitCode::SUCCESS;
    }
    // Hosts and the client before the bridge.
    let (bridges, others): (Vec<&String>, Vec<&String>) =
        namespaces.iter().partition(|n| n.ends_with("-br"));
    let mut killed = 0;
    for ns in others.into_iter().chain(bridges) {
        killed += cluster::remove_namespace(ns);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let left = cluster::namespaces_with(prefix).unwrap_or_default();
    if !left.is_empty() {
        eprintln!("vigil lab: could not delete {}", left.join(", "));
        return ExitCode::FAILURE;
    }
    println!(
        "vigil lab: removed {} namespaces and {}, killed {killed} processes",
        namespaces.len(),
        dir.display()
    );
    ExitCode::SUCCESS
}

/// `vigil lab --watch`: which host answers for the VIPs of a running lab, printed on every
/// change, until Ctrl-C or 10 minutes.
pub(super) fn watch(prefix: &str) -> Result<(), Stop> {
    let client = cluster::ns_name(prefix, "client");
    if !cluster::namespaces_with(prefix)?.contains(&client) {
        return Err(Stop::failed(format!(
            "no lab with prefix {prefix} is running (no namespace {client}; start one with \
             `vigil lab --keep`)"
        )));
    }
    let (ifindex, mac) = cluster::link(&client)?;
    let mut names: Vec<(Mac, String)> = Vec::new();
    for ns in cluster::namespaces_with(prefix)? {
        let host = ns.trim_start_matches(&format!("{prefix}-")).to_string();
        if host.starts_with("host-")
            && let Ok((_, m)) = cluster::link(&ns)
        {
            names.push((m, host));
        }
    }
    let name = |answers: &[Mac]| -> String {
        if answers.is_empty() {
            return "no answer".into();
        }
        let v: Vec<String> = answers
            .iter()
            .map(|m| {
                names
                    .iter()
                    .find(|(n, _)| n == m)
                    .map_or_else(|| m.to_string(), |(_, h)| format!("{h} ({m})"))
            })
            .collect();
        v.join(" and ")
    };
    let limit = Duration::from_secs(600);
    let prober = Prober::start(Questions {
        ns: client,
        ifindex,
        mac,
        src4: CLIENT4,
        src6: CLIENT6,
        vip4: VIP4,
        vip6: Some(VIP6),
        interval: Duration::from_millis(10),
        limit,
    })
    .map_err(|e| Stop::failed(format!("cannot start the prober: {e}")))?;
    println!(
        "asking for {VIP4} and {VIP6} every 10 ms from the client; Ctrl-C stops (at most 10 minutes)"
    );
    let mut seen = 0;
    let mut last: [Option<(Vec<Mac>, Duration)>; 2] = [None, None];
    loop {
        pause(Duration::from_millis(50))?;
        let rounds = prober.rounds_from(seen);
        seen += rounds.len();
        for r in &rounds {
            for (i, (family, vip)) in [
                (Family::V4, VIP4.to_string()),
                (Family::V6, VIP6.to_string()),
            ]
            .into_iter()
            .enumerate()
            {
                let mut answers = r.answers(family).to_vec();
                answers.sort_unstable();
                if last[i].as_ref().is_some_and(|(a, _)| *a == answers) {
                    continue;
                }
                let since = last[i]
                    .as_ref()
                    .filter(|(a, _)| a.is_empty())
                    .map(|(_, at)| {
                        format!(
                            " after {} ms without an answer",
                            ms(r.at.saturating_sub(*at))
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "[{:8.3}s] {vip}: {}{since}",
                    r.at.as_secs_f64(),
                    name(&answers)
                );
                last[i] = Some((answers, r.at));
            }
        }
        if let Some(why) = prober.stopped() {
            println!("{why}");
            return Ok(());
        }
    }
}
