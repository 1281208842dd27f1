//! The values that cross the engine's boundary: this node's identity, the datagrams, TCP
//! exchanges and events it hands out, the members it lists, and its counters.

use super::members::{Member, MemberState, WireIp};
use crate::wire::DecodeError;
use core::time::Duration;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Shares member names between engines in one process, so that a simulator running
/// thousands of engines keeps one copy of each name instead of one per table. Production
/// nodes have no use for it.
#[derive(Debug, Clone, Default)]
pub struct NameCache(Arc<std::sync::Mutex<std::collections::HashSet<Arc<str>>>>);

impl NameCache {
    /// The shared copy of `name`.
    pub(super) fn intern(&self, name: &str) -> Arc<str> {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = set.get(name) {
            return n.clone();
        }
        let n: Arc<str> = name.into();
        set.insert(n.clone());
        n
    }
}

/// This node's identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNode {
    /// Unique node name.
    pub name: String,
    /// The address peers reach us at (the advertise address).
    pub addr: SocketAddr,
    /// Node metadata (at most 512 bytes).
    pub meta: Vec<u8>,
}

/// A UDP datagram to send, already framed (label, encryption, CRC, compression).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// Destination.
    pub to: SocketAddr,
    /// Payload.
    pub bytes: Vec<u8>,
}

/// Identifies a TCP exchange the engine asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// A TCP exchange to perform: dial `to`, write `bytes`, and if `expects_reply`, read until
/// [`Membership::handle_stream_response`](super::Membership::handle_stream_response) says the reply is complete. Give up at `deadline`
/// and report it with [`Membership::handle_stream_failed`](super::Membership::handle_stream_failed).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct StreamRequest {
    /// Names this exchange in later calls.
    pub id: StreamId,
    /// Peer address.
    pub to: SocketAddr,
    /// What to write (framed, label header included).
    pub bytes: Vec<u8>,
    /// Whether to wait for a reply.
    pub expects_reply: bool,
    /// When to give up.
    pub deadline: Instant,
}

/// How an outgoing TCP exchange failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamFailure {
    /// The peer's port refused the connection: nobody listens there (strong evidence).
    Refused,
    /// No answer before the deadline.
    TimedOut,
    /// Any other I/O failure.
    Io,
}

/// What to do with an accepted TCP connection after feeding it the bytes read so far.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum IncomingStream {
    /// Read more (the message is incomplete).
    NeedMore,
    /// Write this reply, then close.
    Reply(Vec<u8>),
    /// Done; close without replying.
    Close,
    /// The input was bad (already counted); close.
    Rejected(DecodeError),
}

/// Whether a stream response was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum StreamProgress {
    /// Read more.
    NeedMore,
    /// Done; close the connection.
    Done,
}

/// A member as reported in events and listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// Node name.
    pub name: Arc<str>,
    /// Gossip address.
    pub addr: SocketAddr,
    /// The address bytes exactly as the node advertised them.
    pub wire_ip: WireIp,
    /// Metadata.
    pub meta: Option<Arc<[u8]>>,
    /// Incarnation.
    pub incarnation: u32,
    /// State.
    pub state: MemberState,
    /// `[pmin, pmax, pcur, dmin, dmax, dcur]`.
    pub protocol: [u8; 6],
}

impl From<&Member> for MemberInfo {
    fn from(m: &Member) -> Self {
        Self {
            name: m.name.clone(),
            addr: m.addr(),
            wire_ip: m.ip,
            meta: m.meta.as_deref().cloned(),
            incarnation: m.incarnation,
            state: m.state,
            protocol: m.vsn,
        }
    }
}

/// Something the application may want to know.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A member joined (or came back from dead or left).
    Join(MemberInfo),
    /// A member's metadata changed.
    Update(MemberInfo),
    /// A member became suspect (`from` accused it).
    Suspect {
        /// The member.
        member: MemberInfo,
        /// Its accuser.
        from: Arc<str>,
    },
    /// A member we held suspect refuted the suspicion (a newer alive arrived for it).
    Refuted(MemberInfo),
    /// A member we probe did not answer in time: the first sign of trouble, before any
    /// suspicion (ours or anyone's). Once per probe whose direct ack window passed, and once
    /// per silence of a watched member when its helpers are first asked. Not an accusation:
    /// packet loss alone raises it; the timeline of an ownership change starts here.
    ProbeMissed {
        /// The member.
        name: Arc<str>,
    },
    /// A member was declared dead.
    Dead(MemberInfo),
    /// A member left gracefully.
    Left(MemberInfo),
    /// An application message arrived.
    UserMsg(Vec<u8>),
    /// Application state from a push/pull (`join` tells whether it was a join).
    RemoteState {
        /// Whether the exchange was a join.
        join: bool,
        /// The peer's `LocalState`.
        state: Vec<u8>,
    },
    /// A node announced itself under a known name with a different address; ignored.
    Conflict {
        /// The member we know.
        existing: MemberInfo,
        /// The address it claimed.
        other_addr: SocketAddr,
    },
    /// A direct probe was answered (`payload` is the peer's ack payload).
    PingComplete {
        /// The probed member.
        name: Arc<str>,
        /// Round-trip time.
        rtt: Duration,
        /// Its ack payload.
        payload: Option<Vec<u8>>,
    },
    /// A push/pull with a peer finished (joins and anti-entropy).
    PushPullComplete {
        /// Peer address.
        addr: SocketAddr,
        /// Whether it was a join.
        join: bool,
        /// Whether it succeeded.
        ok: bool,
    },
    /// Our leave message went out (or the leave timed out): safe to shut down.
    LeaveComplete,
    /// We heard from no other node for `Config::deaf_after`, or did not run for that long (a
    /// frozen or starved process): the others may have declared us dead and taken over what
    /// we announce. Once per episode, which [`Event::Reconnected`] ends. vigil only.
    CutOff {
        /// The silence or stall that showed it.
        silent_for: Duration,
    },
    /// After [`Event::CutOff`], a push/pull with a member merged the cluster's state (so a
    /// death of ours declared meanwhile is known and refuted), or we heard the others for a
    /// second without managing one.
    Reconnected {
        /// How long the episode lasted.
        after: Duration,
    },
    /// After [`Event::Reconnected`] (with `Config::hold_blind_verdicts`) or
    /// `Membership::confirm_alive`: every member live then acknowledged a ping sent together
    /// with our alive state as it is now (refutation included), so each of them holds us
    /// alive. Not raised if one did not answer within a probe interval. vigil only.
    HeardBack {
        /// The members that acknowledged.
        members: usize,
    },
}

/// Counters for metrics. All only ever increase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// UDP packets handled.
    pub packets_in: u64,
    /// UDP packets produced.
    pub packets_out: u64,
    /// UDP bytes handled.
    pub bytes_in: u64,
    /// UDP bytes produced.
    pub bytes_out: u64,
    /// Packets or streams dropped because they could not be decoded (whole or in part).
    pub malformed: u64,
    /// Packets or streams dropped because no key decrypted them or encryption was missing.
    pub decrypt_failures: u64,
    /// Packets or streams dropped for a wrong or missing label.
    pub label_mismatches: u64,
    /// Valid messages we ignored (ping for another name, unknown sequence numbers, stale news).
    pub ignored: u64,
    /// Probes started.
    pub probes: u64,
    /// Probe rounds whose target the watch vouched for (watched, and heard from within a
    /// probe interval), so no probe was sent.
    pub probes_spared: u64,
    /// Probes that ended in a suspicion.
    pub probes_failed: u64,
    /// Suspicions we raised.
    pub suspicions_raised: u64,
    /// Suspicions about us that we refuted.
    pub refutations: u64,
    /// Members we declared dead when their suspicion expired or their absence was proven.
    pub deaths_declared: u64,
    /// Probes that ended in a proof of absence: the target missed its direct ack and refused
    /// our TCP fallback ping, so it was declared dead at once (`use_strong_evidence`).
    pub absences_proven: u64,
    /// Times we announced our incarnation again because someone still accused an older one
    /// (our refutation had not reached it).
    pub reannouncements: u64,
    /// Accusations or alives rejected for an implausible incarnation jump.
    pub implausible_incarnations: u64,
    /// TCP streams handled (incoming).
    pub streams_in: u64,
    /// TCP streams requested (outgoing).
    pub streams_out: u64,
    /// Push/pull exchanges refused for incompatible protocol versions.
    pub version_mismatches: u64,
    /// Pings the watch sent (see `Config::watch_neighbours`).
    pub watch_pings: u64,
    /// Watch pings not sent to a member before us on the ring, because its own pings arrive.
    pub watch_pings_spared: u64,
    /// Of `deaths_declared`, those the watch declared (a confirmed silence).
    pub watch_deaths_declared: u64,
    /// Watch rounds that found we had not run for over two watch intervals (our own stall,
    /// not counted as anyone's silence).
    pub watch_stalls: u64,
    /// Of `deaths_declared`, those declared blind (we heard from no one for the whole
    /// suspicion) and so kept to ourselves (`Config::hold_blind_verdicts`).
    pub blind_deaths: u64,
    /// Pings sent to members held dead blind, to find them again.
    pub blind_pings: u64,
    /// Members held dead blind that turned out alive (an ack, or the cluster's word).
    pub blind_revivals: u64,
    /// Pings sent with our alive state to every live member after a reconnection or on
    /// `Membership::confirm_alive` (`Event::HeardBack`).
    pub heard_back_pings: u64,
    /// Times we found ourselves cut off (`Event::CutOff`).
    pub cut_offs: u64,
    /// Suspicions we raised while we heard from no one, dropped at expiry because we hear
    /// the cluster again (see `Membership::suspicion_outlived_our_silence`).
    pub blind_suspicions_dropped: u64,
    /// Pings sent to members declared dead recently (the ordinary way), to find a healed
    /// split.
    pub dead_pings: u64,
    /// Of those, the ones answered: a member we held dead lives, and a push/pull merges us.
    pub dead_answered: u64,
}
