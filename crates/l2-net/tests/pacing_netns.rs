//! A takeover of a thousand VIPs through the real driver, over a veth pair in a network
//! namespace of the test's own: with pacing, the neighbour on the other end hears the first
//! gratuitous ARP of every VIP (nothing is lost on the way), and the test prints how long the
//! thousand first announcements took. The same without pacing is printed for comparison.
//!
//! Needs root (network namespaces, AF_PACKET). The test re-runs itself inside the namespace
//! with `ip netns exec`.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use vigil_l2::wire::{arp, ethernet};
use vigil_l2::{InterfaceSet, Vip};
use vigil_l2_net::{Driver, DriverConfig, Filter, PacketSocket};

mod netns;
use netns::{ifindex, ip};

const MANY: u32 = 1_000;
const INSIDE: &str = "VIGIL_PACING_NETNS_INSIDE";

fn vips() -> Vec<Vip> {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    (0..MANY)
        .map(|i| Vip {
            addr: IpAddr::V4(Ipv4Addr::from(base + 10 + i)),
            interfaces: InterfaceSet::All,
        })
        .collect()
}

/// The VIP a gratuitous ARP frame announces, if it is one.
fn announced(frame: &[u8]) -> Option<Ipv4Addr> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let packet = arp::Packet::new_checked(eth.payload()).ok()?;
    let repr = arp::Repr::parse(&packet).ok()?;
    (repr.source_protocol_addr == repr.target_protocol_addr).then_some(repr.source_protocol_addr)
}

/// Takes the thousand VIPs over on `p0`; returns how many distinct VIPs `p1` heard announced
/// within 10 s, and how long the last of them took.
fn take_over(announce_rate: Option<std::num::NonZeroU32>) -> (usize, Duration, u64) {
    let capture = PacketSocket::open(ifindex("p1"), Filter::Answers).expect("capture socket");
    let config = DriverConfig {
        announcer: vigil_l2::Config {
            announce_rate,
            // Unpaced, the queue must hold the whole round (the old limit was 4,096).
            max_queued_transmits: 4 * MANY as usize,
            ..vigil_l2::Config::default()
        },
        selection: netns::only("p0"),
        verbose: false,
        on_events: None,
    };
    let (thread, handle) = Driver::spawn(config).expect("driver");
    let end = Instant::now() + Duration::from_secs(10);
    while !handle.stats().interfaces.contains("p0") {
        assert!(Instant::now() < end, "p0 never got a responder");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut buf = vec![0u8; 2048];
    while capture.recv(&mut buf).expect("recv").is_some() {}

    let t0 = Instant::now();
    handle.set_owned(vips()).expect("driver running");
    let mut heard = BTreeSet::new();
    let mut last = Duration::ZERO;
    let end = t0 + Duration::from_secs(10);
    while heard.len() < MANY as usize && Instant::now() < end {
        if !capture
            .wait_readable(Duration::from_millis(100))
            .expect("poll")
        {
            continue;
        }
        while let Some(n) = capture.recv(&mut buf).expect("recv") {
            if let Some(vip) = announced(&buf[..n])
                && heard.insert(vip)
            {
                last = t0.elapsed();
            }
        }
    }
    let send_errors = handle.stats().send_errors;
    handle
        .send(vigil_l2_net::Command::Shutdown)
        .expect("driver running");
    thread.join().expect("driver thread").expect("driver");
    (heard.len(), last, send_errors)
}

fn inside() {
    ip(&["link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    ip(&["link", "set", "p0", "up"]);
    ip(&["link", "set", "p1", "up"]);

    let paced = take_over(vigil_l2::Config::default().announce_rate);
    eprintln!(
        "paced at {} frames/s: {} of {MANY} VIPs heard, the last after {:?}, {} send errors",
        vigil_l2::announcer::DEFAULT_ANNOUNCE_RATE,
        paced.0,
        paced.1,
        paced.2
    );
    let unpaced = take_over(None);
    eprintln!(
        "unpaced: {} of {MANY} VIPs heard, the last after {:?}, {} send errors",
        unpaced.0, unpaced.1, unpaced.2
    );
    assert_eq!(paced.0, MANY as usize, "a first announcement was lost");
    assert_eq!(paced.2, 0);
}

#[test]
fn a_thousand_vips_taken_over_are_all_heard() {
    netns::run_in_namespace(
        "vigil-pace",
        INSIDE,
        "a_thousand_vips_taken_over_are_all_heard",
        inside,
    );
}
