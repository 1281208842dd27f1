//! IPv6 fixed headers (RFC 8200). Extension headers are not walked: Neighbour Discovery messages
//! carry none in practice, and a frame that has them is reported as another next header.

use std::net::Ipv6Addr;

use super::{Error, Result};

enum_with_unknown! {
    /// The Next Header field: which protocol follows the fixed header.
    pub enum NextHeader(u8) {
        /// Hop-by-hop options extension header.
        HopByHop = 0,
        /// TCP.
        Tcp = 6,
        /// UDP.
        Udp = 17,
        /// ICMPv6.
        Icmpv6 = 58,
        /// No next header.
        NoNextHeader = 59,
    }
}

mod field {
    use crate::wire::field::Field;

    pub(crate) const VER_TC_FLOW: Field = 0..4;
    pub(crate) const LENGTH: Field = 4..6;
    pub(crate) const NXT_HDR: usize = 6;
    pub(crate) const HOP_LIMIT: usize = 7;
    pub(crate) const SRC_ADDR: Field = 8..24;
    pub(crate) const DST_ADDR: Field = 24..40;
}

/// The length of the IPv6 fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// The hop limit every Neighbour Discovery message must carry (RFC 4861 section 7.1.1): a
/// packet that arrives with 255 cannot have been forwarded by a router.
pub const NDISC_HOP_LIMIT: u8 = 255;

/// The all-nodes link-local multicast group, `ff02::1`.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast group of `addr` (RFC 4291 section 2.7.1):
/// `ff02::1:ff` followed by the address's low 24 bits.
pub const fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        ((o[14] as u16) << 8) | o[15] as u16,
    )
}

/// Whether `addr` is a solicited-node multicast group (`ff02::1:ff00:0/104`).
pub fn is_solicited_node(addr: Ipv6Addr) -> bool {
    let o = addr.octets();
    o[..13] == [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]
}

/// A read/write view of an IPv6 packet.
///
/// `check_len` depends on the payload length field: changing it voids the guarantee.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks that the header and the payload it announces fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the fixed header and `payload_len` bytes of payload fit in the buffer.
    /// Trailing bytes (link padding) are allowed and ignored by [`Packet::payload`].
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Returns the version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW.start] >> 4
    }

    /// Returns the payload length field.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Returns the next header field.
    pub fn next_header(&self) -> NextHeader {
        NextHeader::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Returns the hop limit field.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Returns the source address field.
    pub fn src_addr(&self) -> Ipv6Addr {
        ipv6(&self.buffer.as_ref()[field::SRC_ADDR])
    }

    /// Returns the destination address field.
    pub fn dst_addr(&self) -> Ipv6Addr {
        ipv6(&self.buffer.as_ref()[field::DST_ADDR])
    }

    /// Returns the payload: exactly `payload_len` bytes after the header.
    pub fn payload(&self) -> &[u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &self.buffer.as_ref()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6 with traffic class and flow label zero.
    pub fn set_version_6(&mut self) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&[0x60, 0, 0, 0]);
    }

    /// Sets the payload length field.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the next header field.
    pub fn set_next_header(&mut self, value: NextHeader) {
        self.buffer.as_mut()[field::NXT_HDR] = value.into();
    }

    /// Sets the hop limit field.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address field.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address field.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Returns the payload, mutably (`payload_len` bytes after the header).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

fn ipv6(bytes: &[u8]) -> Ipv6Addr {
    let mut octets = [0; 16];
    octets.copy_from_slice(&bytes[..16]);
    Ipv6Addr::from(octets)
}

/// The meaningful contents of an IPv6 fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// Protocol of the payload.
    pub next_header: NextHeader,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Repr {
    /// Parses a header; a version other than 6 is an [`Error`].
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error);
        }
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
        })
    }

    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    ///
    /// # Panics
    /// If `payload_len` does not fit in 16 bits (a caller bug: no jumbograms here).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_version_6();
        packet.set_payload_len(u16::try_from(self.payload_len).expect("payload fits 16 bits"));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HEADER_BYTES: [u8; 44] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x04, 0x3a, 0xff, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0x01, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0, 0, 0x64, 1, 2,
        3, 4,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: "2001:db8::1".parse().unwrap(),
            dst_addr: "ff02::1:ff00:64".parse().unwrap(),
            next_header: NextHeader::Icmpv6,
            payload_len: 4,
            hop_limit: 255,
        }
    }

    #[test]
    fn parse_and_emit() {
        let packet = Packet::new_checked(&HEADER_BYTES[..]).unwrap();
        assert_eq!(packet.payload(), &[1, 2, 3, 4]);
        assert_eq!(Repr::parse(&packet).unwrap(), repr());
        let mut bytes = [0xa5; 44];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        repr().emit(&mut packet);
        packet.payload_mut().copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(bytes, HEADER_BYTES);
    }

    #[test]
    fn payload_longer_than_buffer_is_an_error() {
        assert!(Packet::new_checked(&HEADER_BYTES[..43]).is_err());
        assert!(Packet::new_checked(&HEADER_BYTES[..39]).is_err());
        let mut bytes = HEADER_BYTES;
        bytes[0] = 0x40;
        assert!(Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).is_err());
    }

    #[test]
    fn solicited_node_groups() {
        let vip: Ipv6Addr = "2001:db8::abcd:ef12:3456".parse().unwrap();
        let group = solicited_node(vip);
        assert_eq!(group, "ff02::1:ff12:3456".parse::<Ipv6Addr>().unwrap());
        assert!(is_solicited_node(group));
        assert!(!is_solicited_node(ALL_NODES));
    }
}
