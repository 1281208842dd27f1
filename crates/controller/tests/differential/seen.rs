//! What each side shows: Services, the controllers' events and the pools' statuses, as read
//! from one API server.

use crate::{APP_NAMESPACES, NS, common};
use k8s_openapi::api::core::v1::{Event, Service};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use std::collections::{BTreeMap, BTreeSet};
use vigil_metallb::crd::IPAddressPool;

/// One Service as a controller left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// A LoadBalancer Service this controller handles (no class).
    pub(crate) load_balancer: bool,
    pub(crate) ingress: Vec<String>,
    pub(crate) pool: Option<String>,
    pub(crate) resource_version: String,
}

/// Everything compared, and everything whose change means "not settled yet".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Seen {
    pub(crate) services: BTreeMap<String, Shown>,
    /// Event uid → (Service key, type, reason, count).
    pub(crate) events: BTreeMap<String, (String, String, String, i32)>,
    /// Pool → (resourceVersion, assigned v4, assigned v6, available v4, available v6).
    pub(crate) pools: BTreeMap<String, (String, [Option<i64>; 4])>,
}

pub(crate) async fn read(client: &Client) -> Seen {
    let mut seen = Seen::default();
    for ns in APP_NAMESPACES {
        let api: Api<Service> = Api::namespaced(client.clone(), ns);
        for s in api.list(&ListParams::default()).await.unwrap().items {
            let key = format!("{ns}/{}", s.name_any());
            seen.services.insert(
                key,
                Shown {
                    load_balancer: s.spec.as_ref().is_some_and(|sp| {
                        sp.type_.as_deref() == Some("LoadBalancer")
                            && sp.load_balancer_class.is_none()
                    }),
                    ingress: common::ingress(&s).iter().map(|i| i.to_string()).collect(),
                    pool: common::pool_of(&s),
                    resource_version: s.resource_version().unwrap_or_default(),
                },
            );
        }
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        for e in events.list(&ListParams::default()).await.unwrap().items {
            let obj = &e.involved_object;
            // Only the controllers' own events (the API server raises some about Services too,
            // e.g. ClusterIPNotAllocated from its repair loop).
            let from_controller = e.source.as_ref().and_then(|s| s.component.as_deref())
                == Some("metallb-controller")
                || e.reporting_component.as_deref() == Some(vigil_controller::FIELD_MANAGER);
            if obj.kind.as_deref() != Some("Service") || !from_controller {
                continue;
            }
            let key = format!("{ns}/{}", obj.name.as_deref().unwrap_or_default());
            let count = e
                .series
                .as_ref()
                .and_then(|s| s.count)
                .or(e.count)
                .unwrap_or(1);
            seen.events.insert(
                e.metadata.uid.clone().unwrap_or_default(),
                (
                    key,
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                    count,
                ),
            );
        }
    }
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    for p in pools.list(&ListParams::default()).await.unwrap().items {
        let s = p.status.clone().unwrap_or_default();
        seen.pools.insert(
            p.name_any(),
            (
                p.resource_version().unwrap_or_default(),
                [
                    s.assigned_ipv4,
                    s.assigned_ipv6,
                    s.available_ipv4,
                    s.available_ipv6,
                ],
            ),
        );
    }
    seen
}

/// The (type, reason) pairs raised per Service between `before` and `after` (new events, or
/// events whose count went up).
pub(crate) fn raised(before: &Seen, after: &Seen) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for (uid, (key, type_, reason, count)) in &after.events {
        let old = before.events.get(uid).map_or(0, |e| e.3);
        if *count > old {
            out.entry(key.clone())
                .or_default()
                .insert((type_.clone(), reason.clone()));
        }
    }
    out
}

/// The total events MetalLB's recorder has written about each Service so far.
pub(crate) fn event_totals(seen: &Seen) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for (key, _, _, count) in seen.events.values() {
        *out.entry(key.clone()).or_insert(0) += count;
    }
    out
}
