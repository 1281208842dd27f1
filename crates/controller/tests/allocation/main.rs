//! The controller against the real kube-apiserver (vigil-testenv) with MetalLB's own
//! IPAddressPool CRD: every allocation case of MetalLB's controller with the event MetalLB
//! raises for it, withdrawal, pool status counters, and a restart that keeps every
//! allocation.
//!
//! Needs root and vigil-testenv (`VIGIL_GO_BIN_DIR`); skips without them unless
//! `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`.
//!
//! One test per module: [`cases`] (every case, its event, withdrawal, counters; with
//! [`api_cost`], the API requests per Service change), [`restart`], [`class_and_namespaces`]
//! (`--lb-class` and namespace selectors), [`invalid_pools`] and [`dual_stack`].

#[path = "../common/mod.rs"]
mod common;

mod api_cost;
mod cases;
mod class_and_namespaces;
mod dual_stack;
mod invalid_pools;
mod restart;

use common::NS;
use kube::Client;
use kube::api::Api;
use vigil_metallb::crd::IPAddressPool;

/// The Services' namespace.
const APP: &str = "apps";

/// A pool's (assignedIPv4, availableIPv4), -1 for a figure not written.
pub(crate) async fn pool_status(client: &Client, name: &str) -> (i64, i64) {
    let p = Api::<IPAddressPool>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap();
    let s = p.status.unwrap_or_default();
    (
        s.assigned_ipv4.unwrap_or(-1),
        s.available_ipv4.unwrap_or(-1),
    )
}
