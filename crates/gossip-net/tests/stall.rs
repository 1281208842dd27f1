//! A driver that stalls (its process stopped, its host starved) must, on waking, read what
//! arrived meanwhile before it runs the timers that fell due: otherwise a refutation waiting
//! in the socket loses to the suspicion timeout it answers, and a live peer is declared dead.
//!
//! Node `a` runs on a current-thread runtime (not on a thread of its own), so it runs only inside `block_on`: outside, it
//! is stalled exactly as a stopped process is, while its socket keeps receiving. Its peer `b`
//! is played by the test on a plain socket (it acks pings; it refutes when the test says).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;
use vigil_gossip::wire::{Ack, Alive, Framing, Message, Suspect, Transport, packet};
use vigil_gossip::{Config, Event as GossipEvent, MemberState};
use vigil_gossip_net::{Event, Events, Memberlist, Options};

/// Rounds of suspect, stall, refute. Without input-before-timers the timer wins about half
/// the time (tokio picks among ready branches at random), so eight rounds would all pass by
/// chance once in 256 runs.
const ROUNDS: u32 = 8;

fn alive(b: SocketAddr, incarnation: u32) -> Vec<u8> {
    let ip = match b.ip() {
        std::net::IpAddr::V4(v4) => v4.octets().to_vec(),
        std::net::IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    Message::Alive(Alive {
        incarnation,
        node: "b".into(),
        addr: Some(ip),
        port: b.port(),
        meta: None,
        vsn: Some(vec![1, 5, 2, 0, 0, 0]),
    })
    .to_vec(Transport::Packet)
}

/// Plays `b`: acks every ping `a` sends it, while `a`'s runtime runs.
async fn answer_pings(socket: Arc<tokio::net::UdpSocket>) {
    let mut buf = vec![0u8; 65_536];
    while let Ok((n, from)) = socket.recv_from(&mut buf).await {
        let Ok(contents) = packet::open(&Framing::default(), &buf[..n]) else {
            continue;
        };
        for m in contents.messages {
            if let Message::Ping(p) = m {
                let ack = Message::Ack(Ack {
                    seq_no: p.seq_no,
                    payload: None,
                });
                let _ = socket.send_to(&ack.to_vec(Transport::Packet), from).await;
            }
        }
    }
}

/// Lets `a` run (and b's ping answers) for `d`; outside this, `a` is stalled.
fn run_for(rt: &Runtime, d: Duration) {
    rt.block_on(async { tokio::time::sleep(d).await });
}

fn state_of_b(rt: &Runtime, a: &Memberlist) -> Option<(MemberState, u32)> {
    rt.block_on(a.members())
        .unwrap()
        .into_iter()
        .find(|m| &*m.name == "b")
        .map(|m| (m.state, m.incarnation))
}

/// `Dead` events about `b` delivered so far.
fn deaths_of_b(rt: &Runtime, events: &mut Events) -> usize {
    rt.block_on(async {
        let mut deaths = 0;
        while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(1), events.recv()).await
        {
            if matches!(ev, Event::Gossip(GossipEvent::Dead(m)) if &*m.name == "b") {
                deaths += 1;
            }
        }
        deaths
    })
}

#[test]
fn a_refutation_that_arrived_during_a_stall_beats_the_suspicion_timer() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut options = Options::new("a", "127.0.0.1:0".parse().unwrap());
    options.config = Config::fast();
    // On the test's runtime, so that stalling the runtime stalls the node.
    options.own_thread = false;
    // A 500 ms suspicion (two members: no confirmations expected, so the minimum) instead
    // of the profile's 150 ms: the only thing that may expire it is the stall, not a busy
    // machine delaying this thread between two steps.
    options.config.suspicion_mult = 10;
    // The stall is longer than `deaf_after`, so `a` would count itself cut off and push/pull
    // with `b` on waking: this `b` is a bare UDP socket whose refused TCP port is proof of
    // absence. Cut-offs are not what this test is about (crates/gossip's tests cover them).
    options.config.deaf_after = Duration::ZERO;
    let suspicion = options.config.probe_interval * options.config.suspicion_mult as u32;
    let (a, mut events) = rt.block_on(Memberlist::start(options)).unwrap();
    let b_socket = Arc::new(
        rt.block_on(tokio::net::UdpSocket::bind("127.0.0.1:0"))
            .unwrap(),
    );
    let b = b_socket.local_addr().unwrap();
    rt.spawn(answer_pings(b_socket.clone()));
    // The test's own sender: what it sends is b's voice (the engine goes by the contents).
    let voice = UdpSocket::bind("127.0.0.1:0").unwrap();
    voice.send_to(&alive(b, 1), a.local_addr()).unwrap();
    run_for(&rt, Duration::from_millis(200));
    assert_eq!(state_of_b(&rt, &a), Some((MemberState::Alive, 1)));
    deaths_of_b(&rt, &mut events);

    let mut incarnation = 1;
    for round in 0..ROUNDS {
        // Someone accuses b; a starts its suspicion timer.
        let accusation = Message::Suspect(Suspect {
            incarnation,
            node: "b".into(),
            from: "x".into(),
        })
        .to_vec(Transport::Packet);
        voice.send_to(&accusation, a.local_addr()).unwrap();
        run_for(&rt, Duration::from_millis(20));
        assert_eq!(
            state_of_b(&rt, &a),
            Some((MemberState::Suspect, incarnation)),
            "round {round}: a suspects b"
        );
        // a stalls past the timer; b's refutation arrives early in the stall, well in time.
        std::thread::sleep(suspicion / 3);
        incarnation += 1;
        voice
            .send_to(&alive(b, incarnation), a.local_addr())
            .unwrap();
        std::thread::sleep(suspicion * 2);
        // a wakes: the refutation is read before the expired timer runs.
        run_for(&rt, Duration::from_millis(20));
        assert_eq!(
            state_of_b(&rt, &a),
            Some((MemberState::Alive, incarnation)),
            "round {round}"
        );
        assert_eq!(
            deaths_of_b(&rt, &mut events),
            0,
            "round {round}: b was declared dead although its refutation had arrived"
        );
    }
    rt.block_on(a.shutdown());
}
