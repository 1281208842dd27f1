use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::frames;
use crate::wire::ethernet::{self, Address as EthernetAddress};
use crate::wire::ndisc::NeighborFlags;
use crate::wire::{arp, icmpv6, ipv6, ndisc};

const ETH0: u32 = 2;
const ETH1: u32 = 3;
const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x01]);
const OUR_MAC_1: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x02]);
const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xcc, 0x01]);
const VIP4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 100);
const CLIENT4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const VIP6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100);
const CLIENT6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);

fn iface(name: &str, mac: EthernetAddress) -> Interface {
    Interface {
        name: name.into(),
        mac,
        arp: true,
        ndp: true,
    }
}

fn vip(addr: impl Into<IpAddr>) -> Vip {
    Vip {
        addr: addr.into(),
        interfaces: InterfaceSet::All,
    }
}

/// An announcer on eth0 (and eth1), owning both VIPs, with the takeover burst drained.
fn owning(t0: Instant) -> Announcer {
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_interface(t0, ETH1, iface("eth1", OUR_MAC_1));
    a.set_owned(t0, [vip(VIP4), vip(VIP6)]);
    drain(&mut a);
    a
}

fn drain(a: &mut Announcer) -> Vec<Transmit> {
    std::iter::from_fn(|| a.poll_transmit()).collect()
}

fn arp_of(frame: &[u8]) -> (ethernet::Repr, arp::Repr) {
    let eth = ethernet::Frame::new_checked(frame).unwrap();
    let repr = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).unwrap()).unwrap();
    (ethernet::Repr::parse(&eth).unwrap(), repr)
}

fn ndisc_of(frame: &[u8]) -> (ethernet::Repr, ipv6::Repr, ndisc::Repr) {
    let eth = ethernet::Frame::new_checked(frame).unwrap();
    let ip = ipv6::Packet::new_checked(eth.payload()).unwrap();
    let ip_repr = ipv6::Repr::parse(&ip).unwrap();
    let icmp = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    let icmpv6::Repr::Ndisc(message) =
        icmpv6::Repr::parse(ip_repr.src_addr, ip_repr.dst_addr, &icmp).unwrap();
    (ethernet::Repr::parse(&eth).unwrap(), ip_repr, message)
}

fn ns(dst_mac: EthernetAddress, dst_ip: Ipv6Addr, hop_limit: u8) -> Vec<u8> {
    frames::ndisc_frame(
        &NdiscAddressing {
            src_mac: CLIENT_MAC,
            dst_mac,
            src_ip: CLIENT6,
            dst_ip,
            hop_limit,
        },
        &ndisc::Repr::NeighborSolicit {
            target_addr: VIP6,
            lladdr: Some(CLIENT_MAC),
        },
    )
}

#[test]
fn answers_broadcast_arp_request_for_owned_vip() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    let out = drain(&mut a);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ifindex, ETH0);
    assert_eq!(out[0].kind, TransmitKind::ArpReply);
    let (eth, reply) = arp_of(&out[0].frame);
    assert_eq!(eth.src_addr, OUR_MAC);
    assert_eq!(eth.dst_addr, CLIENT_MAC);
    assert_eq!(
        reply,
        arp::Repr {
            operation: arp::Operation::Reply,
            source_hardware_addr: OUR_MAC,
            source_protocol_addr: VIP4,
            target_hardware_addr: CLIENT_MAC,
            target_protocol_addr: CLIENT4,
        }
    );
    assert_eq!(a.stats().arp_requests_answered, 1);

    // The same question on the other interface is answered with that interface's MAC.
    a.handle_frame(t0, ETH1, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    let out = drain(&mut a);
    assert_eq!(arp_of(&out[0].frame).1.source_hardware_addr, OUR_MAC_1);
}

#[test]
fn answers_unicast_arp_to_our_mac_only() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let mut request = frames::arp_request(CLIENT_MAC, CLIENT4, VIP4);
    request[..6].copy_from_slice(OUR_MAC.as_bytes());
    a.handle_frame(t0, ETH0, &request);
    assert_eq!(drain(&mut a).len(), 1);
    request[..6].copy_from_slice(&[0x02, 0, 0, 0, 0xdd, 0xdd]);
    a.handle_frame(t0, ETH0, &request);
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().ignored, 1);
}

#[test]
fn silent_for_vips_not_owned_and_on_other_interfaces() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    a.handle_frame(
        t0,
        ETH0,
        &frames::arp_request(CLIENT_MAC, CLIENT4, Ipv4Addr::new(198, 18, 0, 101)),
    );
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().not_owned, 1);

    a.set_owned(
        t0,
        [Vip {
            addr: VIP4.into(),
            interfaces: InterfaceSet::Only(["eth1".to_string()].into()),
        }],
    );
    drain(&mut a);
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().wrong_interface, 1);
    // Unknown interface index: ignored.
    a.handle_frame(t0, 99, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    assert!(drain(&mut a).is_empty());
}

#[test]
fn ignores_replies_gratuitous_and_own_frames_but_counts_conflicts() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    // Someone else's gratuitous ARP for our VIP.
    let garp = frames::arp_request(CLIENT_MAC, VIP4, VIP4);
    a.handle_frame(t0, ETH0, &garp);
    // Our own request looped back.
    a.handle_frame(t0, ETH0, &frames::arp_request(OUR_MAC, CLIENT4, VIP4));
    // No answer to either; the claim only restarts our series (a defence, tested below).
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().conflicts, 1);
    assert_eq!(a.stats().ignored, 1);
}

#[test]
fn answers_multicast_and_unicast_solicitations_with_solicited_override() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let group = ipv6::solicited_node(VIP6);
    for request in [
        ns(EthernetAddress::from_ipv6_multicast(group), group, 255),
        ns(OUR_MAC, VIP6, 255),
    ] {
        a.handle_frame(t0, ETH0, &request);
        let out = drain(&mut a);
        assert_eq!(out.len(), 1, "one answer");
        assert_eq!(out[0].kind, TransmitKind::NeighborAdvert);
        let (eth, ip, message) = ndisc_of(&out[0].frame);
        assert_eq!(eth.src_addr, OUR_MAC);
        assert_eq!(eth.dst_addr, CLIENT_MAC);
        assert_eq!(ip.src_addr, VIP6);
        assert_eq!(ip.dst_addr, CLIENT6);
        assert_eq!(ip.hop_limit, 255);
        assert_eq!(
            message,
            ndisc::Repr::NeighborAdvert {
                flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
                target_addr: VIP6,
                lladdr: Some(OUR_MAC),
            }
        );
    }
    assert_eq!(a.stats().neighbor_solicits_answered, 2);
}

#[test]
fn router_flag_follows_config() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config {
        router: true,
        ..Config::default()
    });
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP6)]);
    a.handle_timeout(t0);
    let out = drain(&mut a);
    let (_, _, message) = ndisc_of(&out[0].frame);
    let ndisc::Repr::NeighborAdvert { flags, .. } = message else {
        panic!("not an advertisement")
    };
    assert_eq!(flags, NeighborFlags::ROUTER | NeighborFlags::OVERRIDE);
}

#[test]
fn drops_solicitations_with_hop_limit_below_255() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    a.handle_frame(t0, ETH0, &ns(OUR_MAC, VIP6, 64));
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().ndisc_bad_hop_limit, 1);
}

#[test]
fn ignores_solicitations_to_other_groups_or_macs() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let wrong_group: Ipv6Addr = "ff02::1:ff00:1".parse().unwrap();
    a.handle_frame(
        t0,
        ETH0,
        &ns(
            EthernetAddress::from_ipv6_multicast(wrong_group),
            wrong_group,
            255,
        ),
    );
    a.handle_frame(t0, ETH0, &ns(CLIENT_MAC, VIP6, 255));
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().ignored, 2);
}

#[test]
fn defends_vip_against_duplicate_address_detection() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let group = ipv6::solicited_node(VIP6);
    let probe = frames::ndisc_frame(
        &NdiscAddressing {
            src_mac: CLIENT_MAC,
            dst_mac: EthernetAddress::from_ipv6_multicast(group),
            src_ip: Ipv6Addr::UNSPECIFIED,
            dst_ip: group,
            hop_limit: 255,
        },
        &ndisc::Repr::NeighborSolicit {
            target_addr: VIP6,
            lladdr: None,
        },
    );
    a.handle_frame(t0, ETH0, &probe);
    let out = drain(&mut a);
    let (eth, ip, message) = ndisc_of(&out[0].frame);
    assert_eq!(ip.dst_addr, ipv6::ALL_NODES);
    assert_eq!(eth.dst_addr, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
    assert!(matches!(
        message,
        ndisc::Repr::NeighborAdvert { flags, .. } if flags == NeighborFlags::OVERRIDE
    ));
}

#[test]
fn takeover_sends_at_once_then_a_series_then_stops() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4), vip(VIP6)]);
    assert_eq!(a.poll_timeout(), Some(t0));
    a.handle_timeout(t0);
    let out = drain(&mut a);
    // A gratuitous request and reply for the IPv4 VIP, one unsolicited NA for the IPv6 VIP;
    // every VIP's first frame before any second one (the first round is split when paced).
    assert_eq!(out.len(), 3);
    let (eth, garp) = arp_of(&out[0].frame);
    assert_eq!(eth.dst_addr, EthernetAddress::BROADCAST);
    assert_eq!(garp.operation, arp::Operation::Request);
    assert_eq!(garp.source_protocol_addr, VIP4);
    assert_eq!(garp.target_protocol_addr, VIP4);
    assert_eq!(arp_of(&out[2].frame).1.operation, arp::Operation::Reply);
    let (eth, ip, message) = ndisc_of(&out[1].frame);
    assert_eq!(eth.dst_addr, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]));
    assert_eq!(ip.dst_addr, ipv6::ALL_NODES);
    assert_eq!(
        message,
        ndisc::Repr::NeighborAdvert {
            flags: NeighborFlags::OVERRIDE,
            target_addr: VIP6,
            lladdr: Some(OUR_MAC)
        }
    );

    // Walk the virtual clock through the whole series.
    let mut rounds = 1;
    while let Some(at) = a.poll_timeout() {
        assert!(at >= t0);
        a.handle_timeout(at);
        assert_eq!(drain(&mut a).len(), 3);
        rounds += 1;
        assert!(rounds <= 10, "series must end");
    }
    assert_eq!(rounds, Config::default().takeover_rounds.len());
}

#[test]
fn periodic_refresh_keeps_going() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config {
        takeover_rounds: vec![Duration::ZERO],
        refresh_interval: Some(Duration::from_secs(30)),
        ..Config::default()
    });
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4)]);
    a.handle_timeout(t0);
    assert_eq!(drain(&mut a).len(), 2);
    for n in 1..=5u32 {
        let at = a.poll_timeout().unwrap();
        assert_eq!(at, t0 + Duration::from_secs(30) * n);
        a.handle_timeout(at);
        assert_eq!(drain(&mut a).len(), 2);
    }
}

#[test]
fn losing_ownership_is_silent_at_once() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4), vip(VIP6)]);
    a.handle_timeout(t0);
    // A question arrives, its answer is queued, then ownership is lost before the driver drains.
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    a.set_owned(t0, [vip(VIP6)]);
    let out = drain(&mut a);
    assert!(out.iter().all(|t| t.vip == IpAddr::V6(VIP6)));
    a.set_owned(t0, []);
    assert_eq!(a.poll_timeout(), None);
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    a.handle_frame(t0, ETH0, &ns(OUR_MAC, VIP6, 255));
    a.handle_timeout(t0 + Duration::from_secs(10));
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.solicited_node_groups(ETH0).len(), 0);
}

#[test]
fn new_interface_and_mac_change_restart_the_series() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4), vip(VIP6)]);
    a.handle_timeout(t0);
    drain(&mut a);

    let t1 = t0 + Duration::from_secs(60);
    // Series on eth0 is over; an interface that appears now gets its own.
    while let Some(at) = a.poll_timeout() {
        a.handle_timeout(at);
    }
    drain(&mut a);
    a.set_interface(t1, ETH1, iface("eth1", OUR_MAC_1));
    assert_eq!(a.poll_timeout(), Some(t1));
    a.handle_timeout(t1);
    let out = drain(&mut a);
    assert_eq!(out.len(), 3);
    assert!(out.iter().all(|t| t.ifindex == ETH1));
    assert_eq!(
        a.solicited_node_groups(ETH1),
        [ipv6::solicited_node(VIP6)].into()
    );

    // Same interface, same MAC: no new series. New MAC: a new series with the new MAC.
    a.set_interface(t1, ETH0, iface("eth0", OUR_MAC));
    a.handle_timeout(t1);
    assert!(drain(&mut a).is_empty());
    let new_mac = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x09]);
    a.set_interface(t1, ETH0, iface("eth0", new_mac));
    a.handle_timeout(t1);
    let out = drain(&mut a);
    assert_eq!(out.len(), 3);
    assert_eq!(arp_of(&out[0].frame).0.src_addr, new_mac);

    // An interface that goes away takes its queue with it.
    a.handle_frame(t1, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    a.remove_interface(ETH0);
    assert!(drain(&mut a).is_empty());
}

#[test]
fn family_flags_select_responders() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(
        t0,
        ETH0,
        Interface {
            arp: false,
            ..iface("eth0", OUR_MAC)
        },
    );
    a.set_owned(t0, [vip(VIP4), vip(VIP6)]);
    a.handle_timeout(t0);
    let out = drain(&mut a);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].vip, IpAddr::V6(VIP6));
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    assert!(drain(&mut a).is_empty());
}

#[test]
fn transmit_queue_is_bounded() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config {
        max_queued_transmits: 4,
        ..Config::default()
    });
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4)]);
    for _ in 0..10 {
        a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    }
    assert_eq!(drain(&mut a).len(), 4);
    assert_eq!(a.stats().transmit_queue_full, 6);
}

#[test]
fn every_truncation_of_valid_questions_is_dropped_and_counted() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let group = ipv6::solicited_node(VIP6);
    let questions = [
        frames::arp_request(CLIENT_MAC, CLIENT4, VIP4),
        ns(EthernetAddress::from_ipv6_multicast(group), group, 255),
    ];
    let mut fed = 0;
    for question in &questions {
        for len in 0..question.len() {
            a.handle_frame(t0, ETH0, &question[..len]);
            fed += 1;
        }
    }
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.stats().malformed, fed);
}

fn accounted(stats: &Stats) -> u64 {
    stats.malformed
        + stats.ignored
        + stats.ndisc_bad_hop_limit
        + stats.not_owned
        + stats.wrong_interface
        + stats.conflicts
        + stats.arp_requests_answered
        + stats.neighbor_solicits_answered
}

proptest! {
    #[test]
    fn any_bytes_are_handled_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let t0 = Instant::now();
        let mut a = owning(t0);
        a.handle_frame(t0, ETH0, &bytes);
        drain(&mut a);
        prop_assert_eq!(accounted(a.stats()), a.stats().frames_received);
    }

    #[test]
    fn mutated_questions_are_handled_without_panic(
        which in 0usize..3,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let t0 = Instant::now();
        let mut a = owning(t0);
        let group = ipv6::solicited_node(VIP6);
        let mut frame = match which {
            0 => frames::arp_request(CLIENT_MAC, CLIENT4, VIP4),
            1 => ns(EthernetAddress::from_ipv6_multicast(group), group, 255),
            _ => ns(OUR_MAC, VIP6, 255),
        };
        for (at, value) in flips {
            let len = frame.len();
            frame[at % len] = value;
        }
        let keep = cut % (frame.len() + 1);
        a.handle_frame(t0, ETH0, &frame[..keep]);
        for t in drain(&mut a) {
            // Whatever we answer parses back.
            let eth = ethernet::Frame::new_checked(&t.frame[..]).unwrap();
            prop_assert_eq!(eth.src_addr(), OUR_MAC);
        }
        prop_assert_eq!(accounted(a.stats()), a.stats().frames_received);
    }
}

const SUCCESSOR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xbb, 0x01]);

/// The successor's gratuitous ARP reply for the IPv4 VIP (the second frame of its round).
fn successor_garp_reply() -> Vec<u8> {
    successor_claim(VIP4.into())
}

/// The successor's unsolicited advertisement for the IPv6 VIP.
fn successor_na() -> Vec<u8> {
    successor_claim(VIP6.into())
}

fn hand_over_all(a: &mut Announcer, now: Instant, bound: Duration) {
    let vips: Vec<IpAddr> = a.owned().map(|(vip, _)| *vip).collect();
    a.hand_over(now, bound, vips);
}

fn events(a: &mut Announcer) -> Vec<Event> {
    std::iter::from_fn(|| a.poll_event()).collect()
}

/// Whether an ARP question about the IPv4 VIP on `ifindex` is answered now.
fn answers_arp(a: &mut Announcer, now: Instant, ifindex: u32) -> bool {
    a.handle_frame(
        now,
        ifindex,
        &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4),
    );
    drain(a)
        .iter()
        .any(|t| t.kind == TransmitKind::ArpReply && t.ifindex == ifindex)
}

#[test]
fn handover_answers_until_the_successor_claims_each_interface() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    hand_over_all(&mut a, t0, Duration::from_secs(1));
    assert_eq!(a.handing_over().count(), 2);
    // No more gratuitous rounds: they would fight the successor's. Only the bound is pending.
    assert_eq!(a.poll_timeout(), Some(t0 + Duration::from_secs(1)));
    let t1 = t0 + Duration::from_millis(100);
    a.handle_timeout(t1);
    assert!(drain(&mut a).is_empty());
    // Still the owner for clients until the successor speaks.
    assert!(answers_arp(&mut a, t1, ETH0));
    assert!(answers_arp(&mut a, t1, ETH1));

    // The successor's gratuitous request on eth0: silent there, still answering on eth1.
    a.handle_frame(t1, ETH0, &frames::arp_request(SUCCESSOR_MAC, VIP4, VIP4));
    assert!(!answers_arp(&mut a, t1, ETH0));
    assert!(answers_arp(&mut a, t1, ETH1));
    assert!(events(&mut a).is_empty());
    assert!(a.owned().any(|(v, _)| *v == IpAddr::V4(VIP4)));

    // Its gratuitous reply on eth1: the VIP is handed over.
    a.handle_frame(t1, ETH1, &successor_garp_reply());
    assert_eq!(
        events(&mut a),
        [Event::HandedOver {
            vip: IpAddr::V4(VIP4),
            successor: Some(SUCCESSOR_MAC)
        }]
    );
    assert!(!answers_arp(&mut a, t1, ETH1));
    assert!(!a.owned().any(|(v, _)| *v == IpAddr::V4(VIP4)));

    // The IPv6 VIP goes the same way, on its unsolicited advertisements.
    a.handle_frame(t1, ETH0, &successor_na());
    a.handle_frame(t1, ETH0, &ns(OUR_MAC, VIP6, 255));
    assert!(drain(&mut a).is_empty(), "no answer on a claimed interface");
    a.handle_frame(t1, ETH1, &successor_na());
    assert_eq!(
        events(&mut a),
        [Event::HandedOver {
            vip: IpAddr::V6(VIP6),
            successor: Some(SUCCESSOR_MAC)
        }]
    );
    assert_eq!(a.stats().handed_over, 2);
    assert_eq!(a.poll_timeout(), None);
    assert_eq!(a.owned().count(), 0);
    assert!(a.solicited_node_groups(ETH0).is_empty());
}

#[test]
fn handover_ends_at_its_bound_when_no_successor_speaks() {
    let t0 = Instant::now();
    let mut a = owning(t0);
    let bound = Duration::from_secs(1);
    hand_over_all(&mut a, t0, bound);
    let before = t0 + bound - Duration::from_millis(1);
    a.handle_timeout(before);
    assert!(answers_arp(&mut a, before, ETH0));
    assert!(events(&mut a).is_empty());
    // A claim by our own MAC (looped back) is not a successor.
    a.handle_frame(before, ETH0, &frames::arp_request(OUR_MAC, VIP4, VIP4));
    assert!(answers_arp(&mut a, before, ETH0));
    let at = a.poll_timeout().unwrap();
    assert_eq!(at, t0 + bound);
    a.handle_timeout(at);
    let mut out = events(&mut a);
    out.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        out,
        [
            Event::HandedOver {
                vip: IpAddr::V4(VIP4),
                successor: None
            },
            Event::HandedOver {
                vip: IpAddr::V6(VIP6),
                successor: None
            },
        ]
    );
    assert_eq!(a.stats().handover_expired, 2);
    assert!(!answers_arp(&mut a, at, ETH0));
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn handover_drops_queued_announcements_but_not_answers() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4)]);
    a.handle_timeout(t0);
    a.handle_frame(t0, ETH0, &frames::arp_request(CLIENT_MAC, CLIENT4, VIP4));
    hand_over_all(&mut a, t0, Duration::from_secs(1));
    let out = drain(&mut a);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].kind, TransmitKind::ArpReply);
    // Neither a re-announcement nor leaving it out of the owned set (as the caller does
    // right after the handover starts) ends it: it is still answered.
    a.reannounce(t0);
    a.set_owned(t0, []);
    let t1 = t0 + Duration::from_millis(500);
    a.handle_timeout(t1);
    assert!(drain(&mut a).is_empty());
    assert_eq!(a.handing_over().count(), 1);
    assert!(answers_arp(&mut a, t1, ETH0));
    // Listed again: taken back, with a fresh takeover series and no event.
    a.set_owned(t1, [vip(VIP4)]);
    assert_eq!(a.handing_over().count(), 0);
    a.handle_timeout(t1);
    assert!(
        drain(&mut a)
            .iter()
            .any(|t| t.kind == TransmitKind::GratuitousArp)
    );
    assert!(events(&mut a).is_empty());
    // VIPs not owned are not handed over; a zero bound ends a handover at once.
    a.hand_over(t1, Duration::ZERO, [IpAddr::V6(VIP6)]);
    assert_eq!(a.handing_over().count(), 0);
    a.hand_over(t1, Duration::ZERO, [IpAddr::V4(VIP4)]);
    assert_eq!(
        events(&mut a),
        [Event::HandedOver {
            vip: IpAddr::V4(VIP4),
            successor: None
        }]
    );
    assert_eq!(a.poll_timeout(), None);
}

#[test]
fn a_claim_heard_just_before_the_handover_counts() {
    // The successor may take over a moment before this node learns that it lost the VIP
    // (a fail-back: both learn of the rejoin at about the same time).
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_owned(t0, [vip(VIP4)]);
    drain(&mut a);
    a.handle_frame(t0, ETH0, &successor_garp_reply());
    let bound = Duration::from_secs(1);
    let t1 = t0 + Duration::from_millis(10);
    a.hand_over(t1, bound, [IpAddr::V4(VIP4)]);
    a.set_owned(t1, []);
    let out = events(&mut a);
    assert_eq!(
        out.last(),
        Some(&Event::HandedOver {
            vip: IpAddr::V4(VIP4),
            successor: Some(SUCCESSOR_MAC)
        })
    );
    assert!(!answers_arp(&mut a, t1, ETH0));
    // An old claim does not count: that VIP is answered until a fresh one or the bound.
    a.set_owned(t1, [vip(VIP4)]);
    a.handle_frame(t1, ETH0, &successor_garp_reply());
    let late = t1 + bound + Duration::from_millis(1);
    a.handle_timeout(late);
    a.hand_over(late, bound, [IpAddr::V4(VIP4)]);
    assert_eq!(a.handing_over().count(), 1);
    assert!(answers_arp(&mut a, late, ETH0));
}

#[test]
fn a_claim_older_than_the_claim_memory_does_not_end_a_handover() {
    // A split's other side claimed the VIP 300 ms ago and has gone quiet since; the handover
    // to it must go on answering until it speaks again (or the bound passes).
    let t0 = Instant::now();
    // Owning the IPv4 VIP with a claim memory of 60 ms, the successor's claim heard at t0.
    let claimed_at_t0 = || {
        let mut a = Announcer::new(Config {
            claim_memory: Duration::from_millis(60),
            ..Config::default()
        });
        a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
        a.set_owned(t0, [vip(VIP4)]);
        drain(&mut a);
        a.handle_frame(t0, ETH0, &successor_garp_reply());
        a
    };
    let mut a = claimed_at_t0();
    let bound = Duration::from_secs(1);
    let t1 = t0 + Duration::from_millis(300);
    a.handle_timeout(t1);
    a.hand_over(t1, bound, [IpAddr::V4(VIP4)]);
    a.set_owned(t1, []);
    assert_eq!(a.handing_over().count(), 1);
    assert!(answers_arp(&mut a, t1, ETH0));
    // Its next claim ends it.
    let t2 = t1 + Duration::from_millis(100);
    a.handle_frame(t2, ETH0, &successor_garp_reply());
    assert_eq!(a.handing_over().count(), 0);
    assert!(!answers_arp(&mut a, t2, ETH0));
    // Within the memory, a claim counts (as with the default of the bound).
    let mut b = claimed_at_t0();
    let t3 = t0 + Duration::from_millis(50);
    b.hand_over(t3, bound, [IpAddr::V4(VIP4)]);
    assert_eq!(b.handing_over().count(), 0);
}

#[test]
fn claims_outside_a_handover_are_reported_once_each() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_interface(t0, ETH1, iface("eth1", OUR_MAC_1));
    let only_eth0 = Vip {
        addr: VIP4.into(),
        interfaces: InterfaceSet::Only(["eth0".to_string()].into()),
    };
    a.set_owned(t0, [only_eth0]);
    a.handle_frame(t0, ETH0, &successor_garp_reply());
    // On an interface the VIP is not announced on: counted, not an event.
    a.handle_frame(t0, ETH1, &successor_garp_reply());
    assert_eq!(
        events(&mut a),
        [Event::Claimed {
            vip: IpAddr::V4(VIP4),
            ifindex: ETH0,
            by: SUCCESSOR_MAC
        }]
    );
    assert_eq!(a.stats().conflicts, 2);
    // A conflict does not make us give up the VIP.
    assert!(answers_arp(&mut a, t0, ETH0));
}

#[test]
fn a_claim_restarts_the_series_at_most_once_per_defend_interval() {
    let t0 = Instant::now();
    let mut a = Announcer::new(Config::default());
    a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    a.set_interface(t0, ETH1, iface("eth1", OUR_MAC_1));
    a.set_owned(t0, [vip(VIP4)]);
    // Past the whole takeover series: nothing scheduled any more.
    while let Some(at) = a.poll_timeout() {
        a.handle_timeout(at);
    }
    drain(&mut a);
    assert_eq!(a.poll_timeout(), None);

    let t1 = t0 + Duration::from_secs(20);
    a.handle_frame(t1, ETH0, &successor_garp_reply());
    assert_eq!(a.poll_timeout(), Some(t1));
    a.handle_timeout(t1);
    let out = drain(&mut a);
    assert_eq!(out.len(), 2, "one round: a request and a reply");
    assert!(
        out.iter()
            .all(|t| t.kind == TransmitKind::GratuitousArp && t.ifindex == ETH0)
    );
    assert_eq!(a.stats().defended, 1);
    // The series goes on (100 ms, 300 ms, ...), so our MAC is the last word once the other
    // node gives the VIP back.
    assert_eq!(a.poll_timeout(), Some(t1 + Duration::from_millis(100)));

    // Another claim within the interval does not restart it; after the interval it does.
    let interval = Config::default().defend_interval.unwrap();
    a.handle_frame(t1 + interval / 2, ETH0, &successor_garp_reply());
    assert_eq!(a.stats().defended, 1);
    a.handle_frame(t1 + interval, ETH0, &successor_garp_reply());
    assert_eq!(a.stats().defended, 2);

    // Switched off: claims are only counted and reported.
    let mut quiet = Announcer::new(Config {
        defend_interval: None,
        ..Config::default()
    });
    quiet.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
    quiet.set_owned(t0, [vip(VIP4)]);
    while let Some(at) = quiet.poll_timeout() {
        quiet.handle_timeout(at);
    }
    drain(&mut quiet);
    quiet.handle_frame(t1, ETH0, &successor_garp_reply());
    assert_eq!(quiet.poll_timeout(), None);
    assert_eq!(events(&mut quiet).len(), 1);
}

/// A step of [`owning_by_changes_is_owning_whole`].
#[derive(Debug, Clone)]
enum OwnStep {
    /// Own VIP `n` on interface set `s`.
    Own(usize, usize),
    /// Disown VIP `n`.
    Disown(usize),
    /// Hand VIP `n` over for 20 ms, and own the rest.
    HandOver(usize),
    /// A successor claims VIP `n` on eth0.
    Claim(usize),
    /// Time passes, in milliseconds.
    Wait(u64),
}

fn own_step() -> impl Strategy<Value = OwnStep> {
    prop_oneof![
        3 => (0usize..6, 0usize..3).prop_map(|(n, s)| OwnStep::Own(n, s)),
        2 => (0usize..6).prop_map(OwnStep::Disown),
        1 => (0usize..6).prop_map(OwnStep::HandOver),
        1 => (0usize..6).prop_map(OwnStep::Claim),
        2 => (1u64..400).prop_map(OwnStep::Wait),
    ]
}

/// VIP `n` of the test's six: three IPv4, three IPv6.
fn nth_vip(n: usize) -> IpAddr {
    let k = u8::try_from(n).unwrap();
    if n < 3 {
        Ipv4Addr::new(198, 18, 0, 100 + k).into()
    } else {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x100 + u16::from(k)).into()
    }
}

/// Interface set `s` of the test's three.
fn nth_set(s: usize) -> InterfaceSet {
    match s {
        0 => InterfaceSet::All,
        1 => InterfaceSet::Only(["eth0".to_string()].into()),
        _ => InterfaceSet::Only(["eth1".to_string()].into()),
    }
}

/// A successor's gratuitous ARP reply or unsolicited advertisement for `vip`.
fn successor_claim(vip: IpAddr) -> Vec<u8> {
    match vip {
        IpAddr::V4(v4) => frames::arp_frame(
            SUCCESSOR_MAC,
            EthernetAddress::BROADCAST,
            &arp::Repr {
                operation: arp::Operation::Reply,
                source_hardware_addr: SUCCESSOR_MAC,
                source_protocol_addr: v4,
                target_hardware_addr: EthernetAddress::BROADCAST,
                target_protocol_addr: v4,
            },
        ),
        IpAddr::V6(v6) => frames::ndisc_frame(
            &NdiscAddressing {
                src_mac: SUCCESSOR_MAC,
                dst_mac: EthernetAddress::from_ipv6_multicast(ipv6::ALL_NODES),
                src_ip: v6,
                dst_ip: ipv6::ALL_NODES,
                hop_limit: 255,
            },
            &ndisc::Repr::NeighborAdvert {
                flags: NeighborFlags::OVERRIDE,
                target_addr: v6,
                lladdr: Some(SUCCESSOR_MAC),
            },
        ),
    }
}

proptest! {
    /// `update_owned` with what changed leaves the announcer as `set_owned` with the whole
    /// set does: the same frames, events, deadlines and multicast groups after every step.
    #[test]
    fn owning_by_changes_is_owning_whole(steps in proptest::collection::vec(own_step(), 1..40)) {
        let t0 = Instant::now();
        let new = || {
            let mut a = Announcer::new(Config::default());
            a.set_interface(t0, ETH0, iface("eth0", OUR_MAC));
            a.set_interface(t0, ETH1, iface("eth1", OUR_MAC_1));
            a
        };
        let (mut whole, mut by_changes) = (new(), new());
        let mut set: BTreeMap<IpAddr, InterfaceSet> = BTreeMap::new();
        let mut now = t0;
        for step in steps {
            match step {
                OwnStep::Own(n, s) => {
                    set.insert(nth_vip(n), nth_set(s));
                    let vip = Vip { addr: nth_vip(n), interfaces: nth_set(s) };
                    by_changes.update_owned(now, [vip], []);
                }
                OwnStep::Disown(n) => {
                    set.remove(&nth_vip(n));
                    by_changes.update_owned(now, [], [nth_vip(n)]);
                }
                OwnStep::HandOver(n) => {
                    // As the speaker does: the hand-over, then the owned set without it.
                    let bound = Duration::from_millis(20);
                    whole.hand_over(now, bound, [nth_vip(n)]);
                    by_changes.hand_over(now, bound, [nth_vip(n)]);
                    set.remove(&nth_vip(n));
                    by_changes.update_owned(now, [], [nth_vip(n)]);
                }
                OwnStep::Claim(n) => {
                    let frame = successor_claim(nth_vip(n));
                    whole.handle_frame(now, ETH0, &frame);
                    by_changes.handle_frame(now, ETH0, &frame);
                }
                OwnStep::Wait(ms) => {
                    now += Duration::from_millis(ms);
                    whole.handle_timeout(now);
                    by_changes.handle_timeout(now);
                }
            }
            if matches!(step, OwnStep::Own(..) | OwnStep::Disown(_) | OwnStep::HandOver(_)) {
                let vips = set.iter().map(|(addr, interfaces)| Vip {
                    addr: *addr,
                    interfaces: interfaces.clone(),
                });
                whole.set_owned(now, vips);
            }
            prop_assert_eq!(drain(&mut whole), drain(&mut by_changes), "{:?}", step);
            prop_assert_eq!(events(&mut whole), events(&mut by_changes));
            prop_assert_eq!(whole.poll_timeout(), by_changes.poll_timeout());
            for index in [ETH0, ETH1] {
                prop_assert_eq!(
                    whole.solicited_node_groups(index),
                    by_changes.solicited_node_groups(index)
                );
            }
        }
    }
}
