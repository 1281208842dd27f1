//! Ethernet II frames (IEEE 802.3 with an EtherType; no VLAN tag: AF_PACKET hands tags over
//! out of band).

use core::fmt;
use core::str::FromStr;
use std::net::Ipv6Addr;

use super::{Error, Result};

enum_with_unknown! {
    /// The EtherType field: which protocol the payload carries.
    pub enum EtherType(u16) {
        /// IPv4.
        Ipv4 = 0x0800,
        /// ARP.
        Arp = 0x0806,
        /// IPv6.
        Ipv6 = 0x86dd,
    }
}

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Self = Self([0xff; 6]);

    /// Reads an address from the first six bytes of `data`.
    ///
    /// # Panics
    /// If `data` is shorter than six bytes.
    pub fn from_bytes(data: &[u8]) -> Self {
        let mut bytes = [0; 6];
        bytes.copy_from_slice(&data[..6]);
        Self(bytes)
    }

    /// The address as bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit is set (multicast or broadcast).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is an individual address other than all zeroes.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && self.0 != [0; 6]
    }

    /// The Ethernet multicast address an IPv6 multicast group maps to (RFC 2464 section 7):
    /// `33:33` followed by the group's low 32 bits.
    pub const fn from_ipv6_multicast(group: Ipv6Addr) -> Self {
        let o = group.octets();
        Self([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for Address {
    type Err = Error;

    /// Parses `aa:bb:cc:dd:ee:ff` (case-insensitive).
    fn from_str(s: &str) -> Result<Self> {
        let mut bytes = [0; 6];
        let mut parts = s.split(':');
        for byte in &mut bytes {
            let part = parts.next().ok_or(Error)?;
            if part.len() != 2 {
                return Err(Error);
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| Error)?;
        }
        if parts.next().is_some() {
            return Err(Error);
        }
        Ok(Self(bytes))
    }
}

mod field {
    use crate::wire::field::{Field, Rest};

    pub(crate) const DESTINATION: Field = 0..6;
    pub(crate) const SOURCE: Field = 6..12;
    pub(crate) const ETHERTYPE: Field = 12..14;
    pub(crate) const PAYLOAD: Rest = 14..;
}

/// The length of an Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks that the buffer holds a whole header, so that no accessor panics.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error)
        } else {
            Ok(())
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Returns the destination address field.
    pub fn dst_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Returns the source address field.
    pub fn src_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// Returns the EtherType field.
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Returns the payload (everything after the header, including any link padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address field.
    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the source address field.
    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the EtherType field.
    pub fn set_ethertype(&mut self, value: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(value).to_be_bytes());
    }

    /// Returns the payload, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The meaningful contents of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Source address.
    pub src_addr: Address,
    /// Destination address.
    pub dst_addr: Address,
    /// Payload protocol.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parses a checked frame's header.
    pub fn parse<T: AsRef<[u8]>>(frame: &Frame<T>) -> Result<Self> {
        frame.check_len()?;
        Ok(Self {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// The header length.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header into a frame.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRAME_BYTES: [u8; 18] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0xaa,
        0xbb, 0xcc, 0xdd,
    ];

    fn repr() -> Repr {
        Repr {
            src_addr: Address([2, 0, 0, 0, 0, 1]),
            dst_addr: Address::BROADCAST,
            ethertype: EtherType::Arp,
        }
    }

    #[test]
    fn deconstruct() {
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(frame.dst_addr(), Address::BROADCAST);
        assert_eq!(frame.src_addr(), Address([2, 0, 0, 0, 0, 1]));
        assert_eq!(frame.ethertype(), EtherType::Arp);
        assert_eq!(frame.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn parse_and_emit() {
        let frame = Frame::new_checked(&FRAME_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&frame).unwrap(), repr());
        let mut bytes = [0xa5; 18];
        let mut frame = Frame::new_unchecked(&mut bytes[..]);
        repr().emit(&mut frame);
        frame
            .payload_mut()
            .copy_from_slice(&[0xaa, 0xbb, 0xcc, 0xdd]);
        assert_eq!(bytes, FRAME_BYTES);
    }

    #[test]
    fn truncated_is_an_error() {
        assert_eq!(Frame::new_checked(&FRAME_BYTES[..13]).unwrap_err(), Error);
    }

    #[test]
    fn unknown_ethertype_round_trips() {
        assert_eq!(EtherType::from(0x88cc), EtherType::Unknown(0x88cc));
        assert_eq!(u16::from(EtherType::Unknown(0x88cc)), 0x88cc);
    }

    #[test]
    fn address_text_and_multicast_mapping() {
        let a: Address = "02:AB:00:00:00:01".parse().unwrap();
        assert_eq!(a.to_string(), "02:ab:00:00:00:01");
        assert!("02:ab:00:00:00".parse::<Address>().is_err());
        assert!("02:ab:00:00:00:01:02".parse::<Address>().is_err());
        let group: Ipv6Addr = "ff02::1:ff00:64".parse().unwrap();
        assert_eq!(
            Address::from_ipv6_multicast(group),
            Address([0x33, 0x33, 0xff, 0x00, 0x00, 0x64])
        );
        assert!(Address::BROADCAST.is_multicast() && !Address::BROADCAST.is_unicast());
    }
}
