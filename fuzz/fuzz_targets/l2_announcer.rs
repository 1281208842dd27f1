//! Feed the announcer any frames, never panic: what a hostile or broken LAN can send reaches
//! `Announcer::handle_frame` on every interface vigil announces on.
//!
//! The input is a script of records `[control, delay_ms, len_hi, len_lo, frame...]`: the
//! control byte picks the interface (eth0, eth1 or one the announcer does not know) and whether
//! to fill in the ICMPv6 checksum (so the fuzzer reaches Neighbour Discovery without solving
//! checksums); time advances by `delay_ms` before the frame. After each frame the announcer's
//! timers run and its output is drained.
//!
//! Invariants: every received frame lands in exactly one counter (the `Stats` contract), and
//! every frame the announcer sends is well-formed ARP or NDP (valid checksum) about a VIP it
//! owns, from the MAC of the interface it leaves on.

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use vigil_l2::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use vigil_l2::wire::{arp, icmpv6, ipv6, ndisc};
use vigil_l2::{Announcer, Config, Interface, InterfaceSet, Stats, Transmit, Vip};

const ETH0: u32 = 2;
const ETH1: u32 = 3;
const UNKNOWN_IFINDEX: u32 = 9;
const MAC0: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x01]);
const MAC1: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x02]);
const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100);
/// Only announced on eth1: questions about it on eth0 are `wrong_interface`.
const VIP4_ETH1: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 101);

/// Frames per input, at most: keeps each run cheap whatever the input length.
const MAX_FRAMES: usize = 64;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let mut now = t0;
    let mut announcer = Announcer::new(Config::default());
    for (ifindex, name, mac) in [(ETH0, "eth0", MAC0), (ETH1, "eth1", MAC1)] {
        let iface = Interface {
            name: name.into(),
            mac,
            arp: true,
            ndp: true,
        };
        announcer.set_interface(now, ifindex, iface);
    }
    announcer.set_owned(
        now,
        [
            Vip {
                addr: VIP4.into(),
                interfaces: InterfaceSet::All,
            },
            Vip {
                addr: VIP6.into(),
                interfaces: InterfaceSet::All,
            },
            Vip {
                addr: VIP4_ETH1.into(),
                interfaces: InterfaceSet::Only(["eth1".to_string()].into()),
            },
        ],
    );
    run_timers(&mut announcer, now);

    let mut rest = data;
    for _ in 0..MAX_FRAMES {
        let [control, delay_ms, len_hi, len_lo, tail @ ..] = rest else {
            break;
        };
        let len = usize::from(u16::from_be_bytes([*len_hi, *len_lo])).min(tail.len());
        let (frame, next) = tail.split_at(len);
        rest = next;
        now += Duration::from_millis(u64::from(*delay_ms) * 8);
        let ifindex = match control % 3 {
            0 => ETH0,
            1 => ETH1,
            _ => UNKNOWN_IFINDEX,
        };
        let mut frame = frame.to_vec();
        if control & 0x80 != 0 {
            fill_icmpv6_checksum(&mut frame);
        }
        announcer.handle_frame(now, ifindex, &frame);
        check_stats(announcer.stats());
        run_timers(&mut announcer, now);
        while announcer.poll_event().is_some() {}
    }
});

/// Runs every timer due by `now` and checks what leaves.
fn run_timers(announcer: &mut Announcer, now: Instant) {
    if announcer.poll_timeout().is_some_and(|at| at <= now) {
        announcer.handle_timeout(now);
    }
    while let Some(transmit) = announcer.poll_transmit() {
        check_transmit(&transmit);
    }
}

fn check_stats(stats: &Stats) {
    let landed = stats.malformed
        + stats.ignored
        + stats.ndisc_bad_hop_limit
        + stats.not_owned
        + stats.wrong_interface
        + stats.conflicts
        + stats.arp_requests_answered
        + stats.neighbor_solicits_answered;
    assert_eq!(landed, stats.frames_received, "{stats:?}");
}

fn check_transmit(transmit: &Transmit) {
    let mac = match transmit.ifindex {
        ETH0 => MAC0,
        ETH1 => MAC1,
        other => panic!("sent on interface {other}, which is not the announcer's"),
    };
    assert!(
        [IpAddr::from(VIP4), VIP6.into(), VIP4_ETH1.into()].contains(&transmit.vip),
        "sent about {}, which is not owned",
        transmit.vip
    );
    let frame = ethernet::Frame::new_checked(&transmit.frame[..]).expect("a whole frame");
    assert_eq!(frame.src_addr(), mac);
    match frame.ethertype() {
        EtherType::Arp => {
            let packet = arp::Packet::new_checked(frame.payload()).expect("an ARP packet");
            let repr = arp::Repr::parse(&packet).expect("Ethernet/IPv4 ARP");
            assert_eq!(repr.source_hardware_addr, mac);
            assert_eq!(IpAddr::from(repr.source_protocol_addr), transmit.vip);
        }
        EtherType::Ipv6 => {
            let packet = ipv6::Packet::new_checked(frame.payload()).expect("an IPv6 packet");
            let ip = ipv6::Repr::parse(&packet).expect("IPv6");
            assert_eq!(ip.hop_limit, 255, "NDP needs hop limit 255");
            let icmp = icmpv6::Packet::new_checked(packet.payload()).expect("an ICMPv6 message");
            match icmpv6::Repr::parse(ip.src_addr, ip.dst_addr, &icmp) {
                Ok(icmpv6::Repr::Ndisc(ndisc::Repr::NeighborAdvert {
                    target_addr,
                    lladdr,
                    ..
                })) => {
                    assert_eq!(IpAddr::from(target_addr), transmit.vip);
                    assert_eq!(lladdr, Some(mac));
                }
                other => panic!("sent {other:?}, not a neighbour advertisement"),
            }
        }
        other => panic!("sent ethertype {other:?}"),
    }
}

/// Fills in the ICMPv6 checksum of an Ethernet/IPv6/ICMPv6 frame; leaves anything else alone.
fn fill_icmpv6_checksum(frame: &mut [u8]) {
    let Ok(mut eth) = ethernet::Frame::new_checked(&mut frame[..]) else {
        return;
    };
    if eth.ethertype() != EtherType::Ipv6 {
        return;
    }
    let Ok(mut ip) = ipv6::Packet::new_checked(eth.payload_mut()) else {
        return;
    };
    if ip.next_header() != ipv6::NextHeader::Icmpv6 {
        return;
    }
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    if let Ok(mut icmp) = icmpv6::Packet::new_checked(ip.payload_mut()) {
        icmp.fill_checksum(src, dst);
    }
}
