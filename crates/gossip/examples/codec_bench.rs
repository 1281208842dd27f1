//! Times the wire codec: encode and decode, nanoseconds per message, for the cases that
//! `vigil-conformance bench` times on Go memberlist. Prints JSON lines
//! (`{"case":…,"encode_ns":…,"decode_ns":…}`); `bench/codec.sh` puts both side by side.
//!
//! Run with `cargo run --release -p vigil-gossip --example codec_bench [seconds-per-case]`.

use rand::SeedableRng;
use rand::rngs::StdRng;
use std::hint::black_box;
use std::time::{Duration, Instant};
use vigil_gossip::wire::{
    Ack, Alive, EncryptionVersion, Keyring, Message, Ping, SecretKey, Transport, compound,
};

/// Runs `f` repeatedly for about `budget` and returns nanoseconds per call.
fn time_per_op(budget: Duration, mut f: impl FnMut()) -> f64 {
    let mut iterations = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..iterations {
            f();
        }
        let elapsed = start.elapsed();
        if elapsed >= budget {
            return elapsed.as_nanos() as f64 / iterations as f64;
        }
        iterations *= 2;
    }
}

fn alive(i: u32) -> Message {
    Message::Alive(Alive {
        incarnation: 1000 + i,
        node: format!("node-{i:03}.rack-7.example"),
        addr: Some(vec![198, 18, 0, i as u8]),
        port: 7946,
        meta: Some(b"zone=a,role=speaker".to_vec()),
        vsn: Some(vec![1, 5, 2, 0, 0, 0]),
    })
}

fn report(case: &str, encode_ns: f64, decode_ns: f64) {
    println!("{{\"case\":\"{case}\",\"encode_ns\":{encode_ns:.1},\"decode_ns\":{decode_ns:.1}}}");
}

fn single(case: &str, msg: &Message, budget: Duration) {
    let mut buf = Vec::with_capacity(256);
    let encode = time_per_op(budget, || {
        buf.clear();
        black_box(msg).encode(Transport::Packet, &mut buf);
        black_box(&buf);
    });
    let bytes = msg.to_vec(Transport::Packet);
    let decode = time_per_op(budget, || {
        black_box(Message::decode_packet(black_box(&bytes)).unwrap());
    });
    report(case, encode, decode);
}

fn encode_compound(msgs: &[Message]) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec(Transport::Packet)).collect();
    let mut out = Vec::new();
    compound::encode(&parts, &mut out).unwrap();
    out
}

fn decode_compound(bytes: &[u8]) -> Vec<Message> {
    compound::decode(&bytes[1..])
        .unwrap()
        .parts
        .into_iter()
        .map(|p| Message::decode_packet(p).unwrap())
        .collect()
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("seconds per case"))
        .unwrap_or(0.5);
    let budget = Duration::from_secs_f64(seconds);

    single(
        "ping",
        &Message::Ping(Ping {
            seq_no: 12_345,
            node: "node-042.rack-7.example".into(),
            source_addr: vec![198, 18, 0, 1],
            source_port: 7946,
            source_node: "node-001.rack-7.example".into(),
        }),
        budget,
    );
    single(
        "ack",
        &Message::Ack(Ack {
            seq_no: 12_345,
            payload: None,
        }),
        budget,
    );
    single("alive", &alive(1), budget);

    let ten: Vec<Message> = (0..10).map(alive).collect();
    let encode = time_per_op(budget, || {
        black_box(encode_compound(black_box(&ten)));
    });
    let bytes = encode_compound(&ten);
    let decode = time_per_op(budget, || {
        black_box(decode_compound(black_box(&bytes)));
    });
    report("compound10", encode, decode);

    let keyring = Keyring::new(SecretKey::new(&[7; 16]).unwrap(), []);
    let mut rng = StdRng::seed_from_u64(1);
    let encode = time_per_op(budget, || {
        let plain = encode_compound(black_box(&ten));
        let mut out = Vec::with_capacity(plain.len() + 29);
        keyring
            .encrypt(EncryptionVersion::V1, &mut rng, &plain, b"", &mut out)
            .unwrap();
        black_box(out);
    });
    let mut sealed = Vec::new();
    keyring
        .encrypt(EncryptionVersion::V1, &mut rng, &bytes, b"", &mut sealed)
        .unwrap();
    let decode = time_per_op(budget, || {
        let plain = keyring.decrypt(black_box(&sealed), b"").unwrap();
        black_box(decode_compound(&plain));
    });
    report("encrypted_compound10", encode, decode);
}
