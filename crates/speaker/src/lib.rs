//! The vigil speaker as a library, shared by every mode (standalone YAML, Kubernetes).
//!
//! A mode turns its configuration into [`model::StaticSettings`] (restart-only) and a
//! [`Source`]: the desired state at start, then a stream of whole [`model::DesiredState`]
//! snapshots, a stream of keyrings and a stream of local health flips. [`run`] does the rest
//! until its `shutdown` future completes:
//!
//! ```text
//!   mode (standalone file / Kubernetes API)
//!     │ StaticSettings, Source { desired, keyrings, health }
//!     ▼
//!   run ──> SpeakerCore (pure, vigil-speaker-core): handle_* in, Action out
//!     │        │
//!     │        ├─ PublishMeta, Leave, SetSeeds ──> gossip (vigil-gossip-net, join loop)
//!     │        ├─ SetOwned, UpdateOwned, HandOver, Reannounce ─> announcer (vigil-l2-net)
//!     │        └─ HoldAddress, ReleaseAddress ───> local_address (netlink, blocking pool)
//!     └─ status, counters ──> observe (/metrics, /status), StatusSink (notices)
//! ```
//!
//! - [`core`] and [`model`]: re-exported from `vigil-speaker-core`;
//! - [`run`](run()): the runner; `join` (private): the seed join loop;
//! - [`local_address`]: VIPs held on a host device so the kernel accepts their traffic;
//! - [`observe`]: the status shared with the HTTP routes, and the routes on `vigil-observe`.

mod join;
pub mod local_address;
pub mod observe;
mod run;
mod timeline;

pub use run::{HealthReport, RunError, Source, StatusSink, run};
pub use vigil_speaker_core::{core, model};
