//! Percentiles of a trial's samples, as every bench in this repository reports them: nearest
//! rank over the sorted samples (p50 of 20 is the 10th smallest).

use std::time::Duration;

/// p50, p90 and max of `samples` (none when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spread {
    /// Median (nearest rank).
    pub(crate) p50: Duration,
    /// 90th percentile (nearest rank).
    pub(crate) p90: Duration,
    /// The largest sample.
    pub(crate) max: Duration,
}

/// The sample at nearest rank `q` (0 < q <= 1) of the sorted `sorted`.
fn rank(sorted: &[Duration], q: f64) -> Duration {
    let n = sorted.len();
    // Nearest rank: ceil(q * n), 1-based.
    let r = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[r - 1]
}

/// The spread of `samples`, or `None` when there are none.
pub(crate) fn spread(samples: &[Duration]) -> Option<Spread> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    Some(Spread {
        p50: rank(&sorted, 0.5),
        p90: rank(&sorted, 0.9),
        max: *sorted.last().expect("not empty"),
    })
}

/// Milliseconds, rounded, for tables.
pub(crate) fn ms(d: Duration) -> u128 {
    (d.as_micros() + 500) / 1000
}

/// `a / b` as "N.Nx", or "-" when `b` is zero.
pub(crate) fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        "-".to_string()
    } else {
        format!("{:.1}x", a.as_secs_f64() / b.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms_list(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = spread(&ms_list(&(1..=20).rev().collect::<Vec<_>>())).expect("samples");
        assert_eq!(s.p50, Duration::from_millis(10));
        assert_eq!(s.p90, Duration::from_millis(18));
        assert_eq!(s.max, Duration::from_millis(20));
        let one = spread(&ms_list(&[7])).expect("one sample");
        assert_eq!((one.p50, one.p90, one.max), (one.max, one.max, one.max));
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn ratios_and_rounding() {
        assert_eq!(
            ratio(Duration::from_millis(300), Duration::from_millis(100)),
            "3.0x"
        );
        assert_eq!(ratio(Duration::from_millis(3), Duration::ZERO), "-");
        assert_eq!(ms(Duration::from_micros(1499)), 1);
        assert_eq!(ms(Duration::from_micros(1500)), 2);
    }
}
