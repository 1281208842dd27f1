//! Linux driver for the vigil L2 announcer: AF_PACKET sockets with a BPF filter per interface,
//! a netlink watch of links and addresses, solicited-node multicast membership, and a blocking
//! driver thread that runs a sans-IO [`vigil_l2::Announcer`] over them; and [`address`], which
//! puts a VIP on a host device so the kernel accepts traffic to it.
//!
//! This is the only vigil crate with `unsafe`: system calls through `libc`, each block with a
//! `// SAFETY:` comment, confined to [`packet_socket`], [`netlink`], [`address`] and [`poll`]. The failover prober
//! and the demo binaries that build on it live in `vigil-netlab`, not here.
//!
//! ```text
//!   netlink watch ──> links/addresses ──> Selection ──> set_interface / remove_interface
//!   packet sockets ──> freshness ──> handle_frame ──> Announcer ──> poll_transmit ──> packet sockets
//!   Handle::set_owned / update_owned ──> wake-up socket ──> Announcer + solicited-node joins
//! ```
#![allow(unsafe_code)]

pub mod address;
pub mod driver;
pub mod freshness;
pub mod netlink;
pub mod packet_socket;
pub mod poll;
pub mod selection;

pub use driver::{Command, Driver, DriverConfig, DriverStats, EventWaker, Handle, VipCounters};
pub use packet_socket::{Filter, PacketSocket, Received};
pub use selection::{NamePatterns, Selection};
