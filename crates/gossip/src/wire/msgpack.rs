//! The subset of MessagePack that memberlist speaks, written the way Go writes it and read the
//! way Go reads it.
//!
//! Writing follows go-msgpack 0.5.x with a zero-value `MsgpackHandle` (what Debian's memberlist
//! 0.2.2 links against): strings and byte slices both use the old "raw" family (fixstr, `0xda`
//! str16, `0xdb` str32; never str8, never bin), unsigned integers take their smallest unsigned
//! form, and non-negative signed integers are written as unsigned. Go's decoders of both
//! go-msgpack generations accept all of this.
//!
//! Reading is lenient like Go's decoders: str, bin and arrays of small integers are all accepted
//! where bytes are expected, any integer width or signedness is accepted as long as the value
//! fits, nil reads as the zero value, and values we do not know are skipped.

use super::DecodeError;

/// Nesting depth at which [`Reader::skip_value`] gives up, so that hostile input cannot exhaust
/// the stack. memberlist's own structures are at most two levels deep.
const MAX_SKIP_DEPTH: usize = 16;

// ---- writing -------------------------------------------------------------------------------

/// Appends a map header for `len` entries.
pub(crate) fn write_map_len(out: &mut Vec<u8>, len: usize) {
    if len < 16 {
        out.push(0x80 | len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        out.push(0xde);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0xdf);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// Appends a raw (str-family) value, as Go writes both `string` and `[]byte`.
pub(crate) fn write_raw(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        out.push(0xda);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(bytes);
}

/// Appends a Go `[]byte`: nil when absent, a raw value otherwise.
pub(crate) fn write_opt_raw(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.push(0xc0),
        Some(b) => write_raw(out, b),
    }
}

/// Appends an unsigned integer in its smallest form.
pub(crate) fn write_uint(out: &mut Vec<u8>, v: u64) {
    if v < 128 {
        out.push(v as u8);
    } else if let Ok(v) = u8::try_from(v) {
        out.extend_from_slice(&[0xcc, v]);
    } else if let Ok(v) = u16::try_from(v) {
        out.push(0xcd);
        out.extend_from_slice(&v.to_be_bytes());
    } else if let Ok(v) = u32::try_from(v) {
        out.push(0xce);
        out.extend_from_slice(&v.to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a Go `int` the way go-msgpack 0.5.x does: non-negative values as unsigned, negative
/// values in the smallest signed form.
pub(crate) fn write_int(out: &mut Vec<u8>, v: i64) {
    if v >= 0 {
        write_uint(out, v as u64);
    } else if v >= -32 {
        out.push(v as i8 as u8);
    } else if let Ok(v) = i8::try_from(v) {
        out.extend_from_slice(&[0xd0, v as u8]);
    } else if let Ok(v) = i16::try_from(v) {
        out.push(0xd1);
        out.extend_from_slice(&v.to_be_bytes());
    } else if let Ok(v) = i32::try_from(v) {
        out.push(0xd2);
        out.extend_from_slice(&v.to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a boolean.
pub(crate) fn write_bool(out: &mut Vec<u8>, v: bool) {
    out.push(if v { 0xc3 } else { 0xc2 });
}

/// Appends a map key (a field name).
pub(crate) fn write_key(out: &mut Vec<u8>, name: &str) {
    write_raw(out, name.as_bytes());
}

// ---- reading -------------------------------------------------------------------------------

/// How a struct was laid out on the wire. Go writes maps; it also reads arrays in field
/// declaration order, so we do too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    Map(usize),
    Array(usize),
}

/// A cursor over borrowed bytes. Every read checks its length against what is left, so a
/// declared length can never make us allocate more than the input holds.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn peek(&self) -> Result<u8, DecodeError> {
        self.buf
            .get(self.pos)
            .copied()
            .ok_or(DecodeError::Truncated)
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// Reads a count of elements that each take at least one byte; a count larger than the
    /// remaining input is malformed, which bounds every allocation by the input size.
    fn count(&mut self, n: u64) -> Result<usize, DecodeError> {
        let n = usize::try_from(n).map_err(|_| DecodeError::Truncated)?;
        if n > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        Ok(n)
    }

    /// Reads a map or array header.
    pub(crate) fn container(&mut self) -> Result<Container, DecodeError> {
        let b = self.byte()?;
        Ok(match b {
            0x80..=0x8f => Container::Map(usize::from(b & 0x0f)),
            0x90..=0x9f => Container::Array(usize::from(b & 0x0f)),
            0xde => Container::Map({
                let n = self.be(2)?;
                self.count(n)?
            }),
            0xdf => Container::Map({
                let n = self.be(4)?;
                self.count(n)?
            }),
            0xdc => Container::Array({
                let n = self.be(2)?;
                self.count(n)?
            }),
            0xdd => Container::Array({
                let n = self.be(4)?;
                self.count(n)?
            }),
            _ => {
                return Err(DecodeError::WrongType {
                    expected: "map",
                    found: b,
                });
            }
        })
    }

    /// Reads a str or bin value as bytes; `None` for nil.
    fn raw_or_nil(&mut self, expected: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let b = self.byte()?;
        let len = match b {
            0xc0 => return Ok(None),
            0xa0..=0xbf => u64::from(b & 0x1f),
            0xd9 | 0xc4 => self.be(1)?,
            0xda | 0xc5 => self.be(2)?,
            0xdb | 0xc6 => self.be(4)?,
            _ => {
                self.pos -= 1;
                return Err(DecodeError::WrongType { expected, found: b });
            }
        };
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated)?;
        self.take(len).map(Some)
    }

    /// Reads a map key. Go accepts str and bin keys.
    pub(crate) fn key(&mut self) -> Result<&'a [u8], DecodeError> {
        Ok(self.raw_or_nil("string key")?.unwrap_or_default())
    }

    /// Reads a Go `[]byte`: str, bin, an array of integers 0..=255, or nil (`None`).
    pub(crate) fn bytes(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        match self.peek()? {
            0x90..=0x9f | 0xdc | 0xdd => {
                let Container::Array(n) = self.container()? else {
                    unreachable!("peeked an array header")
                };
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let x = self.uint()?;
                    v.push(u8::try_from(x).map_err(|_| DecodeError::IntOutOfRange)?);
                }
                Ok(Some(v))
            }
            _ => Ok(self.raw_or_nil("bytes")?.map(<[u8]>::to_vec)),
        }
    }

    /// Reads a Go `string`: str or bin (newer Go accepts bin), nil as "". Names must be UTF-8
    /// here; Go would accept any bytes (documented in `compat`).
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let raw = self.raw_or_nil("string")?.unwrap_or_default();
        String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::InvalidUtf8)
    }

    /// Reads any integer (or nil as 0) as a signed 64-bit value.
    pub(crate) fn int(&mut self) -> Result<i64, DecodeError> {
        let b = self.byte()?;
        Ok(match b {
            0x00..=0x7f => i64::from(b),
            0xe0..=0xff => i64::from(b as i8),
            0xc0 => 0,
            0xcc => self.be(1)? as i64,
            0xcd => self.be(2)? as i64,
            0xce => self.be(4)? as i64,
            0xcf => i64::try_from(self.be(8)?).map_err(|_| DecodeError::IntOutOfRange)?,
            0xd0 => i64::from(self.be(1)? as u8 as i8),
            0xd1 => i64::from(self.be(2)? as u16 as i16),
            0xd2 => i64::from(self.be(4)? as u32 as i32),
            0xd3 => self.be(8)? as i64,
            _ => {
                self.pos -= 1;
                return Err(DecodeError::WrongType {
                    expected: "integer",
                    found: b,
                });
            }
        })
    }

    /// Reads any non-negative integer (or nil as 0).
    pub(crate) fn uint(&mut self) -> Result<u64, DecodeError> {
        if self.peek()? == 0xcf {
            self.pos += 1;
            return self.be(8);
        }
        u64::try_from(self.int()?).map_err(|_| DecodeError::IntOutOfRange)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.uint()?).map_err(|_| DecodeError::IntOutOfRange)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        u16::try_from(self.uint()?).map_err(|_| DecodeError::IntOutOfRange)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        u8::try_from(self.uint()?).map_err(|_| DecodeError::IntOutOfRange)
    }

    /// Reads a bool (nil as false).
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        let b = self.byte()?;
        match b {
            0xc2 | 0xc0 => Ok(false),
            0xc3 => Ok(true),
            _ => {
                self.pos -= 1;
                Err(DecodeError::WrongType {
                    expected: "bool",
                    found: b,
                })
            }
        }
    }

    /// Skips one value of any type, as Go does for map keys it does not know.
    pub(crate) fn skip_value(&mut self) -> Result<(), DecodeError> {
        self.skip_at_depth(0)
    }

    fn skip_at_depth(&mut self, depth: usize) -> Result<(), DecodeError> {
        if depth > MAX_SKIP_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        let b = self.byte()?;
        let (skip, items): (u64, u64) = match b {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(b & 0x0f)),
            0x90..=0x9f => (0, u64::from(b & 0x0f)),
            0xa0..=0xbf => (u64::from(b & 0x1f), 0),
            0xc4 | 0xd9 => (self.be(1)?, 0),
            0xc5 | 0xda => (self.be(2)?, 0),
            0xc6 | 0xdb => (self.be(4)?, 0),
            0xc7 => (self.be(1)? + 1, 0),
            0xc8 => (self.be(2)? + 1, 0),
            0xc9 => (self.be(4)? + 1, 0),
            0xca => (4, 0),
            0xcb => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xce | 0xd2 => (4, 0),
            0xcf | 0xd3 => (8, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (0, self.be(2)?),
            0xdd => (0, self.be(4)?),
            0xde => (0, 2 * self.be(2)?),
            0xdf => (0, 2 * self.be(4)?),
            0xc1 => {
                return Err(DecodeError::WrongType {
                    expected: "any value",
                    found: b,
                });
            }
        };
        let skip = usize::try_from(skip).map_err(|_| DecodeError::Truncated)?;
        self.take(skip)?;
        let items = self.count(items)?;
        for _ in 0..items {
            self.skip_at_depth(depth + 1)?;
        }
        Ok(())
    }

    /// Reads a one-field struct (`nackResp`, `errResp`, `userMsgHeader`); `None` when the field
    /// is absent, as Go leaves it zero.
    pub(crate) fn read_single_field<T>(
        &mut self,
        name: &'static str,
        mut read: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        let mut value = None;
        self.read_struct(&[name], |key, r| {
            if key != name.as_bytes() {
                return Ok(false);
            }
            value = Some(read(r)?);
            Ok(true)
        })?;
        Ok(value)
    }

    /// Reads a struct written by Go: a map keyed by field name, or an array in declaration
    /// order. `field` is called with each field name and must consume the value of the fields it
    /// knows (returning `true`); unknown fields are skipped.
    pub(crate) fn read_struct(
        &mut self,
        declaration_order: &[&'static str],
        mut field: impl FnMut(&[u8], &mut Self) -> Result<bool, DecodeError>,
    ) -> Result<(), DecodeError> {
        match self.container()? {
            Container::Map(n) => {
                for _ in 0..n {
                    let key = self.key()?;
                    if !field(key, self)? {
                        self.skip_value()?;
                    }
                }
            }
            Container::Array(n) => {
                for i in 0..n {
                    let known = match declaration_order.get(i) {
                        Some(name) => field(name.as_bytes(), self)?,
                        None => false,
                    };
                    if !known {
                        self.skip_value()?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_raw(&mut out, &vec![b'x'; len]);
        out
    }

    #[test]
    fn raw_lengths_use_the_legacy_str_family() {
        assert_eq!(raw(0)[0], 0xa0);
        assert_eq!(raw(31)[0], 0xbf);
        assert_eq!(&raw(32)[..3], &[0xda, 0x00, 0x20]);
        assert_eq!(&raw(255)[..3], &[0xda, 0x00, 0xff]);
        assert_eq!(&raw(65535)[..3], &[0xda, 0xff, 0xff]);
        assert_eq!(&raw(65536)[..5], &[0xdb, 0x00, 0x01, 0x00, 0x00]);
    }

    #[test]
    fn ints_take_their_smallest_form() {
        let enc = |v: i64| {
            let mut out = Vec::new();
            write_int(&mut out, v);
            out
        };
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(200), [0xcc, 0xc8]);
        assert_eq!(enc(300), [0xcd, 0x01, 0x2c]);
        assert_eq!(enc(70_000), [0xce, 0x00, 0x01, 0x11, 0x70]);
        assert_eq!(enc(-1), [0xff]);
        assert_eq!(enc(-33), [0xd0, 0xdf]);
        assert_eq!(enc(-200), [0xd1, 0xff, 0x38]);
    }

    #[test]
    fn reads_every_integer_form_go_may_send() {
        for bytes in [
            &[0xcc, 0xc8][..],
            &[0xd1, 0x00, 0xc8],
            &[0xcd, 0x00, 0xc8],
            &[0xd2, 0, 0, 0, 0xc8],
            &[0xcf, 0, 0, 0, 0, 0, 0, 0, 0xc8],
            &[0xd3, 0, 0, 0, 0, 0, 0, 0, 0xc8],
        ] {
            assert_eq!(Reader::new(bytes).u32(), Ok(200), "{bytes:02x?}");
        }
        assert_eq!(
            Reader::new(&[0xff]).u32(),
            Err(DecodeError::IntOutOfRange),
            "negative into unsigned"
        );
        assert_eq!(
            Reader::new(&[0xce, 0, 1, 0, 0]).u16(),
            Err(DecodeError::IntOutOfRange)
        );
    }

    #[test]
    fn bytes_accept_str_bin_arrays_and_nil() {
        assert_eq!(Reader::new(&[0xa2, 1, 2]).bytes(), Ok(Some(vec![1, 2])));
        assert_eq!(Reader::new(&[0xd9, 2, 1, 2]).bytes(), Ok(Some(vec![1, 2])));
        assert_eq!(Reader::new(&[0xc4, 2, 1, 2]).bytes(), Ok(Some(vec![1, 2])));
        assert_eq!(
            Reader::new(&[0x92, 1, 0xcc, 0xff]).bytes(),
            Ok(Some(vec![1, 255]))
        );
        assert_eq!(Reader::new(&[0xc0]).bytes(), Ok(None));
        assert_eq!(
            Reader::new(&[0x91, 0xcd, 1, 0]).bytes(),
            Err(DecodeError::IntOutOfRange)
        );
    }

    #[test]
    fn declared_lengths_beyond_the_input_are_truncation() {
        assert_eq!(
            Reader::new(&[0xdb, 0xff, 0xff, 0xff, 0xff]).bytes(),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            Reader::new(&[0xdf, 0xff, 0xff, 0xff, 0xff]).container(),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff]).skip_value(),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn skipping_deep_nesting_is_bounded() {
        let deep = vec![0x91; 10_000];
        assert_eq!(Reader::new(&deep).skip_value(), Err(DecodeError::TooDeep));
    }
}
