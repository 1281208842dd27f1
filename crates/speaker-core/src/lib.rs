//! The speaker's model and its sans-IO core, shared by every mode (standalone YAML, Kubernetes).
//!
//! - [`model`]: what a mode hands the speaker: [`StaticSettings`](model::StaticSettings)
//!   (restart-only), [`DesiredState`](model::DesiredState) (a whole runtime snapshot) and its
//!   [`ServiceSpec`](model::ServiceSpec)s, or only the services that changed
//!   ([`DesiredUpdate::Changes`](model::DesiredUpdate)): with per-service elections
//!   (Kubernetes mode) the core then elects only those again, and a lost member only leaves
//!   the rankings it was in;
//! - [`core`]: [`SpeakerCore`](core::SpeakerCore), the decisions: which VIPs this node
//!   announces, when it may start electing (first join, fail-back hold-down), in which order a
//!   VIP is taken (address, then announcer) or given up (handover, then address), and how a
//!   stopping node hands over.
//!
//! ```text
//!   handle_desired(now, DesiredState)    ──┐              ┌──> poll_action()  -> Action
//!   handle_service_changes(now, up, rm)  ──┤              │
//!   handle_members(now, kind, view)      ──┤              ├──> poll_timeout() -> Instant
//!   handle_local_health(service, ok)     ──┤  SpeakerCore ├──> status()       -> Status
//!   handle_first_join(now)               ──┤              │
//!   handle_announcer_event(now, event)   ──┤              │
//!   handle_timeout(now) / begin_shutdown ──┘              │
//! ```
//!
//! Deterministic, like `vigil-gossip` and `vigil-l2`: no sockets, no clock, no tasks; time is a
//! parameter. `scripts/test.sh` fails if an I/O crate enters this crate's dependency tree. The
//! async runner that turns [`Action`](core::Action)s into gossip, announcer and host-address
//! calls is `vigil-speaker`.
#![forbid(unsafe_code)]

pub mod core;
pub mod model;
