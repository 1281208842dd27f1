//! Bad input from the network: every case yields a typed error (or is dropped part by part),
//! never a panic, and decoding never allocates much more than the input caps allow.
//!
//! The heap is capped per decode by the `cap` allocator: exceeding the budget aborts the test
//! binary with "memory allocation of N bytes failed", which fails the suite loudly.

mod support;

use cap::Cap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::alloc::System;
use vigil_gossip::wire::{
    Alive, DecodeError, Framing, Keyring, Label, Message, PushPullHeader, SecretKey, Transport,
    UserMsgHeader, compound, compress, packet, stream,
};

#[global_allocator]
static ALLOCATOR: Cap<System> = Cap::new(System, usize::MAX);

/// Runs `f` allowed at most `budget` bytes of heap beyond what is live now. Tests in this
/// binary run one at a time (see `serial`), so other threads do not share the budget.
fn within_heap_budget<T>(budget: usize, f: impl FnOnce() -> T) -> T {
    ALLOCATOR
        .set_limit(ALLOCATOR.allocated() + budget)
        .expect("limit above current use");
    let out = f();
    ALLOCATOR.set_limit(usize::MAX).expect("lift the limit");
    out
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn alive() -> Message {
    Message::Alive(Alive {
        incarnation: 3,
        node: "node-a".into(),
        addr: Some(vec![198, 18, 0, 1]),
        port: 7946,
        meta: Some(b"meta".to_vec()),
        vsn: Some(vec![1, 5, 2, 0, 0, 0]),
    })
}

fn keyed() -> Framing {
    Framing {
        keyring: Keyring::new(SecretKey::new(&[5; 16]).unwrap(), []),
        label: Label::new("lab").unwrap(),
        ..Framing::default()
    }
}

#[test]
fn every_prefix_of_every_message_is_an_error_or_a_value() {
    let _g = serial();
    let text =
        std::fs::read_to_string(support::repo_root().join("tests/vectors/memberlist/vectors.json"))
            .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let framings = [Framing::default(), keyed()];
    let mut checked = 0;
    for v in doc["vectors"].as_array().unwrap() {
        let bytes = hex::decode(v["hex"].as_str().unwrap()).unwrap();
        if bytes.len() > 4096 {
            continue;
        }
        for cut in 0..bytes.len() {
            let prefix = &bytes[..cut];
            let _ = Message::decode_packet(prefix);
            let _ = Message::decode_stream(prefix, &Default::default());
            for f in &framings {
                let _ = packet::open(f, prefix);
                let _ = stream::open(f, prefix, true);
            }
            checked += 1;
        }
    }
    assert!(checked > 10_000, "checked {checked} prefixes");
}

#[test]
fn random_bytes_and_bit_flips_never_panic() {
    let _g = serial();
    let mut rng = StdRng::seed_from_u64(0xbad);
    let framings = [Framing::default(), keyed()];
    let good = {
        let mut parts = Vec::new();
        for _ in 0..5 {
            parts.push(alive().to_vec(Transport::Packet));
        }
        let mut out = Vec::new();
        compound::encode(&parts, &mut out).unwrap();
        out
    };
    for _ in 0..20_000 {
        let mut input = if rng.gen_bool(0.5) {
            good.clone()
        } else {
            (0..rng.gen_range(0..300)).map(|_| rng.r#gen()).collect()
        };
        for _ in 0..rng.gen_range(0..4) {
            if !input.is_empty() {
                let i = rng.gen_range(0..input.len());
                input[i] ^= 1 << rng.gen_range(0..8);
            }
        }
        for f in &framings {
            let _ = packet::open(f, &input);
            let _ = stream::open(f, &input, rng.r#gen());
        }
    }
}

#[test]
fn absurd_compound_counts_and_lengths() {
    let _g = serial();
    // 255 parts declared, only a few length bytes present.
    assert!(matches!(
        packet::open(&Framing::default(), &[7, 255, 0, 1])
            .unwrap()
            .malformed[..],
        [DecodeError::CompoundLengthsTruncated]
    ));
    // Lengths that run past the end: parts are dropped and counted.
    let contents = packet::open(
        &Framing::default(),
        &[7, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1],
    )
    .unwrap();
    assert_eq!(contents.truncated_parts, 3);
    assert!(contents.messages.is_empty());
}

#[test]
fn wrong_shapes_and_unknown_types_are_typed_errors() {
    let _g = serial();
    // alive whose body is an integer, a string, or a map with Incarnation as a string.
    assert!(matches!(
        Message::decode_packet(&[4, 0x05]),
        Err(DecodeError::WrongType { .. })
    ));
    assert!(matches!(
        Message::decode_packet(&[4, 0xa1, b'x']),
        Err(DecodeError::WrongType { .. })
    ));
    let mut bad = vec![4, 0x81];
    bad.extend_from_slice(&[0xab]);
    bad.extend_from_slice(b"Incarnation");
    bad.extend_from_slice(&[0xa1, b'x']);
    assert!(matches!(
        Message::decode_packet(&bad),
        Err(DecodeError::WrongType { .. })
    ));
    // Port above u16.
    let mut big_port = vec![4, 0x81, 0xa4];
    big_port.extend_from_slice(b"Port");
    big_port.extend_from_slice(&[0xce, 0, 1, 0, 0]);
    assert_eq!(
        Message::decode_packet(&big_port),
        Err(DecodeError::IntOutOfRange)
    );
    for t in [14u8, 100, 200, 243, 245, 255] {
        assert_eq!(
            Message::decode_packet(&[t]),
            Err(DecodeError::UnknownMessageType(t))
        );
        assert!(
            packet::open(&Framing::default(), &[t, 0x80])
                .unwrap()
                .malformed
                == vec![DecodeError::UnknownMessageType(t)]
        );
    }
}

#[test]
fn wrong_key_wrong_label_bad_crc_and_oversize() {
    let _g = serial();
    let mut rng = StdRng::seed_from_u64(1);
    let payload = alive().to_vec(Transport::Packet);
    let mut sealed = Vec::new();
    packet::seal(&keyed(), &payload, true, &mut rng, &mut sealed);

    let other_key = Framing {
        keyring: Keyring::new(SecretKey::new(&[6; 16]).unwrap(), []),
        ..keyed()
    };
    assert_eq!(
        packet::open(&other_key, &sealed),
        Err(DecodeError::NoKeyDecrypts)
    );
    let other_label = Framing {
        label: Label::new("other").unwrap(),
        ..keyed()
    };
    assert_eq!(
        packet::open(&other_label, &sealed),
        Err(DecodeError::LabelMismatch)
    );
    assert_eq!(
        packet::open(&Framing::default(), &sealed),
        Err(DecodeError::LabelMismatch)
    );

    let mut crc = Vec::new();
    packet::seal(
        &Framing {
            compress: false,
            ..Framing::default()
        },
        &payload,
        true,
        &mut rng,
        &mut crc,
    );
    crc[2] ^= 0xff;
    assert!(matches!(
        packet::open(&Framing::default(), &crc),
        Err(DecodeError::CrcMismatch { .. })
    ));

    let huge = vec![4u8; 65_537];
    assert_eq!(
        packet::open(&Framing::default(), &huge),
        Err(DecodeError::PacketTooLarge { len: 65_537 })
    );
    assert_eq!(
        packet::open(&Framing::default(), &[]),
        Err(DecodeError::Empty)
    );
}

#[test]
fn lzw_bombs_are_capped_in_packets_and_streams() {
    let _g = serial();
    // 64 MiB of zeros compresses to well under a UDP packet... almost: check and use what fits.
    let zeros = vec![0u8; 64 << 20];
    let mut bomb = Vec::new();
    compress::encode(&zeros, &mut bomb);
    drop(zeros);
    assert!(bomb.len() < 600_000, "bomb is {} bytes", bomb.len());

    // Packets: capped at 1 MiB (compress::MAX_PACKET_DECOMPRESSED). Use a bomb that fits 64 KiB.
    let small_zeros = vec![0u8; 8 << 20];
    let mut packet_bomb = Vec::new();
    compress::encode(&small_zeros, &mut packet_bomb);
    drop(small_zeros);
    assert!(
        packet_bomb.len() <= packet::MAX_PACKET,
        "{}",
        packet_bomb.len()
    );
    let contents = within_heap_budget(4 << 20, || {
        packet::open(&Framing::default(), &packet_bomb).unwrap()
    });
    assert_eq!(
        contents.malformed,
        vec![DecodeError::DecompressedTooLarge {
            limit: compress::MAX_PACKET_DECOMPRESSED
        }]
    );

    // Streams: a configurable cap.
    let mut framing = Framing::default();
    framing.stream_limits.max_decompressed_bytes = 2 << 20;
    let result = within_heap_budget(8 << 20, || stream::open(&framing, &bomb, true));
    assert_eq!(
        result,
        Err(DecodeError::DecompressedTooLarge { limit: 2 << 20 })
    );
}

#[test]
fn declared_lengths_do_not_reserve_memory() {
    let _g = serial();
    // push/pull claiming a million nodes and 20 MiB of user state, with no bodies.
    let mut header = vec![6];
    PushPullHeader {
        nodes: 1 << 20,
        user_state_len: 20 << 20,
        join: false,
    }
    .encode_body(&mut header);
    let result = within_heap_budget(64 << 10, || {
        stream::open(&Framing::default(), &header, true)
    });
    assert_eq!(result, Ok(None), "incomplete: waits for more bytes");

    let mut user = vec![8];
    UserMsgHeader {
        user_msg_len: 20 << 20,
    }
    .encode_body(&mut user);
    let result = within_heap_budget(64 << 10, || stream::open(&Framing::default(), &user, true));
    assert_eq!(result, Ok(None));

    // msgpack containers claiming 4 billion entries.
    let result = within_heap_budget(4 << 10, || {
        Message::decode_packet(&[4, 0xdf, 0xff, 0xff, 0xff, 0xff])
    });
    assert_eq!(result, Err(DecodeError::Truncated));

    // An encrypted stream declaring 2 GiB.
    let result = within_heap_budget(64 << 10, || {
        stream::open(
            &keyed(),
            &[244, 3, b'l', b'a', b'b', 10, 0x7f, 0xff, 0xff, 0xff],
            true,
        )
    });
    assert!(matches!(result, Err(DecodeError::StreamLimit { .. })));
}
