//! Pacing of gratuitous frames, on a virtual clock: thousands of VIPs announced at the
//! configured rate, none dropped, takeovers ahead of routine rounds.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use super::*;

const ETH0: u32 = 2;
const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0xaa, 0x01]);
/// Frames per second in these tests.
const RATE: u32 = 2_000;
const BURST: u32 = 64;
/// VIPs taken over or re-announced at once.
const MANY: u32 = 1_000;

fn config() -> Config {
    Config {
        announce_rate: NonZeroU32::new(RATE),
        announce_burst: BURST,
        ..Config::default()
    }
}

/// `count` IPv4 VIPs from 198.18.0.0/15, starting at the `first`-th.
fn vips(first: u32, count: u32) -> Vec<Vip> {
    let base = u32::from(Ipv4Addr::new(198, 18, 0, 0));
    (first..first + count)
        .map(|i| Vip {
            addr: IpAddr::V4(Ipv4Addr::from(base + 10 + i)),
            interfaces: InterfaceSet::All,
        })
        .collect()
}

fn announcer(config: Config, t0: Instant) -> Announcer {
    let mut a = Announcer::new(config);
    a.set_interface(
        t0,
        ETH0,
        Interface {
            name: "eth0".into(),
            mac: OUR_MAC,
            arp: true,
            ndp: true,
        },
    );
    a
}

/// Plays the driver from `now` until nothing is due before `until`: handles each timeout at
/// its instant and drains the frames, recording when each left.
fn run(a: &mut Announcer, mut now: Instant, until: Instant) -> Vec<(Instant, Transmit)> {
    let mut out = Vec::new();
    for _ in 0..1_000_000 {
        out.extend(std::iter::from_fn(|| a.poll_transmit()).map(|t| (now, t)));
        match a.poll_timeout() {
            Some(at) if at <= until => {
                assert!(at >= now, "time never goes back");
                now = at;
                a.handle_timeout(now);
            }
            _ => return out,
        }
    }
    panic!("the announcer kept waking at the same instant");
}

/// The longest `n` frames may take at `RATE` after a burst: `n / RATE`.
fn at_rate(n: usize) -> Duration {
    Duration::from_secs(1) * u32::try_from(n).unwrap() / RATE
}

/// No prefix of `sent` beats the rate: by `t`, at most the burst, one frame of overdraw (a
/// round leaves whole) and `RATE` per second since `t0`.
fn assert_paced(sent: &[(Instant, Transmit)], t0: Instant) {
    for (k, (at, _)) in sent.iter().enumerate() {
        let elapsed = at.duration_since(t0);
        let allowed = u128::from(BURST) + 1 + elapsed.as_nanos() * u128::from(RATE) / 1_000_000_000;
        assert!(
            (k as u128 + 1) <= allowed,
            "frame {k} at {elapsed:?} beats the rate"
        );
    }
}

fn first_sent(sent: &[(Instant, Transmit)]) -> BTreeMap<IpAddr, Instant> {
    let mut first = BTreeMap::new();
    for (at, t) in sent {
        first.entry(t.vip).or_insert(*at);
    }
    first
}

#[test]
fn a_thousand_vips_taken_over_at_once_leave_at_the_rate_without_loss() {
    let t0 = Instant::now();
    let mut a = announcer(config(), t0);
    a.set_owned(t0, vips(0, MANY));
    let sent = run(&mut a, t0, t0 + Duration::from_secs(60));

    let rounds = Config::default().takeover_rounds.len();
    let per_round = 2 * MANY as usize;
    assert_eq!(sent.len(), rounds * per_round, "every round of every VIP");
    assert_eq!(a.stats().transmit_queue_full, 0);
    assert_eq!(a.stats().gratuitous_arp_sent, (rounds * per_round) as u64);
    assert_paced(&sent, t0);

    // The first rounds go before any later round, and all are out within N / rate.
    let first_round = &sent[..per_round];
    let mut count: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for (_, t) in first_round {
        *count.entry(t.vip).or_default() += 1;
    }
    assert_eq!(count.len(), MANY as usize);
    assert!(
        count.values().all(|n| *n == 2),
        "a request and a reply each"
    );
    // Every VIP's first word (its gratuitous request) goes before any reply: all are out
    // within N / rate.
    assert!(sent[..MANY as usize].iter().all(|(_, t)| {
        arp::Repr::parse(&arp::Packet::new_checked(&t.frame[14..]).unwrap())
            .unwrap()
            .operation
            == arp::Operation::Request
    }));
    let first = first_sent(&sent);
    assert_eq!(first.len(), MANY as usize);
    let last_first = first.values().max().unwrap();
    assert!(*last_first <= t0 + at_rate(MANY as usize));
    // Paced, not all at once: only the burst leaves at t0.
    assert!(sent.iter().filter(|(at, _)| *at == t0).count() <= BURST as usize + 1);
}

#[test]
fn takeovers_go_before_a_reannouncement_in_progress() {
    let t0 = Instant::now();
    let mut a = announcer(config(), t0);
    let old = vips(0, MANY);
    a.set_owned(t0, old.clone());
    run(&mut a, t0, t0 + Duration::from_secs(60));

    // A member joins: every VIP is re-announced; 50 ms into it, a dead node's VIPs arrive.
    let t1 = t0 + Duration::from_secs(100);
    a.reannounce(t1);
    a.handle_timeout(t1);
    let t2 = t1 + Duration::from_millis(50);
    let before = run(&mut a, t1, t2);
    assert!(before.len() < 2 * MANY as usize, "still re-announcing");
    let new = vips(MANY, MANY);
    a.set_owned(t2, old.iter().chain(&new).cloned());
    a.handle_timeout(t2);
    let after = run(&mut a, t2, t2 + Duration::from_secs(60));

    let new_addrs: BTreeSet<IpAddr> = new.iter().map(|v| v.addr).collect();
    let per_round = 2 * MANY as usize;
    assert!(
        after[..per_round]
            .iter()
            .all(|(_, t)| new_addrs.contains(&t.vip)),
        "the first rounds of the new VIPs go before the rest of the re-announcement"
    );
    let first = first_sent(&after);
    assert!(
        new_addrs
            .iter()
            .all(|v| first[v] <= t2 + at_rate(per_round))
    );
    // The re-announcement is not lost, only delayed: every old VIP gets its round.
    let reannounced = first_sent(&[before, after].concat());
    assert!(old.iter().all(|v| reannounced.contains_key(&v.addr)));
    assert_eq!(a.stats().transmit_queue_full, 0);
}

#[test]
fn takeovers_go_before_due_refreshes() {
    let t0 = Instant::now();
    let mut a = announcer(
        Config {
            takeover_rounds: vec![Duration::ZERO],
            refresh_interval: Some(Duration::from_secs(10)),
            ..config()
        },
        t0,
    );
    let old = vips(0, MANY);
    a.set_owned(t0, old.clone());
    run(&mut a, t0, t0 + Duration::from_secs(5));

    // Refreshes fall due (spread as their first rounds were); new VIPs arrive after them.
    let t1 = t0 + Duration::from_secs(11);
    let new = vips(MANY, MANY);
    a.set_owned(t1, old.iter().chain(&new).cloned());
    a.handle_timeout(t1);
    let after = run(&mut a, t1, t1 + Duration::from_secs(5));
    let new_addrs: BTreeSet<IpAddr> = new.iter().map(|v| v.addr).collect();
    let per_round = 2 * MANY as usize;
    assert!(
        after[..per_round]
            .iter()
            .all(|(_, t)| new_addrs.contains(&t.vip))
    );
    assert_eq!(after.len(), 2 * per_round, "then every refresh");
    assert_eq!(a.stats().transmit_queue_full, 0);
}

#[test]
fn a_join_reannouncement_of_a_thousand_is_spread_at_the_rate() {
    let t0 = Instant::now();
    let mut a = announcer(config(), t0);
    a.set_owned(t0, vips(0, MANY));
    run(&mut a, t0, t0 + Duration::from_secs(60));

    let t1 = t0 + Duration::from_secs(100);
    a.reannounce(t1);
    let sent = run(&mut a, t1, t1 + Duration::from_secs(60));
    let per_round = 2 * MANY as usize;
    assert_eq!(
        sent.len(),
        Config::default().takeover_rounds.len() * per_round
    );
    assert_paced(&sent, t1);
    // Spread: the first round (routine: not split) takes about N / rate, not one instant.
    let last_first = *first_sent(&sent).values().max().unwrap();
    let burst = BURST as usize;
    assert!(last_first >= t1 + at_rate(per_round - burst - 2));
    assert!(last_first <= t1 + at_rate(per_round));
    assert_eq!(a.stats().transmit_queue_full, 0);
}

#[test]
fn unpaced_sends_every_round_at_once() {
    let t0 = Instant::now();
    let mut a = announcer(
        Config {
            announce_rate: None,
            max_queued_transmits: 4 * MANY as usize,
            ..config()
        },
        t0,
    );
    a.set_owned(t0, vips(0, MANY));
    a.handle_timeout(t0);
    assert_eq!(
        std::iter::from_fn(|| a.poll_transmit()).count(),
        2 * MANY as usize
    );
}

#[test]
fn answers_are_not_paced() {
    let t0 = Instant::now();
    let mut a = announcer(config(), t0);
    let owned = vips(0, MANY);
    a.set_owned(t0, owned.clone());
    a.handle_timeout(t0);
    while a.poll_transmit().is_some() {}
    // The burst is spent; a question still gets its answer at once.
    let IpAddr::V4(vip) = owned[MANY as usize - 1].addr else {
        unreachable!()
    };
    let client = EthernetAddress([0x02, 0, 0, 0, 0xcc, 0x01]);
    let question = frames::arp_request(client, Ipv4Addr::new(198, 18, 0, 1), vip);
    a.handle_frame(t0, ETH0, &question);
    let answer = a.poll_transmit().unwrap();
    assert_eq!(answer.kind, TransmitKind::ArpReply);
}
