//! What the core asks the driver to write, and what the driver answers.

use crate::events::ServiceEvent;
use crate::service;
use k8s_openapi::api::core::v1::Service;
use std::sync::Arc;
use vigil_lb::pool::StatusCounters;

/// A write the core asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Replace the Service's status (and its `metallb.io/ip-allocated-from-pool`
    /// annotation) with this object, on the condition that its resourceVersion is current.
    /// Answer with [`AllocatorCore::handle_written`] and [`WriteId::Service`].
    ServiceStatus(Box<Service>),
    /// Merge these counters into the pool's status. Answer with
    /// [`AllocatorCore::handle_written`] and [`WriteId::Pool`].
    PoolStatus {
        /// The pool.
        name: String,
        /// Its counters as the allocator holds them.
        counters: StatusCounters,
    },
    /// Publish an event on the Service (no answer wanted).
    Event {
        /// The Service, as last known.
        service: Arc<Service>,
        /// The event.
        event: ServiceEvent,
    },
}

impl Write {
    /// What a result of this write is about; `None` for an event.
    pub fn id(&self) -> Option<WriteId> {
        match self {
            Self::ServiceStatus(svc) => Some(WriteId::Service(service::key(svc))),
            Self::PoolStatus { name, .. } => Some(WriteId::Pool(name.clone())),
            Self::Event { .. } => None,
        }
    }
}

/// The object a write went to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteId {
    /// A Service, `namespace/name`.
    Service(String),
    /// An IPAddressPool, by name.
    Pool(String),
}

/// How a write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteResult {
    /// Stored; the object is now at this version.
    Written {
        /// The version the write produced.
        resource_version: Option<String>,
        /// The object written.
        uid: Option<String>,
    },
    /// The object changed since the version the write was made from.
    Conflict,
    /// The object is gone.
    Gone,
    /// Anything else (the driver tries again later through [`AllocatorCore::retry`]).
    Failed,
}
