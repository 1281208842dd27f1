//! The controller against the real kube-apiserver (vigil-testenv) with MetalLB's own
//! IPAddressPool CRD: every allocation case of MetalLB's controller with the event MetalLB
//! raises for it, withdrawal, pool status counters, and a restart that keeps every
//! allocation.
//!
//! Needs root and vigil-testenv (`VIGIL_GO_BIN_DIR`); skips without them unless
//! `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use vigil_k8s::crd::IPAddressPool;
use vigil_kubelab::ensure_namespace;

const APP: &str = "apps";

async fn pool_status(client: &Client, name: &str) -> (i64, i64) {
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
        assert!(events(c, APP, "other-class").await.is_empty());
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

/// What the controller asks of the API server for Services created and deleted one at a
/// time, among the Services above (some waiting, so every deletion reprocesses them all):
/// MetalLB's writes and nothing more. A creation: one status update and one `IPAllocated`
/// event, and the pool's status once; a deletion: the pool's status once. No Service is
/// read (the cache serves), no other Service is rewritten, and the Lease is read only by its
/// renewals (the Lease is watched). The creations are spread over more than one renewal
/// period of the test's Lease (3 s), so a Lease read per write in part of it would show.
async fn api_cost_of_service_changes(c: &Client, audit: &AuditLog) {
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
    // Each renewal patches the Lease and reads it back; one read more is a write that
    // met the watched Lease in the moment between a renewal and its arrival.
    assert!(
        lease("get") <= lease("patch") + 1,
        "the Lease read only by its renewals: {summary}"
    );
}

#[test]
fn restart_keeps_every_allocation() {
    let test = "restart_keeps_every_allocation";
    let Some(lab) = lab("ctlr", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    lab.cp().block_on(async {
        ensure_namespace(c, APP).await.unwrap();
        create_pool(c, "p", json!({"addresses": ["198.18.40.0/30"]})).await;
        create_pool(
            c,
            "q",
            json!({"addresses": ["198.18.41.0/30"], "autoAssign": false}),
        )
        .await;
    });
    let first = Replica::start(lab.cp(), settings("first"));
    let kept = lab.cp().block_on(async {
        for name in ["s1", "s2", "s3"] {
            create(c, &lb_service(APP, name, 80, &[], json!({}))).await;
        }
        wait_ingress(c, APP, "s1", &["198.18.40.0"]).await;
        let s2 = wait_ingress(c, APP, "s2", &["198.18.40.1"]).await;
        let s3 = wait_ingress(c, APP, "s3", &["198.18.40.2"]).await;
        Api::<Service>::namespaced(c.clone(), APP)
            .delete("s1", &DeleteParams::default())
            .await
            .unwrap();
        (s2, s3)
    });
    first.stop().unwrap();

    // While no controller runs: a new Service waits, and one arrives carrying an IP another
    // controller gave it (as when switching from MetalLB's controller).
    lab.cp().block_on(async {
        create(c, &lb_service(APP, "s4", 80, &[], json!({}))).await;
        let mut s5 = create(c, &lb_service(APP, "s5", 80, &[], json!({}))).await;
        s5.status = Some(
            serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "198.18.40.3"}]}}))
                .unwrap(),
        );
        Api::<Service>::namespaced(c.clone(), APP)
            .replace_status("s5", &PostParams::default(), &s5)
            .await
            .unwrap();
        // Two Services carrying one IP they may not share: the first in MetalLB's order
        // (namespace, then name) keeps it, the other is cleared and allocated again.
        for name in ["c-first", "c-second"] {
            let mut s = create(
                c,
                &lb_service(
                    APP,
                    name,
                    80,
                    &[("metallb.io/address-pool", "q")],
                    json!({}),
                ),
            )
            .await;
            s.status = Some(
                serde_json::from_value(
                    json!({"loadBalancer": {"ingress": [{"ip": "198.18.41.2"}]}}),
                )
                .unwrap(),
            );
            Api::<Service>::namespaced(c.clone(), APP)
                .replace_status(name, &PostParams::default(), &s)
                .await
                .unwrap();
        }
    });
    let second = Replica::start(lab.cp(), settings("second"));
    lab.cp().block_on(async {
        // The lowest free IP goes to the newcomer, never one a Service carries.
        wait_ingress(c, APP, "s4", &["198.18.40.0"]).await;
        let s5 = eventually("s5 annotated", || async {
            let s = get(c, APP, "s5").await;
            pool_of(&s).is_some().then_some(s)
        })
        .await;
        assert_eq!(
            ingress(&s5),
            ["198.18.40.3".parse::<std::net::IpAddr>().unwrap()]
        );
        wait_ingress(c, APP, "c-first", &["198.18.41.2"]).await;
        wait_ingress(c, APP, "c-second", &["198.18.41.0"]).await;
        let note = wait_event(c, APP, "c-second", "Normal", "ClearAssignment").await;
        assert!(note.contains("198.18.41.2"), "{note}");
        wait_event(c, APP, "c-second", "Normal", "IPAllocated").await;
        // s2 and s3 were not written at all.
        let (s2, s3) = &kept;
        for old in [s2, s3] {
            let now = get(c, APP, &old.name_any()).await;
            assert_eq!(
                now.resource_version(),
                old.resource_version(),
                "{} rewritten",
                old.name_any()
            );
        }
        eventually("counters after restart", || async {
            (pool_status(c, "p").await == (4, 0)).then_some(())
        })
        .await;
    });
    second.stop().unwrap();
}

#[test]
fn lb_class_flag_and_namespace_selectors() {
    let test = "lb_class_flag_and_namespace_selectors";
    let Some(lab) = lab("ctlc", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    const CLASS: &str = "example.com/vigil";
    lab.cp().block_on(async {
        for (ns, team) in [("blue", "blue"), ("green", "green")] {
            let n: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
                "metadata": {"name": ns, "labels": {"team": team}}
            }))
            .unwrap();
            Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
                .create(&PostParams::default(), &n)
                .await
                .unwrap();
        }
        create_pool(c, "general", json!({"addresses": ["198.18.60.0/31"]})).await;
        create_pool(
            c,
            "blue-team",
            json!({"addresses": ["198.18.61.0/31"],
                   "serviceAllocation": {"priority": 1,
                       "namespaceSelectors": [{"matchLabels": {"team": "blue"}}]}}),
        )
        .await;
    });
    let mut s = settings("classy");
    s.lb_class = Some(CLASS.into());
    let replica = Replica::start(lab.cp(), s);
    lab.cp().block_on(async {
        let class = json!({"loadBalancerClass": CLASS});
        create(c, &lb_service("blue", "web", 80, &[], class.clone())).await;
        create(c, &lb_service("green", "web", 80, &[], class.clone())).await;
        // Without a class, and with --lb-class set: not ours.
        create(c, &lb_service("green", "classless", 80, &[], json!({}))).await;
        let s = wait_ingress(c, "blue", "web", &["198.18.61.0"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("blue-team"));
        let s = wait_ingress(c, "green", "web", &["198.18.60.0"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("general"));

        // The namespace leaves the team: its IP no longer fits, so it is cleared
        // (ClearAssignment) and allocated again from the general pool.
        Api::<k8s_openapi::api::core::v1::Namespace>::all(c.clone())
            .patch(
                "blue",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"team": "none"}}})),
            )
            .await
            .unwrap();
        let s = wait_ingress(c, "blue", "web", &["198.18.60.1"]).await;
        assert_eq!(pool_of(&s).as_deref(), Some("general"));
        let note = wait_event(c, "blue", "web", "Normal", "ClearAssignment").await;
        assert!(note.contains("pool blue-team not compatible"), "{note}");

        let s = get(c, "green", "classless").await;
        assert!(ingress(&s).is_empty() && pool_of(&s).is_none());
        assert!(events(c, "green", "classless").await.is_empty());
    });
    replica.stop().unwrap();
}

#[test]
fn invalid_pools_touch_nothing_and_carried_ips_survive_the_fix() {
    let test = "invalid_pools_touch_nothing_and_carried_ips_survive_the_fix";
    let Some(lab) = lab("ctli", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    lab.cp().block_on(async {
        ensure_namespace(c, APP).await.unwrap();
        // Overlapping pools: not a valid configuration.
        create_pool(c, "p", json!({"addresses": ["198.18.70.0/30"]})).await;
        create_pool(c, "overlap", json!({"addresses": ["198.18.70.0/31"]})).await;
        let mut s = create(c, &lb_service(APP, "carrier", 80, &[], json!({}))).await;
        s.status = Some(
            serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": "198.18.70.0"}]}}))
                .unwrap(),
        );
        Api::<Service>::namespaced(c.clone(), APP)
            .replace_status("carrier", &PostParams::default(), &s)
            .await
            .unwrap();
        create(c, &lb_service(APP, "newcomer", 80, &[], json!({}))).await;
    });
    let replica = Replica::start(lab.cp(), settings("a"));
    lab.cp().block_on(async {
        let lease: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(c.clone(), NS);
        eventually("leading", || async {
            lease.get_opt("vigil-controller").await.unwrap().map(|_| ())
        })
        .await;
        // Give it time to (wrongly) act; then nothing may have changed.
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert!(ingress(&get(c, APP, "newcomer").await).is_empty());
        assert!(pool_of(&get(c, APP, "carrier").await).is_none());
        Api::<IPAddressPool>::namespaced(c.clone(), NS)
            .delete("overlap", &DeleteParams::default())
            .await
            .unwrap();
        // Valid again: the carried IP stays where it is, the newcomer gets the next one.
        wait_ingress(c, APP, "newcomer", &["198.18.70.1"]).await;
        let s = wait_ingress(c, APP, "carrier", &["198.18.70.0"]).await;
        eventually("carrier annotated", || async {
            pool_of(&get(c, APP, "carrier").await).map(|_| ())
        })
        .await;
        assert!(
            events(c, APP, "carrier")
                .await
                .iter()
                .all(|(_, r, _)| r != "ClearAssignment"),
            "{s:?}"
        );
    });
    replica.stop().unwrap();
}

#[test]
fn dual_stack_follows_ip_families_and_policy() {
    let test = "dual_stack_follows_ip_families_and_policy";
    let Some(lab) = lab("ctld", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    lab.cp().block_on(async {
        ensure_namespace(c, APP).await.unwrap();
        create_pool(
            c,
            "dual",
            json!({"addresses": ["198.18.80.0/31", "2001:db8:80::/127"]}),
        )
        .await;
        create_pool(
            c,
            "v4only",
            json!({"addresses": ["198.18.81.0/31"], "autoAssign": false}),
        )
        .await;
    });
    let replica = Replica::start(lab.cp(), settings("a"));
    lab.cp().block_on(async {
        let both = json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"]});
        create(c, &lb_service(APP, "both", 80, &[], both)).await;
        let v6 = json!({"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv6"]});
        create(c, &lb_service(APP, "v6", 80, &[], v6)).await;
        let prefer = json!({"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv4", "IPv6"]});
        create(
            c,
            &lb_service(
                APP,
                "prefer",
                80,
                &[("metallb.io/address-pool", "v4only")],
                prefer,
            ),
        )
        .await;

        wait_ingress(c, APP, "both", &["198.18.80.0", "2001:db8:80::"]).await;
        wait_ingress(c, APP, "v6", &["2001:db8:80::1"]).await;
        // PreferDualStack from an IPv4-only pool: one IP, and the missing family is tried.
        wait_ingress(c, APP, "prefer", &["198.18.81.0"]).await;
        wait_event(c, APP, "prefer", "Normal", "AdditionalAssignFailed").await;

        eventually("dual pool counters", || async {
            let p = Api::<IPAddressPool>::namespaced(c.clone(), NS)
                .get("dual")
                .await
                .unwrap();
            let s = p.status.unwrap_or_default();
            let got = (
                s.assigned_ipv4,
                s.assigned_ipv6,
                s.available_ipv4,
                s.available_ipv6,
            );
            (got == (Some(1), Some(2), Some(1), Some(0))).then_some(())
        })
        .await;
    });
    replica.stop().unwrap();
}
