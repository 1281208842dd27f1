//! MetalLB's L2 metrics (`research/metallb-l2.md` section 5) and `vigil_l2_*`: the announcer's
//! and its driver's counters.
//!
//! `metallb_speaker_announced` has a series only for what is announced now, and the per-IP
//! counters only for configured VIPs, so a VIP that moved away or was removed leaves no stale
//! series (MetalLB #1972).

use super::{counter, counters, gauge, gauges, label_value, untyped};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use std::collections::BTreeSet;
use std::net::IpAddr;
use vigil_l2_net::{DriverStats, VipCounters};

/// What the announcer exports.
#[derive(Debug, Clone, Default)]
pub struct L2Metrics {
    /// This node's name (the `node` label of `metallb_speaker_announced`).
    pub node: String,
    /// (service, VIP) pairs announced from this node now.
    pub announced: Vec<(String, IpAddr)>,
    /// Every configured VIP: per-IP counters are exported for these only.
    pub configured_vips: BTreeSet<IpAddr>,
    /// The driver's counters (`l2_net::Handle::stats`).
    pub stats: DriverStats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Protocol {
    Layer2,
}

impl Protocol {
    fn as_str(self) -> &'static str {
        match self {
            Self::Layer2 => "layer2",
        }
    }
}

label_value!(Protocol);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Announced {
    ip: String,
    node: String,
    protocol: Protocol,
    service: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByIp {
    ip: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByOutcome {
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByResult {
    result: &'static str,
}

impl L2Metrics {
    fn per_vip(&self, get: fn(&VipCounters) -> u64) -> impl Iterator<Item = (ByIp, u64)> + '_ {
        self.stats
            .per_vip
            .iter()
            .filter(|(ip, _)| self.configured_vips.contains(ip))
            .map(move |(ip, c)| (ByIp { ip: ip.to_string() }, get(c)))
    }
}

impl Collector for L2Metrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        gauges(
            &mut enc,
            "metallb_speaker_announced",
            "Services being announced from this node. This is desired state, it does not guarantee that the routing protocols have converged.",
            self.announced.iter().map(|(service, ip)| {
                let labels = Announced {
                    ip: ip.to_string(),
                    node: self.node.clone(),
                    protocol: Protocol::Layer2,
                    service: service.clone(),
                };
                (labels, 1)
            }),
        )?;
        untyped(
            &mut enc,
            "metallb_layer2_requests_received",
            "Number of layer2 requests received for owned IPs",
            self.per_vip(|c| c.requests_received),
        )?;
        untyped(
            &mut enc,
            "metallb_layer2_responses_sent",
            "Number of layer2 responses sent for owned IPs in response to requests",
            self.per_vip(|c| c.responses_sent),
        )?;
        untyped(
            &mut enc,
            "metallb_layer2_gratuitous_sent",
            "Number of gratuitous layer2 packets sent for owned IPs as a result of failovers",
            self.per_vip(|c| c.gratuitous_sent),
        )?;
        let a = &self.stats.announcer;
        counters(
            &mut enc,
            "vigil_l2_frames",
            "Frames the announcer handled, by outcome.",
            [
                ("malformed", a.malformed),
                ("ignored", a.ignored),
                ("bad_hop_limit", a.ndisc_bad_hop_limit),
                ("not_owned", a.not_owned),
                ("wrong_interface", a.wrong_interface),
                ("conflict", a.conflicts),
                ("answered_arp", a.arp_requests_answered),
                ("answered_ns", a.neighbor_solicits_answered),
            ]
            .map(|(outcome, n)| (ByOutcome { outcome }, n)),
        )?;
        counters(
            &mut enc,
            "vigil_l2_handovers",
            "VIPs handed to another node: silent once its claim was heard, or at the bound.",
            [("claimed", a.handed_over), ("expired", a.handover_expired)]
                .map(|(result, n)| (ByResult { result }, n)),
        )?;
        let s = &self.stats;
        for (name, help, value) in [
            (
                "vigil_l2_defended",
                "Claims of an owned VIP by another MAC answered with a fresh takeover series.",
                a.defended,
            ),
            (
                "vigil_l2_send_errors",
                "Frames the kernel refused to send.",
                s.send_errors,
            ),
            (
                "vigil_l2_receive_errors",
                "Failed receives on the packet sockets.",
                s.recv_errors,
            ),
            (
                "vigil_l2_stale_questions",
                "ARP requests and neighbour solicitations dropped unanswered because they arrived while the announcer was stalled (frozen or starved for longer than the gossip watch's dead-after time): another node may own the VIP by now.",
                s.stale_questions,
            ),
            (
                "vigil_l2_peer_requests",
                "ARP requests for the gossip peers sent as the interface holding the gossip address came up, so that both sides' neighbour entries resolve at once.",
                s.peer_requests_sent,
            ),
            (
                "vigil_l2_socket_errors",
                "Packet sockets that could not be opened (retried each second).",
                s.socket_errors,
            ),
            (
                "vigil_l2_multicast_errors",
                "Failed multicast joins or leaves.",
                s.multicast_errors,
            ),
            (
                "vigil_l2_netlink_resyncs",
                "Times the netlink queue overflowed and the interface state was read again.",
                s.netlink_resyncs,
            ),
            (
                "vigil_l2_transmit_queue_full",
                "Frames the announcer dropped because its transmit queue was full.",
                a.transmit_queue_full,
            ),
        ] {
            counter(&mut enc, name, help, value)?;
        }
        gauge(
            &mut enc,
            "vigil_l2_interfaces",
            "Interfaces with a responder.",
            s.interfaces.len() as u64,
        )
    }
}
