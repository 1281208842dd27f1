//! Parse anything, never panic: every wire type of `vigil_l2::wire` (Ethernet II, ARP, IPv6,
//! ICMPv6 and Neighbour Discovery) gets the raw input, on its own and nested as a received
//! frame is (Ethernet -> ARP, Ethernet -> IPv6 -> ICMPv6 -> NDP).
//!
//! Besides "no panic", it checks what the announcer relies on: a view that passed `check_len`
//! never reads past its buffer (the accessors would panic), every representation that parsed
//! emits into `buffer_len()` bytes and parses back equal, and an NDP message whose checksum is
//! filled in parses through ICMPv6 exactly when it parses on its own.

#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use vigil_l2::wire::{arp, ethernet, icmpv6, ipv6, ndisc};

fuzz_target!(|data: &[u8]| {
    // Each layer straight on the raw bytes (a malformed frame can put anything anywhere).
    ethernet_layer(data);
    arp_layer(data);
    ipv6_layer(data);
    icmpv6_layer(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, data);
    options(data);

    // The nesting the announcer uses on a received frame.
    let Ok(frame) = ethernet::Frame::new_checked(data) else {
        return;
    };
    match frame.ethertype() {
        ethernet::EtherType::Arp => arp_layer(frame.payload()),
        ethernet::EtherType::Ipv6 => {
            if let Some((src, dst, payload)) = ipv6_layer(frame.payload()) {
                icmpv6_layer(src, dst, payload);
            }
        }
        _ => {}
    }
});

fn ethernet_layer(data: &[u8]) {
    let Ok(frame) = ethernet::Frame::new_checked(data) else {
        return;
    };
    assert_eq!(frame.payload().len() + ethernet::HEADER_LEN, data.len());
    let repr = ethernet::Repr::parse(&frame).expect("a checked frame's header parses");
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut ethernet::Frame::new_unchecked(&mut bytes[..]));
    let back = ethernet::Repr::parse(&ethernet::Frame::new_checked(&bytes[..]).unwrap());
    assert_eq!(back, Ok(repr));
}

fn arp_layer(data: &[u8]) {
    let Ok(packet) = arp::Packet::new_checked(data) else {
        return;
    };
    // Every accessor is in bounds once check_len passed, whatever the length fields say.
    let _ = (
        packet.hardware_type(),
        packet.protocol_type(),
        packet.operation(),
        packet.source_hardware_addr(),
        packet.source_protocol_addr(),
        packet.target_hardware_addr(),
        packet.target_protocol_addr(),
    );
    let Ok(repr) = arp::Repr::parse(&packet) else {
        return;
    };
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(&mut arp::Packet::new_unchecked(&mut bytes[..]));
    let back = arp::Repr::parse(&arp::Packet::new_checked(&bytes[..]).unwrap());
    assert_eq!(back, Ok(repr));
}

/// The IPv6 source, destination and payload, when the packet parses.
fn ipv6_layer(data: &[u8]) -> Option<(Ipv6Addr, Ipv6Addr, &[u8])> {
    let packet = ipv6::Packet::new_checked(data).ok()?;
    assert_eq!(packet.payload().len(), usize::from(packet.payload_len()));
    // The same bytes, borrowed from the input rather than from the view.
    let payload = &data[ipv6::HEADER_LEN..ipv6::HEADER_LEN + usize::from(packet.payload_len())];
    let repr = ipv6::Repr::parse(&packet).ok()?;
    let mut bytes = vec![0; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut bytes[..]));
    let back = ipv6::Repr::parse(&ipv6::Packet::new_checked(&bytes[..]).unwrap());
    assert_eq!(back, Ok(repr));
    Some((repr.src_addr, repr.dst_addr, payload))
}

fn icmpv6_layer(src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) {
    let Ok(packet) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.msg_code(), packet.checksum());
    let checked = icmpv6::Repr::parse(src, dst, &packet);
    let unchecked = ndisc::Repr::parse(&packet);
    if let Ok(icmpv6::Repr::Ndisc(message)) = checked {
        assert_eq!(
            unchecked,
            Ok(message),
            "the checksum is the only extra check"
        );
    }

    // With the checksum filled in, ICMPv6 accepts exactly what NDP accepts.
    let mut fixed = data.to_vec();
    icmpv6::Packet::new_unchecked(&mut fixed[..]).fill_checksum(src, dst);
    let fixed_packet = icmpv6::Packet::new_checked(&fixed[..]).unwrap();
    assert!(fixed_packet.verify_checksum(src, dst));
    let via_icmp = match icmpv6::Repr::parse(src, dst, &fixed_packet) {
        Ok(icmpv6::Repr::Ndisc(message)) => Some(message),
        _ => None,
    };
    assert_eq!(via_icmp, unchecked.ok());

    let Ok(message) = unchecked else {
        return;
    };
    let repr = icmpv6::Repr::Ndisc(message);
    let mut bytes = vec![0; repr.buffer_len()];
    repr.emit(src, dst, &mut icmpv6::Packet::new_unchecked(&mut bytes[..]));
    let back = icmpv6::Repr::parse(src, dst, &icmpv6::Packet::new_checked(&bytes[..]).unwrap());
    assert_eq!(back, Ok(repr));
}

/// Walks the input as an NDP options area, the way the parser does.
fn options(mut data: &[u8]) {
    while let Ok(option) = ndisc::NdiscOption::new_checked(data) {
        let len = option.total_len();
        assert!(len > 0 && len <= data.len());
        let _ = (
            option.option_type(),
            option.data(),
            option.link_layer_addr(),
        );
        data = &data[len..];
    }
}
