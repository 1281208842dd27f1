//! The announcer: which VIPs this node owns, on which interfaces, and what to say about them.
//!
//! # Calling order
//!
//! Like quinn-proto's `Connection`, an [`Announcer`] only reacts to calls:
//! 1. feed it facts: [`Announcer::set_interface`] / [`Announcer::remove_interface`] as links come
//!    and go, [`Announcer::set_owned`] whenever ownership changes, [`Announcer::handle_frame`] for
//!    each received frame, and [`Announcer::handle_timeout`] once the instant from
//!    [`Announcer::poll_timeout`] has passed;
//! 2. after each call, drain [`Announcer::poll_transmit`] and send the frames on their
//!    interfaces, then re-read [`Announcer::poll_timeout`].
//!
//! `now` must never go backwards between calls. Calling `handle_timeout` early is harmless.
//!
//! # What it answers
//!
//! - ARP requests sent to broadcast or to the receiving interface's MAC, for an owned IPv4 VIP
//!   whose interface set includes the receiving interface: a reply from that interface's MAC.
//! - Neighbour solicitations for an owned IPv6 VIP, sent to its solicited-node group *or*
//!   unicast to the VIP itself (routers' reachability probes), with hop limit 255: an
//!   advertisement with S=1 and O=1 (we own the address; we are not a proxy), sourced from the
//!   VIP itself so that no link-local address is needed. Duplicate address detection probes
//!   (from `::`) are answered to all-nodes with S=0, O=1, which defends the VIP.
//! - Nothing else, and nothing at all for a VIP it does not own: losing a VIP also drops any
//!   frame about it still queued.
//!
//! On takeover, and whenever an interface appears, comes back or changes MAC, it sends a round
//! of gratuitous ARP (a request and a reply) or an unsolicited advertisement (O=1, to all-nodes)
//! at once, then more rounds on the [`Config::takeover_rounds`] schedule, then optionally one
//! every [`Config::refresh_interval`]. When another MAC claims an owned VIP, the series starts
//! again on that interface (at most once per [`Config::defend_interval`]).
//!
//! # Pacing
//!
//! Gratuitous frames leave at most at [`Config::announce_rate`] frames per second, after a
//! burst of [`Config::announce_burst`]: a re-announcement of every VIP (a member joined) or
//! the takeover of a dead node's thousand VIPs is spread out rather than dropped, by us or by
//! the neighbours and switches that receive it. A round that has to wait stays due in its
//! schedule (nothing is queued, so nothing overflows) and [`Announcer::poll_timeout`] names
//! the instant the next one may leave. Due rounds go in this order: first the first rounds of
//! takeover series (newly owned VIPs, new interfaces, defences), then their later rounds, then
//! routine rounds (re-announcements and refreshes); within each, the longest due first. A
//! takeover's first IPv4 round is split: every VIP's gratuitous request goes before any VIP's
//! reply, so that the first word about each of N new VIPs is out within N / rate.
//! Answers to questions are never paced: their rate is the askers'.
//!
//! # Graceful handover
//!
//! A node that is about to stop calls [`Announcer::hand_over`] before it tells the cluster it
//! leaves. Its VIPs then stop their gratuitous rounds (they would fight the successor's) but
//! keep being answered, so a client asking in the meantime still gets an answer. A VIP goes
//! silent on an interface once another MAC claims it there (a gratuitous ARP, an ARP reply
//! or an unsolicited advertisement naming the VIP): the successor has spoken, and its own
//! gratuitous series goes on after us, so neighbour caches end on its MAC. Once silent on
//! every interface, or when the bound passes first (no successor, or none heard), the VIP is
//! dropped and [`Event::HandedOver`] comes out of [`Announcer::poll_event`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use crate::frames::{self, NdiscAddressing};
use crate::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use crate::wire::ndisc::NeighborFlags;
use crate::wire::{arp, icmpv6, ipv6, ndisc};

mod pace;

use pace::Pacer;

/// Tunables. [`Config::default`] is what the daemon uses unless told otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// When to send gratuitous rounds after a takeover, as offsets from it. The first is
    /// normally zero. Rounds past one second matter: Linux ignores a gratuitous ARP that would
    /// change a neighbour entry updated less than `locktime` (1 s by default) ago.
    pub takeover_rounds: Vec<Duration>,
    /// If set, keep sending a round this often after the takeover rounds, so that switch
    /// forwarding tables and neighbour caches never age the VIP out (MetalLB #2910).
    pub refresh_interval: Option<Duration>,
    /// Set the R (router) flag in advertisements: true when the node forwards IPv6 traffic.
    pub router: bool,
    /// At most this many frames wait in the transmit queue; more are dropped and counted, so a
    /// flood of requests cannot grow memory without bound.
    pub max_queued_transmits: usize,
    /// When another MAC claims an owned VIP outside a handover, restart its takeover series on
    /// that interface, at most once per this interval there. A node that took the VIP by
    /// mistake (its failure detector wrongly declared us dead) then hears us, and once it gives
    /// the VIP back the later rounds leave neighbour caches on our MAC. `None`: only count
    /// and report claims.
    pub defend_interval: Option<Duration>,
    /// Gratuitous frames (gratuitous ARP, unsolicited advertisements) per second, at most,
    /// once the burst is spent (see the [module docs](self#pacing)). `None`: no pacing.
    pub announce_rate: Option<NonZeroU32>,
    /// Gratuitous frames that may leave back to back before the rate applies. Keep it well
    /// under [`Config::max_queued_transmits`].
    pub announce_burst: u32,
    /// A claim on an owned VIP heard this long (at most the handover's bound) before
    /// [`Announcer::hand_over`] counts as the successor's: it may take over a moment before
    /// this node learns that it would. Older claims do not: they are most often a split's
    /// other side, which answered for the VIP then and may be silent now (a returning host
    /// under the majority guard waits its rejoin quiet before it claims again), and counting
    /// one ended the handover at once and left the VIP unanswered until the successor spoke.
    pub claim_memory: Duration,
}

/// [`Config::announce_rate`]'s default: a thousand IPv4 VIPs (two frames a round) have their
/// first round out in under half a second, while a switch or neighbour that polices ARP sees
/// a steady flow rather than a burst of thousands.
pub const DEFAULT_ANNOUNCE_RATE: u32 = 5_000;

impl Default for Config {
    fn default() -> Self {
        Self {
            takeover_rounds: [0, 100, 300, 1_000, 2_000, 4_000]
                .into_iter()
                .map(Duration::from_millis)
                .collect(),
            refresh_interval: None,
            router: false,
            max_queued_transmits: 4096,
            defend_interval: Some(Duration::from_secs(5)),
            announce_rate: NonZeroU32::new(DEFAULT_ANNOUNCE_RATE),
            announce_burst: 256,
            claim_memory: Duration::from_secs(1),
        }
    }
}

/// What the announcer needs to know about a network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Its name, matched against each VIP's [`InterfaceSet`].
    pub name: String,
    /// Its MAC: answers and announcements on it carry this address.
    pub mac: EthernetAddress,
    /// Whether to speak ARP (IPv4 VIPs) on it.
    pub arp: bool,
    /// Whether to speak Neighbour Discovery (IPv6 VIPs) on it.
    pub ndp: bool,
}

/// The interfaces a VIP may be announced on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum InterfaceSet {
    /// Every interface the driver hands in.
    #[default]
    All,
    /// Only interfaces with these names.
    Only(BTreeSet<String>),
}

impl InterfaceSet {
    /// Whether an interface with this name belongs to the set.
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Only(names) => names.contains(name),
        }
    }
}

/// A VIP this node owns, and where to announce it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vip {
    /// The address.
    pub addr: IpAddr,
    /// Where it may be announced.
    pub interfaces: InterfaceSet,
}

/// Why a frame is being sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransmitKind {
    /// An answer to an ARP request.
    ArpReply,
    /// An answer to a neighbour solicitation.
    NeighborAdvert,
    /// A gratuitous ARP request or reply.
    GratuitousArp,
    /// An unsolicited neighbour advertisement.
    UnsolicitedNeighborAdvert,
}

/// A frame to send.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// The interface to send it on.
    pub ifindex: u32,
    /// The VIP it is about.
    pub vip: IpAddr,
    /// Why it is sent.
    pub kind: TransmitKind,
    /// The whole Ethernet frame.
    pub frame: Vec<u8>,
}

/// Counters. Every received frame lands in exactly one of `malformed`, `ignored`,
/// `ndisc_bad_hop_limit`, `not_owned`, `wrong_interface`, `conflicts`, `arp_requests_answered`
/// or `neighbor_solicits_answered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Frames handed to [`Announcer::handle_frame`].
    pub frames_received: u64,
    /// Frames that were truncated, inconsistent, had a bad checksum or broke an RFC rule.
    pub malformed: u64,
    /// Well-formed frames that ask nothing of us (other protocols, replies, other
    /// destinations, our own frames, unknown interfaces).
    pub ignored: u64,
    /// Neighbour Discovery messages dropped because their hop limit was not 255.
    pub ndisc_bad_hop_limit: u64,
    /// Questions about an address this node does not own.
    pub not_owned: u64,
    /// Questions about an owned VIP on an interface it is not announced on.
    pub wrong_interface: u64,
    /// Another host claimed one of our VIPs (gratuitous ARP or advertisement with another MAC).
    pub conflicts: u64,
    /// ARP requests answered.
    pub arp_requests_answered: u64,
    /// Neighbour solicitations answered.
    pub neighbor_solicits_answered: u64,
    /// Claims by another MAC answered with a fresh takeover series ([`Config::defend_interval`]).
    pub defended: u64,
    /// Gratuitous ARP frames queued (two per round: a request and a reply).
    pub gratuitous_arp_sent: u64,
    /// Unsolicited neighbour advertisements queued.
    pub unsolicited_na_sent: u64,
    /// Frames dropped because the transmit queue was full.
    pub transmit_queue_full: u64,
    /// VIPs handed over after a successor's claim was seen on every interface.
    pub handed_over: u64,
    /// VIPs dropped when the handover bound passed before a successor was heard.
    pub handover_expired: u64,
    /// Events dropped because the event queue was full.
    pub events_dropped: u64,
}

/// Something the caller may want to act on, from [`Announcer::poll_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Another host claimed a VIP this node announces, on an interface it announces it on
    /// (outside a handover: a conflict, e.g. both sides of a partition announce).
    Claimed {
        /// The VIP.
        vip: IpAddr,
        /// Where the claim was heard.
        ifindex: u32,
        /// The MAC the claim names.
        by: EthernetAddress,
    },
    /// A VIP under [`Announcer::hand_over`] went silent and is no longer owned.
    HandedOver {
        /// The VIP.
        vip: IpAddr,
        /// The MAC whose claim was heard, or `None` when the bound passed first.
        successor: Option<EthernetAddress>,
    },
}

/// At most this many events wait in the event queue; more are dropped and counted.
const MAX_QUEUED_EVENTS: usize = 1024;

/// Which due rounds go first when pacing makes them wait (earlier variants first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Urgency {
    /// A series started because the network may not know us there: a newly owned VIP, a new
    /// interface or MAC, a defence against a claim.
    Takeover,
    /// A re-announcement of what we owned already, or a refresh.
    Routine,
}

/// Where a VIP stands in its announcement schedule on one interface.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    /// When the series started (its first round went out), the origin of its rounds.
    started: Instant,
    /// Index of the next takeover round.
    round: usize,
    next_at: Option<Instant>,
    urgency: Urgency,
    /// In a takeover's first IPv4 round, when paced: the gratuitous request left and the
    /// reply waits (see [`Announcer::handle_timeout`]).
    request_sent: bool,
}

/// Which frames of an IPv4 round to send (an IPv6 round is one frame: always whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Whole,
    Request,
    Reply,
}

/// See [`Schedule::rank`].
type Rank = (Urgency, u8, Option<Instant>);

impl Schedule {
    /// The order among due rounds: for takeovers, the first frames of first rounds, the
    /// rest of first rounds, later rounds; then routine rounds; then the longest due.
    fn rank(&self) -> Rank {
        let stage = if self.round > 0 {
            2
        } else {
            u8::from(self.request_sent)
        };
        (self.urgency, stage, self.next_at)
    }
}

/// What to do with one received frame.
enum Verdict {
    Malformed,
    Ignored,
    BadHopLimit,
    NotOwned,
    WrongInterface,
    /// Another MAC claims an owned VIP.
    Claim {
        vip: IpAddr,
        by: EthernetAddress,
    },
    Answer(Transmit),
}

/// The sans-IO ARP/NDP announcer. See the [module docs](self) for the calling order.
#[derive(Debug)]
pub struct Announcer {
    config: Config,
    interfaces: BTreeMap<u32, Interface>,
    owned: BTreeMap<IpAddr, InterfaceSet>,
    schedules: BTreeMap<(IpAddr, u32), Schedule>,
    queue: VecDeque<Transmit>,
    pacer: Pacer,
    stats: Stats,
    /// VIPs being handed over, with the instant they go silent at the latest.
    handover: BTreeMap<IpAddr, Instant>,
    /// (VIP, interface) pairs of a handover where a successor's claim was heard, with its MAC.
    claimed: BTreeMap<(IpAddr, u32), EthernetAddress>,
    /// The last claim by another MAC heard for each owned (VIP, interface) outside a handover.
    recent_claims: BTreeMap<(IpAddr, u32), (EthernetAddress, Instant)>,
    /// When each owned (VIP, interface) last restarted its series to answer a claim.
    defended: BTreeMap<(IpAddr, u32), Instant>,
    events: VecDeque<Event>,
}

impl Announcer {
    /// An announcer with no interfaces and no VIPs.
    pub fn new(config: Config) -> Self {
        Self {
            pacer: Pacer::new(config.announce_rate, config.announce_burst),
            config,
            interfaces: BTreeMap::new(),
            owned: BTreeMap::new(),
            schedules: BTreeMap::new(),
            queue: VecDeque::new(),
            stats: Stats::default(),
            handover: BTreeMap::new(),
            claimed: BTreeMap::new(),
            recent_claims: BTreeMap::new(),
            defended: BTreeMap::new(),
            events: VecDeque::new(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The VIPs being handed over (see [`Announcer::hand_over`]).
    pub fn handing_over(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.handover.keys().copied()
    }

    /// The VIPs currently owned.
    pub fn owned(&self) -> impl Iterator<Item = (&IpAddr, &InterfaceSet)> {
        self.owned.iter()
    }

    /// The interfaces currently known.
    pub fn interfaces(&self) -> impl Iterator<Item = (u32, &Interface)> {
        self.interfaces.iter().map(|(index, iface)| (*index, iface))
    }

    /// The solicited-node multicast groups an interface must receive: one per owned IPv6 VIP
    /// announced on it. The driver joins exactly these, and leaves the rest.
    pub fn solicited_node_groups(&self, ifindex: u32) -> BTreeSet<Ipv6Addr> {
        self.owned
            .keys()
            .filter_map(|addr| match addr {
                IpAddr::V6(v6) if self.is_eligible(*addr, ifindex) => {
                    Some(ipv6::solicited_node(*v6))
                }
                _ => None,
            })
            .collect()
    }

    /// Adds or updates an interface. A new interface, or one whose MAC changed, gets a fresh
    /// takeover series for every owned VIP announced on it.
    pub fn set_interface(&mut self, now: Instant, ifindex: u32, iface: Interface) {
        let mac_changed = self
            .interfaces
            .get(&ifindex)
            .is_none_or(|old| old.mac != iface.mac);
        self.interfaces.insert(ifindex, iface);
        if mac_changed {
            // Frames built with the old MAC must not go out; restart from now.
            self.schedules.retain(|(_, index), _| *index != ifindex);
            self.queue.retain(|t| t.ifindex != ifindex);
        }
        self.reconcile(now, Urgency::Takeover);
    }

    /// Forgets an interface (it went away, went down or stopped qualifying). Anything queued
    /// for it is dropped.
    pub fn remove_interface(&mut self, ifindex: u32) {
        self.interfaces.remove(&ifindex);
        self.schedules.retain(|(_, index), _| *index != ifindex);
        self.queue.retain(|t| t.ifindex != ifindex);
        self.claimed.retain(|(_, index), _| *index != ifindex);
        self.recent_claims.retain(|(_, index), _| *index != ifindex);
        self.defended.retain(|(_, index), _| *index != ifindex);
        self.settle_handover();
    }

    /// Replaces the set of owned VIPs. Newly owned VIPs start their takeover series at once.
    /// VIPs no longer owned go silent at once: their schedules and any queued frames about them
    /// are dropped. VIPs owned before and after keep their schedules. A VIP being handed over
    /// is not affected by its absence (its handover runs to its end); listed again, it is
    /// taken back: the handover is cancelled and a fresh takeover series starts.
    pub fn set_owned(&mut self, now: Instant, vips: impl IntoIterator<Item = Vip>) {
        let mut owned: BTreeMap<IpAddr, InterfaceSet> = vips
            .into_iter()
            .map(|vip| (vip.addr, vip.interfaces))
            .collect();
        let taken_back: Vec<IpAddr> = self
            .handover
            .keys()
            .filter(|vip| owned.contains_key(vip))
            .copied()
            .collect();
        for vip in taken_back {
            self.handover.remove(&vip);
            self.claimed.retain(|(addr, _), _| *addr != vip);
        }
        for vip in self.handover.keys() {
            if let Some(set) = self.owned.get(vip) {
                owned.insert(*vip, set.clone());
            }
        }
        self.owned = owned;
        let owned = &self.owned;
        self.recent_claims
            .retain(|(vip, _), _| owned.contains_key(vip));
        self.defended.retain(|(vip, _), _| owned.contains_key(vip));
        self.reconcile(now, Urgency::Takeover);
        self.settle_handover();
    }

    /// Changes the owned set VIP by VIP, each by [`set_owned`](Self::set_owned)'s rules:
    /// `own` are owned from now on (a newly owned VIP starts its takeover series at once, one
    /// owned already keeps its schedules on the interfaces it stays on, one being handed over
    /// is taken back), `disown` are not any more (silent at once, unless being handed over:
    /// that runs to its end). A VIP in both is owned. The cost follows the VIPs named, not the
    /// VIPs owned: a speaker that owns thousands tells only what one election changed.
    pub fn update_owned(
        &mut self,
        now: Instant,
        own: impl IntoIterator<Item = Vip>,
        disown: impl IntoIterator<Item = IpAddr>,
    ) {
        let mut touched = BTreeSet::new();
        for vip in disown {
            if !self.handover.contains_key(&vip) && self.owned.remove(&vip).is_some() {
                touched.insert(vip);
            }
        }
        for vip in own {
            if self.handover.remove(&vip.addr).is_some() {
                self.claimed.retain(|(addr, _), _| *addr != vip.addr);
            }
            self.owned.insert(vip.addr, vip.interfaces);
            touched.insert(vip.addr);
        }
        let owned = &self.owned;
        let gone = |vip: &IpAddr| touched.contains(vip) && !owned.contains_key(vip);
        self.recent_claims.retain(|(vip, _), _| !gone(vip));
        self.defended.retain(|(vip, _), _| !gone(vip));
        self.reconcile_vips(now, Urgency::Takeover, &touched);
        self.settle_handover();
    }

    /// Starts handing over these owned VIPs (see the [module docs](self)): no more gratuitous
    /// rounds, answers go on until a successor's claim is heard on each interface or until
    /// `now + bound`, whichever comes first. Each VIP then ends with [`Event::HandedOver`].
    /// A claim heard within `bound` before this call counts: the successor may have spoken
    /// just before we learnt that it would. VIPs already handing over keep their bound; VIPs
    /// not owned are ignored.
    pub fn hand_over(
        &mut self,
        now: Instant,
        bound: Duration,
        vips: impl IntoIterator<Item = IpAddr>,
    ) {
        let deadline = now + bound;
        for vip in vips {
            if self.owned.contains_key(&vip) && !self.handover.contains_key(&vip) {
                self.handover.insert(vip, deadline);
                for ((addr, index), (by, at)) in &self.recent_claims {
                    let memory = bound.min(self.config.claim_memory);
                    if *addr == vip && now.saturating_duration_since(*at) <= memory {
                        self.claimed.insert((vip, *index), *by);
                    }
                }
            }
        }
        let handover = &self.handover;
        self.schedules
            .retain(|(vip, _), _| !handover.contains_key(vip));
        self.queue.retain(|t| {
            !(handover.contains_key(&t.vip)
                && matches!(
                    t.kind,
                    TransmitKind::GratuitousArp | TransmitKind::UnsolicitedNeighborAdvert
                ))
        });
        self.expire_handovers(now);
        self.settle_handover();
    }

    /// The next event, if any.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Restarts the takeover series of every owned VIP on every interface (except VIPs being
    /// handed over), for when the caller has reason to think the network forgot us (e.g. a
    /// partition healed, a member joined). These series are routine: paced behind takeovers.
    /// A takeover whose first round has not left yet keeps its place.
    pub fn reannounce(&mut self, now: Instant) {
        self.schedules
            .retain(|_, s| s.urgency == Urgency::Takeover && s.round == 0);
        self.reconcile(now, Urgency::Routine);
    }

    /// Handles one received frame. Malformed or unwanted frames are counted in [`Stats`] and
    /// dropped; this never fails and never panics, whatever the bytes.
    pub fn handle_frame(&mut self, now: Instant, ifindex: u32, bytes: &[u8]) {
        self.stats.frames_received += 1;
        let verdict = self.judge(ifindex, bytes);
        let stats = &mut self.stats;
        match verdict {
            Verdict::Malformed => stats.malformed += 1,
            Verdict::Ignored => stats.ignored += 1,
            Verdict::BadHopLimit => stats.ndisc_bad_hop_limit += 1,
            Verdict::NotOwned => stats.not_owned += 1,
            Verdict::WrongInterface => stats.wrong_interface += 1,
            Verdict::Claim { vip, by } => {
                stats.conflicts += 1;
                self.on_claim(now, vip, ifindex, by);
            }
            Verdict::Answer(transmit) => {
                match transmit.kind {
                    TransmitKind::ArpReply => stats.arp_requests_answered += 1,
                    _ => stats.neighbor_solicits_answered += 1,
                }
                self.enqueue(transmit);
            }
        }
    }

    /// Sends the rounds that are due at `now`, as many as pacing allows (most urgent first,
    /// see the [module docs](self#pacing)), and ends handovers whose bound has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.expire_handovers(now);
        // A second pass sends the replies of first rounds whose requests the first pass sent.
        for _ in 0..2 {
            if !self.send_due_rounds(now) {
                return;
            }
        }
    }

    /// One pass over the due rounds, most urgent first, while pacing allows; false when
    /// nothing was sent.
    fn send_due_rounds(&mut self, now: Instant) -> bool {
        let allowance = self.pacer.allowance(now);
        if allowance == 0 {
            return false;
        }
        let mut due: Vec<(Rank, (IpAddr, u32))> = self
            .schedules
            .iter()
            .filter(|(_, s)| s.next_at.is_some_and(|at| at <= now))
            .map(|(key, s)| (s.rank(), *key))
            .collect();
        if due.is_empty() {
            return false;
        }
        // Every round is at least one frame: no more than `allowance` of them can go now,
        // so only those need sorting.
        let leaving = usize::try_from(allowance).unwrap_or(usize::MAX);
        if due.len() > leaving {
            due.select_nth_unstable(leaving);
            due.truncate(leaving);
        }
        due.sort_unstable();
        for (_, (addr, ifindex)) in due {
            if self.pacer.allowance(now) == 0 {
                break;
            }
            let Some(schedule) = self.schedules.get(&(addr, ifindex)).copied() else {
                continue;
            };
            // Paced, a takeover's first IPv4 round is split: every VIP's gratuitous request
            // goes before any VIP's reply, so the first word about each VIP is out in half
            // the time.
            let split = self.config.announce_rate.is_some()
                && schedule.urgency == Urgency::Takeover
                && schedule.round == 0
                && addr.is_ipv4();
            let part = match (split, schedule.request_sent) {
                (false, _) => Part::Whole,
                (true, false) => Part::Request,
                (true, true) => Part::Reply,
            };
            let frames = self.send_round(addr, ifindex, part);
            self.pacer.charge(now, frames);
            let Some(schedule) = self.schedules.get_mut(&(addr, ifindex)) else {
                continue;
            };
            if schedule.round == 0 && part != Part::Reply {
                // Later rounds keep their spacing from the first one, however late pacing
                // let it leave.
                schedule.started = now;
            }
            if part == Part::Request {
                schedule.request_sent = true;
                continue;
            }
            schedule.request_sent = false;
            schedule.round += 1;
            schedule.next_at = match self.config.takeover_rounds.get(schedule.round) {
                Some(offset) => Some(schedule.started + *offset),
                None => {
                    schedule.urgency = Urgency::Routine;
                    self.config.refresh_interval.map(|every| now + every)
                }
            };
        }
        true
    }

    /// The next frame to send, if any.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.queue.pop_front()
    }

    /// When [`Announcer::handle_timeout`] should next be called, if ever: the next due
    /// round (no earlier than pacing lets it leave) or handover bound.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let round = self.schedules.values().filter_map(|s| s.next_at).min();
        let round = round.map(|at| self.pacer.ready_at().map_or(at, |ready| at.max(ready)));
        round
            .into_iter()
            .chain(self.handover.values().copied())
            .min()
    }

    /// Another host claimed `vip` on `ifindex`: in a handover, the successor has spoken there;
    /// otherwise a conflict the caller may want to log.
    fn on_claim(&mut self, now: Instant, vip: IpAddr, ifindex: u32, by: EthernetAddress) {
        if !self.announced_on(vip, ifindex) {
            return;
        }
        if self.handover.contains_key(&vip) {
            self.claimed.insert((vip, ifindex), by);
            self.queue
                .retain(|t| !(t.vip == vip && t.ifindex == ifindex));
            self.settle_handover();
        } else {
            self.recent_claims.insert((vip, ifindex), (by, now));
            self.push_event(Event::Claimed { vip, ifindex, by });
            self.defend(now, vip, ifindex);
        }
    }

    /// Restarts `vip`'s takeover series on `ifindex` after a claim, if the defence interval
    /// allows: the first round goes out at the next `handle_timeout` (due at once).
    fn defend(&mut self, now: Instant, vip: IpAddr, ifindex: u32) {
        let Some(every) = self.config.defend_interval else {
            return;
        };
        let key = (vip, ifindex);
        if self
            .defended
            .get(&key)
            .is_some_and(|at| now.saturating_duration_since(*at) < every)
        {
            return;
        }
        self.defended.insert(key, now);
        self.stats.defended += 1;
        let first = self.config.takeover_rounds.first().copied();
        let next_at = first
            .or(self.config.refresh_interval)
            .map(|offset| now + offset);
        self.schedules.insert(
            key,
            Schedule {
                started: now,
                round: 0,
                next_at,
                urgency: Urgency::Takeover,
                request_sent: false,
            },
        );
    }

    /// Releases handover VIPs that a successor claimed on every interface they are announced
    /// on (or that have no such interface left).
    fn settle_handover(&mut self) {
        let done: Vec<(IpAddr, Option<EthernetAddress>)> = self
            .handover
            .keys()
            .filter_map(|vip| {
                let mut successor = None;
                for index in self.interfaces.keys() {
                    if !self.announced_on(*vip, *index) {
                        continue;
                    }
                    successor = Some(*self.claimed.get(&(*vip, *index))?);
                }
                Some((*vip, successor))
            })
            .collect();
        for (vip, successor) in done {
            if successor.is_some() {
                self.stats.handed_over += 1;
            } else {
                self.stats.handover_expired += 1;
            }
            self.release(vip, successor);
        }
    }

    fn expire_handovers(&mut self, now: Instant) {
        let expired: Vec<IpAddr> = self
            .handover
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(vip, _)| *vip)
            .collect();
        for vip in expired {
            self.stats.handover_expired += 1;
            self.release(vip, None);
        }
    }

    /// Ends `vip`'s handover: silent at once everywhere, no longer owned.
    fn release(&mut self, vip: IpAddr, successor: Option<EthernetAddress>) {
        self.handover.remove(&vip);
        self.claimed.retain(|(addr, _), _| *addr != vip);
        self.recent_claims.retain(|(addr, _), _| *addr != vip);
        self.defended.retain(|(addr, _), _| *addr != vip);
        self.owned.remove(&vip);
        self.schedules.retain(|(addr, _), _| *addr != vip);
        self.queue.retain(|t| t.vip != vip);
        self.push_event(Event::HandedOver { vip, successor });
    }

    fn push_event(&mut self, event: Event) {
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.stats.events_dropped += 1;
        } else {
            self.events.push_back(event);
        }
    }

    /// Whether `addr` is owned and may be announced on `ifindex`, and no successor has
    /// claimed it there during a handover.
    fn is_eligible(&self, addr: IpAddr, ifindex: u32) -> bool {
        self.announced_on(addr, ifindex) && !self.claimed.contains_key(&(addr, ifindex))
    }

    /// Whether `addr` is owned and may be announced on `ifindex` (interface set, family and
    /// MAC permitting).
    fn announced_on(&self, addr: IpAddr, ifindex: u32) -> bool {
        let (Some(set), Some(iface)) = (self.owned.get(&addr), self.interfaces.get(&ifindex))
        else {
            return false;
        };
        let family = match addr {
            IpAddr::V4(_) => iface.arp,
            IpAddr::V6(_) => iface.ndp,
        };
        family && iface.mac.is_unicast() && set.contains(&iface.name)
    }

    /// Brings schedules and the queue in line with `owned` and `interfaces`; series that
    /// start here have this urgency.
    fn reconcile(&mut self, now: Instant, urgency: Urgency) {
        let eligible: BTreeSet<(IpAddr, u32)> = self
            .owned
            .keys()
            .flat_map(|addr| self.interfaces.keys().map(move |index| (*addr, *index)))
            .filter(|(addr, index)| self.is_eligible(*addr, *index))
            .collect();
        self.schedules.retain(|key, _| eligible.contains(key));
        self.queue
            .retain(|t| eligible.contains(&(t.vip, t.ifindex)));
        for key in eligible {
            self.start_schedule(now, urgency, key);
        }
    }

    /// [`reconcile`](Self::reconcile) for `vips` only: their schedules on the interfaces
    /// they are no longer eligible on and their frames queued there go, a fresh series starts
    /// on each interface they became eligible on.
    fn reconcile_vips(&mut self, now: Instant, urgency: Urgency, vips: &BTreeSet<IpAddr>) {
        let eligible: BTreeSet<(IpAddr, u32)> = vips
            .iter()
            .flat_map(|addr| self.interfaces.keys().map(move |index| (*addr, *index)))
            .filter(|(addr, index)| self.is_eligible(*addr, *index))
            .collect();
        for addr in vips {
            let stale: Vec<(IpAddr, u32)> = self
                .schedules
                .range((*addr, 0)..=(*addr, u32::MAX))
                .map(|(key, _)| *key)
                .filter(|key| !eligible.contains(key))
                .collect();
            for key in stale {
                self.schedules.remove(&key);
            }
        }
        self.queue
            .retain(|t| !vips.contains(&t.vip) || eligible.contains(&(t.vip, t.ifindex)));
        for key in eligible {
            self.start_schedule(now, urgency, key);
        }
    }

    /// A takeover series for `key` from `now`, unless one runs or the VIP is being handed
    /// over (answers only: its gratuitous rounds stopped with the handover).
    fn start_schedule(&mut self, now: Instant, urgency: Urgency, key: (IpAddr, u32)) {
        if self.handover.contains_key(&key.0) {
            return;
        }
        let first = self.config.takeover_rounds.first().copied();
        self.schedules.entry(key).or_insert_with(|| Schedule {
            started: now,
            round: 0,
            next_at: first
                .or(self.config.refresh_interval)
                .map(|offset| now + offset),
            urgency,
            request_sent: false,
        });
    }

    fn enqueue(&mut self, transmit: Transmit) {
        if self.queue.len() >= self.config.max_queued_transmits {
            self.stats.transmit_queue_full += 1;
        } else {
            self.queue.push_back(transmit);
        }
    }

    /// Queues one round of gratuitous frames for `addr` on `ifindex`, or a part of it;
    /// returns how many.
    fn send_round(&mut self, addr: IpAddr, ifindex: u32, part: Part) -> u32 {
        let Some(mac) = self.interfaces.get(&ifindex).map(|iface| iface.mac) else {
            return 0;
        };
        match addr {
            IpAddr::V4(vip) => {
                let frames: &[_] = match part {
                    Part::Whole => &[
                        (arp::Operation::Request, EthernetAddress::default()),
                        (arp::Operation::Reply, EthernetAddress::BROADCAST),
                    ],
                    Part::Request => &[(arp::Operation::Request, EthernetAddress::default())],
                    Part::Reply => &[(arp::Operation::Reply, EthernetAddress::BROADCAST)],
                };
                for &(operation, target_mac) in frames {
                    let frame = frames::arp_frame(
                        mac,
                        EthernetAddress::BROADCAST,
                        &arp::Repr {
                            operation,
                            source_hardware_addr: mac,
                            source_protocol_addr: vip,
                            target_hardware_addr: target_mac,
                            target_protocol_addr: vip,
                        },
                    );
                    self.stats.gratuitous_arp_sent += 1;
                    self.enqueue(Transmit {
                        ifindex,
                        vip: addr,
                        kind: TransmitKind::GratuitousArp,
                        frame,
                    });
                }
                u32::try_from(frames.len()).unwrap_or(u32::MAX)
            }
            IpAddr::V6(vip) => {
                let frame = self.advertisement(
                    mac,
                    vip,
                    EthernetAddress::from_ipv6_multicast(ipv6::ALL_NODES),
                    ipv6::ALL_NODES,
                    NeighborFlags::OVERRIDE,
                );
                self.stats.unsolicited_na_sent += 1;
                self.enqueue(Transmit {
                    ifindex,
                    vip: addr,
                    kind: TransmitKind::UnsolicitedNeighborAdvert,
                    frame,
                });
                1
            }
        }
    }

    fn advertisement(
        &self,
        mac: EthernetAddress,
        vip: Ipv6Addr,
        dst_mac: EthernetAddress,
        dst_ip: Ipv6Addr,
        flags: NeighborFlags,
    ) -> Vec<u8> {
        let flags = if self.config.router {
            flags | NeighborFlags::ROUTER
        } else {
            flags
        };
        frames::ndisc_frame(
            &NdiscAddressing {
                src_mac: mac,
                dst_mac,
                src_ip: vip,
                dst_ip,
                hop_limit: ipv6::NDISC_HOP_LIMIT,
            },
            &ndisc::Repr::NeighborAdvert {
                flags,
                target_addr: vip,
                lladdr: Some(mac),
            },
        )
    }

    /// Decides what one received frame deserves. Pure: counters are updated by the caller.
    fn judge(&self, ifindex: u32, bytes: &[u8]) -> Verdict {
        let Some(iface) = self.interfaces.get(&ifindex) else {
            return Verdict::Ignored;
        };
        let Ok(frame) = ethernet::Frame::new_checked(bytes) else {
            return Verdict::Malformed;
        };
        if frame.src_addr() == iface.mac {
            // Our own frame, looped back to a packet socket.
            return Verdict::Ignored;
        }
        match frame.ethertype() {
            EtherType::Arp => self.judge_arp(ifindex, iface, &frame),
            EtherType::Ipv6 => self.judge_ndisc(ifindex, iface, &frame),
            _ => Verdict::Ignored,
        }
    }

    /// Whether `addr` is owned here, and announced on `ifindex`.
    fn ownership(&self, addr: IpAddr, ifindex: u32) -> Result<(), Verdict> {
        if !self.owned.contains_key(&addr) {
            Err(Verdict::NotOwned)
        } else if !self.is_eligible(addr, ifindex) {
            Err(Verdict::WrongInterface)
        } else {
            Ok(())
        }
    }

    fn judge_arp(
        &self,
        ifindex: u32,
        iface: &Interface,
        frame: &ethernet::Frame<&[u8]>,
    ) -> Verdict {
        let Ok(packet) = arp::Packet::new_checked(frame.payload()) else {
            return Verdict::Malformed;
        };
        let Ok(repr) = arp::Repr::parse(&packet) else {
            return Verdict::Malformed;
        };
        let sender_claims_ours = self
            .owned
            .contains_key(&IpAddr::V4(repr.source_protocol_addr))
            && repr.source_hardware_addr != iface.mac;
        let claim = || {
            if sender_claims_ours {
                Verdict::Claim {
                    vip: IpAddr::V4(repr.source_protocol_addr),
                    by: repr.source_hardware_addr,
                }
            } else {
                Verdict::Ignored
            }
        };
        if repr.operation != arp::Operation::Request {
            return claim();
        }
        if repr.source_protocol_addr == repr.target_protocol_addr {
            // A gratuitous request is an announcement, not a question.
            return claim();
        }
        let dst = frame.dst_addr();
        if !(dst.is_broadcast() || dst == iface.mac) || !repr.source_hardware_addr.is_unicast() {
            return Verdict::Ignored;
        }
        let vip: Ipv4Addr = repr.target_protocol_addr;
        if let Err(verdict) = self.ownership(IpAddr::V4(vip), ifindex) {
            return verdict;
        }
        let reply = arp::Repr {
            operation: arp::Operation::Reply,
            source_hardware_addr: iface.mac,
            source_protocol_addr: vip,
            target_hardware_addr: repr.source_hardware_addr,
            target_protocol_addr: repr.source_protocol_addr,
        };
        Verdict::Answer(Transmit {
            ifindex,
            vip: IpAddr::V4(vip),
            kind: TransmitKind::ArpReply,
            frame: frames::arp_frame(iface.mac, repr.source_hardware_addr, &reply),
        })
    }

    fn judge_ndisc(
        &self,
        ifindex: u32,
        iface: &Interface,
        frame: &ethernet::Frame<&[u8]>,
    ) -> Verdict {
        let Ok(packet) = ipv6::Packet::new_checked(frame.payload()) else {
            return Verdict::Malformed;
        };
        let Ok(ip) = ipv6::Repr::parse(&packet) else {
            return Verdict::Malformed;
        };
        if ip.next_header != ipv6::NextHeader::Icmpv6 {
            return Verdict::Ignored;
        }
        let Ok(icmp) = icmpv6::Packet::new_checked(packet.payload()) else {
            return Verdict::Malformed;
        };
        if !matches!(
            icmp.msg_type(),
            icmpv6::Message::NeighborSolicit | icmpv6::Message::NeighborAdvert
        ) {
            return Verdict::Ignored;
        }
        if ip.hop_limit != ipv6::NDISC_HOP_LIMIT {
            // RFC 4861 7.1.1: it may have come from off-link.
            return Verdict::BadHopLimit;
        }
        let Ok(icmpv6::Repr::Ndisc(message)) = icmpv6::Repr::parse(ip.src_addr, ip.dst_addr, &icmp)
        else {
            return Verdict::Malformed;
        };
        if ip.src_addr.is_multicast() {
            return Verdict::Malformed;
        }
        let (target, lladdr) = match message {
            ndisc::Repr::NeighborAdvert {
                target_addr,
                lladdr,
                ..
            } => {
                return match lladdr {
                    Some(by)
                        if by != iface.mac && self.owned.contains_key(&IpAddr::V6(target_addr)) =>
                    {
                        Verdict::Claim {
                            vip: IpAddr::V6(target_addr),
                            by,
                        }
                    }
                    _ => Verdict::Ignored,
                };
            }
            ndisc::Repr::NeighborSolicit {
                target_addr,
                lladdr,
            } => (target_addr, lladdr),
        };
        let dad = ip.src_addr.is_unspecified();
        // RFC 4861 7.1.1: a DAD probe goes to a solicited-node group and carries no SLLA.
        if dad && (lladdr.is_some() || !ipv6::is_solicited_node(ip.dst_addr)) {
            return Verdict::Malformed;
        }
        if ip.dst_addr != ipv6::solicited_node(target) && ip.dst_addr != target {
            return Verdict::Ignored;
        }
        let eth_dst = frame.dst_addr();
        let eth_dst_ok = eth_dst == iface.mac
            || (ip.dst_addr.is_multicast()
                && eth_dst == EthernetAddress::from_ipv6_multicast(ip.dst_addr));
        if !eth_dst_ok {
            return Verdict::Ignored;
        }
        if let Err(verdict) = self.ownership(IpAddr::V6(target), ifindex) {
            return verdict;
        }
        let (dst_mac, dst_ip, flags) = if dad {
            // RFC 4861 7.2.4: answer a DAD probe to all-nodes, without S.
            (
                EthernetAddress::from_ipv6_multicast(ipv6::ALL_NODES),
                ipv6::ALL_NODES,
                NeighborFlags::OVERRIDE,
            )
        } else {
            (
                lladdr.unwrap_or_else(|| frame.src_addr()),
                ip.src_addr,
                NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
            )
        };
        if !dst_mac.is_multicast() && !dst_mac.is_unicast() {
            return Verdict::Malformed;
        }
        Verdict::Answer(Transmit {
            ifindex,
            vip: IpAddr::V6(target),
            kind: TransmitKind::NeighborAdvert,
            frame: self.advertisement(iface.mac, target, dst_mac, dst_ip, flags),
        })
    }
}

#[cfg(test)]
mod pacing_tests;
#[cfg(test)]
mod tests;
