//! An invalid pool configuration touches nothing; carried IPs survive its fix.

use crate::APP;
use crate::common::*;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use vigil_kubelab::ensure_namespace;
use vigil_metallb::crd::IPAddressPool;

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
