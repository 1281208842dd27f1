//! Dual stack: IP families and family policy.

use crate::APP;
use crate::common::*;
use kube::api::Api;
use serde_json::json;
use vigil_kubelab::ensure_namespace;
use vigil_metallb::crd::IPAddressPool;

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
