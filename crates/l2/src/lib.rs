//! Sans-IO Layer-2 announcer for vigil: it answers ARP and IPv6 Neighbour Discovery for the
//! virtual IPs (VIPs) this node owns, and tells the network at once when ownership moves.
//!
//! Deterministic: no sockets, no clock, no threads. Frames and time come in as parameters, frames
//! to send come out of [`Announcer::poll_transmit`]. The Linux driver lives in `vigil-l2-net`.
//!
//! ```text
//!   handle_frame(now, ifindex, bytes) ──┐            ┌──> poll_transmit() -> Transmit
//!   set_owned / update_owned         ───┤ Announcer  ├──> poll_timeout()  -> Instant
//!   set_interface / remove_interface ───┤            │
//!   handle_timeout(now)              ───┘            └──> stats()
//! ```
//!
//! Layers: [`wire`] holds zero-copy packet views and their parsed representations (after
//! smoltcp), [`announcer`] holds the decisions.
#![forbid(unsafe_code)]

pub mod announcer;
pub mod frames;
pub mod wire;

pub use announcer::{
    Announcer, Config, Event, Interface, InterfaceSet, Stats, Transmit, TransmitKind, Vip,
};
