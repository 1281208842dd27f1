//! Rise/fall hysteresis for local health checks, like keepalived's: a check flips to passing
//! after `rise` consecutive passes and to failing after `fall` consecutive failures. A check
//! starts out failing, so a node becomes a candidate only after its first passes. The probes
//! themselves (TCP, HTTP, a command) belong to the mode that runs them.

/// One check's hysteresis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    rise: u32,
    fall: u32,
    passing: bool,
    streak: u32,
}

impl Hysteresis {
    /// A failing check that passes after `rise` passes and fails again after `fall` failures
    /// (each at least 1).
    pub fn new(rise: u32, fall: u32) -> Self {
        Self {
            rise: rise.max(1),
            fall: fall.max(1),
            passing: false,
            streak: 0,
        }
    }

    /// Whether the check passes now.
    pub fn passing(&self) -> bool {
        self.passing
    }

    /// Records one probe's result; returns the new state when it flipped.
    pub fn record(&mut self, ok: bool) -> Option<bool> {
        if ok == self.passing {
            self.streak = 0;
            return None;
        }
        self.streak += 1;
        if self.streak >= if ok { self.rise } else { self.fall } {
            self.passing = ok;
            self.streak = 0;
            return Some(ok);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_after_rise_passes_and_fall_failures_only_in_a_row() {
        let mut h = Hysteresis::new(2, 3);
        assert!(!h.passing());
        assert_eq!(h.record(true), None);
        // A failure in between starts the count again.
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(true), None);
        assert_eq!(h.record(true), Some(true));
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(true), None);
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(false), Some(false));
        assert!(!h.passing());
    }

    #[test]
    fn one_means_every_result_counts() {
        let mut h = Hysteresis::new(1, 1);
        assert_eq!(h.record(false), None);
        assert_eq!(h.record(true), Some(true));
        assert_eq!(h.record(false), Some(false));
    }
}
