//! The tokio driver for vigil's gossip engine.
//!
//! [`vigil_gossip::Membership`] decides everything and touches nothing; this crate gives it
//! sockets and a clock. [`Memberlist::start`] binds a UDP socket and a TCP listener on the same
//! port and starts one task, shaped like quinn's connection driver, on a thread of its own
//! (a current-thread runtime: probes are acked on time however busy the caller's runtime is
//! with other work), that `select!`s over:
//!
//! - UDP datagrams (a 64 KiB receive buffer; replies go out from the bound socket, as Go's do);
//! - accepted TCP connections (push/pull, join, fallback ping, reliable user messages), each
//!   served by a small task that hands the bytes read so far to the engine and writes its reply;
//! - outgoing TCP exchanges the engine asked for, each bounded by the engine's deadline;
//! - commands from [`Memberlist`] handles;
//! - the engine's next deadline (a timerfd, see `alarm.rs`), checked against the clock rather
//!   than trusted to the timer.
//!
//! After every input the driver drains the engine's datagrams, stream requests and events.
//! A refused TCP connection and an ICMP port-unreachable answer to a datagram (read from the
//! socket's error queue, Linux `IP_RECVERR`) are passed to the engine as strong evidence
//! ([`Membership::handle_unreachable`](vigil_gossip::Membership::handle_unreachable)).
//!
//! Time comes from `std::time::Instant` (the monotonic clock, which the driver's timerfd
//! counts in; TCP exchanges' deadlines use tokio's timer).

mod alarm;
mod driver;
mod icmp;
mod keyring_file;
mod net;

pub use driver::{Event, Events, Memberlist, NetStats, Options};
pub use keyring_file::{
    KeyringChanges, KeyringFileError, parse_key, read_keyring_file, watch_keyring_file,
};
pub use net::resolve_seeds;

/// Why a [`Memberlist`] operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding or configuring a socket failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The options cannot work.
    #[error("{0}")]
    Options(String),
    /// The engine refused its configuration.
    #[error(transparent)]
    Config(#[from] vigil_gossip::ConfigError),
    /// The keyring file could not be used.
    #[error(transparent)]
    KeyringFile(#[from] KeyringFileError),
    /// A keyring change was refused.
    #[error("keyring: {0}")]
    Keyring(#[from] vigil_gossip::wire::KeyringError),
    /// No seed answered a join.
    #[error("join failed: none of {0} seed(s) answered")]
    JoinFailed(usize),
    /// A seed address could not be resolved.
    #[error("cannot resolve seed {seed:?}: {reason}")]
    Resolve {
        /// The seed as given.
        seed: String,
        /// What went wrong.
        reason: String,
    },
    /// The driver's thread or runtime could not be started.
    #[error("cannot start the gossip driver: {0}")]
    Runtime(std::io::Error),
    /// The driver task has stopped.
    #[error("the gossip driver has stopped")]
    Stopped,
}
