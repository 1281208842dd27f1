//! Kubernetes mode for vigil's speaker: the API half. MetalLB's objects and rules are the pure
//! crate `vigil-metallb` (re-exported here under their old paths); this crate wires them to
//! kube-rs reflectors and writes back.
//!
//! - [`source`]: reflectors feeding the speaker's desired state and ConfigurationState.
//! - [`sink`]: the ServiceL2Status / event writer.
//! - [`settings`]: the speaker's command line and environment (MetalLB's flags and env).
//! - [`key_ack`], [`keyring`]: key rotation's speaker side: the acknowledgement Lease writer,
//!   and the keyring followed from the memberlist Secret.
#![forbid(unsafe_code)]

pub mod key_ack;
pub mod keyring;
pub mod settings;
pub mod sink;
pub mod source;

pub use vigil_metallb::{
    Announceable, Cluster, Config, ConfigError, ConfigTracker, Ignored, Interfaces, Nobody,
    NodeView, Options, Peer, Reload, addr, cached, config, crd, excludel2, memberlist_file, secret,
    selector, state, status, translate,
};
