//! The configuration as a whole: good files, every bad field named, every error in one pass.

use super::*;
use std::net::IpAddr;
use std::time::Duration;
use vigil_gossip::Profile;

const GOOD: &str = r#"
node:
  name: host-a
  labels: {zone: a}
gossip:
  bind: 198.18.0.11:7946
  seeds: [198.18.0.12, "198.18.0.13:7946", "[2001:db8::13]:7946", host-c.example]
  label: prod
  rejoin_interval: 10s
interfaces:
  include: [eth0]
election:
  hold_down: 10s
  expected_members: 3
announce:
  refresh: 30s
http:
  listen: 127.0.0.1:9472
services:
  - name: web
    vips: [198.18.0.100, "2001:DB8::100"]
    health_check:
      http: http://127.0.0.1:8080/healthz
      interval: 500ms
      fall: 2
  - name: dns
    vips: ["::ffff:198.18.0.53"]
    nodes: [host-a, host-b]
    node_selector: {zone: a}
    interfaces: [eth0]
    health_check: {tcp: "127.0.0.1:53"}
  - name: db
    vips: [198.18.0.54]
    health_check: {command: [/bin/true]}
"#;

/// The first error of the text, the files it names checked too (as `load` does).
fn error(text: &str) -> ConfigError {
    match Config::parse(text, None).map(|c| c.check_files()) {
        Err(ParseError::Invalid(e)) => e[0].clone(),
        Ok(Err(e)) => e,
        other => panic!("expected a field error, got {other:?}"),
    }
}

fn with(find: &str, replace: &str) -> String {
    assert!(GOOD.contains(find), "{find}");
    GOOD.replacen(find, replace, 1)
}

#[test]
fn a_full_file_validates() {
    let c = Config::parse(GOOD, None).unwrap();
    assert_eq!(c.node.name, "host-a");
    assert_eq!(c.gossip.profile, Profile::Fast);
    assert_eq!(c.gossip.seeds.len(), 4);
    assert_eq!(c.election.hold_down, Some(Duration::from_secs(10)));
    assert_eq!(c.gossip.rejoin_interval, Duration::from_secs(10));
    assert_eq!(
        c.services[0].vips[1],
        "2001:db8::100".parse::<IpAddr>().unwrap()
    );
    // IPv4-mapped spellings become IPv4, as Go prints them.
    assert_eq!(
        c.services[1].vips[0],
        "198.18.0.53".parse::<IpAddr>().unwrap()
    );
    assert_eq!(
        c.services[0].health_check.as_ref().unwrap().probe,
        Probe::Http {
            authority: "127.0.0.1:8080".into(),
            path: "/healthz".into()
        }
    );
    assert_eq!(c.http_listen, Some("127.0.0.1:9472".parse().unwrap()));
}

#[test]
fn defaults_are_filled_in() {
    let c = Config::parse("gossip: {bind: 198.18.0.11}", Some("fallback")).unwrap();
    assert_eq!(c.node.name, "fallback");
    assert_eq!(c.gossip.bind, "198.18.0.11:7946".parse().unwrap());
    assert_eq!(c.gossip.profile, Profile::Fast);
    assert_eq!(c.gossip.rejoin_interval, DEFAULT_REJOIN_INTERVAL);
    assert_eq!(c.http_listen, Some(DEFAULT_HTTP_LISTEN.parse().unwrap()));
    assert!(c.services.is_empty());
}

#[test]
fn every_bad_field_is_named() {
    let cases: &[(&str, &str, &str)] = &[
        ("name: host-a", "name: \"host a\"", "node.name"),
        ("zone: a}", "\"bad key\": a}", "node.labels.bad key"),
        ("bind: 198.18.0.11:7946", "bind: nowhere", "gossip.bind"),
        (
            "bind: 198.18.0.11:7946",
            "bind: 0.0.0.0:7946",
            "gossip.advertise",
        ),
        ("host-c.example]", "\"host c\"]", "gossip.seeds[3]"),
        ("label: prod", "profile: turbo", "gossip.profile"),
        (
            "rejoin_interval: 10s",
            "rejoin_interval: 500ms",
            "gossip.rejoin_interval",
        ),
        (
            "rejoin_interval: 10s",
            "rejoin_interval: often",
            "gossip.rejoin_interval",
        ),
        (
            "rejoin_interval: 10s",
            "rejoin_interval: 0s",
            "gossip.rejoin_interval",
        ),
        (
            "label: prod",
            "keyring_file: /nonexistent/keyring.json",
            "gossip.keyring_file",
        ),
        (
            "include: [eth0]",
            "include: [eth0, eth0]",
            "interfaces.include[1]",
        ),
        ("hold_down: 10s", "hold_down: soon", "election.hold_down"),
        ("hold_down: 10s", "hold_down: 0s", "election.hold_down"),
        (
            "expected_members: 3",
            "expected_members: 0",
            "election.expected_members",
        ),
        ("refresh: 30s", "refresh: 3 weeks", "announce.refresh"),
        (
            "refresh: 30s",
            "refresh: 30s\n  local_address: \"\"",
            "announce.local_address",
        ),
        (
            "refresh: 30s",
            "local_address: averyveryverylongname",
            "announce.local_address",
        ),
        (
            "refresh: 30s",
            "local_address: \"lo:1\"",
            "announce.local_address",
        ),
        (
            "refresh: 30s",
            "local_address: \"..\"",
            "announce.local_address",
        ),
        (
            "refresh: 30s",
            "local_address: eth0",
            "announce.local_address",
        ),
        (
            "refresh: 30s",
            "local_address: lo\n  arp_sysctls: leave",
            "announce.arp_sysctls",
        ),
        ("refresh: 30s", "arp_sysctls: check", "announce.arp_sysctls"),
        ("listen: 127.0.0.1:9472", "listen: localhost", "http.listen"),
        ("- name: web", "- name: \"\"", "services[0].name"),
        ("- name: dns", "- name: web", "services[1].name"),
        ("vips: [198.18.0.54]", "vips: []", "services[2].vips"),
        ("\"2001:DB8::100\"]", "198.18.0.300]", "services[0].vips[1]"),
        ("\"2001:DB8::100\"]", "198.18.0.100]", "services[0].vips[1]"),
        ("\"2001:DB8::100\"]", "224.0.0.1]", "services[0].vips[1]"),
        (
            "\"2001:DB8::100\"]",
            "255.255.255.255]",
            "services[0].vips[1]",
        ),
        ("nodes: [host-a, host-b]", "nodes: []", "services[1].nodes"),
        (
            "interfaces: [eth0]\n    health",
            "interfaces: []\n    health",
            "services[1].interfaces",
        ),
        (
            "{tcp: \"127.0.0.1:53\"}",
            "{tcp: \"127.0.0.1\"}",
            "services[1].health_check.tcp",
        ),
        (
            "{tcp: \"127.0.0.1:53\"}",
            "{tcp: \"127.0.0.1:53\", command: [x]}",
            "services[1].health_check",
        ),
        (
            "{tcp: \"127.0.0.1:53\"}",
            "{interval: 1s}",
            "services[1].health_check",
        ),
        (
            "{command: [/bin/true]}",
            "{command: []}",
            "services[2].health_check.command",
        ),
        (
            "http: http://127.0.0.1:8080/healthz",
            "http: https://127.0.0.1/",
            "services[0].health_check.http",
        ),
        (
            "interval: 500ms",
            "interval: 0ms",
            "services[0].health_check.interval",
        ),
        (
            "interval: 500ms",
            "timeout: 2s",
            "services[0].health_check.timeout",
        ),
        ("fall: 2", "fall: 0", "services[0].health_check.fall"),
        ("fall: 2", "rise: 0", "services[0].health_check.rise"),
    ];
    for (find, replace, field) in cases {
        let e = error(&with(find, replace));
        assert_eq!(e.field, *field, "{replace:?} gave {e}");
        assert!(!e.message.is_empty());
    }
}

#[test]
fn every_error_in_the_file_is_reported_in_one_pass() {
    let text = GOOD
        .replacen("name: host-a", "name: \"host a\"", 1)
        .replacen("label: prod", "profile: turbo", 1)
        .replacen("hold_down: 10s", "hold_down: soon", 1)
        .replacen("listen: 127.0.0.1:9472", "listen: localhost", 1)
        .replacen("\"2001:DB8::100\"]", "198.18.0.300]", 1)
        .replacen("fall: 2", "fall: 0", 1)
        .replacen("- name: dns", "- name: web", 1);
    let errors = match Config::parse(&text, None) {
        Err(ParseError::Invalid(errors)) => errors,
        other => panic!("expected field errors, got {other:?}"),
    };
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "node.name",
            "gossip.profile",
            "election.hold_down",
            "http.listen",
            "services[0].vips[1]",
            "services[1].name",
        ],
        "{errors:?}"
    );
    // services[0] stops at its first bad field; the health check's fall is in it.
    let text = GOOD.replacen("fall: 2", "fall: 0", 1);
    assert!(matches!(Config::parse(&text, None), Err(ParseError::Invalid(e)) if e.len() == 1));
    // The printed form has one line per error.
    let shown = Config::parse(
        &GOOD
            .replacen("hold_down: 10s", "hold_down: soon", 1)
            .replacen("listen: 127.0.0.1:9472", "listen: localhost", 1),
        None,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(shown.lines().count(), 2, "{shown}");
}

#[test]
fn validation_reads_no_file() {
    let text = GOOD.replacen("label: prod", "keyring_file: /nonexistent/keyring.json", 1);
    let c = Config::parse(&text, None).expect("parse reads nothing");
    assert_eq!(c.check_files().unwrap_err().field, "gossip.keyring_file");
}

#[test]
fn local_address_is_off_unless_set() {
    let c = Config::parse(GOOD, None).unwrap();
    assert_eq!(c.local_address, None);
    let c = Config::parse(&with("refresh: 30s", "local_address: lo"), None).unwrap();
    assert_eq!(
        c.local_address,
        Some(LocalAddressConfig {
            device: "lo".into(),
            arp_sysctls: ArpSysctlsMode::Set,
        })
    );
    let text = with("refresh: 30s", "local_address: vip0\n  arp_sysctls: check");
    let c = Config::parse(&text, None).unwrap();
    assert_eq!(c.local_address.unwrap().arp_sysctls, ArpSysctlsMode::Check);
    // A dotted VLAN name is a device name too.
    let text = with("refresh: 30s", "local_address: dummy0.5");
    assert!(Config::parse(&text, None).is_ok());
}

#[test]
fn missing_sections_and_fields_are_named() {
    assert_eq!(error("node: {name: a}").field, "gossip");
    assert_eq!(
        error("node: {name: a}\ngossip: {seeds: []}").field,
        "gossip.bind"
    );
    assert_eq!(error("gossip: {bind: 198.18.0.1}").field, "node.name");
    let e = error("node: {name: a}\ngossip: {bind: 198.18.0.1}\nservices: [{vips: [198.18.0.9]}]");
    assert_eq!(e.field, "services[0].name");
}

#[test]
fn unknown_fields_and_wrong_types_are_parse_errors_naming_the_field() {
    for (text, needle) in [
        ("gossip: {bind: 198.18.0.1, bnid: x}", "bnid"),
        (
            "gossip: {bind: 198.18.0.1}\nservices: [{name: a, vip: [198.18.0.9]}]",
            "vip",
        ),
        (
            "gossip: {bind: 198.18.0.1}\nelection: {expected_members: many}",
            "expected_members",
        ),
        ("gossip: [", "line"),
    ] {
        match Config::parse(text, Some("n")) {
            Err(ParseError::Yaml(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn the_example_in_deploy_validates() {
    let example = include_str!("../../../../deploy/standalone.example.yaml");
    let dir = std::env::temp_dir().join(format!("vigil-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keyring = dir.join("keyring.json");
    std::fs::write(
        &keyring,
        "[\"T9jncgl9mbLus+baTTa7q7nPSUrXwbDi2dhbtqir37s=\"]",
    )
    .unwrap();
    let text = example.replace("/etc/vigil/keyring.json", &keyring.display().to_string());
    let parsed = Config::parse(&text, None);
    let _ = std::fs::remove_dir_all(&dir);
    let c = parsed.unwrap();
    assert_eq!(c.services.len(), 3);
    assert_eq!(c.election.expected_members, Some(3));
}

#[test]
fn gossip_metadata_must_fit() {
    let labels: String = (0..60).map(|i| format!("label{i}: value{i}, ")).collect();
    let text = format!("node: {{name: a, labels: {{{labels}}}}}\ngossip: {{bind: 198.18.0.1}}");
    assert_eq!(error(&text).field, "node.labels");
}

#[test]
fn an_empty_set_says_what_it_would_leave() {
    let e = error(&with("nodes: [host-a, host-b]", "nodes: []"));
    assert_eq!(
        e.message,
        "is empty: no node could answer (remove it to allow every node)"
    );
    let e = error(&with(
        "interfaces: [eth0]\n    health",
        "interfaces: []\n    health",
    ));
    assert_eq!(
        e.message,
        "is empty: the VIP could be announced nowhere (remove it for all)"
    );
    // A repeated name is still named by its index, before the set is looked at.
    let e = error(&with("nodes: [host-a, host-b]", "nodes: [host-a, host-a]"));
    assert_eq!(e.field, "services[1].nodes[1]");
}
