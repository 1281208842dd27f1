//! ICMPv6 messages (RFC 4443) and their pseudo-header checksum. Only Neighbour Discovery has a
//! [`Repr`] here: it is all the announcer speaks.

use std::net::Ipv6Addr;

use super::ipv6::NextHeader;
use super::ndisc;
use super::{Error, Result};

enum_with_unknown! {
    /// The ICMPv6 message type.
    pub enum Message(u8) {
        /// Destination unreachable.
        DstUnreachable = 1,
        /// Packet too big.
        PktTooBig = 2,
        /// Time exceeded.
        TimeExceeded = 3,
        /// Parameter problem.
        ParamProblem = 4,
        /// Echo request.
        EchoRequest = 128,
        /// Echo reply.
        EchoReply = 129,
        /// Router solicitation.
        RouterSolicit = 133,
        /// Router advertisement.
        RouterAdvert = 134,
        /// Neighbour solicitation.
        NeighborSolicit = 135,
        /// Neighbour advertisement.
        NeighborAdvert = 136,
        /// Redirect.
        Redirect = 137,
    }
}

pub(crate) mod field {
    use crate::wire::field::{Field, Rest};

    pub(crate) const TYPE: usize = 0;
    pub(crate) const CODE: usize = 1;
    pub(crate) const CHECKSUM: Field = 2..4;
    /// Neighbour Discovery: the flags byte of an advertisement (reserved in a solicitation).
    pub(crate) const NEIGH_FLAGS: usize = 4;
    /// Neighbour Discovery: the reserved bytes after the flags.
    pub(crate) const NEIGH_RESERVED: Field = 5..8;
    /// Neighbour Discovery: the target address.
    pub(crate) const TARGET_ADDR: Field = 8..24;
    /// Neighbour Discovery: the options.
    pub(crate) const NEIGH_OPTIONS: Rest = 24..;
}

/// The length of the ICMPv6 header common to all messages.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// A read/write view of an ICMPv6 message (the IPv6 payload).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks its length.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the common header fits and, for Neighbour Discovery messages, the fixed part
    /// up to the target address too, so that every accessor is safe to call.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error);
        }
        match self.msg_type() {
            Message::NeighborSolicit | Message::NeighborAdvert
                if len < field::NEIGH_OPTIONS.start =>
            {
                Err(Error)
            }
            _ => Ok(()),
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Returns the message type field.
    pub fn msg_type(&self) -> Message {
        Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// Returns the code field.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Returns the checksum field.
    pub fn checksum(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::CHECKSUM];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Neighbour Discovery: returns the flags byte (R, S, O bits of an advertisement).
    pub fn neighbor_flags(&self) -> ndisc::NeighborFlags {
        ndisc::NeighborFlags::from_bits(self.buffer.as_ref()[field::NEIGH_FLAGS])
    }

    /// Neighbour Discovery: returns the target address field.
    pub fn target_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[field::TARGET_ADDR]);
        Ipv6Addr::from(octets)
    }

    /// Neighbour Discovery: returns the options area.
    pub fn neighbor_options(&self) -> &[u8] {
        &self.buffer.as_ref()[field::NEIGH_OPTIONS]
    }

    /// Whether the checksum is right for a message sent from `src` to `dst`.
    pub fn verify_checksum(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        checksum(src, dst, self.buffer.as_ref()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the message type field.
    pub fn set_msg_type(&mut self, value: Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the code field.
    pub fn set_msg_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Neighbour Discovery: sets the flags byte and clears the three reserved bytes after it.
    pub fn set_neighbor_flags(&mut self, value: ndisc::NeighborFlags) {
        let buffer = self.buffer.as_mut();
        buffer[field::NEIGH_FLAGS] = value.bits();
        buffer[field::NEIGH_RESERVED].fill(0);
    }

    /// Neighbour Discovery: sets the target address field.
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET_ADDR].copy_from_slice(&value.octets());
    }

    /// Neighbour Discovery: returns the options area, mutably.
    pub fn neighbor_options_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::NEIGH_OPTIONS]
    }

    /// Computes and writes the checksum for a message sent from `src` to `dst`.
    pub fn fill_checksum(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        self.set_checksum(0);
        let sum = checksum(src, dst, self.buffer.as_ref());
        self.set_checksum(sum);
    }
}

/// The Internet checksum (RFC 1071) of `data` under the IPv6 pseudo-header (RFC 8200 section
/// 8.1). Over a message that already holds its checksum, the result is 0 when it is right.
fn checksum(src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> u16 {
    fn add(mut sum: u32, bytes: &[u8]) -> u32 {
        let mut chunks = bytes.chunks_exact(2);
        for pair in &mut chunks {
            sum += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
        }
        if let [last] = chunks.remainder() {
            sum += u32::from(*last) << 8;
        }
        // Fold early so that a 64 KiB payload cannot overflow.
        (sum & 0xffff) + (sum >> 16)
    }
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
    let mut sum = add(0, &src.octets());
    sum = add(sum, &dst.octets());
    sum = add(sum, &len.to_be_bytes());
    sum = add(sum, &[0, 0, 0, u8::from(NextHeader::Icmpv6)]);
    sum = add(sum, data);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    // `sum` fits 16 bits after folding.
    !(sum as u16)
}

/// An ICMPv6 message the announcer understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Repr {
    /// A Neighbour Discovery solicitation or advertisement.
    Ndisc(ndisc::Repr),
}

impl Repr {
    /// Parses a message sent from `src` to `dst`, verifying the checksum. Types other than
    /// neighbour solicitation and advertisement are an [`Error`].
    pub fn parse<T: AsRef<[u8]>>(src: Ipv6Addr, dst: Ipv6Addr, packet: &Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if !packet.verify_checksum(src, dst) {
            return Err(Error);
        }
        ndisc::Repr::parse(packet).map(Self::Ndisc)
    }

    /// The message length.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::Ndisc(ndisc) => ndisc.buffer_len(),
        }
    }

    /// Writes the message and its checksum for `src` to `dst`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        packet: &mut Packet<T>,
    ) {
        match self {
            Self::Ndisc(ndisc) => ndisc.emit(packet),
        }
        packet.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_round_trip_and_odd_length() {
        let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let dst: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let mut bytes = [128, 0, 0, 0, 1, 2, 3];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.fill_checksum(src, dst);
        assert!(packet.verify_checksum(src, dst));
        assert!(!packet.verify_checksum(dst, "2001:db8::3".parse().unwrap()));
        bytes[6] ^= 1;
        assert!(!Packet::new_unchecked(&bytes[..]).verify_checksum(src, dst));
    }

    #[test]
    fn short_neighbor_messages_fail_check_len() {
        let mut bytes = [0u8; 23];
        bytes[0] = 135;
        assert!(Packet::new_checked(&bytes[..]).is_err());
        bytes[0] = 128;
        assert!(Packet::new_checked(&bytes[..]).is_ok());
        assert_eq!(Message::from(200), Message::Unknown(200));
    }
}
