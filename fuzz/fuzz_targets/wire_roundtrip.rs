//! Decode, encode, decode again: whatever the codec accepts, it must write back so that it reads
//! the same thing, and its own encoding must be a fixed point.
//!
//! - `Message::decode_packet` / `decode_stream`: `decode(encode(m)) == m`, the whole encoding
//!   is consumed, and `encode(decode(encode(m))) == encode(m)` byte for byte.
//! - `packet::open` under each framing: every message re-sealed with `packet::seal` (with and
//!   without CRC; alone, and batched into compounds) opens to the same messages.
//! - `stream::open` under each framing, dialer or not: the bytes it says it consumed open to the
//!   same result on their own; re-sealed with `stream::seal` it opens to the same message,
//!   consuming exactly the sealed bytes, and strict prefixes of it are "incomplete".
//! - `compound`, `compress` and LZW: decode then encode then decode is the identity.

#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_fuzz::{FRAMINGS, Named, rng};
use vigil_gossip::wire::packet::Contents;
use vigil_gossip::wire::{
    Framing, Message, StreamLimits, Transport, compound, compress, label, packet, stream,
};

/// Cap for the bare LZW and compress decoders.
const LZW_CAP: usize = 1 << 16;

/// Messages of one packet re-sealed one by one (all of them go through the batched check).
const MAX_SINGLE_RESEALS: usize = 32;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// With `skip_inbound_label_check`, Go expects the transport to have removed the label header
/// already (a label header reaching memberlist is "unexpected"), so strip what `seal` wrote.
fn as_received<'a>(framing: &Framing, sealed: &'a [u8]) -> &'a [u8] {
    if framing.skip_inbound_label_check {
        label::split(sealed).expect("our own label header").1
    } else {
        sealed
    }
}

fn check_packet_message(m: &Message) {
    let enc = m.to_vec(Transport::Packet);
    let again = Message::decode_packet(&enc).unwrap_or_else(|e| {
        panic!(
            "decode_packet(encode(m)) failed: {e:?}\nm = {m:?}\nencoded = {}",
            hex(&enc)
        )
    });
    assert_eq!(
        &again,
        m,
        "packet round trip changed the message; encoded = {}",
        hex(&enc)
    );
    let enc2 = again.to_vec(Transport::Packet);
    assert!(
        enc2 == enc,
        "packet encoding is not a fixed point; m = {m:?}\nfirst  = {}\nsecond = {}",
        hex(&enc),
        hex(&enc2)
    );
}

fn check_stream_message(m: &Message, limits: &StreamLimits) {
    let enc = m.to_vec(Transport::Stream);
    let (again, used) = Message::decode_stream(&enc, limits).unwrap_or_else(|e| {
        panic!(
            "decode_stream(encode(m)) failed: {e:?}\nm = {m:?}\nencoded = {}",
            hex(&enc)
        )
    });
    assert_eq!(
        &again,
        m,
        "stream round trip changed the message; encoded = {}",
        hex(&enc)
    );
    assert_eq!(
        used,
        enc.len(),
        "decode_stream(encode(m)) left bytes; encoded = {}",
        hex(&enc)
    );
    let enc2 = again.to_vec(Transport::Stream);
    assert!(
        enc2 == enc,
        "stream encoding is not a fixed point; m = {m:?}\nfirst  = {}\nsecond = {}",
        hex(&enc),
        hex(&enc2)
    );
}

fn reseal_packet(named: &Named, contents: &Contents) {
    let framing = &named.framing;
    let name = named.name;
    let encrypts = framing.keyring.is_enabled() && framing.verify_outgoing;
    let mut rng = rng();
    for m in &contents.messages {
        check_packet_message(m);
    }
    for crc in [false, true] {
        for m in contents.messages.iter().take(MAX_SINGLE_RESEALS) {
            let payload = m.to_vec(Transport::Packet);
            let mut sealed = Vec::new();
            packet::seal(framing, &payload, crc, &mut rng, &mut sealed);
            if sealed.len() > packet::MAX_PACKET {
                continue; // the caller's budget, not the codec's
            }
            let got = packet::open(framing, as_received(framing, &sealed)).unwrap_or_else(|e| {
                panic!(
                    "{name} crc={crc}: re-sealed packet rejected: {e:?}\nm = {m:?}\nsealed = {}",
                    hex(&sealed)
                )
            });
            assert_eq!(
                got.messages,
                std::slice::from_ref(m),
                "{name} crc={crc}: sealed = {}",
                hex(&sealed)
            );
            assert!(
                got.malformed.is_empty(),
                "{name} crc={crc}: {:?}",
                got.malformed
            );
            assert_eq!(got.truncated_parts, 0, "{name} crc={crc}");
            assert_eq!(got.layers.crc, crc, "{name}");
            assert_eq!(got.layers.encrypted, encrypts, "{name}");
        }

        if contents.messages.len() < 2 {
            continue; // a batch of one goes out bare: just checked above
        }
        let parts: Vec<Vec<u8>> = contents
            .messages
            .iter()
            .map(|m| m.to_vec(Transport::Packet))
            .collect();
        let Ok(batches) = compound::encode_batches(&parts, compound::MAX_PARTS) else {
            continue; // a part over 65,535 bytes cannot go in a compound
        };
        let mut reopened = Vec::new();
        let mut complete = true;
        for batch in &batches {
            let mut sealed = Vec::new();
            packet::seal(framing, batch, crc, &mut rng, &mut sealed);
            if sealed.len() > packet::MAX_PACKET {
                complete = false;
                break;
            }
            let got = packet::open(framing, as_received(framing, &sealed)).unwrap_or_else(|e| {
                panic!(
                    "{name} crc={crc}: re-sealed compound rejected: {e:?}\nsealed = {}",
                    hex(&sealed)
                )
            });
            assert!(
                got.malformed.is_empty(),
                "{name} crc={crc}: {:?}",
                got.malformed
            );
            assert_eq!(got.truncated_parts, 0, "{name} crc={crc}");
            reopened.extend(got.messages);
        }
        if complete {
            assert_eq!(
                reopened, contents.messages,
                "{name} crc={crc}: batched re-seal"
            );
        }
    }
}

fn reseal_stream(named: &Named, data: &[u8], dialer: bool) {
    let framing = &named.framing;
    let name = named.name;
    let Ok(Some(opened)) = stream::open(framing, data, dialer) else {
        return;
    };
    // What the reader said it consumed is enough to read the same thing again.
    assert_eq!(
        stream::open(framing, &data[..opened.consumed], dialer),
        Ok(Some(opened.clone())),
        "{name} dialer={dialer}: the consumed bytes alone read differently"
    );
    let limits = &framing.stream_limits;
    check_stream_message(&opened.message, limits);

    // Skip messages whose re-encoding could brush against the (small) stream caps.
    let size = opened.message.to_vec(Transport::Stream).len();
    if size + 1024
        > limits
            .max_decompressed_bytes
            .min(limits.max_encrypted_bytes)
    {
        return;
    }
    let mut sealed = Vec::new();
    stream::seal(framing, &opened.message, dialer, &mut rng(), &mut sealed);
    let input = if dialer {
        as_received(framing, &sealed)
    } else {
        &sealed[..]
    };
    let got = stream::open(framing, input, dialer)
        .unwrap_or_else(|e| {
            panic!(
                "{name} dialer={dialer}: re-sealed stream rejected: {e:?}\nsealed = {}",
                hex(&sealed)
            )
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} dialer={dialer}: re-sealed stream incomplete\nsealed = {}",
                hex(&sealed)
            )
        });
    assert_eq!(
        got.message,
        opened.message,
        "{name} dialer={dialer}: sealed = {}",
        hex(&sealed)
    );
    assert_eq!(
        got.consumed,
        input.len(),
        "{name} dialer={dialer}: sealed = {}",
        hex(&sealed)
    );
    assert_eq!(
        got.encrypted,
        framing.keyring.is_enabled() && framing.verify_outgoing,
        "{name}"
    );
    assert_eq!(got.compressed, framing.compress, "{name}");
    let mut cuts = [0, 1, input.len() / 2, input.len().saturating_sub(1)];
    cuts.sort_unstable();
    for cut in cuts.into_iter().filter(|&c| c < input.len()) {
        assert_eq!(
            stream::open(framing, &input[..cut], dialer),
            Ok(None),
            "{name} dialer={dialer}: a {cut}-byte prefix of a sealed stream is not 'incomplete'; sealed = {}",
            hex(&sealed)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::decode_packet(data) {
        check_packet_message(&m);
    }
    if let Ok((m, used)) = Message::decode_stream(data, &StreamLimits::default()) {
        assert!(used <= data.len());
        check_stream_message(&m, &StreamLimits::default());
    }

    for named in FRAMINGS.iter() {
        if let Ok(contents) = packet::open(&named.framing, data) {
            reseal_packet(named, &contents);
        }
        for dialer in [true, false] {
            reseal_stream(named, data, dialer);
        }
    }

    let body = data.get(1..).unwrap_or_default();
    for input in [data, body] {
        if let Ok(parts) = compound::decode(input)
            && parts.truncated == 0
        {
            let mut enc = Vec::new();
            compound::encode(&parts.parts, &mut enc).expect("decoded parts fit a compound");
            assert!(
                enc[1..] == input[..enc.len() - 1],
                "compound re-encoding differs: {}",
                hex(&enc)
            );
        }
        if let Ok(plain) = compress::lzw_decompress(input, LZW_CAP) {
            let packed = compress::lzw_compress(&plain);
            assert_eq!(
                compress::lzw_decompress(&packed, LZW_CAP).as_deref(),
                Ok(&plain[..]),
                "LZW round trip; packed = {}",
                hex(&packed)
            );
        }
        if let Ok((inner, _)) = compress::decode(input, LZW_CAP) {
            let mut enc = Vec::new();
            compress::encode(&inner, &mut enc);
            assert_eq!(
                compress::decode(&enc[1..], LZW_CAP),
                Ok((inner, enc.len() - 1)),
                "compress round trip; encoded = {}",
                hex(&enc)
            );
        }
    }
});
