//! The speaker, the controller and MetalLB read IPAddressPools alike.
//!
//! - `speaker_and_controller_read_pools_alike` (property): for random pool sets, valid and
//!   invalid (IPv4, IPv6, IPv4-mapped, odd spellings, overlaps within and across pools,
//!   `serviceAllocation` selectors good and bad), the speaker's [`Config::parse`] (no
//!   advertisements, no nodes) and the controller's [`pools::pools`] both accept or both refuse,
//!   with the same error; when they accept, every pool covers the same addresses (the speaker's
//!   CIDRs against the controller's ranges, entry by entry and as a whole, and at every CIDR's
//!   edges) and its selectors match the same label sets as Kubernetes' rules say they should.
//! - `metallb_reads_pools_alike`: a seeded, fixed set of the same pool sets goes through
//!   MetalLB v0.16.2's own `config.For` (`metallb-alloc-probe`); MetalLB refuses exactly when
//!   vigil does, and when it accepts, its CIDRs per pool are the speaker's, printed alike. One
//!   difference is listed, not failed: see [`metallb::metallb_sees_no_overlap`].
//! - `metallb_parses_entries_alike`: single entries (random ones and every fixed odd one),
//!   each alone in a pool: the same verdict, the same CIDRs, and MetalLB's refusal word for
//!   word (vigil quotes as Go's `%q` does, `vigil_lb::GoQuoted`; entries with combining
//!   marks, which Rust's escaping cannot tell from format characters, are counted, not
//!   compared).
//! - `metallb_reads_selectors_alike`: `serviceAllocation`s (namespaces, selectors with good
//!   and bad keys, values and operators, repeats), each in a pool of its own: the same verdict.
//!
//! The MetalLB tests skip with a note when the probe is not built, unless
//! `VIGIL_REQUIRE_GO=1`.

mod cover;
mod generate;
mod metallb;

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;
use std::cell::RefCell;
use std::collections::BTreeMap;
use vigil_lb::cidr::parse_pool_entry;
use vigil_lb::pool::Pools;
use vigil_metallb::config::{Config, ConfigError, PoolProblem};
use vigil_metallb::crd::IPAddressPool;
use vigil_metallb::pools;
use vigil_metallb::selector::Selector;

type Labels = BTreeMap<String, String>;

/// Random pool sets the property runs (each takes well under a millisecond).
const PROPERTY_CASES: u32 = 3000;
/// Pool sets sent through MetalLB's parser.
const METALLB_SETS: usize = 800;
/// `serviceAllocation`s sent through MetalLB's parser, each alone in a pool.
const METALLB_ALLOCATIONS: usize = 1500;
/// Single entries sent through MetalLB's parser, each alone in a pool (besides every fixed
/// odd entry).
const METALLB_ENTRIES: usize = 2000;
/// The seed of those sets: the same sets on every run.
const METALLB_SEED: [u8; 32] = [19; 32];

/// Reads `pool_json` with the speaker and with the controller, checks that they agree (see
/// the module comment), and gives the speaker's reading.
fn read_both(pool_json: &[Value], label_sets: &[Labels]) -> Result<Config, ConfigError> {
    let objects: Vec<IPAddressPool> = pool_json
        .iter()
        .map(|v| serde_json::from_value(v.clone()).expect("generated pools decode"))
        .collect();
    let shown = || serde_json::to_string_pretty(pool_json).unwrap();
    match (Config::parse(&objects, &[], &[]), pools::pools(&objects)) {
        (Err(speaker), Err(controller)) => {
            assert_eq!(speaker, controller, "refused differently: {}", shown());
            assert!(!speaker.to_string().is_empty(), "empty refusal");
            assert!(!speaker.metallb_message().is_empty(), "empty refusal");
            Err(speaker)
        }
        (Ok(_), Err(e)) => panic!("only the controller refuses ({e}): {}", shown()),
        (Err(e), Ok(_)) => panic!("only the speaker refuses ({e}): {}", shown()),
        (Ok(speaker), Ok(controller)) => {
            same_pools(pool_json, &speaker, &controller, label_sets);
            Ok(speaker)
        }
    }
}

fn same_pools(pool_json: &[Value], speaker: &Config, controller: &Pools, label_sets: &[Labels]) {
    let names: Vec<&str> = speaker.pools.keys().map(String::as_str).collect();
    let controller_names: Vec<&str> = controller.iter().map(|p| p.name()).collect();
    assert_eq!(names, controller_names);
    for (name, sp) in &speaker.pools {
        let cp = controller.get(name).unwrap();
        let context = || format!("pool {name}: {sp:?}\ncontroller: {cp:?}");
        assert_eq!(
            cover::of_cidrs(&sp.cidrs),
            cover::of_ranges(cp.ranges()),
            "{}",
            context()
        );
        assert_eq!(sp.addresses.len(), cp.ranges().len(), "{}", context());
        for (entry, range) in sp.addresses.iter().zip(cp.ranges()) {
            let cidrs = parse_pool_entry(entry).unwrap();
            assert_eq!(
                cover::of_cidrs(&cidrs),
                cover::of_ranges(std::slice::from_ref(range)),
                "entry {entry:?}; {}",
                context()
            );
        }
        for ip in cover::edge_addresses(&sp.cidrs) {
            assert_eq!(
                sp.cidrs.iter().any(|c| c.contains(ip)),
                cp.ranges().iter().any(|r| r.contains(ip)),
                "{ip}; {}",
                context()
            );
        }
        assert_eq!(
            (sp.auto_assign, sp.avoid_buggy_ips),
            (cp.auto_assign(), cp.avoid_buggy_ips())
        );
        let raw = pool_json
            .iter()
            .find(|p| p["metadata"]["name"].as_str() == Some(name))
            .map(|p| &p["spec"]["serviceAllocation"])
            .unwrap();
        match (&sp.service_allocation, cp.service_allocation()) {
            (None, None) => {}
            (Some(s), Some(c)) => {
                assert_eq!((s.priority, &s.namespaces), (c.priority, &c.namespaces));
                for (field, ours, theirs) in [
                    (
                        "namespaceSelectors",
                        &s.namespace_selectors,
                        &c.namespace_selectors,
                    ),
                    (
                        "serviceSelectors",
                        &s.service_selectors,
                        &c.service_selectors,
                    ),
                ] {
                    let written = raw[field].as_array().cloned().unwrap_or_default();
                    assert_eq!(ours.len(), written.len(), "{field}; {}", context());
                    assert_eq!(ours.len(), theirs.len(), "{field}; {}", context());
                    for ((a, b), w) in ours.iter().zip(theirs).zip(&written) {
                        same_matches(a, b, w, label_sets);
                    }
                }
            }
            _ => panic!("serviceAllocation read differently; {}", context()),
        }
    }
}

/// The speaker's and the controller's selector match exactly the label sets Kubernetes' rules
/// say `written` matches.
fn same_matches(speaker: &Selector, controller: &Selector, written: &Value, label_sets: &[Labels]) {
    let satisfying = cover::satisfying_labels(written);
    for labels in label_sets.iter().chain([&satisfying, &Labels::new()]) {
        let want = cover::oracle_matches(written, labels);
        assert_eq!(
            (speaker.matches(labels), controller.matches(labels)),
            (want, want),
            "selector {written} on {labels:?}"
        );
    }
}

/// Counts of what the pool sets came to, for the test's output and its floor on each.
#[derive(Debug, Default)]
struct Tally {
    accepted: usize,
    refused: BTreeMap<&'static str, usize>,
}

impl Tally {
    fn add(&mut self, verdict: &Result<Config, ConfigError>) {
        match verdict {
            Ok(_) => self.accepted += 1,
            Err(e) => *self.refused.entry(reason(e)).or_default() += 1,
        }
    }

    fn refusals(&self) -> usize {
        self.refused.values().sum()
    }
}

fn reason(e: &ConfigError) -> &'static str {
    match e {
        ConfigError::Pool { problem, .. } => match problem.as_ref() {
            PoolProblem::NoName => "no name",
            PoolProblem::NoAddresses => "no addresses",
            PoolProblem::Address { .. } => "bad address",
            PoolProblem::DuplicateNamespace(_) => "repeated namespace",
            PoolProblem::Duplicate { .. } => "repeated selector",
            PoolProblem::Priority(_) => "priority",
            PoolProblem::Allocator(_) => "allocator",
            PoolProblem::Selector { .. } => "bad selector",
        },
        ConfigError::DuplicatePool(_) => "repeated pool",
        ConfigError::Overlap { .. } => "overlap",
        ConfigError::Advertisement { .. } => "advertisement",
    }
}

#[test]
fn speaker_and_controller_read_pools_alike() {
    let mut runner = TestRunner::new(RunnerConfig {
        cases: PROPERTY_CASES,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    let tally = RefCell::new(Tally::default());
    let strategy = (generate::pool_set(), generate::label_sets());
    if let Err(e) = runner.run(&strategy, |(pools, labels)| {
        let verdict = read_both(&pools, &labels);
        tally.borrow_mut().add(&verdict);
        Ok(())
    }) {
        panic!("{e}");
    }
    let tally = tally.into_inner();
    eprintln!("pool sets: {tally:?}");
    // The generator must keep both sides busy: plenty of accepted sets (where addresses and
    // selectors are compared) and plenty refused.
    let total = tally.accepted + tally.refusals();
    assert!(tally.accepted * 5 >= total, "too few accepted: {tally:?}");
    assert!(tally.refusals() * 5 >= total, "too few refused: {tally:?}");
}

/// `n` pool sets from the fixed seed, each in the order MetalLB reads them (by name, as the
/// API server lists them; vigil sorts so too).
fn seeded_sets(n: usize) -> Vec<Vec<Value>> {
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &METALLB_SEED),
    );
    let strategy = generate::pool_set();
    (0..n)
        .map(|_| {
            let mut set = strategy.new_tree(&mut runner).unwrap().current();
            set.sort_by(|a, b| {
                a["metadata"]["name"]
                    .as_str()
                    .cmp(&b["metadata"]["name"].as_str())
            });
            set
        })
        .collect()
}

/// The spellings an entry uses, to show what the sets MetalLB accepted covered.
fn spellings(entry: &str) -> Vec<&'static str> {
    let lower = entry.to_lowercase();
    let mut out = Vec::new();
    if entry.contains('-') {
        out.push("range");
    }
    if lower.contains("::ffff:") {
        out.push("IPv4-mapped");
    } else if entry.contains(':') {
        out.push("IPv6");
    } else {
        out.push("IPv4");
    }
    if entry
        .split_once('/')
        .is_some_and(|(_, l)| l.len() > 1 && l.starts_with('0'))
    {
        out.push("leading-zero length");
    }
    if entry.chars().any(char::is_whitespace) {
        out.push("spaces");
    }
    if entry.chars().any(|c| c.is_ascii_uppercase()) {
        out.push("upper case");
    }
    if entry.contains("0db8:0000") {
        out.push("zeros in groups");
    }
    out
}

#[test]
fn metallb_reads_pools_alike() {
    let Some(bin) = metallb::probe() else {
        return;
    };
    let sets = seeded_sets(METALLB_SETS);
    let readings = metallb::read(&bin, &sets);
    let mut tally = Tally::default();
    let mut listed = Vec::new();
    let mut differences = Vec::new();
    let mut accepted_spellings: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (set, theirs)) in sets.iter().zip(&readings).enumerate() {
        if matches!(theirs, metallb::Reading::Accepted(_)) {
            for entry in set
                .iter()
                .flat_map(|p| p["spec"]["addresses"].as_array())
                .flatten()
            {
                for s in spellings(entry.as_str().unwrap_or_default()) {
                    *accepted_spellings.entry(s).or_default() += 1;
                }
            }
        }
        let ours = read_both(set, &[]);
        tally.add(&ours);
        let shown = || serde_json::to_string(set).unwrap();
        match (&ours, theirs) {
            (Err(_), metallb::Reading::Refused(_)) => {}
            (Ok(cfg), metallb::Reading::Accepted(cidrs)) => {
                let ours: BTreeMap<String, Vec<String>> = cfg
                    .pools
                    .iter()
                    .map(|(name, p)| {
                        (
                            name.clone(),
                            p.cidrs.iter().map(|c| c.to_string()).collect(),
                        )
                    })
                    .collect();
                if &ours != cidrs {
                    differences.push(format!(
                        "set {i}: vigil read {ours:?}, MetalLB {cidrs:?}: {}",
                        shown()
                    ));
                }
            }
            // The listed difference: vigil refuses an overlap MetalLB's check does not see.
            // Everything else about the set must still read alike.
            (Err(ConfigError::Overlap { .. }), metallb::Reading::Accepted(cidrs))
                if metallb::metallb_sees_no_overlap(set) == Some(true) =>
            {
                let ours: BTreeMap<String, Vec<String>> = set
                    .iter()
                    .map(|p| {
                        let name = p["metadata"]["name"].as_str().unwrap_or_default();
                        (
                            name.to_string(),
                            metallb::vigil_cidrs(p).unwrap_or_default(),
                        )
                    })
                    .collect();
                if &ours == cidrs {
                    let written: Vec<&Value> =
                        set.iter().map(|p| &p["spec"]["addresses"]).collect();
                    listed.push(format!(
                        "set {i}: {}",
                        serde_json::to_string(&written).unwrap()
                    ));
                } else {
                    differences.push(format!(
                        "set {i}: vigil read {ours:?}, MetalLB {cidrs:?}: {}",
                        shown()
                    ));
                }
            }
            (Ok(_), metallb::Reading::Refused(why)) => {
                differences.push(format!(
                    "set {i}: vigil accepts, MetalLB says {why}: {}",
                    shown()
                ));
            }
            (ours, theirs) => differences.push(format!(
                "set {i}: vigil {:?}, MetalLB {theirs:?}: {}",
                ours.as_ref()
                    .map(|_| "accepts")
                    .map_err(ToString::to_string),
                shown()
            )),
        }
    }
    eprintln!(
        "MetalLB read {} pool sets: {tally:?}; listed differences in {}",
        sets.len(),
        listed.len()
    );
    eprintln!("entries in the sets MetalLB accepted, by spelling: {accepted_spellings:?}");
    for l in listed.iter().take(3) {
        eprintln!("  listed: {l}");
    }
    assert!(
        differences.is_empty(),
        "{} pool sets read differently by MetalLB:\n{}",
        differences.len(),
        differences.join("\n")
    );
    let total = tally.accepted + tally.refusals();
    assert!(tally.accepted * 5 >= total, "too few accepted: {tally:?}");
}

/// Every entry alone in a pool: MetalLB accepts exactly the entries vigil does, reads the same
/// CIDRs, and refuses with the same message.
#[test]
fn metallb_parses_entries_alike() {
    let Some(bin) = metallb::probe() else {
        return;
    };
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &METALLB_SEED),
    );
    let strategy = generate::entry();
    let entries: Vec<String> = generate::ODD_ENTRIES
        .iter()
        .map(|e| e.to_string())
        .chain((0..METALLB_ENTRIES).map(|_| strategy.new_tree(&mut runner).unwrap().current()))
        .collect();
    let sets: Vec<Vec<Value>> = entries
        .iter()
        .map(|e| vec![serde_json::json!({"metadata": {"name": "a"}, "spec": {"addresses": [e]}})])
        .collect();
    let readings = metallb::read(&bin, &sets);
    let (mut accepted, mut refused, mut quoted_differently) = (0, 0, 0);
    let mut differences = Vec::new();
    for ((entry, set), theirs) in entries.iter().zip(&sets).zip(&readings) {
        let ours = read_both(set, &[]);
        match (&ours, theirs) {
            (Ok(cfg), metallb::Reading::Accepted(cidrs)) => {
                accepted += 1;
                let ours: Vec<String> =
                    cfg.pools["a"].cidrs.iter().map(|c| c.to_string()).collect();
                if Some(&ours) != cidrs.get("a") {
                    differences.push(format!("{entry:?}: vigil {ours:?}, MetalLB {cidrs:?}"));
                }
            }
            (Err(e), metallb::Reading::Refused(why)) => {
                refused += 1;
                // Messages quote the entry as Go's %q does; a combining mark is escaped by
                // vigil and printed by Go (see `vigil_lb::GoQuoted`), so those only count.
                let marks = entry.chars().any(|c| {
                    !c.is_ascii()
                        && !c.is_control()
                        && c.escape_debug().len() > 1
                        && !c.is_whitespace()
                });
                if marks {
                    quoted_differently += usize::from(&e.metallb_message() != why);
                } else if &e.metallb_message() != why {
                    differences.push(format!(
                        "{entry:?}: vigil says {:?}, MetalLB {why:?}",
                        e.metallb_message()
                    ));
                }
            }
            (ours, theirs) => differences.push(format!(
                "{entry:?}: vigil {:?}, MetalLB {theirs:?}",
                ours.as_ref()
                    .map(|_| "accepts")
                    .map_err(ConfigError::metallb_message)
            )),
        }
    }
    eprintln!(
        "MetalLB read {} single entries: {accepted} accepted, {refused} refused \
         ({quoted_differently} refusals of entries with combining marks not compared)",
        entries.len()
    );
    assert!(
        differences.is_empty(),
        "{} entries read differently by MetalLB:\n{}",
        differences.len(),
        differences.join("\n")
    );
}

/// Every `serviceAllocation` alone in a pool with good addresses: MetalLB accepts exactly those
/// vigil does (selector keys, values and operators, repeated namespaces, selectors,
/// expressions and values).
#[test]
fn metallb_reads_selectors_alike() {
    let Some(bin) = metallb::probe() else {
        return;
    };
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &METALLB_SEED),
    );
    let strategy = generate::service_allocation();
    let sets: Vec<Vec<Value>> = (0..METALLB_ALLOCATIONS)
        .map(|_| {
            let allocation = strategy.new_tree(&mut runner).unwrap().current();
            vec![serde_json::json!({"metadata": {"name": "a"}, "spec": {
                "addresses": ["198.18.0.0/24"], "serviceAllocation": allocation}})]
        })
        .collect();
    let readings = metallb::read(&bin, &sets);
    let mut tally = Tally::default();
    let mut differences = Vec::new();
    for (set, theirs) in sets.iter().zip(&readings) {
        let ours = read_both(set, &[]);
        tally.add(&ours);
        let agree = matches!(
            (&ours, theirs),
            (Ok(_), metallb::Reading::Accepted(_)) | (Err(_), metallb::Reading::Refused(_))
        );
        if !agree {
            differences.push(format!(
                "{}: vigil {:?}, MetalLB {theirs:?}",
                set[0]["spec"]["serviceAllocation"],
                ours.as_ref()
                    .map(|_| "accepts")
                    .map_err(ToString::to_string)
            ));
        }
    }
    eprintln!("MetalLB read {} serviceAllocations: {tally:?}", sets.len());
    assert!(
        differences.is_empty(),
        "{} serviceAllocations read differently by MetalLB:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
