//! `hasCrcMsg` (protocol version 5): `[12][CRC-32/IEEE, big endian][payload]`.

use super::{DecodeError, MessageType};

/// Bytes the CRC layer adds.
pub const OVERHEAD: usize = 5;

/// Appends `payload` with its CRC header.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    out.push(MessageType::HasCrc.into());
    out.extend_from_slice(&crc32fast::hash(payload).to_be_bytes());
    out.extend_from_slice(payload);
}

/// If `packet` carries a CRC header (Go checks only packets of at least 5 bytes that start with
/// 12), verifies it and returns the payload; otherwise returns `packet` unchanged. The flag
/// tells whether a CRC was present.
pub fn strip(packet: &[u8]) -> Result<(&[u8], bool), DecodeError> {
    if packet.len() < OVERHEAD || packet[0] != u8::from(MessageType::HasCrc) {
        return Ok((packet, false));
    }
    let carried = u32::from_be_bytes([packet[1], packet[2], packet[3], packet[4]]);
    let payload = &packet[OVERHEAD..];
    let computed = crc32fast::hash(payload);
    if carried != computed {
        return Err(DecodeError::CrcMismatch { carried, computed });
    }
    Ok((payload, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_and_detects_corruption() {
        let mut out = Vec::new();
        encode(&[3, 3, 3, 3], &mut out);
        assert_eq!(out.len(), 9);
        assert_eq!(strip(&out), Ok((&[3u8, 3, 3, 3][..], true)));
        out[8] ^= 1;
        assert!(matches!(strip(&out), Err(DecodeError::CrcMismatch { .. })));
        assert_eq!(strip(&[12, 0, 0]), Ok((&[12u8, 0, 0][..], false)));
    }
}
