//! A deterministic simulator for vigil's gossip: thousands of [`vigil_gossip::Membership`]s
//! in one process, on one virtual clock, exchanging real wire bytes.
//!
//! - **Time** is virtual: a base `Instant` captured once plus virtual offsets. The event queue
//!   is a binary heap of (time, sequence number, event): packet and stream deliveries, and
//!   node wake-ups at each engine's `poll_timeout` (invalidated lazily with a per-node
//!   generation counter). Nothing reads the wall clock, except [`Scenario::run`] timing itself
//!   to report the simulator's speed.
//! - **Randomness** comes from one seed: each node's engine gets a seed derived from it, and
//!   the network draws loss and jitter from its own seeded ChaCha stream, in event order. Same
//!   seed, same trace.
//! - **The network** ([`net`]): nodes live at `198.18.x.y:7946`. Each link has a loss rate,
//!   a base latency and jitter ([`Link`]), with per-direction overrides; partitions drop
//!   datagrams and make streams time out. TCP streams are reliable and take the link latency:
//!   the request reaches the peer's `handle_incoming_stream`, the reply its dialer's
//!   `handle_stream_response`, or the dialer gets `TimedOut` at the stream's deadline.
//! - **Faults** ([`Sim`]): crash (the host vanishes, or with `process` only the process dies:
//!   datagrams bounce as ICMP port unreachable and TCP is refused), freeze (inputs are held
//!   and delivered on thaw), clean leave (stop after `LeaveComplete`), restart (a fresh engine,
//!   incarnation 1, joining through seeds), slow node (every input processed late).
//! - **Measurements** ([`Metrics`]): time from a crash to the first and to every live node's
//!   `Dead`; false positives (`Dead` about a node that is up, not frozen and not partitioned
//!   from the declarer) and false suspicions; datagrams, bytes and stream bytes.
//!
//! [`Scenario`] holds the named scenarios `vigil sim` and the tests run. See `docs/SIM.md`.

/// With the `mimalloc` feature, the whole program allocates through mimalloc: the engines'
/// push/pull exchanges are millions of small allocations per virtual second at 10,000 nodes,
/// which glibc's allocator serves about half as fast.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod metrics;
pub mod net;
pub mod scenario;
pub mod sim;

pub use metrics::{Failure, FailureKind, FalsePositive, Metrics, Spread, Traffic};
pub use net::{Link, Network, NodeId};
pub use scenario::{Report, Scenario, ScenarioKind};
pub use sim::{NodeStatus, Progress, Sim, SimConfig};

/// The seed a test should use: `SIM_SEED` from the environment if set (to replay a failure),
/// else `default`.
pub fn seed_from_env(default: u64) -> u64 {
    std::env::var("SIM_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// For tests: the seed to use (see [`seed_from_env`]) and a guard that, if the test panics,
/// prints the seed and the command that replays it.
///
/// ```
/// let (seed, _guard) = vigil_sim::test_seed("my_test", 7);
/// assert_eq!(seed, 7); // unless SIM_SEED is set
/// ```
pub fn test_seed(test: &'static str, default: u64) -> (u64, SeedGuard) {
    let seed = seed_from_env(default);
    (seed, SeedGuard { test, seed })
}

/// Prints the seed of a failing test when dropped during a panic.
#[derive(Debug)]
pub struct SeedGuard {
    test: &'static str,
    seed: u64,
}

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "simulation test {} failed with seed {}; replay with: SIM_SEED={} cargo test -p vigil-sim {} -- --exact --nocapture",
                self.test, self.seed, self.seed, self.test
            );
        }
    }
}
