//! Decode anything, never panic: every decoder in `vigil_gossip::wire` gets the raw input.
//!
//! Besides "no panic, no hang, no runaway allocation", it checks the few invariants a caller
//! relies on: a stream never claims more bytes than it was given, and a packet's layers agree
//! with what it held.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_fuzz::{FRAMINGS, SMALL_LIMITS};
use vigil_gossip::wire::{Message, StreamLimits, compound, compress, crc, label, packet, stream};

/// Cap for the bare LZW and compress decoders: big enough for any sensible packet.
const LZW_CAP: usize = 1 << 16;

/// How many back-to-back stream messages to read from one input.
const MAX_STREAM_MESSAGES: usize = 8;

fuzz_target!(|data: &[u8]| {
    for named in FRAMINGS.iter() {
        let framing = &named.framing;

        if let Ok(contents) = packet::open(framing, data) {
            if contents.layers.encrypted {
                assert!(framing.keyring.is_enabled(), "{}", named.name);
            }
            if contents.layers.label {
                assert!(!framing.skip_inbound_label_check, "{}", named.name);
            }
        }

        for from_dialer in [true, false] {
            let mut rest = data;
            let mut dialer = from_dialer;
            for _ in 0..MAX_STREAM_MESSAGES {
                let Ok(Some(opened)) = stream::open(framing, rest, dialer) else {
                    break;
                };
                assert!(
                    opened.consumed > 0 && opened.consumed <= rest.len(),
                    "{}: consumed {} of {}",
                    named.name,
                    opened.consumed,
                    rest.len()
                );
                rest = &rest[opened.consumed..];
                // Only the first message of a connection carries the label.
                dialer = false;
            }
        }
    }

    let _ = Message::decode_packet(data);
    for limits in [StreamLimits::default(), SMALL_LIMITS] {
        if let Ok((_, used)) = Message::decode_stream(data, &limits) {
            assert!(
                used > 0 && used <= data.len(),
                "decode_stream used {used} of {}",
                data.len()
            );
        }
    }

    // The framing layers on their own, both on the raw input and on the bytes after a type byte
    // (which is how the packet and stream code call them).
    let body = data.get(1..).unwrap_or_default();
    for input in [data, body] {
        if let Ok(parts) = compound::decode(input) {
            assert!(parts.parts.len() + parts.truncated <= 255);
            let total: usize = parts.parts.iter().map(|p| p.len()).sum();
            assert!(total <= input.len());
        }
        if let Ok(out) = compress::lzw_decompress(input, LZW_CAP) {
            assert!(out.len() <= LZW_CAP);
        }
        if let Ok((out, used)) = compress::decode(input, LZW_CAP) {
            assert!(!out.is_empty() && out.len() <= LZW_CAP);
            assert!(used <= input.len());
        }
        let _ = crc::strip(input);
        let _ = label::split(input);
    }
});
