//! Neighbour Discovery solicitations and advertisements (RFC 4861 sections 4.3, 4.4) with their
//! link-layer address options (section 4.6.1). The fixed fields live in the
//! [`icmpv6::Packet`](super::icmpv6::Packet) view; options have their own [`NdiscOption`] view.

use core::fmt;
use std::net::Ipv6Addr;

use super::ethernet::Address as EthernetAddress;
use super::icmpv6::{self, Message};
use super::{Error, Result};

/// The R, S and O flags of a neighbour advertisement.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags(u8);

impl NeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: Self = Self(0x80);
    /// S: sent in response to a solicitation.
    pub const SOLICITED: Self = Self(0x40);
    /// O: the advertisement should override an existing cache entry.
    pub const OVERRIDE: Self = Self(0x20);
    /// No flags.
    pub const EMPTY: Self = Self(0);

    /// Keeps only the three defined bits of a flags byte.
    pub const fn from_bits(bits: u8) -> Self {
        Self(bits & 0xe0)
    }

    /// The flags as a byte.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether all flags in `other` are set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for NeighborFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for NeighborFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NeighborFlags(R={} S={} O={})",
            u8::from(self.contains(Self::ROUTER)),
            u8::from(self.contains(Self::SOLICITED)),
            u8::from(self.contains(Self::OVERRIDE))
        )
    }
}

enum_with_unknown! {
    /// The type of a Neighbour Discovery option.
    pub enum OptionType(u8) {
        /// Source link-layer address.
        SourceLinkLayerAddr = 1,
        /// Target link-layer address.
        TargetLinkLayerAddr = 2,
        /// Prefix information.
        PrefixInformation = 3,
        /// Redirected header.
        RedirectedHeader = 4,
        /// MTU.
        Mtu = 5,
        /// Nonce (RFC 3971, used by enhanced DAD, RFC 7527).
        Nonce = 14,
    }
}

mod field {
    use crate::wire::field::{Field, Rest};

    pub(crate) const TYPE: usize = 0;
    pub(crate) const LENGTH: usize = 1;
    pub(crate) const DATA: Rest = 2..;
    /// An Ethernet link-layer address option's address.
    pub(crate) const LL_ADDR: Field = 2..8;
}

/// The length of a link-layer address option for Ethernet: one unit of 8 bytes.
pub const LL_ADDR_OPTION_LEN: usize = 8;

/// A read/write view of one Neighbour Discovery option.
///
/// `check_len` depends on the length field: changing it voids the guarantee.
#[derive(Debug, Clone)]
pub struct NdiscOption<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> NdiscOption<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks its length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let option = Self::new_unchecked(buffer);
        option.check_len()?;
        Ok(option)
    }

    /// Checks that the type and length fit and that the length is neither zero (RFC 4861 section
    /// 4.6: such a packet must be discarded) nor past the end of the buffer.
    pub fn check_len(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < field::DATA.start {
            return Err(Error);
        }
        let len = self.total_len();
        if len == 0 || data.len() < len {
            return Err(Error);
        }
        Ok(())
    }

    /// Returns the option type field.
    pub fn option_type(&self) -> OptionType {
        OptionType::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Returns the length field, in units of 8 bytes.
    pub fn data_len(&self) -> u8 {
        self.buffer.as_ref()[field::LENGTH]
    }

    /// Returns the length of the whole option in bytes.
    pub fn total_len(&self) -> usize {
        usize::from(self.data_len()) * 8
    }

    /// Returns the option's data, after the type and length.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA.start..self.total_len()]
    }

    /// Returns the Ethernet address of a link-layer address option, or `None` when the option is
    /// not exactly one unit long (another link type).
    pub fn link_layer_addr(&self) -> Option<EthernetAddress> {
        (self.total_len() == LL_ADDR_OPTION_LEN)
            .then(|| EthernetAddress::from_bytes(&self.buffer.as_ref()[field::LL_ADDR]))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> NdiscOption<T> {
    /// Sets the option type field.
    pub fn set_option_type(&mut self, value: OptionType) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the length field, in units of 8 bytes.
    pub fn set_data_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::LENGTH] = value;
    }

    /// Sets the Ethernet address of a link-layer address option.
    pub fn set_link_layer_addr(&mut self, value: EthernetAddress) {
        self.buffer.as_mut()[field::LL_ADDR].copy_from_slice(value.as_bytes());
    }
}

/// Walks an options area and returns the first link-layer address option of type `wanted`.
/// Unknown options are skipped, as RFC 4861 section 4.6 requires; a malformed option anywhere
/// is an [`Error`] (the whole message must be discarded).
fn find_lladdr(mut options: &[u8], wanted: OptionType) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    while !options.is_empty() {
        let option = NdiscOption::new_checked(options)?;
        if found.is_none() && option.option_type() == wanted {
            found = Some(option.link_layer_addr().ok_or(Error)?);
        }
        options = &options[option.total_len()..];
    }
    Ok(found)
}

/// A neighbour solicitation or advertisement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repr {
    /// "Who has `target_addr`?" (also used for unicast reachability probes and, from `::`,
    /// duplicate address detection).
    NeighborSolicit {
        /// The address asked about.
        target_addr: Ipv6Addr,
        /// The Source Link-Layer Address option, if present.
        lladdr: Option<EthernetAddress>,
    },
    /// "`target_addr` is at `lladdr`."
    NeighborAdvert {
        /// R, S, O flags.
        flags: NeighborFlags,
        /// The address advertised.
        target_addr: Ipv6Addr,
        /// The Target Link-Layer Address option, if present.
        lladdr: Option<EthernetAddress>,
    },
}

impl Repr {
    /// Parses a solicitation or advertisement, applying the message-level checks of RFC 4861
    /// sections 7.1.1 and 7.1.2 that need no IPv6 header: code 0, a target that is not
    /// multicast, well-formed options. The hop limit and the addresses are checked by the caller.
    pub fn parse<T: AsRef<[u8]>>(packet: &icmpv6::Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.msg_code() != 0 {
            return Err(Error);
        }
        let kind = packet.msg_type();
        if !matches!(kind, Message::NeighborSolicit | Message::NeighborAdvert) {
            return Err(Error);
        }
        let target_addr = packet.target_addr();
        if target_addr.is_multicast() {
            return Err(Error);
        }
        let options = packet.neighbor_options();
        if kind == Message::NeighborSolicit {
            let lladdr = find_lladdr(options, OptionType::SourceLinkLayerAddr)?;
            Ok(Self::NeighborSolicit {
                target_addr,
                lladdr,
            })
        } else {
            let lladdr = find_lladdr(options, OptionType::TargetLinkLayerAddr)?;
            Ok(Self::NeighborAdvert {
                flags: packet.neighbor_flags(),
                target_addr,
                lladdr,
            })
        }
    }

    /// The message length, options included.
    pub const fn buffer_len(&self) -> usize {
        let lladdr = match self {
            Self::NeighborSolicit { lladdr, .. } | Self::NeighborAdvert { lladdr, .. } => lladdr,
        };
        icmpv6::field::NEIGH_OPTIONS.start
            + if lladdr.is_some() {
                LL_ADDR_OPTION_LEN
            } else {
                0
            }
    }

    /// Writes the message (without the checksum: see [`icmpv6::Repr::emit`]).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut icmpv6::Packet<T>) {
        let (kind, flags, target_addr, lladdr, option_type) = match *self {
            Self::NeighborSolicit {
                target_addr,
                lladdr,
            } => (
                Message::NeighborSolicit,
                NeighborFlags::EMPTY,
                target_addr,
                lladdr,
                OptionType::SourceLinkLayerAddr,
            ),
            Self::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            } => (
                Message::NeighborAdvert,
                flags,
                target_addr,
                lladdr,
                OptionType::TargetLinkLayerAddr,
            ),
        };
        packet.set_msg_type(kind);
        packet.set_msg_code(0);
        packet.set_checksum(0);
        packet.set_neighbor_flags(flags);
        packet.set_target_addr(target_addr);
        if let Some(lladdr) = lladdr {
            let mut option = NdiscOption::new_unchecked(packet.neighbor_options_mut());
            option.set_option_type(option_type);
            option.set_data_len(1);
            option.set_link_layer_addr(lladdr);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    const DST: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0x64);
    const TARGET: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x64);

    /// A solicitation for 2001:db8::64 from 2001:db8::1 with SLLA 02:00:00:00:00:01.
    static NS_BYTES: [u8; 32] = [
        0x87, 0x00, 0x1b, 0x63, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0x64, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];

    fn ns_repr() -> Repr {
        Repr::NeighborSolicit {
            target_addr: TARGET,
            lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 1])),
        }
    }

    #[test]
    fn parse_and_emit_solicitation() {
        let packet = icmpv6::Packet::new_checked(&NS_BYTES[..]).unwrap();
        assert!(packet.verify_checksum(SRC, DST));
        assert_eq!(
            icmpv6::Repr::parse(SRC, DST, &packet).unwrap(),
            icmpv6::Repr::Ndisc(ns_repr())
        );
        let mut bytes = [0xa5; 32];
        icmpv6::Repr::Ndisc(ns_repr()).emit(
            SRC,
            DST,
            &mut icmpv6::Packet::new_unchecked(&mut bytes[..]),
        );
        assert_eq!(bytes, NS_BYTES);
    }

    #[test]
    fn advertisement_round_trips_with_flags() {
        let repr = Repr::NeighborAdvert {
            flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
            target_addr: TARGET,
            lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 2])),
        };
        let mut bytes = vec![0xa5; repr.buffer_len()];
        icmpv6::Repr::Ndisc(repr).emit(TARGET, SRC, &mut icmpv6::Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes[4], 0x60);
        let packet = icmpv6::Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            icmpv6::Repr::parse(TARGET, SRC, &packet).unwrap(),
            icmpv6::Repr::Ndisc(repr)
        );
    }

    #[test]
    fn bad_options_code_and_target_are_errors() {
        let check = |bytes: &[u8]| {
            let mut bytes = bytes.to_vec();
            let mut packet = icmpv6::Packet::new_unchecked(&mut bytes[..]);
            packet.fill_checksum(SRC, DST);
            icmpv6::Repr::parse(SRC, DST, &icmpv6::Packet::new_unchecked(&bytes[..]))
        };
        let mut zero_len = NS_BYTES;
        zero_len[25] = 0;
        assert!(check(&zero_len).is_err());
        let mut too_long = NS_BYTES;
        too_long[25] = 2;
        assert!(check(&too_long).is_err());
        let mut code = NS_BYTES;
        code[1] = 1;
        assert!(check(&code).is_err());
        let mut multicast_target = NS_BYTES;
        multicast_target[8] = 0xff;
        assert!(check(&multicast_target).is_err());
        let mut unknown_option = NS_BYTES;
        unknown_option[24] = 99;
        assert_eq!(
            check(&unknown_option).unwrap(),
            icmpv6::Repr::Ndisc(Repr::NeighborSolicit {
                target_addr: TARGET,
                lladdr: None
            })
        );
        let mut bad_checksum = NS_BYTES;
        bad_checksum[3] ^= 0xff;
        assert!(
            icmpv6::Repr::parse(SRC, DST, &icmpv6::Packet::new_unchecked(&bad_checksum[..]))
                .is_err()
        );
    }
}
