//! The differences the test allows, each with the reason vigil's behaviour is right, and
//! what the allowed list may look at.

use crate::APP_NAMESPACES;
use crate::compare::{Difference, EVENTS, POOL_STATUS};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A difference that is expected, and why ours is right.
pub(crate) struct Allowed {
    pub(crate) name: &'static str,
    pub(crate) why: &'static str,
    pub(crate) applies: fn(&Difference, &StepContext) -> bool,
    /// What the two sides hold after it.
    pub(crate) leaves: Leaves,
}

impl std::fmt::Debug for Allowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// What an allowed difference leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaves {
    /// The same state on both sides (a difference in what was said, not in what is held).
    SameState,
    /// Different, each valid, states in which the Services concerned hold the same IPs
    /// together, whoever holds which (MetalLB's random order among equal Services).
    SameIpsTogether,
    /// Different, each valid, states in which the Services concerned may hold different IPs
    /// (another pool, or an IP on one side only).
    OtherIps,
}

/// What the allowed list may look at.
pub(crate) struct StepContext {
    /// MetalLB's total events per Service before this step.
    pub(crate) metallb_event_totals: BTreeMap<String, i32>,
    /// LoadBalancer Services holding no IP on MetalLB's side before this step.
    pub(crate) waiting_before: BTreeSet<String>,
    /// Services that were waiting, or whose IPs changed in this step on both sides.
    pub(crate) contenders: BTreeSet<String>,
    /// Whether the contenders hold the same set of IPs on both sides, whoever holds which.
    pub(crate) contenders_hold_the_same_ips: bool,
    /// Services given IPs from different pools on the two sides, when MetalLB ranks those two
    /// pools equally, and those pools.
    pub(crate) pool_ties: BTreeSet<String>,
    /// Pools (after this step) whose `namespaceSelectors` match no namespace.
    pub(crate) unmatched_selector_pools: Vec<String>,
}

/// client-go's event recorder (which MetalLB's controller uses) drops events about one object
/// beyond a burst of 25 (one more per 5 minutes: its EventCorrelator spam filter); kube-rs's
/// recorder keeps one Event per message and counts repeats in `series`, so nothing is dropped.
pub(crate) const SPAM_FILTER_BURST: i32 = 25;

pub(crate) const ALLOWED: &[Allowed] = &[
    Allowed {
        name: "metallb-event-spam-filter",
        why: "MetalLB's client-go recorder drops events about a Service after 25 of them \
              (EventCorrelator spam filter); vigil's recorder counts repeats in the Event's series",
        applies: |d, ctx| {
            d.what == EVENTS
                && ctx
                    .metallb_event_totals
                    .get(&d.key)
                    .is_some_and(|n| *n >= SPAM_FILTER_BURST)
        },
        leaves: Leaves::SameState,
    },
    Allowed {
        name: "metallb-deprecated-annotation-on-every-pass",
        why: "MetalLB means to raise deprecatedAnnotation only when it changes the Service, but \
              compares its fresh ingress (no ipMode) with the stored one (ipMode: VIP, filled in \
              by the API server since Kubernetes 1.30), so it sees a change, and raises it, every \
              time it looks at an allocated Service; vigil raises it when it writes",
        applies: |d, _| {
            d.only.as_ref().is_some_and(|(metallb, vigil)| {
                vigil.is_empty()
                    && metallb
                        .iter()
                        .all(|(t, r)| t == "Warning" && r == "deprecatedAnnotation")
            })
        },
        leaves: Leaves::SameState,
    },
    Allowed {
        name: "metallb-order-among-equals",
        why: "when several Services are given IPs in one pass (after a pool or namespace change, \
              or when an IP frees up and several are waiting), MetalLB takes them in its \
              informer cache's map order, which is random (its sort only puts Services carrying \
              more IPs first); vigil takes them by namespace and name, one of MetalLB's orders. \
              Allowed only for those Services: ones given IPs on both sides that together hold \
              the same IPs on both sides, or ones that were waiting, at least two of them (and \
              then their pools' counters)",
        applies: |d, ctx| {
            // Pool counters follow from which of them got what, unless they hold the same IPs
            // together: then they count the same.
            let theirs = |set: &BTreeSet<String>| {
                set.contains(&d.key) || d.what == POOL_STATUS && !ctx.contenders_hold_the_same_ips
            };
            ctx.contenders.len() >= 2
                && (ctx.contenders_hold_the_same_ips && theirs(&ctx.contenders)
                    || ctx.waiting_before.len() >= 2 && theirs(&ctx.waiting_before))
        },
        leaves: Leaves::SameIpsTogether,
    },
    Allowed {
        name: "metallb-order-among-equal-pools",
        why: "MetalLB tries pools without serviceAllocation in Go map order (random) and sorts \
              equal priorities unstably; vigil breaks those ties by pool name (one of MetalLB's \
              orders; lb::pool's documented difference). Allowed only for a Service whose two \
              pools MetalLB ranks equally, and those pools' counters",
        applies: |d, ctx| ctx.pool_ties.contains(&d.key),
        leaves: Leaves::OtherIps,
    },
    Allowed {
        name: "metallb-pool-status-race",
        why: "MetalLB's pool status controller may look at a new pool before its allocator knows \
              it, read zero counters, find them equal to the empty status and write nothing until \
              the next allocation in that pool; vigil writes a new pool's counters at once",
        applies: |d, _| d.what == POOL_STATUS && d.metallb == "Some([None, None, None, None])",
        leaves: Leaves::SameState,
    },
    Allowed {
        name: "metallb-selector-matching-no-namespace",
        why: "MetalLB resolves namespaceSelectors into a namespace list when it reads the \
              pools, and an empty list means no restriction, so a pool whose selectors match no \
              namespace admits every namespace; vigil admits only matching namespaces",
        applies: |_, ctx| !ctx.unmatched_selector_pools.is_empty(),
        leaves: Leaves::OtherIps,
    },
];

/// Pools whose `namespaceSelectors` (`matchLabels` only, as the test writes them) match none
/// of the test's namespaces (the others carry no labels the test selects on).
pub(crate) fn unmatched_selector_pools(
    pools: &BTreeMap<String, Value>,
    ns_labels: &BTreeMap<&'static str, BTreeMap<String, String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, spec) in pools {
        let Some(selectors) = spec["serviceAllocation"]["namespaceSelectors"].as_array() else {
            continue;
        };
        if selectors.is_empty() {
            continue;
        }
        let matches = |sel: &Value| {
            APP_NAMESPACES.iter().any(|ns| {
                let labels = ns_labels.get(ns).cloned().unwrap_or_default();
                sel["matchLabels"].as_object().is_some_and(|want| {
                    want.iter()
                        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
                })
            })
        };
        if !selectors.iter().any(matches) {
            out.push(name.clone());
        }
    }
    out
}
