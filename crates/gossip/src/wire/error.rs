//! Why bytes from the network were rejected.

use core::fmt;

/// Why a packet, stream or message could not be decoded.
///
/// Every variant describes malformed or unacceptable input: decoding never changes any state,
/// and the caller drops the input (and counts it). The type is small and `Copy` so that the hot
/// path can return it cheaply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a header or value, or a declared length is longer than the input.
    Truncated,
    /// A MessagePack value of the wrong kind: `found` is its leading byte.
    WrongType {
        /// What the decoder was looking for.
        expected: &'static str,
        /// The leading byte it found instead.
        found: u8,
    },
    /// An integer does not fit the field it belongs to (for example a negative sequence number).
    IntOutOfRange,
    /// A string field is not UTF-8. Go accepts arbitrary bytes in names; vigil does not.
    InvalidUtf8,
    /// MessagePack nesting deeper than anything memberlist sends.
    TooDeep,
    /// A zero-length packet or message.
    Empty,
    /// A message type byte that memberlist does not define, or that is not valid where it
    /// appeared (for example `encryptMsg` inside a UDP packet).
    UnknownMessageType(u8),
    /// A compound message whose length table is longer than the packet.
    CompoundLengthsTruncated,
    /// Compressed or compound layers nested deeper than any sender produces.
    NestingTooDeep,
    /// A compression algorithm other than LZW.
    UnknownCompression(u8),
    /// The LZW stream is corrupt or has no end code (Go rejects those too).
    BadLzw,
    /// Decompressing would exceed the configured cap (a compression bomb, or simply too big).
    DecompressedTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// Decompression produced nothing, so there is no message type byte.
    DecompressedEmpty,
    /// The CRC in a `hasCrc` message does not match its payload.
    CrcMismatch {
        /// The checksum carried in the packet.
        carried: u32,
        /// The checksum of the payload as received.
        computed: u32,
    },
    /// A label header of length zero (Go: "label header cannot be empty when present").
    EmptyLabel,
    /// The packet's label (or its absence) differs from ours.
    LabelMismatch,
    /// A label header although this node skips inbound label checks ("unexpected double
    /// label" in Go).
    UnexpectedLabel,
    /// The packet is encrypted and we have no keys, or we require encryption and it is not
    /// encrypted.
    EncryptionMismatch,
    /// The encryption version byte is neither 0 nor 1.
    UnknownEncryptionVersion(u8),
    /// The ciphertext is shorter than the smallest message of its version.
    CiphertextTooShort,
    /// None of the installed keys authenticates the message.
    NoKeyDecrypts,
    /// The padding of a version-0 message is longer than the message.
    BadPadding,
    /// A UDP packet larger than 65,536 bytes, which no sender can produce.
    PacketTooLarge {
        /// The packet's length.
        len: usize,
    },
    /// A length or count in a stream header is negative or above the configured cap.
    StreamLimit {
        /// Which header field.
        field: &'static str,
        /// The value it carried.
        value: i64,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("truncated input"),
            Self::WrongType { expected, found } => {
                write!(f, "expected {expected}, found msgpack byte {found:#04x}")
            }
            Self::IntOutOfRange => f.write_str("integer out of range for its field"),
            Self::InvalidUtf8 => f.write_str("string is not UTF-8"),
            Self::TooDeep => f.write_str("msgpack nested too deeply"),
            Self::Empty => f.write_str("empty message"),
            Self::UnknownMessageType(t) => write!(f, "unknown message type {t}"),
            Self::CompoundLengthsTruncated => f.write_str("compound length table truncated"),
            Self::NestingTooDeep => f.write_str("compound/compress layers nested too deeply"),
            Self::UnknownCompression(a) => write!(f, "unknown compression algorithm {a}"),
            Self::BadLzw => f.write_str("corrupt LZW stream"),
            Self::DecompressedTooLarge { limit } => {
                write!(f, "decompressed data exceeds the {limit}-byte cap")
            }
            Self::DecompressedEmpty => f.write_str("decompressed to nothing"),
            Self::CrcMismatch { carried, computed } => {
                write!(
                    f,
                    "CRC mismatch: carried {carried:#010x}, computed {computed:#010x}"
                )
            }
            Self::EmptyLabel => f.write_str("label header cannot be empty when present"),
            Self::LabelMismatch => f.write_str("label does not match ours"),
            Self::UnexpectedLabel => f.write_str("unexpected label header"),
            Self::EncryptionMismatch => {
                f.write_str("encryption expected but not present, or present without keys")
            }
            Self::UnknownEncryptionVersion(v) => write!(f, "unknown encryption version {v}"),
            Self::CiphertextTooShort => f.write_str("ciphertext too short"),
            Self::NoKeyDecrypts => f.write_str("no installed key could decrypt the message"),
            Self::BadPadding => f.write_str("bad PKCS#7 padding"),
            Self::PacketTooLarge { len } => write!(f, "packet of {len} bytes exceeds 65536"),
            Self::StreamLimit { field, value } => {
                write!(f, "stream header field {field} = {value} is out of bounds")
            }
        }
    }
}

impl std::error::Error for DecodeError {}
