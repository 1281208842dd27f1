//! A Service as the core knows it: the latest version, the status wanted for it, and the
//! write under way.

use crate::events::ServiceEvent;
use crate::service;
use k8s_openapi::api::core::v1::Service;
use std::net::IpAddr;
use std::sync::Arc;

/// The status this core wants a Service to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) ips: Vec<IpAddr>,
    pub(super) pool: Option<String>,
}

/// A Service as this core knows it.
#[derive(Debug)]
pub(super) struct Tracked {
    /// The Service as last delivered by the watch, or as this core's last write left it.
    pub(super) svc: Arc<Service>,
    /// The status wanted while a write of it is waiting or under way (`None`: the Service
    /// shows what is wanted).
    pub(super) target: Option<Target>,
    /// The object of the write under way.
    pub(super) in_flight: Option<Service>,
    /// The version this core's last write produced, until the watch delivers it.
    pub(super) unechoed: Option<String>,
    /// The versions the watch delivered while the write was under way (the watch may bring
    /// the write's own version before its answer does).
    pub(super) seen_in_flight: Vec<String>,
    /// Events about a decision whose write is waiting or under way: published once it ends.
    pub(super) held_events: Vec<ServiceEvent>,
}

impl Tracked {
    pub(super) fn new(svc: Arc<Service>) -> Self {
        Self {
            svc,
            target: None,
            in_flight: None,
            unechoed: None,
            seen_in_flight: Vec::new(),
            held_events: Vec::new(),
        }
    }

    /// Notes a version the watch delivered while a write is under way (its answer then
    /// need not be waited for on the watch).
    pub(super) fn saw(&mut self, svc: &Service) {
        if self.in_flight.is_some()
            && let Some(rv) = &svc.metadata.resource_version
        {
            self.seen_in_flight.push(rv.clone());
        }
    }

    /// The IPs the Service shows once the wanted status is written.
    pub(super) fn ingress(&self) -> Vec<IpAddr> {
        match &self.target {
            Some(t) => t.ips.clone(),
            None => service::ingress_ips(&self.svc),
        }
    }
}

/// The Service as `target` wants it written; `None` if it shows that already.
pub(super) fn wanted(svc: &Service, target: &Target) -> Option<Service> {
    let desired = service::with_allocation(svc, &target.ips, target.pool.as_deref());
    service::differs(svc, &desired).then_some(desired)
}
