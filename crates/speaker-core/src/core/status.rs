//! The status document (`/status`, `vigil status`) and the counters behind `/metrics`, as the
//! core knows them. The JSON shape is a contract with `vigil status` and the tests.

use super::election::VipStatus;
use super::member::{Member, MemberEventKind};
use super::timeline::StatusChange;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The status document served at `/status` (what `vigil status` prints).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// This node's name.
    pub node: String,
    /// Every member known, this node included, by name.
    pub members: Vec<StatusMember>,
    /// Every desired VIP with its owner (empty until the first join is over).
    pub vips: Vec<StatusVip>,
    /// Live members seen and needed by the split-brain guard (0 needed: guard off).
    pub quorum: StatusQuorum,
    /// Whether this node is in its fail-back hold-down.
    pub holding: bool,
    /// Each health-checked service: whether its check passes on this node.
    pub health: BTreeMap<String, bool>,
    /// The last ownership change of each VIP this node has elected (filled by the runner,
    /// which knows the time: [`SpeakerCore::ownership_changes`](super::SpeakerCore::ownership_changes)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<StatusChange>,
}

/// A member in [`Status`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMember {
    /// Its gossip name.
    pub name: String,
    /// Its gossip address, `ip:port`.
    pub addr: String,
    /// `alive`, `suspect`, `dead` or `left` (see [`MemberState`](super::MemberState)).
    pub state: String,
    /// The labels it publishes for node selectors.
    pub labels: BTreeMap<String, String>,
    /// Services whose health check fails on it.
    pub failing: BTreeSet<String>,
    /// Whether it is in its fail-back hold-down.
    pub holding: bool,
}

impl From<&Member> for StatusMember {
    fn from(m: &Member) -> Self {
        Self {
            name: m.name.clone(),
            addr: m.addr.to_string(),
            state: m.state.to_string(),
            labels: m.meta.labels.clone(),
            failing: m.meta.failing.clone(),
            holding: m.meta.holding,
        }
    }
}

/// A VIP in [`Status`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusVip {
    /// The VIP.
    pub vip: String,
    /// The services that use it.
    pub services: Vec<String>,
    /// The elected owner, if any node may answer.
    pub owner: Option<String>,
    /// Whether this node announces it.
    pub announced_here: bool,
    /// The candidates, best first.
    pub candidates: Vec<String>,
}

impl From<&VipStatus> for StatusVip {
    fn from(v: &VipStatus) -> Self {
        Self {
            vip: v.vip.to_string(),
            services: v.services.clone(),
            owner: v.owner.clone(),
            announced_here: v.announced_here,
            candidates: v.candidates.clone(),
        }
    }
}

/// The split-brain guard's numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusQuorum {
    /// Live members seen, this node included.
    pub live: usize,
    /// Live members needed (0: guard off).
    pub needed: usize,
}

/// What the core counted since start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Election runs (every input that may change the result counts one).
    pub evaluations: u64,
    /// VIPs this node started announcing.
    pub vips_taken: u64,
    /// VIPs this node stopped announcing.
    pub vips_released: u64,
    /// Membership events seen, by kind.
    pub member_events: BTreeMap<MemberEventKind, u64>,
}

impl Status {
    /// The status as two tables for people (`vigil status`): members, then VIPs.
    pub fn render(&self) -> String {
        let s = self;
        let mut out = String::new();
        let guard = if s.quorum.needed == 0 {
            "split-brain guard off".to_string()
        } else if s.quorum.live >= s.quorum.needed {
            format!(
                "quorum ok ({} live, {} needed)",
                s.quorum.live, s.quorum.needed
            )
        } else {
            format!(
                "NO QUORUM ({} live, {} needed): announcing nothing",
                s.quorum.live, s.quorum.needed
            )
        };
        let hold = if s.holding {
            ", in fail-back hold-down"
        } else {
            ""
        };
        out.push_str(&format!("node {}: {guard}{hold}\n\n", s.node));
        let dash = |v: String| if v.is_empty() { "-".to_string() } else { v };
        let mut rows = vec![[
            "MEMBER".to_string(),
            "ADDRESS".into(),
            "STATE".into(),
            "LABELS".into(),
            "FAILING".into(),
        ]];
        for m in &s.members {
            let mut state = m.state.clone();
            if m.holding {
                state.push_str(" (holding)");
            }
            let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let failing: Vec<&str> = m.failing.iter().map(String::as_str).collect();
            rows.push([
                m.name.clone(),
                m.addr.clone(),
                state,
                dash(labels.join(",")),
                dash(failing.join(",")),
            ]);
        }
        table(&mut out, &rows);
        out.push('\n');
        let mut rows = vec![[
            "VIP".to_string(),
            "SERVICES".into(),
            "OWNER".into(),
            "HERE".into(),
            "CANDIDATES".into(),
        ]];
        for v in &s.vips {
            rows.push([
                v.vip.clone(),
                v.services.join(","),
                v.owner.clone().unwrap_or_else(|| "(none)".into()),
                if v.announced_here { "yes" } else { "no" }.into(),
                dash(v.candidates.join(",")),
            ]);
        }
        table(&mut out, &rows);
        out
    }
}

fn table<const N: usize>(out: &mut String, rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_prints_members_and_owners_in_columns() {
        let status = Status {
            node: "host-a".into(),
            members: vec![
                StatusMember {
                    name: "host-a".into(),
                    addr: "198.18.0.11:7946".into(),
                    state: "alive".into(),
                    labels: [("rack".to_string(), "r1".to_string())].into(),
                    ..StatusMember::default()
                },
                StatusMember {
                    name: "host-b".into(),
                    addr: "198.18.0.12:7946".into(),
                    state: "suspect".into(),
                    failing: ["web".to_string()].into(),
                    holding: true,
                    ..StatusMember::default()
                },
            ],
            vips: vec![StatusVip {
                vip: "198.18.0.100".into(),
                services: vec!["web".into()],
                owner: Some("host-a".into()),
                announced_here: true,
                candidates: vec!["host-a".into()],
            }],
            quorum: StatusQuorum { live: 2, needed: 2 },
            ..Status::default()
        };
        let text = status.render();
        assert!(
            text.starts_with("node host-a: quorum ok (2 live, 2 needed)\n"),
            "{text}"
        );
        assert!(
            text.contains("host-a  198.18.0.11:7946  alive              rack=r1  -\n"),
            "{text}"
        );
        assert!(
            text.contains("host-b  198.18.0.12:7946  suspect (holding)  -        web\n"),
            "{text}"
        );
        assert!(
            text.contains("198.18.0.100  web       host-a  yes   host-a\n"),
            "{text}"
        );
    }
}
