//! UDP packets: the layers Go stacks around messages, in Go's order.
//!
//! Sending (`rawSendMsgPacket`), innermost first: message or compound → compressed, only if
//! that is smaller → CRC, when the peer speaks protocol 5 → encrypted, when the keyring has
//! keys → label header. Receiving (`ingestPacket`) peels them in reverse and then recurses
//! through compound and compressed messages.

use super::{DecodeError, Framing, Message, MessageType, compound, compress, crc, crypto, label};
use rand_core::CryptoRngCore;

/// The largest UDP payload anyone can send; larger input is not a packet.
pub const MAX_PACKET: usize = 65_536;

/// How deep compound and compressed layers may nest. Go nests at most a compound inside a
/// compressed message; a little slack costs nothing.
const MAX_NESTING: usize = 4;

/// Which layers a packet had, for counters and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layers {
    /// It carried a label header.
    pub label: bool,
    /// It was encrypted.
    pub encrypted: bool,
    /// It carried a CRC.
    pub crc: bool,
    /// Some part was compressed.
    pub compressed: bool,
    /// Some part was a compound.
    pub compound: bool,
}

/// What a packet held once its framing was peeled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    /// The messages, in order.
    pub messages: Vec<Message>,
    /// Parts that could not be decoded. Like Go, a bad part does not spoil the others.
    pub malformed: Vec<DecodeError>,
    /// Compound parts cut off by the end of the packet.
    pub truncated_parts: usize,
    /// The layers seen.
    pub layers: Layers,
}

/// Frames `payload` (one encoded message or a compound) for sending to a peer. `crc` should be
/// true when the peer advertises protocol version 5 or more.
pub fn seal(
    framing: &Framing,
    payload: &[u8],
    crc: bool,
    rng: &mut impl CryptoRngCore,
    out: &mut Vec<u8>,
) {
    let compressed = framing.compress.then(|| {
        let mut c = Vec::new();
        compress::encode(payload, &mut c);
        c
    });
    let body = match &compressed {
        Some(c) if c.len() < payload.len() => c.as_slice(),
        _ => payload,
    };
    framing.label.write_header(out);
    match framing.keyring.primary() {
        Some(key) if framing.verify_outgoing => {
            let with_crc;
            let plain = if crc {
                let mut buf = Vec::with_capacity(body.len() + crc::OVERHEAD);
                crc::encode(body, &mut buf);
                with_crc = buf;
                with_crc.as_slice()
            } else {
                body
            };
            let mut nonce = [0u8; 12];
            rng.fill_bytes(&mut nonce);
            let version = framing.encryption_version;
            let aad = framing.label.as_bytes();
            crypto::encrypt_with_nonce(version, key, &nonce, plain, aad, out);
        }
        _ if crc => crc::encode(body, out),
        _ => out.extend_from_slice(body),
    }
}

/// Bytes [`seal`] may add around a payload besides compression: label, CRC and encryption.
/// Go budgets label and encryption only; we count the CRC too so packets never overshoot.
pub fn overhead(framing: &Framing) -> usize {
    let encryption = if framing.keyring.is_enabled() && framing.verify_outgoing {
        framing.encryption_version.overhead()
    } else {
        0
    };
    framing.label.overhead() + crc::OVERHEAD + encryption
}

/// Peels a received packet. Errors reject the whole packet (label, decryption, CRC, size);
/// problems with individual messages are listed in [`Contents::malformed`].
pub fn open(framing: &Framing, packet: &[u8]) -> Result<Contents, DecodeError> {
    if packet.is_empty() {
        return Err(DecodeError::Empty);
    }
    if packet.len() > MAX_PACKET {
        return Err(DecodeError::PacketTooLarge { len: packet.len() });
    }
    let mut contents = Contents::default();
    let (received_label, rest) = label::split(packet)?;
    label::check(
        received_label,
        &framing.label,
        framing.skip_inbound_label_check,
    )?;
    contents.layers.label = received_label.is_some();

    let decrypted;
    let plain = if framing.keyring.is_enabled() {
        match framing.keyring.decrypt(rest, framing.label.as_bytes()) {
            Ok(p) => {
                contents.layers.encrypted = true;
                decrypted = p;
                &decrypted[..]
            }
            Err(e) if framing.verify_incoming => return Err(e),
            // While a cluster migrates to encryption, plaintext is still accepted.
            Err(_) => rest,
        }
    } else {
        rest
    };

    let (payload, had_crc) = crc::strip(plain)?;
    contents.layers.crc = had_crc;
    let mut budget = framing.max_packet_decompressed;
    collect(payload, 0, &mut budget, &mut contents);
    Ok(contents)
}

fn collect(buf: &[u8], depth: usize, budget: &mut usize, contents: &mut Contents) {
    if depth > MAX_NESTING {
        contents.malformed.push(DecodeError::NestingTooDeep);
        return;
    }
    let Some((&ty, body)) = buf.split_first() else {
        contents.malformed.push(DecodeError::Empty);
        return;
    };
    match MessageType::from(ty) {
        MessageType::Compound => match compound::decode(body) {
            Ok(parts) => {
                contents.layers.compound = true;
                contents.truncated_parts += parts.truncated;
                for part in parts.parts {
                    collect(part, depth + 1, budget, contents);
                }
            }
            Err(e) => contents.malformed.push(e),
        },
        MessageType::Compress => match compress::decode(body, *budget) {
            Ok((inner, _)) => {
                contents.layers.compressed = true;
                *budget -= inner.len();
                collect(&inner, depth + 1, budget, contents);
            }
            Err(e) => contents.malformed.push(e),
        },
        _ => match Message::decode_packet(buf) {
            Ok(m) => contents.messages.push(m),
            Err(e) => contents.malformed.push(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Alive, EncryptionVersion, Keyring, Label, Ping, SecretKey, Transport};
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn alive(i: u32) -> Message {
        Message::Alive(Alive {
            incarnation: i,
            node: format!("node-{i}"),
            addr: Some(vec![198, 18, 0, i as u8]),
            port: 7946,
            meta: None,
            vsn: Some(vec![1, 5, 2, 0, 0, 0]),
        })
    }

    fn compound_of(msgs: &[Message]) -> Vec<u8> {
        let parts: Vec<Vec<u8>> = msgs.iter().map(|m| m.to_vec(Transport::Packet)).collect();
        let mut out = Vec::new();
        compound::encode(&parts, &mut out).unwrap();
        out
    }

    fn framings() -> Vec<Framing> {
        let key = SecretKey::new(&[7; 32]).unwrap();
        let mut all = Vec::new();
        for compress in [false, true] {
            for keys in [false, true] {
                for label in ["", "cluster-a"] {
                    all.push(Framing {
                        compress,
                        keyring: if keys {
                            Keyring::new(key.clone(), [])
                        } else {
                            Keyring::default()
                        },
                        label: Label::new(label).unwrap(),
                        ..Framing::default()
                    });
                }
            }
        }
        all
    }

    #[test]
    fn every_layer_combination_round_trips() {
        let msgs: Vec<Message> = (1..=10).map(alive).collect();
        let payload = compound_of(&msgs);
        let mut rng = StdRng::seed_from_u64(1);
        for framing in framings() {
            for crc in [false, true] {
                let mut packet = Vec::new();
                seal(&framing, &payload, crc, &mut rng, &mut packet);
                let contents = open(&framing, &packet).unwrap();
                assert_eq!(contents.messages, msgs, "{framing:?} crc={crc}");
                assert!(contents.malformed.is_empty());
                assert_eq!(contents.layers.crc, crc);
                assert_eq!(contents.layers.compressed, framing.compress);
                assert_eq!(contents.layers.encrypted, framing.keyring.is_enabled());
                assert_eq!(contents.layers.label, !framing.label.is_empty());
            }
        }
    }

    #[test]
    fn compression_is_used_only_when_smaller() {
        let framing = Framing::default();
        let ping = Message::Ping(Ping::default()).to_vec(Transport::Packet);
        let mut packet = Vec::new();
        seal(
            &framing,
            &ping,
            false,
            &mut StdRng::seed_from_u64(1),
            &mut packet,
        );
        assert_eq!(
            packet, ping,
            "a tiny ping does not shrink, so it goes out as is"
        );
    }

    #[test]
    fn wrong_key_wrong_label_and_corruption_are_rejected() {
        let mut rng = StdRng::seed_from_u64(2);
        let ours = Framing {
            keyring: Keyring::new(SecretKey::new(&[1; 16]).unwrap(), []),
            label: Label::new("a").unwrap(),
            ..Framing::default()
        };
        let theirs = Framing {
            keyring: Keyring::new(SecretKey::new(&[2; 16]).unwrap(), []),
            ..ours.clone()
        };
        let other_label = Framing {
            label: Label::new("b").unwrap(),
            ..ours.clone()
        };
        let payload = alive(1).to_vec(Transport::Packet);
        let mut packet = Vec::new();
        seal(&theirs, &payload, true, &mut rng, &mut packet);
        assert_eq!(open(&ours, &packet), Err(DecodeError::NoKeyDecrypts));
        packet.clear();
        seal(&other_label, &payload, true, &mut rng, &mut packet);
        assert_eq!(open(&ours, &packet), Err(DecodeError::LabelMismatch));

        let plain = Framing::default();
        packet.clear();
        seal(&plain, &payload, true, &mut rng, &mut packet);
        let last = packet.len() - 1;
        packet[last] ^= 0x40;
        assert!(matches!(
            open(&plain, &packet),
            Err(DecodeError::CrcMismatch { .. })
        ));
        assert_eq!(
            open(&plain, &vec![0; MAX_PACKET + 1]),
            Err(DecodeError::PacketTooLarge {
                len: MAX_PACKET + 1
            })
        );
    }

    #[test]
    fn plaintext_is_accepted_while_incoming_verification_is_off() {
        let keyring = Keyring::new(SecretKey::new(&[1; 16]).unwrap(), []);
        let migrating = Framing {
            keyring: keyring.clone(),
            verify_incoming: false,
            ..Framing::default()
        };
        let strict = Framing {
            keyring,
            ..Framing::default()
        };
        let payload = alive(3).to_vec(Transport::Packet);
        assert_eq!(open(&migrating, &payload).unwrap().messages, vec![alive(3)]);
        assert!(open(&strict, &payload).is_err());
    }

    #[test]
    fn bad_parts_do_not_spoil_good_ones() {
        let good = alive(1).to_vec(Transport::Packet);
        let parts: Vec<&[u8]> = vec![&good, &[99, 1, 2], &[], &[4, 0xc1]];
        let mut payload = Vec::new();
        compound::encode(&parts, &mut payload).unwrap();
        let contents = open(&Framing::default(), &payload).unwrap();
        assert_eq!(contents.messages, vec![alive(1)]);
        assert_eq!(contents.malformed.len(), 3);
    }

    #[test]
    fn nested_compression_is_bounded() {
        let mut payload = alive(1).to_vec(Transport::Packet);
        for _ in 0..8 {
            let mut wrapped = Vec::new();
            compress::encode(&payload, &mut wrapped);
            payload = wrapped;
        }
        let contents = open(&Framing::default(), &payload).unwrap();
        assert!(contents.messages.is_empty());
        assert_eq!(contents.malformed, vec![DecodeError::NestingTooDeep]);
    }

    #[test]
    fn overhead_covers_every_layer() {
        let framing = Framing {
            keyring: Keyring::new(SecretKey::new(&[1; 16]).unwrap(), []),
            encryption_version: EncryptionVersion::V0,
            label: Label::new("abc").unwrap(),
            compress: false,
            ..Framing::default()
        };
        let payload = vec![8u8; 100];
        let mut packet = Vec::new();
        seal(
            &framing,
            &payload,
            true,
            &mut StdRng::seed_from_u64(3),
            &mut packet,
        );
        assert!(packet.len() <= payload.len() + overhead(&framing));
    }
}
