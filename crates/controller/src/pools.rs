//! The controller's pools are read by `vigil_metallb::pools`, the same reader as the speaker's
//! configuration (one parser of a pool, one selector engine, MetalLB's messages).

pub use vigil_metallb::pools::{pools, status};

/// A pool configuration that cannot be used: the speaker's error for it, with MetalLB's
/// message.
pub type PoolError = vigil_metallb::ConfigError;
