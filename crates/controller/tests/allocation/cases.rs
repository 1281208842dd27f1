//! Every allocation case of MetalLB's controller, with the event MetalLB raises for it,
//! withdrawal and the pool counters.

use crate::api_cost::api_cost_of_service_changes;
use crate::common::*;
use crate::{APP, pool_status};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use vigil_kubelab::ensure_namespace;

#[test]
fn allocation_cases_raise_metallbs_events() {
    let test = "allocation_cases_raise_metallbs_events";
    let Some((lab, audit)) = audited_lab("ctla", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    lab.cp().block_on(async {
        ensure_namespace(c, APP).await.unwrap();
        // Two automatic IPs; two IPs only on request; one IP to share on request.
        create_pool(c, "small", json!({"addresses": ["198.18.10.0/31"]})).await;
        create_pool(
            c,
            "reserved",
            json!({"addresses": ["198.18.20.10-198.18.20.11"], "autoAssign": false}),
        )
        .await;
        create_pool(
            c,
            "shared",
            json!({"addresses": ["198.18.30.7/32"], "autoAssign": false}),
        )
        .await;
        // Another controller's class: never touched.
        create(
            c,
            &lb_service(
                APP,
                "other-class",
                80,
                &[],
                json!({"loadBalancerClass": "example.com/other"}),
            ),
        )
        .await;
    });
    let replica = Replica::start_with(lab.cp(), settings("a"), controller_kube_config(lab.cp()));

    lab.cp().block_on(async {
        // From the automatic pool.
        create(c, &lb_service(APP, "auto", 80, &[], json!({}))).await;
        let s = wait_ingress(c, APP, "auto", &["198.18.10.0"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("small"));
        let note = wait_event(c, APP, "auto", "Normal", "IPAllocated").await;
        assert_eq!(note, "Assigned IP [\"198.18.10.0\"]");

        // A specific IP, from a pool that does not auto-assign.
        create(
            c,
            &lb_service(
                APP,
                "specific",
                80,
                &[("metallb.io/loadBalancerIPs", "198.18.20.11")],
                json!({}),
            ),
        )
        .await;
        let s = wait_ingress(c, APP, "specific", &["198.18.20.11"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("reserved"));
        wait_event(c, APP, "specific", "Normal", "IPAllocated").await;

        // A named pool gives its first free IP.
        create(
            c,
            &lb_service(
                APP,
                "by-pool",
                80,
                &[("metallb.io/address-pool", "reserved")],
                json!({}),
            ),
        )
        .await;
        wait_ingress(c, APP, "by-pool", &["198.18.20.10"]).await;

        // The deprecated prefix still works, with a Warning.
        create(
            c,
            &lb_service(
                APP,
                "deprecated",
                80,
                &[("metallb.universe.tf/address-pool", "small")],
                json!({}),
            ),
        )
        .await;
        let s = wait_ingress(c, APP, "deprecated", &["198.18.10.1"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("small"));
        let note = wait_event(c, APP, "deprecated", "Warning", "deprecatedAnnotation").await;
        assert!(note.contains("metallb.universe.tf/address-pool"), "{note}");

        // The automatic pool is exhausted.
        create(c, &lb_service(APP, "waiting-1", 80, &[], json!({}))).await;
        let note = wait_event(c, APP, "waiting-1", "Warning", "AllocationFailed").await;
        assert!(
            note.starts_with("Failed to allocate IP for \"apps/waiting-1\""),
            "{note}"
        );
        create(c, &lb_service(APP, "waiting-2", 80, &[], json!({}))).await;
        wait_event(c, APP, "waiting-2", "Warning", "AllocationFailed").await;

        // An IP outside every pool.
        create(
            c,
            &lb_service(
                APP,
                "outside",
                80,
                &[],
                json!({"loadBalancerIP": "198.18.99.1"}),
            ),
        )
        .await;
        let note = wait_event(c, APP, "outside", "Warning", "AllocationFailed").await;
        assert!(
            note.contains("198.18.99.1") && note.contains("not allowed in config"),
            "{note}"
        );

        // A pool that does not exist.
        create(
            c,
            &lb_service(
                APP,
                "no-such-pool",
                80,
                &[("metallb.io/address-pool", "nope")],
                json!({}),
            ),
        )
        .await;
        let note = wait_event(c, APP, "no-such-pool", "Warning", "AllocationFailed").await;
        assert!(note.contains("nope"), "{note}");

        // An IP held by a Service that does not share.
        create(
            c,
            &lb_service(
                APP,
                "taken",
                81,
                &[
                    ("metallb.io/loadBalancerIPs", "198.18.20.11"),
                    ("metallb.io/allow-shared-ip", "k"),
                ],
                json!({}),
            ),
        )
        .await;
        let note = wait_event(c, APP, "taken", "Warning", "AllocationFailed").await;
        assert!(note.contains("does not allow sharing"), "{note}");

        // Sharing: same key, different ports share one IP; an overlapping port is refused.
        let share = [
            ("metallb.io/address-pool", "shared"),
            ("metallb.io/allow-shared-ip", "web"),
        ];
        create(c, &lb_service(APP, "share-80", 80, &share, json!({}))).await;
        create(c, &lb_service(APP, "share-443", 443, &share, json!({}))).await;
        wait_ingress(c, APP, "share-80", &["198.18.30.7"]).await;
        wait_ingress(c, APP, "share-443", &["198.18.30.7"]).await;
        create(c, &lb_service(APP, "share-80-again", 80, &share, json!({}))).await;
        let note = wait_event(c, APP, "share-80-again", "Warning", "AllocationFailed").await;
        assert!(note.contains("no available IPs in pool shared"), "{note}");

        // Counters: distinct IPs in use and usable IPs left.
        eventually("pool counters", || async {
            let all = (
                pool_status(c, "small").await,
                pool_status(c, "reserved").await,
                pool_status(c, "shared").await,
            );
            (all == ((2, 0), (2, 0), (1, 0))).then_some(())
        })
        .await;

        // Withdrawal: a Service that stops being a LoadBalancer gives its IP back, and a
        // waiting Service gets it.
        let svcs: Api<Service> = Api::namespaced(c.clone(), APP);
        svcs.patch(
            "auto",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}}),
            ),
        )
        .await
        .unwrap();
        eventually("auto withdrawn", || async {
            let s = get(c, APP, "auto").await;
            (ingress(&s).is_empty() && pool_of(&s).is_none()).then_some(())
        })
        .await;
        // Deleting a Service gives its IP back too.
        svcs.delete("deprecated", &DeleteParams::default())
            .await
            .unwrap();
        let mut got: Vec<String> = eventually("both waiting services served", || async {
            let a = ingress(&get(c, APP, "waiting-1").await);
            let b = ingress(&get(c, APP, "waiting-2").await);
            (a.len() == 1 && b.len() == 1).then(|| vec![a[0].to_string(), b[0].to_string()])
        })
        .await;
        got.sort();
        assert_eq!(got, ["198.18.10.0", "198.18.10.1"]);
        wait_event(c, APP, "waiting-1", "Normal", "IPAllocated").await;

        // The other class's Service was never touched.
        let s = get(c, APP, "other-class").await;
        assert!(ingress(&s).is_empty() && pool_of(&s).is_none());
        let evs = events(c, APP, "other-class").await;
        assert!(evs.is_empty(), "{evs:?}");
        // Nothing holds an IP another holds, except the sharing pair.
        let list = svcs.list(&Default::default()).await.unwrap();
        let mut seen = std::collections::BTreeMap::new();
        for s in &list.items {
            for ip in ingress(s) {
                seen.entry(ip).or_insert_with(Vec::new).push(s.name_any());
            }
        }
        for (ip, holders) in &seen {
            assert!(
                holders.len() == 1 || holders == &["share-443", "share-80"],
                "{ip} held by {holders:?}"
            );
        }

        api_cost_of_service_changes(c, &audit).await;
    });
    replica.stop().unwrap();
}
