//! Pacing of gratuitous frames: a generic cell rate algorithm (a token bucket kept as one
//! instant), so that re-announcing thousands of VIPs goes out at a steady rate instead of one
//! burst that neighbours and switch control planes would drop.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// Admits frames at `rate` per second after a burst of `burst`.
#[derive(Debug, Clone)]
pub(super) struct Pacer {
    /// Time per frame; `None`: unpaced.
    interval: Option<Duration>,
    /// How far ahead of `now` the budget may be spent: `burst - 1` intervals.
    tolerance: Duration,
    /// How far ahead of `now` the budget is spent when a batch of frames may leave again:
    /// waking for every single frame would cost a wake-up (and a scan of the schedules) per
    /// frame, so an empty budget waits until an eighth of the burst is back.
    batch_tolerance: Duration,
    /// When the budget is back to full ("theoretical arrival time"); `None` before any frame.
    full_at: Option<Instant>,
}

impl Pacer {
    pub(super) fn new(rate: Option<NonZeroU32>, burst: u32) -> Self {
        let interval = rate.map(|r| Duration::from_secs(1) / r.get());
        let burst = burst.max(1);
        let batch = (burst / 8).max(1);
        let tolerance = interval.map_or(Duration::ZERO, |i| i * (burst - 1));
        let batch_tolerance = interval.map_or(Duration::ZERO, |i| i * (burst - batch));
        Self {
            interval,
            tolerance,
            batch_tolerance,
            full_at: None,
        }
    }

    /// When to wake up to send more: once a batch of frames may leave; `None`: any time.
    pub(super) fn ready_at(&self) -> Option<Instant> {
        let full_at = self.full_at?;
        full_at.checked_sub(self.batch_tolerance)
    }

    /// How many frames may leave at `now` (at least one when any may; unpaced: `u32::MAX`).
    pub(super) fn allowance(&self, now: Instant) -> u32 {
        let Some(interval) = self.interval else {
            return u32::MAX;
        };
        let spent = self
            .full_at
            .map_or(Duration::ZERO, |f| f.saturating_duration_since(now));
        if spent > self.tolerance {
            return 0;
        }
        let left = self.tolerance - spent;
        let whole = left.as_nanos() / interval.as_nanos().max(1);
        u32::try_from(whole).unwrap_or(u32::MAX).saturating_add(1)
    }

    /// Records `frames` sent at `now` (a round may overdraw the budget by its last frame; the
    /// next one then waits for it).
    pub(super) fn charge(&mut self, now: Instant, frames: u32) {
        let Some(interval) = self.interval else {
            return;
        };
        let from = self.full_at.map_or(now, |f| f.max(now));
        self.full_at = Some(from + interval * frames);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let t0 = Instant::now();
        let mut p = Pacer::new(NonZeroU32::new(1000), 16);
        assert_eq!(p.allowance(t0), 16);
        p.charge(t0, 16);
        assert_eq!(p.allowance(t0), 0);
        assert_eq!(p.allowance(t0 + Duration::from_millis(1)), 1);
        // The wake-up waits for a batch (an eighth of the burst).
        assert_eq!(p.ready_at(), Some(t0 + Duration::from_millis(2)));
        assert_eq!(p.allowance(t0 + Duration::from_millis(2)), 2);
        // Idle for long: the budget is full again, never more.
        assert_eq!(p.allowance(t0 + Duration::from_secs(10)), 16);
    }

    #[test]
    fn unpaced_admits_everything() {
        let t0 = Instant::now();
        let mut p = Pacer::new(None, 4);
        p.charge(t0, 1_000_000);
        assert_eq!(p.ready_at(), None);
        assert_eq!(p.allowance(t0), u32::MAX);
    }
}
