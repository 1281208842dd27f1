//! MetalLB v0.16's memberlist tuning file, `/etc/metallb/memberlist/config.json` (optional
//! ConfigMap `metallb-memberlist-config`; PR #2956; `internal/speakerlist/speakerlist.go:
//! tryToLoadMemberListConfig`).
//!
//! When the file exists the speaker starts from memberlist's LAN defaults (the WAN flag is then
//! ignored) and overwrites 19 settings from it. Go's JSON rules apply: keys match
//! case-insensitively, unknown keys are ignored, a missing or `null` number or bool is 0 or
//! false (MetalLB's comment says every field is required; only durations are enforced), and
//! a missing, `null` or malformed duration is an error (`time.ParseDuration("")` fails).
//!
//! vigil is stricter where Go would run with a broken value: a negative duration or count, or
//! a value vigil's engine refuses (a zero probe interval, a probe timeout above the interval,
//! a zero multiplier, a UDP buffer outside 200-65000 bytes), is an error naming the file's
//! field.
//!
//! Honoured ([`HONOURED`]): every field that sets memberlist's failure detection and
//! dissemination. Read but without effect ([`NOT_USED`]): `GossipVerifyIncoming` and
//! `GossipVerifyOutgoing` (vigil encrypts whenever it has a key and drops what it cannot
//! decrypt), `EnableCompression` (vigil compresses whenever that makes a message smaller, Go's
//! default, and reads compressed messages either way),
//! `HandoffQueueDepth` and `QueueCheckInterval` (Go's queue, which vigil's engine does not
//! have).

use crate::go_duration;
use serde_json::Value;
use std::time::Duration;

/// The path MetalLB's speaker reads.
pub const MEMBERLIST_CONFIG_PATH: &str = "/etc/metallb/memberlist/config.json";

/// The file's fields that set vigil's gossip, with the engine setting each one sets.
pub const HONOURED: [(&str, &str); 14] = [
    ("TCPTimeout", "tcp_timeout"),
    ("IndirectChecks", "indirect_checks"),
    ("RetransmitMult", "retransmit_mult"),
    ("SuspicionMult", "suspicion_mult"),
    ("SuspicionMaxTimeoutMult", "suspicion_max_timeout_mult"),
    ("PushPullInterval", "push_pull_interval"),
    ("ProbeTimeout", "probe_timeout"),
    ("ProbeInterval", "probe_interval"),
    ("DisableTcpPings", "disable_tcp_pings"),
    ("AwarenessMaxMultiplier", "awareness_max_multiplier"),
    ("GossipNodes", "gossip_nodes"),
    ("GossipInterval", "gossip_interval"),
    ("GossipToTheDeadTime", "gossip_to_the_dead_time"),
    ("UDPBufferSize", "udp_buffer_size"),
];

/// The file's fields that are read (and type-checked) but change nothing in vigil.
pub const NOT_USED: [&str; 5] = [
    "GossipVerifyIncoming",
    "GossipVerifyOutgoing",
    "EnableCompression",
    "HandoffQueueDepth",
    "QueueCheckInterval",
];

/// The file's settings, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberlistTuning {
    /// `TCPTimeout`.
    pub tcp_timeout: Duration,
    /// `IndirectChecks`.
    pub indirect_checks: usize,
    /// `RetransmitMult`.
    pub retransmit_mult: usize,
    /// `SuspicionMult`.
    pub suspicion_mult: usize,
    /// `SuspicionMaxTimeoutMult`.
    pub suspicion_max_timeout_mult: usize,
    /// `PushPullInterval`.
    pub push_pull_interval: Duration,
    /// `ProbeTimeout`.
    pub probe_timeout: Duration,
    /// `ProbeInterval`.
    pub probe_interval: Duration,
    /// `DisableTcpPings`.
    pub disable_tcp_pings: bool,
    /// `AwarenessMaxMultiplier`.
    pub awareness_max_multiplier: usize,
    /// `GossipNodes`.
    pub gossip_nodes: usize,
    /// `GossipInterval`.
    pub gossip_interval: Duration,
    /// `GossipToTheDeadTime`.
    pub gossip_to_the_dead_time: Duration,
    /// `GossipVerifyIncoming` (vigil always verifies what it can decrypt).
    pub gossip_verify_incoming: bool,
    /// `GossipVerifyOutgoing` (vigil always encrypts when it has a key).
    pub gossip_verify_outgoing: bool,
    /// `EnableCompression`.
    pub enable_compression: bool,
    /// `HandoffQueueDepth` (no equivalent in vigil's engine).
    pub handoff_queue_depth: usize,
    /// `UDPBufferSize`.
    pub udp_buffer_size: usize,
    /// `QueueCheckInterval` (no equivalent in vigil's engine).
    pub queue_check_interval: Duration,
}

/// Why the file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberlistFileError {
    /// Not a JSON object.
    #[error("parsing memberlist config file: {0}")]
    Json(String),
    /// A field of the wrong type.
    #[error("parsing memberlist config file: field {field}: expected {expected}, found {found}")]
    Type {
        /// The field (MetalLB's key).
        field: &'static str,
        /// The type wanted.
        expected: &'static str,
        /// What the file has.
        found: String,
    },
    /// A duration that does not parse (MetalLB: fatal at startup).
    #[error("parsing {field} {value:?} in memberlist config file: {why}")]
    Duration {
        /// The field.
        field: &'static str,
        /// The text.
        value: String,
        /// Go's message.
        why: String,
    },
    /// vigil: a value below zero.
    #[error("memberlist config file: field {field} must not be negative (got {value})")]
    Negative {
        /// The field.
        field: &'static str,
        /// The value as written.
        value: String,
    },
    /// vigil: a value the gossip engine cannot run with.
    #[error("memberlist config file: field {field}: {problem}")]
    Unusable {
        /// The field (MetalLB's key).
        field: &'static str,
        /// What is wrong, in the engine's words.
        problem: String,
    },
}

fn lookup<'a>(obj: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .rev()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

fn found(v: &Value) -> String {
    match v {
        Value::String(_) => "a string".into(),
        Value::Number(n) => format!("number {n}"),
        Value::Bool(_) => "a bool".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        Value::Null => "null".into(),
    }
}

impl MemberlistTuning {
    /// Parses the file's contents.
    pub fn parse(text: &str) -> Result<Self, MemberlistFileError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| MemberlistFileError::Json(e.to_string()))?;
        let Value::Object(obj) = value else {
            return Err(MemberlistFileError::Json(format!(
                "expected an object, found {}",
                found(&value)
            )));
        };
        let int = |field: &'static str| -> Result<usize, MemberlistFileError> {
            match lookup(&obj, field) {
                None | Some(Value::Null) => Ok(0),
                Some(Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
                    (Some(u), _) => usize::try_from(u).map_err(|_| MemberlistFileError::Type {
                        field,
                        expected: "an int",
                        found: format!("number {n}"),
                    }),
                    (None, Some(_)) => Err(MemberlistFileError::Negative {
                        field,
                        value: n.to_string(),
                    }),
                    _ => Err(MemberlistFileError::Type {
                        field,
                        expected: "an int",
                        found: format!("number {n}"),
                    }),
                },
                Some(other) => Err(MemberlistFileError::Type {
                    field,
                    expected: "an int",
                    found: found(other),
                }),
            }
        };
        let boolean = |field: &'static str| -> Result<bool, MemberlistFileError> {
            match lookup(&obj, field) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(other) => Err(MemberlistFileError::Type {
                    field,
                    expected: "a bool",
                    found: found(other),
                }),
            }
        };
        let duration = |field: &'static str| -> Result<Duration, MemberlistFileError> {
            let text = match lookup(&obj, field) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(MemberlistFileError::Type {
                        field,
                        expected: "a duration string",
                        found: found(other),
                    });
                }
            };
            let ns = go_duration::parse(&text).map_err(|why| MemberlistFileError::Duration {
                field,
                value: text.clone(),
                why,
            })?;
            let ns = u64::try_from(ns).map_err(|_| MemberlistFileError::Negative {
                field,
                value: text.clone(),
            })?;
            Ok(Duration::from_nanos(ns))
        };
        Ok(Self {
            indirect_checks: int("IndirectChecks")?,
            retransmit_mult: int("RetransmitMult")?,
            suspicion_mult: int("SuspicionMult")?,
            suspicion_max_timeout_mult: int("SuspicionMaxTimeoutMult")?,
            gossip_nodes: int("GossipNodes")?,
            awareness_max_multiplier: int("AwarenessMaxMultiplier")?,
            handoff_queue_depth: int("HandoffQueueDepth")?,
            udp_buffer_size: int("UDPBufferSize")?,
            disable_tcp_pings: boolean("DisableTcpPings")?,
            gossip_verify_incoming: boolean("GossipVerifyIncoming")?,
            gossip_verify_outgoing: boolean("GossipVerifyOutgoing")?,
            enable_compression: boolean("EnableCompression")?,
            tcp_timeout: duration("TCPTimeout")?,
            push_pull_interval: duration("PushPullInterval")?,
            probe_timeout: duration("ProbeTimeout")?,
            probe_interval: duration("ProbeInterval")?,
            gossip_interval: duration("GossipInterval")?,
            gossip_to_the_dead_time: duration("GossipToTheDeadTime")?,
            queue_check_interval: duration("QueueCheckInterval")?,
        })
    }

    /// Reads and checks the file at `path`: `Ok(None)` when there is none (MetalLB then keeps
    /// its defaults, vigil its profile); errors name the file and the field.
    pub fn read(path: &std::path::Path) -> Result<Option<vigil_gossip::Config>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::parse(&text)
            .and_then(|t| t.to_gossip_config())
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// vigil's gossip settings: memberlist's LAN defaults with the file's values laid over, as
    /// MetalLB does, then checked (a zero probe interval, say, is an error here, not a hang),
    /// the error naming the file's field.
    pub fn to_gossip_config(&self) -> Result<vigil_gossip::Config, MemberlistFileError> {
        let mut c = vigil_gossip::Config::lan();
        c.tcp_timeout = self.tcp_timeout;
        c.indirect_checks = self.indirect_checks;
        c.retransmit_mult = self.retransmit_mult;
        c.suspicion_mult = self.suspicion_mult;
        c.suspicion_max_timeout_mult = self.suspicion_max_timeout_mult;
        c.push_pull_interval = self.push_pull_interval;
        c.probe_timeout = self.probe_timeout;
        c.probe_interval = self.probe_interval;
        c.disable_tcp_pings = self.disable_tcp_pings;
        c.awareness_max_multiplier = self.awareness_max_multiplier;
        c.gossip_nodes = self.gossip_nodes;
        c.gossip_interval = self.gossip_interval;
        c.gossip_to_the_dead_time = self.gossip_to_the_dead_time;
        c.udp_buffer_size = self.udp_buffer_size;
        c.validate().map_err(|e| MemberlistFileError::Unusable {
            field: HONOURED
                .iter()
                .find(|(_, engine)| *engine == e.field)
                .map_or(e.field, |(key, _)| *key),
            problem: e.problem,
        })?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// memberlist v0.5.1's DefaultLANConfig written out in the file's format.
    const LAN: &str = r#"{
        "TCPTimeout": "10s", "IndirectChecks": 3, "RetransmitMult": 4, "SuspicionMult": 4,
        "SuspicionMaxTimeoutMult": 6, "PushPullInterval": "30s", "ProbeTimeout": "500ms",
        "ProbeInterval": "1s", "DisableTcpPings": false, "AwarenessMaxMultiplier": 8,
        "GossipNodes": 3, "GossipInterval": "200ms", "GossipToTheDeadTime": "30s",
        "GossipVerifyIncoming": true, "GossipVerifyOutgoing": true, "EnableCompression": true,
        "HandoffQueueDepth": 1024, "UDPBufferSize": 1400, "QueueCheckInterval": "30s"
    }"#;

    #[test]
    fn the_lan_defaults_round_trip_to_gossip_lan() {
        let t = MemberlistTuning::parse(LAN).unwrap();
        assert_eq!(t.handoff_queue_depth, 1024);
        assert!(t.enable_compression && t.gossip_verify_incoming);
        assert_eq!(t.to_gossip_config().unwrap(), vigil_gossip::Config::lan());
    }

    #[test]
    fn tuned_values_and_go_json_quirks() {
        let text = LAN
            .replace(r#""ProbeInterval": "1s""#, r#""probeinterval": "250ms""#)
            .replace(r#""ProbeTimeout": "500ms""#, r#""ProbeTimeout": "100ms""#)
            .replace(
                r#""GossipNodes": 3,"#,
                r#""GossipNodes": null, "Unknown": [1],"#,
            );
        let t = MemberlistTuning::parse(&text).unwrap();
        assert_eq!(t.probe_interval, Duration::from_millis(250));
        assert_eq!(t.gossip_nodes, 0);
        let c = t.to_gossip_config().unwrap();
        assert_eq!(c.probe_timeout, Duration::from_millis(100));
        // A missing int silently becomes 0 (MetalLB's trap); vigil's checks then catch the
        // ones that cannot work.
        let no_mult = LAN.replace(r#""SuspicionMult": 4,"#, "");
        let t = MemberlistTuning::parse(&no_mult).unwrap();
        assert_eq!(t.suspicion_mult, 0);
        assert_eq!(
            t.to_gossip_config().unwrap_err().to_string(),
            "memberlist config file: field SuspicionMult: must be at least 1"
        );
        let slow = LAN.replace(r#""ProbeTimeout": "500ms""#, r#""ProbeTimeout": "2s""#);
        let err = MemberlistTuning::parse(&slow).unwrap().to_gossip_config();
        assert!(matches!(
            err,
            Err(MemberlistFileError::Unusable {
                field: "ProbeTimeout",
                ..
            })
        ));
    }

    #[test]
    fn a_missing_file_is_none_and_a_bad_one_names_file_and_field() {
        let dir = std::env::temp_dir().join(format!("vigil-mlcfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.json");
        assert_eq!(MemberlistTuning::read(&path), Ok(None));
        std::fs::write(
            &path,
            LAN.replace(r#""ProbeInterval": "1s""#, r#""ProbeInterval": "0s""#),
        )
        .unwrap();
        let err = MemberlistTuning::read(&path).unwrap_err();
        assert!(
            err.contains("config.json") && err.contains("field ProbeInterval"),
            "{err}"
        );
        std::fs::write(
            &path,
            LAN.replace(r#""ProbeInterval": "1s""#, r#""ProbeInterval": "2s""#),
        )
        .unwrap();
        let c = MemberlistTuning::read(&path).unwrap().unwrap();
        assert_eq!(c.probe_interval, Duration::from_secs(2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_files_name_the_field() {
        let missing = LAN.replace(r#""TCPTimeout": "10s","#, "");
        assert_eq!(
            MemberlistTuning::parse(&missing).unwrap_err().to_string(),
            r#"parsing TCPTimeout "" in memberlist config file: time: invalid duration """#
        );
        let words = LAN.replace(
            r#""GossipInterval": "200ms""#,
            r#""GossipInterval": "fast""#,
        );
        assert!(matches!(
            MemberlistTuning::parse(&words),
            Err(MemberlistFileError::Duration {
                field: "GossipInterval",
                ..
            })
        ));
        let typed = LAN.replace(r#""IndirectChecks": 3"#, r#""IndirectChecks": "3""#);
        assert!(matches!(
            MemberlistTuning::parse(&typed),
            Err(MemberlistFileError::Type {
                field: "IndirectChecks",
                ..
            })
        ));
        let frac = LAN.replace(r#""IndirectChecks": 3"#, r#""IndirectChecks": 3.5"#);
        assert!(MemberlistTuning::parse(&frac).is_err());
        let neg = LAN.replace(r#""ProbeTimeout": "500ms""#, r#""ProbeTimeout": "-1s""#);
        assert!(matches!(
            MemberlistTuning::parse(&neg),
            Err(MemberlistFileError::Negative {
                field: "ProbeTimeout",
                ..
            })
        ));
        assert!(matches!(
            MemberlistTuning::parse("[]"),
            Err(MemberlistFileError::Json(_))
        ));
        assert!(matches!(
            MemberlistTuning::parse("{"),
            Err(MemberlistFileError::Json(_))
        ));
    }
}
