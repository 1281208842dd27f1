//! Gossip keys that rotate themselves (issue 14, item 4).
//!
//! Every `--key-rotation-period` the leader replaces the memberlist key through the keyring
//! entry of the memberlist Secret (`vigil_metallb::secret::KeyringForm`): add a new key, wait
//! until every live speaker has installed it, make it primary (and `secretkey`), wait until
//! every live speaker sends with it, keep the old one a while longer, remove it. Speakers
//! acknowledge in Leases of their own (`vigil_metallb::key_ack`).
//!
//! - [`plan`]: the state machine, pure (time and randomness are parameters), with the
//!   argument for why no two live speakers ever hold keyrings that cannot talk.
//! - [`driver`]: reflectors, leadership check, Secret updates with resourceVersion
//!   preconditions, events.
//! - [`metrics`]: `vigil_controller_key_rotation_*` and the `/metrics` route.

pub mod driver;
pub mod metrics;
#[cfg(test)]
mod model_tests;
pub mod plan;

pub use driver::{RotationSettings, run};
pub use plan::{Decision, PauseReason, Policy, Step};
