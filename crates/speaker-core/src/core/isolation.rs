//! The split-brain bound for a host that comes back: a node that loses every other member at
//! once is more likely cut off (its link down, its process frozen, a partition) than the last
//! survivor of a mass death, so it stops answering until it hears the cluster again.
//!
//! Why: a host whose link is cut declares the others dead and elects itself owner of every
//! VIP (nobody hears it meanwhile); the others take its VIPs. When its link comes back it
//! answered, until gossip merged (0.03-4.2 s in issue 23's runs), for every VIP beside their
//! real owners, and clients' ARP caches kept whichever answered last. A node that was silent
//! while cut off is silent when it comes back, and elects again only from a view that holds
//! the others: by then it agrees with them.
//!
//! The rule, with time as a parameter:
//! - **Isolated** when the view goes from some other live member to none while at least
//!   [`MIN_PEERS`] other members were live within [`AT_ONCE`] (gracefully left ones not
//!   counted): lost at once, as a cut host loses them. A two-node cluster cannot tell its
//!   peer's death from its own isolation and keeps MetalLB's behaviour (the survivor takes
//!   over); members lost one after the other (seconds apart) are deaths, not isolation.
//! - **Silent while isolated**: the election runs, but this node owns nothing (as under the
//!   majority guard).
//! - **Rejoining** when the view holds a strict majority of the members known at isolation
//!   live again (a push-pull merge brings them all at once), or [`REJOIN_SETTLE`] after the
//!   first one came back (a partial merge): still silent for [`rejoin_quiet`], the time the
//!   others take to hear this node alive again (its refutation spreads by gossip): 100 ms
//!   when gossip catches up by push/pull at once (the fast profile), else [`REJOIN_QUIET`]. Meanwhile a
//!   survivor that already hears it hands its VIPs over (answering until this node claims
//!   them, up to the speaker's handover bound of 1 s), so the switch back is one gratuitous
//!   announcement from this node, and the survivor stops when it hears it.
//! - **Majority regained** (the majority guard): the same quiet, ended sooner once every live
//!   member has acknowledged this node's alive state at a new incarnation (the speaker asks
//!   gossip to confirm it: `Action::ConfirmAlive`).
//! - **Cut off**: gossip may report it heard no one, or did not run, for as long as the others
//!   need to declare this node dead (`vigil_gossip::Event::CutOff`, the fast profile): then
//!   it is isolated at once, whatever its view says (a frozen process thaws with everyone
//!   still live in its view; a cut host declares its peers dead one at a time and with five
//!   hosts still holds some live when its link returns), if at least [`MIN_PEERS`] others
//!   are live. Only gossip's reconnection (a merged push/pull: it then knows whether it was
//!   declared dead, and refuted) starts the rejoin quiet.
//! - **Bounded**: after [`ISOLATION_BOUND`] with nobody back it is the last survivor after all
//!   and answers again alone. A cut longer than that answers on return until gossip merges, as
//!   before this rule.

use super::member::{Member, MemberState};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Other members that must have been live (within [`AT_ONCE`]) for the loss of all of them to
/// count as isolation.
pub const MIN_PEERS: usize = 2;
/// Members last seen live within this span of each other were lost "at once". A cut host
/// finds its peers dead one probe interval apart (50 ms in the fast profile) plus the
/// suspicion timeout: well inside this for the clusters vigil runs; a survivor that loses a
/// second member seconds after a first does not isolate.
pub const AT_ONCE: Duration = Duration::from_millis(1500);
/// The longest an isolated node stays silent with nobody back: two of the speaker's rejoin
/// intervals (5 s), so that a host cut for a few seconds has merged before it answers.
pub const ISOLATION_BOUND: Duration = Duration::from_secs(10);
/// How long after the first member comes back a node waits for a majority before it elects
/// again anyway (shorter than the fast profile's 50 ms probe interval).
pub const REJOIN_SETTLE: Duration = Duration::from_millis(40);
/// How long a node that merged stays silent, so that the others hear it alive before it
/// claims anything (under the speaker's 1 s handover bound: a survivor handing over still
/// answers when this node starts).
pub const REJOIN_QUIET: Duration = Duration::from_millis(600);

/// How long a node that merged stays silent when its gossip keeps the deaths it declared
/// while cut off to itself and catches up by a push/pull the moment it finds a member again
/// (`Config::hold_blind_verdicts`, the fast profile): its refutation then reaches the others
/// one or two gossip rounds after it is back, so five rounds (100 ms in the fast profile) is
/// enough for them to hear it before it claims anything.
const CAUGHT_UP_QUIET_ROUNDS: u32 = 5;

/// The rejoin quiet for gossip running with `config`: [`CAUGHT_UP_QUIET_ROUNDS`] gossip
/// intervals when it catches up at once, else [`REJOIN_QUIET`].
pub fn rejoin_quiet(config: &vigil_gossip::Config) -> Duration {
    if config.hold_blind_verdicts {
        (config.gossip_interval * CAUGHT_UP_QUIET_ROUNDS).min(REJOIN_QUIET)
    } else {
        REJOIN_QUIET
    }
}

/// How long a node that merged after a cut-off stays silent once every live member has
/// acknowledged its alive state (`vigil_gossip::Event::HeardBack`): they hold it alive, so
/// the rest of the quiet would only delay its claims. One gossip interval is left for their
/// speakers to act on what their gossip already knows (start handing over the VIPs they took)
/// before this node's first gratuitous announcement reaches them.
pub fn heard_back_quiet(config: &vigil_gossip::Config) -> Duration {
    config.gossip_interval.min(rejoin_quiet(config))
}

/// Where the node stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Hearing the cluster (or never had enough peers to tell).
    Connected,
    /// Every other member lost at once, or gossip cut off.
    Isolated {
        /// Since when.
        since: Instant,
        /// The members live within the bound before, this node included.
        known: usize,
        /// When the first of them came back, if one has.
        first_back: Option<Instant>,
        /// Gossip reported this node cut off: only its reconnection (a merged push/pull)
        /// ends this, not the view (a stalled node's view still shows everyone live).
        cut_off: bool,
    },
    /// Merged; silent until `until` so that the others hear this node first.
    Rejoining {
        /// The end of the quiet.
        until: Instant,
    },
}

/// The isolation state machine (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Isolation {
    state: State,
    /// When each other member was last seen live.
    last_live: BTreeMap<String, Instant>,
    /// Isolations entered, for `/status` and tests.
    entered: u64,
    /// How long a node that merged stays silent.
    rejoin_quiet: Duration,
    /// How much of it is left once every member acknowledged this node's alive state.
    heard_back_quiet: Duration,
    /// The members live (this node included) when the last isolation began, or, when the
    /// majority guard's view regained its majority, those seen live within the isolation
    /// bound: the quiet is cut short only once as many are live and have acknowledged this
    /// node.
    known_before: usize,
    /// Every member asked after the last reconnection acknowledged this node's alive state
    /// ([`heard_back`](Self::heard_back)); the quiet is cut short once as many members are
    /// live as before the isolation.
    heard_back: bool,
    /// The isolation bound passed while gossip was still cut off: its reconnection, when it
    /// comes, still calls for the quiet (the cluster moved on meanwhile).
    outlasted_cut_off: bool,
}

impl Isolation {
    /// Connected, knowing nobody; silent for `rejoin_quiet` after merging (see
    /// [`rejoin_quiet`]), or `heard_back_quiet` after every member acknowledged (see
    /// [`heard_back_quiet`]), whichever ends first.
    pub fn new(rejoin_quiet: Duration, heard_back_quiet: Duration) -> Self {
        Self {
            state: State::Connected,
            last_live: BTreeMap::new(),
            entered: 0,
            rejoin_quiet,
            heard_back_quiet,
            known_before: 0,
            heard_back: false,
            outlasted_cut_off: false,
        }
    }

    /// Whether this node must stay silent now.
    pub fn silenced(&self) -> bool {
        !matches!(self.state, State::Connected)
    }

    /// How many times this node found itself isolated.
    pub fn entered(&self) -> u64 {
        self.entered
    }

    /// A gossip view at `now` (this node is `me`). Returns whether [`silenced`](Self::silenced)
    /// changed.
    pub fn observe(&mut self, now: Instant, me: &str, members: &[Member]) -> bool {
        let before = self.silenced();
        let live: BTreeSet<&str> = members
            .iter()
            .filter(|m| m.name != me && m.live())
            .map(|m| m.name.as_str())
            .collect();
        for name in &live {
            self.last_live.insert((*name).to_string(), now);
        }
        // A member that left gracefully is not lost: it does not count.
        for m in members.iter().filter(|m| m.state == MemberState::Left) {
            self.last_live.remove(&m.name);
        }
        let recent = self
            .last_live
            .values()
            .filter(|at| now.saturating_duration_since(**at) <= AT_ONCE)
            .count();
        self.last_live
            .retain(|_, at| now.saturating_duration_since(*at) <= ISOLATION_BOUND);
        match &mut self.state {
            State::Connected => {
                if live.is_empty() && recent >= MIN_PEERS {
                    self.entered += 1;
                    self.known_before = recent + 1;
                    self.heard_back = false;
                    self.state = State::Isolated {
                        since: now,
                        known: recent + 1,
                        first_back: None,
                        cut_off: false,
                    };
                }
            }
            State::Isolated { cut_off: true, .. } => {}
            State::Isolated {
                known, first_back, ..
            } => {
                if live.is_empty() {
                    *first_back = None;
                } else if (live.len() + 1) * 2 > *known {
                    self.state = State::Rejoining {
                        until: now + self.rejoin_quiet,
                    };
                } else if first_back.is_none() {
                    *first_back = Some(now);
                }
            }
            State::Rejoining { .. } => {}
        }
        self.shorten_quiet(now, live.len() + 1);
        self.expire(now);
        before != self.silenced()
    }

    /// Gossip found this node cut off (`vigil_gossip::Event::CutOff`: it heard no one, or did
    /// not run, for as long as the others need to declare it dead): silent, as if isolated,
    /// when at least [`MIN_PEERS`] others are live in `members` (with fewer, MetalLB's
    /// behaviour: nobody else could have taken over, or a two-node cluster cannot tell).
    /// Only [`reconnected`](Self::reconnected) or [`ISOLATION_BOUND`] ends it. Returns
    /// whether [`silenced`](Self::silenced) changed.
    pub fn cut_off(&mut self, now: Instant, me: &str, members: &[Member]) -> bool {
        let before = self.silenced();
        let live = members.iter().filter(|m| m.name != me && m.live()).count();
        match &mut self.state {
            State::Isolated { cut_off, .. } => *cut_off = true,
            State::Connected | State::Rejoining { .. } if live >= MIN_PEERS => {
                self.entered += 1;
                self.known_before = live + 1;
                self.heard_back = false;
                self.state = State::Isolated {
                    since: now,
                    known: live + 1,
                    first_back: None,
                    cut_off: true,
                };
            }
            _ => {}
        }
        before != self.silenced()
    }

    /// Gossip merged the cluster's state after a cut-off (`vigil_gossip::Event::Reconnected`):
    /// this node now knows whether it was declared dead and has refuted it; silent for the
    /// rejoin quiet more, so that the others hear it first. Returns whether
    /// [`silenced`](Self::silenced) changed.
    pub fn reconnected(&mut self, now: Instant) -> bool {
        let before = self.silenced();
        let cut_off = matches!(self.state, State::Isolated { cut_off: true, .. });
        if cut_off || (self.state == State::Connected && self.outlasted_cut_off) {
            self.state = State::Rejoining {
                until: now + self.rejoin_quiet,
            };
        }
        self.outlasted_cut_off = false;
        before != self.silenced()
    }

    /// Every member live after the reconnection acknowledged this node's alive state
    /// (`vigil_gossip::Event::HeardBack`), and `live` members (this node included) are live
    /// in its view: if that is every member live when it was cut off, the rejoin quiet ends
    /// [`heard_back_quiet`] from now, if that is sooner. With fewer, others cut off with it
    /// (a pair whose links went down together) may still be coming back, and the whole
    /// quiet lets them before this node claims what they held. Returns whether
    /// [`silenced`](Self::silenced) changed.
    pub fn heard_back(&mut self, now: Instant, live: usize) -> bool {
        let before = self.silenced();
        self.heard_back = matches!(self.state, State::Rejoining { .. });
        self.shorten_quiet(now, live);
        self.expire(now);
        before != self.silenced()
    }

    /// After [`heard_back`](Self::heard_back), with `live` members live now (this node
    /// included): the quiet ends [`heard_back_quiet`] from now once that is every member live
    /// before the isolation (one held dead at the reconnection may revive a moment later).
    fn shorten_quiet(&mut self, now: Instant, live: usize) {
        if let State::Rejoining { until } = &mut self.state
            && self.heard_back
            && live >= self.known_before
        {
            *until = (*until).min(now + self.heard_back_quiet);
            self.heard_back = false;
        }
    }

    /// The split-brain guard lets this node announce again after a split (its view regained
    /// a majority, most often by a push/pull that merged the other side at once, with `live`
    /// members live, this node included): silent for the rejoin quiet first, so that the
    /// others hear it alive before it claims anything (they would defend their VIPs against a
    /// claim from a member they still hold dead). The quiet ends sooner once those members
    /// have acknowledged this node's alive state ([`heard_back`](Self::heard_back), after the
    /// speaker asked gossip to confirm it), and once every member live before the split
    /// (within [`ISOLATION_BOUND`]) is live again in this node's view. Returns whether
    /// [`silenced`](Self::silenced) changed.
    ///
    /// Why every member and not the majority regained: a split heals one member at a time in
    /// this node's view (each must refute the death this side declared), and the first
    /// push/pull can bring back a majority while others are still dead here. Ending the quiet
    /// then, this node elects itself for what those others own and answers beside them until
    /// they revive here (issue 23, partition run 9: 85 ms of two MACs after an nftables heal).
    pub fn majority_regained(&mut self, now: Instant, live: usize) -> bool {
        let before = self.silenced();
        if self.state == State::Connected {
            self.state = State::Rejoining {
                until: now + self.rejoin_quiet,
            };
            // `last_live` holds the others seen live within the isolation bound (`observe`
            // ran on this view first).
            self.known_before = live.max(self.last_live.len() + 1);
            self.heard_back = false;
        }
        before != self.silenced()
    }

    /// Time passed. Returns whether [`silenced`](Self::silenced) changed.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let before = self.silenced();
        self.expire(now);
        before != self.silenced()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should run next, if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Connected => None,
            State::Isolated {
                since, first_back, ..
            } => {
                let bound = *since + ISOLATION_BOUND;
                Some(first_back.map_or(bound, |at| bound.min(at + REJOIN_SETTLE)))
            }
            State::Rejoining { until } => Some(*until),
        }
    }

    fn expire(&mut self, now: Instant) {
        match &self.state {
            State::Isolated {
                since,
                first_back,
                cut_off,
                ..
            } => {
                if now >= *since + ISOLATION_BOUND {
                    // Nobody came back: the last survivor.
                    self.outlasted_cut_off = *cut_off;
                    self.state = State::Connected;
                } else if first_back.is_some_and(|at| now >= at + REJOIN_SETTLE) {
                    self.state = State::Rejoining {
                        until: now + self.rejoin_quiet,
                    };
                }
            }
            State::Rejoining { until } if now >= *until => {
                self.state = State::Connected;
                self.heard_back = false;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MemberState::{Alive, Dead, Left, Suspect};

    fn view(states: &[(&str, MemberState)]) -> Vec<Member> {
        states
            .iter()
            .map(|(name, state)| Member {
                name: (*name).into(),
                addr: "198.18.0.1:7946".parse().unwrap(),
                state: *state,
                meta: Default::default(),
            })
            .collect()
    }

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn losing_every_peer_isolates_until_a_majority_is_back() {
        let t0 = Instant::now();
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        assert!(!i.observe(t0, "a", &view(&[("a", Alive), ("b", Alive), ("c", Alive)])));
        // One by one, as the gossip reports them: suspect is still live.
        i.observe(
            t0 + 100 * MS,
            "a",
            &view(&[("a", Alive), ("b", Dead), ("c", Suspect)]),
        );
        assert!(!i.silenced());
        assert!(i.observe(
            t0 + 250 * MS,
            "a",
            &view(&[("a", Alive), ("b", Dead), ("c", Dead)])
        ));
        assert!(i.silenced());
        assert_eq!(i.poll_timeout(), Some(t0 + 250 * MS + ISOLATION_BOUND));
        // Still alone some seconds later (the link is down): still silent.
        assert!(!i.observe(
            t0 + 3000 * MS,
            "a",
            &view(&[("a", Alive), ("b", Dead), ("c", Dead)])
        ));
        assert!(!i.handle_timeout(t0 + 3000 * MS));
        assert!(i.silenced());
        // The merge: both back at once; quiet a little longer, so they hear this node first.
        let merged = t0 + 4000 * MS;
        assert!(!i.observe(
            merged,
            "a",
            &view(&[("a", Alive), ("b", Alive), ("c", Alive)])
        ));
        assert!(i.silenced());
        assert_eq!(i.poll_timeout(), Some(merged + REJOIN_QUIET));
        assert!(i.handle_timeout(merged + REJOIN_QUIET));
        assert!(!i.silenced());
        assert_eq!(i.poll_timeout(), None);
        assert_eq!(i.entered(), 1);
    }

    #[test]
    fn a_partial_merge_waits_a_settle_bound_shorter_than_a_probe_interval() {
        let t0 = Instant::now();
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        let all = [
            ("a", Alive),
            ("b", Alive),
            ("c", Alive),
            ("d", Alive),
            ("e", Alive),
        ];
        i.observe(t0, "a", &view(&all));
        let alone = [
            ("a", Alive),
            ("b", Dead),
            ("c", Dead),
            ("d", Dead),
            ("e", Dead),
        ];
        assert!(i.observe(t0 + 300 * MS, "a", &view(&alone)));
        // One of five back: 2 of 5 is no majority; the settle bound starts.
        let one = [
            ("a", Alive),
            ("b", Alive),
            ("c", Dead),
            ("d", Dead),
            ("e", Dead),
        ];
        let back = t0 + 2000 * MS;
        assert!(!i.observe(back, "a", &view(&one)));
        assert_eq!(i.poll_timeout(), Some(back + REJOIN_SETTLE));
        assert!(!i.handle_timeout(back + REJOIN_SETTLE - MS));
        assert!(!i.handle_timeout(back + REJOIN_SETTLE));
        assert!(i.silenced(), "rejoining: quiet");
        assert!(i.handle_timeout(back + REJOIN_SETTLE + REJOIN_QUIET));
        assert!(!i.silenced());
    }

    #[test]
    fn the_last_survivor_answers_again_after_the_bound() {
        let t0 = Instant::now();
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        i.observe(t0, "a", &view(&[("a", Alive), ("b", Alive), ("c", Alive)]));
        assert!(i.observe(t0, "a", &view(&[("a", Alive), ("b", Dead), ("c", Dead)])));
        assert!(!i.handle_timeout(t0 + ISOLATION_BOUND - MS));
        assert!(i.handle_timeout(t0 + ISOLATION_BOUND));
        assert!(!i.silenced());
        // The same view again does not isolate anew: the peers were lost too long ago.
        assert!(!i.observe(
            t0 + ISOLATION_BOUND + 1000 * MS,
            "a",
            &view(&[("a", Alive), ("b", Dead), ("c", Dead)])
        ));
    }

    #[test]
    fn members_lost_seconds_apart_are_deaths_not_isolation() {
        // A survivor: one peer died, and two seconds later a stale rumour from a returning
        // host has the other dead for a moment.
        let t0 = Instant::now();
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        i.observe(t0, "b", &view(&[("a", Alive), ("b", Alive), ("c", Alive)]));
        i.observe(
            t0 + 100 * MS,
            "b",
            &view(&[("a", Alive), ("b", Alive), ("c", Dead)]),
        );
        assert!(!i.observe(
            t0 + 2100 * MS,
            "b",
            &view(&[("a", Dead), ("b", Alive), ("c", Dead)])
        ));
        assert!(!i.silenced());
    }

    #[test]
    fn two_node_clusters_and_graceful_leaves_never_isolate() {
        let t0 = Instant::now();
        let mut pair = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        pair.observe(t0, "a", &view(&[("a", Alive), ("b", Alive)]));
        assert!(!pair.observe(t0 + MS, "a", &view(&[("a", Alive), ("b", Dead)])));
        let mut rolling = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        rolling.observe(t0, "a", &view(&[("a", Alive), ("b", Alive), ("c", Alive)]));
        rolling.observe(
            t0 + MS,
            "a",
            &view(&[("a", Alive), ("b", Left), ("c", Alive)]),
        );
        assert!(!rolling.observe(
            t0 + 2 * MS,
            "a",
            &view(&[("a", Alive), ("b", Left), ("c", Dead)])
        ));
        assert!(!rolling.silenced());
    }

    #[test]
    fn a_cut_off_silences_until_gossip_reconnects_whatever_the_view_says() {
        let t0 = Instant::now();
        let quiet = 100 * MS;
        let all = view(&[("a", Alive), ("b", Alive), ("c", Alive)]);
        let mut i = Isolation::new(quiet, quiet);
        i.observe(t0, "a", &all);
        assert!(i.cut_off(t0 + MS, "a", &all), "silenced");
        assert_eq!(i.entered(), 1);
        // A thawed node's view still shows everyone live: that does not end it.
        assert!(!i.observe(t0 + 2 * MS, "a", &all));
        assert!(i.silenced());
        assert!(!i.cut_off(t0 + 3 * MS, "a", &all), "one episode");
        assert!(!i.reconnected(t0 + 50 * MS), "still quiet");
        assert_eq!(i.poll_timeout(), Some(t0 + 50 * MS + quiet));
        assert!(i.handle_timeout(t0 + 50 * MS + quiet));
        assert!(!i.silenced());
        // A reconnection without a cut-off changes nothing.
        assert!(!i.reconnected(t0 + 200 * MS));
        assert!(!i.silenced());
    }

    #[test]
    fn every_member_hearing_us_back_shortens_the_quiet_and_nothing_else() {
        let t0 = Instant::now();
        let (quiet, heard) = (100 * MS, 20 * MS);
        let all = view(&[("a", Alive), ("b", Alive), ("c", Alive)]);
        let mut i = Isolation::new(quiet, heard);
        i.observe(t0, "a", &all);
        // Heard back while connected, or while still cut off: nothing changes.
        assert!(!i.heard_back(t0 + MS, 3));
        assert!(!i.silenced());
        i.cut_off(t0 + 2 * MS, "a", &all);
        assert!(!i.heard_back(t0 + 3 * MS, 3));
        assert!(i.silenced(), "only a reconnection ends a cut-off");
        // Reconnected, one of the three not yet back in the view: the whole quiet...
        assert!(!i.reconnected(t0 + 50 * MS));
        assert_eq!(i.poll_timeout(), Some(t0 + 50 * MS + quiet));
        assert!(!i.heard_back(t0 + 51 * MS, 2));
        assert_eq!(i.poll_timeout(), Some(t0 + 50 * MS + quiet));
        let pair = view(&[("a", Alive), ("b", Alive), ("c", Dead)]);
        assert!(!i.observe(t0 + 51 * MS, "a", &pair));
        assert_eq!(i.poll_timeout(), Some(t0 + 50 * MS + quiet));
        // ...until it is: `heard` more from then.
        assert!(!i.observe(t0 + 52 * MS, "a", &all));
        assert_eq!(i.poll_timeout(), Some(t0 + 52 * MS + heard));
        assert!(!i.handle_timeout(t0 + 52 * MS + heard - MS));
        assert!(i.handle_timeout(t0 + 52 * MS + heard));
        assert!(!i.silenced());
        // Acknowledged late, after most of the quiet: it ends when it would have.
        i.cut_off(t0 + 200 * MS, "a", &all);
        i.reconnected(t0 + 210 * MS);
        assert!(!i.heard_back(t0 + 300 * MS, 3));
        assert_eq!(i.poll_timeout(), Some(t0 + 210 * MS + quiet));
    }

    #[test]
    fn a_regained_majority_waits_for_every_member_live_before_the_split() {
        let t0 = Instant::now();
        let (quiet, heard) = (100 * MS, 20 * MS);
        let names = ["a", "b", "c", "d", "e"];
        let states = |live: &[&str]| {
            let v: Vec<(&str, MemberState)> = names
                .iter()
                .map(|n| (*n, if live.contains(n) { Alive } else { Dead }))
                .collect();
            view(&v)
        };
        let mut i = Isolation::new(quiet, heard);
        i.observe(t0, "a", &states(&names));
        // The split: a and b on the minority side (the guard silences them, not isolation).
        i.observe(t0 + 300 * MS, "a", &states(&["a", "b"]));
        assert!(!i.silenced());
        // The heal: c is back first (its push/pull), d and e still dead here.
        let healed = t0 + 1300 * MS;
        i.observe(healed, "a", &states(&["a", "b", "c"]));
        assert!(i.majority_regained(healed, 3));
        assert_eq!(i.poll_timeout(), Some(healed + quiet));
        // Those three acknowledged: not yet, d and e are still dead in this view.
        assert!(!i.heard_back(healed + 5 * MS, 3));
        assert_eq!(i.poll_timeout(), Some(healed + quiet));
        // They revive: `heard` more from then.
        assert!(!i.observe(healed + 40 * MS, "a", &states(&names)));
        assert_eq!(i.poll_timeout(), Some(healed + 40 * MS + heard));
        // After a split longer than the bound, only the members seen live within it count.
        let later = healed + ISOLATION_BOUND + 1000 * MS;
        assert!(i.handle_timeout(healed + 60 * MS));
        i.observe(later, "a", &states(&["a", "b", "c", "d"]));
        i.observe(later + 300 * MS, "a", &states(&["a", "b"]));
        let back = later + ISOLATION_BOUND + 500 * MS;
        i.observe(back, "a", &states(&["a", "b", "c"]));
        assert!(i.majority_regained(back, 3));
        assert!(!i.heard_back(back + 5 * MS, 3));
        assert_eq!(i.poll_timeout(), Some(back + 5 * MS + heard));
    }

    #[test]
    fn a_cut_off_in_a_two_node_cluster_keeps_answering() {
        let t0 = Instant::now();
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        let pair = view(&[("a", Alive), ("b", Alive)]);
        i.observe(t0, "a", &pair);
        assert!(!i.cut_off(t0 + MS, "a", &pair));
        assert!(!i.silenced());
    }

    #[test]
    fn a_cut_off_outlasting_the_bound_answers_then_rejoins_quietly_when_heard() {
        let t0 = Instant::now();
        let all = view(&[("a", Alive), ("b", Alive), ("c", Alive)]);
        let mut i = Isolation::new(REJOIN_QUIET, REJOIN_QUIET);
        i.observe(t0, "a", &all);
        i.cut_off(t0, "a", &all);
        assert!(
            i.handle_timeout(t0 + ISOLATION_BOUND),
            "the last survivor answers"
        );
        assert!(
            i.reconnected(t0 + ISOLATION_BOUND + MS),
            "back: quiet first"
        );
        assert!(i.silenced());
    }
}
