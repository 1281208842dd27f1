//! [`Memberlist`]: the handle, and the one task that drives a [`Membership`].

use crate::alarm::Alarm;
use crate::net::{self, StreamInput};
use crate::{Error, resolve_seeds};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use vigil_gossip::wire::{Framing, Keyring, KeyringError, Label, SecretKey};
use vigil_gossip::{Config, ConfigError, LocalNode, MemberInfo, Membership, Stats, StreamFailure};

/// Go closes an inbound push/pull that would be the 128th in flight; we cap all inbound
/// connections the same way.
const MAX_INBOUND_STREAMS: usize = 128;
/// Most datagrams read from the socket before due timers run (see `read_waiting_datagrams`).
const MAX_WAITING_DATAGRAMS: usize = 256;
/// The name of the driver's own thread.
const DRIVER_THREAD: &str = "vigil-gossip";
/// How long [`Memberlist::shutdown`] waits for the driver before aborting it.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// How to start a node.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Unique node name.
    pub name: String,
    /// Where to listen (UDP and TCP on the same port; port 0 picks a free one).
    pub bind: SocketAddr,
    /// The address peers should use, if not the bound one. Required when binding an
    /// unspecified address (0.0.0.0 or ::); a zero port means the bound port.
    pub advertise: Option<SocketAddr>,
    /// Engine timings (a profile, possibly adjusted).
    pub config: Config,
    /// Initial metadata (at most 512 bytes).
    pub meta: Vec<u8>,
    /// Cluster label (empty for none).
    pub label: Label,
    /// Encryption keys, primary first; empty for no encryption. Later keyrings arrive
    /// through [`Memberlist::set_keyring`] (a keyring file is the caller's to watch, e.g.
    /// with [`watch_keyring_file`](crate::watch_keyring_file)).
    pub keys: Vec<SecretKey>,
    /// Seed for the engine's randomness; `None` takes one from the OS.
    pub seed: Option<[u8; 32]>,
    /// Run the driver on a thread of its own (true, the default), so that probes are acked
    /// on time however busy the caller's runtime is: a node that is slow to ack is suspected,
    /// and under a fast profile declared dead. False spawns it on the caller's runtime (tests
    /// that stall a node by stalling that runtime).
    pub own_thread: bool,
}

impl Options {
    /// Options with Go's LAN timings, no label, no encryption.
    pub fn new(name: impl Into<String>, bind: SocketAddr) -> Self {
        Self {
            name: name.into(),
            bind,
            advertise: None,
            config: Config::lan(),
            meta: Vec::new(),
            label: Label::default(),
            keys: Vec::new(),
            seed: None,
            own_thread: true,
        }
    }
}

/// What the event stream carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// An engine event (joins, updates, suspicions, deaths, leaves, user messages, …).
    /// `PingComplete` is not forwarded: it fires on every probe.
    Gossip(vigil_gossip::Event),
}

/// The stream of [`Event`]s from one node. Unbounded: read it, or drop it.
#[derive(Debug)]
pub struct Events(mpsc::UnboundedReceiver<Event>);

impl Events {
    /// The next event; `None` once the node has shut down.
    pub async fn recv(&mut self) -> Option<Event> {
        self.0.recv().await
    }
}

/// Counters: the engine's, and the driver's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetStats {
    /// The engine's counters.
    pub engine: Stats,
    /// Datagrams the kernel refused to send.
    pub udp_send_errors: u64,
    /// Errors reading the UDP socket.
    pub udp_recv_errors: u64,
    /// Datagrams answered with ICMP port unreachable (reported to the engine as strong
    /// evidence).
    pub icmp_unreachable: u64,
    /// TCP connections accepted.
    pub tcp_accepted: u64,
    /// TCP connections closed at once because too many were in flight.
    pub tcp_busy: u64,
    /// Outgoing TCP exchanges that failed (refused, timed out or broken).
    pub streams_failed: u64,
    /// Of those, refused connections (reported to the engine as strong evidence).
    pub streams_refused: u64,
    /// Keyrings applied whole with [`Memberlist::set_keyring`].
    pub keyring_reloads: u64,
    /// Keyrings [`Memberlist::set_keyring`] refused (a caller that watches a keyring file may
    /// add the file contents it rejected before they got here).
    pub keyring_errors: u64,
    /// Arming or reading the driver's timer failed (the driver then runs its timers late,
    /// at the next datagram).
    pub timer_errors: u64,
    /// Lifeguard's local health score.
    pub health_score: usize,
    /// Our incarnation.
    pub incarnation: u32,
}

enum Command {
    Join(Vec<SocketAddr>, oneshot::Sender<usize>),
    Leave(Duration, oneshot::Sender<()>),
    SetMeta(Vec<u8>, oneshot::Sender<Result<(), ConfigError>>),
    ConfirmAlive,
    Broadcast(Option<String>, Vec<u8>),
    SendUser(SocketAddr, Vec<u8>, bool),
    InstallKey(Box<SecretKey>),
    UseKey(Vec<u8>, oneshot::Sender<Result<(), KeyringError>>),
    RemoveKey(Vec<u8>, oneshot::Sender<Result<(), KeyringError>>),
    SetKeyring(Vec<SecretKey>, oneshot::Sender<Result<(), KeyringError>>),
    Keys(oneshot::Sender<Vec<Vec<u8>>>),
    Members(oneshot::Sender<Vec<MemberInfo>>),
    Stats(oneshot::Sender<NetStats>),
    Shutdown,
}

/// A running gossip node. Cheap to clone; every clone drives the same node. The node stops
/// on [`shutdown`](Self::shutdown), or when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct Memberlist {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    local_addr: SocketAddr,
    advertise: SocketAddr,
    cmds: mpsc::UnboundedSender<Command>,
    running: Mutex<Option<Running>>,
}

/// Where the driver runs, and how to stop it.
#[derive(Debug)]
enum Running {
    /// A task on the caller's runtime.
    Task(JoinHandle<()>),
    /// A thread of its own: `abort` drops the driver (sent, or dropped with the last handle);
    /// `done` fires once the thread's runtime is gone.
    Thread {
        abort: oneshot::Sender<()>,
        done: oneshot::Receiver<()>,
    },
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A thread's abort sender is dropped with it, which stops that driver too.
        if let Some(Running::Task(task)) = self.running.lock().ok().and_then(|mut t| t.take()) {
            task.abort();
        }
    }
}

impl Memberlist {
    /// Binds the sockets and starts the driver: on a thread of its own (a current-thread
    /// tokio runtime) unless [`Options::own_thread`] is false, then as a task on the current
    /// tokio runtime. The handle and the event stream work from any runtime.
    pub async fn start(options: Options) -> Result<(Self, Events), Error> {
        if !options.own_thread {
            let (driver, started) = prepare(options)?;
            let task = tokio::spawn(driver.run());
            return Ok(started.into_handle(Running::Task(task)));
        }
        let (ready_tx, ready_rx) = oneshot::channel();
        let (abort_tx, abort_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(DRIVER_THREAD.into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(Error::Runtime(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match prepare(options) {
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                        Ok((driver, started)) => {
                            if ready_tx.send(Ok(started)).is_err() {
                                return;
                            }
                            // The abort fires when sent to or when the last handle is dropped.
                            tokio::select! {
                                () = driver.run() => {}
                                _ = abort_rx => {}
                            }
                        }
                    }
                });
                drop(runtime);
                let _ = done_tx.send(());
            })
            .map_err(Error::Runtime)?;
        let started = ready_rx.await.map_err(|_| Error::Stopped)??;
        Ok(started.into_handle(Running::Thread {
            abort: abort_tx,
            done: done_rx,
        }))
    }

    /// Our node name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The bound address (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr
    }

    /// The address peers know us by.
    pub fn advertise_addr(&self) -> SocketAddr {
        self.inner.advertise
    }

    fn send(&self, cmd: Command) -> Result<(), Error> {
        self.inner.cmds.send(cmd).map_err(|_| Error::Stopped)
    }

    async fn ask<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx))?;
        rx.await.map_err(|_| Error::Stopped)
    }

    /// Joins through seeds written as Go's `Join` takes them (`[name/]host[:port]`; the port
    /// defaults to ours). Returns how many seeds answered; fails if none did.
    pub async fn join(&self, seeds: &[String]) -> Result<usize, Error> {
        let addrs = resolve_seeds(seeds, self.inner.local_addr.port()).await?;
        self.join_addrs(addrs).await
    }

    /// Joins through seed addresses: a push/pull with each. Returns how many answered.
    pub async fn join_addrs(&self, seeds: Vec<SocketAddr>) -> Result<usize, Error> {
        let n = seeds.len();
        if n == 0 {
            return Ok(0);
        }
        match self.ask(|tx| Command::Join(seeds, tx)).await? {
            0 => Err(Error::JoinFailed(n)),
            ok => Ok(ok),
        }
    }

    /// Leaves gracefully: announces our departure and waits until the announcement has been
    /// sent enough times, or `timeout`. The node keeps running (and answering) until
    /// [`shutdown`](Self::shutdown).
    pub async fn leave(&self, timeout: Duration) -> Result<(), Error> {
        let wait = self.ask(|tx| Command::Leave(timeout, tx));
        // The engine bounds the leave itself; this is the belt to its braces.
        match tokio::time::timeout(timeout + Duration::from_secs(1), wait).await {
            Ok(r) => r,
            Err(_) => Ok(()),
        }
    }

    /// Replaces our metadata and gossips it.
    pub async fn set_meta(&self, meta: Vec<u8>) -> Result<(), Error> {
        Ok(self.ask(|tx| Command::SetMeta(meta, tx)).await??)
    }

    /// Asks every live member to acknowledge our alive state, at a new incarnation
    /// (`Membership::confirm_alive`); `Event::HeardBack` says when all have.
    pub fn confirm_alive(&self) -> Result<(), Error> {
        self.send(Command::ConfirmAlive)
    }

    /// Queues an application broadcast (piggy-backed on gossip); `key` replaces a queued one.
    pub fn broadcast_user(&self, key: Option<String>, msg: Vec<u8>) -> Result<(), Error> {
        self.send(Command::Broadcast(key, msg))
    }

    /// Sends an application message to one peer, over UDP or, if `reliable`, TCP.
    pub fn send_user(&self, to: SocketAddr, msg: Vec<u8>, reliable: bool) -> Result<(), Error> {
        self.send(Command::SendUser(to, msg, reliable))
    }

    /// Installs a key for decryption (Go's `InstallKey`).
    pub fn install_key(&self, key: SecretKey) -> Result<(), Error> {
        self.send(Command::InstallKey(Box::new(key)))
    }

    /// Makes an installed key the primary (Go's `UseKey`).
    pub async fn use_key(&self, key: &[u8]) -> Result<(), Error> {
        Ok(self.ask(|tx| Command::UseKey(key.to_vec(), tx)).await??)
    }

    /// Removes a key that is not the primary (Go's `RemoveKey`).
    pub async fn remove_key(&self, key: &[u8]) -> Result<(), Error> {
        Ok(self
            .ask(|tx| Command::RemoveKey(key.to_vec(), tx))
            .await??)
    }

    /// Makes the keyring exactly `keys`, primary first, in the order that never leaves a
    /// peer unable to read us: install every new key, switch the primary, then remove the keys
    /// no longer listed. An empty list is refused (encryption cannot be turned off at run
    /// time) and changes nothing.
    pub async fn set_keyring(&self, keys: Vec<SecretKey>) -> Result<(), Error> {
        Ok(self.ask(|tx| Command::SetKeyring(keys, tx)).await??)
    }

    /// The installed keys, primary first.
    pub async fn keys(&self) -> Result<Vec<Vec<u8>>, Error> {
        self.ask(Command::Keys).await
    }

    /// Every member we know, ourselves included, in any state.
    pub async fn members(&self) -> Result<Vec<MemberInfo>, Error> {
        self.ask(Command::Members).await
    }

    /// Counters.
    pub async fn stats(&self) -> Result<NetStats, Error> {
        self.ask(Command::Stats).await
    }

    /// Stops the node without a leave (peers will notice its silence). Never hangs: the
    /// driver gets two seconds to stop, then is aborted. In-flight TCP exchanges are dropped.
    pub async fn shutdown(&self) {
        let _ = self.send(Command::Shutdown);
        let running = self.inner.running.lock().ok().and_then(|mut t| t.take());
        if let Some(running) = running {
            running.stop().await;
        }
    }
}

impl Running {
    /// Waits up to [`SHUTDOWN_GRACE`] for the driver to end, then aborts it.
    async fn stop(self) {
        match self {
            Self::Task(mut task) => {
                let ended = tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                    .await
                    .is_ok();
                if !ended {
                    task.abort();
                }
            }
            Self::Thread { abort, done } => {
                let ended = tokio::time::timeout(SHUTDOWN_GRACE, done).await.is_ok();
                if !ended {
                    let _ = abort.send(());
                }
            }
        }
    }
}

/// What [`prepare`] built, before it becomes a [`Memberlist`].
struct Started {
    name: String,
    local_addr: SocketAddr,
    advertise: SocketAddr,
    cmds: mpsc::UnboundedSender<Command>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Started {
    fn into_handle(self, running: Running) -> (Memberlist, Events) {
        let inner = Inner {
            name: self.name,
            local_addr: self.local_addr,
            advertise: self.advertise,
            cmds: self.cmds,
            running: Mutex::new(Some(running)),
        };
        (
            Memberlist {
                inner: Arc::new(inner),
            },
            Events(self.events),
        )
    }
}

/// Binds the sockets and builds the engine and its driver. Must run inside the runtime that
/// will drive them (the sockets register with its reactor).
fn prepare(options: Options) -> Result<(Driver, Started), Error> {
    let (tcp, udp) = net::bind(options.bind)?;
    let local_addr = udp.local_addr().map_err(|source| Error::Bind {
        addr: options.bind,
        source,
    })?;
    let advertise = match options.advertise {
        Some(a) if a.ip().is_unspecified() => {
            return Err(Error::Options(format!(
                "advertise address {a} is unspecified: give the address peers should use"
            )));
        }
        Some(a) if a.port() == 0 => SocketAddr::new(a.ip(), local_addr.port()),
        Some(a) => a,
        None if local_addr.ip().is_unspecified() => {
            return Err(Error::Options(format!(
                "bound to {local_addr}: give an advertise address peers can reach"
            )));
        }
        None => local_addr,
    };
    let mut keys = options.keys.clone().into_iter();
    let keyring = match keys.next() {
        Some(primary) => Keyring::new(primary, keys),
        None => Keyring::default(),
    };
    let framing = Framing {
        label: options.label.clone(),
        keyring,
        ..Framing::default()
    };
    let seed = match options.seed {
        Some(s) => s,
        None => {
            let mut s = [0u8; 32];
            getrandom::getrandom(&mut s)
                .map_err(|e| Error::Options(format!("no OS randomness: {e}")))?;
            s
        }
    };
    let local = LocalNode {
        name: options.name.clone(),
        addr: advertise,
        meta: options.meta.clone(),
    };
    let engine = Membership::new(options.config.clone(), framing, local, seed, now())?;
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let (stream_tx, stream_rx) = mpsc::channel(256);
    let driver = Driver {
        engine,
        udp,
        tcp,
        alarm: Alarm::new().map_err(Error::Runtime)?,
        cmds: cmd_rx,
        events: ev_tx,
        stream_tx,
        stream_rx,
        tasks: JoinSet::new(),
        inbound: Arc::new(Semaphore::new(MAX_INBOUND_STREAMS)),
        joins: Vec::new(),
        leaves: Vec::new(),
        counters: NetStats::default(),
    };
    let started = Started {
        name: options.name,
        local_addr,
        advertise,
        cmds: cmd_tx,
        events: ev_rx,
    };
    Ok((driver, started))
}

struct PendingJoin {
    waiting: Vec<SocketAddr>,
    ok: usize,
    reply: oneshot::Sender<usize>,
}

struct Driver {
    engine: Membership,
    udp: UdpSocket,
    tcp: TcpListener,
    /// The engine's next deadline.
    alarm: Alarm,
    cmds: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<Event>,
    stream_tx: mpsc::Sender<StreamInput>,
    stream_rx: mpsc::Receiver<StreamInput>,
    tasks: JoinSet<()>,
    inbound: Arc<Semaphore>,
    joins: Vec<PendingJoin>,
    leaves: Vec<oneshot::Sender<()>>,
    counters: NetStats,
}

/// The engine's clock: the monotonic clock, the one the driver's timerfd counts in.
fn now() -> std::time::Instant {
    std::time::Instant::now()
}

impl Driver {
    async fn run(mut self) {
        let mut buf = vec![0u8; 65_536];
        loop {
            self.drain().await;
            let deadline = self.engine.poll_timeout();
            if self.alarm.set(deadline).is_err() {
                self.counters.timer_errors += 1;
            }
            tokio::select! {
                r = self.udp.recv_from(&mut buf) => match r {
                    Ok((n, from)) => self.engine.handle_packet(now(), from, &buf[..n]),
                    Err(_) => {
                        if !self.read_icmp_errors() {
                            self.counters.udp_recv_errors += 1;
                        }
                    }
                },
                r = self.tcp.accept() => {
                    if let Ok((sock, _)) = r {
                        self.accept(sock);
                    }
                }
                Some(input) = self.stream_rx.recv() => self.on_stream(input),
                cmd = self.cmds.recv() => match cmd {
                    None | Some(Command::Shutdown) => break,
                    Some(cmd) => self.on_command(cmd),
                },
                Some(_) = self.tasks.join_next(), if !self.tasks.is_empty() => {}
                r = self.alarm.fired(), if deadline.is_some() => {
                    if r.is_err() {
                        // Not seen in practice (a timerfd read fails only when it would
                        // block); pause so that a lasting fault cannot spin the thread.
                        self.counters.timer_errors += 1;
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            }
            // Trust the clock, not the timer: the wait may have been cut short by other
            // input, and any input may arrive after the deadline has passed.
            if let Some(d) = deadline
                && now() >= d
            {
                // Input first, then timers: after a stall (a stopped process, a starved
                // host) the socket holds the acks and refutations that arrived meanwhile.
                // Firing timers first would judge without them: probes that were answered
                // would fail and suspicions that were refuted would expire, so a node that
                // merely paused would accuse its peers.
                self.read_waiting_datagrams(&mut buf);
                self.engine.handle_timeout(now());
            }
        }
        self.tasks.shutdown().await;
    }

    /// Sends what the engine produced and forwards its events.
    async fn drain(&mut self) {
        while let Some(t) = self.engine.poll_transmit() {
            // A send can fail with an ICMP error pending from an earlier datagram (to someone
            // else): read those, then try once more.
            if self.udp.send_to(&t.bytes, t.to).await.is_err()
                && (!self.read_icmp_errors() || self.udp.send_to(&t.bytes, t.to).await.is_err())
            {
                self.counters.udp_send_errors += 1;
            }
        }
        while let Some(req) = self.engine.poll_stream() {
            self.tasks
                .spawn(net::run_outgoing(req, self.stream_tx.clone()));
        }
        while let Some(ev) = self.engine.poll_event() {
            self.on_event(ev);
        }
    }

    /// Hands the engine every datagram already waiting in the socket, without waiting for
    /// more (bounded, so a flood cannot hold timers off for ever).
    fn read_waiting_datagrams(&mut self, buf: &mut [u8]) {
        for _ in 0..MAX_WAITING_DATAGRAMS {
            match self.udp.try_recv_from(buf) {
                Ok((n, from)) => self.engine.handle_packet(now(), from, &buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    if !self.read_icmp_errors() {
                        self.counters.udp_recv_errors += 1;
                        return;
                    }
                }
            }
        }
    }

    /// Reads queued ICMP errors and reports unreachable ports; false if there were none.
    fn read_icmp_errors(&mut self) -> bool {
        let dests = crate::icmp::drain(&self.udp);
        for &d in &dests {
            self.counters.icmp_unreachable += 1;
            self.engine.handle_unreachable(now(), d);
        }
        !dests.is_empty()
    }

    fn accept(&mut self, sock: tokio::net::TcpStream) {
        self.counters.tcp_accepted += 1;
        let Ok(permit) = self.inbound.clone().try_acquire_owned() else {
            self.counters.tcp_busy += 1;
            return;
        };
        let _ = sock.set_nodelay(true);
        let deadline = Instant::now() + self.engine.config().tcp_timeout;
        let tx = self.stream_tx.clone();
        self.tasks.spawn(async move {
            net::serve_incoming(sock, tx, deadline).await;
            drop(permit);
        });
    }

    fn on_stream(&mut self, input: StreamInput) {
        match input {
            StreamInput::Incoming { buf, reply } => {
                let decision = self.engine.handle_incoming_stream(now(), &buf);
                let _ = reply.send((buf, decision));
            }
            StreamInput::Response { id, buf, reply } => {
                let progress = self.engine.handle_stream_response(now(), id, &buf);
                let _ = reply.send((buf, progress));
            }
            StreamInput::Failed { id, to, why } => {
                self.counters.streams_failed += 1;
                if why == StreamFailure::Refused {
                    self.counters.streams_refused += 1;
                    self.engine.handle_unreachable(now(), to);
                }
                self.engine.handle_stream_failed(now(), id, why);
            }
        }
    }

    fn on_event(&mut self, ev: vigil_gossip::Event) {
        use vigil_gossip::Event as E;
        match &ev {
            E::PingComplete { .. } => return,
            E::PushPullComplete {
                addr,
                join: true,
                ok,
            } => {
                if let Some(i) = self.joins.iter().position(|j| j.waiting.contains(addr)) {
                    let j = &mut self.joins[i];
                    let at = j.waiting.iter().position(|a| a == addr).expect("found");
                    j.waiting.swap_remove(at);
                    j.ok += usize::from(*ok);
                    if j.waiting.is_empty() {
                        let j = self.joins.swap_remove(i);
                        let _ = j.reply.send(j.ok);
                    }
                }
            }
            E::LeaveComplete => {
                for tx in self.leaves.drain(..) {
                    let _ = tx.send(());
                }
            }
            _ => {}
        }
        let _ = self.events.send(Event::Gossip(ev));
    }

    fn on_command(&mut self, cmd: Command) {
        let now = now();
        match cmd {
            Command::Join(seeds, reply) => {
                self.engine.join(now, &seeds);
                self.joins.push(PendingJoin {
                    waiting: seeds,
                    ok: 0,
                    reply,
                });
            }
            Command::Leave(timeout, reply) => {
                self.leaves.push(reply);
                self.engine.leave(now, timeout);
            }
            Command::SetMeta(meta, reply) => {
                let _ = reply.send(self.engine.set_meta(now, meta));
            }
            Command::ConfirmAlive => self.engine.confirm_alive(now),
            Command::Broadcast(key, msg) => self.engine.broadcast_user(key.as_deref(), msg),
            Command::SendUser(to, msg, reliable) => self.engine.send_user(now, to, msg, reliable),
            Command::InstallKey(key) => self.engine.install_key(*key),
            Command::UseKey(key, reply) => {
                let _ = reply.send(self.engine.use_key(&key));
            }
            Command::RemoveKey(key, reply) => {
                let _ = reply.send(self.engine.remove_key(&key));
            }
            Command::SetKeyring(keys, reply) => {
                let result = if keys.is_empty() {
                    self.counters.keyring_errors += 1;
                    Err(KeyringError::Empty)
                } else {
                    self.apply_keys(&keys);
                    self.counters.keyring_reloads += 1;
                    Ok(())
                };
                let _ = reply.send(result);
            }
            Command::Keys(reply) => {
                let keys = self.engine.framing().keyring.keys();
                let _ = reply.send(keys.iter().map(|k| k.as_bytes().to_vec()).collect());
            }
            Command::Members(reply) => {
                let _ = reply.send(self.engine.members().collect());
            }
            Command::Stats(reply) => {
                let mut s = self.counters.clone();
                s.engine = self.engine.stats().clone();
                s.health_score = self.engine.health_score();
                s.incarnation = self.engine.incarnation();
                let _ = reply.send(s);
            }
            Command::Shutdown => {}
        }
    }

    /// Makes the keyring exactly `keys`, primary first, in Go's safe order: install, use,
    /// then remove what is no longer listed.
    fn apply_keys(&mut self, keys: &[SecretKey]) {
        for k in keys {
            self.engine.install_key(k.clone());
        }
        if let Some(primary) = keys.first() {
            let _ = self.engine.use_key(primary.as_bytes());
        }
        let stale: Vec<Vec<u8>> = self
            .engine
            .framing()
            .keyring
            .keys()
            .iter()
            .filter(|k| !keys.contains(k))
            .map(|k| k.as_bytes().to_vec())
            .collect();
        for k in stale {
            let _ = self.engine.remove_key(&k);
        }
    }
}
