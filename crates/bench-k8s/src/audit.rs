//! API cost from kube-apiserver's own audit log: one event per request, logged when the
//! request is received (every later stage is omitted, so a watch counts once, when it is
//! opened), with the caller's source IP, user and verb. Each speaker runs on a host of its own,
//! so its source IP says which node asked; the controllers are told apart by user.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The audit policy: metadata of every request, once, at RequestReceived.
pub(crate) const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
  - level: Metadata
";

/// kube-apiserver flags that turn the log on.
pub(crate) fn apiserver_args(policy: &Path, log: &Path) -> Vec<String> {
    vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".to_string(),
        "--audit-log-maxbackup=0".to_string(),
        // Never rotate: a scale run writes hundreds of MB, and the bench reads one file.
        "--audit-log-maxsize=0".to_string(),
    ]
}

/// One request as the log has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// When it was received.
    pub(crate) at: SystemTime,
    /// The first source IP.
    pub(crate) source: Option<IpAddr>,
    /// The authenticated user.
    pub(crate) user: String,
    /// get, list, watch, create, update, patch, delete, ...
    pub(crate) verb: String,
    /// What it was about: `objectRef`'s resource and subresource (`services/status`).
    pub(crate) resource: String,
}

/// Parses one JSON line of the log; `None` for anything else.
pub(crate) fn parse_line(line: &str) -> Option<Request> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let at = v.get("requestReceivedTimestamp")?.as_str()?;
    Some(Request {
        at: humantime::parse_rfc3339(at).ok()?,
        source: v
            .get("sourceIPs")
            .and_then(|s| s.get(0))
            .and_then(serde_json::Value::as_str)
            .and_then(|s| s.parse().ok()),
        user: v
            .pointer("/user/username")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        verb: v
            .get("verb")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        resource: resource_of(&v),
    })
}

/// `resource` or `resource/subresource` of an event's `objectRef` (empty without one).
fn resource_of(event: &serde_json::Value) -> String {
    let field = |k: &str| {
        event
            .pointer(&format!("/objectRef/{k}"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
    };
    match (field("resource"), field("subresource")) {
        (r, "") => r.to_string(),
        (r, sub) => format!("{r}/{sub}"),
    }
}

/// Every request in the log at `path` (unreadable lines are skipped and counted).
pub(crate) fn read(path: &Path) -> (Vec<Request>, usize) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut bad = 0;
    let mut all = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_line(line) {
            Some(r) => all.push(r),
            None => bad += 1,
        }
    }
    (all, bad)
}

/// Whether a verb changes something.
pub(crate) fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// What the speakers and the controller asked in one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Cost {
    /// Requests per second per speaker node (mean over the nodes).
    pub(crate) per_node: f64,
    /// Of which writes.
    pub(crate) writes_per_node: f64,
    /// The busiest node's requests per second.
    pub(crate) max_node: f64,
    /// The controller's requests per second.
    pub(crate) controller: f64,
    /// Requests per verb, all speakers together, over the window.
    pub(crate) speaker_verbs: BTreeMap<String, u64>,
}

/// The cost of `[from, to)`: speakers by source address among `nodes`, the controller by
/// `controller_user`.
pub(crate) fn cost(
    requests: &[Request],
    from: SystemTime,
    to: SystemTime,
    nodes: &[IpAddr],
    controller_user: &str,
) -> Cost {
    let secs = to
        .duration_since(from)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64();
    if secs <= 0.0 || nodes.is_empty() {
        return Cost::default();
    }
    let mut per: BTreeMap<IpAddr, (u64, u64)> = nodes.iter().map(|n| (*n, (0, 0))).collect();
    let mut controller = 0u64;
    let mut verbs = BTreeMap::new();
    for r in requests.iter().filter(|r| r.at >= from && r.at < to) {
        if let Some(slot) = r.source.and_then(|s| per.get_mut(&s)) {
            slot.0 += 1;
            if is_write(&r.verb) {
                slot.1 += 1;
            }
            *verbs.entry(r.verb.clone()).or_insert(0) += 1;
        } else if r.user == controller_user {
            controller += 1;
        }
    }
    let n = nodes.len() as f64;
    let total: u64 = per.values().map(|p| p.0).sum();
    let writes: u64 = per.values().map(|p| p.1).sum();
    let max = per.values().map(|p| p.0).max().unwrap_or(0);
    Cost {
        per_node: total as f64 / n / secs,
        writes_per_node: writes as f64 / n / secs,
        max_node: max as f64 / secs,
        controller: controller as f64 / secs,
        speaker_verbs: verbs,
    }
}

/// The requests `user` made in `[from, to)`, counted by verb and resource
/// (`update services/status`).
pub(crate) fn verbs_of(
    requests: &[Request],
    from: SystemTime,
    to: SystemTime,
    user: &str,
) -> BTreeMap<String, u64> {
    let mut verbs = BTreeMap::new();
    for r in requests
        .iter()
        .filter(|r| r.at >= from && r.at < to && r.user == user)
    {
        let key = format!("{} {}", r.verb, r.resource);
        *verbs.entry(key.trim_end().to_string()).or_insert(0) += 1;
    }
    verbs
}

/// All requests and the writes among them, of a [`verbs_of`] count.
pub(crate) fn totals(verbs: &BTreeMap<String, u64>) -> (u64, u64) {
    let all = verbs.values().sum();
    let writes = verbs
        .iter()
        .filter(|(key, _)| is_write(key.split(' ').next().unwrap_or_default()))
        .map(|(_, n)| n)
        .sum();
    (all, writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"x","stage":"RequestReceived","requestURI":"/api/v1/services?watch=true","verb":"watch","objectRef":{"resource":"services","apiVersion":"v1"},"user":{"username":"system:serviceaccount:metallb-system:speaker","groups":["system:serviceaccounts"]},"sourceIPs":["198.18.0.11"],"userAgent":"speaker/v0.0.0","requestReceivedTimestamp":"2026-12-02T01:00:00.250000Z","stageTimestamp":"2026-12-02T01:00:00.250000Z"}"#;

    #[test]
    fn parses_an_audit_event() {
        let r = parse_line(LINE).expect("an event");
        assert_eq!(r.verb, "watch");
        assert_eq!(r.resource, "services");
        assert_eq!(r.source, Some("198.18.0.11".parse().expect("ip")));
        assert_eq!(r.user, "system:serviceaccount:metallb-system:speaker");
        assert_eq!(
            r.at,
            humantime::parse_rfc3339("2026-12-02T01:00:00.25Z").expect("time")
        );
        assert_eq!(parse_line("not json"), None);
        assert_eq!(parse_line("{}"), None);
    }

    #[test]
    fn counts_per_node_and_controller_in_the_window() {
        let t0 = humantime::parse_rfc3339("2026-12-02T01:00:00Z").expect("time");
        let a: IpAddr = "198.18.0.11".parse().expect("ip");
        let b: IpAddr = "198.18.0.12".parse().expect("ip");
        let req = |s: u64, source: IpAddr, user: &str, verb: &str| Request {
            at: t0 + Duration::from_secs(s),
            source: Some(source),
            user: user.to_string(),
            verb: verb.to_string(),
            resource: "leases".to_string(),
        };
        let cp: IpAddr = "198.18.0.2".parse().expect("ip");
        let log = vec![
            req(0, a, "sa", "get"),
            req(1, a, "sa", "create"),
            req(2, b, "sa", "watch"),
            req(3, cp, "ctl", "update"),
            req(4, cp, "admin", "list"),
            req(10, a, "sa", "get"),
        ];
        let c = cost(&log, t0, t0 + Duration::from_secs(5), &[a, b], "ctl");
        assert!((c.per_node - 0.3).abs() < 1e-9, "{c:?}");
        assert!((c.writes_per_node - 0.1).abs() < 1e-9);
        assert!((c.max_node - 0.4).abs() < 1e-9);
        assert!((c.controller - 0.2).abs() < 1e-9);
        assert_eq!(c.speaker_verbs.get("watch"), Some(&1));
        let ctl = verbs_of(&log, t0, t0 + Duration::from_secs(5), "ctl");
        assert_eq!(ctl.get("update leases"), Some(&1));
        assert_eq!(totals(&ctl), (1, 1));
        let all = verbs_of(&log, t0, t0 + Duration::from_secs(20), "sa");
        assert_eq!(totals(&all), (4, 1));
    }
}
