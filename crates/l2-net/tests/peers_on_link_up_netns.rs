//! When an interface holding the host's gossip address comes back up, the driver sends one ARP
//! request from that address for each gossip peer ([`Command::SetPeers`]), and none when the
//! address is elsewhere or the peer is the host itself. Over a veth pair in a network namespace
//! of the test's own: the far end is taken down and up (the near end loses and regains its
//! carrier), and a packet socket on the far end counts the requests that arrive.
//!
//! Counted per request, no durations. Needs root (network namespaces, AF_PACKET). The test
//! re-runs itself inside the namespace with `ip netns exec`.
//!
//! [`Command::SetPeers`]: vigil_l2_net::Command::SetPeers

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use vigil_l2::wire::ethernet::Address as EthernetAddress;
use vigil_l2::wire::{arp, ethernet};
use vigil_l2_net::{Driver, DriverConfig, Filter, Handle, PacketSocket};

mod netns;
use netns::{ifindex, ip, wait_until};

const INSIDE: &str = "VIGIL_PEERS_NETNS_INSIDE";
const TEST: &str = "a_link_back_up_asks_for_every_peer_from_the_gossip_address";
const OURS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const PEERS: [Ipv4Addr; 2] = [Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)];

fn mac(name: &str) -> EthernetAddress {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).expect("mac");
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).expect("hex"))
        .collect();
    EthernetAddress(bytes.try_into().expect("six bytes"))
}

/// (sender MAC, sender address, target) of an ARP request, if `frame` is one.
fn request(frame: &[u8]) -> Option<(EthernetAddress, Ipv4Addr, Ipv4Addr)> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let packet = arp::Packet::new_checked(eth.payload()).ok()?;
    let repr = arp::Repr::parse(&packet).ok()?;
    (repr.operation == arp::Operation::Request).then_some((
        repr.source_hardware_addr,
        repr.source_protocol_addr,
        repr.target_protocol_addr,
    ))
}

/// Takes the far end down and up, and waits until the driver has its responder on `p0` again.
fn flap(handle: &Handle) {
    ip(&["link", "set", "p1", "down"]);
    wait_until("p0 lost its responder", || {
        !handle.stats().interfaces.contains("p0")
    });
    ip(&["link", "set", "p1", "up"]);
    wait_until("p0 has its responder again", || {
        handle.stats().interfaces.contains("p0")
    });
}

/// The requests for each target that reached `p1` (from `p0`'s MAC and our address) so far.
fn heard(capture: &PacketSocket, p0: EthernetAddress, counts: &mut BTreeMap<Ipv4Addr, usize>) {
    let mut buf = vec![0u8; 2048];
    loop {
        match capture.recv(&mut buf) {
            Ok(Some(n)) => {
                if let Some((from, sender, target)) = request(&buf[..n])
                    && from == p0
                    && sender == OURS
                {
                    *counts.entry(target).or_default() += 1;
                }
            }
            Ok(None) => return,
            // The socket reports the far end's own down once (ENETDOWN); it reads again after.
            Err(_) => {}
        }
    }
}

fn inside() {
    // No IPv6 on the links: their duplicate address detection would add frames of its own.
    for conf in ["all", "default"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1")
            .expect("IPv6 off in the test's namespace");
    }
    ip(&["link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    ip(&["addr", "add", "198.18.0.1/24", "dev", "p0"]);
    ip(&["link", "set", "p0", "up"]);
    ip(&["link", "set", "p1", "up"]);
    wait_until("p0 has a carrier", || {
        std::fs::read_to_string("/sys/class/net/p0/carrier").is_ok_and(|c| c.trim() == "1")
    });
    let p0 = mac("p0");
    let capture = PacketSocket::open(ifindex("p1"), Filter::Questions).expect("capture socket");

    let config = DriverConfig {
        announcer: vigil_l2::Config::default(),
        selection: netns::only("p0"),
        verbose: false,
        on_events: None,
    };
    let (thread, handle) = Driver::spawn(config).expect("driver");
    wait_until("p0 has a responder", || {
        handle.stats().interfaces.contains("p0")
    });
    let mut peers: Vec<IpAddr> = PEERS.iter().copied().map(IpAddr::V4).collect();
    // Ourselves, as a member list may hold us: never asked for.
    peers.push(IpAddr::V4(OURS));
    handle
        .set_peers(IpAddr::V4(OURS), peers.clone())
        .expect("driver running");

    // Setting the peers sends nothing: only a link that comes up does.
    std::thread::sleep(Duration::from_millis(200));
    let mut counts = BTreeMap::new();
    heard(&capture, p0, &mut counts);
    assert!(
        counts.is_empty(),
        "asked before any link came up: {counts:?}"
    );

    flap(&handle);
    wait_until("every peer asked for", || {
        heard(&capture, p0, &mut counts);
        PEERS.iter().all(|p| counts.contains_key(p))
    });
    let sent = handle.stats().peer_requests_sent;

    // Our address moved elsewhere: a link that comes up asks for no one.
    handle
        .set_peers(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9)), peers)
        .expect("driver running");
    flap(&handle);
    std::thread::sleep(Duration::from_millis(200));
    heard(&capture, p0, &mut counts);
    let sent_after = handle.stats().peer_requests_sent;

    handle
        .send(vigil_l2_net::Command::Shutdown)
        .expect("driver running");
    thread.join().expect("driver thread").expect("driver");
    eprintln!("requests heard per peer: {counts:?}; sent: {sent}, then {sent_after}");
    let expected: BTreeMap<Ipv4Addr, usize> = PEERS.iter().map(|p| (*p, 1)).collect();
    assert_eq!(counts, expected, "one request per peer, none for ourselves");
    assert_eq!(sent, PEERS.len() as u64);
    assert_eq!(
        sent_after, sent,
        "asked from an address the link does not hold"
    );
}

#[test]
fn a_link_back_up_asks_for_every_peer_from_the_gossip_address() {
    netns::run_in_namespace("vigil-peers", INSIDE, TEST, inside);
}
