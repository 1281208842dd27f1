//! The hashicorp/memberlist wire protocol: messages and the framing layers around them.
//!
//! Everything here is a pure function of its inputs: no sockets, no clock; randomness (GCM
//! nonces) comes in as a `CryptoRngCore`.
//!
//! ```text
//!  UDP packet                                 TCP stream (dialer)
//!  [label] 244 len label                      [label] 244 len label
//!  [encrypt] vsn nonce ct tag   (no type)     [encrypt] 10 len vsn nonce ct tag
//!  [crc] 12 crc32                             [compress] 9 {Algo, Buf}
//!  [compress] 9 {Algo, Buf}   if smaller      message: ping | ack | push/pull | user | err
//!  compound 7 n lens parts  |  message
//! ```
//!
//! [`packet`] and [`stream`] stack these layers in Go's order; [`Message`] encodes and decodes
//! the msgpack bodies byte for byte as Go memberlist 0.2.2 does. See [`compat`] for where we
//! deliberately differ.

mod error;
mod msgpack;

pub mod compound;
pub mod compress;
pub mod crc;
pub mod crypto;
pub mod label;
pub mod message;
pub mod packet;
pub mod stream;

pub use crypto::{EncryptionVersion, Keyring, KeyringError, SecretKey};
pub use error::DecodeError;
pub use label::Label;
pub use message::{
    Ack, Alive, Compress, Dead, ErrResp, IndirectPing, Message, MessageType, Nack, NodeState, Ping,
    PushNodeState, PushPull, PushPullHeader, StreamLimits, Suspect, Transport, UserMsgHeader,
};

use core::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Lowest memberlist protocol version we understand.
pub const PROTOCOL_VERSION_MIN: u8 = 1;
/// Highest memberlist protocol version we understand (CRC, nacks, TCP ping).
pub const PROTOCOL_VERSION_MAX: u8 = 5;
/// Largest node metadata memberlist allows (Go panics on larger).
pub const META_MAX_SIZE: usize = 512;

/// Why we could not encode something. These are caller bugs, not network conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// A compound holds at most 255 parts; use [`compound::encode_batches`].
    TooManyParts(usize),
    /// A compound part is limited to 65,535 bytes by its u16 length.
    PartTooLong(usize),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyParts(n) => write!(f, "{n} parts do not fit in one compound (max 255)"),
            Self::PartTooLong(n) => {
                write!(f, "a {n}-byte part does not fit a compound (max 65535)")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// How this node frames its packets and streams: label, encryption and compression settings,
/// and the caps on what it accepts. Defaults are Go's (compression on, verification both ways).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Framing {
    /// Cluster label; empty for none.
    pub label: Label,
    /// Accept unlabelled input as ours and reject labelled input (Go's
    /// `SkipInboundLabelCheck`).
    pub skip_inbound_label_check: bool,
    /// Encryption keys; empty means encryption is off.
    pub keyring: Keyring,
    /// Layout to encrypt with (V0 only for protocol version 1).
    pub encryption_version: EncryptionVersion,
    /// Reject input that is not encrypted (when the keyring has keys).
    pub verify_incoming: bool,
    /// Encrypt output (when the keyring has keys).
    pub verify_outgoing: bool,
    /// Compress packets (when it makes them smaller) and streams (always).
    pub compress: bool,
    /// Cap on what one UDP packet may decompress to.
    pub max_packet_decompressed: usize,
    /// Caps on stream headers and bodies.
    pub stream_limits: StreamLimits,
}

impl Default for Framing {
    fn default() -> Self {
        Self {
            label: Label::default(),
            skip_inbound_label_check: false,
            keyring: Keyring::default(),
            encryption_version: EncryptionVersion::V1,
            verify_incoming: true,
            verify_outgoing: true,
            compress: true,
            max_packet_decompressed: compress::MAX_PACKET_DECOMPRESSED,
            stream_limits: StreamLimits::default(),
        }
    }
}

/// An IP address as memberlist carries it: the 4- or 16-byte form, kept exactly. Peers compare
/// address bytes, so a node must re-send the form it received.
pub fn ip_from_wire(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))),
        16 => {
            let octets: [u8; 16] = bytes.try_into().ok()?;
            let v6 = Ipv6Addr::from(octets);
            // Go's net.IP treats ::ffff:a.b.c.d as the IPv4 address.
            Some(match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            })
        }
        _ => None,
    }
}

/// The wire form vigil advertises for its own address: 4 bytes for IPv4, 16 for IPv6.
pub fn ip_to_wire(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

pub mod compat {
    //! Where vigil's codec knowingly differs from Go memberlist, and why.
    //!
    //! - **Names must be UTF-8.** Go strings may hold any bytes; a non-UTF-8 node name is
    //!   rejected with [`DecodeError::InvalidUtf8`](super::DecodeError::InvalidUtf8) because
    //!   names end up in logs, metrics, JSON and the owner-election hash.
    //! - **Integers are written as go-msgpack 0.5.x writes them** (non-negative Go `int`s in
    //!   unsigned form), matching Debian's memberlist 0.2.2 byte for byte. memberlist 0.5.1+
    //!   (go-msgpack v2) writes signed forms for values above 127; every Go decoder accepts
    //!   both, and so do we.
    //! - **Compounds never exceed 255 parts** ([`compound::encode_batches`](super::compound::encode_batches)):
    //!   memberlist before 0.3.2 corrupted larger batches (#239). memberlist 0.2.2 also
    //!   misreads compounds of 128 or more parts (it computes `count * 2` in a byte), so the
    //!   engine should keep batches at or below 127 parts while 0.2.2 peers may be present.
    //! - **Caps on input**: a UDP packet may decompress to at most 1 MiB
    //!   ([`compress::MAX_PACKET_DECOMPRESSED`](super::compress::MAX_PACKET_DECOMPRESSED));
    //!   streams follow memberlist HEAD's limits ([`StreamLimits`](super::StreamLimits)).
    //!   Debian's 0.2.2 has none of these caps.
    //! - **Bad version-0 padding is an error** rather than a panic.
    //! - **Labels** follow memberlist 0.3.0+. Debian's 0.2.2 predates them, so a labelled
    //!   cluster cannot include 0.2.2 nodes.
    //! - **CRC is budgeted**: [`packet::overhead`](super::packet::overhead) counts its 5 bytes,
    //!   which Go leaves out of the UDP budget.
}
