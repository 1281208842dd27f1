//! `compoundMsg`: several messages in one UDP packet.
//!
//! Layout after the type byte: `[count: u8][len_1: u16 BE] … [len_n: u16 BE][msg_1] … [msg_n]`.

use super::{DecodeError, EncodeError, MessageType};

/// Most parts one compound can carry (the count is a byte). memberlist before 0.3.2 wrote
/// `uint8(len)` for larger batches and corrupted them (hashicorp/memberlist#239); we split.
pub const MAX_PARTS: usize = 255;

/// Bytes of framing a compound adds: the type byte and the count.
pub const HEADER_OVERHEAD: usize = 2;

/// Bytes of framing each part adds: its length.
pub const PART_OVERHEAD: usize = 2;

/// Appends one compound message holding `parts`.
pub fn encode<P: AsRef<[u8]>>(parts: &[P], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let count = u8::try_from(parts.len()).map_err(|_| EncodeError::TooManyParts(parts.len()))?;
    out.push(MessageType::Compound.into());
    out.push(count);
    for part in parts {
        let len = part.as_ref().len();
        let len = u16::try_from(len).map_err(|_| EncodeError::PartTooLong(len))?;
        out.extend_from_slice(&len.to_be_bytes());
    }
    for part in parts {
        out.extend_from_slice(part.as_ref());
    }
    Ok(())
}

/// Packs `parts` into as few compounds as `max_parts` allows, one packet each; a single message
/// goes out bare, as Go does. Choose `max_parts <= 127` to stay readable by memberlist 0.2.2,
/// whose decoder computes `count * 2` in a byte.
pub fn encode_batches<P: AsRef<[u8]>>(
    parts: &[P],
    max_parts: usize,
) -> Result<Vec<Vec<u8>>, EncodeError> {
    let max_parts = max_parts.clamp(1, MAX_PARTS);
    parts
        .chunks(max_parts)
        .map(|chunk| {
            if let [single] = chunk {
                return Ok(single.as_ref().to_vec());
            }
            let mut out = Vec::new();
            encode(chunk, &mut out)?;
            Ok(out)
        })
        .collect()
}

/// The parts of a decoded compound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Complete parts in order.
    pub parts: Vec<&'a [u8]>,
    /// Parts whose declared length ran past the end of the packet; Go counts and drops them
    /// while keeping the earlier parts.
    pub truncated: usize,
}

/// Splits the body of a compound (the bytes after its type byte).
pub fn decode(body: &[u8]) -> Result<Parts<'_>, DecodeError> {
    let (&count, rest) = body.split_first().ok_or(DecodeError::Truncated)?;
    let count = usize::from(count);
    if rest.len() < 2 * count {
        return Err(DecodeError::CompoundLengthsTruncated);
    }
    let (lengths, mut data) = rest.split_at(2 * count);
    let mut parts = Vec::with_capacity(count);
    for (i, len) in lengths.chunks_exact(2).enumerate() {
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if data.len() < len {
            return Ok(Parts {
                parts,
                truncated: count - i,
            });
        }
        let (part, tail) = data.split_at(len);
        parts.push(part);
        data = tail;
    }
    Ok(Parts {
        parts,
        truncated: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reports_truncated_parts() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defgh"];
        let mut out = Vec::new();
        encode(&parts, &mut out).unwrap();
        assert_eq!(&out[..2], &[7, 3]);
        assert_eq!(out.len(), HEADER_OVERHEAD + 3 * PART_OVERHEAD + 8);
        let decoded = decode(&out[1..]).unwrap();
        assert_eq!(decoded.parts, parts.to_vec());
        assert_eq!(decoded.truncated, 0);

        let cut = decode(&out[1..out.len() - 1]).unwrap();
        assert_eq!(cut.parts, parts[..2].to_vec());
        assert_eq!(cut.truncated, 1);
    }

    #[test]
    fn absurd_counts_are_rejected_without_allocating() {
        assert_eq!(decode(&[0x80]), Err(DecodeError::CompoundLengthsTruncated));
        assert_eq!(
            decode(&[0xff, 0, 1]),
            Err(DecodeError::CompoundLengthsTruncated)
        );
        assert_eq!(decode(&[]), Err(DecodeError::Truncated));
    }

    #[test]
    fn more_than_255_messages_are_split_not_corrupted() {
        let msgs: Vec<Vec<u8>> = (0..600u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let batches = encode_batches(&msgs, MAX_PARTS).unwrap();
        assert_eq!(batches.len(), 3);
        let mut seen = Vec::new();
        for b in &batches {
            seen.extend(decode(&b[1..]).unwrap().parts.iter().map(|p| p.to_vec()));
        }
        assert_eq!(seen, msgs);
        let single = encode_batches(&msgs[..1], MAX_PARTS).unwrap();
        assert_eq!(single, vec![msgs[0].clone()], "one message goes out bare");
        assert_eq!(
            encode(&vec![[0u8]; 256], &mut Vec::new()),
            Err(EncodeError::TooManyParts(256))
        );
    }
}
