//! The agent's stdout: one JSON object per line for every event, each with `ts` (RFC 3339,
//! UTC, microseconds) and `event`.

use serde_json::{Value, json};
use std::io::Write;
use std::time::SystemTime;
use vigil_gossip::{MemberInfo, MemberState};
use vigil_gossip_net::Event;
use vigil_observe::metrics::{MemberEventCounts, MemberEventKind};

/// Counts the agent keeps from events for `/metrics` (the engine counts the rest).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct EventCounts {
    /// Membership events, by kind.
    pub(super) members: MemberEventCounts,
    /// User messages received.
    pub(super) user_messages: u64,
    /// Keyring file contents that could not be used (added to the driver's refusals).
    pub(super) keyring_file_errors: u64,
}

/// Writes one event line.
pub(super) fn emit(event: &str, mut fields: Value) {
    if let Value::Object(map) = &mut fields {
        let ts = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
        map.insert("ts".into(), Value::String(ts));
        map.insert("event".into(), Value::String(event.into()));
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{fields}");
    let _ = out.flush();
}

fn state_name(s: MemberState) -> &'static str {
    match s {
        MemberState::Alive => "alive",
        MemberState::Suspect => "suspect",
        MemberState::Dead => "dead",
        MemberState::Left => "left",
        _ => "unknown",
    }
}

/// A member as `/members` and the event lines show it.
pub(super) fn member_json(m: &MemberInfo) -> Value {
    json!({
        "node": &*m.name,
        "addr": m.addr.to_string(),
        "state": state_name(m.state),
        "incarnation": m.incarnation,
        "meta": m.meta.as_deref().map(String::from_utf8_lossy),
    })
}

/// Prints a driver event and counts it.
pub(super) fn print_event(ev: Event, counts: &mut EventCounts) {
    use vigil_gossip::Event as E;
    let Event::Gossip(ev) = ev else { return };
    if let Some(kind) = MemberEventKind::of(&ev) {
        counts.members.record(kind);
    }
    match ev {
        E::Join(m) => emit("join", member_json(&m)),
        E::Update(m) => emit("update", member_json(&m)),
        E::Suspect { member, from } => {
            let mut v = member_json(&member);
            v["from"] = Value::String(from.to_string());
            emit("suspect", v);
        }
        E::Refuted(m) => emit("alive", member_json(&m)),
        E::Dead(m) => emit("dead", member_json(&m)),
        E::Left(m) => emit("left", member_json(&m)),
        E::UserMsg(msg) => {
            counts.user_messages += 1;
            emit(
                "user",
                json!({ "msg": String::from_utf8_lossy(&msg), "len": msg.len() }),
            );
        }
        E::Conflict {
            existing,
            other_addr,
        } => {
            let mut v = member_json(&existing);
            v["other_addr"] = Value::String(other_addr.to_string());
            emit("conflict", v);
        }
        E::PushPullComplete { addr, join, ok } => emit(
            "push_pull",
            json!({ "addr": addr.to_string(), "join": join, "ok": ok }),
        ),
        E::LeaveComplete => emit("leave_complete", json!({})),
        _ => {}
    }
}
