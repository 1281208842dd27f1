//! `compressMsg`: LZW as Go's `compress/lzw` writes it (LSB bit order, 8-bit literals, a clear
//! code first and the end code last), wrapped in a msgpack `compress{Algo, Buf}`.

use super::DecodeError;
use super::message::Compress;
use weezl::{BitOrder, LzwStatus};

/// The only algorithm memberlist defines.
pub const LZW: u8 = 0;

/// Cap on what one UDP packet may decompress to. A legitimate sender compresses a payload it
/// built for a single datagram, so 1 MiB is generous and bounds a bomb's memory.
pub const MAX_PACKET_DECOMPRESSED: usize = 1 << 20;

/// LZW-compresses `data` into a raw stream (no msgpack wrapping).
pub fn lzw_compress(data: &[u8]) -> Vec<u8> {
    weezl::encode::Encoder::new(BitOrder::Lsb, 8)
        .encode(data)
        .expect("weezl's encoder only fails on invalid configuration")
}

/// Decompresses a raw LZW stream, producing at most `limit` bytes. Streams without the end
/// code are rejected, as Go's reader rejects them.
pub fn lzw_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = weezl::decode::Decoder::new(BitOrder::Lsb, 8);
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut input = data;
    loop {
        let result = decoder.decode_bytes(input, &mut chunk);
        input = &input[result.consumed_in..];
        if out.len() + result.consumed_out > limit {
            return Err(DecodeError::DecompressedTooLarge { limit });
        }
        out.extend_from_slice(&chunk[..result.consumed_out]);
        match result.status {
            Ok(LzwStatus::Done) => return Ok(out),
            Ok(LzwStatus::Ok) => {}
            Ok(LzwStatus::NoProgress) | Err(_) => return Err(DecodeError::BadLzw),
        }
    }
}

/// Appends `[9][msgpack compress{Algo: 0, Buf: lzw(payload)}]`.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) {
    Compress {
        algo: LZW,
        buf: lzw_compress(payload),
    }
    .encode(out);
}

/// Decompresses the body that follows a `compressMsg` type byte. Returns the inner message
/// (type byte first) and how many body bytes the msgpack value used.
pub fn decode(body: &[u8], limit: usize) -> Result<(Vec<u8>, usize), DecodeError> {
    let (c, used) = Compress::decode_body(body)?;
    if c.algo != LZW {
        return Err(DecodeError::UnknownCompression(c.algo));
    }
    let inner = lzw_decompress(&c.buf, limit)?;
    if inner.is_empty() {
        return Err(DecodeError::DecompressedEmpty);
    }
    Ok((inner, used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_gos_lzw_vector() {
        // Go: lzw.NewWriter(buf, lzw.LSB, 8) of "testing" (research note, section 9.2).
        assert_eq!(
            lzw_compress(b"testing"),
            hex::decode("00e9949943278d9b330101").unwrap()
        );
        let mut out = Vec::new();
        encode(b"testing", &mut out);
        assert_eq!(
            out,
            hex::decode("0982a4416c676f00a3427566ab00e9949943278d9b330101").unwrap()
        );
        assert_eq!(decode(&out[1..], 100).unwrap().0, b"testing");
    }

    #[test]
    fn bombs_stop_at_the_cap() {
        let zeros = vec![0u8; 10 << 20];
        let bomb = lzw_compress(&zeros);
        assert!(bomb.len() < zeros.len() / 50);
        assert_eq!(
            lzw_decompress(&bomb, 1 << 20),
            Err(DecodeError::DecompressedTooLarge { limit: 1 << 20 })
        );
        assert_eq!(lzw_decompress(&bomb, 10 << 20).unwrap().len(), 10 << 20);
    }

    #[test]
    fn missing_end_code_and_garbage_are_rejected() {
        let good = lzw_compress(b"hello hello hello");
        assert_eq!(
            lzw_decompress(&good[..good.len() - 2], 1000),
            Err(DecodeError::BadLzw)
        );
        assert!(lzw_decompress(&[0xff; 64], 1000).is_err());
        let empty = lzw_compress(b"");
        let mut msg = Vec::new();
        Compress {
            algo: LZW,
            buf: empty,
        }
        .encode(&mut msg);
        assert_eq!(decode(&msg[1..], 10), Err(DecodeError::DecompressedEmpty));
        let mut other = Vec::new();
        Compress {
            algo: 1,
            buf: vec![],
        }
        .encode(&mut other);
        assert_eq!(
            decode(&other[1..], 10),
            Err(DecodeError::UnknownCompression(1))
        );
    }
}
