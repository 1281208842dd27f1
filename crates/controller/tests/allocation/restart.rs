//! A controller restart keeps every allocation and takes over IPs Services carry.

use crate::APP;
use crate::common::*;
use crate::pool_status;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use vigil_kubelab::ensure_namespace;

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
