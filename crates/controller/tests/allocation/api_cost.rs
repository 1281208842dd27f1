//! What the controller asks of the API server per Service change, from the audit log.

use crate::common::*;
use crate::pool_status;
use k8s_openapi::api::core::v1::Service;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde_json::json;
use vigil_kubelab::ensure_namespace;

/// What the controller asks of the API server for Services created and deleted one at a
/// time, among the Services above (some waiting, so every deletion reprocesses them all):
/// MetalLB's writes and nothing more. A creation: one status update and one `IPAllocated`
/// event, and the pool's status once; a deletion: the pool's status once. No Service is
/// read (the cache serves), no other Service is rewritten, and the Lease is read only by its
/// renewals (the Lease is watched). The creations are spread over more than one renewal
/// period of the test's Lease (3 s), so a Lease read per write in part of it would show.
pub(crate) async fn api_cost_of_service_changes(c: &Client, audit: &AuditLog) {
    const COST_NS: &str = "cost";
    const CHANGES: usize = 8;
    ensure_namespace(c, COST_NS).await.unwrap();
    create_pool(
        c,
        "cost",
        json!({"addresses": ["198.18.40.0/29"], "autoAssign": false}),
    )
    .await;
    eventually("pool cost's first status", || async {
        (pool_status(c, "cost").await == (0, 8)).then_some(())
    })
    .await;
    let mark = audit.mark();
    for i in 0..CHANGES {
        let name = format!("cost-{i}");
        let svc = lb_service(
            COST_NS,
            &name,
            80,
            &[("metallb.io/address-pool", "cost")],
            json!({}),
        );
        create(c, &svc).await;
        wait_event(c, COST_NS, &name, "Normal", "IPAllocated").await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let svcs: Api<Service> = Api::namespaced(c.clone(), COST_NS);
    for i in 0..CHANGES {
        let name = format!("cost-{i}");
        svcs.delete(&name, &DeleteParams::default()).await.unwrap();
        let left = i64::try_from(CHANGES - i - 1).unwrap();
        eventually(&format!("{name}'s IP counted free"), || async {
            (pool_status(c, "cost").await.0 == left).then_some(())
        })
        .await;
    }
    // Room for a late duplicate to arrive and be counted.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    let asked: Vec<Audited> = audit
        .since(mark)
        .into_iter()
        .filter(|r| r.user == CONTROLLER_USER)
        .collect();
    let count = |verb: &str, resource: &str, ns: Option<&str>| {
        asked
            .iter()
            .filter(|r| r.verb == verb && r.resource == resource)
            .filter(|r| ns.is_none_or(|ns| r.namespace == ns))
            .count()
    };
    let lease = |verb: &str| {
        asked
            .iter()
            .filter(|r| r.verb == verb && r.resource == "leases" && r.name == "vigil-controller")
            .count()
    };
    let summary = format!("{asked:#?}");
    assert_eq!(
        count("update", "services/status", Some(COST_NS)),
        CHANGES,
        "one status write per creation, none per deletion: {summary}"
    );
    assert_eq!(
        count("update", "services/status", None),
        CHANGES,
        "no other Service rewritten: {summary}"
    );
    assert_eq!(count("get", "services", None), 0, "{summary}");
    assert_eq!(
        count("create", "events", Some(COST_NS)),
        CHANGES,
        "one IPAllocated per creation: {summary}"
    );
    let pool_writes = asked
        .iter()
        .filter(|r| r.resource == "ipaddresspools/status" && r.name == "cost")
        .count();
    assert_eq!(
        pool_writes,
        2 * CHANGES,
        "the pool's status once per change: {summary}"
    );
    // Each renewal patches the Lease and reads it back. kube-lease-manager (0.13) also reads
    // it at the top of its loop when its copy looks expired, which a renewal that slept until
    // just before expiry meets on a busy machine: at most one read more per renewal, plus the
    // first acquisition's. (`patch + 1` failed in CI with two such renewals of two.) A read
    // per tick or per write would exceed this.
    assert!(
        lease("get") <= 2 * lease("patch") + 1,
        "the Lease read only by its renewals: {summary}"
    );
}
