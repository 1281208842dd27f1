//! `vigil controller`: MetalLB-compatible IP allocation for LoadBalancer Services: watches
//! feeding a sans-IO core over the pure allocator `vigil_lb::pool`, with leader election on a
//! `coordination.k8s.io/v1` Lease and the memberlist Secret created when missing.
//!
//! It reads what MetalLB's controller reads and writes what it writes (v0.16.2): the
//! IPAddressPools of its namespace (`metallb.io/v1beta1`, types from `vigil_metallb::crd`),
//! Namespaces (for `namespaceSelectors`) and Services (`metallb.io/address-pool`,
//! `metallb.io/loadBalancerIPs`, `spec.loadBalancerIP`, `metallb.io/allow-shared-ip`, the
//! deprecated `metallb.universe.tf/` prefix, `spec.loadBalancerClass` against `--lb-class`,
//! `ipFamilies`/`ipFamilyPolicy`); it writes `status.loadBalancer.ingress` and
//! `metallb.io/ip-allocated-from-pool` in one status update with a resourceVersion
//! precondition, pool status counters, and MetalLB's events with MetalLB's reasons.
//!
//! - [`args`]: flags and environment (MetalLB's names), checked into [`Settings`].
//! - [`leader`]: the replica's life: Secret, Lease, leading while elected ([`run`]): the
//!   allocation and, when asked, the key rotation.
//! - [`core`]: the allocator as a sans-IO core (pure): watch events and write results in,
//!   writes out, MetalLB's decisions and reprocess order inside.
//! - [`driver`]: the leader's watches feeding the core, and its writes carried out
//!   (concurrently, one per object at a time).
//! - [`fence`]: the one answer to "am I the leader", checked before every write.
//! - [`service`]: a Service read as an allocation request, and written back (pure).
//! - [`pools`]: IPAddressPools read as `lb::pool` pools, counters as pool status (pure).
//! - [`events`]: MetalLB's Service events for a convergence (pure).
//! - [`secret`]: the memberlist Secret in MetalLB's format.
//! - [`rotation`]: the memberlist key rotating itself through the Secret's keyring.
//! - [`metrics`]: `/metrics`: MetalLB's allocator and client families, process, rotation.
//! - [`state`]: the controller's ConfigurationState (pools, replication, BGP objects) and
//!   its metrics.
//! - [`webhook`]: MetalLB's admission and conversion webhooks, with their certificate.
#![forbid(unsafe_code)]

pub mod args;
pub mod core;
pub mod driver;
pub mod events;
pub mod fence;
pub mod leader;
pub mod metrics;
pub mod rotation;
pub mod secret;
pub mod service;
pub mod state;
pub mod webhook;

pub use args::{Args, ArgsError, Settings};
pub use driver::FIELD_MANAGER;
pub use leader::{KeyRotation, RunError, run, run_with, run_with_rotation};
