//! MetalLB's model, pure: the objects MetalLB's speaker and controller read and write, and
//! MetalLB's rules for them, in one place, so that the speaker, the controller and the webhook
//! can never disagree about what a pool or a selector means. No API client, no async, no clock;
//! CI checks that no I/O crate enters its dependency tree.
//!
//! - [`crd`]: `metallb.io/v1beta1` IPAddressPool, L2Advertisement, ServiceL2Status,
//!   ConfigurationState.
//! - [`addr`], [`selector`]: MetalLB's address rules and Kubernetes' label selectors (the one
//!   implementation of each, in `vigil-lb`), plus the reading of API selectors.
//! - [`config`]: pools and advertisements read and validated as MetalLB does, with MetalLB's
//!   messages; [`pools`]: the same pools as the controller's allocator takes them.
//! - [`state`]: last-good-configuration handling and the ConfigurationState result.
//! - [`status`]: the ServiceL2Status and ConfigurationState objects a speaker writes.
//! - [`cached`]: what a speaker caches of each Service and EndpointSlice (deserialized
//!   straight from the API's JSON).
//! - [`translate`]: cached objects + configuration → per-Service eligible nodes, interfaces,
//!   peers.
//! - [`secret`], [`key_ack`]: the memberlist Secret's forms (key, keyring) and the speakers'
//!   key acknowledgement Lease form.
//! - [`excludel2`], [`memberlist_file`]: the speaker's interface exclusion list and memberlist
//!   tuning file.
#![forbid(unsafe_code)]

pub use vigil_lb::cidr as addr;
pub mod cached;
pub mod config;
pub mod crd;
pub mod excludel2;
mod go_duration;
pub mod key_ack;
pub mod memberlist_file;
pub mod pools;
pub mod secret;
pub mod selector;
pub mod state;
pub mod status;
pub mod translate;

pub use config::{Config, ConfigError};
pub use state::{ConfigTracker, Reload};
pub use translate::{
    Announceable, Cluster, Ignored, Interfaces, Nobody, NodeView, Options, Peer, translate,
};
