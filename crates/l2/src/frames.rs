//! Whole-frame builders: Ethernet header plus ARP or IPv6/ICMPv6/NDP, ready for a raw socket.
//! Used by the announcer for its answers and by test clients for their questions.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use crate::wire::ipv6::{self, NextHeader};
use crate::wire::{arp, icmpv6, ndisc};

/// Builds an Ethernet frame carrying an Ethernet/IPv4 ARP packet.
pub fn arp_frame(src_mac: EthernetAddress, dst_mac: EthernetAddress, arp: &arp::Repr) -> Vec<u8> {
    let eth = ethernet::Repr {
        src_addr: src_mac,
        dst_addr: dst_mac,
        ethertype: EtherType::Arp,
    };
    let mut bytes = vec![0; eth.buffer_len() + arp.buffer_len()];
    let mut frame = ethernet::Frame::new_unchecked(&mut bytes[..]);
    eth.emit(&mut frame);
    arp.emit(&mut arp::Packet::new_unchecked(frame.payload_mut()));
    bytes
}

/// The addressing of an IPv6 Neighbour Discovery frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdiscAddressing {
    /// Ethernet source.
    pub src_mac: EthernetAddress,
    /// Ethernet destination.
    pub dst_mac: EthernetAddress,
    /// IPv6 source.
    pub src_ip: Ipv6Addr,
    /// IPv6 destination.
    pub dst_ip: Ipv6Addr,
    /// IPv6 hop limit: 255 for anything a neighbour should accept.
    pub hop_limit: u8,
}

/// Builds an Ethernet frame carrying an IPv6 Neighbour Discovery message with its checksum.
pub fn ndisc_frame(addressing: &NdiscAddressing, message: &ndisc::Repr) -> Vec<u8> {
    let eth = ethernet::Repr {
        src_addr: addressing.src_mac,
        dst_addr: addressing.dst_mac,
        ethertype: EtherType::Ipv6,
    };
    let icmp = icmpv6::Repr::Ndisc(*message);
    let ip = ipv6::Repr {
        src_addr: addressing.src_ip,
        dst_addr: addressing.dst_ip,
        next_header: NextHeader::Icmpv6,
        payload_len: icmp.buffer_len(),
        hop_limit: addressing.hop_limit,
    };
    let mut bytes = vec![0; eth.buffer_len() + ip.buffer_len() + icmp.buffer_len()];
    let mut frame = ethernet::Frame::new_unchecked(&mut bytes[..]);
    eth.emit(&mut frame);
    let mut packet = ipv6::Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut packet);
    icmp.emit(
        ip.src_addr,
        ip.dst_addr,
        &mut icmpv6::Packet::new_unchecked(packet.payload_mut()),
    );
    bytes
}

/// Builds a broadcast ARP request for `target` from `(src_mac, src_ip)`.
pub fn arp_request(src_mac: EthernetAddress, src_ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    arp_frame(
        src_mac,
        EthernetAddress::BROADCAST,
        &arp::Repr {
            operation: arp::Operation::Request,
            source_hardware_addr: src_mac,
            source_protocol_addr: src_ip,
            target_hardware_addr: EthernetAddress::default(),
            target_protocol_addr: target,
        },
    )
}

/// Builds a neighbour solicitation for `target` with a Source Link-Layer Address option.
/// `unicast_to` sends it straight to that MAC and to `target` itself (a reachability probe, as
/// routers send); `None` sends it to the solicited-node group (address resolution).
pub fn neighbor_solicit(
    src_mac: EthernetAddress,
    src_ip: Ipv6Addr,
    target: Ipv6Addr,
    unicast_to: Option<EthernetAddress>,
) -> Vec<u8> {
    let (dst_mac, dst_ip) = match unicast_to {
        Some(mac) => (mac, target),
        None => {
            let group = ipv6::solicited_node(target);
            (EthernetAddress::from_ipv6_multicast(group), group)
        }
    };
    ndisc_frame(
        &NdiscAddressing {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            hop_limit: ipv6::NDISC_HOP_LIMIT,
        },
        &ndisc::Repr::NeighborSolicit {
            target_addr: target,
            lladdr: Some(src_mac),
        },
    )
}
