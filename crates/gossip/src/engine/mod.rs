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

mod broadcast;
mod dissemination;
mod members;
mod probe;
mod push_pull;
mod streams;
mod suspicion;
mod types;

pub use members::{MemberState, WireIp};
pub use types::{
    Event, IncomingStream, LocalNode, MemberInfo, NameCache, Stats, StreamFailure, StreamId,
    StreamProgress, StreamRequest, Transmit,
};

use crate::config::{Config, ConfigError};
use crate::wire::{self, Alive, Dead, DecodeError, Framing, Message, Suspect, Transport, packet};
use broadcast::BroadcastQueue;
use core::time::Duration;
use members::{Member, Members};
use probe::{Probe, Relay};
use push_pull::push_pull_scale;
use rand::Rng;
use rand_chacha::ChaCha12Rng;
use rand_core::SeedableRng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use streams::StreamPurpose;
use suspicion::Suspicion;

/// Largest incarnation jump we believe in an accusation or an alive about a known node. A node
/// bumps its incarnation once per refutation, so real jumps are small; a forged message
/// carrying `u32::MAX` would otherwise make the accused unable to refute ever again
/// (hashicorp/memberlist#358).
const MAX_INCARNATION_JUMP: u32 = 1 << 16;

/// Go compares metadata with `bytes.Equal`, for which nil and empty are the same: Go sends
/// nil for the empty metadata we advertise, and must not look like a change.
fn same_meta(a: Option<&[u8]>, b: Option<&[u8]>) -> bool {
    a.unwrap_or_default() == b.unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Deadline {
    Suspicion { episode: u64 },
    Relay { seq: u32 },
}

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
    /// When we last told a node we hold dead that it is dead (see `on_alive`).
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

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.next_gossip.min(self.next_push_pull);
        match &self.probe {
            // `next_probe` stays in the past while a probe runs (it advances when the probe
            // ends), so it only counts when no probe is in progress.
            None => t = t.min(self.next_probe),
            Some(p) => {
                t = t.min(if p.indirect_sent {
                    p.end
                } else {
                    p.ack_deadline
                });
            }
        }
        if let Some(Reverse((d, _))) = self.deadlines.peek() {
            t = t.min(*d);
        }
        if let Some(d) = self.leave_deadline {
            t = t.min(d);
        }
        Some(t)
    }

    // ---- commands ------------------------------------------------------------------------

    /// Leaves gracefully: announces our departure and reports [`Event::LeaveComplete`] once
    /// the announcement has gone out `retransmit` times, or after `timeout`.
    pub fn leave(&mut self, now: Instant, timeout: Duration) {
        if self.leaving {
            return;
        }
        self.leaving = true;
        let name = self.local().name.clone();
        let dead = Dead {
            incarnation: self.incarnation,
            node: name.to_string(),
            from: name.to_string(),
        };
        let anyone_alive = self
            .members
            .list
            .iter()
            .skip(1)
            .any(|m| m.state == MemberState::Alive);
        self.members.list[0].state = MemberState::Left;
        self.members.list[0].state_change = self.members.stamp(now);
        let bytes = Message::Dead(dead).to_vec(Transport::Packet);
        self.broadcasts.push(Some(&name), bytes, anyone_alive);
        if anyone_alive {
            self.leave_deadline = Some(now + timeout);
        } else {
            self.events.push_back(Event::LeaveComplete);
        }
    }

    /// Changes our metadata and tells everyone (a new incarnation).
    pub fn set_meta(&mut self, now: Instant, meta: Vec<u8>) -> Result<(), ConfigError> {
        if meta.len() > wire::META_MAX_SIZE {
            return Err(ConfigError {
                field: "meta",
                problem: format!("{} bytes; at most 512 are allowed", meta.len()),
            });
        }
        self.members.list[0].meta = Some(Box::new(meta.into()));
        self.bump_incarnation(now, self.incarnation);
        Ok(())
    }

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

    /// Adds a member as if its alive message had arrived (static configuration, simulators),
    /// except that it is not queued for gossip: whoever configures the nodes tells each one,
    /// and re-gossiping n static entries from each of n nodes would be an n-squared storm.
    ///
    /// A statically configured table describes a cluster that has been running, whose
    /// members' push/pulls are spread over the interval scaled to its size; so while our first
    /// push/pull is still ahead, it is re-placed at the same random fraction of the interval
    /// scaled to the table's new size (with up to 32 members the scale is 1 and nothing
    /// moves). Otherwise n statically configured nodes would all push/pull within the first
    /// unscaled interval, each with the full table, which no running cluster does.
    pub fn add_member(&mut self, now: Instant, alive: &Alive) {
        self.on_alive(now, alive, None, false);
        self.replace_first_push_pull();
    }

    /// [`add_member`](Self::add_member) for many members at once, with room made for them
    /// first (a simulator bootstraps thousands of engines with thousands of members each).
    pub fn add_members<'a>(&mut self, now: Instant, alives: impl IntoIterator<Item = &'a Alive>) {
        let alives = alives.into_iter();
        self.members.reserve(alives.size_hint().0);
        for a in alives {
            self.on_alive(now, a, None, false);
        }
        self.replace_first_push_pull();
    }

    // ---- inputs --------------------------------------------------------------------------

    /// A UDP datagram arrived.
    pub fn handle_packet(&mut self, now: Instant, from: SocketAddr, bytes: &[u8]) {
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
        for msg in contents.messages {
            self.handle_message(now, from, msg);
        }
    }

    /// Time has come (see [`poll_timeout`](Self::poll_timeout)).
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.leave_deadline
            && now >= d
        {
            self.leave_deadline = None;
            self.events.push_back(Event::LeaveComplete);
        }
        while let Some(Reverse((d, what))) = self.deadlines.peek().copied() {
            if d > now {
                break;
            }
            self.deadlines.pop();
            match what {
                Deadline::Suspicion { episode } => self.suspicion_expired(now, episode, d),
                Deadline::Relay { seq } => self.relay_timer(now, seq),
            }
        }
        if let Some(p) = &self.probe
            && !p.indirect_sent
            && now >= p.ack_deadline
        {
            self.probe_indirect(now);
        }
        if let Some(p) = &self.probe
            && p.indirect_sent
            && now >= p.end
        {
            self.probe_verdict(now);
        }
        if self.probe.is_none() && now >= self.next_probe {
            self.start_probe(now);
        }
        if now >= self.next_gossip {
            self.gossip(now);
            self.next_gossip = advance(self.next_gossip, self.config.gossip_interval, now);
        }
        if now >= self.next_push_pull {
            self.first_push_pull = None;
            self.periodic_push_pull(now);
            let interval = push_pull_scale(self.config.push_pull_interval, self.members.len());
            self.next_push_pull = advance(self.next_push_pull, interval, now);
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
            Message::Nack(n) => self.on_nack(n),
            Message::Alive(a) => self.on_alive(now, &a, Some(from), true),
            Message::Suspect(s) => self.on_suspect(now, &s),
            Message::Dead(d) => self.on_dead(now, &d),
            Message::User(m) => self.events.push_back(Event::UserMsg(m)),
            _ => self.stats.ignored += 1,
        }
    }

    // ---- probing -------------------------------------------------------------------------

    // ---- state machine -------------------------------------------------------------------

    fn own_alive(&self) -> Alive {
        let me = self.local();
        Alive {
            incarnation: self.incarnation,
            node: me.name.to_string(),
            addr: Some(me.ip.as_bytes().to_vec()),
            port: me.port,
            meta: me.meta.as_ref().map(|m| m.to_vec()),
            vsn: Some(me.vsn.to_vec()),
        }
    }

    /// Announces ourselves with an incarnation above `accused` (refutation, meta change,
    /// rejoin). Saturates rather than wrapping to 0 (hashicorp/memberlist#358).
    fn bump_incarnation(&mut self, now: Instant, accused: u32) {
        let next = self
            .incarnation
            .saturating_add(1)
            .max(accused.saturating_add(1));
        self.incarnation = next;
        let stamp = self.members.stamp(now);
        let me = &mut self.members.list[0];
        me.incarnation = next;
        if !self.leaving {
            me.state = MemberState::Alive;
            me.state_change = stamp;
        }
        let alive = Message::Alive(self.own_alive());
        let name = self.local().name.clone();
        self.queue_broadcast(&name, &alive);
    }

    fn refute(&mut self, now: Instant, accused: u32) {
        if self.leaving {
            return;
        }
        self.stats.refutations += 1;
        self.apply_awareness(1);
        self.bump_incarnation(now, accused);
    }

    /// Someone still accuses an incarnation of ours that we already refuted: our refutation
    /// has not reached everyone (its copies were lost), and whoever holds us suspect will
    /// declare us dead when its timer runs out. Go ignores such stale accusations, so one
    /// lost refutation per peer is fatal in a small cluster, where each peer gets one or two
    /// copies. Announce our current incarnation again, unless that announcement is still
    /// queued (so a burst of stale accusations costs one broadcast, not one each).
    fn reannounce(&mut self) {
        if self.leaving {
            return;
        }
        let name = self.local().name.clone();
        if self.broadcasts.contains(&name) {
            return;
        }
        self.stats.reannouncements += 1;
        let alive = Message::Alive(self.own_alive());
        self.queue_broadcast(&name, &alive);
    }

    fn plausible(&mut self, known: u32, claimed: u32) -> bool {
        if claimed > known.saturating_add(MAX_INCARNATION_JUMP) {
            self.stats.implausible_incarnations += 1;
            return false;
        }
        true
    }

    /// `gossip`: whether news is queued for dissemination (not for static configuration).
    fn on_alive(&mut self, now: Instant, a: &Alive, from: Option<SocketAddr>, gossip: bool) {
        let Some(ip) = a.addr.as_deref().and_then(WireIp::from_wire) else {
            self.stats.malformed += 1;
            return;
        };
        if a.node.is_empty() {
            self.stats.malformed += 1;
            return;
        }
        let mut vsn = [0u8; 6];
        if let Some(v) = &a.vsn {
            if v.len() >= 3 && (v[0] == 0 || v[1] == 0 || v[0] > v[1]) {
                self.stats.ignored += 1;
                return;
            }
            let n = v.len().min(6);
            vsn[..n].copy_from_slice(&v[..n]);
        }
        if a.node == self.name() {
            self.on_alive_about_us(now, a, vsn);
            return;
        }
        let i = match self.members.find(&a.node) {
            Some(i) => i,
            None => {
                // New node: enters as dead at incarnation 0, then the rules below revive it.
                let name = match &self.names {
                    Some(cache) => cache.intern(&a.node),
                    None => a.node.as_str().into(),
                };
                let m = Member {
                    name,
                    ip,
                    port: a.port,
                    meta: None,
                    vsn,
                    incarnation: 0,
                    state: MemberState::Dead,
                    state_change: self.members.stamp(now),
                    suspicion: None,
                };
                self.members.insert(m, &mut self.rng)
            }
        };
        let m = &self.members.list[i];
        if m.ip != ip || m.port != a.port {
            let reclaim = m.state == MemberState::Left
                || (m.state == MemberState::Dead
                    && !self.config.dead_node_reclaim_time.is_zero()
                    && self.members.since_change(now, m) >= self.config.dead_node_reclaim_time);
            if !reclaim {
                let existing = MemberInfo::from(m);
                let other_addr = SocketAddr::new(ip.ip(), a.port);
                self.events.push_back(Event::Conflict {
                    existing,
                    other_addr,
                });
                return;
            }
        } else if a.incarnation <= m.incarnation {
            let nudge_due = || {
                self.nudged
                    .get(&*m.name)
                    .is_none_or(|&t| now.saturating_duration_since(t) >= self.config.probe_interval)
            };
            if m.state == MemberState::Dead && from.is_some() && nudge_due() {
                // A node we hold dead speaks with an old incarnation: it restarted and does not
                // know. Tell it directly so it refutes, instead of staying dead in our view
                // forever (hashicorp/memberlist#311).
                let nudge = Message::Suspect(Suspect {
                    incarnation: m.incarnation,
                    node: a.node.clone(),
                    from: self.name().to_string(),
                });
                let to = m.addr();
                if self.nudged.len() > 4096 {
                    // Bounded: forget old nudges rather than grow without limit.
                    self.nudged.clear();
                }
                self.nudged.insert(m.name.clone(), now);
                self.send_msg(to, nudge.to_vec(Transport::Packet));
            }
            self.stats.ignored += 1;
            return;
        }
        let known = self.members.list[i].incarnation;
        if known > 0 && !self.plausible(known, a.incarnation) {
            return;
        }
        // Go compares metadata with bytes.Equal, where nil and empty are the same; keeping
        // empty as None also spares an allocation per member.
        let meta: Option<Arc<[u8]>> = a.meta.as_deref().filter(|m| !m.is_empty()).map(Into::into);
        let m = &self.members.list[i];
        let old_state = m.state;
        let meta_changed = !same_meta(m.meta_bytes(), meta.as_deref());
        if gossip {
            self.queue_broadcast(&a.node, &Message::Alive(a.clone()));
        } else {
            // Whatever we had queued about it is stale now, as if replaced by this alive.
            self.broadcasts.remove(&a.node);
        }
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.suspicion = None;
        m.incarnation = a.incarnation;
        m.ip = ip;
        m.port = a.port;
        m.meta = meta.map(Box::new);
        m.vsn = vsn;
        if m.state != MemberState::Alive {
            m.state = MemberState::Alive;
            m.state_change = stamp;
        }
        let info = MemberInfo::from(&*m);
        match old_state {
            MemberState::Dead | MemberState::Left => self.events.push_back(Event::Join(info)),
            MemberState::Suspect => {
                self.events.push_back(Event::Alive(info.clone()));
                if meta_changed {
                    self.events.push_back(Event::Update(info));
                }
            }
            MemberState::Alive if meta_changed => self.events.push_back(Event::Update(info)),
            MemberState::Alive => {}
        }
    }

    fn on_alive_about_us(&mut self, now: Instant, a: &Alive, vsn: [u8; 6]) {
        if self.leaving || a.incarnation < self.incarnation {
            return;
        }
        let me = self.local();
        let same = a.incarnation == self.incarnation
            && same_meta(a.meta.as_deref(), me.meta_bytes())
            && vsn == me.vsn;
        if same {
            return;
        }
        if !self.plausible(self.incarnation, a.incarnation) {
            return;
        }
        self.refute(now, a.incarnation);
    }

    fn on_suspect(&mut self, now: Instant, s: &Suspect) {
        let Some(i) = self.members.find(&s.node) else {
            self.stats.ignored += 1;
            return;
        };
        let m = &self.members.list[i];
        if s.incarnation < m.incarnation {
            if i == 0 {
                self.reannounce();
            }
            self.stats.ignored += 1;
            return;
        }
        if !self.plausible(m.incarnation, s.incarnation) {
            return;
        }
        if i == 0 {
            self.refute(now, s.incarnation);
            return;
        }
        if let Some(susp) = self.members.list[i].suspicion.as_deref_mut() {
            if susp.confirm(&s.from) {
                let (deadline, episode) = (susp.deadline(), susp.episode);
                self.deadlines
                    .push(Reverse((deadline, Deadline::Suspicion { episode })));
                self.queue_broadcast(&s.node, &Message::Suspect(s.clone()));
            }
            return;
        }
        if self.members.list[i].state != MemberState::Alive {
            return;
        }
        if s.from == self.name() {
            self.stats.suspicions_raised += 1;
        } else if self.config.probe_on_suspicion {
            let name = self.members.list[i].name.clone();
            if self.probe.as_ref().is_none_or(|p| p.target != name) {
                self.urgent_probes.push_back(name);
                if self.probe.is_none() {
                    self.next_probe = self.next_probe.min(now);
                }
            }
        }
        self.queue_broadcast(&s.node, &Message::Suspect(s.clone()));
        let n = self.members.len();
        let mut k = self.config.suspicion_mult.saturating_sub(2);
        if n.saturating_sub(2) < k {
            k = 0;
        }
        let min = suspicion::min_timeout(self.config.suspicion_mult, n, self.config.probe_interval);
        let max = if self.config.lifeguard {
            min * self.config.suspicion_max_timeout_mult as u32
        } else {
            min
        };
        if !self.config.lifeguard {
            k = 0;
        }
        self.next_episode += 1;
        let episode = self.next_episode;
        let susp = Suspicion::new(now, &s.from, k, min, max, episode);
        let deadline = susp.deadline();
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.incarnation = s.incarnation;
        m.state = MemberState::Suspect;
        m.state_change = stamp;
        m.suspicion = Some(Box::new(susp));
        let info = MemberInfo::from(&*m);
        self.suspect_episodes.insert(episode, info.name.clone());
        self.deadlines
            .push(Reverse((deadline, Deadline::Suspicion { episode })));
        self.events.push_back(Event::Suspect {
            member: info,
            from: s.from.as_str().into(),
        });
    }

    fn suspicion_expired(&mut self, now: Instant, episode: u64, fired: Instant) {
        let Some(name) = self.suspect_episodes.get(&episode).cloned() else {
            return;
        };
        let Some(i) = self.members.find(&name) else {
            self.suspect_episodes.remove(&episode);
            return;
        };
        let m = &self.members.list[i];
        let Some(s) = m.suspicion.as_deref().filter(|s| s.episode == episode) else {
            self.suspect_episodes.remove(&episode);
            return;
        };
        if s.deadline() > fired {
            // A stale heap entry; the current deadline has its own entry.
            return;
        }
        self.suspect_episodes.remove(&episode);
        self.stats.deaths_declared += 1;
        let d = Dead {
            incarnation: m.incarnation,
            node: name.to_string(),
            from: self.name().to_string(),
        };
        self.on_dead(now, &d);
    }

    fn on_dead(&mut self, now: Instant, d: &Dead) {
        let Some(i) = self.members.find(&d.node) else {
            self.stats.ignored += 1;
            return;
        };
        let m = &self.members.list[i];
        if d.incarnation < m.incarnation {
            if i == 0 && !self.leaving {
                self.reannounce();
            }
            self.stats.ignored += 1;
            return;
        }
        let known = m.incarnation;
        if !self.plausible(known, d.incarnation) {
            return;
        }
        if i == 0 {
            if !self.leaving {
                self.refute(now, d.incarnation);
            } else {
                self.queue_broadcast(&d.node, &Message::Dead(d.clone()));
            }
            return;
        }
        if self.members.list[i].state.is_gone() {
            return;
        }
        self.queue_broadcast(&d.node, &Message::Dead(d.clone()));
        let stamp = self.members.stamp(now);
        let m = &mut self.members.list[i];
        m.suspicion = None;
        m.incarnation = d.incarnation;
        m.state = if d.from == d.node {
            MemberState::Left
        } else {
            MemberState::Dead
        };
        m.state_change = stamp;
        let info = MemberInfo::from(&*m);
        self.events.push_back(if info.state == MemberState::Left {
            Event::Left(info)
        } else {
            Event::Dead(info)
        });
    }

    // ---- gossip and sending --------------------------------------------------------------

    // ---- push/pull -----------------------------------------------------------------------
}

/// The first tick of a `period`-spaced schedule that lies after `now`.
fn advance(mut at: Instant, period: Duration, now: Instant) -> Instant {
    if period.is_zero() {
        return now + Duration::from_secs(365 * 24 * 3600);
    }
    while at <= now {
        at += period;
    }
    at
}

#[cfg(test)]
mod tests;
