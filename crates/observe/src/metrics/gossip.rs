//! `vigil_gossip_*`: the gossip member's view and the engine's and driver's counters.

use super::{counter, counters, gauge, gauges, label_value};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use vigil_gossip::{MemberInfo, MemberState};
use vigil_gossip_net::NetStats;
use vigil_speaker_core::core::MemberEventKind;

/// What the gossip member exports.
#[derive(Debug, Clone, Default)]
pub struct GossipMetrics {
    /// The engine's and driver's counters (`Memberlist::stats`); `None` when the driver did
    /// not answer (the member view and event counts are still exported).
    pub stats: Option<NetStats>,
    /// Members by state, this node included.
    pub members: MemberCounts,
    /// Membership events seen.
    pub events: MemberEventCounts,
    /// User messages received.
    pub user_messages: u64,
}

/// Members by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberCounts {
    /// Alive.
    pub alive: u64,
    /// Suspect.
    pub suspect: u64,
    /// Dead.
    pub dead: u64,
    /// Left.
    pub left: u64,
}

impl MemberCounts {
    /// Counts the states of `members`.
    pub fn of<'a>(members: impl IntoIterator<Item = &'a MemberInfo>) -> Self {
        Self::of_states(members.into_iter().map(|m| m.state))
    }

    /// Counts `states`.
    pub fn of_states(states: impl IntoIterator<Item = MemberState>) -> Self {
        let mut counts = Self::default();
        for state in states {
            match state {
                MemberState::Alive => counts.alive += 1,
                MemberState::Suspect => counts.suspect += 1,
                MemberState::Dead => counts.dead += 1,
                MemberState::Left => counts.left += 1,
                _ => {}
            }
        }
        counts
    }
}

/// Membership events seen, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemberEventCounts([u64; 6]);

impl MemberEventCounts {
    /// Counts one event.
    pub fn record(&mut self, event: MemberEventKind) {
        self.0[event as usize] += 1;
    }

    /// How many of `event` were seen.
    pub fn get(&self, event: MemberEventKind) -> u64 {
        self.0[event as usize]
    }
}

/// From counts kept elsewhere (the speaker core's), so one count feeds every output.
impl FromIterator<(MemberEventKind, u64)> for MemberEventCounts {
    fn from_iter<I: IntoIterator<Item = (MemberEventKind, u64)>>(counts: I) -> Self {
        let mut out = Self::default();
        for (event, n) in counts {
            out.0[event as usize] += n;
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum StateLabel {
    Alive,
    Suspect,
    Dead,
    Left,
}

impl StateLabel {
    fn as_str(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::Suspect => "suspect",
            Self::Dead => "dead",
            Self::Left => "left",
        }
    }
}

label_value!(StateLabel);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByState {
    state: StateLabel,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ByEvent {
    event: &'static str,
}

impl Collector for GossipMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let m = &self.members;
        gauges(
            &mut enc,
            "vigil_gossip_members",
            "Gossip members by state, this node included.",
            [
                (StateLabel::Alive, m.alive),
                (StateLabel::Suspect, m.suspect),
                (StateLabel::Dead, m.dead),
                (StateLabel::Left, m.left),
            ]
            .map(|(state, n)| (ByState { state }, n)),
        )?;
        counters(
            &mut enc,
            "vigil_gossip_member_events",
            "Membership events seen, by kind (alive: a suspected member refuted).",
            MemberEventKind::ALL.map(|kind| {
                (
                    ByEvent {
                        event: kind.as_str(),
                    },
                    self.events.get(kind),
                )
            }),
        )?;
        let Some(s) = &self.stats else {
            return Ok(());
        };
        let e = &s.engine;
        for (name, help, value) in [
            (
                "vigil_gossip_packets_received",
                "Gossip packets received.",
                e.packets_in,
            ),
            (
                "vigil_gossip_packets_sent",
                "Gossip packets sent.",
                e.packets_out,
            ),
            (
                "vigil_gossip_bytes_received",
                "Gossip bytes received.",
                e.bytes_in,
            ),
            ("vigil_gossip_bytes_sent", "Gossip bytes sent.", e.bytes_out),
            ("vigil_gossip_probes", "Probes started.", e.probes),
            (
                "vigil_gossip_probes_failed",
                "Probes that ended in a suspicion.",
                e.probes_failed,
            ),
            (
                "vigil_gossip_suspicions",
                "Suspicions this node raised.",
                e.suspicions_raised,
            ),
            (
                "vigil_gossip_refutations",
                "Suspicions about this node that it refuted.",
                e.refutations,
            ),
            (
                "vigil_gossip_deaths_declared",
                "Members this node declared dead.",
                e.deaths_declared,
            ),
            (
                "vigil_gossip_absences_proven",
                "Members declared dead at once because a probe's TCP fallback ping was refused.",
                e.absences_proven,
            ),
            (
                "vigil_gossip_blind_deaths",
                "Members this node declared dead while it heard from no one, kept to itself.",
                e.blind_deaths,
            ),
            (
                "vigil_gossip_blind_revivals",
                "Members held dead by such a blind verdict that answered again.",
                e.blind_revivals,
            ),
            (
                "vigil_gossip_cut_offs",
                "Times this node heard no one, or did not run, for as long as others need to declare it dead.",
                e.cut_offs,
            ),
            (
                "vigil_gossip_dead_answered",
                "Members held dead that answered a ping (a healed split), each followed by a push-pull.",
                e.dead_answered,
            ),
            (
                "vigil_gossip_reannouncements",
                "Times this node announced its incarnation again after a stale accusation.",
                e.reannouncements,
            ),
            (
                "vigil_gossip_malformed",
                "Packets, messages and streams dropped as malformed.",
                e.malformed,
            ),
            (
                "vigil_gossip_decrypt_failures",
                "Packets and streams no key decrypted (or unencrypted when encryption is required).",
                e.decrypt_failures,
            ),
            (
                "vigil_gossip_label_mismatches",
                "Packets and streams with a wrong or missing label.",
                e.label_mismatches,
            ),
            (
                "vigil_gossip_streams_in",
                "TCP streams served.",
                e.streams_in,
            ),
            (
                "vigil_gossip_streams_out",
                "TCP streams opened.",
                e.streams_out,
            ),
            (
                "vigil_gossip_stream_failures",
                "Outgoing TCP streams that failed.",
                s.streams_failed,
            ),
            (
                "vigil_gossip_streams_refused",
                "Outgoing TCP connections refused (strong evidence of death).",
                s.streams_refused,
            ),
            (
                "vigil_gossip_udp_send_errors",
                "Datagrams the kernel refused to send.",
                s.udp_send_errors,
            ),
            (
                "vigil_gossip_timer_errors",
                "Failures arming or reading the gossip driver's timer.",
                s.timer_errors,
            ),
            (
                "vigil_gossip_user_messages",
                "User messages received.",
                self.user_messages,
            ),
            (
                "vigil_gossip_keyring_reloads",
                "Keyring file reloads applied.",
                s.keyring_reloads,
            ),
            (
                "vigil_gossip_keyring_errors",
                "Keyring file contents rejected.",
                s.keyring_errors,
            ),
        ] {
            counter(&mut enc, name, help, value)?;
        }
        gauge(
            &mut enc,
            "vigil_gossip_health_score",
            "Lifeguard local health score (0 is healthy).",
            s.health_score as u64,
        )?;
        gauge(
            &mut enc,
            "vigil_gossip_incarnation",
            "This node's incarnation.",
            u64::from(s.incarnation),
        )
    }
}
