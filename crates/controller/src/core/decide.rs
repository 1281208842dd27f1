//! The core's decisions: the rebuild at start, MetalLB's reprocess pass, and one Service
//! converged (MetalLB's `SetBalancer`).

use super::AllocatorCore;
use super::tracked::{Target, wanted};
use crate::events::{self, ServiceEvent};
use crate::service;
use k8s_openapi::api::core::v1::Service;
use std::net::IpAddr;
use std::sync::Arc;
use vigil_lb::pool::{Allocator, Labels, RequestError, deprecated_annotations};

/// Passes in a row before a reprocessing stops until the next trigger (MetalLB backs off
/// exponentially instead; a pass that keeps asking for another is a bug either way).
pub const MAX_PASSES: usize = 8;

impl AllocatorCore {
    /// Rebuilds the allocator from what the Services carry, once they are listed and the
    /// pools valid, then passes over every Service.
    pub(super) fn start(&mut self) {
        if self.alloc.is_some() || !self.services_listed {
            return;
        }
        let Some(view) = &self.view else {
            return;
        };
        let carried: Vec<_> = self
            .services
            .values()
            .map(|t| &t.svc)
            .filter(|s| {
                service::handled(s, self.lb_class.as_deref()) && service::is_load_balancer(s)
            })
            .filter_map(|s| {
                let req = service::request(s, &self.namespace_labels(s)).ok()?;
                Some((req, service::ingress_ips(s)))
            })
            .collect();
        let n = carried.len();
        let (alloc, _) = Allocator::rebuild(view.pools.clone(), carried);
        tracing::info!(
            services = n,
            allocations = alloc.allocations().len(),
            "allocations rebuilt"
        );
        self.alloc = Some(alloc);
        self.pools_dirty = true;
        self.reprocess();
    }

    pub(super) fn namespace_labels(&self, svc: &Service) -> Labels {
        let ns = svc.metadata.namespace.as_deref().unwrap_or_default();
        self.namespaces.get(ns).cloned().unwrap_or_default()
    }

    /// MetalLB's `reprocessAll`: every Service in MetalLB's order, again while one asks.
    pub(super) fn reprocess(&mut self) {
        if self.alloc.is_none() {
            return;
        }
        for _ in 0..MAX_PASSES {
            let mut order: Vec<(usize, &str, &str, &String)> = self
                .services
                .iter()
                .map(|(key, t)| {
                    let m = &t.svc.metadata;
                    (
                        t.ingress().len(),
                        m.namespace.as_deref().unwrap_or_default(),
                        m.name.as_deref().unwrap_or_default(),
                        key,
                    )
                })
                .collect();
            order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| (a.1, a.2).cmp(&(b.1, b.2))));
            let keys: Vec<String> = order.into_iter().map(|(.., k)| k.clone()).collect();
            let mut again = false;
            for key in keys {
                again |= self.converge(&key);
            }
            if !again {
                return;
            }
        }
        tracing::warn!(
            passes = MAX_PASSES,
            "reprocessing still asks for another pass"
        );
    }

    /// One Service brought in line with the allocator (MetalLB's `SetBalancer`). Returns
    /// whether every Service should be looked at again.
    pub(super) fn converge(&mut self, key: &str) -> bool {
        let Some(t) = self.services.get(key) else {
            return false;
        };
        let svc = Arc::clone(&t.svc);
        if !service::handled(&svc, self.lb_class.as_deref()) {
            return false;
        }
        let labels = self.namespace_labels(&svc);
        let ingress = t.ingress();
        let Some(alloc) = self.alloc.as_mut() else {
            return false;
        };
        let before: Vec<IpAddr> = alloc
            .allocation(key)
            .map(|a| a.ips.clone())
            .unwrap_or_default();
        let key_before = allocation_key(alloc, key);
        let mut evs: Vec<ServiceEvent> = Vec::new();
        let (ips, pool) = if !service::is_load_balancer(&svc) {
            alloc.release(key);
            (Vec::new(), None)
        } else {
            match service::request(&svc, &labels) {
                Err(e) => {
                    evs.extend(events::for_request_error(&e));
                    if matches!(
                        e,
                        RequestError::NoClusterIps | RequestError::NotEnoughClusterIps
                    ) {
                        alloc.release(key);
                        (Vec::new(), None)
                    } else {
                        // MetalLB stops here without touching the Service.
                        self.publish(key, evs);
                        return false;
                    }
                }
                Ok(req) => {
                    let conv = alloc.converge(&req, &ingress);
                    evs.extend(events::for_convergence(key, &conv));
                    (conv.ips, conv.pool)
                }
            }
        };
        // A changed sharing or backend key may let others share, or stop them.
        let mut reprocess = allocation_key(alloc, key) != key_before;
        // Counted as the allocator holds it, written or not (as MetalLB counts).
        let held = alloc
            .allocation(key)
            .map(|a| a.ips.as_slice())
            .unwrap_or_default();
        self.pools_dirty |= held != before.as_slice();
        let target = Target {
            pool: pool.filter(|_| !ips.is_empty()),
            ips,
        };
        let gave_up_pooled = !before.is_empty()
            && target.ips.is_empty()
            && alloc.pools().owner_of(&before).is_some();
        let Some(t) = self.services.get_mut(key) else {
            return reprocess;
        };
        let changed = match &t.target {
            Some(old) => *old != target,
            None => wanted(&t.svc, &target).is_some(),
        };
        if changed {
            // IPs given up that are still in a pool may be what a waiting Service needs.
            reprocess |= gave_up_pooled;
            let annotations = svc.metadata.annotations.clone().unwrap_or_default();
            evs.extend(
                deprecated_annotations(&annotations)
                    .into_iter()
                    .map(events::deprecated),
            );
            t.target = Some(target);
        }
        // A wanted status not written yet (perhaps refused as made from an older version)
        // is written from this version.
        if t.target.is_some() {
            self.enqueue(key);
        }
        self.publish(key, evs);
        reprocess
    }

    /// Events about `key`: held while a write of its status waits or is under way (so they
    /// follow the write, as MetalLB's do), published at once otherwise.
    pub(super) fn publish(&mut self, key: &str, evs: Vec<ServiceEvent>) {
        let Some(t) = self.services.get_mut(key) else {
            return;
        };
        if t.target.is_some() || t.in_flight.is_some() {
            t.held_events.extend(evs);
        } else {
            for ev in evs {
                self.events.push_back((Arc::clone(&t.svc), ev));
            }
        }
    }
}

/// MetalLB's allocation key (`Allocator.AllocationKey`): backend key then sharing key, empty
/// for a Service holding nothing.
fn allocation_key(alloc: &Allocator, key: &str) -> String {
    alloc
        .allocation(key)
        .map(|a| {
            format!(
                "{}{}",
                a.backend_key,
                a.sharing_key.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default()
}
