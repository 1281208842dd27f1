//! Running a sequence on both sides, one operation at a time, and the run's tally.

use crate::allowed::Leaves;
use crate::compare::Difference;
use crate::divergence::{Coverage, Divergence, judge};
use crate::ops::Op;
use crate::sides::Sides;
use crate::{QUIET, RECHECK_QUIET, TEST};
use std::collections::{BTreeMap, BTreeSet};

/// The run's tally.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) sequences: usize,
    /// Operations applied (and compared, in full or in part).
    pub(crate) operations: usize,
    /// Operations both API servers refused alike (no step).
    pub(crate) refused: usize,
    /// Operations compared in full, in part, and those whose diverged group no longer
    /// compared ([`Coverage`]).
    pub(crate) full: usize,
    pub(crate) partial: usize,
    pub(crate) skipped: usize,
    /// Sequences in which the sides diverged at least once, and times they aligned again
    /// before the sequence's end.
    pub(crate) diverged: usize,
    pub(crate) realigned: usize,
    /// Services that joined a diverged group as a consequence of the divergence.
    pub(crate) joined: usize,
    /// Later steps that still showed a difference already listed.
    pub(crate) standing_steps: usize,
    pub(crate) allowed: BTreeMap<&'static str, usize>,
    pub(crate) failures: Vec<String>,
}

impl Tally {
    pub(crate) fn summary(&self) -> String {
        format!(
            "{} sequences, {} operations ({} refused by both API servers): {} compared fully, {} \
             partially, {} skipped (a diverged group no longer comparable; the rest of the \
             cluster still compared); {} sequences diverged, {} realignments, {} Services joined \
             a diverged group; {} differences not allowed ({} more steps still showing one), \
             allowed: {:?}",
            self.sequences,
            self.operations,
            self.refused,
            self.full,
            self.partial,
            self.skipped,
            self.diverged,
            self.realigned,
            self.joined,
            self.failures.len(),
            self.standing_steps,
            self.allowed,
        )
    }
}

impl Sides {
    /// Applies `ops` and then [`Op::Clear`], judging each step.
    pub(crate) fn run_sequence(&mut self, name: &str, ops: &[Op], tally: &mut Tally) {
        tally.sequences += 1;
        let mut divergence: Option<Divergence> = None;
        let mut diverged_once = false;
        // A difference that stays from step to step is listed at its first step only.
        let mut standing: BTreeSet<String> = BTreeSet::new();
        for (i, op) in ops.iter().chain([&Op::Clear]).enumerate() {
            if !self.apply(op) {
                tally.refused += 1;
                continue;
            }
            tally.operations += 1;
            let mut after = self.settle(op, QUIET);
            let mut verdict = judge(
                &self.last,
                &after,
                divergence.as_ref(),
                &self.step_context(&after),
            );
            // A loaded machine can delay a controller past the quiet period: before a
            // difference counts (or the sides count as diverged), both get a second, longer
            // quiet period.
            let is_new = |d: &Difference| !standing.contains(&describe(d));
            if verdict.worth_a_second_look(is_new) {
                after = self.settle(op, RECHECK_QUIET);
                verdict = judge(
                    &self.last,
                    &after,
                    divergence.as_ref(),
                    &self.step_context(&after),
                );
            }
            match verdict.coverage {
                Coverage::Full => tally.full += 1,
                Coverage::Partial => tally.partial += 1,
                Coverage::Skipped => {
                    tally.skipped += 1;
                    eprintln!(
                        "{TEST}: {name} step {i}: the diverged group no longer compares: {}",
                        verdict.group_mismatch.join("; ")
                    );
                }
            }
            for (d, a) in &verdict.allowed {
                *tally.allowed.entry(a.name).or_insert(0) += 1;
                if a.leaves != Leaves::SameState {
                    eprintln!(
                        "{TEST}: {name} step {i} diverges ({}): {} of {}: MetalLB {} / vigil {}",
                        a.name, d.what, d.key, d.metallb, d.vigil
                    );
                }
            }
            if !verdict.joined.is_empty() {
                tally.joined += verdict.joined.len();
                eprintln!(
                    "{TEST}: {name} step {i}: {:?} joined the diverged group",
                    verdict.joined
                );
            }
            let now: BTreeSet<String> = verdict.failures.iter().map(describe).collect();
            for d in now.difference(&standing) {
                tally.failures.push(format!("{name} step {i} {op:?}: {d}"));
            }
            tally.standing_steps += now.intersection(&standing).count();
            standing = now;
            match (&divergence, &verdict.divergence) {
                (None, Some(_)) if !diverged_once => {
                    diverged_once = true;
                    tally.diverged += 1;
                }
                (Some(_), None) if !matches!(op, Op::Clear) => {
                    tally.realigned += 1;
                    eprintln!("{TEST}: {name} aligned again at step {i}");
                }
                _ => {}
            }
            divergence = verdict.divergence;
            self.last = after;
        }
    }
}

fn describe(d: &Difference) -> String {
    format!(
        "{} of {}: MetalLB {} / vigil {}",
        d.what, d.key, d.metallb, d.vigil
    )
}
