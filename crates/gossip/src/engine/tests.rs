//! State-transition tests on a tiny in-process network: zero-latency delivery, links that can
//! be cut, nodes that can be stopped. (The `sim` crate is the full simulator.)

use super::*;
use crate::config::Config;
use crate::wire::{Alive, Framing, Suspect, Transport, stream};
use std::collections::HashSet;

fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([198, 18, 0, i as u8 + 1], 7946))
}

fn seed(i: usize, salt: u64) -> [u8; 32] {
    let mut s = [0u8; 32];
    s[..8].copy_from_slice(&(i as u64).to_le_bytes());
    s[8..16].copy_from_slice(&salt.to_le_bytes());
    s
}

struct Net {
    now: Instant,
    nodes: Vec<Membership>,
    events: Vec<Vec<(Instant, Event)>>,
    down: HashSet<usize>,
    /// Of the `down` nodes, those whose host still runs: datagrams to them come back as
    /// port unreachable and TCP connections are refused (a killed process).
    absent: HashSet<usize>,
    cut: HashSet<(usize, usize)>,
    /// Timer calls per node: the wake-ups a driver would make for it.
    wakeups: Vec<usize>,
}

impl Net {
    fn new(n: usize, config: Config, salt: u64) -> Self {
        let now = Instant::now();
        let nodes = (0..n)
            .map(|i| {
                let local = LocalNode {
                    name: format!("node-{i}"),
                    addr: addr(i),
                    meta: vec![],
                };
                Membership::new(
                    config.clone(),
                    Framing::default(),
                    local,
                    seed(i, salt),
                    now,
                )
                .unwrap()
            })
            .collect();
        Self {
            now,
            nodes,
            events: vec![Vec::new(); n],
            down: HashSet::new(),
            absent: HashSet::new(),
            cut: HashSet::new(),
            wakeups: vec![0; n],
        }
    }

    /// Everyone joins node 0 and the cluster settles.
    fn joined(n: usize, config: Config, salt: u64) -> Self {
        let mut net = Self::new(n, config, salt);
        for i in 1..n {
            let now = net.now;
            net.nodes[i].join(now, &[addr(0)]);
            net.pump();
        }
        net.run_for(Duration::from_secs(3));
        for i in 0..n {
            assert_eq!(
                net.nodes[i].num_live(),
                n,
                "node {i} sees everyone after joining"
            );
        }
        net
    }

    fn index_of(a: SocketAddr) -> usize {
        match a.ip() {
            std::net::IpAddr::V4(v4) => v4.octets()[3] as usize - 1,
            std::net::IpAddr::V6(_) => unreachable!(),
        }
    }

    fn linked(&self, a: usize, b: usize) -> bool {
        !self.down.contains(&a) && !self.down.contains(&b) && !self.cut.contains(&(a, b))
    }

    /// Delivers everything in flight, instantly, until nothing moves.
    fn pump(&mut self) {
        for round in 0.. {
            assert!(
                round < 10_000,
                "packets ping-pong forever at {:?}",
                self.now
            );
            let mut moved = false;
            for i in 0..self.nodes.len() {
                while let Some(e) = self.nodes[i].poll_event() {
                    self.events[i].push((self.now, e));
                }
                while let Some(t) = self.nodes[i].poll_transmit() {
                    moved = true;
                    let j = Self::index_of(t.to);
                    let now = self.now;
                    if self.linked(i, j) {
                        self.nodes[j].handle_packet(now, addr(i), &t.bytes);
                    } else if self.absent.contains(&j) && !self.down.contains(&i) {
                        self.nodes[i].handle_unreachable(now, t.to);
                    }
                }
                while let Some(req) = self.nodes[i].poll_stream() {
                    moved = true;
                    let j = Self::index_of(req.to);
                    let now = self.now;
                    if self.absent.contains(&j) && !self.down.contains(&i) {
                        // As the driver does: strong evidence first, then the failure.
                        self.nodes[i].handle_unreachable(now, req.to);
                        self.nodes[i].handle_stream_failed(now, req.id, StreamFailure::Refused);
                        continue;
                    }
                    if !self.linked(i, j) {
                        self.nodes[i].handle_stream_failed(now, req.id, StreamFailure::TimedOut);
                        continue;
                    }
                    match self.nodes[j].handle_incoming_stream(now, &req.bytes) {
                        IncomingStream::Reply(reply) if req.expects_reply => {
                            let _ = self.nodes[i].handle_stream_response(now, req.id, &reply);
                        }
                        _ if req.expects_reply => {
                            self.nodes[i].handle_stream_failed(now, req.id, StreamFailure::Io);
                        }
                        _ => {}
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        for step in 0.. {
            assert!(
                step < 1_000_000,
                "no progress at {:?}: {:?}",
                self.now,
                self.nodes
                    .iter()
                    .map(|n| n.poll_timeout())
                    .collect::<Vec<_>>()
            );
            self.pump();
            let next = (0..self.nodes.len())
                .filter(|i| !self.down.contains(i))
                .filter_map(|i| self.nodes[i].poll_timeout())
                .min()
                .unwrap_or(end);
            if next > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(next);
            for i in 0..self.nodes.len() {
                if self.down.contains(&i) {
                    continue;
                }
                if self.nodes[i].poll_timeout().is_some_and(|t| t <= self.now) {
                    let now = self.now;
                    self.nodes[i].handle_timeout(now);
                    self.wakeups[i] += 1;
                }
            }
        }
    }

    fn state_of(&self, observer: usize, name: &str) -> Option<MemberState> {
        self.nodes[observer].member(name).map(|m| m.state)
    }

    fn count(&self, observer: usize, f: impl Fn(&Event) -> bool) -> usize {
        self.events[observer].iter().filter(|(_, e)| f(e)).count()
    }
}

fn is_dead(name: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| matches!(e, Event::Dead(m) if &*m.name == name)
}

fn is_suspect(name: &str) -> impl Fn(&Event) -> bool + '_ {
    move |e| matches!(e, Event::Suspect { member, .. } if &*member.name == name)
}

#[test]
fn healthy_cluster_has_no_suspicions() {
    for config in [Config::fast(), Config::lan()] {
        let mut net = Net::joined(5, config, 1);
        net.run_for(Duration::from_secs(30));
        for i in 0..5 {
            assert_eq!(net.nodes[i].stats().suspicions_raised, 0, "node {i}");
            assert!(net.nodes[i].stats().probes > 5);
            assert_eq!(net.nodes[i].health_score(), 0);
            assert_eq!(net.nodes[i].incarnation(), 1, "nobody had to refute");
        }
    }
}

#[test]
fn crashed_node_is_suspected_then_declared_dead_by_all() {
    for (config, bound) in [(Config::fast(), 2), (Config::lan(), 40)] {
        let mut net = Net::joined(5, config, 2);
        net.down.insert(4);
        let crashed_at = net.now;
        net.run_for(Duration::from_secs(bound));
        for i in 0..4 {
            // Dead, or already reaped after gossip_to_the_dead_time.
            let state = net.state_of(i, "node-4");
            assert!(
                matches!(state, Some(MemberState::Dead) | None),
                "node {i}: {state:?}"
            );
            let first = net.events[i]
                .iter()
                .find(|(_, e)| is_dead("node-4")(e))
                .map(|(t, _)| *t - crashed_at)
                .unwrap();
            assert!(first < Duration::from_secs(bound));
            // No live node was ever declared dead.
            for j in 0..4 {
                assert_eq!(net.count(i, is_dead(&format!("node-{j}"))), 0);
            }
        }
    }
}

#[test]
fn a_false_accusation_is_refuted() {
    let mut net = Net::joined(4, Config::fast(), 3);
    let forged = Message::Suspect(Suspect {
        incarnation: 1,
        node: "node-1".into(),
        from: "node-0".into(),
    })
    .to_vec(Transport::Packet);
    let now = net.now;
    for i in [2, 3] {
        net.nodes[i].handle_packet(now, addr(0), &forged);
    }
    net.run_for(Duration::from_secs(5));
    assert!(net.nodes[1].incarnation() > 1, "node-1 refuted");
    assert_eq!(net.nodes[1].stats().refutations, 1);
    for i in [0, 2, 3] {
        assert_eq!(
            net.state_of(i, "node-1"),
            Some(MemberState::Alive),
            "node {i}"
        );
        assert_eq!(net.count(i, is_dead("node-1")), 0);
    }
    assert!(
        net.count(
            2,
            |e| matches!(e, Event::Refuted(m) if &*m.name == "node-1")
        ) == 1
    );
}

#[test]
fn graceful_leave_is_left_not_dead() {
    let mut net = Net::joined(4, Config::fast(), 4);
    let now = net.now;
    net.nodes[3].leave(now, Duration::from_secs(2));
    net.run_for(Duration::from_secs(1));
    assert_eq!(
        net.count(3, |e| matches!(e, Event::LeaveComplete)),
        1,
        "the leaver learns its message went out"
    );
    net.down.insert(3);
    net.run_for(Duration::from_secs(3));
    for i in 0..3 {
        assert_eq!(net.state_of(i, "node-3"), Some(MemberState::Left));
        assert_eq!(
            net.count(i, |e| matches!(e, Event::Left(m) if &*m.name == "node-3")),
            1
        );
        assert_eq!(net.count(i, is_dead("node-3")), 0);
    }
}

#[test]
fn left_and_dead_members_are_reaped() {
    let mut config = Config::fast();
    config.gossip_to_the_dead_time = Duration::from_secs(5);
    let mut net = Net::joined(4, config, 5);
    let now = net.now;
    net.nodes[3].leave(now, Duration::from_secs(1));
    net.run_for(Duration::from_secs(1));
    net.down.insert(3);
    net.down.insert(2);
    net.run_for(Duration::from_secs(10));
    for i in 0..2 {
        assert!(
            net.nodes[i].member("node-3").is_none(),
            "left node reaped (#253)"
        );
        assert!(net.nodes[i].member("node-2").is_none(), "dead node reaped");
        assert_eq!(net.nodes[i].num_known(), 2);
    }
}

#[test]
fn indirect_probes_keep_a_node_with_a_broken_direct_path_alive() {
    let mut net = Net::joined(5, Config::fast(), 6);
    net.cut.insert((0, 1));
    net.cut.insert((1, 0));
    net.run_for(Duration::from_secs(20));
    for i in 0..5 {
        assert_eq!(net.count(i, is_dead("node-1")), 0, "node {i}");
        assert_eq!(net.count(i, is_dead("node-0")), 0, "node {i}");
    }
    assert_eq!(net.nodes[0].stats().suspicions_raised, 0);
}

#[test]
fn implausible_incarnations_are_rejected() {
    let mut net = Net::joined(3, Config::fast(), 7);
    let forged = Message::Suspect(Suspect {
        incarnation: u32::MAX,
        node: "node-1".into(),
        from: "mallory".into(),
    })
    .to_vec(Transport::Packet);
    let now = net.now;
    net.nodes[1].handle_packet(now, addr(2), &forged);
    net.nodes[2].handle_packet(now, addr(0), &forged);
    net.run_for(Duration::from_secs(5));
    assert_eq!(
        net.nodes[1].incarnation(),
        1,
        "no refutation to an absurd number"
    );
    assert!(net.nodes[1].stats().implausible_incarnations >= 1);
    assert_eq!(net.state_of(2, "node-1"), Some(MemberState::Alive));
    assert_eq!(net.count(2, is_suspect("node-1")), 0);
}

#[test]
fn refutation_saturates_instead_of_wrapping() {
    let mut net = Net::joined(2, Config::fast(), 8);
    let now = net.now;
    net.nodes[1].refute(now, u32::MAX - 1);
    assert_eq!(net.nodes[1].incarnation(), u32::MAX);
    net.nodes[1].refute(now, u32::MAX);
    assert_eq!(
        net.nodes[1].incarnation(),
        u32::MAX,
        "never wraps to 0 (#358)"
    );
}

#[test]
fn conflicting_address_is_reported_and_ignored() {
    let mut net = Net::joined(2, Config::fast(), 9);
    let impostor = Message::Alive(Alive {
        incarnation: 50,
        node: "node-1".into(),
        addr: Some(vec![198, 18, 9, 9]),
        port: 7946,
        meta: None,
        vsn: Some(vec![1, 5, 2, 0, 0, 0]),
    })
    .to_vec(Transport::Packet);
    let now = net.now;
    net.nodes[0].handle_packet(now, addr(1), &impostor);
    net.pump();
    assert_eq!(net.count(0, |e| matches!(e, Event::Conflict { .. })), 1);
    assert_eq!(net.nodes[0].member("node-1").unwrap().addr, addr(1));
}

#[test]
fn restarted_node_is_taken_back_after_being_declared_dead() {
    let mut net = Net::joined(4, Config::fast(), 10);
    net.down.insert(3);
    net.run_for(Duration::from_secs(3));
    assert_eq!(net.state_of(0, "node-3"), Some(MemberState::Dead));
    // Restart: a fresh engine under the same name and address, incarnation 1.
    let local = LocalNode {
        name: "node-3".into(),
        addr: addr(3),
        meta: vec![],
    };
    net.nodes[3] = Membership::new(
        Config::fast(),
        Framing::default(),
        local,
        seed(3, 99),
        net.now,
    )
    .unwrap();
    net.events[3].clear();
    net.down.remove(&3);
    let now = net.now;
    net.nodes[3].join(now, &[addr(1)]);
    net.run_for(Duration::from_secs(5));
    for i in 0..4 {
        assert_eq!(
            net.state_of(i, "node-3"),
            Some(MemberState::Alive),
            "node {i}"
        );
        assert_eq!(net.nodes[i].num_live(), 4, "node {i}");
    }
    assert!(
        net.nodes[3].incarnation() > 1,
        "it learned its old fate and refuted"
    );
}

#[test]
fn a_node_that_stays_silent_after_restart_is_nudged() {
    // node-3 restarts without joining but keeps answering: its own alive messages (sent
    // after a meta change) carry a stale incarnation, which peers holding it dead answer
    // with a direct accusation so that it refutes (hashicorp/memberlist#311).
    let mut net = Net::joined(3, Config::fast(), 11);
    net.down.insert(2);
    net.run_for(Duration::from_secs(3));
    assert_eq!(net.state_of(0, "node-2"), Some(MemberState::Dead));
    let local = LocalNode {
        name: "node-2".into(),
        addr: addr(2),
        meta: vec![],
    };
    let mut fresh = Membership::new(
        Config::fast(),
        Framing::default(),
        local,
        seed(2, 7),
        net.now,
    )
    .unwrap();
    let stale_alive = Message::Alive(fresh.own_alive()).to_vec(Transport::Packet);
    fresh.add_member(
        net.now,
        &Alive {
            incarnation: 1,
            node: "node-0".into(),
            addr: Some(vec![198, 18, 0, 1]),
            port: 7946,
            meta: Some(vec![]),
            vsn: Some(vec![1, 5, 2, 0, 0, 0]),
        },
    );
    net.nodes[2] = fresh;
    net.down.remove(&2);
    let now = net.now;
    net.nodes[0].handle_packet(now, addr(2), &stale_alive);
    net.run_for(Duration::from_secs(3));
    assert!(net.nodes[2].incarnation() > 1, "nudged into refuting");
    assert_eq!(net.state_of(0, "node-2"), Some(MemberState::Alive));
}

#[test]
fn awareness_rises_when_our_probes_fail_and_falls_when_they_succeed() {
    let mut net = Net::joined(4, Config::fast(), 12);
    // Node 0 is cut off from everyone: its probes fail, and helpers cannot nack back.
    for j in 1..4 {
        net.cut.insert((0, j));
        net.cut.insert((j, 0));
    }
    net.run_for(Duration::from_millis(600));
    assert!(
        net.nodes[0].health_score() > 0,
        "isolated node distrusts itself"
    );
    net.cut.clear();
    net.run_for(Duration::from_secs(10));
    assert_eq!(net.nodes[0].health_score(), 0);
}

#[test]
fn strong_evidence_shortens_but_never_replaces_suspicion() {
    let mut config = Config::lan();
    config.use_strong_evidence = true;
    let mut net = Net::joined(5, config, 13);
    net.down.insert(4);
    // Run until someone suspects node-4.
    let mut waited = Duration::ZERO;
    while net.count(0, is_suspect("node-4")) == 0 && waited < Duration::from_secs(30) {
        net.run_for(Duration::from_millis(100));
        waited += Duration::from_millis(100);
    }
    assert_eq!(net.state_of(0, "node-4"), Some(MemberState::Suspect));
    let deadline = |net: &Net| {
        let i = net.nodes[0].members.find("node-4").unwrap();
        let s = net.nodes[0].members.list[i].suspicion.as_deref().unwrap();
        (s.deadline(), s.started + s.min)
    };
    let (before, floor) = deadline(&net);
    let now = net.now;
    net.nodes[0].handle_unreachable(now, addr(4));
    assert_eq!(
        net.state_of(0, "node-4"),
        Some(MemberState::Suspect),
        "not dead yet"
    );
    let (after, _) = deadline(&net);
    assert!(after < before || before == floor, "{after:?} vs {before:?}");
    assert!(after >= floor, "never below the minimum");

    // A live node that acks is never declared dead on strong evidence alone.
    let now = net.now;
    net.nodes[0].handle_unreachable(now, addr(1));
    net.run_for(Duration::from_secs(5));
    assert_eq!(net.state_of(0, "node-1"), Some(MemberState::Alive));
}

#[test]
fn join_reports_success_and_failure() {
    let mut net = Net::new(2, Config::fast(), 14);
    net.down.insert(1);
    let now = net.now;
    net.nodes[0].join(now, &[addr(1)]);
    net.pump();
    assert_eq!(
        net.count(0, |e| matches!(
            e,
            Event::PushPullComplete {
                ok: false,
                join: true,
                ..
            }
        )),
        1
    );
    net.down.clear();
    let now = net.now;
    net.nodes[0].join(now, &[addr(1)]);
    net.pump();
    assert_eq!(
        net.count(0, |e| matches!(
            e,
            Event::PushPullComplete {
                ok: true,
                join: true,
                ..
            }
        )),
        1
    );
    assert_eq!(net.nodes[1].num_live(), 2);
}

#[test]
fn meta_updates_and_user_messages_spread() {
    let mut net = Net::joined(4, Config::fast(), 15);
    let now = net.now;
    net.nodes[2].set_meta(now, b"zone=b".to_vec()).unwrap();
    net.nodes[1].broadcast_user(Some("k"), b"hello".to_vec());
    net.run_for(Duration::from_secs(2));
    for i in [0, 1, 3] {
        let m = net.nodes[i].member("node-2").unwrap();
        assert_eq!(m.meta.as_deref(), Some(&b"zone=b"[..]), "node {i}");
        assert_eq!(
            net.count(i, |e| matches!(e, Event::Update(m) if &*m.name == "node-2")),
            1
        );
    }
    for i in [0, 2, 3] {
        assert!(net.count(i, |e| matches!(e, Event::UserMsg(m) if m == b"hello")) >= 1);
    }
    assert!(net.nodes[2].set_meta(now, vec![0; 513]).is_err());
}

#[test]
fn an_idle_node_wakes_for_its_probes_not_for_empty_gossip_ticks() {
    let config = Config::lan();
    let mut net = Net::joined(3, config.clone(), 17);
    // Let the join's broadcasts run out of retransmits.
    net.run_for(Duration::from_secs(5));
    let before = net.wakeups.clone();
    let idle = Duration::from_secs(10);
    net.run_for(idle);
    let probes = (idle.as_nanos() / config.probe_interval.as_nanos()) as usize;
    let ticks = (idle.as_nanos() / config.gossip_interval.as_nanos()) as usize;
    for (i, (&after, &before)) in net.wakeups.iter().zip(&before).enumerate() {
        let woken = after - before;
        assert!(
            (probes..=probes + 2).contains(&woken),
            "node {i} woke {woken} times in {idle:?}: {probes} probes (and {ticks} gossip ticks)"
        );
    }
    // What is queued while idle still goes out: at once, not a tick later.
    let now = net.now;
    net.nodes[1].set_meta(now, b"zone=c".to_vec()).unwrap();
    net.run_for(Duration::from_millis(1));
    let told = (0..3)
        .filter(|&i| i != 1)
        .filter(|&i| net.count(i, |e| matches!(e, Event::Update(m) if &*m.name == "node-1")) == 1)
        .count();
    assert!(told >= 1, "the update left within a millisecond");
    net.run_for(Duration::from_secs(1));
    for i in [0, 2] {
        let m = net.nodes[i].member("node-1").unwrap();
        assert_eq!(m.meta.as_deref(), Some(&b"zone=c"[..]), "node {i}");
    }
}

#[test]
fn rejoin_after_leave_works() {
    let mut net = Net::joined(3, Config::fast(), 16);
    let now = net.now;
    net.nodes[2].leave(now, Duration::from_millis(500));
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.state_of(0, "node-2"), Some(MemberState::Left));
    let now = net.now;
    net.nodes[2].join(now, &[addr(0)]);
    net.run_for(Duration::from_secs(2));
    assert_eq!(
        net.state_of(0, "node-2"),
        Some(MemberState::Alive),
        "#140 fixed"
    );
}

#[test]
fn lifeguard_off_gives_fixed_suspicion_timeout() {
    let mut config = Config::lan();
    config.lifeguard = false;
    let mut net = Net::joined(5, config, 17);
    net.down.insert(4);
    net.run_for(Duration::from_secs(30));
    assert_eq!(net.state_of(0, "node-4"), Some(MemberState::Dead));
    for i in 0..4 {
        assert_eq!(net.nodes[i].health_score(), 0, "awareness stays off");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

        /// With no loss, nobody alive is ever declared dead, and incarnations never go down,
        /// whatever the seed, size and crash.
        #[test]
        fn no_false_deaths_without_loss(salt in any::<u64>(), n in 3usize..7, crash in any::<bool>()) {
            let mut net = Net::joined(n, Config::fast(), salt);
            let mut incarnations: Vec<u32> = net.nodes.iter().map(|m| m.incarnation()).collect();
            if crash {
                net.down.insert(n - 1);
            }
            for _ in 0..20 {
                net.run_for(Duration::from_millis(250));
                for (i, m) in net.nodes.iter().enumerate() {
                    prop_assert!(m.incarnation() >= incarnations[i]);
                    incarnations[i] = m.incarnation();
                }
            }
            let live = if crash { n - 1 } else { n };
            for i in 0..live {
                for j in 0..live {
                    prop_assert_eq!(net.count(i, is_dead(&format!("node-{j}"))), 0);
                }
            }
        }
    }
}

#[test]
fn member_entries_stay_small() {
    // Simulators hold N^2 of these; keep an eye on growth.
    let size = size_of::<Member>();
    eprintln!("Member: {size} bytes");
    assert!(size <= 96, "Member grew to {size} bytes");
}

/// The messages in one of our datagrams.
fn messages_in(bytes: &[u8]) -> Vec<Message> {
    packet::open(&Framing::default(), bytes)
        .expect("our own datagram opens")
        .messages
}

/// Runs node `i` alone (the others do not run) until it starts a probe; returns the time and
/// the datagram of that turn that carries the probe's ping.
fn run_alone_until_it_probes(net: &mut Net, i: usize) -> (Instant, Vec<Transmit>) {
    let probes = net.nodes[i].stats().probes;
    let mut sent = Vec::new();
    let mut t = net.now;
    while net.nodes[i].stats().probes == probes {
        t = net.nodes[i].poll_timeout().expect("timers run").max(t);
        net.nodes[i].handle_timeout(t);
        sent.clear();
        while let Some(tx) = net.nodes[i].poll_transmit() {
            sent.push(tx);
        }
        assert!(
            t < net.now + Duration::from_secs(1),
            "no probe within a second"
        );
    }
    net.now = t;
    // The probe's own datagram: the watch's pings may leave on the same gossip tick.
    let seq = net.nodes[i].probe.as_ref().map(|p| p.seq);
    sent.retain(|tx| {
        messages_in(&tx.bytes)
            .iter()
            .any(|m| matches!(m, Message::Ping(p) if Some(p.seq_no) == seq))
    });
    (t, sent)
}

/// Whose datagram carried a ping, if any.
fn ping_in(sent: &[Transmit]) -> Option<&Transmit> {
    sent.iter().find(|t| {
        messages_in(&t.bytes)
            .iter()
            .any(|m| matches!(m, Message::Ping(_)))
    })
}

/// A refutation whose every copy was lost would leave the accuser's timer running: Go ignores
/// later accusations of the incarnation already refuted. A stale accusation therefore means
/// the news did not arrive, and the accused announces its incarnation again, once while that
/// announcement is queued.
#[test]
fn a_stale_accusation_brings_the_lost_refutation_back() {
    let mut net = Net::joined(3, Config::fast(), 9);
    let accusation = Message::Suspect(Suspect {
        incarnation: 1,
        node: "node-1".into(),
        from: "node-0".into(),
    })
    .to_vec(Transport::Packet);
    let mut t = net.now;
    net.nodes[1].handle_packet(t, addr(0), &accusation);
    assert_eq!(net.nodes[1].incarnation(), 2, "refuted");
    // Every copy of the refutation is lost.
    let mut copies = 0;
    for _ in 0..10 {
        t += Duration::from_millis(10);
        net.nodes[1].handle_timeout(t);
        while let Some(tx) = net.nodes[1].poll_transmit() {
            copies += messages_in(&tx.bytes)
                .iter()
                .filter(|m| matches!(m, Message::Alive(a) if a.node == "node-1"))
                .count();
        }
    }
    assert_eq!(
        copies, 4,
        "the retransmit limit at three nodes: two copies per peer"
    );
    assert_eq!(net.nodes[1].stats().reannouncements, 0);
    // The accuser never heard it and accuses incarnation 1 again (and so does a relay).
    net.nodes[1].handle_packet(t, addr(0), &accusation);
    net.nodes[1].handle_packet(t, addr(2), &accusation);
    assert_eq!(
        net.nodes[1].incarnation(),
        2,
        "incarnation 2 already answers it"
    );
    assert_eq!(net.nodes[1].stats().refutations, 1);
    assert_eq!(net.nodes[1].stats().reannouncements, 1, "once while queued");
    let mut told = HashSet::new();
    for _ in 0..10 {
        t += Duration::from_millis(10);
        net.nodes[1].handle_timeout(t);
        while let Some(tx) = net.nodes[1].poll_transmit() {
            let again = messages_in(&tx.bytes).iter().any(
                |m| matches!(m, Message::Alive(a) if a.node == "node-1" && a.incarnation == 2),
            );
            if again {
                told.insert(tx.to);
            }
        }
    }
    assert_eq!(
        told,
        HashSet::from([addr(0), addr(2)]),
        "both peers hear it again"
    );
}

/// A prober stalled past the end of its probe (a stopped process) asks the helpers when it
/// wakes, and waits their whole window before judging, instead of accusing the target at once
/// for its own stall.
#[test]
fn a_prober_that_stalls_past_its_probe_waits_for_the_helpers() {
    // SWIM's probe alone: the watch would ask helpers about its own targets too, since node 0
    // runs alone below and hears nobody (`a_stalled_watcher_does_not_accuse_its_target`).
    let mut config = Config::fast();
    config.watch_neighbours = 0;
    let mut net = Net::joined(3, config, 10);
    let raised = net.nodes[0].stats().suspicions_raised;
    let (t, sent) = run_alone_until_it_probes(&mut net, 0);
    assert!(ping_in(&sent).is_some());
    // The ping is lost, and node 0 stalls for four probe intervals.
    let late = t + Config::fast().probe_interval * 4;
    net.now = late;
    net.nodes[0].handle_timeout(late);
    assert_eq!(
        net.nodes[0].stats().suspicions_raised,
        raised,
        "no verdict yet"
    );
    let mut asked = 0;
    let mut requests = Vec::new();
    while let Some(tx) = net.nodes[0].poll_transmit() {
        let msgs = messages_in(&tx.bytes);
        asked += msgs
            .iter()
            .filter(|m| matches!(m, Message::IndirectPing(_)))
            .count();
        requests.push(tx);
    }
    assert_eq!(asked, 1, "the one helper of a three-node cluster is asked");
    for tx in requests {
        let j = Net::index_of(tx.to);
        net.nodes[j].handle_packet(late, addr(0), &tx.bytes);
    }
    net.pump();
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.nodes[0].stats().suspicions_raised, raised);
    assert_eq!(net.nodes[0].stats().probes_failed, 0);
}

/// An ack that reaches the engine after the probe's end, but before its verdict (it waited in
/// the socket while the process was stopped), counts: the target answered.
#[test]
fn an_ack_handed_over_late_but_before_the_verdict_counts() {
    let mut net = Net::joined(3, Config::fast(), 11);
    let (t, sent) = run_alone_until_it_probes(&mut net, 0);
    let ping = ping_in(&sent).expect("a ping").clone();
    let target = Net::index_of(ping.to);
    let late = t + Config::fast().probe_interval * 4;
    let target_name = format!("node-{target}");
    let answered = |net: &Net| {
        net.count(
            0,
            |e| matches!(e, Event::PingComplete { name, .. } if **name == *target_name),
        )
    };
    let before = answered(&net);
    net.now = late;
    net.nodes[target].handle_packet(late, addr(0), &ping.bytes);
    net.pump();
    assert_eq!(
        answered(&net),
        before + 1,
        "the late ack completed the probe"
    );
    net.nodes[0].handle_timeout(late);
    assert_eq!(net.nodes[0].stats().probes_failed, 0);
    assert_eq!(net.nodes[0].stats().suspicions_raised, 0);
}

/// When only the process dies, its host proves it: the probe's TCP fallback ping is refused,
/// and the prober declares the member dead at once instead of starting a suspicion. When the
/// whole host vanishes nothing is proven and Lifeguard's suspicion runs as before.
#[test]
fn a_failed_probe_with_a_refused_fallback_proves_absence() {
    let fast = Config::fast();
    let first_dead = |net: &Net, after: Instant| {
        (0..4)
            .filter_map(|i| {
                net.events[i]
                    .iter()
                    .find(|(t, e)| *t >= after && is_dead("node-4")(e))
                    .map(|(t, _)| *t - after)
            })
            .min()
    };
    let mut crash = Net::joined(5, fast.clone(), 20);
    crash.down.insert(4);
    crash.absent.insert(4);
    let killed = crash.now;
    crash.run_for(Duration::from_secs(2));
    let proven: u64 = (0..4).map(|i| crash.nodes[i].stats().absences_proven).sum();
    assert!(proven >= 1, "someone proved node-4 absent");
    let crash_first = first_dead(&crash, killed).expect("declared dead");
    // Found by the first probe of node-4 after the kill: within a probe round (four targets)
    // plus one ack window, far below the shortest suspicion timeout after that probe.
    let probe_round = fast.probe_interval * 4;
    assert!(
        crash_first <= probe_round + fast.probe_timeout,
        "{crash_first:?}"
    );
    for i in 0..4 {
        assert_eq!(
            crash.state_of(i, "node-4"),
            Some(MemberState::Dead),
            "node {i}"
        );
        for j in 0..4 {
            assert_eq!(crash.count(i, is_dead(&format!("node-{j}"))), 0);
        }
    }
    // The prover declared it dead without a suspicion of its own.
    let prover = (0..4)
        .find(|&i| crash.nodes[i].stats().absences_proven > 0)
        .unwrap();
    assert_eq!(crash.count(prover, is_suspect("node-4")), 0);

    let mut lost = Net::joined(5, fast.clone(), 20);
    lost.down.insert(4);
    let vanished = lost.now;
    lost.run_for(Duration::from_secs(2));
    let proven: u64 = (0..4).map(|i| lost.nodes[i].stats().absences_proven).sum();
    assert_eq!(proven, 0, "silence proves nothing");
    let lost_first = first_dead(&lost, vanished).expect("declared dead");
    assert!(
        lost_first > crash_first,
        "host loss {lost_first:?}, process crash {crash_first:?}"
    );
}

/// A member declared dead on a proof of absence that turns out to live (its port was only
/// refused for a while) refutes as after any death, and is alive everywhere again.
#[test]
fn a_member_proven_absent_that_speaks_again_is_taken_back() {
    let mut net = Net::joined(4, Config::fast(), 21);
    net.down.insert(3);
    net.absent.insert(3);
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.state_of(0, "node-3"), Some(MemberState::Dead));
    net.down.remove(&3);
    net.absent.remove(&3);
    net.run_for(Duration::from_secs(3));
    assert!(net.nodes[3].incarnation() > 1, "it refuted its death");
    for i in 0..4 {
        assert_eq!(
            net.state_of(i, "node-3"),
            Some(MemberState::Alive),
            "node {i}"
        );
    }
}

/// Starts node 0's next probe with nobody else running; returns the probe's target and its
/// ping (not delivered).
fn probe_from_node_0(net: &mut Net) -> (usize, Transmit) {
    let (_, sent) = run_alone_until_it_probes(net, 0);
    let ping = ping_in(&sent).expect("a ping").clone();
    (Net::index_of(ping.to), ping)
}

/// The member node 0 is probing, if any.
fn probing(net: &Net) -> Option<&str> {
    net.nodes[0].probe.as_ref().map(|p| &*p.target)
}

/// The TCP fallback ping node 0 asked for, if any.
fn tcp_ping_request(net: &mut Net) -> Option<StreamRequest> {
    let mut found = None;
    while let Some(req) = net.nodes[0].poll_stream() {
        let ping = stream::open(&Framing::default(), &req.bytes, true)
            .ok()
            .flatten()
            .is_some_and(|o| matches!(o.message, Message::Ping(_)));
        if ping {
            found = Some(req);
        }
    }
    found
}

/// Port unreachable (forgeable) for the member being probed only hurries the TCP fallback
/// ping; a refusal that does not belong to a failed probe (a push/pull, or a probe that the
/// target then answered) proves nothing. Nobody is suspected or declared dead.
#[test]
fn a_refusal_without_a_failed_probe_proves_nothing() {
    let mut net = Net::joined(3, Config::fast(), 22);
    let (target, ping) = probe_from_node_0(&mut net);
    let name = format!("node-{target}");
    let mut t = net.now;
    assert!(tcp_ping_request(&mut net).is_none(), "no fallback yet");
    // A (forged) port unreachable for the target, early in the ack window.
    net.nodes[0].handle_unreachable(t, addr(target));
    let req = tcp_ping_request(&mut net).expect("the fallback ping goes out at once");
    assert_eq!(req.to, addr(target));
    assert_eq!(probing(&net), Some(name.as_str()));
    // The target acks the direct ping; the probe is over.
    net.nodes[target].handle_packet(t, addr(0), &ping.bytes);
    while let Some(tx) = net.nodes[target].poll_transmit() {
        if tx.to == addr(0) {
            net.nodes[0].handle_packet(t, addr(target), &tx.bytes);
        }
    }
    assert_eq!(probing(&net), None, "answered");
    // Then the fallback connection is refused: stale, it counts for nothing.
    t += Duration::from_millis(1);
    net.nodes[0].handle_unreachable(t, addr(target));
    net.nodes[0].handle_stream_failed(t, req.id, StreamFailure::Refused);
    // And a refused push/pull to the other member, outside any probe.
    let other = 3 - target;
    net.nodes[0].join(t, &[addr(other)]);
    while let Some(req) = net.nodes[0].poll_stream() {
        net.nodes[0].handle_unreachable(t, req.to);
        net.nodes[0].handle_stream_failed(t, req.id, StreamFailure::Refused);
    }
    net.now = t;
    net.run_for(Duration::from_secs(2));
    assert_eq!(net.nodes[0].stats().absences_proven, 0);
    assert_eq!(net.nodes[0].stats().suspicions_raised, 0);
    for i in 1..3 {
        assert_eq!(
            net.state_of(0, &format!("node-{i}")),
            Some(MemberState::Alive)
        );
    }
}

/// A refusal of an earlier probe's fallback connection, reported during a later probe of the
/// same member, is older than that probe and does not count: the later probe gets its own
/// verdict (here the member answers it).
#[test]
fn evidence_older_than_the_probe_does_not_count() {
    let mut net = Net::joined(3, Config::fast(), 23);
    let (target, ping) = probe_from_node_0(&mut net);
    let t = net.now;
    net.nodes[0].handle_unreachable(t, addr(target));
    let old = tcp_ping_request(&mut net).expect("fallback ping");
    // The direct ack arrives late but before the verdict: the probe succeeds.
    net.nodes[target].handle_packet(t, addr(0), &ping.bytes);
    while let Some(tx) = net.nodes[target].poll_transmit() {
        if tx.to == addr(0) {
            net.nodes[0].handle_packet(t, addr(target), &tx.bytes);
        }
    }
    // Node 0 probes on until it probes the same member again (three nodes: every other probe).
    let again = loop {
        let (next, ping) = probe_from_node_0(&mut net);
        if next == target {
            break ping;
        }
        // Answer probes of the other member so nothing else fails.
        let now = net.now;
        net.nodes[next].handle_packet(now, addr(0), &ping.bytes);
        while let Some(tx) = net.nodes[next].poll_transmit() {
            if tx.to == addr(0) {
                net.nodes[0].handle_packet(now, addr(next), &tx.bytes);
            }
        }
    };
    let t = net.now + Duration::from_millis(1);
    net.nodes[0].handle_stream_failed(t, old.id, StreamFailure::Refused);
    assert_eq!(net.nodes[0].stats().absences_proven, 0, "stale refusal");
    let name = format!("node-{target}");
    assert_eq!(probing(&net), Some(name.as_str()), "still probing");
    net.nodes[target].handle_packet(t, addr(0), &again.bytes);
    net.now = t;
    net.pump();
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.nodes[0].stats().absences_proven, 0);
    assert_eq!(net.state_of(0, &name), Some(MemberState::Alive));
}

/// With `use_strong_evidence` off (Go's profiles) a refused fallback ping is just a failed
/// probe: suspicion first, death only when it expires.
#[test]
fn without_strong_evidence_a_refusal_is_only_a_failed_probe() {
    let mut config = Config::fast();
    config.use_strong_evidence = false;
    let mut net = Net::joined(5, config, 24);
    net.down.insert(4);
    net.absent.insert(4);
    net.run_for(Duration::from_secs(3));
    for i in 0..4 {
        assert_eq!(net.nodes[i].stats().absences_proven, 0);
        assert_eq!(net.state_of(i, "node-4"), Some(MemberState::Dead));
    }
    assert!((0..4).any(|i| net.count(i, is_suspect("node-4")) > 0));
}

#[test]
fn member_state_names_are_the_ones_status_pages_print() {
    let states = [
        MemberState::Alive,
        MemberState::Suspect,
        MemberState::Dead,
        MemberState::Left,
    ];
    assert_eq!(
        states.map(MemberState::name),
        ["alive", "suspect", "dead", "left"]
    );
}

// ---- the watch ---------------------------------------------------------------------------

/// Who watches whom, as node names.
fn watchers_of(net: &Net, name: &str) -> Vec<usize> {
    (0..net.nodes.len())
        .filter(|&i| net.nodes[i].watched().any(|w| w == name))
        .collect()
}

#[test]
fn every_member_has_watch_neighbours_watchers_and_go_profiles_none() {
    let mut net = Net::joined(5, Config::fast(), 40);
    net.run_for(Duration::from_millis(100));
    for i in 0..5 {
        let name = format!("node-{i}");
        let w = watchers_of(&net, &name);
        assert_eq!(w.len(), 2, "{name} is watched by {w:?}");
        assert!(!w.contains(&i), "nobody watches itself");
        assert!(net.nodes[i].stats().watch_pings > 0);
    }
    let net = Net::joined(5, Config::lan(), 41);
    for i in 0..5 {
        assert_eq!(net.nodes[i].watched().count(), 0);
        assert_eq!(net.nodes[i].stats().watch_pings, 0);
    }
}

/// With an even `watch_neighbours`, neighbours watch each other, and one ping per pair and
/// round serves both: each member pings the one after it and spares the one before.
#[test]
fn neighbours_watch_each_other_and_take_turns_pinging() {
    let config = Config::fast();
    let mut net = Net::joined(6, config.clone(), 45);
    net.run_for(Duration::from_millis(200));
    let before: Vec<(u64, u64)> = (0..6)
        .map(|i| {
            let s = net.nodes[i].stats();
            (s.watch_pings, s.watch_pings_spared)
        })
        .collect();
    let window = Duration::from_secs(2);
    net.run_for(window);
    let rounds = (window.as_millis() / config.watch_interval.as_millis()) as u64;
    for (i, (pings_before, spared_before)) in before.iter().enumerate() {
        let name = format!("node-{i}");
        let mut watchers = watchers_of(&net, &name);
        let mut watched: Vec<usize> = net.nodes[i]
            .watched()
            .map(|w| Net::index_of(net.nodes[i].member(w).unwrap().addr))
            .collect();
        watchers.sort_unstable();
        watched.sort_unstable();
        assert_eq!(watchers, watched, "{name} watches its watchers");
        let s = net.nodes[i].stats();
        let (pings, spared) = (
            s.watch_pings - pings_before,
            s.watch_pings_spared - spared_before,
        );
        assert_eq!(
            pings + spared,
            2 * rounds,
            "{name}: one decision per target and round"
        );
        // Its rounds fall on its gossip ticks: one wake-up for both.
        let next = net.nodes[i].watch_deadline().expect("watching");
        let gossip = net.nodes[i].next_gossip;
        let apart = next.max(gossip) - next.min(gossip);
        assert_eq!(
            apart.as_nanos() % config.gossip_interval.as_nanos(),
            0,
            "{name}"
        );
        // Half spared, less the rounds a lost or late ping made the later one ask itself.
        assert!(
            spared * 10 >= rounds * 9,
            "{name}: {pings} pings sent, only {spared} spared in {rounds} rounds"
        );
    }
}

/// SWIM's round-robin probes skip the members the watch hears from (their turns pass
/// unprobed), and still reach every other member at the probe cadence: in a 5-node cluster
/// each node watches 2 of the 4 others, so about half the rounds are spared.
#[test]
fn probes_spare_the_members_the_watch_hears_from() {
    let config = Config::fast();
    let mut net = Net::joined(5, config.clone(), 46);
    net.run_for(Duration::from_millis(300));
    let before: Vec<(u64, u64)> = (0..5)
        .map(|i| {
            let s = net.nodes[i].stats();
            (s.probes, s.probes_spared)
        })
        .collect();
    let window = Duration::from_secs(4);
    net.run_for(window);
    let rounds = (window.as_millis() / config.probe_interval.as_millis()) as u64;
    for (i, (probes_before, spared_before)) in before.iter().enumerate() {
        let s = net.nodes[i].stats();
        let (probes, spared) = (s.probes - probes_before, s.probes_spared - spared_before);
        assert!(
            (probes + spared).abs_diff(rounds) <= 1,
            "node-{i}: {probes} probes and {spared} spared in {rounds} rounds"
        );
        // Two of every four turns are watched members' (a reshuffle may bunch them).
        assert!(
            spared * 10 >= rounds * 4 && probes * 10 >= rounds * 4,
            "node-{i}: {probes} probes and {spared} spared in {rounds} rounds"
        );
        assert_eq!(s.probes_failed, 0, "node-{i}");
    }
}

/// A watched member that only its watcher cannot reach is alive to the helpers: they relay
/// its acks, so the watcher neither suspects nor kills it.
#[test]
fn a_watcher_cut_off_from_its_target_alone_accuses_nobody() {
    let mut net = Net::joined(5, Config::fast(), 42);
    let target = net.nodes[0].watched().next().expect("watches").to_string();
    let t = Net::index_of(net.nodes[0].member(&target).unwrap().addr);
    net.cut.insert((0, t));
    net.cut.insert((t, 0));
    net.run_for(Duration::from_secs(3));
    for i in 0..5 {
        assert_eq!(net.count(i, is_dead(&target)), 0, "node {i} saw it dead");
        assert_eq!(net.nodes[i].stats().watch_deaths_declared, 0);
    }
    assert_eq!(
        net.count(0, is_suspect(&target)),
        0,
        "helpers keep relaying its acks"
    );
}

/// A lost host is declared dead by one of its watchers (confirmed by helpers), before any
/// suspicion could have expired, and everyone learns it.
#[test]
fn a_lost_watched_member_is_declared_dead_by_its_watcher() {
    let config = Config::fast();
    let mut net = Net::joined(5, config.clone(), 43);
    net.run_for(Duration::from_millis(37));
    net.down.insert(3);
    let lost_at = net.now;
    net.run_for(Duration::from_secs(1));
    let watch_deaths: u64 = (0..5)
        .filter(|&i| i != 3)
        .map(|i| net.nodes[i].stats().watch_deaths_declared)
        .sum();
    assert!(watch_deaths >= 1, "a watcher declared it");
    for i in [0, 1, 2, 4] {
        assert_eq!(
            net.state_of(i, "node-3"),
            Some(MemberState::Dead),
            "node {i}"
        );
        let (at, _) = net.events[i]
            .iter()
            .find(|(_, e)| is_dead("node-3")(e))
            .expect("a dead event");
        // Virtual time: the verdict comes from the watch's silence bound, not from a
        // suspicion (its shortest timeout alone is 3 probe intervals after a failed probe).
        assert!(
            *at - lost_at < config.watch_dead_after + config.probe_interval,
            "node {i} learned after {:?}",
            *at - lost_at
        );
    }
}

/// A watcher that was itself stopped does not count its own pause as its target's silence.
#[test]
fn a_stalled_watcher_does_not_accuse_its_target() {
    let config = Config::fast();
    let mut net = Net::joined(5, config.clone(), 44);
    let target = net.nodes[0].watched().next().expect("watches").to_string();
    for _ in 0..20 {
        // Node 0 is stopped for longer than the silence bound: nothing reaches it, it runs no
        // timers; then it runs for a while.
        net.down.insert(0);
        net.run_for(config.watch_dead_after * 2);
        net.down.remove(&0);
        net.run_for(Duration::from_millis(300));
    }
    assert_eq!(net.nodes[0].stats().watch_deaths_declared, 0);
    assert!(net.nodes[0].stats().watch_stalls >= 20);
    assert_eq!(net.count(0, is_dead(&target)), 0);
}

/// Deaths a node declared while cut off from everyone (see `blind`): with
/// `hold_blind_verdicts` they stay its own, so when its link comes back no survivor hears
/// that another survivor died; without it (Go's rule) the survivors hold each other dead
/// for a while. Returns, per survivor, the dead events it saw about other survivors after
/// the heal, and the cut node's stats.
fn heal_after_cut(hold: bool, salt: u64, cut_for: Duration) -> (usize, Stats, Net) {
    let config = Config {
        hold_blind_verdicts: hold,
        ..Config::fast()
    };
    let mut net = Net::joined(5, config, salt);
    for j in 0..4 {
        net.cut.insert((4, j));
        net.cut.insert((j, 4));
    }
    net.run_for(cut_for);
    let healed_at = net.now;
    net.cut.clear();
    net.run_for(Duration::from_secs(3));
    let survivors_dead = (0..4)
        .map(|i| {
            net.events[i]
                .iter()
                .filter(|(at, _)| *at >= healed_at)
                .filter(|(_, e)| (0..4).any(|j| is_dead(&format!("node-{j}"))(e)))
                .count()
        })
        .sum();
    let stats = net.nodes[4].stats().clone();
    (survivors_dead, stats, net)
}

#[test]
fn a_node_cut_off_from_everyone_brings_back_no_deaths() {
    for (salt, ms) in (50..).zip([700, 900, 1200, 2000]) {
        let (survivors_dead, stats, net) = heal_after_cut(true, salt, Duration::from_millis(ms));
        assert_eq!(
            survivors_dead, 0,
            "salt {salt}: a survivor held another dead"
        );
        assert!(stats.blind_deaths >= 1, "salt {salt}: {stats:?}");
        assert!(stats.blind_revivals >= 1, "salt {salt}: {stats:?}");
        for i in 0..5 {
            assert_eq!(
                net.nodes[i].num_live(),
                5,
                "salt {salt}: node {i} after the heal"
            );
        }
        // Virtual time: the cut node finds the others again within its reconnect pings'
        // period, not at the next periodic push/pull (15 s in this profile).
        let healed_at = net.now - Duration::from_secs(3);
        let back = |i: usize| {
            net.events[i]
                .iter()
                .filter(|(at, e)| *at >= healed_at && matches!(e, Event::Join(_)))
                .map(|(at, _)| *at - healed_at)
                .max()
        };
        let cut_node_back = back(4).expect("the cut node saw the others join");
        assert!(
            cut_node_back <= 2 * Config::fast().probe_interval,
            "{cut_node_back:?}"
        );
        for i in 0..4 {
            let seen = back(i).expect("each survivor saw the cut node join");
            assert!(
                seen <= 2 * Config::fast().probe_interval,
                "node {i}: {seen:?}"
            );
        }
    }
}

#[test]
fn without_holding_blind_verdicts_survivors_hold_each_other_dead_after_a_heal() {
    let flaps: Vec<usize> = (50..)
        .zip([700, 900, 1200, 2000])
        .map(|(salt, ms)| heal_after_cut(false, salt, Duration::from_millis(ms)).0)
        .collect();
    eprintln!("{flaps:?}");
    let flaps: usize = flaps.iter().sum();
    assert!(flaps > 0, "Go's rule spreads the cut node's deaths");
}

fn cut_offs(net: &Net, i: usize) -> (usize, usize) {
    let cut = net.count(i, |e| matches!(e, Event::CutOff { .. }));
    let back = net.count(i, |e| matches!(e, Event::Reconnected { .. }));
    (cut, back)
}

/// A node whose link is cut hears no one: it says so once, and once it hears the others
/// again a push/pull ends the episode (it then knows it was declared dead, and refuted).
/// Nobody else was cut off.
#[test]
fn a_cut_node_reports_the_cut_once_and_reconnects_after_a_merge() {
    let mut net = Net::joined(5, Config::fast(), 60);
    net.run_for(Duration::from_secs(2));
    for j in 0..4 {
        net.cut.insert((4, j));
        net.cut.insert((j, 4));
    }
    net.run_for(Duration::from_millis(400));
    assert_eq!(cut_offs(&net, 4), (1, 0), "cut off, not yet back");
    assert!(net.nodes[4].cut_off());
    net.cut.clear();
    net.run_for(Duration::from_secs(2));
    assert_eq!(cut_offs(&net, 4), (1, 1), "one episode, ended");
    assert!(!net.nodes[4].cut_off());
    assert!(
        net.nodes[4].stats().refutations >= 1,
        "it learned it had been declared dead"
    );
    for i in 0..4 {
        assert_eq!(cut_offs(&net, i), (0, 0), "node {i}");
        assert_eq!(net.nodes[i].num_live(), 5, "node {i}");
    }
}

/// After a reconnection, the node's alive state goes to every live member with a ping, and
/// once all have acknowledged it hears so, once, after the reconnection: by then every
/// survivor holds it alive (checked every millisecond of virtual time; here the survivors'
/// own pings to the dead may have told them first), which is what lets the speaker end its
/// silence early. Go's rules send nothing of the kind.
#[test]
fn a_reconnected_node_hears_when_everyone_holds_it_alive() {
    let heard_back = |net: &Net, i| net.count(i, |e| matches!(e, Event::HeardBack { .. }));
    for salt in 80..83 {
        let mut net = Net::joined(5, Config::fast(), salt);
        net.run_for(Duration::from_secs(2));
        for j in 0..4 {
            net.cut.insert((4, j));
            net.cut.insert((j, 4));
        }
        net.run_for(Duration::from_secs(1));
        assert!(
            (0..4).all(|i| net.nodes[i].num_live() == 4),
            "salt {salt}: declared dead"
        );
        net.cut.clear();
        let mut at = None;
        for ms in 1..=1000u32 {
            net.run_for(Duration::from_millis(1));
            if heard_back(&net, 4) > 0 {
                at = Some(ms);
                for i in 0..4 {
                    assert_eq!(net.nodes[i].num_live(), 5, "salt {salt}: node {i}");
                }
                break;
            }
        }
        let at = at.unwrap_or_else(|| panic!("salt {salt}: never heard back"));
        assert_eq!(cut_offs(&net, 4), (1, 1), "salt {salt}: reconnected first");
        net.run_for(Duration::from_secs(1));
        assert_eq!(heard_back(&net, 4), 1, "salt {salt}: once");
        assert!(at <= 200, "salt {salt}: heard back {at} ms after the heal");
        for i in 0..4 {
            assert_eq!(heard_back(&net, i), 0, "salt {salt}: node {i}");
        }
    }
    let mut net = Net::joined(5, Config::lan(), 84);
    net.run_for(Duration::from_secs(5));
    assert_eq!(net.nodes[0].stats().heard_back_pings, 0);
}

/// `confirm_alive` (the speaker's guard after a regained majority): a new incarnation, sent
/// with a ping to every live member, and `HeardBack` once all have acknowledged, by when each
/// holds us alive at that incarnation. A member that does not answer keeps it from coming.
#[test]
fn confirm_alive_hears_back_from_every_live_member() {
    let heard_back = |net: &Net, i| net.count(i, |e| matches!(e, Event::HeardBack { members: 4 }));
    let mut net = Net::joined(5, Config::fast(), 85);
    let before = net.nodes[0].incarnation();
    let now = net.now;
    net.nodes[0].confirm_alive(now);
    net.pump();
    assert_eq!(net.nodes[0].incarnation(), before + 1);
    net.run_for(Config::fast().probe_interval);
    assert_eq!(heard_back(&net, 0), 1);
    for i in 1..5 {
        let m = net.nodes[i].member("node-0").expect("known");
        assert_eq!((m.state, m.incarnation), (MemberState::Alive, before + 1));
    }
    assert_eq!(net.nodes[0].stats().heard_back_pings, 4);
    // Node 4 is gone but not yet suspected: no acknowledgement from it, no HeardBack.
    net.down.insert(4);
    let now = net.now;
    net.nodes[0].confirm_alive(now);
    net.pump();
    net.run_for(Config::fast().probe_interval * 2);
    assert_eq!(heard_back(&net, 0), 1, "only the first");
}

/// A heal is seldom one event: the alive state and ping `confirm_alive` sends to a member
/// whose side of the cut is still up a few milliseconds longer are lost, and are sent again
/// to that member alone (same ping) until it acknowledges, within the window.
#[test]
fn heard_back_asks_again_those_that_missed_the_first_ping() {
    let heard_back = |net: &Net, i| net.count(i, |e| matches!(e, Event::HeardBack { members: 4 }));
    let mut net = Net::joined(5, Config::fast(), 86);
    net.run_for(Duration::from_secs(1));
    net.cut.insert((0, 4));
    net.cut.insert((4, 0));
    let now = net.now;
    net.nodes[0].confirm_alive(now);
    net.pump();
    net.run_for(Duration::from_millis(15));
    assert_eq!(heard_back(&net, 0), 0, "node 4 has not heard it yet");
    net.cut.clear();
    net.run_for(Config::fast().probe_interval);
    assert_eq!(heard_back(&net, 0), 1);
    assert_eq!(
        net.nodes[0].stats().heard_back_pings,
        6,
        "four at first, then node 4 alone every half gossip interval: at 10 ms (still cut) \
         and 20 ms"
    );
}

/// A node that did not run for longer than anyone needs to declare it dead (a frozen
/// process) reports a cut-off at its first turn back, and reconnects through a push/pull.
#[test]
fn a_stalled_node_reports_a_cut_off_and_reconnects() {
    let mut net = Net::joined(5, Config::fast(), 61);
    net.run_for(Duration::from_secs(2));
    net.down.insert(4);
    net.run_for(Duration::from_millis(500));
    net.down.clear();
    net.run_for(Duration::from_secs(2));
    assert_eq!(cut_offs(&net, 4), (1, 1));
    for i in 0..5 {
        assert_eq!(net.nodes[i].num_live(), 5, "node {i}");
    }
}

/// A healthy cluster never feels cut off, and Go's profiles never check.
#[test]
fn connected_nodes_never_report_a_cut_off() {
    for config in [Config::fast(), Config::lan()] {
        let mut net = Net::joined(5, config, 62);
        net.run_for(Duration::from_secs(20));
        for i in 0..5 {
            assert_eq!(net.nodes[i].stats().cut_offs, 0, "node {i}");
        }
    }
    assert!(Config::lan().deaf_after.is_zero() && !Config::lan().hold_blind_verdicts);
}

/// A member that stays dead is pinged every probe interval while its death is young, then
/// every [`blind::REDIAL_ROUNDS`] of them: a real death costs its survivors little traffic.
#[test]
fn pings_to_the_dead_slow_down_as_the_death_ages() {
    let fast = Config::fast();
    let mut net = Net::joined(3, fast.clone(), 63);
    net.down.insert(2);
    // Declared dead well within a second (suspicion, then death gossiped).
    net.run_for(Duration::from_secs(1));
    assert_eq!(net.nodes[0].num_live(), 2, "node 2 is dead to node 0");
    let pings_in = |net: &mut Net, span: Duration| {
        let before = net.nodes[0].stats().dead_pings;
        net.run_for(span);
        net.nodes[0].stats().dead_pings - before
    };
    let second = Duration::from_secs(1);
    let per_round = second.as_millis() / fast.probe_interval.as_millis();
    let young = pings_in(&mut net, second) as u128;
    assert!(young + 1 >= per_round, "young death: {young} pings in 1 s");
    net.run_for(fast.probe_interval * blind::EAGER_REDIAL_ROUNDS);
    let old = pings_in(&mut net, second) as u128;
    assert!(
        old <= per_round / u128::from(blind::REDIAL_ROUNDS) + 1,
        "old death: {old} pings in 1 s"
    );
}

/// Splits 0,1 from 2,3,4 for `split` (each side hears its own, so no verdict is blind: each
/// holds the other dead, gossiped), heals, and returns how long after the heal every node saw
/// all five live again (`None`: not within 3 s).
fn split_heal_merge_time(config: Config, salt: u64, split: Duration) -> Option<Duration> {
    let mut net = Net::joined(5, config, salt);
    for a in 0..2 {
        for b in 2..5 {
            net.cut.insert((a, b));
            net.cut.insert((b, a));
        }
    }
    net.run_for(split);
    assert_eq!(net.nodes[0].num_live(), 2, "each side holds the other dead");
    net.cut.clear();
    let step = Duration::from_millis(10);
    for k in 1..=300 {
        net.run_for(step);
        if (0..5).all(|i| net.nodes[i].num_live() == 5) {
            return Some(step * k);
        }
    }
    None
}

/// A healed split whose sides each declared the other dead merges through the pings to the
/// dead, not at the next periodic push/pull or rejoin (Go's rule waits for those): within a
/// probe interval and a couple of gossip rounds while the deaths are young (pinged every
/// probe interval; every 4 of them, 200 ms in fast, this took up to 160 ms), within a few of
/// the slower rounds once they are old.
#[test]
fn a_healed_split_merges_through_pings_to_the_dead() {
    let fast = Config::fast();
    let young = fast.probe_interval + 2 * fast.gossip_interval;
    for salt in 70..90 {
        let merged =
            split_heal_merge_time(fast.clone(), salt, Duration::from_secs(2)).expect("merged");
        assert!(merged <= young, "salt {salt}: {merged:?} > {young:?}");
    }
    let old = fast.probe_interval * blind::EAGER_REDIAL_ROUNDS + Duration::from_secs(2);
    let redial = fast.probe_interval * blind::REDIAL_ROUNDS;
    for salt in 70..73 {
        let merged = split_heal_merge_time(fast.clone(), salt, old).expect("merged");
        assert!(merged <= 2 * redial, "salt {salt}: {merged:?}");
    }
    let go_rule = Config {
        hold_blind_verdicts: false,
        ..Config::fast()
    };
    assert_eq!(
        split_heal_merge_time(go_rule, 70, Duration::from_secs(2)),
        None,
        "no talk to the dead"
    );
}

/// Cuts of every length from 0.5 to 3 s, in 100 ms steps: whatever suspicions the cut node
/// still holds when its link returns (raised blind, expiring after the heal), no survivor
/// ever hears a death of another survivor.
#[test]
fn no_cut_length_brings_a_survivor_death_back() {
    let mut dropped = 0;
    for (k, ms) in (500..=3000).step_by(100).enumerate() {
        let (survivors_dead, stats, _) =
            heal_after_cut(true, 80 + k as u64, Duration::from_millis(ms));
        assert_eq!(survivors_dead, 0, "a cut of {ms} ms: {stats:?}");
        dropped += stats.blind_suspicions_dropped;
    }
    eprintln!("suspicions raised blind and dropped after the heal: {dropped}");
}

/// A leave goes straight to every live member at once, not only by gossip: a member that
/// probed us after we stopped, before the gossiped leave reached it, would prove us absent
/// (our port closed) and declare us dead.
#[test]
fn a_leave_is_sent_to_every_live_member_at_once() {
    let mut net = Net::joined(5, Config::fast(), 41);
    net.down.insert(3);
    let now = net.now;
    let d = Duration::from_secs(1);
    net.run_for(d);
    assert_eq!(net.state_of(0, "node-3"), Some(MemberState::Dead));
    let now = now + d;
    net.nodes[0].leave(now, Duration::from_secs(1));
    let mut told = HashSet::new();
    while let Some(tx) = net.nodes[0].poll_transmit() {
        let leave = messages_in(&tx.bytes)
            .iter()
            .any(|m| matches!(m, Message::Dead(d) if d.node == "node-0" && d.from == "node-0"));
        if leave {
            told.insert(Net::index_of(tx.to));
        }
    }
    assert_eq!(
        told,
        HashSet::from([1, 2, 4]),
        "every live member, not the dead one"
    );
}

/// An urgent probe (a watched member's port refused our ping) asked for while another probe
/// awaits its ack starts as soon as that probe ends, not at the next round-robin tick.
#[test]
fn an_urgent_probe_waits_only_for_the_running_probe() {
    let mut net = Net::joined(5, Config::fast(), 43);
    let (target, ping) = probe_from_node_0(&mut net);
    let t = net.now;
    let refused = (1..5)
        .find(|&j| j != target && net.nodes[0].watching(&format!("node-{j}")))
        .expect("a watched member other than the probe's target");
    net.nodes[0].handle_unreachable(t, addr(refused));
    assert_eq!(probing(&net), Some(format!("node-{target}").as_str()));
    // The running probe's ack arrives: that probe ends, the urgent one is due at once.
    let t = t + Duration::from_millis(1);
    net.nodes[target].handle_packet(t, addr(0), &ping.bytes);
    while let Some(tx) = net.nodes[target].poll_transmit() {
        if tx.to == addr(0) {
            net.nodes[0].handle_packet(t, addr(target), &tx.bytes);
        }
    }
    assert_eq!(probing(&net), None, "answered");
    assert!(net.nodes[0].poll_timeout().is_some_and(|d| d <= t));
    net.nodes[0].handle_timeout(t);
    assert_eq!(probing(&net), Some(format!("node-{refused}").as_str()));
}
