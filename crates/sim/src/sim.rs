//! The simulator: many [`Membership`]s, one virtual clock, one event queue.

use crate::metrics::{Failure, FailureKind, FalsePositive, Metrics, TraceHash};
use crate::net::{self, Link, Network, NodeId};
use core::cmp::Ordering;
use core::time::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BinaryHeap, HashSet};
use std::net::SocketAddr;
use std::time::Instant;
use vigil_gossip::wire::{Alive, Framing};
use vigil_gossip::{
    Config, Event, IncomingStream, LocalNode, Membership, StreamFailure, StreamId, StreamProgress,
};

/// How a simulation is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The engine configuration every node runs.
    pub gossip: Config,
    /// Label, encryption and compression settings of every node.
    pub framing: Framing,
    /// The seed for everything: links, and each node's engine.
    pub seed: u64,
    /// Every link's loss, latency and jitter (see [`Sim::network_mut`] for overrides).
    pub link: Link,
    /// Hash every datagram, stream and event into [`Sim::trace_hash`] (costs time).
    pub trace: bool,
    /// Print every engine event to stderr.
    pub log_events: bool,
    /// Print every datagram sent, decoded, to stderr.
    pub log_packets: bool,
}

impl SimConfig {
    /// `gossip` on a clean LAN.
    pub fn new(gossip: Config, seed: u64) -> Self {
        Self {
            gossip,
            framing: Framing::default(),
            seed,
            link: Link::LAN,
            trace: false,
            log_events: false,
            log_packets: false,
        }
    }
}

/// What state a simulated node is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Running.
    Up,
    /// Running, and has been asked to leave (stops when its leave completes).
    Leaving,
    /// Paused: inputs are held and processed when it thaws.
    Frozen,
    /// Gone. With `process` set only the process died: the host answers datagrams with ICMP
    /// port unreachable and refuses TCP. Otherwise the host vanished and nothing answers.
    Down {
        /// Whether only the process died.
        process: bool,
    },
    /// Left cleanly and stopped (the host answers like a dead process).
    Left,
}

impl NodeStatus {
    /// Whether the node runs (up or leaving).
    pub fn is_running(self) -> bool {
        matches!(self, Self::Up | Self::Leaving)
    }
}

/// Progress of a long run, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Virtual time.
    pub now: Duration,
    /// Simulator events processed so far.
    pub events: u64,
    /// Events waiting in the queue.
    pub queued: usize,
    /// While bootstrapping: nodes done, of how many.
    pub bootstrap: Option<(usize, usize)>,
}

impl Progress {
    /// A closure for [`Sim`] runs that prints a progress line on stderr, at most every 2 s of
    /// wall time: bootstrapping, then virtual time, speed against real time and events.
    pub fn stderr_printer() -> impl FnMut(Self) {
        use std::io::Write as _;
        let started = Instant::now();
        let mut last = started;
        move |p: Self| {
            let now = Instant::now();
            if now.duration_since(last) < Duration::from_secs(2) {
                return;
            }
            last = now;
            let wall = now.duration_since(started).as_secs_f64();
            if let Some((done, of)) = p.bootstrap {
                eprint!(
                    "\r[sim] bootstrapping: {done} of {of} nodes told about every other, wall {wall:.0} s   "
                );
                let _ = std::io::stderr().flush();
                return;
            }
            eprint!(
                "\r[sim] virtual {:.1} s, wall {:.0} s, {:.2}x real time, {} M events, {} queued   ",
                p.now.as_secs_f64(),
                wall,
                p.now.as_secs_f64() / wall.max(1e-9),
                p.events / 1_000_000,
                p.queued
            );
            let _ = std::io::stderr().flush();
        }
    }
}

#[derive(Debug)]
enum Input {
    Packet {
        from: SocketAddr,
        bytes: Vec<u8>,
    },
    StreamIn {
        dialer: NodeId,
        dialer_life: u32,
        id: StreamId,
        bytes: Vec<u8>,
        expects_reply: bool,
    },
    StreamReply {
        id: StreamId,
        bytes: Vec<u8>,
    },
    StreamFailed {
        id: StreamId,
        why: StreamFailure,
    },
    Unreachable {
        addr: SocketAddr,
    },
    Timeout,
}

#[derive(Debug)]
enum Kind {
    /// An input for a node; `life` set means only for that life of the node (replies to
    /// what that life asked for).
    Deliver {
        node: NodeId,
        life: Option<u32>,
        input: Input,
        delayed: bool,
    },
    Wake {
        node: NodeId,
        generation: u64,
    },
    StreamDeadline {
        node: NodeId,
        life: u32,
        id: StreamId,
    },
    Thaw {
        node: NodeId,
        life: u32,
    },
}

/// A queue entry: when, in what order, and where its [`Kind`] waits. The heap moves entries
/// on every push and pop, so they stay small (24 bytes) and the payload sits in a slab.
#[derive(Debug)]
struct Item {
    at: u64,
    seq: u64,
    slot: u32,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    /// Reversed, so that the `BinaryHeap` pops the earliest (then first queued) item.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

struct Node {
    addr: SocketAddr,
    engine: Option<Membership>,
    status: NodeStatus,
    life: u32,
    wake_generation: u64,
    wake_at: Option<u64>,
    /// A delayed `Timeout` is on its way through the slow-node pipeline.
    timeout_in_flight: bool,
    slow: u64,
    held: Vec<Input>,
    open_failure: Option<usize>,
    spin_at: u64,
    spins: u32,
}

type ProgressFn = Box<dyn FnMut(Progress)>;

/// Many gossip engines on one virtual clock. See the crate docs for the model.
pub struct Sim {
    config: SimConfig,
    base: Instant,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Item>,
    /// The queued events' payloads, by `Item::slot`; free slots are listed in `free_slots`.
    slots: Vec<Option<Kind>>,
    free_slots: Vec<u32>,
    nodes: Vec<Node>,
    net: Network,
    rng: ChaCha8Rng,
    pending_streams: HashSet<(NodeId, u32, u64)>,
    names: vigil_gossip::NameCache,
    metrics: Metrics,
    trace: TraceHash,
    progress: Option<(u64, ProgressFn)>,
    out_transmits: Vec<vigil_gossip::Transmit>,
    out_streams: Vec<vigil_gossip::StreamRequest>,
    out_events: Vec<Event>,
}

impl core::fmt::Debug for Sim {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now())
            .field("nodes", &self.nodes.len())
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// splitmix64: derives independent seeds from the master seed.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Sim {
    /// An empty simulation at virtual time zero.
    pub fn new(config: SimConfig) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(mix(config.seed));
        let net = Network::new(config.link);
        Self {
            base: Instant::now(),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            nodes: Vec::new(),
            net,
            rng,
            pending_streams: HashSet::new(),
            names: vigil_gossip::NameCache::default(),
            metrics: Metrics::default(),
            trace: TraceHash::default(),
            progress: None,
            out_transmits: Vec::new(),
            out_streams: Vec::new(),
            out_events: Vec::new(),
            config,
        }
    }

    // ---- queries -------------------------------------------------------------------------

    /// Virtual time since the start.
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now)
    }

    /// The `Instant` the engines see at virtual time zero.
    pub fn base(&self) -> Instant {
        self.base
    }

    /// The simulation's configuration.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// Number of nodes ever added.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node was added yet.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// A node's status.
    pub fn status(&self, id: NodeId) -> NodeStatus {
        self.nodes[id].status
    }

    /// A node's engine, unless it is down.
    pub fn engine(&self, id: NodeId) -> Option<&Membership> {
        self.nodes[id].engine.as_ref()
    }

    /// Nodes that are running (up or leaving).
    pub fn running(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len()).filter(|&i| self.nodes[i].status.is_running())
    }

    /// Whether a node is running or frozen (its process exists).
    pub fn is_alive(&self, id: NodeId) -> bool {
        matches!(
            self.nodes[id].status,
            NodeStatus::Up | NodeStatus::Leaving | NodeStatus::Frozen
        )
    }

    /// Measurements so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The trace hash (only meaningful with [`SimConfig::trace`]).
    pub fn trace_hash(&self) -> u64 {
        self.trace.value()
    }

    /// The network, to change links or partitions directly.
    pub fn network_mut(&mut self) -> &mut Network {
        &mut self.net
    }

    /// The network.
    pub fn network(&self) -> &Network {
        &self.net
    }

    /// Calls `f` every `every` simulator events (for a progress line).
    pub fn set_progress(&mut self, every: u64, f: Box<dyn FnMut(Progress)>) {
        self.progress = Some((every.max(1), f));
    }

    fn instant(&self) -> Instant {
        self.base + Duration::from_nanos(self.now)
    }

    // ---- building ------------------------------------------------------------------------

    fn node_seed(&self, id: NodeId, life: u32) -> [u8; 32] {
        let mut seed = [0u8; 32];
        let mut s = mix(self.config.seed ^ mix(id as u64 + 1) ^ (u64::from(life) << 40));
        for chunk in seed.chunks_mut(8) {
            s = mix(s);
            chunk.copy_from_slice(&s.to_le_bytes());
        }
        seed
    }

    fn new_engine(&self, id: NodeId, life: u32) -> Membership {
        let local = LocalNode {
            name: net::name_of(id),
            addr: net::addr_of(id),
            meta: Vec::new(),
        };
        let mut engine = Membership::new(
            self.config.gossip.clone(),
            self.config.framing.clone(),
            local,
            self.node_seed(id, life),
            self.instant(),
        )
        .expect("a valid gossip configuration");
        // One copy of each member name for the whole simulation, not one per table.
        engine.set_name_cache(self.names.clone());
        engine
    }

    /// Adds a node that knows nobody yet (use [`bootstrap`](Self::bootstrap) or
    /// [`join`](Self::join)).
    pub fn add_node(&mut self) -> NodeId {
        let id = self.nodes.len();
        let engine = self.new_engine(id, 0);
        self.nodes.push(Node {
            addr: net::addr_of(id),
            engine: Some(engine),
            status: NodeStatus::Up,
            life: 0,
            wake_generation: 0,
            wake_at: None,
            timeout_in_flight: false,
            slow: 0,
            held: Vec::new(),
            open_failure: None,
            spin_at: 0,
            spins: 0,
        });
        self.net.grow(self.nodes.len());
        self.metrics.suspected.push(0);
        self.metrics.declared_dead.push(0);
        self.drain(id);
        id
    }

    /// Adds `n` nodes.
    pub fn add_nodes(&mut self, n: usize) -> core::ops::Range<NodeId> {
        let start = self.nodes.len();
        for _ in 0..n {
            self.add_node();
        }
        start..self.nodes.len()
    }

    /// Tells every running node about every other one directly (`add_member`), as if the
    /// cluster had converged: the way to start big clusters without simulating the join.
    pub fn bootstrap(&mut self) {
        let up: Vec<NodeId> = self.running().collect();
        let alives: Vec<Alive> = up
            .iter()
            .map(|&j| {
                let e = self.nodes[j].engine.as_ref().expect("running");
                let addr = self.nodes[j].addr;
                Alive {
                    incarnation: e.incarnation(),
                    node: net::name_of(j),
                    addr: Some(vigil_gossip::wire::ip_to_wire(addr.ip())),
                    port: addr.port(),
                    // Go sends an empty meta as empty bytes; None (nil) saves an allocation
                    // per entry, which matters at 10^8 entries.
                    meta: None,
                    vsn: Some(vec![
                        vigil_gossip::wire::PROTOCOL_VERSION_MIN,
                        vigil_gossip::wire::PROTOCOL_VERSION_MAX,
                        self.config.gossip.protocol_version,
                        self.config.gossip.delegate_version[0],
                        self.config.gossip.delegate_version[1],
                        self.config.gossip.delegate_version[2],
                    ]),
                }
            })
            .collect();
        let now = self.instant();
        for (done, &i) in up.iter().enumerate() {
            let (now_v, events) = (self.now(), self.metrics.sim_events);
            if let Some((_, f)) = &mut self.progress
                && done % 64 == 0
            {
                f(Progress {
                    now: now_v,
                    events,
                    queued: self.queue.len(),
                    bootstrap: Some((done, up.len())),
                });
            }
            let e = self.nodes[i].engine.as_mut().expect("running");
            let others = alives[..done].iter().chain(&alives[done + 1..]);
            e.add_members(now, others);
            // Bootstrap events (one Join per member) are not part of the story. Draining
            // them empty gives back the event queue's room (the engine shrinks it), so only
            // one engine at a time holds n events.
            while e.poll_event().is_some() {}
            self.drain(i);
        }
    }

    /// Node `id` joins through `seeds` (a push/pull with each).
    pub fn join(&mut self, id: NodeId, seeds: &[NodeId]) {
        let addrs: Vec<SocketAddr> = seeds.iter().map(|&s| net::addr_of(s)).collect();
        let now = self.instant();
        if let Some(e) = self.nodes[id].engine.as_mut() {
            e.join(now, &addrs);
        }
        self.drain(id);
    }

    // ---- faults --------------------------------------------------------------------------

    fn observers(&self, except: NodeId) -> usize {
        (0..self.nodes.len())
            .filter(|&i| {
                i != except && matches!(self.nodes[i].status, NodeStatus::Up | NodeStatus::Frozen)
            })
            .count()
    }

    /// Crashes a node. `process` only kills the process (the host answers with ICMP port
    /// unreachable and refuses TCP); otherwise the host vanishes.
    pub fn crash(&mut self, id: NodeId, process: bool) {
        let observers = self.observers(id);
        let at = self.now();
        let node = &mut self.nodes[id];
        node.engine = None;
        node.held.clear();
        node.status = NodeStatus::Down { process };
        node.wake_generation += 1;
        node.wake_at = None;
        let f = Failure::new(id, FailureKind::Crash, at, observers);
        self.metrics.failures.push(f);
        node.open_failure = Some(self.metrics.failures.len() - 1);
        self.trace_mark(id, 1);
    }

    /// Pauses a node (like SIGSTOP): its inputs and timers wait until [`thaw`](Self::thaw).
    pub fn freeze(&mut self, id: NodeId) {
        if self.nodes[id].status.is_running() {
            self.nodes[id].status = NodeStatus::Frozen;
            self.trace_mark(id, 2);
        }
    }

    /// Freezes a node for `d`.
    pub fn freeze_for(&mut self, id: NodeId, d: Duration) {
        self.freeze(id);
        let life = self.nodes[id].life;
        self.schedule(self.now + nanos(d), Kind::Thaw { node: id, life });
    }

    /// Resumes a frozen node: everything it was sent meanwhile arrives now, in order.
    pub fn thaw(&mut self, id: NodeId) {
        if self.nodes[id].status != NodeStatus::Frozen {
            return;
        }
        self.nodes[id].status = NodeStatus::Up;
        self.trace_mark(id, 3);
        let held = std::mem::take(&mut self.nodes[id].held);
        for input in held {
            self.input(id, input);
        }
        self.input(id, Input::Timeout);
    }

    /// Makes every input of a node (datagrams, streams, timers) wait `delay` before it is
    /// processed; `None` makes it normal again.
    pub fn set_slow(&mut self, id: NodeId, delay: Option<Duration>) {
        self.nodes[id].slow = delay.map_or(0, nanos);
    }

    /// A clean leave: the node announces it, and stops once the announcement went out.
    pub fn leave(&mut self, id: NodeId, timeout: Duration) {
        if !self.nodes[id].status.is_running() {
            return;
        }
        let observers = self.observers(id);
        let f = Failure::new(id, FailureKind::Leave, self.now(), observers);
        self.metrics.failures.push(f);
        self.nodes[id].open_failure = Some(self.metrics.failures.len() - 1);
        self.nodes[id].status = NodeStatus::Leaving;
        let now = self.instant();
        if let Some(e) = self.nodes[id].engine.as_mut() {
            e.leave(now, timeout);
        }
        self.trace_mark(id, 4);
        self.drain(id);
    }

    /// Starts a fresh engine under the same name and address (incarnation 1, empty table),
    /// which joins through `seeds`. Closes the node's open failure.
    pub fn restart(&mut self, id: NodeId, seeds: &[NodeId]) {
        let life = self.nodes[id].life + 1;
        let engine = self.new_engine(id, life);
        let node = &mut self.nodes[id];
        node.life = life;
        node.engine = Some(engine);
        node.status = NodeStatus::Up;
        node.held.clear();
        node.wake_generation += 1;
        node.wake_at = None;
        node.timeout_in_flight = false;
        if let Some(f) = node.open_failure.take() {
            self.metrics.failures[f].open = false;
        }
        self.trace_mark(id, 5);
        self.join(id, seeds);
    }

    /// Splits the network: each group reaches only itself; unlisted nodes form one more group.
    pub fn partition(&mut self, groups: &[&[NodeId]]) {
        self.net.partition(self.nodes.len(), groups);
        self.trace_mark(0, 6);
    }

    /// Ends the partition.
    pub fn heal(&mut self) {
        self.net.heal();
        self.trace_mark(0, 7);
    }

    fn trace_mark(&mut self, id: NodeId, what: u64) {
        if self.config.trace {
            self.trace.u64(self.now);
            self.trace.u64(id as u64);
            self.trace.u64(0xfa00 + what);
        }
    }

    // ---- running -------------------------------------------------------------------------

    fn schedule(&mut self, at: u64, kind: Kind) {
        self.seq += 1;
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(kind);
                slot
            }
            None => {
                self.slots.push(Some(kind));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 queued events")
            }
        };
        self.queue.push(Item {
            at: at.max(self.now),
            seq: self.seq,
            slot,
        });
    }

    /// Runs until virtual time `t` (events at exactly `t` included).
    pub fn run_until(&mut self, t: Duration) {
        let t = nanos(t);
        while let Some(item) = self.queue.peek() {
            if item.at > t {
                break;
            }
            let item = self.queue.pop().expect("peeked");
            let kind = self.slots[item.slot as usize]
                .take()
                .expect("a queued item has its payload");
            self.free_slots.push(item.slot);
            self.now = item.at;
            self.metrics.sim_events += 1;
            if let Some((every, f)) = &mut self.progress
                && self.metrics.sim_events.is_multiple_of(*every)
            {
                f(Progress {
                    now: Duration::from_nanos(self.now),
                    events: self.metrics.sim_events,
                    queued: self.queue.len(),
                    bootstrap: None,
                });
            }
            self.dispatch(kind);
        }
        self.now = self.now.max(t);
    }

    /// Runs for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now() + d);
    }

    /// Runs until `done` holds (checked every `step`), or until `deadline`. Returns whether
    /// `done` held.
    pub fn run_until_cond(
        &mut self,
        deadline: Duration,
        step: Duration,
        mut done: impl FnMut(&Self) -> bool,
    ) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now() >= deadline {
                return false;
            }
            let next = (self.now() + step).min(deadline);
            self.run_until(next);
        }
    }

    fn dispatch(&mut self, kind: Kind) {
        match kind {
            Kind::Deliver {
                node,
                life,
                input,
                delayed,
            } => {
                if life.is_some_and(|l| l != self.nodes[node].life) {
                    return;
                }
                if delayed {
                    if matches!(input, Input::Timeout) {
                        self.nodes[node].timeout_in_flight = false;
                    }
                    self.process(node, input);
                } else {
                    self.input(node, input);
                }
            }
            Kind::Wake { node, generation } => {
                let n = &mut self.nodes[node];
                if n.wake_generation != generation {
                    return;
                }
                n.wake_at = None;
                self.input(node, Input::Timeout);
            }
            Kind::StreamDeadline { node, life, id } => {
                if self.pending_streams.remove(&(node, life, id.0)) && self.nodes[node].life == life
                {
                    self.input(
                        node,
                        Input::StreamFailed {
                            id,
                            why: StreamFailure::TimedOut,
                        },
                    );
                }
            }
            Kind::Thaw { node, life } => {
                if self.nodes[node].life == life {
                    self.thaw(node);
                }
            }
        }
    }

    /// An input reaches a node's host.
    fn input(&mut self, id: NodeId, input: Input) {
        match self.nodes[id].status {
            NodeStatus::Down { process } => self.bounce(id, input, process),
            NodeStatus::Left => self.bounce(id, input, true),
            NodeStatus::Frozen => {
                if !matches!(input, Input::Timeout) {
                    self.nodes[id].held.push(input);
                }
            }
            NodeStatus::Up | NodeStatus::Leaving => {
                let slow = self.nodes[id].slow;
                if slow > 0 {
                    if matches!(input, Input::Timeout) {
                        if self.nodes[id].timeout_in_flight {
                            return;
                        }
                        self.nodes[id].timeout_in_flight = true;
                    }
                    let at = self.now + slow;
                    self.schedule(
                        at,
                        Kind::Deliver {
                            node: id,
                            life: Some(self.nodes[id].life),
                            input,
                            delayed: true,
                        },
                    );
                } else {
                    self.process(id, input);
                }
            }
        }
    }

    /// What a host without a gossip process does with an input.
    fn bounce(&mut self, id: NodeId, input: Input, process_gone: bool) {
        if !process_gone {
            return;
        }
        match input {
            Input::Packet { from, .. } => {
                if let Some(sender) = net::node_of(from) {
                    let at = self.now + self.delay(id, sender);
                    let addr = self.nodes[id].addr;
                    let life = Some(self.nodes[sender].life);
                    self.schedule(
                        at,
                        Kind::Deliver {
                            node: sender,
                            life,
                            input: Input::Unreachable { addr },
                            delayed: false,
                        },
                    );
                }
            }
            Input::StreamIn {
                dialer,
                dialer_life,
                id: sid,
                expects_reply: true,
                ..
            } if self.pending_streams.remove(&(dialer, dialer_life, sid.0)) => {
                let at = self.now + self.delay(id, dialer);
                self.schedule(
                    at,
                    Kind::Deliver {
                        node: dialer,
                        life: Some(dialer_life),
                        input: Input::StreamFailed {
                            id: sid,
                            why: StreamFailure::Refused,
                        },
                        delayed: false,
                    },
                );
            }
            _ => {}
        }
    }

    /// A running node handles an input now.
    fn process(&mut self, id: NodeId, input: Input) {
        if !self.nodes[id].status.is_running() {
            // Frozen or stopped while the input was delayed.
            self.input(id, input);
            return;
        }
        let now = self.instant();
        let is_timeout = matches!(input, Input::Timeout);
        let Some(e) = self.nodes[id].engine.as_mut() else {
            return;
        };
        let mut reply = None;
        match input {
            Input::Packet { from, bytes } => e.handle_packet(now, from, &bytes),
            Input::StreamIn {
                dialer,
                dialer_life,
                id: sid,
                bytes,
                expects_reply,
            } => {
                let r = e.handle_incoming_stream(now, &bytes);
                if expects_reply {
                    reply = Some((dialer, dialer_life, sid, r));
                }
            }
            Input::StreamReply { id: sid, bytes } => {
                if e.handle_stream_response(now, sid, &bytes) == StreamProgress::NeedMore {
                    // The whole reply arrives at once: an incomplete one is a broken stream.
                    e.handle_stream_failed(now, sid, StreamFailure::Io);
                }
            }
            Input::StreamFailed { id: sid, why } => e.handle_stream_failed(now, sid, why),
            Input::Unreachable { addr } => e.handle_unreachable(now, addr),
            Input::Timeout => e.handle_timeout(now),
        }
        if let Some((dialer, dialer_life, sid, r)) = reply {
            self.stream_reply(id, dialer, dialer_life, sid, r);
        }
        if is_timeout {
            let n = &mut self.nodes[id];
            if n.spin_at == self.now {
                n.spins += 1;
            } else {
                n.spin_at = self.now;
                n.spins = 0;
            }
        }
        self.drain(id);
    }

    fn stream_reply(
        &mut self,
        from: NodeId,
        dialer: NodeId,
        dialer_life: u32,
        sid: StreamId,
        r: IncomingStream,
    ) {
        if self.net.partitioned(from, dialer) {
            return; // the dialer times out
        }
        let at = self.now + self.delay(from, dialer) + self.tcp_retransmits(from, dialer, false);
        let input = match r {
            IncomingStream::Reply(bytes) => {
                self.metrics.traffic.stream_bytes += bytes.len() as u64;
                if self.config.trace {
                    self.trace.u64(self.now);
                    self.trace.u64(0x5e);
                    self.trace.bytes(&bytes);
                }
                Input::StreamReply { id: sid, bytes }
            }
            IncomingStream::NeedMore | IncomingStream::Close | IncomingStream::Rejected(_) => {
                Input::StreamFailed {
                    id: sid,
                    why: StreamFailure::Io,
                }
            }
        };
        if !self.pending_streams.remove(&(dialer, dialer_life, sid.0)) {
            return;
        }
        self.schedule(
            at,
            Kind::Deliver {
                node: dialer,
                life: Some(dialer_life),
                input,
                delayed: false,
            },
        );
    }

    fn delay(&mut self, a: NodeId, b: NodeId) -> u64 {
        let link = self.net.link(a, b);
        let jitter = nanos(link.jitter);
        nanos(link.latency)
            + if jitter > 0 {
                self.rng.gen_range(0..jitter)
            } else {
                0
            }
    }

    /// Extra delay of one TCP leg over a lossy link: every lost segment waits for a
    /// retransmission timeout, doubling each time (Linux: 1 s for a SYN or SYN-ACK, 200 ms
    /// minimum for data). `handshake` adds the connection setup (SYN, SYN-ACK).
    fn tcp_retransmits(&mut self, a: NodeId, b: NodeId, handshake: bool) -> u64 {
        let loss = self.net.link(a, b).loss;
        if loss <= 0.0 {
            return 0;
        }
        let mut extra = 0;
        let mut lost = |rng: &mut ChaCha8Rng, mut rto: u64| {
            for _ in 0..6 {
                if rng.r#gen::<f64>() >= loss {
                    break;
                }
                extra += rto;
                rto *= 2;
            }
        };
        if handshake {
            lost(&mut self.rng, 1_000_000_000);
            lost(&mut self.rng, 1_000_000_000);
        }
        lost(&mut self.rng, 200_000_000);
        extra
    }

    /// Collects a node's output: datagrams, streams, events; reschedules its wake-up.
    fn drain(&mut self, id: NodeId) {
        let mut transmits = std::mem::take(&mut self.out_transmits);
        let mut streams = std::mem::take(&mut self.out_streams);
        let mut events = std::mem::take(&mut self.out_events);
        let wake = {
            let Some(e) = self.nodes[id].engine.as_mut() else {
                return;
            };
            while let Some(t) = e.poll_transmit() {
                transmits.push(t);
            }
            while let Some(s) = e.poll_stream() {
                streams.push(s);
            }
            while let Some(ev) = e.poll_event() {
                events.push(ev);
            }
            e.poll_timeout()
        };
        for t in transmits.drain(..) {
            self.send(id, t);
        }
        for s in streams.drain(..) {
            self.dial(id, s);
        }
        let mut stop = false;
        for ev in events.drain(..) {
            stop |= self.observe(id, ev);
        }
        self.out_transmits = transmits;
        self.out_streams = streams;
        self.out_events = events;
        if stop {
            self.stop_after_leave(id);
            return;
        }
        if let Some(w) = wake {
            let mut at = nanos(w.saturating_duration_since(self.base)).max(self.now);
            let n = &mut self.nodes[id];
            if at == self.now && n.spin_at == self.now && n.spins > 1_000 {
                // The engine keeps asking to be woken now: move on rather than spin.
                at += 1_000;
                self.metrics.engine_spins += 1;
            }
            if n.wake_at != Some(at) {
                n.wake_generation += 1;
                n.wake_at = Some(at);
                let generation = n.wake_generation;
                self.schedule(
                    at,
                    Kind::Wake {
                        node: id,
                        generation,
                    },
                );
            }
        }
    }

    fn stop_after_leave(&mut self, id: NodeId) {
        let n = &mut self.nodes[id];
        n.engine = None;
        n.status = NodeStatus::Left;
        n.wake_generation += 1;
        n.wake_at = None;
        self.trace_mark(id, 8);
    }

    fn send(&mut self, from: NodeId, t: vigil_gossip::Transmit) {
        if self.config.log_packets {
            let msgs = vigil_gossip::wire::packet::open(&self.config.framing, &t.bytes)
                .map(|c| c.messages);
            eprintln!(
                "{:>12.6} node-{from:05} -> {}: {msgs:?}",
                self.now().as_secs_f64(),
                t.to
            );
        }
        let traffic = &mut self.metrics.traffic;
        traffic.packets += 1;
        traffic.bytes += t.bytes.len() as u64;
        if self.config.trace {
            self.trace.u64(self.now);
            self.trace.u64(from as u64);
            self.trace.u64(0xda7a);
            self.trace.bytes(t.to.to_string().as_bytes());
            self.trace.bytes(&t.bytes);
        }
        let Some(to) = net::node_of(t.to).filter(|&n| n < self.nodes.len()) else {
            self.metrics.traffic.dropped += 1;
            return;
        };
        let link = self.net.link(from, to);
        if self.net.partitioned(from, to)
            || (link.loss > 0.0 && self.rng.r#gen::<f64>() < link.loss)
        {
            self.metrics.traffic.dropped += 1;
            return;
        }
        let at = self.now + self.delay(from, to);
        let src = self.nodes[from].addr;
        self.schedule(
            at,
            Kind::Deliver {
                node: to,
                life: None,
                input: Input::Packet {
                    from: src,
                    bytes: t.bytes,
                },
                delayed: false,
            },
        );
    }

    fn dial(&mut self, from: NodeId, s: vigil_gossip::StreamRequest) {
        self.metrics.traffic.streams += 1;
        self.metrics.traffic.stream_bytes += s.bytes.len() as u64;
        if self.config.trace {
            self.trace.u64(self.now);
            self.trace.u64(from as u64);
            self.trace.u64(0x57);
            self.trace.bytes(&s.bytes);
        }
        let life = self.nodes[from].life;
        if s.expects_reply {
            self.pending_streams.insert((from, life, s.id.0));
            let deadline = nanos(s.deadline.saturating_duration_since(self.base));
            self.schedule(
                deadline,
                Kind::StreamDeadline {
                    node: from,
                    life,
                    id: s.id,
                },
            );
        }
        let Some(to) = net::node_of(s.to).filter(|&n| n < self.nodes.len()) else {
            return; // nobody there: the deadline fires
        };
        if self.net.partitioned(from, to) {
            return;
        }
        let at = self.now + self.delay(from, to) + self.tcp_retransmits(from, to, true);
        self.schedule(
            at,
            Kind::Deliver {
                node: to,
                life: None,
                input: Input::StreamIn {
                    dialer: from,
                    dialer_life: life,
                    id: s.id,
                    bytes: s.bytes,
                    expects_reply: s.expects_reply,
                },
                delayed: false,
            },
        );
    }

    /// Records an engine event from node `by`. Returns true if the node finished leaving.
    fn observe(&mut self, by: NodeId, ev: Event) -> bool {
        self.metrics.engine_events += 1;
        let now = self.now();
        let (tag, about) = match &ev {
            Event::Join(m) => (1, Some(m)),
            Event::Update(m) => (2, Some(m)),
            Event::Suspect { member, .. } => (3, Some(member)),
            Event::Refuted(m) => (4, Some(m)),
            Event::Dead(m) => (5, Some(m)),
            Event::Left(m) => (6, Some(m)),
            Event::LeaveComplete => (7, None),
            _ => (8, None),
        };
        if self.config.trace {
            self.trace.u64(self.now);
            self.trace.u64(by as u64);
            self.trace.u64(tag);
            if let Some(m) = about {
                self.trace.bytes(m.name.as_bytes());
                self.trace.u64(u64::from(m.incarnation));
            }
        }
        if self.config.log_events {
            eprintln!("{:>12.6} node-{by:05} {ev:?}", self.now().as_secs_f64());
        }
        let target = about.and_then(|m| net::node_named(&m.name));
        if let Some(t) = target.filter(|&t| t < self.nodes.len()) {
            match ev {
                Event::Suspect { .. } => self.metrics.suspected[t] += 1,
                Event::Dead(_) => self.metrics.declared_dead[t] += 1,
                _ => {}
            }
        }
        match (&ev, target) {
            (Event::Dead(_), Some(t)) => self.on_dead(by, t, now, true),
            (Event::Left(_), Some(t)) => self.on_dead(by, t, now, false),
            (Event::Suspect { .. }, Some(t)) if self.healthy_for(by, t) => {
                self.metrics.false_suspicions += 1;
            }
            (Event::Refuted(_), _) => self.metrics.refutations_seen += 1,
            (Event::Join(_), _) => self.metrics.joins_seen += 1,
            (Event::LeaveComplete, _) => return self.nodes[by].status == NodeStatus::Leaving,
            _ => {}
        }
        false
    }

    /// Whether `t` is up, unfrozen, not leaving and reachable from `by`.
    fn healthy_for(&self, by: NodeId, t: NodeId) -> bool {
        t < self.nodes.len()
            && self.nodes[t].status == NodeStatus::Up
            && !self.net.partitioned(by, t)
    }

    fn on_dead(&mut self, by: NodeId, t: NodeId, now: Duration, dead: bool) {
        if t >= self.nodes.len() {
            return;
        }
        if let Some(f) = self.nodes[t].open_failure {
            self.metrics.failures[f].learn(by, now, dead);
            return;
        }
        if dead && self.healthy_for(by, t) {
            self.metrics.false_positives.push(FalsePositive {
                at: now,
                by,
                about: t,
            });
        } else if dead {
            self.metrics.expected_deaths += 1;
        }
    }
}
