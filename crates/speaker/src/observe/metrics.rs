//! `/metrics` in Prometheus text format: MetalLB's L2 names and labels where they exist
//! (`research/metallb-l2.md` section 5), then vigil's gossip and election metrics.
//!
//! `metallb_speaker_announced` has a series only for what is announced now, and the per-IP
//! counters only for configured VIPs, so a VIP that moved away or was removed leaves no stale
//! series (MetalLB #1972).

use super::state::Shared;
use std::fmt::Write as _;
use vigil_gossip_net::NetStats;
use vigil_l2_net::DriverStats;

/// Renders every metric.
pub fn render(shared: &Shared, l2: &DriverStats, gossip: Option<&NetStats>) -> String {
    let mut out = String::new();
    let node = escape(&shared.status.node);
    family(
        &mut out,
        "metallb_speaker_announced",
        "gauge",
        "Services being announced from this node. This is desired state, it does not guarantee that the routing protocols have converged.",
    );
    for (service, ip) in &shared.announced {
        let _ = writeln!(
            out,
            "metallb_speaker_announced{{ip=\"{ip}\",node=\"{node}\",protocol=\"layer2\",service=\"{}\"}} 1",
            escape(service)
        );
    }
    type Counter = fn(&vigil_l2_net::VipCounters) -> u64;
    let counters: [(&str, &str, Counter); 3] = [
        (
            "metallb_layer2_requests_received",
            "Number of layer2 requests received for owned IPs",
            |c| c.requests_received,
        ),
        (
            "metallb_layer2_responses_sent",
            "Number of layer2 responses sent for owned IPs",
            |c| c.responses_sent,
        ),
        (
            "metallb_layer2_gratuitous_sent",
            "Number of gratuitous layer2 packets sent for owned IPs",
            |c| c.gratuitous_sent,
        ),
    ];
    for (name, help, get) in counters {
        family(&mut out, name, "counter", help);
        for (ip, c) in &l2.per_vip {
            if shared.configured_vips.contains(ip) {
                let _ = writeln!(out, "{name}{{ip=\"{ip}\"}} {}", get(c));
            }
        }
    }

    let a = &l2.announcer;
    family(
        &mut out,
        "vigil_l2_frames_total",
        "counter",
        "Frames the announcer handled, by outcome.",
    );
    for (outcome, n) in [
        ("malformed", a.malformed),
        ("ignored", a.ignored),
        ("bad_hop_limit", a.ndisc_bad_hop_limit),
        ("not_owned", a.not_owned),
        ("wrong_interface", a.wrong_interface),
        ("conflict", a.conflicts),
        ("answered_arp", a.arp_requests_answered),
        ("answered_ns", a.neighbor_solicits_answered),
    ] {
        let _ = writeln!(out, "vigil_l2_frames_total{{outcome=\"{outcome}\"}} {n}");
    }
    family(
        &mut out,
        "vigil_l2_handovers_total",
        "counter",
        "VIPs handed to another node: silent once its claim was heard, or at the bound.",
    );
    for (result, n) in [("claimed", a.handed_over), ("expired", a.handover_expired)] {
        let _ = writeln!(out, "vigil_l2_handovers_total{{result=\"{result}\"}} {n}");
    }
    simple(
        &mut out,
        "vigil_l2_defended_total",
        "counter",
        "Claims of an owned VIP by another MAC answered with a fresh takeover series.",
        a.defended,
    );
    simple(
        &mut out,
        "vigil_l2_send_errors_total",
        "counter",
        "Frames the kernel refused to send.",
        l2.send_errors,
    );
    simple(
        &mut out,
        "vigil_l2_interfaces",
        "gauge",
        "Interfaces with a responder.",
        l2.interfaces.len() as u64,
    );

    family(
        &mut out,
        "vigil_gossip_members",
        "gauge",
        "Gossip members by state, this node included.",
    );
    for state in ["alive", "suspect", "dead", "left"] {
        let n = shared
            .status
            .members
            .iter()
            .filter(|m| m.state == state)
            .count();
        let _ = writeln!(out, "vigil_gossip_members{{state=\"{state}\"}} {n}");
    }
    family(
        &mut out,
        "vigil_gossip_member_events_total",
        "counter",
        "Membership events seen, by kind.",
    );
    for (kind, n) in &shared.member_events {
        let _ = writeln!(
            out,
            "vigil_gossip_member_events_total{{event=\"{kind}\"}} {n}"
        );
    }
    if let Some(g) = gossip {
        let e = &g.engine;
        for (name, help, kind, v) in [
            (
                "vigil_gossip_packets_received_total",
                "Gossip packets received.",
                "counter",
                e.packets_in,
            ),
            (
                "vigil_gossip_packets_sent_total",
                "Gossip packets sent.",
                "counter",
                e.packets_out,
            ),
            (
                "vigil_gossip_bytes_received_total",
                "Gossip bytes received.",
                "counter",
                e.bytes_in,
            ),
            (
                "vigil_gossip_bytes_sent_total",
                "Gossip bytes sent.",
                "counter",
                e.bytes_out,
            ),
            (
                "vigil_gossip_probes_total",
                "Probes started.",
                "counter",
                e.probes,
            ),
            (
                "vigil_gossip_probes_failed_total",
                "Probes that failed.",
                "counter",
                e.probes_failed,
            ),
            (
                "vigil_gossip_suspicions_total",
                "Suspicions raised by this node.",
                "counter",
                e.suspicions_raised,
            ),
            (
                "vigil_gossip_deaths_declared_total",
                "Members this node declared dead.",
                "counter",
                e.deaths_declared,
            ),
            (
                "vigil_gossip_absences_proven_total",
                "Members declared dead at once because a probe's TCP fallback ping was refused.",
                "counter",
                e.absences_proven,
            ),
            (
                "vigil_gossip_reannouncements_total",
                "Times this node announced its incarnation again after a stale accusation.",
                "counter",
                e.reannouncements,
            ),
            (
                "vigil_gossip_malformed_total",
                "Malformed gossip input dropped.",
                "counter",
                e.malformed,
            ),
            (
                "vigil_gossip_decrypt_failures_total",
                "Gossip input that failed to decrypt.",
                "counter",
                e.decrypt_failures,
            ),
            (
                "vigil_gossip_health_score",
                "Lifeguard local health score (0 is healthy).",
                "gauge",
                g.health_score as u64,
            ),
            (
                "vigil_gossip_keyring_reloads_total",
                "Keyring file reloads applied.",
                "counter",
                g.keyring_reloads,
            ),
            (
                "vigil_gossip_keyring_errors_total",
                "Keyring file contents rejected.",
                "counter",
                g.keyring_errors,
            ),
        ] {
            simple(&mut out, name, kind, help, v);
        }
    }

    simple(
        &mut out,
        "vigil_election_evaluations_total",
        "counter",
        "Times every VIP's owner was re-elected.",
        shared.evaluations,
    );
    simple(
        &mut out,
        "vigil_election_vips_owned",
        "gauge",
        "VIPs this node announces.",
        shared
            .status
            .vips
            .iter()
            .filter(|v| v.announced_here)
            .count() as u64,
    );
    simple(
        &mut out,
        "vigil_election_vips_taken_total",
        "counter",
        "VIPs this node took over.",
        shared.vips_taken,
    );
    simple(
        &mut out,
        "vigil_election_vips_released_total",
        "counter",
        "VIPs this node released.",
        shared.vips_released,
    );
    let q = shared.status.quorum;
    simple(
        &mut out,
        "vigil_election_quorum",
        "gauge",
        "1 while the split-brain guard sees a majority (always 1 when off).",
        u64::from(q.live >= q.needed),
    );
    simple(
        &mut out,
        "vigil_election_holding",
        "gauge",
        "1 while this node is in its fail-back hold-down.",
        u64::from(shared.status.holding),
    );
    family(
        &mut out,
        "vigil_health_check_passing",
        "gauge",
        "1 while this node's health check for the service passes.",
    );
    for (service, ok) in &shared.status.health {
        let _ = writeln!(
            out,
            "vigil_health_check_passing{{service=\"{}\"}} {}",
            escape(service),
            u64::from(*ok)
        );
    }
    if let Some(local) = &shared.local_address {
        simple(
            &mut out,
            "vigil_local_address_held",
            "gauge",
            "VIPs this node holds on announce.local_address.",
            local.held as u64,
        );
        family(
            &mut out,
            "vigil_local_address_changes_total",
            "counter",
            "Adds and removes of VIPs on announce.local_address, by result (already there or already gone counts as ok).",
        );
        let c = local.counters;
        for (op, result, n) in [
            ("add", "ok", c.added),
            ("add", "failed", c.add_failed),
            ("remove", "ok", c.removed),
            ("remove", "failed", c.remove_failed),
        ] {
            let _ = writeln!(
                out,
                "vigil_local_address_changes_total{{op=\"{op}\",result=\"{result}\"}} {n}"
            );
        }
    }
    family(
        &mut out,
        "vigil_config_reloads_total",
        "counter",
        "Configuration reloads, by result.",
    );
    let _ = writeln!(
        out,
        "vigil_config_reloads_total{{result=\"applied\"}} {}",
        shared.reloads_ok
    );
    let _ = writeln!(
        out,
        "vigil_config_reloads_total{{result=\"rejected\"}} {}",
        shared.reloads_rejected
    );
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn simple(out: &mut String, name: &str, kind: &str, help: &str, value: u64) {
    family(out, name, kind, help);
    let _ = writeln!(out, "{name} {value}");
}

/// Escapes a label value (backslash, quote, newline).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_l2_net::VipCounters;

    #[test]
    fn a_vip_that_moved_away_or_was_removed_leaves_no_series() {
        let mut shared = Shared::default();
        shared.status.node = "node-a".into();
        let vip = "198.18.0.100".parse().unwrap();
        let gone = "198.18.0.9".parse().unwrap();
        shared.announced = vec![("web".into(), vip)];
        shared.configured_vips = [vip].into();
        let mut l2 = DriverStats::default();
        let counters = VipCounters {
            requests_received: 3,
            responses_sent: 3,
            gratuitous_sent: 12,
        };
        l2.per_vip.insert(vip, counters);
        l2.per_vip.insert(gone, counters);
        let text = render(&shared, &l2, None);
        assert!(text.contains(
            "metallb_speaker_announced{ip=\"198.18.0.100\",node=\"node-a\",protocol=\"layer2\",service=\"web\"} 1"
        ));
        assert!(text.contains("metallb_layer2_requests_received{ip=\"198.18.0.100\"} 3"));
        assert!(text.contains("metallb_layer2_gratuitous_sent{ip=\"198.18.0.100\"} 12"));
        assert!(text.contains("vigil_l2_handovers_total{result=\"claimed\"} 0"));
        assert!(text.contains("vigil_l2_defended_total 0"));
        assert!(!text.contains("198.18.0.9"), "removed VIP still exported");
        assert!(!text.contains("vigil_local_address"), "exported while off");
        shared.local_address = Some(crate::observe::state::LocalAddressState {
            held: 2,
            counters: crate::local_address::AddressCounters {
                added: 2,
                add_failed: 1,
                ..Default::default()
            },
        });
        let text = render(&shared, &l2, None);
        assert!(text.contains("vigil_local_address_held 2"));
        assert!(text.contains("vigil_local_address_changes_total{op=\"add\",result=\"failed\"} 1"));
        // The VIP moves away: its announced series goes.
        shared.announced.clear();
        let text = render(&shared, &l2, None);
        assert!(!text.contains("metallb_speaker_announced{"));
        assert!(text.contains("# TYPE metallb_speaker_announced gauge"));
    }
}
