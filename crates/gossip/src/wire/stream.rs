//! TCP streams: one request or reply per connection, in Go's layers.
//!
//! The dialer writes `[label header]` once; then either the plain message, or the message
//! compressed (`[9][compress]`, always when compression is on), and either of those encrypted
//! as `[10][length: u32 BE][encrypted]` with the five header bytes (and the label) as
//! additional data. Plain and compressed streams carry no length prefix, so the reader parses
//! as bytes arrive; [`open`] says `None` until it has a whole message.

use super::message::Transport;
use super::{DecodeError, Framing, Message, MessageType, compress, crypto, label};
use rand_core::CryptoRngCore;

/// Header of an encrypted stream: type byte and length.
const ENCRYPT_HEADER: usize = 5;

/// A message read off a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The message.
    pub message: Message,
    /// Bytes of the stream it used, label header included.
    pub consumed: usize,
    /// Whether it was encrypted.
    pub encrypted: bool,
    /// Whether it was compressed.
    pub compressed: bool,
}

/// Writes `message` as a stream. The dialer of a connection writes the label header; the side
/// that accepted it replies without one.
pub fn seal(
    framing: &Framing,
    message: &Message,
    dialer: bool,
    rng: &mut impl CryptoRngCore,
    out: &mut Vec<u8>,
) {
    let mut body = message.to_vec(Transport::Stream);
    if framing.compress {
        let mut compressed = Vec::new();
        compress::encode(&body, &mut compressed);
        body = compressed;
    }
    if dialer {
        framing.label.write_header(out);
    }
    match framing.keyring.primary() {
        Some(key) if framing.verify_outgoing => {
            let version = framing.encryption_version;
            let len = version.encrypted_len(body.len()) as u32;
            let start = out.len();
            out.push(MessageType::Encrypt.into());
            out.extend_from_slice(&len.to_be_bytes());
            let mut aad = out[start..].to_vec();
            aad.extend_from_slice(framing.label.as_bytes());
            let mut nonce = [0u8; 12];
            rng.fill_bytes(&mut nonce);
            crypto::encrypt_with_nonce(version, key, &nonce, &body, &aad, out);
        }
        _ => out.extend_from_slice(&body),
    }
}

/// Reads one message from the bytes of a stream received so far. `from_dialer` is true on the
/// accepting side, where a label header may lead. `Ok(None)` means "incomplete: read more";
/// once the peer has closed, `None` means the stream was truncated.
pub fn open(
    framing: &Framing,
    buf: &[u8],
    from_dialer: bool,
) -> Result<Option<Opened>, DecodeError> {
    if buf.is_empty() {
        return Ok(None);
    }
    let (received_label, rest) = if from_dialer {
        match label::split(buf) {
            Err(DecodeError::Truncated) => return Ok(None),
            other => other?,
        }
    } else {
        (None, buf)
    };
    if from_dialer {
        label::check(
            received_label,
            &framing.label,
            framing.skip_inbound_label_check,
        )?;
    }
    let label_len = buf.len() - rest.len();
    let Some(&ty) = rest.first() else {
        return Ok(None);
    };

    if ty == u8::from(MessageType::Encrypt) {
        if rest.len() < ENCRYPT_HEADER {
            return Ok(None);
        }
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if len > framing.stream_limits.max_encrypted_bytes {
            return Err(DecodeError::StreamLimit {
                field: "encrypted length",
                value: len as i64,
            });
        }
        if rest.len() < ENCRYPT_HEADER + len {
            return Ok(None);
        }
        let mut aad = rest[..ENCRYPT_HEADER].to_vec();
        aad.extend_from_slice(framing.label.as_bytes());
        let plain = framing
            .keyring
            .decrypt(&rest[ENCRYPT_HEADER..ENCRYPT_HEADER + len], &aad)?;
        let (message, compressed) = open_complete(framing, &plain)?;
        return Ok(Some(Opened {
            message,
            consumed: label_len + ENCRYPT_HEADER + len,
            encrypted: true,
            compressed,
        }));
    }
    if framing.keyring.is_enabled() && framing.verify_incoming {
        return Err(DecodeError::EncryptionMismatch);
    }
    let limits = &framing.stream_limits;
    let (message, used, compressed) = if ty == u8::from(MessageType::Compress) {
        let (inner, used) = match compress::decode(&rest[1..], limits.max_decompressed_bytes) {
            Err(DecodeError::Truncated) => return Ok(None),
            other => other?,
        };
        let (message, _) = Message::decode_stream(&inner, limits)?;
        (message, 1 + used, true)
    } else {
        match Message::decode_stream(rest, limits) {
            Err(DecodeError::Truncated) => return Ok(None),
            other => {
                let (message, used) = other?;
                (message, used, false)
            }
        }
    };
    Ok(Some(Opened {
        message,
        consumed: label_len + used,
        encrypted: false,
        compressed,
    }))
}

/// Decodes a message whose bytes are all present (the plaintext of an encrypted stream).
fn open_complete(framing: &Framing, plain: &[u8]) -> Result<(Message, bool), DecodeError> {
    let limits = &framing.stream_limits;
    match plain.first() {
        None => Err(DecodeError::Empty),
        Some(&t) if t == u8::from(MessageType::Compress) => {
            let (inner, _) = compress::decode(&plain[1..], limits.max_decompressed_bytes)?;
            Ok((Message::decode_stream(&inner, limits)?.0, true))
        }
        Some(_) => Ok((Message::decode_stream(plain, limits)?.0, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        Ack, EncryptionVersion, Keyring, Label, NodeState, Ping, PushNodeState, PushPull, SecretKey,
    };
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn push_pull(n: usize) -> Message {
        Message::PushPull(PushPull {
            join: true,
            states: (0..n)
                .map(|i| PushNodeState {
                    name: format!("node-{i}"),
                    addr: Some(vec![198, 18, (i >> 8) as u8, i as u8]),
                    port: 7946,
                    meta: Some(b"zone=a".to_vec()),
                    incarnation: i as u32,
                    state: NodeState::Alive,
                    vsn: Some(vec![1, 5, 2, 0, 0, 0]),
                })
                .collect(),
            user_state: b"user".to_vec(),
        })
    }

    #[test]
    fn round_trips_byte_by_byte_in_every_form() {
        let key = SecretKey::new(&[9; 24]).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        for compress in [false, true] {
            for keys in [false, true] {
                for version in [EncryptionVersion::V0, EncryptionVersion::V1] {
                    for label in ["", "lbl"] {
                        let framing = Framing {
                            compress,
                            keyring: if keys {
                                Keyring::new(key.clone(), [])
                            } else {
                                Keyring::default()
                            },
                            encryption_version: version,
                            label: Label::new(label).unwrap(),
                            ..Framing::default()
                        };
                        for msg in [
                            push_pull(50),
                            Message::User(b"hi".to_vec()),
                            Message::Ping(Ping::default()),
                        ] {
                            let mut bytes = Vec::new();
                            seal(&framing, &msg, true, &mut rng, &mut bytes);
                            // Feed it a byte at a time: None until complete, then the message.
                            for cut in 0..bytes.len() {
                                assert_eq!(
                                    open(&framing, &bytes[..cut], true),
                                    Ok(None),
                                    "cut {cut}"
                                );
                            }
                            let opened = open(&framing, &bytes, true).unwrap().unwrap();
                            assert_eq!(opened.message, msg);
                            assert_eq!(opened.consumed, bytes.len());
                            assert_eq!(opened.encrypted, keys);
                            assert_eq!(opened.compressed, compress);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn replies_carry_no_label() {
        let framing = Framing {
            label: Label::new("lbl").unwrap(),
            ..Framing::default()
        };
        let ack = Message::Ack(Ack {
            seq_no: 3,
            payload: None,
        });
        let mut bytes = Vec::new();
        seal(
            &framing,
            &ack,
            false,
            &mut StdRng::seed_from_u64(1),
            &mut bytes,
        );
        assert_ne!(bytes[0], 244);
        assert_eq!(open(&framing, &bytes, false).unwrap().unwrap().message, ack);
        assert_eq!(
            open(&framing, &bytes, true),
            Err(DecodeError::LabelMismatch)
        );
    }

    #[test]
    fn plaintext_is_refused_when_encryption_is_required() {
        let framing = Framing {
            keyring: Keyring::new(SecretKey::new(&[1; 16]).unwrap(), []),
            ..Framing::default()
        };
        let plain = Message::Ping(Ping::default()).to_vec(Transport::Stream);
        assert_eq!(
            open(&framing, &plain, true),
            Err(DecodeError::EncryptionMismatch)
        );
    }

    #[test]
    fn oversized_encrypted_lengths_are_refused_before_reading() {
        let framing = Framing {
            keyring: Keyring::new(SecretKey::new(&[1; 16]).unwrap(), []),
            ..Framing::default()
        };
        assert!(matches!(
            open(&framing, &[10, 0xff, 0xff, 0xff, 0xff], true),
            Err(DecodeError::StreamLimit { .. })
        ));
    }
}
