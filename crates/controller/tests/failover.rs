//! Two controller replicas on the real kube-apiserver: only the Lease holder allocates;
//! killing it (its runtime dropped mid-flight, the Lease not released) hands over within the
//! Lease time and loses no allocation; the memberlist Secret is created once, in MetalLB's
//! format, owned by the named Deployment, and never overwritten.
//!
//! Needs root and vigil-testenv; skips without them unless `VIGIL_REQUIRE_ROOT=1` /
//! `VIGIL_REQUIRE_GO=1`.

mod common;

use base64::Engine;
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::time::Instant;
use vigil_kubelab::ensure_namespace;

const APP: &str = "apps";

async fn holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NS)
        .get_opt("vigil-controller")
        .await
        .unwrap()
        .and_then(|l| l.spec?.holder_identity)
}

#[test]
fn killed_leader_hands_over_and_keeps_allocations_and_secret() {
    let test = "killed_leader_hands_over_and_keeps_allocations_and_secret";
    let Some(lab) = lab("ctlf", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    let deployment_uid = lab.cp().block_on(async {
        ensure_namespace(c, APP).await.unwrap();
        create_pool(c, "p", json!({"addresses": ["198.18.50.0/29"]})).await;
        // A stored Deployment to own the Secret (nothing runs it: no controller-manager).
        let dep: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "controller"},
            "spec": {"selector": {"matchLabels": {"app": "c"}},
                     "template": {"metadata": {"labels": {"app": "c"}},
                                  "spec": {"containers": [{"name": "c", "image": "example.invalid/c"}]}}}
        }))
        .unwrap();
        let dep = Api::<Deployment>::namespaced(c.clone(), NS)
            .create(&PostParams::default(), &dep)
            .await
            .unwrap();
        dep.uid().unwrap()
    });
    let with_secret = |id: &str| {
        let mut s = settings(id);
        s.ml_secret_name = Some("memberlist".into());
        s.deployment = Some("controller".into());
        s
    };

    let a = Replica::start(lab.cp(), with_secret("replica-a"));
    let secret = lab.cp().block_on(async {
        eventually("a leads", || async {
            (holder(c).await.as_deref() == Some("replica-a")).then_some(())
        })
        .await;
        create(c, &lb_service(APP, "s1", 80, &[], json!({}))).await;
        wait_ingress(c, APP, "s1", &["198.18.50.0"]).await;
        Api::<Secret>::namespaced(c.clone(), NS)
            .get("memberlist")
            .await
            .unwrap()
    });
    // MetalLB's format: 16 random bytes, unpadded standard base64, under `secretkey`.
    let data = secret.data.clone().unwrap();
    assert_eq!(data.len(), 1);
    let key = &data["secretkey"].0;
    assert_eq!(key.len(), 22);
    let raw = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(key)
        .unwrap();
    assert_eq!(raw.len(), 16);
    let owner = &secret.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Deployment", "controller")
    );
    assert_eq!(owner.uid, deployment_uid);

    let b = Replica::start(lab.cp(), with_secret("replica-b"));
    let (s1, s2) = lab.cp().block_on(async {
        create(c, &lb_service(APP, "s2", 80, &[], json!({}))).await;
        let s2 = wait_ingress(c, APP, "s2", &["198.18.50.1"]).await;
        // b runs but does not lead.
        assert_eq!(holder(c).await.as_deref(), Some("replica-a"));
        (get(c, APP, "s1").await, s2)
    });

    let killed = Instant::now();
    a.kill();
    let handed_over = lab.cp().block_on(async {
        create(c, &lb_service(APP, "s3", 80, &[], json!({}))).await;
        wait_ingress(c, APP, "s3", &["198.18.50.2"]).await;
        let t = killed.elapsed();
        assert_eq!(holder(c).await.as_deref(), Some("replica-b"));
        // Nothing that was allocated moved or was rewritten.
        for old in [&s1, &s2] {
            let now = get(c, APP, &old.name_any()).await;
            assert_eq!(
                now.resource_version(),
                old.resource_version(),
                "{} rewritten",
                old.name_any()
            );
        }
        // The new leader knows what its predecessor gave: s1's IP, asked for by name, is
        // refused as taken, and the pool counts all three.
        create(
            c,
            &lb_service(
                APP,
                "wants-s1s-ip",
                81,
                &[("metallb.io/loadBalancerIPs", "198.18.50.0")],
                json!({}),
            ),
        )
        .await;
        let note = wait_event(c, APP, "wants-s1s-ip", "Warning", "AllocationFailed").await;
        assert!(note.contains("198.18.50.0"), "{note}");
        assert!(ingress(&get(c, APP, "wants-s1s-ip").await).is_empty());
        eventually("pool counts the three allocations", || async {
            let p = Api::<vigil_metallb::crd::IPAddressPool>::namespaced(c.clone(), NS)
                .get("p")
                .await
                .unwrap();
            let s = p.status.unwrap_or_default();
            (s.assigned_ipv4 == Some(3) && s.available_ipv4 == Some(5)).then_some(())
        })
        .await;
        // The Secret was kept as it was.
        let now = Api::<Secret>::namespaced(c.clone(), NS)
            .get("memberlist")
            .await
            .unwrap();
        assert_eq!(now.resource_version(), secret.resource_version());
        assert_eq!(now.data, secret.data);
        t
    });
    eprintln!(
        "{test}: s3 allocated {:.1} s after the leader was killed (lease 4 s)",
        handed_over.as_secs_f64()
    );
    b.stop().unwrap();
    // A clean stop releases the Lease.
    let after = lab.cp().block_on(holder(c));
    assert_ne!(after.as_deref(), Some("replica-b"));
}

#[test]
fn existing_secret_is_never_overwritten() {
    let test = "existing_secret_is_never_overwritten";
    let Some(lab) = lab("ctls", test) else {
        return;
    };
    let client = lab.cp().client().unwrap();
    let c = &client;
    let before = lab.cp().block_on(async {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "memberlist"},
            "stringData": {"secretkey": "chosen-by-the-operator", "other": "kept"},
        }))
        .unwrap();
        Api::<Secret>::namespaced(c.clone(), NS)
            .create(&PostParams::default(), &s)
            .await
            .unwrap()
    });
    let mut s = settings("only");
    s.ml_secret_name = Some("memberlist".into());
    let r = Replica::start(lab.cp(), s);
    lab.cp().block_on(async {
        eventually("leads", || async {
            (holder(c).await.as_deref() == Some("only")).then_some(())
        })
        .await;
    });
    r.stop().unwrap();
    let now = lab
        .cp()
        .block_on(Api::<Secret>::namespaced(c.clone(), NS).get("memberlist"))
        .unwrap();
    assert_eq!(now.resource_version(), before.resource_version());
    assert_eq!(now.data, before.data);
}
