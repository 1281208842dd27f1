//! Wire formats for the frames the announcer reads and writes: Ethernet II, ARP, IPv6, ICMPv6 and
//! Neighbour Discovery (after smoltcp's `wire` module).
//!
//! Each protocol has two levels:
//! - a *packet view*, `Packet<T: AsRef<[u8]>>`, that reads (and, for `T: AsMut<[u8]>`, writes)
//!   fields in place without copying;
//! - a *representation*, `Repr`, the meaningful high-level form, with `parse`, `buffer_len` and
//!   `emit`.
//!
//! # Panic contract
//!
//! Once `check_len()` has returned `Ok(())`, no accessor or setter of a view panics, as long as
//! the fields named in that view's documentation (lengths) are not changed. `new_checked` is
//! `new_unchecked` followed by `check_len`; parse untrusted input only through `new_checked`.
//! `Repr::emit` panics if the buffer is shorter than `Repr::buffer_len()`; that is a caller bug.
//!
//! Protocol numbers are enums with an `Unknown(n)` variant, so any value round-trips.
//!
//! ```
//! use vigil_l2::wire::{arp, ethernet::Address};
//! use std::net::Ipv4Addr;
//!
//! let repr = arp::Repr {
//!     operation: arp::Operation::Request,
//!     source_hardware_addr: Address([2, 0, 0, 0, 0, 1]),
//!     source_protocol_addr: Ipv4Addr::new(198, 18, 0, 1),
//!     target_hardware_addr: Address([0; 6]),
//!     target_protocol_addr: Ipv4Addr::new(198, 18, 0, 100),
//! };
//! let mut bytes = vec![0; repr.buffer_len()];
//! repr.emit(&mut arp::Packet::new_unchecked(&mut bytes[..]));
//! let parsed = arp::Repr::parse(&arp::Packet::new_checked(&bytes[..]).unwrap()).unwrap();
//! assert_eq!(parsed, repr);
//! ```

use core::fmt;

/// Declares a protocol-number enum with an `Unknown(n)` variant and lossless `From` conversions
/// both ways (smoltcp's `enum_with_unknown!`).
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Clone, Copy)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant, )+
            /// A value this crate has no name for; kept so that it round-trips.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => Self::$variant, )+
                    other => Self::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}

pub mod arp;
pub mod ethernet;
pub mod icmpv6;
pub mod ipv6;
pub mod ndisc;

/// Byte ranges of header fields, shared by the per-protocol `field` modules.
mod field {
    /// A fixed byte range.
    pub(crate) type Field = core::ops::Range<usize>;
    /// Everything from an offset to the end.
    pub(crate) type Rest = core::ops::RangeFrom<usize>;
}

/// A frame or packet is malformed (too short, inconsistent lengths, bad checksum) or uses a
/// variant this crate does not handle. Deliberately carries no detail: it is on the hot path and
/// the only thing a caller does with it is count and drop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed or unsupported packet")
    }
}

impl std::error::Error for Error {}

/// The result of parsing or checking a packet.
pub type Result<T> = core::result::Result<T, Error>;
