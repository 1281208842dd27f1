//! `--lb-class` and pools restricted by namespace selectors.

use crate::common::*;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

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
        let evs = events(c, "green", "classless").await;
        assert!(evs.is_empty(), "{evs:?}");
    });
    replica.stop().unwrap();
}
