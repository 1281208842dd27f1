//! The blocking driver: one thread that runs an [`Announcer`] over real sockets.
//!
//! It waits with `poll(2)` on a wake-up socket (commands), the netlink watch and one packet
//! socket per selected interface, never longer than the announcer's next deadline. After every
//! input it drains the announcer's transmit queue, so an answer leaves within the same wake-up
//! as its question.
//!
//! A question that arrived while the driver was stalled (by the kernel's receive timestamps: it
//! waited longer than [`QUESTION_MAX_AGE`], or was queued before a frame that did was read) is
//! dropped unanswered and counted in [`DriverStats::stale_questions`]: after a freeze, another
//! host may own the VIP and have answered it (see [`freshness`]).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use vigil_l2::wire::ethernet::Address as EthernetAddress;
use vigil_l2::{Announcer, Event as AnnouncerEvent, Interface, Stats, TransmitKind, Vip};

use crate::freshness::{self, QUESTION_MAX_AGE, StallMark};
use crate::netlink::{self, Event, Link, Watch};
use crate::packet_socket::{Filter, PacketSocket};
use crate::poll;
use crate::selection::Selection;

/// The longest the driver sleeps, so that failed socket opens are retried.
const MAX_WAIT: Duration = Duration::from_secs(1);
/// Frames read from one socket per wake-up, so that one busy interface cannot starve others.
const FRAMES_PER_WAKEUP: usize = 256;
/// Receive buffer: more than any ARP or neighbour solicitation needs.
const FRAME_BUFFER: usize = 4096;
/// ARP requests for peers sent when one interface comes up: enough for any cluster vigil
/// gossips in, and a bound on the broadcast a flapping link makes.
const MAX_PEER_REQUESTS: usize = 1024;
/// Announcer events kept for [`Handle::take_events`]; past this the oldest are dropped, so a
/// caller that never takes them costs bounded memory and still sees the latest.
const MAX_EVENTS: usize = 1024;

/// Driver settings.
#[derive(Debug, Clone, Default)]
pub struct DriverConfig {
    /// The announcer's settings.
    pub announcer: vigil_l2::Config,
    /// Which interfaces get responders.
    pub selection: Selection,
    /// Log interface changes and errors to stderr.
    pub verbose: bool,
    /// Called on the driver's thread each time new events wait in [`Handle::take_events`], so
    /// the owner can take them at once instead of polling.
    pub on_events: Option<EventWaker>,
}

/// A callback the driver runs when events are ready (see [`DriverConfig::on_events`]). It runs
/// on the driver's thread between frames: it must only signal (a `Notify`, a channel send), not
/// do the work.
#[derive(Clone)]
pub struct EventWaker(Arc<dyn Fn() + Send + Sync>);

impl EventWaker {
    /// Wraps the callback.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Arc::new(wake))
    }

    fn wake(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for EventWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventWaker")
    }
}

/// Counters of the driver and its announcer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// The announcer's counters.
    pub announcer: Stats,
    /// Names of the interfaces that currently have a responder.
    pub interfaces: BTreeSet<String>,
    /// Frames the kernel refused to send.
    pub send_errors: u64,
    /// Failed receives.
    pub recv_errors: u64,
    /// Packet sockets that could not be opened (retried each second).
    pub socket_errors: u64,
    /// Failed multicast joins or leaves.
    pub multicast_errors: u64,
    /// Times the netlink queue overflowed and the state was read again.
    pub netlink_resyncs: u64,
    /// Questions dropped unanswered because they arrived while the driver was stalled (the
    /// process was frozen or starved): they waited in the socket longer than
    /// [`QUESTION_MAX_AGE`], or were queued before a frame that did was read. Another host may
    /// own the VIP by now and have answered them.
    pub stale_questions: u64,
    /// ARP requests sent for the gossip peers when an interface came up
    /// ([`Command::SetPeers`]).
    pub peer_requests_sent: u64,
    /// Frames about each VIP, as MetalLB counts them per IP (kept after the VIP is released,
    /// as counters are).
    pub per_vip: BTreeMap<IpAddr, VipCounters>,
}

/// Frames about one VIP (MetalLB's `metallb_layer2_*{ip}` counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VipCounters {
    /// ARP requests and neighbour solicitations the announcer answered.
    pub requests_received: u64,
    /// Of their answers, those the kernel accepted.
    pub responses_sent: u64,
    /// Gratuitous ARP frames and unsolicited advertisements the kernel accepted.
    pub gratuitous_sent: u64,
}

/// A request to a running driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Replace the set of owned VIPs.
    SetOwned(Vec<Vip>),
    /// Change the set of owned VIPs by these only (see [`Announcer::update_owned`]).
    UpdateOwned {
        /// Owned from now on.
        own: Vec<Vip>,
        /// Not owned any more.
        disown: Vec<IpAddr>,
    },
    /// Restart the takeover series of every owned VIP.
    Reannounce,
    /// Hand these owned VIPs over (see [`Announcer::hand_over`]): keep answering until a
    /// successor's claim is heard, at most `bound`. Each ends with an
    /// [`AnnouncerEvent::HandedOver`] from [`Handle::take_events`]. Send it before the
    /// [`Command::SetOwned`] that leaves them out. While an IPv6 VIP is handed over, each
    /// interface gets a second socket that lets the successor's advertisements in.
    HandOver {
        /// The VIPs.
        vips: Vec<IpAddr>,
        /// The longest they are answered for.
        bound: Duration,
    },
    /// The host's own gossip address and its gossip peers' addresses. When an interface that
    /// holds `source` comes up (new, or its carrier back), one ARP request from `source` for
    /// each IPv4 peer goes out on it. Why: while a link is down the kernel still creates
    /// neighbour entries for whatever is sent (gossip keeps pinging), and an entry waiting for
    /// an answer is retried only every `retrans_time` (1 s by default), so after the link
    /// returns the host could reach no one, and no one it, for up to a second. A peer's kernel
    /// answers the request (resolving our entry for it) and learns our address from it
    /// (resolving its entry for us), within one round trip of the link's return.
    SetPeers {
        /// Our gossip address (the sender of the requests).
        source: IpAddr,
        /// The other members' gossip addresses.
        peers: Vec<IpAddr>,
    },
    /// Stop the driver.
    Shutdown,
}

/// The driver has stopped; the command was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// Talks to a running driver from any thread.
#[derive(Debug, Clone)]
pub struct Handle {
    commands: Sender<Command>,
    wake: Arc<UnixStream>,
    stats: Arc<Mutex<DriverStats>>,
    events: Arc<Mutex<VecDeque<AnnouncerEvent>>>,
}

impl Handle {
    /// The announcer's events since the last call, oldest first.
    pub fn take_events(&self) -> Vec<AnnouncerEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect()
    }

    /// Sends a command and wakes the driver.
    pub fn send(&self, command: Command) -> Result<(), Stopped> {
        self.commands.send(command).map_err(|_| Stopped)?;
        // A full wake-up socket already has a wake-up pending: nothing to add.
        let _ = (&*self.wake).write(&[1]);
        Ok(())
    }

    /// Replaces the set of owned VIPs.
    pub fn set_owned(&self, vips: Vec<Vip>) -> Result<(), Stopped> {
        self.send(Command::SetOwned(vips))
    }

    /// Sets the addresses [`Command::SetPeers`] resolves when an interface comes up.
    pub fn set_peers(&self, source: IpAddr, peers: Vec<IpAddr>) -> Result<(), Stopped> {
        self.send(Command::SetPeers { source, peers })
    }

    /// Changes the set of owned VIPs by these only.
    pub fn update_owned(&self, own: Vec<Vip>, disown: Vec<IpAddr>) -> Result<(), Stopped> {
        self.send(Command::UpdateOwned { own, disown })
    }

    /// A snapshot of the counters, as of the driver's last wake-up.
    pub fn stats(&self) -> DriverStats {
        self.with_stats(DriverStats::clone)
    }

    /// Reads the counters in place: a snapshot copies the per-VIP counters of every VIP
    /// ever announced here, which a caller asking about a few VIPs need not pay for.
    pub fn with_stats<T>(&self, read: impl FnOnce(&DriverStats) -> T) -> T {
        read(&self.stats.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// An interface with a responder.
#[derive(Debug)]
struct Responder {
    socket: PacketSocket,
    iface: Interface,
    joined: BTreeSet<Ipv6Addr>,
    /// While an IPv6 VIP is handed over: a socket that lets neighbour advertisements in (the
    /// responder's own filter passes solicitations only), so the successor's claim is heard.
    claims: Option<PacketSocket>,
}

/// Runs an [`Announcer`] over AF_PACKET sockets, following netlink.
#[derive(Debug)]
pub struct Driver {
    config: DriverConfig,
    announcer: Announcer,
    watch: Watch,
    commands: Receiver<Command>,
    wake: UnixStream,
    shared_stats: Arc<Mutex<DriverStats>>,
    shared_events: Arc<Mutex<VecDeque<AnnouncerEvent>>>,
    stats: DriverStats,
    links: BTreeMap<u32, Link>,
    ipv6: BTreeMap<u32, BTreeSet<Ipv6Addr>>,
    ipv4: BTreeMap<u32, BTreeSet<Ipv4Addr>>,
    /// Our gossip address and the peers' ([`Command::SetPeers`]), IPv4 only.
    peers: Option<(Ipv4Addr, Vec<Ipv4Addr>)>,
    responders: BTreeMap<u32, Responder>,
    /// Joins solicited-node groups at the IP layer, so that the kernel sends MLD reports and
    /// snooping switches forward the solicitations to us. `None` without IPv6.
    mld: Option<UdpSocket>,
    retry_at: Option<Instant>,
    /// When a received frame last showed that the driver had stalled (on any interface).
    stall: StallMark,
}

impl Driver {
    /// Subscribes to netlink, reads the interfaces and opens their sockets.
    pub fn new(config: DriverConfig) -> io::Result<(Self, Handle)> {
        let watch = Watch::open()?;
        let (wake, wake_tx) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let (tx, rx) = mpsc::channel();
        let shared_stats = Arc::new(Mutex::new(DriverStats::default()));
        let shared_events = Arc::new(Mutex::new(VecDeque::new()));
        let handle = Handle {
            commands: tx,
            wake: Arc::new(wake_tx),
            stats: Arc::clone(&shared_stats),
            events: Arc::clone(&shared_events),
        };
        let mut driver = Self {
            announcer: Announcer::new(config.announcer.clone()),
            config,
            watch,
            commands: rx,
            wake,
            shared_stats,
            shared_events,
            stats: DriverStats::default(),
            links: BTreeMap::new(),
            ipv6: BTreeMap::new(),
            ipv4: BTreeMap::new(),
            peers: None,
            responders: BTreeMap::new(),
            mld: UdpSocket::bind("[::]:0").ok(),
            retry_at: None,
            stall: StallMark::default(),
        };
        driver.resync(Instant::now())?;
        driver.publish();
        Ok((driver, handle))
    }

    /// Starts a driver on a thread of its own.
    pub fn spawn(config: DriverConfig) -> io::Result<(JoinHandle<io::Result<()>>, Handle)> {
        let (driver, handle) = Self::new(config)?;
        let thread = std::thread::Builder::new()
            .name("vigil-l2".into())
            .spawn(move || driver.run())?;
        Ok((thread, handle))
    }

    fn log(&self, message: std::fmt::Arguments<'_>) {
        if self.config.verbose {
            eprintln!("vigil-l2: {message}");
        }
    }

    /// Runs until [`Command::Shutdown`] or until every [`Handle`] is dropped.
    pub fn run(mut self) -> io::Result<()> {
        let mut buf = vec![0u8; FRAME_BUFFER];
        loop {
            let now = Instant::now();
            if self.announcer.poll_timeout().is_some_and(|at| at <= now) {
                self.announcer.handle_timeout(now);
            }
            self.flush();
            if self.retry_at.is_some_and(|at| at <= now) {
                self.retry_at = None;
                self.sync_interfaces(now);
            }
            self.publish();

            let wait = self
                .announcer
                .poll_timeout()
                .map_or(MAX_WAIT, |at| at.saturating_duration_since(now))
                .min(MAX_WAIT);
            self.sync_claim_listeners();
            let indexes: Vec<u32> = self.responders.keys().copied().collect();
            let listening: Vec<u32> = self
                .responders
                .iter()
                .filter(|(_, r)| r.claims.is_some())
                .map(|(index, _)| *index)
                .collect();
            let ready = {
                let mut fds: Vec<BorrowedFd<'_>> = vec![self.wake.as_fd(), self.watch.as_fd()];
                fds.extend(self.responders.values().map(|r| r.socket.as_fd()));
                fds.extend(
                    self.responders
                        .values()
                        .filter_map(|r| r.claims.as_ref().map(AsFd::as_fd)),
                );
                poll::wait(&fds, wait)?
            };
            let (questions, claims) = ready[2..].split_at(indexes.len());

            if ready[0] && !self.handle_commands() {
                return Ok(());
            }
            if ready[1] {
                self.handle_netlink()?;
            }
            for (ifindex, _) in indexes.iter().zip(questions).filter(|(_, r)| **r) {
                self.read_frames(*ifindex, &mut buf);
            }
            for (ifindex, _) in listening.iter().zip(claims).filter(|(_, r)| **r) {
                self.read_claims(*ifindex, &mut buf);
            }
        }
    }

    /// Returns false when the driver must stop.
    fn handle_commands(&mut self) -> bool {
        let mut drain = [0u8; 64];
        while matches!((&self.wake).read(&mut drain), Ok(n) if n > 0) {}
        loop {
            match self.commands.try_recv() {
                Ok(Command::SetOwned(vips)) => {
                    self.announcer.set_owned(Instant::now(), vips);
                    self.sync_groups();
                    self.flush();
                }
                Ok(Command::UpdateOwned { own, disown }) => {
                    // Only IPv6 VIPs have solicited-node groups: an IPv4 change leaves them
                    // as they are (and their sync is a pass over every owned VIP).
                    let ipv6 =
                        own.iter().any(|v| v.addr.is_ipv6()) || disown.iter().any(IpAddr::is_ipv6);
                    self.announcer.update_owned(Instant::now(), own, disown);
                    if ipv6 {
                        self.sync_groups();
                    }
                    self.flush();
                }
                Ok(Command::Reannounce) => self.announcer.reannounce(Instant::now()),
                Ok(Command::HandOver { vips, bound }) => {
                    self.announcer.hand_over(Instant::now(), bound, vips);
                    self.sync_groups();
                    self.flush();
                }
                Ok(Command::SetPeers { source, peers }) => {
                    self.peers = match source {
                        IpAddr::V4(source) => Some((
                            source,
                            peers
                                .into_iter()
                                .filter_map(|p| match p {
                                    IpAddr::V4(p) if p != source => Some(p),
                                    _ => None,
                                })
                                .collect(),
                        )),
                        IpAddr::V6(_) => None,
                    };
                }
                Ok(Command::Shutdown) => return false,
                Err(mpsc::TryRecvError::Empty) => return true,
                Err(mpsc::TryRecvError::Disconnected) => return false,
            }
        }
    }

    fn handle_netlink(&mut self) -> io::Result<()> {
        let mut events = Vec::new();
        self.watch.read(&mut events)?;
        if events.contains(&Event::Overrun) {
            self.stats.netlink_resyncs += 1;
            return self.resync(Instant::now());
        }
        self.apply(events);
        self.sync_interfaces(Instant::now());
        Ok(())
    }

    /// Forgets what we know of links and addresses and reads it all again.
    fn resync(&mut self, now: Instant) -> io::Result<()> {
        let events = netlink::dump(Duration::from_secs(5))?;
        self.links.clear();
        self.ipv6.clear();
        self.ipv4.clear();
        self.apply(events);
        self.sync_interfaces(now);
        Ok(())
    }

    fn apply(&mut self, events: Vec<Event>) {
        for event in events {
            match event {
                Event::Link(link) => {
                    self.links.insert(link.index, link);
                }
                Event::LinkRemoved(index) => {
                    self.links.remove(&index);
                    self.ipv6.remove(&index);
                    self.ipv4.remove(&index);
                }
                Event::Address(index, IpAddr::V4(addr)) => {
                    self.ipv4.entry(index).or_default().insert(addr);
                }
                Event::AddressRemoved(index, IpAddr::V4(addr)) => {
                    if let Some(addrs) = self.ipv4.get_mut(&index) {
                        addrs.remove(&addr);
                    }
                }
                Event::Address(index, IpAddr::V6(addr)) => {
                    self.ipv6.entry(index).or_default().insert(addr);
                }
                Event::AddressRemoved(index, IpAddr::V6(addr)) => {
                    if let Some(addrs) = self.ipv6.get_mut(&index) {
                        addrs.remove(&addr);
                    }
                }
                Event::Overrun => {}
            }
        }
    }

    /// Opens, updates and closes responders to match the links.
    fn sync_interfaces(&mut self, now: Instant) {
        let mut wanted = BTreeMap::new();
        for (index, link) in &self.links {
            let has_ipv6 = self.ipv6.get(index).is_some_and(|a| !a.is_empty());
            if let Ok(iface) = self.config.selection.qualify(link, has_ipv6) {
                wanted.insert(*index, iface);
            }
        }
        let gone: Vec<u32> = self
            .responders
            .keys()
            .filter(|index| !wanted.contains_key(index))
            .copied()
            .collect();
        for index in gone {
            self.close(index);
        }
        for (index, iface) in wanted {
            match self.responders.get_mut(&index) {
                Some(responder) if responder.iface == iface => continue,
                Some(responder) => {
                    responder.iface = iface.clone();
                    self.log(format_args!("{} changed: {:?}", iface.name, iface));
                }
                None => match PacketSocket::open_stamped(index, Filter::Questions) {
                    Ok(socket) => {
                        self.log(format_args!("{} up: {:?}", iface.name, iface));
                        self.responders.insert(
                            index,
                            Responder {
                                socket,
                                iface: iface.clone(),
                                joined: BTreeSet::new(),
                                claims: None,
                            },
                        );
                        self.request_peers(index, iface.mac);
                    }
                    Err(err) => {
                        self.log(format_args!("{}: cannot open socket: {err}", iface.name));
                        self.stats.socket_errors += 1;
                        self.retry_at = Some(now + MAX_WAIT);
                        continue;
                    }
                },
            }
            self.announcer.set_interface(now, index, iface);
        }
        self.stats.interfaces = self
            .responders
            .values()
            .map(|r| r.iface.name.clone())
            .collect();
        self.sync_groups();
        self.flush();
    }

    fn close(&mut self, index: u32) {
        self.announcer.remove_interface(index);
        if let Some(responder) = self.responders.remove(&index) {
            self.log(format_args!("{} gone", responder.iface.name));
            if let Some(mld) = &self.mld {
                for group in &responder.joined {
                    // The link may be gone already; the kernel then dropped the membership.
                    let _ = mld.leave_multicast_v6(group, index);
                }
            }
        }
    }

    /// Joins and leaves solicited-node groups to match the owned IPv6 VIPs, per interface.
    fn sync_groups(&mut self) {
        for (index, responder) in &mut self.responders {
            let wanted = self.announcer.solicited_node_groups(*index);
            let mut errors = 0;
            for group in responder.joined.difference(&wanted) {
                let mac = EthernetAddress::from_ipv6_multicast(*group).0;
                errors += u64::from(responder.socket.leave_multicast(mac).is_err());
                if let Some(mld) = &self.mld {
                    errors += u64::from(mld.leave_multicast_v6(group, *index).is_err());
                }
            }
            for group in wanted.difference(&responder.joined) {
                let mac = EthernetAddress::from_ipv6_multicast(*group).0;
                errors += u64::from(responder.socket.join_multicast(mac).is_err());
                if let Some(mld) = &self.mld {
                    errors += u64::from(mld.join_multicast_v6(group, *index).is_err());
                }
            }
            responder.joined = wanted;
            self.stats.multicast_errors += errors;
        }
    }

    /// Opens a claim listener on every IPv6 responder while an IPv6 VIP is handed over, and
    /// closes them all once none is.
    fn sync_claim_listeners(&mut self) {
        let wanted = self.announcer.handing_over().any(|vip| vip.is_ipv6());
        for (index, responder) in &mut self.responders {
            if !wanted || !responder.iface.ndp {
                responder.claims = None;
            } else if responder.claims.is_none() {
                match PacketSocket::open(*index, Filter::Answers) {
                    Ok(socket) => responder.claims = Some(socket),
                    // Without it the handover ends at its bound: slower, not wrong.
                    Err(_) => self.stats.socket_errors += 1,
                }
            }
        }
    }

    /// Feeds the neighbour advertisements from a claim listener to the announcer (its ARP
    /// frames also reach the responder's socket, so they are skipped here).
    fn read_claims(&mut self, ifindex: u32, buf: &mut [u8]) {
        for _ in 0..FRAMES_PER_WAKEUP {
            let Some(socket) = self
                .responders
                .get(&ifindex)
                .and_then(|r| r.claims.as_ref())
            else {
                return;
            };
            match socket.recv(buf) {
                Ok(Some(n)) => {
                    let ipv6 = n >= 14 && buf[12..14] == [0x86, 0xdd];
                    if ipv6 {
                        self.announcer
                            .handle_frame(Instant::now(), ifindex, &buf[..n]);
                        self.flush();
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    self.stats.recv_errors += 1;
                    return;
                }
            }
        }
    }

    fn read_frames(&mut self, ifindex: u32, buf: &mut [u8]) {
        for _ in 0..FRAMES_PER_WAKEUP {
            let Some(responder) = self.responders.get(&ifindex) else {
                return;
            };
            match responder.socket.recv_stamped(buf) {
                Ok(Some(received)) => {
                    let frame = &buf[..received.len];
                    let stalled = self.stall.arrived_stalled(
                        received.at,
                        SystemTime::now(),
                        QUESTION_MAX_AGE,
                    );
                    if stalled && freshness::is_question(frame) {
                        self.stats.stale_questions += 1;
                        continue;
                    }
                    self.announcer.handle_frame(Instant::now(), ifindex, frame);
                    self.flush();
                }
                Ok(None) => return,
                Err(_) => {
                    // ENETDOWN and friends: netlink will tell us what happened.
                    self.stats.recv_errors += 1;
                    return;
                }
            }
        }
    }

    /// An interface just came up: if it holds our gossip address, asks for each peer's
    /// (see [`Command::SetPeers`]).
    fn request_peers(&mut self, index: u32, mac: EthernetAddress) {
        let Some((source, peers)) = &self.peers else {
            return;
        };
        if !self.ipv4.get(&index).is_some_and(|a| a.contains(source)) {
            return;
        }
        let Some(responder) = self.responders.get(&index) else {
            return;
        };
        for peer in peers.iter().take(MAX_PEER_REQUESTS) {
            match responder
                .socket
                .send(&vigil_l2::frames::arp_request(mac, *source, *peer))
            {
                Ok(()) => self.stats.peer_requests_sent += 1,
                Err(_) => self.stats.send_errors += 1,
            }
        }
    }

    fn flush(&mut self) {
        // Per-VIP counters go straight into the shared stats, once per flush and after the
        // sends (a `/metrics` scrape does not wait behind a burst): the map holds every VIP
        // ever announced here, so copying it whole after each frame, as the other counters
        // are, cost O(VIPs) per turn.
        let mut counted: Vec<(IpAddr, TransmitKind, bool)> = Vec::new();
        while let Some(transmit) = self.announcer.poll_transmit() {
            let sent = self
                .responders
                .get(&transmit.ifindex)
                .map(|r| r.socket.send(&transmit.frame));
            let ok = matches!(sent, Some(Ok(())));
            if !ok {
                self.stats.send_errors += 1;
            }
            counted.push((transmit.vip, transmit.kind, ok));
        }
        if counted.is_empty() {
            return;
        }
        let mut shared = self
            .shared_stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (vip, kind, ok) in counted {
            let vip = shared.per_vip.entry(vip).or_default();
            match kind {
                TransmitKind::ArpReply | TransmitKind::NeighborAdvert => {
                    vip.requests_received += 1;
                    vip.responses_sent += u64::from(ok);
                }
                TransmitKind::GratuitousArp | TransmitKind::UnsolicitedNeighborAdvert => {
                    vip.gratuitous_sent += u64::from(ok);
                }
            }
        }
    }

    fn publish(&mut self) {
        let fresh: Vec<AnnouncerEvent> =
            std::iter::from_fn(|| self.announcer.poll_event()).collect();
        if !fresh.is_empty() {
            // A handed-over IPv6 VIP leaves its solicited-node group.
            self.sync_groups();
            let mut events = self
                .shared_events
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for event in fresh {
                if events.len() >= MAX_EVENTS {
                    events.pop_front();
                }
                events.push_back(event);
            }
            drop(events);
            if let Some(waker) = &self.config.on_events {
                waker.wake();
            }
        }
        self.stats.announcer = *self.announcer.stats();
        let mut shared = self
            .shared_stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // `self.stats.per_vip` stays empty: `flush` counts into the shared map.
        let per_vip = std::mem::take(&mut shared.per_vip);
        if *shared != self.stats {
            shared.clone_from(&self.stats);
        }
        shared.per_vip = per_vip;
    }
}
