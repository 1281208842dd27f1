//! Sans-IO gossip for vigil, speaking the hashicorp/memberlist protocol on the wire.
//!
//! Deterministic: no sockets, no clock, no global randomness. Time and randomness come in as
//! parameters.
#![forbid(unsafe_code)]

pub mod wire;
