//! The failover prober, the one both `vigil-l2-client watch` (benches, tests) and `vigil lab`
//! use: on one interface of the client, every few milliseconds it asks for a target IPv4
//! address with an ARP request (and, optionally, for a target IPv6 address with a neighbour
//! solicitation, or sends an ICMP echo request to the IPv4 one), records every answer with a
//! monotonic timestamp, the MAC that gave it and the round of questions it arrived in, and
//! computes the outages a client saw.
//!
//! ```text
//!   every interval: ARP request (broadcast) ──┐        ARP replies / gratuitous ARPs ──> Answer
//!                   ICMP echo to last ARP MAC ┴─> LAN  ICMP echo replies            ──> Answer
//!   answers ──> outages(): spans with no answer of a kind, and the MACs either side
//! ```
//!
//! The ICMP echo requests are frames of our own making, sent on the same packet socket to the
//! MAC that answered ARP last (a reply or a gratuitous ARP), rather than through the kernel's
//! ping socket: the kernel would route them through the client's neighbour cache, whose own
//! timers (reachable, stale, delay, probe: seconds) would then be part of the figure, and the
//! answering MAC would have to be fished out of a second socket. Here the ICMP figure is the
//! outage of the data path to the MAC the network currently points at, and the answer's
//! source MAC is read from the same frame. Replies are matched by identifier (the process id)
//! and sequence number.
//!
//! The socket's BPF filter is switched to [`Filter::ArpAndIcmp`], which also lets IPv4 ICMP
//! through (the announcer's filters drop it), or to [`Filter::Answers`] (ARP and neighbour
//! advertisements) when an IPv6 target is asked for; ICMP and IPv6 are not probed together.
//!
//! [`outages`] and [`summarize`] are pure functions over the recorded answers, so the outage
//! arithmetic is tested without a network.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use vigil_l2::frames;
use vigil_l2::wire::arp;
use vigil_l2::wire::ethernet::{self, Address as Mac, EtherType};
use vigil_l2::wire::{icmpv6, ipv6, ndisc};

use vigil_l2_net::{Filter, PacketSocket};

/// What kind of probe an answer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// An ARP reply or a gratuitous ARP for the target.
    Arp,
    /// An ICMP echo reply from the target.
    Icmp,
    /// A neighbour advertisement for the IPv6 target.
    Ndp,
}

impl Kind {
    /// The name printed for this kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Arp => "arp",
            Self::Icmp => "icmp",
            Self::Ndp => "ndp",
        }
    }
}

/// One answer the client received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// When it arrived, since the watch started.
    pub at: Duration,
    /// What it answers.
    pub kind: Kind,
    /// The MAC that answered (the ARP sender hardware address; the Ethernet source for ICMP).
    pub mac: Mac,
    /// An unsolicited ARP announcement (a gratuitous ARP request or reply not addressed to us),
    /// rather than an answer to our question.
    pub gratuitous: bool,
    /// How many probes of this kind had been sent when it arrived: answers with the same round
    /// answer the same question (or arrived while it was the latest).
    pub round: u64,
}

/// A span with no answer of one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outage {
    /// Which kind of probe went unanswered.
    pub kind: Kind,
    /// The last answer before the span (the watch's start when nothing had answered yet).
    pub from: Duration,
    /// The first answer after it; `None` when nothing answered again before the watch ended.
    pub to: Option<Duration>,
    /// `to - from`, or `end - from` for an outage still open at the end.
    pub length: Duration,
    /// The MAC that answered before, if any.
    pub before: Option<Mac>,
    /// The MAC that answered after, if any.
    pub after: Option<Mac>,
}

/// The spans longer than `threshold` in which no answer of `kind` arrived, within a watch that
/// lasted `end`. The span before the first answer and the one after the last count too (as
/// `before: None` and `to: None` respectively). `answers` must be in arrival order.
pub fn outages(answers: &[Answer], kind: Kind, threshold: Duration, end: Duration) -> Vec<Outage> {
    let mut found = Vec::new();
    let mut last: Option<&Answer> = None;
    for answer in answers.iter().filter(|a| a.kind == kind) {
        let from = last.map_or(Duration::ZERO, |l| l.at);
        let gap = answer.at.saturating_sub(from);
        if gap > threshold {
            found.push(Outage {
                kind,
                from,
                to: Some(answer.at),
                length: gap,
                before: last.map(|l| l.mac),
                after: Some(answer.mac),
            });
        }
        last = Some(answer);
    }
    let from = last.map_or(Duration::ZERO, |l| l.at);
    let gap = end.saturating_sub(from);
    if gap > threshold {
        found.push(Outage {
            kind,
            from,
            to: None,
            length: gap,
            before: last.map(|l| l.mac),
            after: None,
        });
    }
    found
}

/// The figures of one kind over a whole watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The kind summarised.
    pub kind: Kind,
    /// Answers received.
    pub answers: u64,
    /// The outages longer than the threshold.
    pub outages: Vec<Outage>,
    /// The longest span without an answer, counting the start and the end of the watch (0
    /// when nothing at all was recorded... then it is the whole watch).
    pub max_gap: Duration,
    /// Every MAC that answered, in order of first appearance.
    pub macs: Vec<Mac>,
    /// How many times the answering MAC differed from the previous answer's.
    pub mac_changes: u64,
    /// Rounds in which more than one MAC answered (two hosts claiming the address at once).
    pub conflicts: u64,
}

/// Summarises the answers of `kind` in a watch that lasted `end`.
pub fn summarize(answers: &[Answer], kind: Kind, threshold: Duration, end: Duration) -> Summary {
    let of_kind: Vec<&Answer> = answers.iter().filter(|a| a.kind == kind).collect();
    let mut macs: Vec<Mac> = Vec::new();
    let mut mac_changes = 0;
    let mut conflicts = 0;
    let mut round_macs: Vec<Mac> = Vec::new();
    let mut round = None;
    let mut max_gap = Duration::ZERO;
    let mut previous: Option<&Answer> = None;
    for answer in &of_kind {
        if !macs.contains(&answer.mac) {
            macs.push(answer.mac);
        }
        if previous.is_some_and(|p| p.mac != answer.mac) {
            mac_changes += 1;
        }
        max_gap = max_gap.max(
            answer
                .at
                .saturating_sub(previous.map_or(Duration::ZERO, |p| p.at)),
        );
        previous = Some(answer);
        if round != Some(answer.round) {
            round = Some(answer.round);
            round_macs.clear();
        }
        if !answer.gratuitous && !round_macs.contains(&answer.mac) {
            round_macs.push(answer.mac);
            if round_macs.len() == 2 {
                conflicts += 1;
            }
        }
    }
    max_gap = max_gap.max(end.saturating_sub(previous.map_or(Duration::ZERO, |p| p.at)));
    Summary {
        kind,
        answers: of_kind.len() as u64,
        outages: outages(answers, kind, threshold, end),
        max_gap,
        macs,
        mac_changes,
        conflicts,
    }
}

/// What to probe and for how long.
#[derive(Debug, Clone, Copy)]
pub struct WatchConfig {
    /// The client's MAC (the interface's).
    pub src_mac: Mac,
    /// The client's IPv4 address on the interface.
    pub src_ip: Ipv4Addr,
    /// The address watched.
    pub target: Ipv4Addr,
    /// Time between probes.
    pub interval: Duration,
    /// How long the watch lasts.
    pub duration: Duration,
    /// Whether to send ICMP echo requests too.
    pub icmp: bool,
    /// The ICMP identifier of our echo requests.
    pub icmp_id: u16,
    /// End the watch this long after the ARP answers first come from a different MAC (a
    /// failover seen), rather than at `duration`.
    pub stop_after_change: Option<Duration>,
    /// Also ask for an IPv6 address with a neighbour solicitation each round.
    pub ipv6: Option<Ipv6Question>,
    /// Ask each round's ARP question from the next address of this range rather than from
    /// `src_ip`, so that every reply names the round it answers even when it comes late.
    pub senders: Option<SenderRange>,
    /// After the last question, keep listening this long for late answers.
    pub linger: Duration,
}

/// Sender addresses for [`WatchConfig::senders`]: `count` addresses from `first` upward,
/// skipping those ending in .0 or .255, used in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderRange {
    /// The first address.
    pub first: Ipv4Addr,
    /// How many (at least 1).
    pub count: u32,
}

impl SenderRange {
    /// The addresses, in order.
    pub fn addresses(self) -> Vec<Ipv4Addr> {
        (u32::from(self.first)..)
            .map(Ipv4Addr::from)
            .filter(|a| !matches!(a.octets()[3], 0 | 255))
            .take(self.count.max(1) as usize)
            .collect()
    }
}

/// An ARP reply from `target` to `my_mac`: the replying MAC and the address asked from.
fn reply_to_sender(frame: &[u8], target: Ipv4Addr, my_mac: Mac) -> Option<(Mac, Ipv4Addr)> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    let repr = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).ok()?).ok()?;
    (repr.operation == arp::Operation::Reply
        && repr.source_protocol_addr == target
        && repr.target_hardware_addr == my_mac
        && repr.target_protocol_addr != target)
        .then_some((repr.source_hardware_addr, repr.target_protocol_addr))
}

/// The IPv6 half of a watch: who asks, for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Question {
    /// The client's IPv6 address on the interface.
    pub src_ip: Ipv6Addr,
    /// The address watched.
    pub target: Ipv6Addr,
}

/// Something worth a line while watching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An answer arrived.
    Answer(Answer),
    /// The ICMP probes now go to this MAC (the latest ARP answer's).
    IcmpTo(Duration, Mac),
    /// A round of questions went out: the `round`-th (from 1), at `at`. Answers until the
    /// next round carry this number.
    Round {
        /// Its number.
        round: u64,
        /// When it was sent.
        at: Duration,
    },
}

/// The recorded answers of a finished watch.
#[derive(Debug, Clone, Default)]
pub struct Recording {
    /// Every answer, in arrival order.
    pub answers: Vec<Answer>,
    /// ARP requests sent.
    pub arp_probes: u64,
    /// ICMP echo requests sent.
    pub icmp_probes: u64,
    /// Neighbour solicitations sent.
    pub ndp_probes: u64,
    /// Sends the socket refused (counted, not fatal).
    pub send_errors: u64,
    /// How long the watch lasted.
    pub end: Duration,
}

/// The most answers a watch records (a bound on memory: 2 kinds at 1 ms for 10 minutes, with
/// room for duplicates).
pub const MAX_ANSWERS: usize = 4_000_000;
/// The longest watch.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// The shortest interval between probes.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// The Internet checksum (RFC 1071) of `data`.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Builds an Ethernet/IPv4/ICMP echo request from `(src_mac, src_ip)` to `(dst_mac, dst_ip)`.
pub fn icmp_echo_request(
    src_mac: Mac,
    dst_mac: Mac,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    id: u16,
    seq: u16,
) -> Vec<u8> {
    const PAYLOAD: &[u8] = b"vigil-watch";
    let icmp_len = 8 + PAYLOAD.len();
    let total = 20 + icmp_len;
    let mut frame = Vec::with_capacity(14 + total);
    frame.extend_from_slice(&dst_mac.0);
    frame.extend_from_slice(&src_mac.0);
    frame.extend_from_slice(&0x0800u16.to_be_bytes());
    let mut ip = [0u8; 20];
    ip[0] = 0x45; // version 4, 5 words of header
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&seq.to_be_bytes()); // identification
    ip[6] = 0x40; // don't fragment
    ip[8] = 64; // TTL
    ip[9] = 1; // ICMP
    ip[12..16].copy_from_slice(&src_ip.octets());
    ip[16..20].copy_from_slice(&dst_ip.octets());
    let sum = checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    frame.extend_from_slice(&ip);
    let mut icmp = vec![8u8, 0, 0, 0]; // echo request, code 0, checksum later
    icmp.extend_from_slice(&id.to_be_bytes());
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(PAYLOAD);
    let sum = checksum(&icmp);
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    frame.extend_from_slice(&icmp);
    frame
}

/// What a received frame says about the target, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// An ARP reply or announcement for the target from `mac`.
    Arp {
        /// The sender hardware address.
        mac: Mac,
        /// Not an answer to us: a gratuitous request or reply.
        gratuitous: bool,
    },
    /// A neighbour advertisement for the IPv6 target from `mac`.
    Ndp {
        /// The advertised link-layer address.
        mac: Mac,
        /// Not an answer to us: an unsolicited advertisement.
        gratuitous: bool,
    },
    /// An ICMP echo reply from the target to our identifier.
    IcmpEchoReply {
        /// The Ethernet source.
        mac: Mac,
        /// Its sequence number.
        seq: u16,
    },
}

/// Reads one frame; anything malformed or not about `target` is `None` (dropped).
pub fn hear(frame: &[u8], me: Ipv4Addr, target: Ipv4Addr, icmp_id: u16) -> Option<Heard> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EtherType::Arp => {
            let repr = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).ok()?).ok()?;
            if repr.source_protocol_addr != target {
                return None;
            }
            let to_us = repr.operation == arp::Operation::Reply && repr.target_protocol_addr == me;
            // A gratuitous ARP: sender and target address are both the target (request or reply).
            let gratuitous = repr.target_protocol_addr == target;
            (to_us || gratuitous).then_some(Heard::Arp {
                mac: repr.source_hardware_addr,
                gratuitous: !to_us,
            })
        }
        EtherType::Ipv4 => {
            let ip = eth.payload();
            let header_len = usize::from(*ip.first()? & 0x0f) * 4;
            if ip.len() < header_len + 8 || ip[0] >> 4 != 4 || header_len < 20 || ip[9] != 1 {
                return None;
            }
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let icmp = &ip[header_len..];
            let id = u16::from_be_bytes([icmp[4], icmp[5]]);
            (src == target && dst == me && icmp[0] == 0 && id == icmp_id).then(|| {
                Heard::IcmpEchoReply {
                    mac: eth.src_addr(),
                    seq: u16::from_be_bytes([icmp[6], icmp[7]]),
                }
            })
        }
        _ => None,
    }
}

/// Reads one frame for a neighbour advertisement of `target`: solicited and sent to `me` (an
/// answer), or sent to a multicast group (an unsolicited announcement, `gratuitous`). The MAC
/// is the target link-layer address option's, else the Ethernet source. Anything malformed or
/// about another address is `None`.
pub fn hear_ndp(frame: &[u8], me: Ipv6Addr, target: Ipv6Addr) -> Option<Heard> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = ipv6::Packet::new_checked(eth.payload()).ok()?;
    let ip_repr = ipv6::Repr::parse(&ip).ok()?;
    let to_us = ip_repr.dst_addr == me;
    if !to_us && !ip_repr.dst_addr.is_multicast() {
        return None;
    }
    let icmp = icmpv6::Packet::new_checked(ip.payload()).ok()?;
    let icmpv6::Repr::Ndisc(ndisc::Repr::NeighborAdvert {
        target_addr,
        lladdr,
        ..
    }) = icmpv6::Repr::parse(ip_repr.src_addr, ip_repr.dst_addr, &icmp).ok()?
    else {
        return None;
    };
    (target_addr == target).then(|| Heard::Ndp {
        mac: lladdr.unwrap_or_else(|| eth.src_addr()),
        gratuitous: !to_us,
    })
}

/// Probes `config.target` on `socket` until `config.duration` has passed or `on_event` says
/// [`ControlFlow::Break`], calling it for every round sent and every answer as it arrives. The
/// socket's filter is replaced by [`Filter::ArpAndIcmp`] (or [`Filter::Answers`] with an IPv6
/// question). Bounded by [`MAX_DURATION`] and [`MAX_ANSWERS`].
pub fn watch(
    socket: &PacketSocket,
    config: &WatchConfig,
    mut on_event: impl FnMut(&Event) -> ControlFlow<()>,
) -> io::Result<Recording> {
    if config.icmp && config.ipv6.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "ICMP echo and an IPv6 question cannot be probed together",
        ));
    }
    socket.set_filter(if config.ipv6.is_some() {
        Filter::Answers
    } else {
        Filter::ArpAndIcmp
    })?;
    let solicit = config
        .ipv6
        .map(|q| frames::neighbor_solicit(config.src_mac, q.src_ip, q.target, None));
    let interval = config.interval.max(MIN_INTERVAL);
    let duration = config.duration.min(MAX_DURATION);
    let senders = config
        .senders
        .map(SenderRange::addresses)
        .unwrap_or_default();
    // The latest round asked from each sender address.
    let mut asked_from: std::collections::HashMap<Ipv4Addr, u64> = Default::default();
    let mut question = frames::arp_request(config.src_mac, config.src_ip, config.target);
    let linger = config.linger.min(MAX_DURATION);
    let mut recording = Recording::default();
    let mut icmp_to: Option<Mac> = None;
    let mut arp_mac: Option<Mac> = None;
    // Questions go out until `stop_at`; answers are read until `linger` after it.
    let mut stop_at = duration;
    let mut asking = true;
    let mut buf = vec![0u8; 2048];
    let start = Instant::now();
    let mut next = start;
    loop {
        let now = Instant::now();
        let elapsed = now - start;
        if asking && elapsed >= stop_at {
            asking = false;
            stop_at = elapsed;
        }
        if !asking && elapsed >= stop_at + linger {
            recording.end = stop_at;
            return Ok(recording);
        }
        if asking && now >= next {
            if !senders.is_empty() {
                let sender = senders[recording.arp_probes as usize % senders.len()];
                question = frames::arp_request(config.src_mac, sender, config.target);
                asked_from.insert(sender, recording.arp_probes + 1);
            }
            if socket.send(&question).is_err() {
                recording.send_errors += 1;
            }
            recording.arp_probes += 1;
            if let Some(solicit) = &solicit {
                if socket.send(solicit).is_err() {
                    recording.send_errors += 1;
                }
                recording.ndp_probes += 1;
            }
            let round = Event::Round {
                round: recording.arp_probes,
                at: now - start,
            };
            if on_event(&round).is_break() {
                asking = false;
                stop_at = now - start;
            }
            if let (true, Some(mac)) = (config.icmp, icmp_to) {
                let seq = recording.icmp_probes as u16;
                let echo = icmp_echo_request(
                    config.src_mac,
                    mac,
                    config.src_ip,
                    config.target,
                    config.icmp_id,
                    seq,
                );
                if socket.send(&echo).is_err() {
                    recording.send_errors += 1;
                }
                recording.icmp_probes += 1;
            }
            // Skip probes we are too late for rather than bursting to catch up.
            while next <= now {
                next += interval;
            }
        }
        while let Some(n) = socket.recv(&mut buf)? {
            let at = start.elapsed();
            let heard =
                hear(&buf[..n], config.src_ip, config.target, config.icmp_id).or_else(|| {
                    let q = config.ipv6?;
                    hear_ndp(&buf[..n], q.src_ip, q.target)
                });
            let named = reply_to_sender(&buf[..n], config.target, config.src_mac)
                .and_then(|(mac, to)| Some((mac, *asked_from.get(&to)?)));
            let answer = match heard {
                _ if named.is_some() => {
                    let (mac, round) = named.expect("checked");
                    Answer {
                        at,
                        kind: Kind::Arp,
                        mac,
                        gratuitous: false,
                        round,
                    }
                }
                Some(Heard::Arp { mac, gratuitous }) => Answer {
                    at,
                    kind: Kind::Arp,
                    mac,
                    gratuitous,
                    round: recording.arp_probes,
                },
                Some(Heard::Ndp { mac, gratuitous }) => Answer {
                    at,
                    kind: Kind::Ndp,
                    mac,
                    gratuitous,
                    round: recording.ndp_probes,
                },
                Some(Heard::IcmpEchoReply { mac, .. }) => Answer {
                    at,
                    kind: Kind::Icmp,
                    mac,
                    gratuitous: false,
                    round: recording.icmp_probes,
                },
                None => continue,
            };
            if answer.kind == Kind::Arp {
                if let (true, Some(after)) = (
                    asking && arp_mac.is_some_and(|m| m != answer.mac),
                    config.stop_after_change,
                ) {
                    stop_at = stop_at.min(at + after);
                }
                arp_mac = Some(answer.mac);
            }
            if answer.kind == Kind::Arp && config.icmp && icmp_to != Some(answer.mac) {
                icmp_to = Some(answer.mac);
                // Only a round or an answer ends a watch early.
                let _ = on_event(&Event::IcmpTo(at, answer.mac));
            }
            if recording.answers.len() < MAX_ANSWERS {
                recording.answers.push(answer);
            }
            if on_event(&Event::Answer(answer)).is_break() {
                recording.end = start.elapsed();
                return Ok(recording);
            }
        }
        let until = if asking {
            next.min(start + stop_at)
        } else {
            start + stop_at + linger
        };
        let wait = until.saturating_duration_since(Instant::now());
        socket.wait_readable(wait)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Mac = Mac([2, 0, 0, 0, 0, 0xa]);
    const B: Mac = Mac([2, 0, 0, 0, 0, 0xb]);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn answer(at: u64, kind: Kind, mac: Mac) -> Answer {
        Answer {
            at: ms(at),
            kind,
            mac,
            gratuitous: false,
            round: at / 10,
        }
    }

    /// Answers of `kind` from `mac` every 10 ms in `[from, to)`.
    fn steady(kind: Kind, mac: Mac, from: u64, to: u64) -> Vec<Answer> {
        (from..to)
            .step_by(10)
            .map(|t| answer(t, kind, mac))
            .collect()
    }

    #[test]
    fn steady_answers_have_no_outage() {
        let answers = steady(Kind::Arp, A, 0, 1000);
        assert!(outages(&answers, Kind::Arp, ms(30), ms(1000)).is_empty());
        let summary = summarize(&answers, Kind::Arp, ms(30), ms(1000));
        assert_eq!(summary.answers, 100);
        assert_eq!(summary.max_gap, ms(10));
        assert_eq!((summary.mac_changes, summary.conflicts), (0, 0));
        assert_eq!(summary.macs, vec![A]);
    }

    #[test]
    fn failover_is_one_outage_from_the_old_mac_to_the_new() {
        let mut answers = steady(Kind::Arp, A, 0, 500);
        answers.extend(steady(Kind::Arp, B, 730, 1000));
        let found = outages(&answers, Kind::Arp, ms(30), ms(1000));
        assert_eq!(
            found,
            vec![Outage {
                kind: Kind::Arp,
                from: ms(490),
                to: Some(ms(730)),
                length: ms(240),
                before: Some(A),
                after: Some(B),
            }]
        );
        let summary = summarize(&answers, Kind::Arp, ms(30), ms(1000));
        assert_eq!(summary.max_gap, ms(240));
        assert_eq!(summary.mac_changes, 1);
        assert_eq!(summary.macs, vec![A, B]);
    }

    #[test]
    fn kinds_are_counted_apart() {
        let mut answers = Vec::new();
        for t in (0..1000).step_by(10) {
            answers.push(answer(t, Kind::Arp, A));
            if !(300..600).contains(&t) {
                answers.push(answer(t + 1, Kind::Icmp, A));
            }
        }
        assert!(outages(&answers, Kind::Arp, ms(30), ms(1000)).is_empty());
        let icmp = outages(&answers, Kind::Icmp, ms(30), ms(1000));
        assert_eq!(icmp.len(), 1);
        assert_eq!((icmp[0].from, icmp[0].to), (ms(291), Some(ms(601))));
        assert_eq!((icmp[0].before, icmp[0].after), (Some(A), Some(A)));
    }

    #[test]
    fn silence_at_the_start_and_the_end_are_outages() {
        let answers = steady(Kind::Arp, A, 200, 600);
        let found = outages(&answers, Kind::Arp, ms(30), ms(1000));
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].from, found[0].before), (ms(0), None));
        assert_eq!(found[0].to, Some(ms(200)));
        assert_eq!(
            (found[1].from, found[1].to, found[1].after),
            (ms(590), None, None)
        );
        assert_eq!(found[1].length, ms(410));
        // Nothing at all: the whole watch is one open outage.
        let none = outages(&[], Kind::Icmp, ms(30), ms(1000));
        assert_eq!(none.len(), 1);
        assert_eq!(
            (none[0].from, none[0].to, none[0].length),
            (ms(0), None, ms(1000))
        );
        assert_eq!(
            summarize(&[], Kind::Icmp, ms(30), ms(1000)).max_gap,
            ms(1000)
        );
    }

    #[test]
    fn gaps_at_the_threshold_are_not_outages() {
        let answers = vec![
            answer(0, Kind::Arp, A),
            answer(30, Kind::Arp, A),
            answer(61, Kind::Arp, A),
        ];
        let found = outages(&answers, Kind::Arp, ms(30), ms(70));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].length, ms(31));
    }

    #[test]
    fn two_macs_answering_one_question_is_a_conflict() {
        let mut answers = Vec::new();
        for round in 0..10u64 {
            let t = round * 10;
            answers.push(Answer {
                round,
                ..answer(t, Kind::Arp, A)
            });
            answers.push(Answer {
                round,
                ..answer(t + 1, Kind::Arp, B)
            });
        }
        // A gratuitous announcement from a third party in a round does not make a conflict.
        answers.push(Answer {
            round: 10,
            gratuitous: true,
            ..answer(100, Kind::Arp, B)
        });
        answers.push(Answer {
            round: 10,
            ..answer(101, Kind::Arp, A)
        });
        let summary = summarize(&answers, Kind::Arp, ms(30), ms(110));
        assert_eq!(summary.conflicts, 10);
        assert_eq!(summary.mac_changes, 20);
        assert!(summary.outages.is_empty());
    }

    #[test]
    fn echo_request_round_trips_through_the_parser() {
        let me = Ipv4Addr::new(198, 18, 0, 2);
        let target = Ipv4Addr::new(198, 18, 0, 100);
        let request = icmp_echo_request(B, A, me, target, 77, 5);
        // The header checksum verifies to zero.
        assert_eq!(checksum(&request[14..34]), 0);
        assert_eq!(checksum(&request[34..]), 0);
        // Turn it into the reply the target would send.
        let mut reply = request.clone();
        reply[0..6].copy_from_slice(&B.0);
        reply[6..12].copy_from_slice(&A.0);
        reply[26..30].copy_from_slice(&target.octets());
        reply[30..34].copy_from_slice(&me.octets());
        reply[34] = 0;
        assert_eq!(
            hear(&reply, me, target, 77),
            Some(Heard::IcmpEchoReply { mac: A, seq: 5 })
        );
        // Our own request, another identifier, or a cut frame: not an answer.
        assert_eq!(hear(&request, me, target, 77), None);
        assert_eq!(hear(&reply, me, target, 78), None);
        for len in 0..reply.len() {
            let _ = hear(&reply[..len], me, target, 77);
        }
        assert_eq!(hear(&reply[..40], me, target, 77), None);
    }

    #[test]
    fn arp_replies_and_announcements_are_heard() {
        let me = Ipv4Addr::new(198, 18, 0, 2);
        let target = Ipv4Addr::new(198, 18, 0, 100);
        let reply = frames::arp_frame(
            A,
            B,
            &arp::Repr {
                operation: arp::Operation::Reply,
                source_hardware_addr: A,
                source_protocol_addr: target,
                target_hardware_addr: B,
                target_protocol_addr: me,
            },
        );
        assert_eq!(
            hear(&reply, me, target, 1),
            Some(Heard::Arp {
                mac: A,
                gratuitous: false
            })
        );
        let announcement = frames::arp_frame(
            A,
            Mac::BROADCAST,
            &arp::Repr {
                operation: arp::Operation::Request,
                source_hardware_addr: A,
                source_protocol_addr: target,
                target_hardware_addr: Mac::default(),
                target_protocol_addr: target,
            },
        );
        assert_eq!(
            hear(&announcement, me, target, 1),
            Some(Heard::Arp {
                mac: A,
                gratuitous: true
            })
        );
        // Our own question (a request for the target from us) is not an answer.
        assert_eq!(
            hear(&frames::arp_request(B, me, target), me, target, 1),
            None
        );
    }

    #[test]
    fn advertisements_to_us_are_answers_and_multicast_ones_announcements() {
        let me: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let target: Ipv6Addr = "2001:db8::100".parse().unwrap();
        let advert = |dst: Ipv6Addr, about: Ipv6Addr| {
            frames::ndisc_frame(
                &frames::NdiscAddressing {
                    src_mac: B,
                    dst_mac: A,
                    src_ip: about,
                    dst_ip: dst,
                    hop_limit: 255,
                },
                &ndisc::Repr::NeighborAdvert {
                    flags: ndisc::NeighborFlags::SOLICITED,
                    target_addr: about,
                    lladdr: Some(B),
                },
            )
        };
        assert_eq!(
            hear_ndp(&advert(me, target), me, target),
            Some(Heard::Ndp {
                mac: B,
                gratuitous: false
            })
        );
        let all_nodes: Ipv6Addr = "ff02::1".parse().unwrap();
        assert_eq!(
            hear_ndp(&advert(all_nodes, target), me, target),
            Some(Heard::Ndp {
                mac: B,
                gratuitous: true
            })
        );
        // About another address, to another host, our own question, garbage: not heard.
        let other: Ipv6Addr = "2001:db8::9".parse().unwrap();
        assert_eq!(hear_ndp(&advert(me, other), me, target), None);
        assert_eq!(hear_ndp(&advert(other, target), me, target), None);
        let question = frames::neighbor_solicit(A, me, target, None);
        assert_eq!(hear_ndp(&question, me, target), None);
        assert_eq!(hear_ndp(&[0xff; 20], me, target), None);
        assert_eq!(hear_ndp(&[], me, target), None);
    }

    #[test]
    fn sender_ranges_skip_network_and_broadcast_octets() {
        let r = SenderRange {
            first: Ipv4Addr::new(198, 18, 1, 253),
            count: 4,
        };
        let want: Vec<Ipv4Addr> = ["198.18.1.253", "198.18.1.254", "198.18.2.1", "198.18.2.2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(r.addresses(), want);
    }

    #[test]
    fn a_reply_names_the_address_it_was_asked_from() {
        let target = Ipv4Addr::new(198, 18, 0, 100);
        let asked_from = Ipv4Addr::new(198, 18, 1, 7);
        let reply = |to_mac: Mac, to_ip: Ipv4Addr| {
            frames::arp_frame(
                B,
                to_mac,
                &arp::Repr {
                    operation: arp::Operation::Reply,
                    source_hardware_addr: B,
                    source_protocol_addr: target,
                    target_hardware_addr: to_mac,
                    target_protocol_addr: to_ip,
                },
            )
        };
        assert_eq!(
            reply_to_sender(&reply(A, asked_from), target, A),
            Some((B, asked_from))
        );
        // To another MAC, a gratuitous reply, our own question: not a reply to us.
        assert_eq!(reply_to_sender(&reply(B, asked_from), target, A), None);
        assert_eq!(reply_to_sender(&reply(A, target), target, A), None);
        let question = frames::arp_request(A, asked_from, target);
        assert_eq!(reply_to_sender(&question, target, A), None);
        assert_eq!(reply_to_sender(&[0; 10], target, A), None);
    }
}
