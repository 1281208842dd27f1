//! Sans-IO gossip for vigil, speaking the hashicorp/memberlist protocol on the wire.
//!
//! Deterministic: no sockets, no clock, no global randomness. Time and randomness come in as
//! parameters, so thousands of nodes can run in one process on a virtual clock.
//!
//! - [`wire`]: the memberlist codec (messages and their framing: compound, LZW, CRC, labels,
//!   AES-GCM), byte-identical to Go memberlist.
//! - [`Membership`]: the SWIM + Lifeguard engine (probing, suspicion, gossip, push/pull).
//! - [`Config`]: every timing, with Go's `lan`, `wan`, `local` profiles and vigil's `fast`.
#![forbid(unsafe_code)]

pub mod config;
pub mod engine;
pub mod wire;

pub use config::{Config, ConfigError, Profile};
pub use engine::{
    Event, IncomingStream, LocalNode, MemberInfo, MemberState, Membership, NameCache, Stats,
    StreamFailure, StreamId, StreamProgress, StreamRequest, Transmit, WireIp,
};
