//! The runner's side of the ownership timeline (`vigil_speaker_core::core::Timeline`): what
//! only the runner sees goes in (member signals from gossip events, the first gratuitous frame
//! the announcer thread sent for a VIP this node took), and each change the core reports goes
//! out as one structured log line, the `vigil_failover_*` histograms and
//! [`StatusSink::ownership_changed`] (Kubernetes mode: an Event on the Service).
//!
//! The first frame is seen in the announcer thread's per-VIP counters: its count is read
//! before the owned set goes to the thread, then every [`WATCH_INTERVAL`] until it grows (or
//! the core's bound passes). The time is when the runner saw it, at most one interval late.

use crate::StatusSink;
use crate::core::{MemberSignal, OwnershipChange, SpeakerCore, Stage, StatusChange};
use crate::observe::state::Shared;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;
use tracing::info;
use vigil_gossip_net::Event;
use vigil_l2_net::{DriverStats, Handle};

/// How often the announcer's counters are read while a taken VIP waits for its first frame.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(2);

/// The member signal a gossip event carries, if any.
pub(crate) fn member_signal(event: &Event) -> Option<(&str, MemberSignal)> {
    use vigil_gossip::Event as Gossip;
    let Event::Gossip(event) = event else {
        return None;
    };
    Some(match event {
        Gossip::ProbeMissed { name } => (name, MemberSignal::ProbeMissed),
        Gossip::Suspect { member, .. } => (&member.name, MemberSignal::Suspect),
        Gossip::Dead(m) => (&m.name, MemberSignal::Dead),
        Gossip::Left(m) => (&m.name, MemberSignal::Left),
        Gossip::Join(m) | Gossip::Refuted(m) => (&m.name, MemberSignal::Alive),
        _ => return None,
    })
}

/// Hands a gossip event's member signal to the core (before the view it changes).
pub(crate) fn on_gossip_event(core: &mut SpeakerCore, event: &Event) {
    if let Some((name, signal)) = member_signal(event) {
        core.handle_member_signal(now(), name, signal);
    }
}

/// Watches the announcer for the first frame of each VIP this node took.
#[derive(Debug, Default)]
pub(crate) struct AnnounceWatch {
    /// Each VIP waiting, with the announcer's frame count for it before it was taken.
    baseline: BTreeMap<IpAddr, u64>,
}

impl AnnounceWatch {
    /// Before the turn's actions go out: the frame counts of VIPs the core just took.
    pub(crate) fn arm(&mut self, core: &SpeakerCore, l2: &Handle) {
        let waiting = core.awaiting_announce();
        self.baseline.retain(|vip, _| waiting.contains(vip));
        if waiting.iter().all(|vip| self.baseline.contains_key(vip)) {
            return;
        }
        l2.with_stats(|stats| {
            for vip in waiting {
                self.baseline
                    .entry(vip)
                    .or_insert_with(|| gratuitous_sent(stats, vip));
            }
        });
    }

    /// When to look again, while anything waits.
    pub(crate) fn poll_at(&self) -> Option<Instant> {
        (!self.baseline.is_empty()).then(|| Instant::now() + WATCH_INTERVAL)
    }

    /// After the turn's actions: the VIPs whose first frame went out, the changes past the
    /// bound, and every change the core reports, each logged, counted and handed to `sink`.
    pub(crate) fn report<S: StatusSink + ?Sized>(
        &mut self,
        core: &mut SpeakerCore,
        l2: &Handle,
        sink: &mut S,
        shared: &Mutex<Shared>,
    ) {
        if !self.baseline.is_empty() {
            let at = now();
            let announced: Vec<IpAddr> = l2.with_stats(|stats| {
                self.baseline
                    .iter()
                    .filter(|(vip, before)| gratuitous_sent(stats, **vip) > **before)
                    .map(|(vip, _)| *vip)
                    .collect()
            });
            for vip in announced {
                self.baseline.remove(&vip);
                core.handle_first_announce(at, vip);
            }
            core.handle_announce_timeout(at);
        }
        let mut reported = Vec::new();
        while let Some(change) = core.poll_ownership_change() {
            log_change(&change);
            sink.ownership_changed(&change);
            reported.push(change);
        }
        if !reported.is_empty() {
            let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
            for change in &reported {
                shared.failover.observe(change);
            }
        }
    }
}

/// Gratuitous frames sent about `vip` so far.
fn gratuitous_sent(stats: &DriverStats, vip: IpAddr) -> u64 {
    stats.per_vip.get(&vip).map_or(0, |c| c.gratuitous_sent)
}

/// The one log line per ownership change: every stage as milliseconds after the first.
fn log_change(c: &OwnershipChange) {
    let offsets = c.offsets();
    let ms = |stage: Stage| {
        offsets.iter().find(|(s, _)| *s == stage).map_or_else(
            || "-".to_string(),
            |(_, d)| format!("{:.1}", d.as_secs_f64() * 1e3),
        )
    };
    let name = |n: &Option<String>| n.clone().unwrap_or_else(|| "none".into());
    info!(
        event = "ownership_changed",
        vip = %c.vip,
        services = %c.services.join(","),
        previous = %name(&c.previous),
        owner = %name(&c.owner),
        next = %name(&c.next),
        cause = %c.cause,
        member = %name(&c.member),
        first_miss_ms = %ms(Stage::FirstMiss),
        suspect_ms = %ms(Stage::Suspect),
        dead_ms = %ms(Stage::Dead),
        decision_ms = %ms(Stage::Decision),
        first_announce_ms = %ms(Stage::FirstAnnounce),
        stages = offsets.len(),
        "{}",
        c.describe()
    );
}

/// The last change of every VIP for `/status`, with the wall-clock time of each decision.
pub(crate) fn status_changes(core: &SpeakerCore) -> Vec<StatusChange> {
    let wall = SystemTime::now();
    let mut changes = core.ownership_changes(now());
    for c in &mut changes {
        let at = wall
            .checked_sub(Duration::from_secs_f64(c.age_ms.max(0.0) / 1e3))
            .unwrap_or(wall);
        c.since = Some(rfc3339(at));
    }
    changes
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// `t` as RFC 3339 in UTC with milliseconds (`2026-12-06T03:40:01.123Z`).
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_clock_times_read_as_rfc_3339() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_527_201_123);
        assert_eq!(rfc3339(t), "2026-12-06T03:20:01.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }
}
