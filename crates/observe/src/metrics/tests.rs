//! The rendered text parses as Prometheus text format 0.0.4 and carries the expected names.

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use vigil_l2_net::{DriverStats, VipCounters};

/// One family of the exposition: its type and samples (labels as written, value).
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: bool,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// Parses `{k="v",...}` (with `\\`, `\"` and `\n` escapes); returns the labels and the rest.
fn labels(s: &str) -> (BTreeMap<String, String>, &str) {
    let mut out = BTreeMap::new();
    let Some(mut rest) = s.strip_prefix('{') else {
        return (out, s);
    };
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (out, after);
        }
        let (key, after) = rest.split_once("=\"").expect("label key");
        assert!(is_name(key), "bad label name {key:?}");
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    c => panic!("bad escape \\{c}"),
                },
                (_, c) => value.push(c),
            }
        };
        assert!(
            out.insert(key.to_string(), value).is_none(),
            "label {key} twice"
        );
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// A strict reader of the text format: every line is a HELP, a TYPE or a sample of the family
/// declared last; no series twice.
fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    let mut series = BTreeSet::new();
    assert!(text.ends_with('\n'), "no final newline");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').expect("HELP text");
            assert!(is_name(name), "{line}");
            families.entry(name.to_string()).or_default().help = true;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE kind");
            assert!(
                ["counter", "gauge", "untyped", "histogram", "summary"].contains(&kind),
                "{line}"
            );
            let family = families.entry(name.to_string()).or_default();
            assert!(family.kind.is_empty(), "TYPE twice: {line}");
            assert!(family.help, "TYPE before HELP: {line}");
            family.kind = kind.to_string();
            current = name.to_string();
        } else {
            assert!(!line.starts_with('#'), "stray comment {line}");
            let split = line.find(['{', ' ']).expect("sample value");
            let (name, rest) = line.split_at(split);
            assert_eq!(name, current, "sample outside its family: {line}");
            let (labels, rest) = labels(rest);
            let value: f64 = rest
                .strip_prefix(' ')
                .expect("space")
                .parse()
                .expect("value");
            assert!(
                series.insert(format!("{name}{labels:?}")),
                "series twice: {line}"
            );
            families
                .get_mut(name)
                .unwrap()
                .samples
                .push((name.to_string(), labels, value));
        }
    }
    families
}

fn sample(families: &BTreeMap<String, Family>, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    families
        .get(name)?
        .samples
        .iter()
        .find_map(|(_, labels, v)| {
            want.iter()
                .all(|(k, val)| labels.get(*k).map(String::as_str) == Some(*val))
                .then_some(*v)
        })
}

fn everything() -> Scrape {
    let mut stats = vigil_gossip_net::NetStats::default();
    stats.engine.suspicions_raised = 4;
    stats.engine.label_mismatches = 2;
    stats.incarnation = 7;
    let mut gossip = GossipMetrics {
        stats: Some(stats),
        ..Default::default()
    };
    gossip.members = MemberCounts {
        alive: 3,
        suspect: 1,
        dead: 0,
        left: 2,
    };
    gossip.events.record(MemberEventKind::Join);
    gossip.events.record(MemberEventKind::Join);
    gossip.events.record(MemberEventKind::Refuted);

    let vip = "198.18.0.100".parse().unwrap();
    let gone = "198.18.0.9".parse().unwrap();
    let mut stats = DriverStats::default();
    let counters = VipCounters {
        requests_received: 3,
        responses_sent: 3,
        gratuitous_sent: 12,
    };
    stats.per_vip.insert(vip, counters);
    stats.per_vip.insert(gone, counters);
    stats.interfaces.insert("eth0".into());
    let l2 = L2Metrics {
        node: "node \"a\"".into(),
        announced: vec![("ns/web".into(), vip)],
        configured_vips: [vip].into(),
        stats,
    };
    let election = ElectionMetrics {
        evaluations: 5,
        vips_owned: 1,
        quorum: true,
        ..Default::default()
    };
    let speaker = SpeakerMetrics {
        health_checks: [("ns/web".to_string(), true)].into(),
        local_address: Some(LocalAddressMetrics {
            held: 2,
            add_failed: 1,
            ..Default::default()
        }),
        config_reloads_rejected: 1,
        ..Default::default()
    };
    let k8s = K8sClientMetrics {
        updates: 9,
        update_errors: 2,
        config_loaded: true,
        config_stale: true,
        keyed_state_checks: 3,
        keyed_state_differences: 0,
    };
    Scrape::new()
        .with(l2)
        .with(gossip)
        .with(election)
        .with(speaker)
        .with(k8s)
}

#[test]
fn the_text_parses_and_carries_every_name_once() {
    let text = everything().render();
    let f = parse(&text);
    let kinds: BTreeMap<&str, &str> = f
        .iter()
        .map(|(n, f)| (n.as_str(), f.kind.as_str()))
        .collect();
    for (name, kind) in [
        ("metallb_speaker_announced", "gauge"),
        ("metallb_layer2_requests_received", "counter"),
        ("metallb_layer2_responses_sent", "counter"),
        ("metallb_layer2_gratuitous_sent", "counter"),
        ("vigil_l2_frames_total", "counter"),
        ("vigil_l2_handovers_total", "counter"),
        ("vigil_l2_defended_total", "counter"),
        ("vigil_l2_send_errors_total", "counter"),
        ("vigil_l2_stale_questions_total", "counter"),
        ("vigil_l2_peer_requests_total", "counter"),
        ("vigil_l2_interfaces", "gauge"),
        ("vigil_gossip_members", "gauge"),
        ("vigil_gossip_member_events_total", "counter"),
        ("vigil_gossip_suspicions_total", "counter"),
        ("vigil_gossip_probes_total", "counter"),
        ("vigil_gossip_decrypt_failures_total", "counter"),
        ("vigil_gossip_label_mismatches_total", "counter"),
        ("vigil_gossip_health_score", "gauge"),
        ("vigil_gossip_incarnation", "gauge"),
        ("vigil_election_evaluations_total", "counter"),
        ("vigil_k8s_keyed_state_checks_total", "counter"),
        ("vigil_k8s_keyed_state_differences_total", "counter"),
        ("vigil_election_vips_owned", "gauge"),
        ("vigil_election_vips_taken_total", "counter"),
        ("vigil_election_vips_released_total", "counter"),
        ("vigil_election_quorum", "gauge"),
        ("vigil_election_holding", "gauge"),
        ("vigil_health_check_passing", "gauge"),
        ("vigil_local_address_held", "gauge"),
        ("vigil_local_address_changes_total", "counter"),
        ("vigil_config_reloads_total", "counter"),
        ("metallb_k8s_client_updates_total", "counter"),
        ("metallb_k8s_client_update_errors_total", "counter"),
        ("metallb_k8s_client_config_loaded_bool", "gauge"),
        ("metallb_k8s_client_config_stale_bool", "gauge"),
    ] {
        assert_eq!(kinds.get(name), Some(&kind), "{name} in:\n{text}");
    }
    // One name per metric: the agent's old spelling is gone.
    assert!(!text.contains("suspicions_raised"), "{text}");
    assert!(!text.contains("suspicions_refuted"), "{text}");
    // Every counter ends in _total except MetalLB's three without the suffix.
    for (name, family) in &f {
        if family.kind == "counter" {
            assert!(
                name.ends_with("_total") || COUNTERS_WITHOUT_TOTAL.contains(&name.as_str()),
                "{name}"
            );
        }
    }

    let announced = [
        ("ip", "198.18.0.100"),
        ("node", "node \"a\""),
        ("protocol", "layer2"),
        ("service", "ns/web"),
    ];
    assert_eq!(
        sample(&f, "metallb_speaker_announced", &announced),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &f,
            "metallb_layer2_gratuitous_sent",
            &[("ip", "198.18.0.100")]
        ),
        Some(12.0)
    );
    assert_eq!(sample(&f, "vigil_gossip_suspicions_total", &[]), Some(4.0));
    assert_eq!(
        sample(&f, "vigil_gossip_members", &[("state", "left")]),
        Some(2.0)
    );
    assert_eq!(
        sample(&f, "vigil_gossip_member_events_total", &[("event", "join")]),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &f,
            "vigil_gossip_member_events_total",
            &[("event", "alive")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&f, "vigil_gossip_member_events_total", &[("event", "dead")]),
        Some(0.0)
    );
    assert_eq!(sample(&f, "vigil_gossip_incarnation", &[]), Some(7.0));
    assert_eq!(sample(&f, "vigil_election_quorum", &[]), Some(1.0));
    assert_eq!(
        sample(
            &f,
            "vigil_local_address_changes_total",
            &[("op", "add"), ("result", "failed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&f, "vigil_config_reloads_total", &[("result", "rejected")]),
        Some(1.0)
    );
    // MetalLB's client metrics, with MetalLB's exact names.
    for (line, value) in [
        ("metallb_k8s_client_updates_total", 9.0),
        ("metallb_k8s_client_update_errors_total", 2.0),
        ("metallb_k8s_client_config_loaded_bool", 1.0),
        ("metallb_k8s_client_config_stale_bool", 1.0),
    ] {
        assert_eq!(sample(&f, line, &[]), Some(value), "{line}");
    }
    // The exact lines the speaker tests and dashboards grep for.
    assert!(
        text.contains("metallb_layer2_requests_received{ip=\"198.18.0.100\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("vigil_l2_handovers_total{result=\"claimed\"} 0\n"),
        "{text}"
    );
}

#[test]
fn a_vip_that_moved_away_or_was_removed_leaves_no_series() {
    let vip = "198.18.0.100".parse().unwrap();
    let mut l2 = L2Metrics {
        node: "a".into(),
        announced: vec![("web".into(), vip)],
        configured_vips: [vip].into(),
        stats: DriverStats::default(),
    };
    l2.stats
        .per_vip
        .insert("198.18.0.9".parse().unwrap(), VipCounters::default());
    let text = Scrape::new().with(l2.clone()).render();
    assert!(
        !text.contains("198.18.0.9"),
        "removed VIP still exported:\n{text}"
    );
    l2.announced.clear();
    let text = Scrape::new().with(l2).render();
    parse(&text);
    assert!(!text.contains("metallb_speaker_announced{"), "{text}");
    assert!(
        text.contains("# TYPE metallb_speaker_announced gauge"),
        "{text}"
    );
}

#[test]
fn without_the_driver_s_counters_the_member_view_is_still_exported() {
    let gossip = GossipMetrics {
        members: MemberCounts {
            alive: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    let text = Scrape::new().with(gossip).render();
    let f = parse(&text);
    assert_eq!(
        sample(&f, "vigil_gossip_members", &[("state", "alive")]),
        Some(2.0)
    );
    assert!(f.contains_key("vigil_gossip_member_events_total"), "{text}");
    assert!(!text.contains("vigil_gossip_probes"), "{text}");
}

#[test]
fn the_local_address_series_exist_only_when_the_device_is_configured() {
    let text = Scrape::new().with(SpeakerMetrics::default()).render();
    parse(&text);
    assert!(!text.contains("vigil_local_address"), "{text}");
}

#[test]
fn membership_events_are_classified_from_gossip_events() {
    let refuted = MemberEventKind::of(&vigil_gossip::Event::LeaveComplete);
    assert_eq!(refuted, None);
    let mut counts = MemberEventCounts::default();
    for e in MemberEventKind::ALL {
        counts.record(e);
    }
    assert!(MemberEventKind::ALL.iter().all(|e| counts.get(*e) == 1));
    // The speaker exports the core's own counts, not a second tally.
    let from_core: MemberEventCounts = [
        (MemberEventKind::Join, 2),
        (MemberEventKind::Dead, 1),
        (MemberEventKind::Join, 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(from_core.get(MemberEventKind::Join), 3);
    assert_eq!(from_core.get(MemberEventKind::Dead), 1);
    assert_eq!(from_core.get(MemberEventKind::Refuted), 0);
}
