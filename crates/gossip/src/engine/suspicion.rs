//! Lifeguard's suspicion timeout: it starts long and shrinks as independent confirmations of
//! the suspicion arrive, so a node that really died is declared dead soon, while a lone
//! accusation leaves a live node plenty of time to refute it.

use core::time::Duration;
use std::time::Instant;

/// One suspicion episode about one member.
#[derive(Debug, Clone)]
pub(crate) struct Suspicion {
    /// When the suspicion began.
    pub(crate) started: Instant,
    /// Confirmations that would bring the timeout down to `min`.
    pub(crate) k: usize,
    pub(crate) min: Duration,
    pub(crate) max: Duration,
    /// Who has accused so far (the first accuser included, so it cannot confirm itself).
    pub(crate) accusers: Vec<Box<str>>,
    /// Extra confirmation from strong evidence (port unreachable), counted once.
    pub(crate) strong_evidence: bool,
    /// Distinguishes this episode from later ones in the timer heap.
    pub(crate) episode: u64,
}

impl Suspicion {
    pub(crate) fn new(
        started: Instant,
        from: &str,
        k: usize,
        min: Duration,
        max: Duration,
        episode: u64,
    ) -> Self {
        Self {
            started,
            k,
            min,
            max,
            accusers: vec![from.into()],
            strong_evidence: false,
            episode,
        }
    }

    fn confirmations(&self) -> usize {
        self.accusers.len() - 1 + usize::from(self.strong_evidence)
    }

    /// Records an accusation; true if it is a new, independent confirmation.
    pub(crate) fn confirm(&mut self, from: &str) -> bool {
        if self.confirmations() >= self.k || self.accusers.iter().any(|a| &**a == from) {
            return false;
        }
        self.accusers.push(from.into());
        true
    }

    /// Records strong evidence as one confirmation; true if it changed the timeout.
    pub(crate) fn confirm_strong(&mut self) -> bool {
        if self.strong_evidence || self.confirmations() >= self.k {
            return false;
        }
        self.strong_evidence = true;
        true
    }

    /// When the suspicion expires, given the confirmations so far.
    pub(crate) fn deadline(&self) -> Instant {
        self.started + timeout(self.confirmations(), self.k, self.min, self.max)
    }
}

/// Lifeguard's formula: `max - (ln(c + 1) / ln(k + 1)) * (max - min)`, truncated to whole
/// milliseconds and never below `min`.
pub(crate) fn timeout(confirmations: usize, k: usize, min: Duration, max: Duration) -> Duration {
    if k == 0 {
        return min;
    }
    let fraction = ((confirmations as f64) + 1.0).ln() / ((k as f64) + 1.0).ln();
    let raw = max.as_secs_f64() - fraction * (max.as_secs_f64() - min.as_secs_f64());
    let ms = (raw * 1000.0).floor().max(0.0) as u64;
    Duration::from_millis(ms).max(min)
}

/// The minimum suspicion timeout for a cluster of `n` nodes:
/// `mult * max(1, log10(max(1, n))) * interval`, with the log truncated to thousandths.
pub(crate) fn min_timeout(mult: usize, n: usize, interval: Duration) -> Duration {
    let log = (n.max(1) as f64).log10().max(1.0);
    let log = (log * 1000.0).floor() / 1000.0;
    interval.mul_f64(mult as f64 * log)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// memberlist's `TestSuspicionTimeout` table (mult 3, 1 s interval).
    #[test]
    fn minimum_scales_with_log_of_cluster_size() {
        for (n, want) in [
            (5, 1.0),
            (10, 1.0),
            (50, 1.698),
            (100, 2.0),
            (500, 2.698),
            (1000, 3.0),
        ] {
            let got = min_timeout(3, n, Duration::from_secs(1));
            assert!(
                (got.as_secs_f64() - 3.0 * want).abs() < 1e-6,
                "n={n}: {got:?}"
            );
        }
    }

    /// memberlist's `remainingSuspicionTime` table: min 2 s, max 30 s, k 3.
    #[test]
    fn timeout_shrinks_with_confirmations() {
        let (min, max) = (secs(2.0), secs(30.0));
        assert_eq!(timeout(0, 3, min, max), secs(30.0));
        assert_eq!(timeout(1, 3, min, max), secs(16.0));
        assert_eq!(timeout(2, 3, min, max), Duration::from_millis(7_810));
        assert_eq!(timeout(3, 3, min, max), secs(2.0));
        assert_eq!(timeout(4, 3, min, max), secs(2.0));
        assert_eq!(timeout(0, 0, min, max), min);
    }

    #[test]
    fn confirmations_are_independent_and_bounded() {
        let t0 = Instant::now();
        let mut s = Suspicion::new(t0, "a", 2, secs(1.0), secs(6.0), 1);
        assert!(!s.confirm("a"), "the accuser cannot confirm itself");
        assert!(s.confirm("b"));
        assert!(!s.confirm("b"));
        assert!(s.confirm_strong());
        assert!(!s.confirm("c"), "k reached");
        assert_eq!(s.deadline(), t0 + secs(1.0));
    }
}
