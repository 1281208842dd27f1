//! Whether a received question arrived while we were stalled, and so must not be answered.
//!
//! A question that waited in our socket (the process was frozen, paused with its VM or starved
//! of CPU) was asked of whoever owned the VIP when it arrived. Once we have not run for as long
//! as the cluster needs to declare a silent node dead, another host may own the VIP and may have
//! answered it already; our late answer would arrive last, and the asker's cache keeps the last
//! answer, our stale MAC. So the driver drops such a question unanswered: if the VIP is still
//! ours, the asker asks again and is answered then.
//!
//! A frame that waited longer than [`QUESTION_MAX_AGE`] shows the stall, and every question
//! queued before it was read arrived during the stall, however young: after a 1 s freeze the
//! questions of its last 130 ms are as late as the others (the survivor has answered them too).
//! Without such a frame (nothing queued early in the stall) a stall goes unseen here; the
//! gossip side notices it separately.
//!
//! Only questions (ARP requests that are not gratuitous, neighbour solicitations) are dropped.
//! Claims (gratuitous ARP, ARP replies and advertisements from other MACs) still reach the
//! announcer however old: that another host claimed a VIP we think is ours stays true, and is
//! what tells a thawed speaker to look for the cluster that declared it dead. They do count as
//! evidence of the stall.

use std::time::{Duration, SystemTime};

use vigil_l2::wire::ethernet::{self, EtherType};
use vigil_l2::wire::{arp, icmpv6, ipv6};

/// The longest a frame may wait in our socket before it shows a stall: the gossip watch's
/// dead-after time (`GossipConfig::fast().watch_dead_after`), the earliest the cluster may have
/// declared us dead and moved the VIP. Past it, a neighbour may be answering for us.
pub const QUESTION_MAX_AGE: Duration = Duration::from_millis(130);

/// Whether a frame the kernel received at `received` has waited longer than `max_age` by
/// `now` (read right after the receive). Never on doubt: a missing timestamp or one in the
/// future (the wall clock stepped back) is fresh. Both are `CLOCK_REALTIME`, so a step of the
/// clock forward while a frame waits ages it by the step.
pub fn is_stale(received: Option<SystemTime>, now: SystemTime, max_age: Duration) -> bool {
    let Some(received) = received else {
        return false;
    };
    now.duration_since(received)
        .is_ok_and(|waited| waited > max_age)
}

/// The latest sign that the reader stalled: when it read a frame that had waited longer than
/// the bound. Frames received before that instant arrived during the stall.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StallMark {
    seen_at: Option<SystemTime>,
}

impl StallMark {
    /// Judges one frame the kernel received at `received`, read at `now` (right after the
    /// receive): true when it arrived while the reader was stalled, because it waited longer
    /// than `max_age` (which marks the stall at `now`) or because it was received before the
    /// latest such mark. Never on doubt: a frame without a timestamp is on time, and a mark in
    /// the future (the wall clock stepped back since) is not trusted.
    pub fn arrived_stalled(
        &mut self,
        received: Option<SystemTime>,
        now: SystemTime,
        max_age: Duration,
    ) -> bool {
        let Some(received) = received else {
            return false;
        };
        if is_stale(Some(received), now, max_age) {
            self.seen_at = Some(now);
            return true;
        }
        self.seen_at
            .is_some_and(|mark| mark <= now && received <= mark)
    }
}

/// Whether `frame` asks for an address: a non-gratuitous ARP request or a neighbour
/// solicitation. Anything else, malformed frames included, is not (the announcer judges it).
pub fn is_question(frame: &[u8]) -> bool {
    let Ok(frame) = ethernet::Frame::new_checked(frame) else {
        return false;
    };
    match frame.ethertype() {
        EtherType::Arp => {
            let Ok(packet) = arp::Packet::new_checked(frame.payload()) else {
                return false;
            };
            arp::Repr::parse(&packet).is_ok_and(|repr| {
                repr.operation == arp::Operation::Request
                    && repr.source_protocol_addr != repr.target_protocol_addr
            })
        }
        EtherType::Ipv6 => {
            let Ok(packet) = ipv6::Packet::new_checked(frame.payload()) else {
                return false;
            };
            packet.next_header() == ipv6::NextHeader::Icmpv6
                && icmpv6::Packet::new_checked(packet.payload())
                    .is_ok_and(|icmp| icmp.msg_type() == icmpv6::Message::NeighborSolicit)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use vigil_l2::frames;
    use vigil_l2::wire::ethernet::Address as EthernetAddress;

    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const OTHER: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_millis(ms)
    }

    #[test]
    fn only_a_question_older_than_the_bound_is_stale() {
        let bound = QUESTION_MAX_AGE;
        let now = at(10_000);
        assert!(!is_stale(Some(now), now, bound));
        assert!(!is_stale(Some(now - bound), now, bound), "the bound itself");
        assert!(is_stale(
            Some(now - bound - Duration::from_nanos(1)),
            now,
            bound
        ));
        assert!(is_stale(Some(now - Duration::from_secs(1)), now, bound));
    }

    #[test]
    fn a_missing_or_future_timestamp_is_fresh() {
        let now = at(10_000);
        assert!(!is_stale(None, now, QUESTION_MAX_AGE));
        assert!(!is_stale(
            Some(now + Duration::from_secs(5)),
            now,
            QUESTION_MAX_AGE
        ));
    }

    #[test]
    fn frames_queued_behind_a_stale_one_arrived_during_the_stall() {
        let bound = QUESTION_MAX_AGE;
        let mut mark = StallMark::default();
        // Nothing stale yet: a young frame is on time.
        assert!(!mark.arrived_stalled(Some(at(9_990)), at(10_000), bound));
        // Thawed at 11,000 after a freeze from 10,000: the queue read in order.
        assert!(mark.arrived_stalled(Some(at(10_010)), at(11_000), bound));
        assert!(mark.arrived_stalled(Some(at(10_990)), at(11_001), bound));
        assert!(mark.arrived_stalled(Some(at(11_000)), at(11_001), bound));
        // Received after the stall was seen: on time.
        assert!(!mark.arrived_stalled(Some(at(11_002)), at(11_003), bound));
        assert!(!mark.arrived_stalled(None, at(11_003), bound));
    }

    #[test]
    fn a_mark_in_the_future_is_not_trusted() {
        let bound = QUESTION_MAX_AGE;
        let mut mark = StallMark::default();
        assert!(mark.arrived_stalled(Some(at(10_000)), at(11_000), bound));
        // The wall clock stepped back 5 s: a frame stamped before the mark is on time.
        assert!(!mark.arrived_stalled(Some(at(6_000)), at(6_001), bound));
    }

    #[test]
    fn questions_are_requests_and_solicitations() {
        let vip = Ipv4Addr::new(198, 18, 0, 10);
        let client = Ipv4Addr::new(198, 18, 0, 2);
        assert!(is_question(&frames::arp_request(MAC, client, vip)));
        let v6 = "2001:db8::10".parse::<Ipv6Addr>().unwrap();
        let src = "2001:db8::2".parse::<Ipv6Addr>().unwrap();
        assert!(is_question(&frames::neighbor_solicit(MAC, src, v6, None)));
        assert!(is_question(&frames::neighbor_solicit(
            MAC,
            src,
            v6,
            Some(OTHER)
        )));
    }

    #[test]
    fn claims_and_garbage_are_not_questions() {
        let vip = Ipv4Addr::new(198, 18, 0, 10);
        // A gratuitous request: an announcement.
        assert!(!is_question(&frames::arp_request(MAC, vip, vip)));
        let reply = arp::Repr {
            operation: arp::Operation::Reply,
            source_hardware_addr: OTHER,
            source_protocol_addr: vip,
            target_hardware_addr: MAC,
            target_protocol_addr: Ipv4Addr::new(198, 18, 0, 2),
        };
        assert!(!is_question(&frames::arp_frame(OTHER, MAC, &reply)));
        let v6 = "2001:db8::10".parse::<Ipv6Addr>().unwrap();
        let advert = frames::ndisc_frame(
            &frames::NdiscAddressing {
                src_mac: OTHER,
                dst_mac: EthernetAddress([0x33, 0x33, 0, 0, 0, 1]),
                src_ip: v6,
                dst_ip: "ff02::1".parse().unwrap(),
                hop_limit: ipv6::NDISC_HOP_LIMIT,
            },
            &vigil_l2::wire::ndisc::Repr::NeighborAdvert {
                flags: vigil_l2::wire::ndisc::NeighborFlags::OVERRIDE,
                target_addr: v6,
                lladdr: Some(OTHER),
            },
        );
        assert!(!is_question(&advert));
        let mut truncated = frames::arp_request(MAC, Ipv4Addr::new(198, 18, 0, 2), vip);
        truncated.truncate(20);
        assert!(!is_question(&truncated));
        assert!(!is_question(&[]));
    }
}
