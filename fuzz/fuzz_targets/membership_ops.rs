//! Stateful fuzzing of the gossip engine: arbitrary sequences of packets (raw and well-formed),
//! streams, time steps and commands against one `Membership`. Nothing may panic, and after
//! every step the invariants hold: our incarnation never decreases, we never consider
//! ourselves anything but alive (or left, after leaving), and memory stays bounded (members,
//! queued broadcasts and pending output grow at most in proportion to the input).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use vigil_gossip::wire::{Ack, Alive, Dead, IndirectPing, Message, Nack, Ping, Suspect, Transport};
use vigil_gossip::{Config, LocalNode, MemberState, Membership, StreamFailure, StreamId};

/// Reads fuzz input as a stream of small integers; runs dry as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = usize::from(self.byte()).min(max).min(self.0.len());
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        b.to_vec()
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

const NAMES: [&str; 6] = ["me", "a", "b", "c", "d", ""];

fn peer(i: u8) -> SocketAddr {
    SocketAddr::from(([198, 18, 0, 10 + i % 8], 7946))
}

fn incarnation(input: &mut Input<'_>) -> u32 {
    match input.byte() % 4 {
        0 => u32::from(input.byte()),
        1 => u32::MAX - u32::from(input.byte()),
        _ => input.u32(),
    }
}

fn message(input: &mut Input<'_>) -> Message {
    let name = |input: &mut Input<'_>| NAMES[usize::from(input.byte()) % NAMES.len()].to_string();
    match input.byte() % 7 {
        0 => Message::Alive(Alive {
            incarnation: incarnation(input),
            node: name(input),
            addr: Some(vec![198, 18, 0, 10 + input.byte() % 8]),
            port: 7946,
            meta: Some(input.bytes(8)),
            vsn: Some(vec![1, 5, 2, 0, 0, 0]),
        }),
        1 => Message::Suspect(Suspect {
            incarnation: incarnation(input),
            node: name(input),
            from: name(input),
        }),
        2 => Message::Dead(Dead {
            incarnation: incarnation(input),
            node: name(input),
            from: name(input),
        }),
        3 => Message::Ping(Ping {
            seq_no: input.u32(),
            node: name(input),
            ..Ping::default()
        }),
        4 => Message::Ack(Ack {
            seq_no: u32::from(input.byte()),
            payload: None,
        }),
        5 => Message::Nack(Nack {
            seq_no: u32::from(input.byte()),
        }),
        _ => Message::IndirectPing(IndirectPing {
            seq_no: input.u32(),
            target: Some(vec![198, 18, 0, 10 + input.byte() % 8]),
            port: 7946,
            node: name(input),
            nack: input.byte() % 2 == 0,
            ..IndirectPing::default()
        }),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let config = if input.byte() % 2 == 0 { Config::fast() } else { Config::lan() };
    let start = Instant::now();
    let mut now = start;
    let local = LocalNode {
        name: "me".into(),
        addr: SocketAddr::from(([198, 18, 0, 1], 7946)),
        meta: vec![],
    };
    let mut m = Membership::new(config, Default::default(), local, [7; 32], now).unwrap();
    let mut last_incarnation = m.incarnation();
    let mut left = false;
    let mut streams: Vec<StreamId> = Vec::new();
    let mut steps = 0usize;

    while !input.done() && steps < 512 {
        steps += 1;
        match input.byte() % 10 {
            0 => now += Duration::from_millis(u64::from(input.byte()) * 20),
            1 => {
                let from = peer(input.byte());
                let bytes = input.bytes(255);
                m.handle_packet(now, from, &bytes);
            }
            2 | 3 => {
                let from = peer(input.byte());
                let msgs: Vec<Vec<u8>> = (0..1 + input.byte() % 4)
                    .map(|_| message(&mut input).to_vec(Transport::Packet))
                    .collect();
                let payload = if msgs.len() == 1 {
                    msgs[0].clone()
                } else {
                    let mut out = Vec::new();
                    vigil_gossip::wire::compound::encode(&msgs, &mut out).unwrap();
                    out
                };
                m.handle_packet(now, from, &payload);
            }
            4 => {
                let bytes = input.bytes(255);
                let _ = m.handle_incoming_stream(now, &bytes);
            }
            5 => m.join(now, &[peer(input.byte())]),
            6 => {
                m.leave(now, Duration::from_millis(u64::from(input.byte()) * 10));
                left = true;
            }
            7 => {
                let meta = input.bytes(600);
                let _ = m.set_meta(now, meta);
            }
            8 => m.handle_unreachable(now, peer(input.byte())),
            _ => {
                if let Some(id) = streams.pop() {
                    if input.byte() % 2 == 0 {
                        let reply = input.bytes(255);
                        let _ = m.handle_stream_response(now, id, &reply);
                    } else {
                        m.handle_stream_failed(now, id, StreamFailure::Refused);
                    }
                }
            }
        }
        // Let every due timer fire (bounded: each pass must make progress).
        for _ in 0..1000 {
            match m.poll_timeout() {
                Some(t) if t <= now => m.handle_timeout(now),
                _ => break,
            }
        }
        let mut out = 0usize;
        while m.poll_transmit().is_some() {
            out += 1;
        }
        while let Some(s) = m.poll_stream() {
            if s.expects_reply && streams.len() < 64 {
                streams.push(s.id);
            }
            out += 1;
        }
        while m.poll_event().is_some() {
            out += 1;
        }
        assert!(out < 10_000, "one step produced {out} outputs");

        // Invariants.
        assert!(m.incarnation() >= last_incarnation, "incarnation went down");
        last_incarnation = m.incarnation();
        let me = m.member("me").expect("we are always in our own table");
        if left {
            assert!(matches!(me.state, MemberState::Left | MemberState::Alive));
        } else {
            assert_eq!(me.state, MemberState::Alive, "we never suspect ourselves");
        }
        assert!(m.num_known() <= NAMES.len(), "only names from the input exist");
        assert!(m.queued_broadcasts() <= 4 * NAMES.len(), "queues stay bounded");
        assert!(m.poll_timeout().is_some_and(|t| t > now || t <= now));
    }
});
