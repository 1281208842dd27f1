//! Shared helpers for the Go-interop tests: the JSON form of messages that the conformance
//! program (`conformance/`) reads and writes, a nonce-replaying RNG, and the Go binary.

#![allow(dead_code, unreachable_pub)]

use rand_core::{CryptoRng, RngCore};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use vigil_gossip::wire::{Message, NodeState, PushNodeState};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hex_or_null(b: Option<&[u8]>) -> Value {
    b.map_or(Value::Null, |b| Value::String(hex::encode(b)))
}

/// Go omits empty `[]byte` fields tagged omitempty, so they decode as nil.
fn omitempty(b: &[u8]) -> Value {
    if b.is_empty() {
        Value::Null
    } else {
        Value::String(hex::encode(b))
    }
}

fn state_json(s: &PushNodeState) -> Value {
    json!({
        "Addr": hex_or_null(s.addr.as_deref()),
        "Incarnation": s.incarnation,
        "Meta": hex_or_null(s.meta.as_deref()),
        "Name": s.name,
        "Port": s.port,
        "State": i64::from(s.state),
        "Vsn": hex_or_null(s.vsn.as_deref()),
    })
}

/// The conformance program's representation of a message (see conformance/README.md).
pub fn message_json(msg: &Message, stream: bool) -> Value {
    let (ty, fields) = match msg {
        Message::Ping(m) => (
            "ping",
            json!({"SeqNo": m.seq_no, "Node": m.node, "SourceAddr": omitempty(&m.source_addr),
                   "SourcePort": m.source_port, "SourceNode": m.source_node}),
        ),
        Message::IndirectPing(m) => (
            "indirect_ping",
            json!({"SeqNo": m.seq_no, "Target": hex_or_null(m.target.as_deref()), "Port": m.port,
                   "Node": m.node, "Nack": m.nack, "SourceAddr": omitempty(&m.source_addr),
                   "SourcePort": m.source_port, "SourceNode": m.source_node}),
        ),
        Message::Ack(m) => (
            "ack",
            json!({"SeqNo": m.seq_no, "Payload": hex_or_null(m.payload.as_deref())}),
        ),
        Message::Nack(m) => ("nack", json!({"SeqNo": m.seq_no})),
        Message::Suspect(m) => (
            "suspect",
            json!({"Incarnation": m.incarnation, "Node": m.node, "From": m.from}),
        ),
        Message::Alive(m) => (
            "alive",
            json!({"Incarnation": m.incarnation, "Node": m.node, "Addr": hex_or_null(m.addr.as_deref()),
                   "Port": m.port, "Meta": hex_or_null(m.meta.as_deref()), "Vsn": hex_or_null(m.vsn.as_deref())}),
        ),
        Message::Dead(m) => (
            "dead",
            json!({"Incarnation": m.incarnation, "Node": m.node, "From": m.from}),
        ),
        Message::PushPull(m) => (
            "push_pull",
            json!({"Join": m.join, "Nodes": m.states.len(), "UserStateLen": m.user_state.len(),
                   "States": m.states.iter().map(state_json).collect::<Vec<_>>(),
                   "UserState": hex::encode(&m.user_state)}),
        ),
        Message::User(b) if stream => (
            "user_stream",
            json!({"UserMsgLen": b.len(), "Msg": hex::encode(b)}),
        ),
        Message::User(b) => ("user", json!({"Msg": hex::encode(b)})),
        Message::Err(m) => ("err", json!({"Error": m.error})),
        other => panic!("no JSON form for {other:?}"),
    };
    json!({"type": ty, "fields": fields})
}

/// Go decodes an empty non-nil `[]byte` and nil alike in some places; compare with that in
/// mind by mapping `""` to `null` on both sides.
pub fn normalize(v: &Value) -> Value {
    match v {
        Value::String(s) if s.is_empty() => Value::Null,
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        other => other.clone(),
    }
}

pub fn state_from_i64(v: i64) -> NodeState {
    NodeState::from(v)
}

/// An RNG that hands out recorded bytes: replays the nonce Go used for a vector.
pub struct Replay(pub Vec<u8>, pub usize);

impl RngCore for Replay {
    fn next_u32(&mut self) -> u32 {
        let mut b = [0; 4];
        self.fill_bytes(&mut b);
        u32::from_le_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0; 8];
        self.fill_bytes(&mut b);
        u64::from_le_bytes(b)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for d in dest {
            *d = self.0[self.1 % self.0.len()];
            self.1 += 1;
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoRng for Replay {}

/// The Go conformance program, built from Debian's memberlist. `None` (with a note on stderr)
/// when Go is not installed, unless `VIGIL_REQUIRE_GO=1`, in which case that is a failure.
pub fn conformance_bin() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("VIGIL_CONFORMANCE_BIN") {
        return Some(PathBuf::from(p));
    }
    let script = repo_root().join("conformance/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("conformance")
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let last = stdout.lines().last().unwrap_or_default().trim().to_string();
            Some(PathBuf::from(last).join("vigil-conformance"))
        }
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            if std::env::var("VIGIL_REQUIRE_GO").as_deref() == Ok("1") {
                panic!("VIGIL_REQUIRE_GO=1 but the Go conformance program did not build: {why}");
            }
            eprintln!("skipping Go interop: conformance program unavailable: {why}");
            None
        }
    }
}

/// The memberlist versions the conformance program is built for: Debian's 0.2.2 (GOPATH mode)
/// and 0.5.1 / 0.7.0 (module mode, `conformance/build.sh gopeer-VERSION`).
pub const GO_VERSIONS: [&str; 3] = ["0.2.2", "0.5.1", "0.7.0"];

/// The conformance program of every version in [`GO_VERSIONS`], as `(version, path)`. A missing
/// one is skipped with a note, unless `VIGIL_REQUIRE_GO=1` (then that is a failure). Looked up
/// in `VIGIL_GO_BIN_DIR` (0.2.2's is `vigil-conformance`, the others `vigil-conformance-VERSION`),
/// next to `VIGIL_CONFORMANCE_BIN`, or built with `conformance/build.sh`.
pub fn conformance_bins() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for version in GO_VERSIONS {
        let file = if version == "0.2.2" {
            "vigil-conformance".to_string()
        } else {
            format!("vigil-conformance-{version}")
        };
        let dir = std::env::var_os("VIGIL_GO_BIN_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("VIGIL_CONFORMANCE_BIN")
                    .and_then(|p| PathBuf::from(p).parent().map(Path::to_path_buf))
            });
        if let Some(p) = dir.map(|d| d.join(&file)).filter(|p| p.exists()) {
            out.push((version.to_string(), p));
            continue;
        }
        let target = if version == "0.2.2" {
            "conformance".to_string()
        } else {
            format!("gopeer-{version}")
        };
        let built = Command::new("bash")
            .arg(repo_root().join("conformance/build.sh"))
            .arg(&target)
            .output();
        let why = match built {
            Ok(o) if o.status.success() => {
                let stdout = String::from_utf8_lossy(&o.stdout);
                let p = PathBuf::from(stdout.lines().last().unwrap_or_default().trim()).join(&file);
                if p.exists() {
                    out.push((version.to_string(), p));
                    continue;
                }
                format!("{} missing after build", p.display())
            }
            Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
            Err(e) => e.to_string(),
        };
        if std::env::var("VIGIL_REQUIRE_GO").as_deref() == Ok("1") {
            panic!(
                "VIGIL_REQUIRE_GO=1 but the memberlist {version} conformance program did not build: {why}"
            );
        }
        eprintln!("skipping memberlist {version}: conformance program unavailable: {why}");
    }
    out
}

/// Runs `vigil-conformance decode` over JSON-line cases; returns its JSON-line answers.
pub fn go_decode(bin: &Path, cases: &[Value]) -> Vec<Value> {
    use std::io::Write;
    let mut child = Command::new(bin)
        .arg("decode")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start vigil-conformance");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = cases.iter().map(|c| format!("{c}\n")).collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("vigil-conformance decode");
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "vigil-conformance decode failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("conformance output is JSON"))
        .collect()
}
