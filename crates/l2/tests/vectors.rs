//! Frames written by the Linux kernel (`tests/vectors/l2/kernel.pcap`, see its README): our
//! parsers must read them, our emitters must rebuild them, and the announcer, put in the
//! kernel's place, must give the kernel's answers byte for byte.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use vigil_l2::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use vigil_l2::wire::ndisc::NeighborFlags;
use vigil_l2::wire::{arp, icmpv6, ipv6, ndisc};
use vigil_l2::{Announcer, Config, Interface, InterfaceSet, TransmitKind, Vip};

const X_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 1]);
const Y_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 2]);
const X4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
const Y4: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const X6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
const Y6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);

/// The frames of a classic (not pcapng) Ethernet capture.
fn pcap_frames(bytes: &[u8]) -> Vec<Vec<u8>> {
    let magic = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
    let read_u32 = |b: &[u8]| {
        let raw: [u8; 4] = b[..4].try_into().unwrap();
        match magic {
            0xa1b2_c3d4 | 0xa1b2_3c4d => u32::from_le_bytes(raw),
            _ => u32::from_be_bytes(raw),
        }
    };
    assert_eq!(read_u32(&bytes[20..24]), 1, "link type Ethernet");
    let mut frames = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let captured = read_u32(&bytes[at + 8..]) as usize;
        let original = read_u32(&bytes[at + 12..]) as usize;
        assert_eq!(captured, original, "whole frames captured");
        frames.push(bytes[at + 16..at + 16 + captured].to_vec());
        at += 16 + captured;
    }
    frames
}

fn kernel_frames() -> Vec<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/l2/kernel.pcap"
    );
    pcap_frames(&std::fs::read(path).expect("kernel.pcap"))
}

/// One frame, fully parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Parsed {
    Arp(ethernet::Repr, arp::Repr),
    Ndisc(ethernet::Repr, ipv6::Repr, ndisc::Repr),
}

fn parse(frame: &[u8]) -> Parsed {
    let eth = ethernet::Frame::new_checked(frame).unwrap();
    let eth_repr = ethernet::Repr::parse(&eth).unwrap();
    match eth_repr.ethertype {
        EtherType::Arp => {
            let packet = arp::Packet::new_checked(eth.payload()).unwrap();
            Parsed::Arp(eth_repr, arp::Repr::parse(&packet).unwrap())
        }
        EtherType::Ipv6 => {
            let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
            let ip_repr = ipv6::Repr::parse(&ip).unwrap();
            let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
            let Ok(icmpv6::Repr::Ndisc(message)) =
                icmpv6::Repr::parse(ip_repr.src_addr, ip_repr.dst_addr, &icmp)
            else {
                panic!("not neighbour discovery")
            };
            Parsed::Ndisc(eth_repr, ip_repr, message)
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn emit(parsed: &Parsed) -> Vec<u8> {
    match parsed {
        Parsed::Arp(eth, arp) => vigil_l2::frames::arp_frame(eth.src_addr, eth.dst_addr, arp),
        Parsed::Ndisc(eth, ip, message) => vigil_l2::frames::ndisc_frame(
            &vigil_l2::frames::NdiscAddressing {
                src_mac: eth.src_addr,
                dst_mac: eth.dst_addr,
                src_ip: ip.src_addr,
                dst_ip: ip.dst_addr,
                hop_limit: ip.hop_limit,
            },
            message,
        ),
    }
}

fn find(frames: &[Vec<u8>], what: impl Fn(&Parsed) -> bool) -> Vec<u8> {
    frames
        .iter()
        .find(|f| what(&parse(f)))
        .expect("frame in capture")
        .clone()
}

/// The announcer in Y's place: Y's MAC, owning Y's addresses.
fn announcer_as_y(now: Instant) -> Announcer {
    let mut a = Announcer::new(Config::default());
    a.set_interface(
        now,
        2,
        Interface {
            name: "veth0".into(),
            mac: Y_MAC,
            arp: true,
            ndp: true,
        },
    );
    a.set_owned(
        now,
        [Y4.into(), Y6.into()].map(|addr: IpAddr| Vip {
            addr,
            interfaces: InterfaceSet::All,
        }),
    );
    a
}

fn answers(a: &mut Announcer) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| a.poll_transmit())
        .map(|t| t.frame)
        .collect()
}

#[test]
fn every_kernel_frame_parses_and_re_emits_byte_for_byte() {
    let frames = kernel_frames();
    assert!(frames.len() >= 10, "capture holds {} frames", frames.len());
    for frame in &frames {
        let parsed = parse(frame);
        if let Parsed::Ndisc(_, ip, _) = &parsed {
            assert_eq!(ip.hop_limit, 255);
        }
        // The DAD probe carries a nonce option we skip: everything else is rebuilt exactly.
        let with_unknown_option = matches!(
            &parsed,
            Parsed::Ndisc(_, ip, ndisc::Repr::NeighborSolicit { lladdr: None, .. })
                if ip.src_addr.is_unspecified()
        );
        if !with_unknown_option {
            assert_eq!(&emit(&parsed), frame, "{parsed:?}");
        }
    }
}

#[test]
fn capture_has_every_kind_of_frame() {
    let kinds: Vec<Parsed> = kernel_frames().iter().map(|f| parse(f)).collect();
    let has = |f: &dyn Fn(&Parsed) -> bool| kinds.iter().any(f);
    assert!(has(&|p| matches!(p, Parsed::Arp(e, a)
        if a.operation == arp::Operation::Request && e.dst_addr.is_broadcast()
            && a.source_protocol_addr != a.target_protocol_addr)));
    assert!(has(&|p| matches!(p, Parsed::Arp(e, a)
        if a.operation == arp::Operation::Request && e.dst_addr.is_unicast())));
    assert!(has(
        &|p| matches!(p, Parsed::Arp(_, a) if a.operation == arp::Operation::Reply)
    ));
    assert!(has(&|p| matches!(p, Parsed::Arp(_, a)
        if a.source_protocol_addr == a.target_protocol_addr)));
    assert!(has(
        &|p| matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborSolicit { .. })
        if ip.src_addr.is_unspecified())
    ));
    assert!(has(
        &|p| matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborSolicit { lladdr: Some(_), .. })
        if ip.dst_addr == ipv6::solicited_node(Y6))
    ));
    assert!(has(
        &|p| matches!(p, Parsed::Ndisc(_, _, ndisc::Repr::NeighborAdvert { flags, .. })
        if *flags == NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE)
    ));
    assert!(has(
        &|p| matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborAdvert { flags, .. })
        if *flags == NeighborFlags::OVERRIDE && ip.dst_addr == ipv6::ALL_NODES)
    ));
}

#[test]
fn announcer_answers_the_kernels_questions_as_the_kernel_did() {
    let frames = kernel_frames();
    let now = Instant::now();
    let mut y = announcer_as_y(now);
    answers(&mut y); // nothing queued before handle_timeout; drain to be sure

    // Broadcast and unicast ARP requests from X for Y4, and the kernel's replies.
    for unicast in [false, true] {
        let request = find(&frames, |p| {
            matches!(p, Parsed::Arp(e, a)
            if a.operation == arp::Operation::Request && a.source_protocol_addr == X4
                && a.target_protocol_addr == Y4 && e.dst_addr.is_unicast() == unicast)
        });
        let reply = find(&frames, |p| {
            matches!(p, Parsed::Arp(_, a)
            if a.operation == arp::Operation::Reply && a.source_protocol_addr == Y4)
        });
        assert!(matches!(parse(&reply), Parsed::Arp(e, _) if e.dst_addr == X_MAC));
        y.handle_frame(now, 2, &request);
        assert_eq!(answers(&mut y), vec![reply], "unicast={unicast}");
    }

    // Multicast NS from X for Y6, and the kernel's solicited advertisement.
    let solicit = find(&frames, |p| {
        matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborSolicit { .. })
        if ip.src_addr == X6)
    });
    let advert = find(&frames, |p| {
        matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborAdvert { .. })
        if ip.dst_addr == X6)
    });
    y.handle_frame(now, 2, &solicit);
    assert_eq!(answers(&mut y), vec![advert]);
    assert_eq!(y.stats().malformed, 0);
}

#[test]
fn announcer_announces_as_the_kernel_does() {
    let frames = kernel_frames();
    let now = Instant::now();
    let mut y = announcer_as_y(now);
    y.handle_timeout(now);
    let round: Vec<_> = std::iter::from_fn(|| y.poll_transmit()).collect();
    let garp = find(&frames, |p| {
        matches!(p, Parsed::Arp(e, a)
        if a.source_protocol_addr == Y4 && a.target_protocol_addr == Y4 && e.src_addr == Y_MAC)
    });
    let unsolicited = find(&frames, |p| {
        matches!(p, Parsed::Ndisc(e, ip, ndisc::Repr::NeighborAdvert { .. })
        if ip.dst_addr == ipv6::ALL_NODES && e.src_addr == Y_MAC)
    });
    // Our gratuitous request is the kernel's (arp_notify) to the byte; our round adds a reply.
    let ours_arp: Vec<_> = round
        .iter()
        .filter(|t| t.kind == TransmitKind::GratuitousArp)
        .map(|t| t.frame.clone())
        .collect();
    assert_eq!(ours_arp.len(), 2);
    assert_eq!(ours_arp[0], garp);
    let ours_na: Vec<_> = round
        .iter()
        .filter(|t| t.kind == TransmitKind::UnsolicitedNeighborAdvert)
        .map(|t| t.frame.clone())
        .collect();
    assert_eq!(ours_na, vec![unsolicited]);
}

#[test]
fn announcer_defends_against_the_kernels_dad_probe() {
    let frames = kernel_frames();
    let now = Instant::now();
    let mut a = Announcer::new(Config::default());
    let ours = EthernetAddress([2, 0, 0, 0, 9, 9]);
    a.set_interface(
        now,
        2,
        Interface {
            name: "veth0".into(),
            mac: ours,
            arp: true,
            ndp: true,
        },
    );
    a.set_owned(
        now,
        [Vip {
            addr: Y6.into(),
            interfaces: InterfaceSet::All,
        }],
    );
    let probe = find(&frames, |p| {
        matches!(p, Parsed::Ndisc(_, ip, ndisc::Repr::NeighborSolicit { .. })
        if ip.src_addr.is_unspecified())
    });
    a.handle_frame(now, 2, &probe);
    let out: Vec<_> = std::iter::from_fn(|| a.poll_transmit())
        .filter(|t| t.kind == TransmitKind::NeighborAdvert)
        .collect();
    assert_eq!(out.len(), 1);
    let Parsed::Ndisc(eth, ip, message) = parse(&out[0].frame) else {
        panic!("not NDP")
    };
    assert_eq!(eth.src_addr, ours);
    assert_eq!(ip.dst_addr, ipv6::ALL_NODES);
    assert_eq!(
        message,
        ndisc::Repr::NeighborAdvert {
            flags: NeighborFlags::OVERRIDE,
            target_addr: Y6,
            lladdr: Some(ours)
        }
    );
}
