//! Kubernetes mode for vigil's speaker. The pure half: MetalLB's objects, MetalLB's rules for
//! turning cached objects into what a speaker announces, MetalLB's validation, and the
//! speaker's files, flags and environment (no API client, no async, no clock). The API half,
//! [`source`] and [`sink`], wires these to kube-rs reflectors and writes back.
//!
//! - [`crd`]: `metallb.io/v1beta1` IPAddressPool, L2Advertisement, ServiceL2Status,
//!   ConfigurationState.
//! - [`config`]: pools and advertisements parsed and validated as MetalLB's speaker does.
//! - [`state`]: last-good-configuration handling and the ConfigurationState result.
//! - [`status`]: the ServiceL2Status and ConfigurationState objects a speaker writes.
//! - [`translate`]: cached objects + configuration → per-Service eligible nodes, interfaces,
//!   peers.
//! - [`election`]: MetalLB's per-Service ordering over the gossip members.
//! - [`addr`], [`selector`]: Go's address and Kubernetes' label-selector rules.
//! - [`secret`], [`excludel2`], [`memberlist_file`], [`settings`]: the speaker's key file,
//!   interface exclusion list, memberlist tuning file, and command line / environment.
//! - [`key_ack`], [`keyring`]: key rotation's speaker side: the acknowledgement Lease, and
//!   the keyring followed from the memberlist Secret.
//! - [`source`], [`sink`]: the API half: reflectors feeding the speaker's snapshots, and the
//!   ServiceL2Status / event writer.
#![forbid(unsafe_code)]

pub mod addr;
pub mod config;
pub mod crd;
pub mod election;
pub mod excludel2;
mod go_duration;
pub mod key_ack;
pub mod keyring;
pub mod memberlist_file;
pub mod secret;
pub mod selector;
pub mod settings;
pub mod sink;
pub mod source;
pub mod state;
pub mod status;
pub mod translate;

pub use config::{Config, ConfigError};
pub use state::{ConfigTracker, Reload};
pub use translate::{
    Announceable, Cluster, Ignored, Interfaces, Nobody, NodeView, Options, Peer, translate,
};
