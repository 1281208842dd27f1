//! Questions that arrived while the driver was held off are dropped and counted, not answered:
//! those that waited past [`QUESTION_MAX_AGE`] and those queued just before it ran again;
//! questions asked once it runs are answered; and an old claim by another MAC still reaches
//! the announcer. Over a veth pair in a network namespace of the test's own: the driver opens
//! its socket, then the test holds it off (the driver thread is not started yet, as if its
//! process were frozen) while a neighbour asks, and starts it once the first questions are
//! several times the bound old.
//!
//! The claim also wakes the driver's owner ([`DriverConfig::on_events`]) and waits in
//! [`Handle::take_events`](vigil_l2_net::Handle::take_events).
//!
//! Counted per question (each asked from its own sender address, so each answer names its
//! question), no durations. Needs root (network namespaces, AF_PACKET). The test re-runs
//! itself inside the namespace with `ip netns exec`.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use vigil_l2::frames;
use vigil_l2::wire::ethernet::Address as EthernetAddress;
use vigil_l2::wire::{arp, ethernet};
use vigil_l2::{InterfaceSet, Vip};
use vigil_l2_net::freshness::{QUESTION_MAX_AGE, is_stale};
use vigil_l2_net::{Driver, DriverConfig, EventWaker, Filter, PacketSocket};

mod netns;
use netns::{ifindex, ip, wait_until};

const INSIDE: &str = "VIGIL_STALE_NETNS_INSIDE";
const TEST: &str = "questions_that_came_while_the_driver_was_held_off_are_dropped_and_counted";
const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 10);
const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x51]);
/// Another host that claims the VIP (a gratuitous ARP) while the driver is held off.
const RIVAL_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x52]);
/// Questions of each kind.
const QUESTIONS: u8 = 20;

/// When a question is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// While the driver is held off, several times the bound before it runs.
    Early,
    /// While the driver is held off, just before it runs.
    Late,
    /// Once the driver runs.
    Running,
}

/// The sender address of question `n` asked `when`: each answer names its question.
fn sender(when: Asked, n: u8) -> Ipv4Addr {
    let subnet = match when {
        Asked::Early => 1,
        Asked::Late => 2,
        Asked::Running => 3,
    };
    Ipv4Addr::new(198, 18, subnet, n + 1)
}

/// The address an ARP reply for the VIP answers, if `frame` is one (not gratuitous).
fn answered(frame: &[u8]) -> Option<Ipv4Addr> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let packet = arp::Packet::new_checked(eth.payload()).ok()?;
    let repr = arp::Repr::parse(&packet).ok()?;
    (repr.operation == arp::Operation::Reply
        && repr.source_protocol_addr == VIP
        && repr.target_protocol_addr != VIP)
        .then_some(repr.target_protocol_addr)
}

/// Waits until the kernel stamps frames as they arrive, and returns the socket that keeps it
/// so. The first socket that asks for timestamps switches them on for the whole system a moment
/// later (a deferred static key); until then a frame gets the time it is read at, and would look
/// fresh. Switched on when a frame read `2 * QUESTION_MAX_AGE` after it was sent is stale.
fn stamping_on(client: &PacketSocket) -> PacketSocket {
    let probe = PacketSocket::open_stamped(ifindex("p0"), Filter::Questions).expect("probe");
    let mut buf = vec![0u8; 2048];
    wait_until("frames stamped on arrival", || {
        client
            .send(&frames::arp_request(
                CLIENT_MAC,
                Ipv4Addr::new(198, 18, 9, 1),
                VIP,
            ))
            .expect("send a probe");
        std::thread::sleep(2 * QUESTION_MAX_AGE);
        let mut stale = false;
        while let Some(received) = probe.recv_stamped(&mut buf).expect("recv") {
            stale |= is_stale(received.at, SystemTime::now(), QUESTION_MAX_AGE);
        }
        stale
    });
    probe
}

fn inside() {
    // No IPv6 on the links: their duplicate address detection would send solicitations of
    // its own into the count.
    for conf in ["all", "default"] {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1")
            .expect("IPv6 off in the test's namespace");
    }
    ip(&["link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    ip(&["link", "set", "p0", "up"]);
    ip(&["link", "set", "p1", "up"]);
    wait_until("p0 has a carrier", || {
        std::fs::read_to_string("/sys/class/net/p0/carrier").is_ok_and(|c| c.trim() == "1")
    });
    let client = PacketSocket::open(ifindex("p1"), Filter::Answers).expect("client socket");
    let _stamping = stamping_on(&client);
    let wakes = Arc::new(AtomicUsize::new(0));

    let config = DriverConfig {
        announcer: vigil_l2::Config::default(),
        selection: netns::only("p0"),
        verbose: false,
        on_events: Some(EventWaker::new({
            let wakes = Arc::clone(&wakes);
            move || {
                wakes.fetch_add(1, Ordering::SeqCst);
            }
        })),
    };
    // The driver opens p0's socket now; its thread starts later.
    let (driver, handle) = Driver::new(config).expect("driver");
    assert!(
        handle.stats().interfaces.contains("p0"),
        "p0 got no responder"
    );
    handle
        .set_owned(vec![Vip {
            addr: IpAddr::V4(VIP),
            interfaces: InterfaceSet::All,
        }])
        .expect("driver not dropped");

    // Held off: questions and a rival's claim queue in the driver's socket and age.
    let ask = |when| {
        for n in 0..QUESTIONS {
            client
                .send(&frames::arp_request(CLIENT_MAC, sender(when, n), VIP))
                .expect("send a question");
        }
    };
    ask(Asked::Early);
    client
        .send(&frames::arp_request(RIVAL_MAC, VIP, VIP))
        .expect("send a claim");
    std::thread::sleep(4 * QUESTION_MAX_AGE);
    // Young when read, but they too came while the driver did not run.
    ask(Asked::Late);

    let thread = std::thread::spawn(move || driver.run());
    // Every queued frame, the questions and the claim, dropped or handed to the announcer.
    wait_until("the queued frames read", || {
        let stats = handle.stats();
        stats.stale_questions + stats.announcer.frames_received > 2 * u64::from(QUESTIONS)
    });
    ask(Asked::Running);
    let mut buf = vec![0u8; 2048];
    let mut replies: Vec<Ipv4Addr> = Vec::new();
    let fresh: BTreeSet<Ipv4Addr> = (0..QUESTIONS).map(|n| sender(Asked::Running, n)).collect();
    wait_until("the fresh questions answered", || {
        while let Some(n) = client.recv(&mut buf).expect("recv") {
            replies.extend(answered(&buf[..n]));
        }
        fresh.iter().all(|a| replies.contains(a))
    });
    let stats = handle.stats();
    let events = handle.take_events();
    handle
        .send(vigil_l2_net::Command::Shutdown)
        .expect("driver running");
    thread.join().expect("driver thread").expect("driver");
    while let Some(n) = client.recv(&mut buf).expect("recv") {
        replies.extend(answered(&buf[..n]));
    }

    let answered_of = |when| {
        replies
            .iter()
            .filter(|a| (0..QUESTIONS).any(|n| sender(when, n) == **a))
            .count()
    };
    let (early, late, fresh_answered) = (
        answered_of(Asked::Early),
        answered_of(Asked::Late),
        answered_of(Asked::Running),
    );
    eprintln!(
        "{QUESTIONS} questions each: answered {early} asked early in the hold, {late} asked \
         late in it, {fresh_answered} asked once running; {} dropped as stale; claims heard: {}",
        stats.stale_questions, stats.announcer.conflicts
    );
    assert_eq!(early, 0, "a question older than the bound was answered");
    assert_eq!(late, 0, "a question queued behind a stale one was answered");
    assert_eq!(stats.stale_questions, 2 * u64::from(QUESTIONS));
    assert_eq!(
        fresh_answered,
        usize::from(QUESTIONS),
        "each fresh question once"
    );
    assert_eq!(stats.announcer.arp_requests_answered, u64::from(QUESTIONS));
    assert_eq!(
        stats.announcer.conflicts, 1,
        "the old claim reaches the announcer"
    );
    let claimed = |e: &vigil_l2::Event| {
        matches!(e, vigil_l2::Event::Claimed { vip, by, .. }
            if *vip == IpAddr::V4(VIP) && *by == RIVAL_MAC)
    };
    assert!(
        events.iter().any(claimed),
        "the claim is an event for the owner: {events:?}"
    );
    assert!(
        wakes.load(Ordering::SeqCst) >= 1,
        "the owner was not woken for the claim"
    );
}

#[test]
fn questions_that_came_while_the_driver_was_held_off_are_dropped_and_counted() {
    netns::run_in_namespace("vigil-stale", INSIDE, TEST, inside);
}
