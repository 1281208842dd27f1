//! vigil's pure load-balancer domain: which node answers for each VIP.
//!
//! Every speaker runs the same function over the same gossip view and so reaches the same
//! answer with no coordination (MetalLB's L2 election, `research/metallb-l2.md` section 2.1):
//!
//! 1. candidates are live members (alive or suspect) that every service on the VIP admits
//!    (node list, label selector, health check published in the member's [`NodeMeta`]);
//! 2. they are sorted by SHA-256(node name + `#` + the VIP as Go prints it), smallest first
//!    ([`go_ip_string`], [`rank`]);
//! 3. the first one owns the VIP.
//!
//! Beyond MetalLB, as [`Policy`] options: a fail-back hold-down (members still in their
//! hold-down rank after every settled one) and a split-brain guard (a node announces nothing
//! while it sees fewer than a majority of the expected members, see [`Quorum`]).
//!
//! [`cidr`] and [`selector`] are MetalLB's address and Kubernetes' label-selector rules, the
//! one implementation of each that the speaker's configuration, the controller's pools and
//! the webhook all use.
//!
//! [`pool`] is the other half of MetalLB's job: which IPs each Service gets (the controller's
//! allocator).
//!
//! No I/O, no clock, no randomness: `forbid(unsafe_code)`, and CI checks that no I/O crate
//! enters the dependency tree.
#![forbid(unsafe_code)]

pub mod cidr;
mod election;
mod go_ip;
mod go_quote;
mod meta;
pub mod pool;
pub mod selector;
mod service;

pub use election::{Group, Policy, Quorum, Verdict, decide, elect, rank};
pub use go_ip::go_ip_string;
pub use go_quote::GoQuoted;
pub use meta::{MAX_META_LEN, NodeMeta, NodeView};
pub use service::Service;
