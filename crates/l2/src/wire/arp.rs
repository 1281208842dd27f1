//! ARP packets (RFC 826). Only Ethernet/IPv4 has a [`Repr`]; the view reads any hardware and
//! protocol address lengths.

use std::net::Ipv4Addr;

use super::ethernet::{Address as EthernetAddress, EtherType};
use super::{Error, Result};

enum_with_unknown! {
    /// The ARP hardware type.
    pub enum Hardware(u16) {
        /// Ethernet.
        Ethernet = 1,
    }
}

enum_with_unknown! {
    /// The ARP operation.
    pub enum Operation(u16) {
        /// Who has this protocol address?
        Request = 1,
        /// This protocol address is at this hardware address.
        Reply = 2,
    }
}

mod field {
    use crate::wire::field::Field;

    pub(crate) const HTYPE: Field = 0..2;
    pub(crate) const PTYPE: Field = 2..4;
    pub(crate) const HLEN: usize = 4;
    pub(crate) const PLEN: usize = 5;
    pub(crate) const OPER: Field = 6..8;

    pub(crate) const fn sha(hlen: u8, _plen: u8) -> Field {
        let start = OPER.end;
        start..(start + hlen as usize)
    }

    pub(crate) const fn spa(hlen: u8, plen: u8) -> Field {
        let start = sha(hlen, plen).end;
        start..(start + plen as usize)
    }

    pub(crate) const fn tha(hlen: u8, plen: u8) -> Field {
        let start = spa(hlen, plen).end;
        start..(start + hlen as usize)
    }

    pub(crate) const fn tpa(hlen: u8, plen: u8) -> Field {
        let start = tha(hlen, plen).end;
        start..(start + plen as usize)
    }
}

/// A read/write view of an ARP packet.
///
/// `check_len` depends on the hardware and protocol length fields: changing them voids it.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks that all fields fit.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the fixed header and the four addresses it announces fit in the buffer.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::OPER.end {
            return Err(Error);
        }
        if len < field::tpa(self.hardware_len(), self.protocol_len()).end {
            return Err(Error);
        }
        Ok(())
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, range: core::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[range];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Returns the hardware type field.
    pub fn hardware_type(&self) -> Hardware {
        Hardware::from(self.u16_at(field::HTYPE))
    }

    /// Returns the protocol type field (an EtherType).
    pub fn protocol_type(&self) -> EtherType {
        EtherType::from(self.u16_at(field::PTYPE))
    }

    /// Returns the hardware address length field.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }

    /// Returns the protocol address length field.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }

    /// Returns the operation field.
    pub fn operation(&self) -> Operation {
        Operation::from(self.u16_at(field::OPER))
    }

    /// Returns the source hardware address field.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::sha(self.hardware_len(), self.protocol_len())]
    }

    /// Returns the source protocol address field.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::spa(self.hardware_len(), self.protocol_len())]
    }

    /// Returns the target hardware address field.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tha(self.hardware_len(), self.protocol_len())]
    }

    /// Returns the target protocol address field.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[field::tpa(self.hardware_len(), self.protocol_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_u16_at(&mut self, range: core::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[range].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the hardware type field.
    pub fn set_hardware_type(&mut self, value: Hardware) {
        self.set_u16_at(field::HTYPE, value.into());
    }

    /// Sets the protocol type field.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        self.set_u16_at(field::PTYPE, value.into());
    }

    /// Sets the hardware address length field.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length field.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation field.
    pub fn set_operation(&mut self, value: Operation) {
        self.set_u16_at(field::OPER, value.into());
    }

    /// Sets the source hardware address field (its length must equal `hardware_len`).
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let range = field::sha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the source protocol address field (its length must equal `protocol_len`).
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let range = field::spa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target hardware address field (its length must equal `hardware_len`).
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let range = field::tha(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }

    /// Sets the target protocol address field (its length must equal `protocol_len`).
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let range = field::tpa(self.hardware_len(), self.protocol_len());
        self.buffer.as_mut()[range].copy_from_slice(value);
    }
}

/// An Ethernet/IPv4 ARP packet, the only kind the announcer speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Request or reply.
    pub operation: Operation,
    /// Sender's MAC.
    pub source_hardware_addr: EthernetAddress,
    /// Sender's IPv4 address (0.0.0.0 in an RFC 5227 probe).
    pub source_protocol_addr: Ipv4Addr,
    /// Target's MAC (zero or ignored in requests).
    pub target_hardware_addr: EthernetAddress,
    /// The IPv4 address asked about (requests) or answered to (replies).
    pub target_protocol_addr: Ipv4Addr,
}

/// The length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;

fn ipv4(bytes: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])
}

impl Repr {
    /// Parses an Ethernet/IPv4 ARP packet; any other hardware or protocol is an [`Error`].
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.hardware_type() != Hardware::Ethernet
            || packet.protocol_type() != EtherType::Ipv4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error);
        }
        Ok(Self {
            operation: packet.operation(),
            source_hardware_addr: EthernetAddress::from_bytes(packet.source_hardware_addr()),
            source_protocol_addr: ipv4(packet.source_protocol_addr()),
            target_hardware_addr: EthernetAddress::from_bytes(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// The packet length.
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Writes the packet.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr.as_bytes());
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(self.target_hardware_addr.as_bytes());
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PACKET_BYTES: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 198,
        18, 0, 1, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 198, 18, 0, 100,
    ];

    fn packet_repr() -> Repr {
        Repr {
            operation: Operation::Request,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(198, 18, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(198, 18, 0, 100),
        }
    }

    #[test]
    fn deconstruct() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(packet.hardware_type(), Hardware::Ethernet);
        assert_eq!(packet.protocol_type(), EtherType::Ipv4);
        assert_eq!(packet.hardware_len(), 6);
        assert_eq!(packet.protocol_len(), 4);
        assert_eq!(packet.operation(), Operation::Request);
        assert_eq!(packet.source_protocol_addr(), &[198, 18, 0, 1]);
        assert_eq!(packet.target_protocol_addr(), &[198, 18, 0, 100]);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5; 28];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_hardware_type(Hardware::Ethernet);
        packet.set_protocol_type(EtherType::Ipv4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(Operation::Request);
        packet.set_source_hardware_addr(&[2, 0, 0, 0, 0, 1]);
        packet.set_source_protocol_addr(&[198, 18, 0, 1]);
        packet.set_target_hardware_addr(&[0; 6]);
        packet.set_target_protocol_addr(&[198, 18, 0, 100]);
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn parse() {
        let packet = Packet::new_checked(&PACKET_BYTES[..]).unwrap();
        assert_eq!(Repr::parse(&packet).unwrap(), packet_repr());
    }

    #[test]
    fn emit() {
        let mut bytes = [0xa5; 28];
        packet_repr().emit(&mut Packet::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, PACKET_BYTES);
    }

    #[test]
    fn truncated_and_foreign_are_errors() {
        assert!(Packet::new_checked(&PACKET_BYTES[..27]).is_err());
        assert!(Packet::new_checked(&PACKET_BYTES[..7]).is_err());
        let mut bytes = PACKET_BYTES;
        bytes[5] = 16; // an IPv4 ARP with 16-byte protocol addresses no longer fits
        assert!(Packet::new_checked(&bytes[..]).is_err());
        let mut bytes = PACKET_BYTES;
        bytes[1] = 6; // IEEE 802 hardware type
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.hardware_type(), Hardware::Unknown(6));
        assert!(Repr::parse(&packet).is_err());
    }
}
