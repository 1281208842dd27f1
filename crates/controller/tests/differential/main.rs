//! vigil's controller against MetalLB v0.16.2's own controller: two real API servers
//! (vigil-testenv, one lab each), MetalLB's controller on one, `vigil_controller::run` (what
//! `vigil controller` runs) on the other, and the same sequences of IPAddressPool, Namespace
//! and Service creations, updates and deletions applied to both, one operation at a time.
//!
//! After each operation both sides are left to settle, then compared per Service: the IPs of
//! `status.loadBalancer.ingress` (in order), `metallb.io/ip-allocated-from-pool`, and the
//! event reasons raised during that step; and per pool, its status counters. Any difference
//! fails the test unless [`ALLOWED`] lists it, with the reason ours is right.
//!
//! **Settled** means: at least [`MIN_WAIT`] since the operation, and then for [`QUIET`] on
//! both sides nothing changed: no Service, pool or Event changed in either API server (their
//! resourceVersions and event counts), MetalLB's controller wrote no log line (it logs the
//! start and end of every reconcile at info level), and vigil's controller emitted no
//! tracing event (it logs every reconcile at debug level). A step that does not settle within
//! [`SETTLE_LIMIT`] fails the test. A step with a difference that is not allowed, or one
//! that makes the sides diverge, is looked at once more after a longer quiet period,
//! [`RECHECK_QUIET`], before it counts. Some allowed differences (MetalLB's random orders)
//! leave the two clusters in different valid states; the sequence then goes on, compared in
//! part ([`divergence`]): exactly outside the Services concerned, in aggregate for them. The
//! run prints how many operations were compared fully, partially, and how many only outside
//! a diverged group that no longer compared.
//!
//! The hand-picked sequences cover sharing, annotations (current and deprecated),
//! `spec.loadBalancerIP`, `metallb.io/address-pool`, exhaustion, dual stack, `autoAssign:
//! false`, `avoidBuggyIPs`, `serviceAllocation` (priority, namespaces, namespace and service
//! selectors), `loadBalancerClass`, type changes, pool changes and deletions. The random ones
//! are seeded (`VIGIL_DIFF_SEED`, printed); `VIGIL_DIFF_RANDOM_SEQUENCES` (default 2) and
//! `VIGIL_DIFF_RANDOM_OPS` (default 10) size them for a bigger run.
//!
//! Needs root, vigil-testenv and MetalLB's controller (`VIGIL_GO_BIN_DIR`); skips without them
//! unless `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`.

#[path = "../common/mod.rs"]
mod common;

mod allowed;
mod compare;
mod divergence;
mod ops;
mod random;
mod run;
mod seen;
mod sequences;
mod sides;

use allowed::ALLOWED;
use ops::{Svc, pool, svc};
use random::{Rng, random_sequence};
use run::Tally;
use sequences::{A, hand_picked};
use serde_json::json;
use sides::Sides;
use std::time::{Duration, Instant};

const TEST: &str = "vigil_and_metallb_controllers_allocate_alike";
/// The pools' namespace (both controllers').
const NS: &str = common::NS;
/// The Services' namespaces.
const APP_NAMESPACES: [&str; 2] = ["dt-a", "dt-b"];
/// The field manager of the test's own writes.
const MANAGER: &str = "vigil-difftest";
/// Least time between an operation and calling the state settled.
const MIN_WAIT: Duration = Duration::from_millis(400);
/// How long nothing may change before the state counts as settled.
const QUIET: Duration = Duration::from_millis(800);
/// The quiet period of the second look at a step that showed differences.
const RECHECK_QUIET: Duration = Duration::from_secs(3);
/// Bound on one settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(45);
/// How often the state is read while settling.
const POLL: Duration = Duration::from_millis(150);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn vigil_and_metallb_controllers_allocate_alike() {
    let started = Instant::now();
    let Some(mut sides) = Sides::start() else {
        return;
    };
    let seed = std::env::var("VIGIL_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let random_sequences = env_usize("VIGIL_DIFF_RANDOM_SEQUENCES", 2);
    let random_ops = env_usize("VIGIL_DIFF_RANDOM_OPS", 10);
    eprintln!("{TEST}: seed {seed} (VIGIL_DIFF_SEED={seed} replays the random sequences)");

    // Both controllers up: one Service allocated on each side.
    let mut tally = Tally::default();
    sides.run_sequence(
        "warm-up",
        &[
            pool("warm", json!({"addresses": ["198.18.9.0/32"]})),
            svc(Svc::lb(A, "warm")),
        ],
        &mut tally,
    );
    // VIGIL_DIFF_ONLY=<prefix> runs only the hand-picked sequences whose name starts so.
    let only = std::env::var("VIGIL_DIFF_ONLY").unwrap_or_default();
    for (name, ops) in hand_picked() {
        if !name.starts_with(&only) {
            continue;
        }
        sides.run_sequence(name, &ops, &mut tally);
    }
    let mut rng = Rng(seed);
    for i in 0..random_sequences {
        let ops = random_sequence(&mut rng, random_ops);
        sides.run_sequence(&format!("random {i} (seed {seed})"), &ops, &mut tally);
    }
    eprintln!(
        "{TEST}: {}, {:.0} s",
        tally.summary(),
        started.elapsed().as_secs_f64()
    );
    for a in ALLOWED {
        eprintln!("{TEST}: allowed difference {}: {}", a.name, a.why);
    }
    assert!(
        tally.failures.is_empty(),
        "differences:\n{}",
        tally.failures.join("\n")
    );
}
