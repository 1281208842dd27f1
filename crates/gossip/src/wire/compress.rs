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

/// LZW-compresses `data` into a raw stream (no msgpack wrapping), byte for byte as Go's
/// `compress/lzw` writer does.
///
/// Go's writer differs from other LZW encoders in one place that shows on the wire: it resets
/// the dictionary (sending a clear code) as soon as the next free code would be 4095, one code
/// earlier than a 12-bit table strictly needs. We follow it so that our compressed output is
/// identical to Go's.
pub fn lzw_compress(data: &[u8]) -> Vec<u8> {
    // The dictionary is reused across calls on a thread: compressing small packets must not
    // cost a fresh 64 KiB table each time.
    thread_local! {
        static TABLE: core::cell::RefCell<LzwTable> = core::cell::RefCell::new(LzwTable::new());
    }
    TABLE.with(|table| match table.try_borrow_mut() {
        Ok(mut table) => compress_with(data, &mut table),
        Err(_) => compress_with(data, &mut LzwTable::new()),
    })
}

fn compress_with(data: &[u8], table: &mut LzwTable) -> Vec<u8> {
    table.clear();
    let mut encoder = LzwEncoder::new(data.len(), table);
    encoder.write(CLEAR);
    let mut bytes = data.iter();
    if let Some(&first) = bytes.next() {
        let mut prefix = u16::from(first);
        for &byte in bytes {
            if let Some(code) = encoder.table.get(prefix, byte) {
                prefix = code;
                continue;
            }
            encoder.write(prefix);
            if encoder.next_code_or_reset() {
                encoder.table.insert(prefix, byte, encoder.hi);
            }
            prefix = u16::from(byte);
        }
        encoder.write(prefix);
        encoder.next_code_or_reset();
    }
    encoder.write(END);
    encoder.finish()
}

const CLEAR: u16 = 256;
const END: u16 = 257;
/// Go resets when its highest assigned code reaches this value.
const RESET_AT: u16 = 4095;

struct LzwEncoder<'t> {
    out: Vec<u8>,
    bits: u32,
    nbits: u32,
    width: u32,
    /// The highest code assigned so far (257 = END right after a reset).
    hi: u16,
    table: &'t mut LzwTable,
}

impl<'t> LzwEncoder<'t> {
    fn new(input_len: usize, table: &'t mut LzwTable) -> Self {
        Self {
            out: Vec::with_capacity(input_len / 2 + 8),
            bits: 0,
            nbits: 0,
            width: 9,
            hi: END,
            table,
        }
    }

    /// Emits a code at the current width, least significant bit first.
    fn write(&mut self, code: u16) {
        self.bits |= u32::from(code) << self.nbits;
        self.nbits += self.width;
        while self.nbits >= 8 {
            self.out.push(self.bits as u8);
            self.bits >>= 8;
            self.nbits -= 8;
        }
    }

    /// Takes the next code; widens codes when it needs another bit, and resets the dictionary
    /// (returning false) when the table is full.
    fn next_code_or_reset(&mut self) -> bool {
        self.hi += 1;
        if u32::from(self.hi) == 1 << self.width {
            self.width += 1;
        }
        if self.hi == RESET_AT {
            self.write(CLEAR);
            self.width = 9;
            self.hi = END;
            self.table.clear();
            return false;
        }
        true
    }

    fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            self.out.push(self.bits as u8);
        }
        self.out
    }
}

/// The dictionary: (prefix code, next byte) -> code, in an open-addressed table big enough
/// that it never fills (at most 4095 - 258 entries live at once). Each slot carries the
/// generation it was written in, so clearing is a counter bump, not a memset.
struct LzwTable {
    slots: Vec<u64>,
    generation: u32,
}

impl LzwTable {
    const SLOTS: usize = 1 << 13;

    fn new() -> Self {
        Self {
            slots: vec![0; Self::SLOTS],
            generation: 0,
        }
    }

    fn clear(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // Wrapped: old stamps could look current again.
            self.slots.fill(0);
            self.generation = 1;
        }
    }

    fn key(prefix: u16, byte: u8) -> u32 {
        (u32::from(prefix) << 8) | u32::from(byte)
    }

    fn start(key: u32) -> usize {
        (key.wrapping_mul(0x9E37_79B1) >> 19) as usize & (Self::SLOTS - 1)
    }

    /// A live slot: generation in the high half, then key (20 bits) and code (12 bits).
    fn live(&self, slot: u64) -> Option<u32> {
        ((slot >> 32) as u32 == self.generation).then_some(slot as u32)
    }

    fn get(&self, prefix: u16, byte: u8) -> Option<u16> {
        let key = Self::key(prefix, byte);
        let mut i = Self::start(key);
        loop {
            let entry = self.live(self.slots[i])?;
            if entry >> 12 == key {
                return Some((entry & 0xfff) as u16);
            }
            i = (i + 1) & (Self::SLOTS - 1);
        }
    }

    fn insert(&mut self, prefix: u16, byte: u8, code: u16) {
        let key = Self::key(prefix, byte);
        let mut i = Self::start(key);
        while self.live(self.slots[i]).is_some() {
            i = (i + 1) & (Self::SLOTS - 1);
        }
        self.slots[i] =
            (u64::from(self.generation) << 32) | u64::from((key << 12) | u32::from(code));
    }
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
    fn round_trips_through_many_dictionary_resets() {
        let mut x = 0x1234_5678u32;
        let noisy: Vec<u8> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x % 7) as u8 * 37
            })
            .collect();
        for data in [&b""[..], b"a", b"aaaaaaaaaaaaaaaaaaaaaaaaa", &noisy] {
            let packed = lzw_compress(data);
            assert_eq!(lzw_decompress(&packed, usize::MAX).unwrap(), data);
        }
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
