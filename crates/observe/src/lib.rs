//! vigil's observability, written once for the agent and every speaker mode.
//!
//! - [`http`]: the one HTTP server (axum routes on hyper, one request per connection, bounded
//!   in time and size). Callers register their own routes; this crate adds nothing unasked.
//! - [`client`]: the one client of these endpoints (`vigil status`, labs, tests): a blocking
//!   GET, plain or over TLS with a bearer token.
//! - [`admin`]: the bearer-token guard for mutating admin routes, off unless a token file is
//!   configured.
//! - [`metrics`]: the Prometheus text of every vigil metric, rendered by `prometheus-client`
//!   from collectors defined once here ([`metrics::GossipMetrics`], [`metrics::L2Metrics`],
//!   [`metrics::ElectionMetrics`], [`metrics::SpeakerMetrics`]), one name per metric.
//!
//! # Who may reach what
//!
//! | route | method | who |
//! |---|---|---|
//! | `/metrics`, `/healthz`, `/readyz`, `/status`, `/members` | GET | anyone who can reach the listen address |
//! | admin routes (`/join`, `/leave`, `/keyring/...`, ...) | POST | nobody unless a token file is configured; then only requests with `Authorization: Bearer <token>` |
//!
//! The read-only routes carry no secret (member names, addresses, VIPs, counters), so they
//! are open to whoever can connect; bind them to a management address or firewall them if
//! even that is too much. The mutating routes can move a node out of the cluster or change its
//! keyring, so they are refused (403) unless the operator gave a token file, and then every
//! request must present the token (401 otherwise); the comparison is constant-time.
//!
//! # Shape of a scrape
//!
//! Counters live where they are counted (the gossip engine, the announcer, the speaker).
//! A `/metrics` handler reads them (usually with an `await`), fills the collectors' plain
//! structs, and renders one [`metrics::Scrape`]: nothing is registered globally, and a value
//! that is no longer there (a VIP that moved away) leaves no stale series.

pub mod admin;
pub mod client;
pub mod http;
pub mod metrics;
pub mod secure;
pub mod tls;

pub use admin::{AdminToken, Guard, TokenError};
pub use metrics::Scrape;
