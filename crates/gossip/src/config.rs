//! Every timing and size the engine uses, with Go memberlist's three default profiles and
//! vigil's `fast` profile.

use core::fmt;
use core::time::Duration;

/// The engine's settings. Field names follow Go memberlist's `Config` where one exists.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// memberlist protocol version we speak (Go default 2; 1..=5).
    pub protocol_version: u8,
    /// Application protocol `[min, max, current]` (Go's `DelegateProtocol*`); 0/0/0 for plain
    /// memberlist clusters, Serf uses 2..5.
    pub delegate_version: [u8; 3],
    /// Timeout for TCP work: push/pull, join, reliable user messages.
    pub tcp_timeout: Duration,
    /// Helpers asked to probe a target that missed its direct ack.
    pub indirect_checks: usize,
    /// Broadcast retransmits = `retransmit_mult * ceil(log10(n + 1))`.
    pub retransmit_mult: usize,
    /// Suspicion timeout minimum = `suspicion_mult * max(1, log10(n)) * probe_interval`.
    pub suspicion_mult: usize,
    /// Suspicion timeout maximum = `suspicion_max_timeout_mult * minimum`.
    pub suspicion_max_timeout_mult: usize,
    /// Period of anti-entropy push/pull (scaled up for large clusters); zero disables it.
    pub push_pull_interval: Duration,
    /// Period between probes (one target per period), scaled by local health.
    pub probe_interval: Duration,
    /// How long to wait for a direct ack before asking helpers.
    pub probe_timeout: Duration,
    /// Skip the TCP fallback ping.
    pub disable_tcp_pings: bool,
    /// Local health score ranges over `0..awareness_max_multiplier`.
    pub awareness_max_multiplier: usize,
    /// Peers sent gossip each gossip round.
    pub gossip_nodes: usize,
    /// Period of gossip rounds; zero disables them.
    pub gossip_interval: Duration,
    /// How long dead nodes still receive gossip (so they can refute), and how long dead or left
    /// nodes stay in the table before they are reaped.
    pub gossip_to_the_dead_time: Duration,
    /// A dead node may come back under a new address after this long; zero means never (left
    /// nodes always may).
    pub dead_node_reclaim_time: Duration,
    /// UDP payload budget for gossip and piggy-backing.
    pub udp_buffer_size: usize,
    /// Most parts per compound packet. 127 keeps memberlist 0.2.2 peers able to read them.
    pub max_compound_parts: usize,
    /// Lifeguard (local health awareness and suspicion timeouts that shrink with independent
    /// confirmations). Turning it off gives plain SWIM timing: fixed probe interval and a fixed
    /// suspicion timeout of the minimum. On in every profile; off only to measure its effect.
    pub lifeguard: bool,
    /// vigil: a node that hears a new suspicion probes the suspect at once instead of waiting
    /// for its turn in the round-robin, so that independent confirmations (or the refutation)
    /// arrive within one probe instead of one probe cycle.
    pub probe_on_suspicion: bool,
    /// vigil: use what the target's host kernel says when no process listens on its gossip
    /// port. Off in Go's profiles (memberlist has no such rule), on in `fast`.
    ///
    /// - **Proof of absence.** A probe whose target missed its direct ack and whose TCP
    ///   fallback ping, made for that very probe, was refused (`ECONNREFUSED`: a reset that
    ///   acknowledged our SYN, or an ICMP error quoting it) ends at once: the target is declared
    ///   dead and the news gossiped at once, with no suspicion period. A refusal proves that
    ///   nothing listens on the port: a live memberlist node keeps its TCP listener open for
    ///   its whole life, and a stopped or starved one still has the kernel complete the
    ///   handshake for it. It is hard to forge off-path: the reset or the ICMP error must
    ///   carry our random initial sequence number from a random source port. Only the refusal
    ///   of the probe's own connection counts, so evidence older than the probe never does.
    ///   A member that acks or announces a higher incarnation (a live node, a restarted
    ///   process) is taken back as after any death. Needs the TCP fallback
    ///   (`disable_tcp_pings` off, a peer speaking protocol 3 or later).
    /// - **Port unreachable** (ICMP, for a datagram we sent) is weaker: it quotes only
    ///   addresses and ports, which anyone can forge. It counts as one confirmation of an
    ///   existing suspicion and, for the member being probed, starts the indirect phase and
    ///   its TCP fallback ping at once instead of at the end of the direct-ack window; it
    ///   never declares anyone dead by itself. A refused connection outside a probe (a
    ///   push/pull) also counts as one confirmation only.
    pub use_strong_evidence: bool,
    /// vigil: how many members each node watches closely: its nearest on a ring that every
    /// node orders by a hash of the names (alternately after and before it), so that each
    /// member has this many watchers.
    /// 0 turns the watch off (Go's profiles). See `engine/watch.rs` and docs/ARCHITECTURE.md,
    /// "Detection".
    pub watch_neighbours: usize,
    /// vigil: period of the watch's pings (plain memberlist pings, alone in their datagram).
    pub watch_interval: Duration,
    /// vigil: silence of a watched member (no ack, no datagram from it, no newer incarnation)
    /// after which helpers are asked to ping it too (indirect pings with nacks), every
    /// `probe_timeout` while it stays silent.
    pub watch_confirm_after: Duration,
    /// vigil: silence after which a watched member is declared dead, if enough helpers
    /// confirmed, we did not stall and our health score is below its ceiling. Longer than the longest pause CPU bandwidth
    /// control gives a starved process at its default 100 ms period.
    pub watch_dead_after: Duration,
    /// vigil: distinct helpers whose nacks the verdict needs (capped by the helpers there are;
    /// with none, the watch never declares a death and SWIM's own probes decide).
    pub watch_confirmations: usize,
    /// vigil: a death we declare when a suspicion expires while we heard from no other node
    /// since it began is kept to ourselves (not gossiped, not in our push/pulls), the member
    /// is pinged until it answers, and an answer revives it at its own incarnation. A node cut
    /// off from everyone then brings no stale deaths back when it returns (they made the
    /// survivors hold each other dead, and two of them answer for one address, until the
    /// refutations spread). With it, members declared dead the ordinary way are also pinged
    /// every 4 probe intervals while their death is recent (`gossip_to_the_dead_time`), and
    /// one that answers gets a push/pull, so a healed split whose sides each held the other
    /// dead merges within a round instead of at the next rejoin. Off in Go's profiles. See
    /// `engine/blind.rs`.
    pub hold_blind_verdicts: bool,
    /// vigil: hearing from no other node for this long, or not running for this long, means
    /// we may have been declared dead meanwhile ([`Event::CutOff`]): the speaker goes silent
    /// until a push/pull, started the moment anyone is heard again, merges the cluster's state
    /// ([`Event::Reconnected`]). Zero turns it off (Go's profiles), and so does a watch turned
    /// off (`watch_neighbours` 0): without its pings a connected node can go that long without
    /// a datagram in a small cluster. In the fast profile it is
    /// `watch_dead_after`, the earliest anyone can declare us dead; the watch's pings (every
    /// `watch_interval` from each of our watchers) keep a connected node hearing far more
    /// often than that.
    ///
    /// [`Event::CutOff`]: crate::Event::CutOff
    /// [`Event::Reconnected`]: crate::Event::Reconnected
    pub deaf_after: Duration,
}

/// A named set of defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// Go's `DefaultLANConfig`.
    Lan,
    /// Go's `DefaultWANConfig`.
    Wan,
    /// Go's `DefaultLocalConfig`.
    Local,
    /// vigil's default: sub-second detection on a LAN without false positives under a few
    /// percent loss.
    Fast,
}

impl Profile {
    /// Every profile, for listings.
    pub const ALL: [Self; 4] = [Self::Lan, Self::Wan, Self::Local, Self::Fast];

    /// The profile's name as used in configuration files and flags.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lan => "lan",
            Self::Wan => "wan",
            Self::Local => "local",
            Self::Fast => "fast",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A profile name that is not one of `lan`, `wan`, `local`, `fast`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProfile(pub String);

impl fmt::Display for UnknownProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown gossip profile {:?}: expected one of lan, wan, local, fast",
            self.0
        )
    }
}

impl std::error::Error for UnknownProfile {}

impl core::str::FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| UnknownProfile(s.to_string()))
    }
}

/// A setting that cannot work, named with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gossip config field {}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Config {
    /// Go memberlist's `DefaultLANConfig`.
    pub fn lan() -> Self {
        Self {
            protocol_version: 2,
            delegate_version: [0, 0, 0],
            tcp_timeout: ms(10_000),
            indirect_checks: 3,
            retransmit_mult: 4,
            suspicion_mult: 4,
            suspicion_max_timeout_mult: 6,
            push_pull_interval: ms(30_000),
            probe_interval: ms(1_000),
            probe_timeout: ms(500),
            disable_tcp_pings: false,
            awareness_max_multiplier: 8,
            gossip_nodes: 3,
            gossip_interval: ms(200),
            gossip_to_the_dead_time: ms(30_000),
            dead_node_reclaim_time: Duration::ZERO,
            udp_buffer_size: 1400,
            max_compound_parts: 127,
            lifeguard: true,
            probe_on_suspicion: false,
            use_strong_evidence: false,
            watch_neighbours: 0,
            watch_interval: ms(20),
            watch_confirm_after: ms(40),
            watch_dead_after: ms(130),
            watch_confirmations: 2,
            hold_blind_verdicts: false,
            deaf_after: Duration::ZERO,
        }
    }

    /// Go memberlist's `DefaultWANConfig`.
    pub fn wan() -> Self {
        Self {
            tcp_timeout: ms(30_000),
            suspicion_mult: 6,
            push_pull_interval: ms(60_000),
            probe_timeout: ms(3_000),
            probe_interval: ms(5_000),
            gossip_nodes: 4,
            gossip_interval: ms(500),
            gossip_to_the_dead_time: ms(60_000),
            ..Self::lan()
        }
    }

    /// Go memberlist's `DefaultLocalConfig`.
    pub fn local() -> Self {
        Self {
            tcp_timeout: ms(1_000),
            indirect_checks: 1,
            retransmit_mult: 2,
            suspicion_mult: 3,
            push_pull_interval: ms(15_000),
            probe_timeout: ms(200),
            gossip_interval: ms(100),
            gossip_to_the_dead_time: ms(15_000),
            ..Self::lan()
        }
    }

    /// vigil's LAN failover profile. Probes every 50 ms with a 25 ms direct-ack window (LAN
    /// round trips are well under a millisecond; the rest is slack for a busy host), asks four
    /// helpers, gossips every 20 ms, and lets suspicions expire after 3 probe intervals once
    /// confirmed, starting from 12. Suspects are probed at once by everyone who hears of them,
    /// so a dead node gathers its confirmations within about one probe interval while a live
    /// one refutes in a gossip round or two. On top of that, each node watches its two ring
    /// neighbours (a ping every 20 ms) and declares one dead after 130 ms of silence confirmed
    /// by two helpers (see `watch_neighbours`).
    pub fn fast() -> Self {
        Self {
            tcp_timeout: ms(1_000),
            indirect_checks: 4,
            retransmit_mult: 4,
            suspicion_mult: 3,
            suspicion_max_timeout_mult: 4,
            push_pull_interval: ms(15_000),
            probe_interval: ms(50),
            probe_timeout: ms(25),
            gossip_nodes: 3,
            gossip_interval: ms(20),
            gossip_to_the_dead_time: ms(15_000),
            probe_on_suspicion: true,
            use_strong_evidence: true,
            watch_neighbours: 2,
            hold_blind_verdicts: true,
            deaf_after: ms(130),
            ..Self::lan()
        }
    }

    /// The defaults of a profile.
    pub fn profile(profile: Profile) -> Self {
        match profile {
            Profile::Lan => Self::lan(),
            Profile::Wan => Self::wan(),
            Profile::Local => Self::local(),
            Profile::Fast => Self::fast(),
        }
    }

    /// Checks that the settings can work together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |field, problem: &str| {
            Err(ConfigError {
                field,
                problem: problem.to_string(),
            })
        };
        if !(1..=5).contains(&self.protocol_version) {
            return err("protocol_version", "must be between 1 and 5");
        }
        let [dmin, dmax, dcur] = self.delegate_version;
        if dmin > dmax || !(dmin..=dmax).contains(&dcur) {
            return err("delegate_version", "must satisfy min <= current <= max");
        }
        if self.probe_interval.is_zero() {
            return err("probe_interval", "must be greater than zero");
        }
        if self.probe_timeout.is_zero() || self.probe_timeout > self.probe_interval {
            return err(
                "probe_timeout",
                "must be greater than zero and at most probe_interval",
            );
        }
        if self.suspicion_mult == 0 {
            return err("suspicion_mult", "must be at least 1");
        }
        if self.suspicion_max_timeout_mult == 0 {
            return err("suspicion_max_timeout_mult", "must be at least 1");
        }
        if self.awareness_max_multiplier == 0 {
            return err("awareness_max_multiplier", "must be at least 1");
        }
        if self.retransmit_mult == 0 {
            return err("retransmit_mult", "must be at least 1");
        }
        if self.udp_buffer_size < 200 || self.udp_buffer_size > 65_000 {
            return err("udp_buffer_size", "must be between 200 and 65000 bytes");
        }
        if !(2..=255).contains(&self.max_compound_parts) {
            return err("max_compound_parts", "must be between 2 and 255");
        }
        if self.tcp_timeout.is_zero() {
            return err("tcp_timeout", "must be greater than zero");
        }
        if self.watch_neighbours > 0 {
            if self.watch_interval.is_zero() {
                return err("watch_interval", "must be greater than zero");
            }
            if self.watch_confirm_after < self.watch_interval * 2 {
                return err(
                    "watch_confirm_after",
                    "must be at least two watch intervals (one lost ack is not a silence)",
                );
            }
            if self.watch_dead_after < self.watch_confirm_after + self.probe_timeout {
                return err(
                    "watch_dead_after",
                    "must leave helpers a probe timeout after watch_confirm_after",
                );
            }
        }
        Ok(())
    }
}

impl Default for Config {
    /// vigil's default is the `fast` profile.
    fn default() -> Self {
        Self::fast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's defaults, field by field, as the research note (memberlist-protocol.md section 6)
    /// tabulates them from `config.go`: (field, lan, wan, local).
    #[test]
    fn go_profiles_match_the_research_table() {
        let (lan, wan, local) = (Config::lan(), Config::wan(), Config::local());
        let d = |c: &Config| {
            vec![
                ("ProtocolVersion", u64::from(c.protocol_version)),
                ("TCPTimeout ms", c.tcp_timeout.as_millis() as u64),
                ("IndirectChecks", c.indirect_checks as u64),
                ("RetransmitMult", c.retransmit_mult as u64),
                ("SuspicionMult", c.suspicion_mult as u64),
                (
                    "SuspicionMaxTimeoutMult",
                    c.suspicion_max_timeout_mult as u64,
                ),
                (
                    "PushPullInterval ms",
                    c.push_pull_interval.as_millis() as u64,
                ),
                ("ProbeTimeout ms", c.probe_timeout.as_millis() as u64),
                ("ProbeInterval ms", c.probe_interval.as_millis() as u64),
                ("DisableTcpPings", u64::from(c.disable_tcp_pings)),
                ("AwarenessMaxMultiplier", c.awareness_max_multiplier as u64),
                ("GossipNodes", c.gossip_nodes as u64),
                ("GossipInterval ms", c.gossip_interval.as_millis() as u64),
                (
                    "GossipToTheDeadTime ms",
                    c.gossip_to_the_dead_time.as_millis() as u64,
                ),
                (
                    "DeadNodeReclaimTime ms",
                    c.dead_node_reclaim_time.as_millis() as u64,
                ),
                ("UDPBufferSize", c.udp_buffer_size as u64),
            ]
        };
        let table: [(&str, u64, u64, u64); 16] = [
            ("ProtocolVersion", 2, 2, 2),
            ("TCPTimeout ms", 10_000, 30_000, 1_000),
            ("IndirectChecks", 3, 3, 1),
            ("RetransmitMult", 4, 4, 2),
            ("SuspicionMult", 4, 6, 3),
            ("SuspicionMaxTimeoutMult", 6, 6, 6),
            ("PushPullInterval ms", 30_000, 60_000, 15_000),
            ("ProbeTimeout ms", 500, 3_000, 200),
            ("ProbeInterval ms", 1_000, 5_000, 1_000),
            ("DisableTcpPings", 0, 0, 0),
            ("AwarenessMaxMultiplier", 8, 8, 8),
            ("GossipNodes", 3, 4, 3),
            ("GossipInterval ms", 200, 500, 100),
            ("GossipToTheDeadTime ms", 30_000, 60_000, 15_000),
            ("DeadNodeReclaimTime ms", 0, 0, 0),
            ("UDPBufferSize", 1400, 1400, 1400),
        ];
        for (i, (field, l, w, lo)) in table.iter().enumerate() {
            assert_eq!(d(&lan)[i], (*field, *l), "lan {field}");
            assert_eq!(d(&wan)[i], (*field, *w), "wan {field}");
            assert_eq!(d(&local)[i], (*field, *lo), "local {field}");
        }
        for c in [&lan, &wan, &local] {
            assert_eq!(c.delegate_version, [0, 0, 0]);
            assert!(c.lifeguard && !c.probe_on_suspicion && !c.use_strong_evidence);
            assert_eq!(c.watch_neighbours, 0, "Go's profiles have no watch");
        }
    }

    #[test]
    fn every_profile_validates_and_parses() {
        for p in Profile::ALL {
            Config::profile(p).validate().unwrap();
            assert_eq!(p.name().parse::<Profile>(), Ok(p));
        }
        assert!("quick".parse::<Profile>().is_err());
    }

    #[test]
    fn bad_settings_name_their_field() {
        let mut c = Config::fast();
        c.probe_timeout = c.probe_interval * 2;
        assert_eq!(c.validate().unwrap_err().field, "probe_timeout");
        let mut c = Config::lan();
        c.protocol_version = 6;
        assert_eq!(c.validate().unwrap_err().field, "protocol_version");
    }
}
