//! The verdict on one step, and what is still compared after an allowed difference that leaves
//! the two sides in different, each valid, states (MetalLB's random orders).
//!
//! From such a difference on, the Services it concerns form the *diverged group*, and the pools
//! their IPs come from (on either side) may count differently. The rest of the sequence is
//! still compared: everything outside the group exactly, as before; the group in aggregate:
//! the IPs its Services hold together (or, when the difference put them in other pools, how
//! many per family), how many of them hold an IP, the event reasons raised about them (as a
//! multiset), and the summed counters of its pools. A later difference about a Service outside
//! the group joins the group only when it is a consequence of the divergence: that Service holds,
//! held or was refused an IP the group holds on either side, or its pool is one of the group's.
//! Anything else is a difference as before. Once a step shows no difference at all, the two
//! sides are aligned again and every step is compared in full.

use crate::allowed::{ALLOWED, Allowed, Leaves, SPAM_FILTER_BURST, StepContext};
use crate::compare::{Difference, compare};
use crate::seen::{Seen, raised};
use std::collections::{BTreeMap, BTreeSet};

/// The Services and pools in which the two sides may differ since an allowed difference.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Divergence {
    /// Services whose IPs, pool or events may differ.
    pub(crate) services: BTreeSet<String>,
    /// Pools whose counters may differ besides those the group's IPs come from.
    pub(crate) pools: BTreeSet<String>,
    /// Whether the group may hold other IPs on each side (otherwise it holds the same IPs
    /// together, whoever holds which).
    pub(crate) other_ips: bool,
}

/// How much of a step was compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Coverage {
    /// The two sides were aligned before the step: every Service, event and pool compared.
    Full,
    /// Diverged: everything outside the group compared exactly, and the group's aggregates
    /// matched.
    Partial,
    /// Diverged, and the group's aggregates differed, as they may once its Services meet
    /// different states on the two sides: only what lies outside the group was compared.
    Skipped,
}

/// The verdict on one step.
#[derive(Debug)]
pub(crate) struct Verdict {
    pub(crate) coverage: Coverage,
    /// Differences the allowed list covers, each with its entry.
    pub(crate) allowed: Vec<(Difference, &'static Allowed)>,
    /// Differences nothing covers.
    pub(crate) failures: Vec<Difference>,
    /// Services that joined the group in this step as consequences of the divergence.
    pub(crate) joined: Vec<String>,
    /// The group's aggregates that differed ([`Coverage::Skipped`]).
    pub(crate) group_mismatch: Vec<String>,
    /// The divergence after the step (`None`: aligned).
    pub(crate) divergence: Option<Divergence>,
}

impl Verdict {
    /// Whether the step deserves a second, longer quiet period before it counts: a slow
    /// controller must not pass for a difference (`new` selects those not already seen at
    /// the last step, which had their second look), a divergence or a group that no longer
    /// compares.
    pub(crate) fn worth_a_second_look(&self, new: impl Fn(&Difference) -> bool) -> bool {
        self.failures.iter().any(new)
            || self.coverage == Coverage::Skipped
            || !self.joined.is_empty()
            || self
                .allowed
                .iter()
                .any(|(_, a)| a.leaves != Leaves::SameState)
    }
}

impl Divergence {
    /// Pools whose counters may differ: the recorded ones, and every pool a group Service's
    /// IPs came from on either side, before or after the step.
    fn pools(&self, before: &(Seen, Seen), after: &(Seen, Seen)) -> BTreeSet<String> {
        let mut out = self.pools.clone();
        for seen in [&before.0, &before.1, &after.0, &after.1] {
            for key in &self.services {
                if let Some(pool) = seen.services.get(key).and_then(|s| s.pool.clone()) {
                    out.insert(pool);
                }
            }
        }
        out
    }

    /// IPs a group Service holds on either side, before or after the step.
    fn ips(&self, before: &(Seen, Seen), after: &(Seen, Seen)) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for seen in [&before.0, &before.1, &after.0, &after.1] {
            for key in &self.services {
                if let Some(s) = seen.services.get(key) {
                    out.extend(s.ingress.iter().cloned());
                }
            }
        }
        out
    }

    fn covers(&self, d: &Difference, before: &(Seen, Seen), after: &(Seen, Seen)) -> bool {
        if d.is_service() {
            self.services.contains(&d.key)
        } else {
            self.pools(before, after).contains(&d.key)
        }
    }

    /// Whether the difference about Service `d.key` follows from the divergence: the Service
    /// holds (or held) on either side an IP the group holds on either side, or its pool is one
    /// of the group's.
    fn explains(&self, d: &Difference, before: &(Seen, Seen), after: &(Seen, Seen)) -> bool {
        if !d.is_service() {
            return false;
        }
        let (ips, pools) = (self.ips(before, after), self.pools(before, after));
        [&before.0, &before.1, &after.0, &after.1]
            .iter()
            .filter_map(|seen| seen.services.get(&d.key))
            .any(|s| {
                s.ingress.iter().any(|ip| ips.contains(ip))
                    || s.pool.as_ref().is_some_and(|p| pools.contains(p))
            })
    }

    fn absorb(&mut self, d: &Difference, leaves: Leaves) {
        if d.is_service() {
            self.services.insert(d.key.clone());
        } else {
            self.pools.insert(d.key.clone());
        }
        self.other_ips |= leaves == Leaves::OtherIps;
    }

    /// The group's aggregates that differ between the two sides after the step.
    fn mismatches(
        &self,
        before: &(Seen, Seen),
        after: &(Seen, Seen),
        ctx: &StepContext,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let held = |seen: &Seen| -> BTreeSet<String> {
            self.services
                .iter()
                .filter_map(|k| seen.services.get(k))
                .flat_map(|s| s.ingress.iter().cloned())
                .collect()
        };
        let (m, v) = (held(&after.0), held(&after.1));
        if self.other_ips {
            let per_family = |ips: &BTreeSet<String>| {
                let v6 = ips.iter().filter(|ip| ip.contains(':')).count();
                (ips.len() - v6, v6)
            };
            if per_family(&m) != per_family(&v) {
                out.push(format!(
                    "IPs held per family: MetalLB {:?} / vigil {:?}",
                    per_family(&m),
                    per_family(&v)
                ));
            }
        } else if m != v {
            out.push(format!("IPs held together: MetalLB {m:?} / vigil {v:?}"));
        }
        let holders = |seen: &Seen| {
            self.services
                .iter()
                .filter_map(|k| seen.services.get(k))
                .filter(|s| !s.ingress.is_empty())
                .count()
        };
        if holders(&after.0) != holders(&after.1) {
            out.push(format!(
                "Services holding an IP: MetalLB {} / vigil {}",
                holders(&after.0),
                holders(&after.1)
            ));
        }
        // Events, unless MetalLB's recorder may have dropped some (spam filter) about one of
        // them; deprecatedAnnotation is left out (MetalLB raises it on every pass).
        let spammed = self.services.iter().any(|k| {
            ctx.metallb_event_totals
                .get(k)
                .is_some_and(|n| *n >= SPAM_FILTER_BURST)
        });
        if !spammed {
            let tally = |before: &Seen, after: &Seen| {
                let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
                for (key, reasons) in raised(before, after) {
                    if !self.services.contains(&key) {
                        continue;
                    }
                    for r in reasons {
                        if r.1 != "deprecatedAnnotation" {
                            *out.entry(r).or_default() += 1;
                        }
                    }
                }
                out
            };
            let (m, v) = (tally(&before.0, &after.0), tally(&before.1, &after.1));
            if m != v {
                out.push(format!("event reasons raised: MetalLB {m:?} / vigil {v:?}"));
            }
        }
        // Counters summed over the group's pools (a pool MetalLB has not written yet is left
        // out on both sides: the pool status race).
        let pools = self.pools(before, after);
        let written = |p: &String| {
            [&after.0, &after.1].iter().all(|seen| {
                seen.pools
                    .get(p)
                    .is_some_and(|(_, figures)| figures.iter().all(Option::is_some))
            })
        };
        let sum = |seen: &Seen| {
            let mut total = [0i64; 4];
            for p in pools.iter().filter(|p| written(p)) {
                for (t, f) in total.iter_mut().zip(seen.pools[p].1) {
                    *t += f.unwrap_or_default();
                }
            }
            total
        };
        if sum(&after.0) != sum(&after.1) {
            out.push(format!(
                "counters of pools {pools:?} summed: MetalLB {:?} / vigil {:?}",
                sum(&after.0),
                sum(&after.1)
            ));
        }
        out
    }

    /// Forgets Services and pools gone from both sides.
    fn prune(&mut self, after: &(Seen, Seen)) {
        self.services
            .retain(|k| after.0.services.contains_key(k) || after.1.services.contains_key(k));
        self.pools
            .retain(|p| after.0.pools.contains_key(p) || after.1.pools.contains_key(p));
    }
}

/// Judges the step from `before` to `after`, the sides having diverged as `prior` says.
pub(crate) fn judge(
    before: &(Seen, Seen),
    after: &(Seen, Seen),
    prior: Option<&Divergence>,
    ctx: &StepContext,
) -> Verdict {
    let differences = compare(before, after);
    let mut verdict = Verdict {
        coverage: if prior.is_some() {
            Coverage::Partial
        } else {
            Coverage::Full
        },
        allowed: Vec::new(),
        failures: Vec::new(),
        joined: Vec::new(),
        group_mismatch: Vec::new(),
        divergence: None,
    };
    if differences.is_empty() {
        // Aligned (again): every Service, event and pool the same on both sides.
        verdict.coverage = Coverage::Full;
        return verdict;
    }
    let mut group = prior.cloned();
    let mut pending = Vec::new();
    for d in differences {
        if group.as_ref().is_some_and(|g| g.covers(&d, before, after)) {
            continue;
        }
        if let Some(a) = ALLOWED.iter().find(|a| (a.applies)(&d, ctx)) {
            if a.leaves != Leaves::SameState {
                group
                    .get_or_insert_with(Divergence::default)
                    .absorb(&d, a.leaves);
            }
            verdict.allowed.push((d, a));
        } else {
            pending.push(d);
        }
    }
    // What is left may follow from the divergence; each Service that joins may explain more.
    while let Some(g) = group.as_mut() {
        let before_len = pending.len();
        let mut still = Vec::new();
        for d in pending {
            if g.covers(&d, before, after) {
                continue;
            }
            if prior.is_some() && g.explains(&d, before, after) {
                g.services.insert(d.key.clone());
                verdict.joined.push(d.key.clone());
            } else {
                still.push(d);
            }
        }
        pending = still;
        if pending.len() == before_len {
            break;
        }
    }
    verdict.failures = pending;
    verdict.joined.dedup();
    if let (Some(g), Some(_)) = (&group, prior) {
        verdict.group_mismatch = g.mismatches(before, after, ctx);
        if !verdict.group_mismatch.is_empty() {
            verdict.coverage = Coverage::Skipped;
        }
    }
    verdict.divergence = group.map(|mut g| {
        g.prune(after);
        g
    });
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seen::Shown;

    fn svc(ingress: &[&str], pool: Option<&str>) -> Shown {
        Shown {
            load_balancer: true,
            ingress: ingress.iter().map(|s| s.to_string()).collect(),
            pool: pool.map(str::to_string),
            resource_version: String::new(),
        }
    }

    fn seen(services: &[(&str, Shown)], pools: &[(&str, [i64; 4])]) -> Seen {
        Seen {
            services: services
                .iter()
                .map(|(k, s)| (k.to_string(), s.clone()))
                .collect(),
            events: BTreeMap::new(),
            pools: pools
                .iter()
                .map(|(p, f)| (p.to_string(), (String::new(), f.map(Some))))
                .collect(),
        }
    }

    fn ctx() -> StepContext {
        StepContext {
            metallb_event_totals: BTreeMap::new(),
            waiting_before: BTreeSet::new(),
            contenders: BTreeSet::new(),
            contenders_hold_the_same_ips: false,
            pool_ties: BTreeSet::new(),
            unmatched_selector_pools: Vec::new(),
        }
    }

    fn swapped() -> (Divergence, (Seen, Seen)) {
        let group = Divergence {
            services: ["a/x".to_string(), "a/y".to_string()].into(),
            ..Divergence::default()
        };
        let state = (
            seen(
                &[
                    ("a/x", svc(&["198.18.0.1"], Some("p"))),
                    ("a/y", svc(&[], None)),
                ],
                &[("p", [1, 0, 0, 0])],
            ),
            seen(
                &[
                    ("a/x", svc(&[], None)),
                    ("a/y", svc(&["198.18.0.1"], Some("p"))),
                ],
                &[("p", [1, 0, 0, 0])],
            ),
        );
        (group, state)
    }

    #[test]
    fn a_step_outside_the_group_is_compared_exactly_and_the_group_in_aggregate() {
        let (group, before) = swapped();
        let mut after = before.clone();
        for side in [&mut after.0, &mut after.1] {
            side.services
                .insert("a/z".into(), svc(&["198.18.1.0"], Some("q")));
            side.pools.insert(
                "q".into(),
                (String::new(), [Some(1), Some(0), Some(0), Some(0)]),
            );
        }
        let v = judge(&before, &after, Some(&group), &ctx());
        assert_eq!(v.coverage, Coverage::Partial);
        assert!(v.failures.is_empty(), "{:?}", v.failures);
        assert_eq!(v.divergence, Some(group.clone()));

        // Outside the group and not touching its IPs or pools: a difference, as ever.
        after.1.services.get_mut("a/z").unwrap().ingress = vec!["198.18.1.1".into()];
        let v = judge(&before, &after, Some(&group), &ctx());
        assert_eq!(v.failures.len(), 1, "{v:?}");
        assert_eq!(v.failures[0].key, "a/z");
    }

    #[test]
    fn a_service_refused_the_ip_the_group_holds_elsewhere_joins_it() {
        let (group, before) = swapped();
        let mut after = before.clone();
        // z asks for .1: MetalLB's holder shares it, vigil's does not.
        after
            .0
            .services
            .insert("a/z".into(), svc(&["198.18.0.1"], Some("p")));
        after.1.services.insert("a/z".into(), svc(&[], None));
        let v = judge(&before, &after, Some(&group), &ctx());
        assert!(v.failures.is_empty(), "{v:?}");
        assert_eq!(v.joined, ["a/z"]);
        assert_eq!(v.coverage, Coverage::Skipped, "{v:?}");
        assert!(v.divergence.unwrap().services.contains("a/z"));
    }

    #[test]
    fn no_difference_at_all_aligns_the_sides_again() {
        let (group, before) = swapped();
        let after = (Seen::default(), Seen::default());
        let v = judge(&before, &after, Some(&group), &ctx());
        assert_eq!(v.coverage, Coverage::Full);
        assert_eq!(v.divergence, None);
    }

    #[test]
    fn the_group_holding_other_ips_together_is_a_skipped_step() {
        let (group, before) = swapped();
        let mut after = before.clone();
        after.1.services.get_mut("a/y").unwrap().ingress = vec!["198.18.0.2".into()];
        let v = judge(&before, &after, Some(&group), &ctx());
        assert!(v.failures.is_empty(), "{v:?}");
        assert_eq!(v.coverage, Coverage::Skipped);
        assert_eq!(v.group_mismatch.len(), 1, "{:?}", v.group_mismatch);
    }
}
