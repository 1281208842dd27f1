//! The client's view of the VIP: a thread in the client's namespace runs vigil-netlab's prober
//! (the one the benches use), asking for the VIP by ARP and for the IPv6 VIP by neighbour
//! solicitation every few milliseconds, and this module groups what answered into rounds of
//! questions. [`outage`] reads a failover out of those rounds.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as Mac;
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::netns;
use vigil_netlab::prober::{self, Event, Ipv6Question, Kind, WatchConfig};

/// Which VIP of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    /// The IPv4 VIP, asked for by ARP.
    V4,
    /// The IPv6 VIP, asked for by neighbour solicitation.
    V6,
}

/// One round of questions: when they went out and which MACs answered them (before the next
/// round).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Round {
    /// When the questions were sent, from the prober's start.
    pub(super) at: Duration,
    /// MACs that answered the ARP question.
    pub(super) v4: Vec<Mac>,
    /// MACs that answered the neighbour solicitation.
    pub(super) v6: Vec<Mac>,
}

impl Round {
    /// The answers for `family`.
    pub(super) fn answers(&self, family: Family) -> &[Mac] {
        match family {
            Family::V4 => &self.v4,
            Family::V6 => &self.v6,
        }
    }
}

/// Who asks, for what, from where.
#[derive(Debug, Clone)]
pub(super) struct Questions {
    /// The client's namespace.
    pub(super) ns: String,
    /// The client's interface index there.
    pub(super) ifindex: u32,
    /// The client's MAC.
    pub(super) mac: Mac,
    /// The client's IPv4 address.
    pub(super) src4: Ipv4Addr,
    /// The client's IPv6 address.
    pub(super) src6: Ipv6Addr,
    /// The IPv4 VIP.
    pub(super) vip4: Ipv4Addr,
    /// The IPv6 VIP, if there is one to ask for.
    pub(super) vip6: Option<Ipv6Addr>,
    /// Time between rounds.
    pub(super) interval: Duration,
    /// The prober stops by itself after this long (every traffic loop is bounded).
    pub(super) limit: Duration,
}

#[derive(Debug, Default)]
struct Shared {
    rounds: Vec<Round>,
    /// The round whose answers are still coming in (until the next one is sent).
    current: Option<Round>,
    error: Option<String>,
    done: bool,
}

/// The probing thread; stopped and joined on drop.
#[derive(Debug)]
pub(super) struct Prober {
    started: Instant,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Prober {
    /// Starts asking.
    pub(super) fn start(questions: Questions) -> std::io::Result<Self> {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let thread = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::Builder::new()
                .name("lab-probe".into())
                .spawn(move || {
                    let result = ask(&questions, started, &shared, &stop);
                    let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    s.error = result.err();
                    s.done = true;
                })?
        };
        Ok(Self {
            started,
            shared,
            stop,
            thread: Some(thread),
        })
    }

    /// Time since the prober started, the clock [`Round::at`] counts on.
    pub(super) fn now(&self) -> Duration {
        self.started.elapsed()
    }

    /// The rounds completed from index `from` on.
    pub(super) fn rounds_from(&self, from: usize) -> Vec<Round> {
        let s = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.rounds.get(from..).unwrap_or_default().to_vec()
    }

    /// How many rounds are complete.
    pub(super) fn len(&self) -> usize {
        self.shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rounds
            .len()
    }

    /// The latest complete round.
    pub(super) fn latest(&self) -> Option<Round> {
        let s = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.rounds.last().cloned()
    }

    /// Why the prober stopped, if it stopped: its error, or that it reached its time limit.
    pub(super) fn stopped(&self) -> Option<String> {
        let s = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        s.done.then(|| {
            s.error
                .clone()
                .unwrap_or_else(|| "the client's prober reached its time limit".into())
        })
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The probing loop, on its own thread.
fn ask(
    q: &Questions,
    started: Instant,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
) -> Result<(), String> {
    netns::enter(&q.ns).map_err(|e| e.to_string())?;
    let socket = PacketSocket::open(q.ifindex, Filter::Answers)
        .map_err(|e| format!("client socket: {e}"))?;
    let config = WatchConfig {
        src_mac: q.mac,
        src_ip: q.src4,
        target: q.vip4,
        interval: q.interval,
        duration: q.limit.saturating_sub(started.elapsed()),
        icmp: false,
        icmp_id: 0,
        stop_after_change: None,
        ipv6: q.vip6.map(|target| Ipv6Question {
            src_ip: q.src6,
            target,
        }),
        senders: None,
        linger: Duration::ZERO,
    };
    // The prober's clock starts now; rounds are kept on the Prober's.
    let offset = started.elapsed();
    prober::watch(&socket, &config, |event| {
        if stop.load(Ordering::SeqCst) {
            return ControlFlow::Break(());
        }
        let mut s = shared.lock().unwrap_or_else(PoisonError::into_inner);
        record(&mut s, event, offset);
        ControlFlow::Continue(())
    })
    .map_err(|e| format!("prober: {e}"))?;
    Ok(())
}

/// Files one prober event: a new round closes the one before; an answer to a question (not a
/// gratuitous announcement) joins the current round.
fn record(s: &mut Shared, event: &Event, offset: Duration) {
    match event {
        Event::Round { at, .. } => {
            let next = Round {
                at: offset + *at,
                ..Round::default()
            };
            if let Some(done) = s.current.replace(next) {
                s.rounds.push(done);
            }
        }
        Event::Answer(a) if !a.gratuitous => {
            let Some(round) = s.current.as_mut() else {
                return;
            };
            let macs = match a.kind {
                Kind::Arp => &mut round.v4,
                Kind::Ndp => &mut round.v6,
                Kind::Icmp => return,
            };
            if !macs.contains(&a.mac) {
                macs.push(a.mac);
            }
        }
        _ => {}
    }
}

/// A failover as the client saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outage {
    /// The MAC that answered after the failover.
    pub(super) new_mac: Mac,
    /// From the failure to the first round the new MAC answered.
    pub(super) takeover: Duration,
    /// The run of unanswered rounds just before the new MAC's first answer: from its first
    /// round to that answer (zero when every round was answered).
    pub(super) silent: Duration,
    /// Unanswered rounds between the failure and the new MAC's first answer.
    pub(super) unanswered: usize,
    /// Rounds after the failure that both the old and another MAC answered.
    pub(super) both: usize,
}

/// Reads the failover out of `rounds`: the failure happened at `failed_at` (on the rounds'
/// clock) to the host answering with `old`. `None` until some other MAC has answered.
pub(super) fn outage(
    rounds: &[Round],
    family: Family,
    failed_at: Duration,
    old: Mac,
) -> Option<Outage> {
    let after: Vec<&Round> = rounds.iter().filter(|r| r.at >= failed_at).collect();
    let first_new = after
        .iter()
        .position(|r| r.answers(family).iter().any(|m| *m != old))?;
    let new_round = after[first_new];
    let new_mac = *new_round
        .answers(family)
        .iter()
        .find(|m| **m != old)
        .expect("found above");
    let before = &after[..first_new];
    let unanswered = before
        .iter()
        .filter(|r| r.answers(family).is_empty())
        .count();
    let silent_run = before
        .iter()
        .rev()
        .take_while(|r| r.answers(family).is_empty())
        .last();
    let both = after
        .iter()
        .filter(|r| {
            let a = r.answers(family);
            a.contains(&old) && a.iter().any(|m| *m != old)
        })
        .count();
    Some(Outage {
        new_mac,
        takeover: new_round.at - failed_at,
        silent: silent_run.map_or(Duration::ZERO, |r| new_round.at - r.at),
        unanswered,
        both,
    })
}

/// A run of consecutive rounds that got the same answers: one line of the client's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Run {
    /// The first round's time.
    pub(super) first: Duration,
    /// The last round's time.
    pub(super) last: Duration,
    /// Who answered each of these rounds (sorted; empty: nobody).
    pub(super) answers: Vec<Mac>,
    /// How many rounds.
    pub(super) rounds: usize,
}

/// The rounds between `from` and `to` (inclusive, on the rounds' clock) as runs of identical
/// answers for `family`: what the client heard, change by change.
pub(super) fn timeline(rounds: &[Round], family: Family, from: Duration, to: Duration) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for r in rounds.iter().filter(|r| r.at >= from && r.at <= to) {
        let mut answers = r.answers(family).to_vec();
        answers.sort_unstable();
        match runs.last_mut() {
            Some(run) if run.answers == answers => {
                run.last = r.at;
                run.rounds += 1;
            }
            _ => runs.push(Run {
                first: r.at,
                last: r.at,
                answers,
                rounds: 1,
            }),
        }
    }
    runs
}

/// The timeline as text, one line per run, times in ms from `zero` (the failure); `name` says
/// who a MAC is.
pub(super) fn render_timeline(
    runs: &[Run],
    zero: Duration,
    name: impl Fn(Mac) -> String,
) -> String {
    let signed_ms = |at: Duration| -> String {
        if at >= zero {
            format!("+{}", (at - zero).as_millis())
        } else {
            format!("-{}", (zero - at).as_millis())
        }
    };
    let mut text = String::new();
    for run in runs {
        let who = if run.answers.is_empty() {
            "no answer".to_string()
        } else {
            run.answers
                .iter()
                .map(|m| name(*m))
                .collect::<Vec<_>>()
                .join(" and ")
        };
        let plural = if run.rounds == 1 { "" } else { "s" };
        text.push_str(&format!(
            "{:>7} .. {:>7} ms  {who:<34} {} question{plural}\n",
            signed_ms(run.first),
            signed_ms(run.last),
            run.rounds
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Mac = Mac([2, 0, 0, 0, 0, 1]);
    const NEW: Mac = Mac([2, 0, 0, 0, 0, 2]);

    fn rounds(answers: &[&[Mac]]) -> Vec<Round> {
        answers
            .iter()
            .enumerate()
            .map(|(i, a)| Round {
                at: Duration::from_millis(10 * i as u64),
                v4: a.to_vec(),
                v6: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn a_silent_gap_ends_at_the_new_owners_first_answer() {
        // Failure at 25 ms; rounds at 30..60 unanswered, 70 answered by the new owner.
        let r = rounds(&[&[OLD], &[OLD], &[OLD], &[], &[], &[], &[], &[NEW], &[NEW]]);
        let o = outage(&r, Family::V4, Duration::from_millis(25), OLD).unwrap();
        assert_eq!(o.new_mac, NEW);
        assert_eq!(o.takeover, Duration::from_millis(45));
        assert_eq!(o.silent, Duration::from_millis(40));
        assert_eq!(o.unanswered, 4);
        assert_eq!(o.both, 0);
    }

    #[test]
    fn a_handover_without_a_gap_is_no_silence() {
        // The old owner answers until the new one does; one round hears both.
        let r = rounds(&[&[OLD], &[OLD], &[OLD, NEW], &[NEW]]);
        let o = outage(&r, Family::V4, Duration::from_millis(5), OLD).unwrap();
        assert_eq!(o.silent, Duration::ZERO);
        assert_eq!(o.unanswered, 0);
        assert_eq!(o.both, 1);
        assert_eq!(o.takeover, Duration::from_millis(15));
    }

    #[test]
    fn no_outage_until_another_mac_answers() {
        let r = rounds(&[&[OLD], &[], &[], &[OLD]]);
        assert_eq!(outage(&r, Family::V4, Duration::ZERO, OLD), None);
        // The IPv6 answers are separate.
        let r = rounds(&[&[OLD], &[NEW]]);
        assert_eq!(outage(&r, Family::V6, Duration::ZERO, OLD), None);
    }

    #[test]
    fn only_the_trailing_silence_counts_as_the_gap() {
        // A lost answer early on, then the old owner again, then the gap before the new one.
        let r = rounds(&[&[OLD], &[], &[OLD], &[], &[], &[NEW]]);
        let o = outage(&r, Family::V4, Duration::ZERO, OLD).unwrap();
        assert_eq!(o.silent, Duration::from_millis(20));
        assert_eq!(o.unanswered, 3);
    }

    #[test]
    fn the_timeline_groups_rounds_with_the_same_answers() {
        let r = rounds(&[&[OLD], &[OLD], &[], &[], &[], &[NEW], &[OLD, NEW], &[NEW]]);
        let runs = timeline(
            &r,
            Family::V4,
            Duration::from_millis(10),
            Duration::from_millis(60),
        );
        let shape: Vec<(u128, u128, usize, usize)> = runs
            .iter()
            .map(|r| {
                (
                    r.first.as_millis(),
                    r.last.as_millis(),
                    r.answers.len(),
                    r.rounds,
                )
            })
            .collect();
        // Rounds at 10..60 ms: OLD once, silence three times, NEW, both.
        assert_eq!(
            shape,
            [
                (10, 10, 1, 1),
                (20, 40, 0, 3),
                (50, 50, 1, 1),
                (60, 60, 2, 1)
            ]
        );
        let text = render_timeline(&runs, Duration::from_millis(15), |m| {
            if m == OLD { "old".into() } else { "new".into() }
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].starts_with("     -5 ..      -5 ms  old "),
            "{text}"
        );
        assert!(
            lines[1].contains("+5 ..     +25 ms  no answer") && lines[1].ends_with("3 questions"),
            "{text}"
        );
        assert!(
            lines[3].contains("old and new") && lines[3].ends_with("1 question"),
            "{text}"
        );
    }

    fn answer(kind: Kind, mac: Mac, gratuitous: bool) -> Event {
        Event::Answer(prober::Answer {
            at: Duration::ZERO,
            kind,
            mac,
            gratuitous,
            round: 1,
        })
    }

    #[test]
    fn answers_fill_the_current_round_and_a_new_round_closes_it() {
        let mut s = Shared::default();
        let offset = Duration::from_millis(5);
        record(&mut s, &answer(Kind::Arp, OLD, false), offset);
        assert!(s.current.is_none(), "an answer before any round is dropped");
        record(
            &mut s,
            &Event::Round {
                round: 1,
                at: Duration::ZERO,
            },
            offset,
        );
        record(&mut s, &answer(Kind::Arp, OLD, false), offset);
        record(&mut s, &answer(Kind::Arp, OLD, false), offset);
        record(&mut s, &answer(Kind::Ndp, NEW, false), offset);
        // Gratuitous announcements are not answers to our questions.
        record(&mut s, &answer(Kind::Arp, NEW, true), offset);
        assert!(s.rounds.is_empty(), "the round is still open");
        let ten = Duration::from_millis(10);
        record(&mut s, &Event::Round { round: 2, at: ten }, offset);
        assert_eq!(
            s.rounds,
            vec![Round {
                at: offset,
                v4: vec![OLD],
                v6: vec![NEW],
            }]
        );
        assert_eq!(s.current.as_ref().map(|r| r.at), Some(offset + ten));
    }
}
