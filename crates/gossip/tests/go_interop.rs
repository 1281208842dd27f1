//! Byte compatibility with Go memberlist 0.2.2, 0.5.1 and 0.7.0, both ways.
//!
//! Go -> vigil: every vector in `tests/vectors/memberlist/vectors.json` (written by the Go
//! conformance program from Debian's memberlist 0.2.2) decodes to the fields Go recorded and
//! re-encodes to the same bytes; the vectors 0.5.1 and 0.7.0 write differently
//! (`vectors-0.5.1.json`, `vectors-0.7.0.json`: go-msgpack v2's signed integer forms) decode
//! to the same fields and re-encode to 0.2.2's bytes, the one form vigil writes. vigil -> Go:
//! everything vigil writes is fed to each version's Go program, which must decode it to the
//! same fields.

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use support::{Replay, conformance_bins, go_decode, message_json, normalize, repo_root};
use vigil_gossip::wire::{
    self, Ack, Alive, Dead, EncryptionVersion, ErrResp, Framing, IndirectPing, Keyring, Label,
    Message, Nack, NodeState, Ping, PushNodeState, PushPull, SecretKey, Suspect, Transport,
    compound, compress, crc, crypto, packet, stream,
};

fn vectors() -> Vec<Value> {
    vectors_in("vectors.json")
}

/// The vectors of one file in `tests/vectors/memberlist/`.
fn vectors_in(file: &str) -> Vec<Value> {
    let path = repo_root().join("tests/vectors/memberlist").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "read {}: {e} (regenerate with conformance/gen-vectors.sh)",
            path.display()
        )
    });
    let doc: Value = serde_json::from_str(&text).expect("vectors.json is JSON");
    doc["vectors"].as_array().expect("vectors array").clone()
}

fn unhex(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).expect("valid hex")
}

fn is_stream_type(ty: &str) -> bool {
    matches!(ty, "push_pull" | "user_stream" | "err")
}

fn decode_message(bytes: &[u8], stream: bool) -> Message {
    if stream {
        let (m, used) =
            Message::decode_stream(bytes, &Default::default()).expect("decode stream message");
        assert_eq!(used, bytes.len(), "whole message consumed");
        m
    } else {
        Message::decode_packet(bytes).expect("decode packet message")
    }
}

fn framing_for(v: &Value) -> Framing {
    let keys: Vec<SecretKey> = v["keys"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|k| SecretKey::new(&unhex(k)).unwrap())
                .collect()
        })
        .unwrap_or_default();
    let keyring = match keys.split_first() {
        Some((primary, rest)) => Keyring::new(primary.clone(), rest.iter().cloned()),
        None => Keyring::default(),
    };
    Framing {
        compress: v["compress"].as_bool().unwrap_or(false),
        keyring,
        encryption_version: if v["encryption_version"].as_u64() == Some(0) {
            EncryptionVersion::V0
        } else {
            EncryptionVersion::V1
        },
        label: Label::new(v["label"].as_str().unwrap_or_default()).unwrap(),
        ..Framing::default()
    }
}

fn nonce_rng(v: &Value) -> Replay {
    Replay(
        v["nonce"]
            .as_str()
            .map(|n| hex::decode(n).unwrap())
            .unwrap_or(vec![0]),
        0,
    )
}

#[test]
fn go_vectors_decode_and_reencode_byte_for_byte() {
    let vectors = vectors();
    let mut by_kind = std::collections::BTreeMap::<String, usize>::new();
    for v in &vectors {
        let kind = v["kind"].as_str().unwrap();
        *by_kind.entry(kind.to_string()).or_default() += 1;
        check_vector(v, v);
    }
    eprintln!("checked {} Go vectors: {by_kind:?}", vectors.len());
    for kind in [
        "message", "compound", "lzw", "compress", "crc", "encrypt", "packet", "stream",
    ] {
        assert!(
            by_kind.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} vectors"
        );
    }
}

/// The vectors memberlist 0.5.1 and 0.7.0 write differently from 0.2.2 (each file holds only
/// those; 0.7.0's only what differs from both older ones) decode to the fields Go recorded,
/// and vigil re-encodes them to the 0.2.2 vector of the same name: vigil writes one form,
/// which every version reads (`go_accepts_everything_vigil_writes`).
#[test]
fn newer_go_vectors_decode_and_reencode_to_the_0_2_2_form() {
    let base: std::collections::BTreeMap<String, Value> = vectors()
        .into_iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), v))
        .collect();
    let mut differing = 0;
    for version in ["0.5.1", "0.7.0"] {
        let newer = vectors_in(&format!("vectors-{version}.json"));
        for v in &newer {
            let name = v["name"].as_str().unwrap();
            let canonical = base
                .get(name)
                .unwrap_or_else(|| panic!("{version} {name}: no 0.2.2 vector of that name"));
            assert_ne!(
                v["hex"], canonical["hex"],
                "{version} {name}: not a difference"
            );
            check_vector(v, canonical);
        }
        eprintln!(
            "{version}: {} vectors differ from the older versions', all checked",
            newer.len()
        );
        differing += newer.len();
    }
    // go-msgpack v2's integer forms make some differ; a file with none would test nothing.
    assert!(differing > 0, "no differing vectors from 0.5.1 or 0.7.0");
}

/// Checks one Go vector `v`: its bytes decode to its fields, and what vigil writes for them is
/// `canonical`'s bytes (`v` itself for 0.2.2's vectors; the 0.2.2 vector of the same name for a
/// newer version's).
fn check_vector(v: &Value, canonical: &Value) {
    let name = v["name"].as_str().unwrap();
    let kind = v["kind"].as_str().unwrap();
    assert_eq!(canonical["kind"], v["kind"], "{name}: kinds");
    let want = unhex(&v["hex"]);
    let canonical = unhex(&canonical["hex"]);
    match kind {
        "message" => {
            let ty = v["message"]["type"].as_str().unwrap();
            let stream = is_stream_type(ty);
            let msg = decode_message(&want, stream);
            // Normalized: an empty omitempty field is absent on the wire, so it decodes as
            // nil; the byte-identical re-encoding below still pins nil vs empty elsewhere.
            assert_eq!(
                normalize(&message_json(&msg, stream)),
                normalize(&v["message"]),
                "{name}: fields"
            );
            assert_eq!(
                msg.to_vec(if stream {
                    Transport::Stream
                } else {
                    Transport::Packet
                }),
                canonical,
                "{name}: re-encoding"
            );
        }
        "compound" => {
            let parts: Vec<Vec<u8>> = v["parts"].as_array().unwrap().iter().map(unhex).collect();
            let decoded = compound::decode(&want[1..]).unwrap();
            assert_eq!(decoded.truncated, 0, "{name}");
            assert_eq!(
                decoded.parts,
                parts.iter().map(Vec::as_slice).collect::<Vec<_>>(),
                "{name}"
            );
            let mut out = Vec::new();
            compound::encode(&parts, &mut out).unwrap();
            assert_eq!(out, canonical, "{name}: re-encoding");
        }
        "lzw" => {
            let input = unhex(&v["input"]);
            assert_eq!(
                compress::lzw_compress(&input),
                canonical,
                "{name}: compress"
            );
            assert_eq!(
                compress::lzw_decompress(&want, usize::MAX).unwrap(),
                input,
                "{name}: decompress"
            );
        }
        "compress" => {
            let input = unhex(&v["input"]);
            let mut out = Vec::new();
            compress::encode(&input, &mut out);
            assert_eq!(out, canonical, "{name}");
            // Like memberlist HEAD, an empty decompressed message is refused: it has no
            // type byte.
            let decoded = compress::decode(&want[1..], usize::MAX).map(|d| d.0);
            if input.is_empty() {
                assert_eq!(decoded, Err(wire::DecodeError::DecompressedEmpty), "{name}");
            } else {
                assert_eq!(decoded.unwrap(), input, "{name}");
            }
        }
        "crc" => {
            let input = unhex(&v["input"]);
            let mut out = Vec::new();
            crc::encode(&input, &mut out);
            assert_eq!(out, canonical, "{name}");
            assert_eq!(crc::strip(&want).unwrap(), (&input[..], true), "{name}");
        }
        "encrypt" => {
            let key = SecretKey::new(&unhex(&v["key"])).unwrap();
            let version = if v["version"].as_u64() == Some(0) {
                EncryptionVersion::V0
            } else {
                EncryptionVersion::V1
            };
            let nonce: [u8; 12] = unhex(&v["nonce"]).try_into().unwrap();
            let (input, aad) = (unhex(&v["input"]), unhex(&v["aad"]));
            let mut out = Vec::new();
            crypto::encrypt_with_nonce(version, &key, &nonce, &input, &aad, &mut out);
            assert_eq!(out, canonical, "{name}");
            assert_eq!(
                Keyring::new(key, []).decrypt(&want, &aad).unwrap(),
                input,
                "{name}"
            );
        }
        "packet" => {
            let framing = framing_for(v);
            let msgs: Vec<Vec<u8>> = v["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(unhex)
                .collect();
            let payload = match msgs.as_slice() {
                [one] => one.clone(),
                many => {
                    let mut out = Vec::new();
                    compound::encode(many, &mut out).unwrap();
                    out
                }
            };
            let crc = v["crc"].as_bool().unwrap();
            let mut out = Vec::new();
            packet::seal(&framing, &payload, crc, &mut nonce_rng(v), &mut out);
            assert_eq!(
                hex::encode(&out),
                hex::encode(&canonical),
                "{name}: sealing"
            );
            let contents = packet::open(&framing, &want).unwrap_or_else(|e| panic!("{name}: {e}"));
            let expected: Vec<Message> = msgs
                .iter()
                .map(|m| Message::decode_packet(m).unwrap())
                .collect();
            assert_eq!(contents.messages, expected, "{name}: opening");
            assert!(contents.malformed.is_empty(), "{name}");
            assert_eq!(contents.layers.crc, crc, "{name}");
        }
        "stream" => {
            let framing = framing_for(v);
            let msg = decode_message(&unhex(&v["message"]), true);
            let mut out = Vec::new();
            stream::seal(&framing, &msg, true, &mut nonce_rng(v), &mut out);
            assert_eq!(
                hex::encode(&out),
                hex::encode(&canonical),
                "{name}: sealing"
            );
            let opened = stream::open(&framing, &want, true)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .unwrap_or_else(|| panic!("{name}: incomplete"));
            assert_eq!(opened.message, msg, "{name}");
            assert_eq!(opened.consumed, want.len(), "{name}");
        }
        other => panic!("{name}: unknown vector kind {other}"),
    }
}

// ---- vigil -> Go ---------------------------------------------------------------------------

fn name(len: usize) -> String {
    (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

fn vsn() -> Vec<u8> {
    vec![1, 5, 2, 0, 0, 0]
}

/// Messages with the edge values the issue names, written by vigil.
fn vigil_messages() -> Vec<Message> {
    let ips: [Vec<u8>; 4] = [
        vec![198, 18, 0, 1],
        [[0u8; 10].as_slice(), &[0xff, 0xff, 198, 19, 255, 254]].concat(),
        "2001:db8::1"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
            .to_vec(),
        "2001:db8:ffff::abcd"
            .parse::<std::net::Ipv6Addr>()
            .unwrap()
            .octets()
            .to_vec(),
    ];
    let incarnations = [
        0,
        1,
        127,
        128,
        255,
        256,
        65_535,
        65_536,
        u32::MAX - 1,
        u32::MAX,
    ];
    let lengths = [0, 31, 32, 255, 256, 65_535, 65_536, 70_000];
    let mut msgs = Vec::new();
    for (i, &inc) in incarnations.iter().enumerate() {
        let addr = ips[i % ips.len()].clone();
        msgs.push(Message::Alive(Alive {
            incarnation: inc,
            node: name(i * 7),
            addr: Some(addr.clone()),
            port: [0, 1, 127, 128, 7946, 65_535][i % 6],
            meta: [None, Some(vec![]), Some(vec![0xab; 512])][i % 3].clone(),
            vsn: Some(vsn()),
        }));
        msgs.push(Message::Suspect(Suspect {
            incarnation: inc,
            node: name(i),
            from: name(i + 40),
        }));
        msgs.push(Message::Dead(Dead {
            incarnation: inc,
            node: name(i + 1),
            from: name(i + 1),
        }));
        msgs.push(Message::Ping(Ping {
            seq_no: inc,
            node: name(i * 3),
            source_addr: if i % 2 == 0 { addr.clone() } else { vec![] },
            source_port: if i % 2 == 0 { 7946 } else { 0 },
            source_node: if i % 2 == 0 { name(5) } else { String::new() },
        }));
        msgs.push(Message::IndirectPing(IndirectPing {
            seq_no: inc,
            target: Some(addr),
            port: 65_535,
            node: name(i),
            nack: i % 2 == 0,
            source_addr: ips[0].clone(),
            source_port: 1,
            source_node: "src".into(),
        }));
        msgs.push(Message::Ack(Ack {
            seq_no: inc,
            payload: [None, Some(vec![]), Some(vec![1, 2, 3])][i % 3].clone(),
        }));
        msgs.push(Message::Nack(Nack { seq_no: inc }));
    }
    for &len in &lengths {
        msgs.push(Message::Alive(Alive {
            incarnation: 1,
            node: name(len),
            addr: Some(ips[2].clone()),
            port: 7946,
            meta: None,
            vsn: Some(vsn()),
        }));
        msgs.push(Message::User(vec![0x5a; len.min(60_000)]));
    }
    msgs
}

fn stream_messages() -> Vec<Message> {
    let mut msgs = Vec::new();
    for n in [0usize, 1, 3, 200] {
        msgs.push(Message::PushPull(PushPull {
            join: n % 2 == 1,
            states: (0..n)
                .map(|i| PushNodeState {
                    name: name(i % 300 + 1),
                    addr: Some(vec![198, 18, (i / 256) as u8, i as u8]),
                    port: 7946,
                    meta: if i % 2 == 0 {
                        None
                    } else {
                        Some(vec![i as u8; i % 40])
                    },
                    incarnation: u32::MAX - i as u32,
                    state: [
                        NodeState::Alive,
                        NodeState::Suspect,
                        NodeState::Dead,
                        NodeState::Left,
                    ][i % 4],
                    vsn: Some(vsn()),
                })
                .collect(),
            user_state: vec![7; if n == 200 { 300 } else { n }],
        }));
    }
    for len in [0, 31, 32, 255, 256, 70_000] {
        msgs.push(Message::Err(ErrResp { error: name(len) }));
        msgs.push(Message::User(vec![0x33; len]));
    }
    // Incompressible bytes make the LZW dictionary reset many times.
    let mut rng = StdRng::seed_from_u64(7);
    msgs.push(Message::User(
        (0..40_000).map(|_| rng.r#gen::<u8>()).collect(),
    ));
    msgs.push(Message::Ping(Ping {
        seq_no: 9,
        node: "target".into(),
        ..Ping::default()
    }));
    msgs.push(Message::Ack(Ack {
        seq_no: 9,
        payload: None,
    }));
    msgs
}

fn framings(rng: &mut StdRng) -> Vec<(String, Framing)> {
    let mut out = vec![(
        "plain".to_string(),
        Framing {
            compress: false,
            ..Framing::default()
        },
    )];
    out.push(("compressed".into(), Framing::default()));
    for key_len in [16, 24, 32] {
        for version in [EncryptionVersion::V0, EncryptionVersion::V1] {
            for label in ["", "vigil-lab"] {
                let mut key = vec![0u8; key_len];
                rng.fill(&mut key[..]);
                let other = SecretKey::new(&[0x42; 16]).unwrap();
                out.push((
                    format!("aes{}-{version:?}-label{}", key_len * 8, !label.is_empty()),
                    Framing {
                        keyring: Keyring::new(SecretKey::new(&key).unwrap(), [other]),
                        encryption_version: version,
                        label: Label::new(label).unwrap(),
                        ..Framing::default()
                    },
                ));
            }
        }
    }
    out
}

fn case(name: String, kind: &str, bytes: &[u8], framing: &Framing) -> Value {
    json!({
        "name": name,
        "kind": kind,
        "hex": hex::encode(bytes),
        "keys": framing.keyring.keys().iter().map(|k| hex::encode(k.as_bytes())).collect::<Vec<_>>(),
        "label": String::from_utf8(framing.label.as_bytes().to_vec()).unwrap(),
    })
}

/// Each Go version (0.2.2, 0.5.1, 0.7.0) decodes everything vigil writes to the fields vigil
/// meant; a failure names the version.
#[test]
fn go_accepts_everything_vigil_writes() {
    let bins = conformance_bins();
    if bins.is_empty() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut cases = Vec::new();
    let mut expected = Vec::new();

    // Single messages, both forms.
    for (i, m) in vigil_messages().iter().enumerate() {
        cases.push(case(
            format!("msg/{i}"),
            "message",
            &m.to_vec(Transport::Packet),
            &Framing::default(),
        ));
        expected.push(vec![message_json(m, false)]);
    }
    for (i, m) in stream_messages().iter().enumerate() {
        // A bare stream message is a stream with no compression and no encryption.
        cases.push(case(
            format!("stream-msg/{i}"),
            "stream",
            &m.to_vec(Transport::Stream),
            &Framing::default(),
        ));
        expected.push(vec![message_json(m, true)]);
    }

    // Packets: compounds of many sizes under every framing, with and without CRC.
    let small: Vec<Message> = vigil_messages()
        .into_iter()
        .filter(|m| m.to_vec(Transport::Packet).len() < 600)
        .collect();
    for (fname, framing) in framings(&mut rng) {
        for (n, crc) in [(1, false), (2, true), (10, false), (30, true)] {
            let msgs: Vec<Message> = small.iter().cycle().skip(n * 3).take(n).cloned().collect();
            let parts: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec(Transport::Packet)).collect();
            let payload = compound::encode_batches(&parts, compound::MAX_PARTS)
                .unwrap()
                .remove(0);
            let mut bytes = Vec::new();
            packet::seal(&framing, &payload, crc, &mut rng, &mut bytes);
            cases.push(case(
                format!("packet/{fname}/{n}/crc{crc}"),
                "packet",
                &bytes,
                &framing,
            ));
            expected.push(msgs.iter().map(|m| message_json(m, false)).collect());
        }
        for (i, m) in stream_messages().iter().enumerate() {
            let mut bytes = Vec::new();
            stream::seal(&framing, m, true, &mut rng, &mut bytes);
            cases.push(case(
                format!("stream/{fname}/{i}"),
                "stream",
                &bytes,
                &framing,
            ));
            expected.push(vec![message_json(m, true)]);
        }
    }
    // Compounds right at memberlist 0.2.2's limit (127 parts; see wire::compat).
    let nacks: Vec<Vec<u8>> = (0..127u32)
        .map(|i| Message::Nack(Nack { seq_no: i }).to_vec(Transport::Packet))
        .collect();
    let mut bytes = Vec::new();
    compound::encode(&nacks, &mut bytes).unwrap();
    cases.push(case(
        "packet/compound-127".into(),
        "packet",
        &bytes,
        &Framing::default(),
    ));
    expected.push(
        (0..127u32)
            .map(|i| message_json(&Message::Nack(Nack { seq_no: i }), false))
            .collect(),
    );

    let mut failures = Vec::new();
    for (version, bin) in &bins {
        let answers = go_decode(bin, &cases);
        assert_eq!(answers.len(), cases.len(), "{version}: one answer per case");
        let before = failures.len();
        for ((c, want), got) in cases.iter().zip(&expected).zip(&answers) {
            let name = c["name"].as_str().unwrap();
            assert_eq!(
                got["name"].as_str(),
                Some(name),
                "{version}: answers in order"
            );
            if got["ok"] != Value::Bool(true) {
                failures.push(format!(
                    "memberlist {version}: {name}: Go rejected it: {}",
                    got["error"]
                ));
                continue;
            }
            let got_msgs: Vec<Value> = got["messages"].as_array().cloned().unwrap_or_default();
            let want_n: Vec<Value> = want.iter().map(normalize).collect();
            let got_n: Vec<Value> = got_msgs.iter().map(normalize).collect();
            if got_n != want_n {
                failures.push(format!(
                    "memberlist {version}: {name}: Go misread it:\n  want {}\n  got  {}",
                    Value::Array(want_n),
                    Value::Array(got_n)
                ));
            }
        }
        if failures.len() == before {
            eprintln!(
                "memberlist {version} decoded all {} vigil-written cases",
                cases.len()
            );
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases x {} versions failed:\n{}",
        failures.len(),
        cases.len(),
        bins.len(),
        failures.join("\n")
    );
}

#[test]
fn ip_forms_are_kept() {
    let v4 = [198, 18, 0, 1];
    assert_eq!(wire::ip_from_wire(&v4), Some("198.18.0.1".parse().unwrap()));
    let mapped = [[0u8; 10].as_slice(), &[0xff, 0xff], &v4].concat();
    assert_eq!(
        wire::ip_from_wire(&mapped),
        Some("198.18.0.1".parse().unwrap())
    );
    assert_eq!(wire::ip_to_wire("2001:db8::1".parse().unwrap()).len(), 16);
    assert_eq!(wire::ip_from_wire(&[1, 2, 3]), None);
}
