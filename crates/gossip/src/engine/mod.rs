//! `Membership`: the SWIM + Lifeguard failure detector and membership protocol of hashicorp
//! memberlist, as a deterministic state machine.
//!
//! # Calling contract (after quinn-proto)
//!
//! The engine never reads a clock or touches a socket. The driver:
//!
//! 1. feeds input as it happens: [`Membership::handle_packet`] for each UDP datagram,
//!    [`Membership::handle_incoming_stream`] with the bytes of an accepted TCP connection so
//!    far, [`Membership::handle_stream_response`] / [`Membership::handle_stream_failed`] for
//!    the connections the engine asked for, [`Membership::handle_unreachable`] for ICMP port
//!    unreachable, and commands ([`join`](Membership::join), [`leave`](Membership::leave), …);
//! 2. after any input, drains [`poll_transmit`](Membership::poll_transmit) (UDP datagrams to
//!    send), [`poll_stream`](Membership::poll_stream) (TCP exchanges to perform) and
//!    [`poll_event`](Membership::poll_event);
//! 3. calls [`handle_timeout`](Membership::handle_timeout) when the instant returned by
//!    [`poll_timeout`](Membership::poll_timeout) arrives, then drains again.
//!
//! `now` must never go backwards between calls. Bad input from the network is counted in
//! [`Stats`] and dropped; no input method returns an error for it.
//!
//! # Where things are
//!
//! One job per file, each with one `impl Membership` block: this file holds the struct, the
//! constructor, the getters, the output queues, the keyring and delegate setters and the
//! datagram dispatch; `types` the values that cross the boundary; `probe` failure detection;
//! `state` the alive / suspect / dead rules; `dissemination` gossip and sending; `push_pull`
//! joins and anti-entropy; `streams` TCP exchanges; `timers` the clock; `watch` the fast detection of lost neighbours; `blind` the deaths we declared while cut off. `members`,
//! `suspicion` and `broadcast` are the data structures they share.

mod blind;
mod broadcast;
mod dissemination;
mod members;
mod probe;
mod push_pull;
mod state;
mod streams;
mod suspicion;
mod timers;
mod types;
mod watch;

pub use members::{MemberState, WireIp};
pub use types::{
    Event, IncomingStream, LocalNode, MemberInfo, NameCache, Stats, StreamFailure, StreamId,
    StreamProgress, StreamRequest, Transmit,
};

use crate::config::{Config, ConfigError};
use crate::wire::{self, DecodeError, Framing, Message, packet};
use broadcast::BroadcastQueue;
use core::time::Duration;
use members::{Member, Members};
use probe::{Probe, Relay};
use rand::Rng;
use rand_chacha::ChaCha12Rng;
use rand_core::SeedableRng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use streams::StreamPurpose;
use timers::Deadline;

/// The membership engine. See the [module docs](self) for the calling contract.
pub struct Membership {
    config: Config,
    framing: Framing,
    rng: ChaCha12Rng,
    members: Members,
    incarnation: u32,
    seq: u32,
    awareness: usize,
    leaving: bool,
    leave_deadline: Option<Instant>,

    probe: Option<Probe>,
    next_probe: Instant,
    urgent_probes: VecDeque<Arc<str>>,
    next_gossip: Instant,
    next_push_pull: Instant,
    /// Until the first periodic push/pull: when we started and the random fraction of the
    /// interval it was placed at (see `add_member`).
    first_push_pull: Option<(Instant, f64)>,

    relays: HashMap<u32, Relay>,
    watch: watch::Watch,
    blind: blind::Blind,
    /// When we last told a node we hold dead that it is dead (see `nudge_restarted`).
    nudged: HashMap<Arc<str>, Instant>,
    deadlines: BinaryHeap<Reverse<(Instant, Deadline)>>,
    suspect_episodes: HashMap<u64, Arc<str>>,
    next_episode: u64,

    broadcasts: BroadcastQueue,
    user_broadcasts: BroadcastQueue,
    ack_payload: Option<Vec<u8>>,
    local_state: Vec<u8>,
    names: Option<NameCache>,

    next_stream: u64,
    streams: HashMap<StreamId, StreamPurpose>,
    transmits: VecDeque<Transmit>,
    stream_requests: VecDeque<StreamRequest>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl core::fmt::Debug for Membership {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Membership")
            .field("name", &self.local().name)
            .field("incarnation", &self.incarnation)
            .field("members", &self.members.len())
            .finish_non_exhaustive()
    }
}

impl Membership {
    /// Creates the engine. `seed` feeds every random choice (probe order, helpers, timer
    /// stagger) and the encryption nonces: seed it from the OS in production, fix it in tests.
    pub fn new(
        config: Config,
        framing: Framing,
        local: LocalNode,
        seed: [u8; 32],
        now: Instant,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        if local.name.is_empty() {
            return Err(ConfigError {
                field: "name",
                problem: "must not be empty".into(),
            });
        }
        if local.meta.len() > wire::META_MAX_SIZE {
            return Err(ConfigError {
                field: "meta",
                problem: format!("{} bytes; at most 512 are allowed", local.meta.len()),
            });
        }
        let [dmin, dmax, dcur] = config.delegate_version;
        let me = Member {
            name: local.name.as_str().into(),
            ip: WireIp::from_ip(local.addr.ip()),
            port: local.addr.port(),
            meta: Some(Box::new(local.meta.into())),
            vsn: [
                wire::PROTOCOL_VERSION_MIN,
                wire::PROTOCOL_VERSION_MAX,
                config.protocol_version,
                dmin,
                dmax,
                dcur,
            ],
            incarnation: 1,
            state: MemberState::Alive,
            state_change: members::Stamp::default(),
            suspicion: None,
        };
        let mut rng = ChaCha12Rng::from_seed(seed);
        let stagger = |rng: &mut ChaCha12Rng, d: Duration| {
            if d.is_zero() {
                now + Duration::from_secs(365 * 24 * 3600)
            } else {
                now + d.mul_f64(rng.r#gen::<f64>())
            }
        };
        let next_probe = stagger(&mut rng, config.probe_interval);
        let next_gossip = stagger(&mut rng, config.gossip_interval);
        let (next_push_pull, push_pull_phase) = if config.push_pull_interval.is_zero() {
            (stagger(&mut rng, config.push_pull_interval), 0.0)
        } else {
            let phase = rng.r#gen::<f64>();
            (now + config.push_pull_interval.mul_f64(phase), phase)
        };
        let mut engine = Self {
            framing,
            rng,
            members: Members::new(me, now),
            incarnation: 1,
            seq: 0,
            awareness: 0,
            leaving: false,
            leave_deadline: None,
            probe: None,
            next_probe,
            urgent_probes: VecDeque::new(),
            next_gossip,
            next_push_pull,
            first_push_pull: Some((now, push_pull_phase)),
            relays: HashMap::new(),
            watch: watch::Watch::default(),
            blind: blind::Blind::default(),
            nudged: HashMap::new(),
            deadlines: BinaryHeap::new(),
            suspect_episodes: HashMap::new(),
            next_episode: 0,
            broadcasts: BroadcastQueue::default(),
            user_broadcasts: BroadcastQueue::default(),
            ack_payload: None,
            local_state: Vec::new(),
            names: None,
            next_stream: 0,
            streams: HashMap::new(),
            transmits: VecDeque::new(),
            stream_requests: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
            config,
        };
        // Like Go's setAlive: our own alive is queued from the start, so that once we know
        // anyone, we announce ourselves too (the node that merged our join is not the only
        // source of the news).
        let alive = Message::Alive(engine.own_alive());
        let name = engine.local().name.clone();
        engine.queue_broadcast(&name, &alive);
        Ok(engine)
    }

    /// Shares member names with other engines in this process (see [`NameCache`]).
    pub fn set_name_cache(&mut self, cache: NameCache) {
        self.names = Some(cache);
    }

    // ---- getters -------------------------------------------------------------------------

    fn local(&self) -> &Member {
        &self.members.list[0]
    }

    /// Our name.
    pub fn name(&self) -> &str {
        &self.local().name
    }

    /// Our current incarnation.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Label, keys and caps in force.
    pub fn framing(&self) -> &Framing {
        &self.framing
    }

    /// Lifeguard's local health score: 0 is healthy; higher means our own probes have been
    /// failing, so we slow down and trust our own verdicts less.
    pub fn health_score(&self) -> usize {
        self.awareness
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Every member we know, ourselves included.
    pub fn members(&self) -> impl Iterator<Item = MemberInfo> + '_ {
        self.members.list.iter().map(MemberInfo::from)
    }

    /// One member by name.
    pub fn member(&self, name: &str) -> Option<MemberInfo> {
        self.members
            .find(name)
            .map(|i| MemberInfo::from(&self.members.list[i]))
    }

    /// Number of members we know in any state (memberlist's node-count estimate).
    pub fn num_known(&self) -> usize {
        self.members.len()
    }

    /// Number of members alive or suspect, ourselves included.
    pub fn num_live(&self) -> usize {
        self.members
            .list
            .iter()
            .filter(|m| !m.state.is_gone())
            .count()
    }

    /// Broadcasts waiting to go out (memberlist's and the application's).
    pub fn queued_broadcasts(&self) -> usize {
        self.broadcasts.len() + self.user_broadcasts.len()
    }

    // ---- outputs -------------------------------------------------------------------------

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next TCP exchange to perform.
    pub fn poll_stream(&mut self) -> Option<StreamRequest> {
        self.stream_requests.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        let event = self.events.pop_front();
        if event.is_none() && self.events.capacity() > 1024 {
            // A join into a big cluster queues one event per member; do not keep that much
            // room around for ever (simulators hold thousands of engines).
            self.events.shrink_to(64);
        }
        event
    }

    // ---- commands ------------------------------------------------------------------------

    /// Sets the payload our acks carry (Go's `PingDelegate.AckPayload`).
    pub fn set_ack_payload(&mut self, payload: Option<Vec<u8>>) {
        self.ack_payload = payload;
    }

    /// Sets the application state sent in push/pulls (Go's `Delegate.LocalState`).
    pub fn set_local_state(&mut self, state: Vec<u8>) {
        self.local_state = state;
    }

    /// Installs a key for decryption (and encryption once made primary).
    pub fn install_key(&mut self, key: wire::SecretKey) {
        self.framing.keyring.install(key);
    }

    /// Makes an installed key the primary (encrypting) key.
    pub fn use_key(&mut self, key: &[u8]) -> Result<(), wire::KeyringError> {
        self.framing.keyring.use_key(key)
    }

    /// Removes a key that is not the primary.
    pub fn remove_key(&mut self, key: &[u8]) -> Result<(), wire::KeyringError> {
        self.framing.keyring.remove(key)
    }

    // ---- inputs --------------------------------------------------------------------------

    /// A UDP datagram arrived.
    pub fn handle_packet(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
        self.note_turn(now);
        self.stats.packets_in += 1;
        self.stats.bytes_in += bytes.len() as u64;
        let contents = match packet::open(&self.framing, bytes) {
            Ok(c) => c,
            Err(e) => {
                self.count_rejected(e);
                return;
            }
        };
        self.stats.malformed += (contents.malformed.len() + contents.truncated_parts) as u64;
        self.heard_from_others(now, Some(from));
        self.watch_heard_from(now, from);
        for msg in contents.messages {
            self.handle_message(now, from, msg);
        }
    }

    // ---- message handling ----------------------------------------------------------------

    fn count_rejected(&mut self, e: DecodeError) {
        match e {
            DecodeError::NoKeyDecrypts
            | DecodeError::EncryptionMismatch
            | DecodeError::UnknownEncryptionVersion(_)
            | DecodeError::CiphertextTooShort
            | DecodeError::BadPadding => self.stats.decrypt_failures += 1,
            DecodeError::LabelMismatch | DecodeError::UnexpectedLabel | DecodeError::EmptyLabel => {
                self.stats.label_mismatches += 1;
            }
            _ => self.stats.malformed += 1,
        }
    }

    fn handle_message(&mut self, now: Instant, from: SocketAddr, msg: Message) {
        match msg {
            Message::Ping(p) => self.on_ping(from, p),
            Message::IndirectPing(p) => self.on_indirect_ping(now, from, p),
            Message::Ack(a) => self.on_ack(now, a),
            Message::Nack(n) => self.on_nack(from, n),
            Message::Alive(a) => self.on_alive(now, &a, Some(from), true),
            Message::Suspect(s) => self.on_suspect(now, &s),
            Message::Dead(d) => self.on_dead(now, &d),
            Message::User(m) => self.events.push_back(Event::UserMsg(m)),
            _ => self.stats.ignored += 1,
        }
    }
}

#[cfg(test)]
mod tests;
