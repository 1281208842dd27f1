//! The status writer against a real API server (vigil-kubelab: root and vigil-testenv, else
//! skipped; `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1` make a skip a failure): a leftover
//! of an earlier run goes with no start-up sweep, every announced Service gets exactly one
//! ServiceL2Status with the fewest writes (one create and one status patch each, nothing
//! repeated while echoes are late), withdrawn ones lose theirs, and another node's stays.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::runtime::reflector;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use vigil_k8s::cached::CachedService;
use vigil_k8s::crd::{LABEL_ANNOUNCE_NODE, ServiceL2Status};
use vigil_k8s::sink::{K8sSink, Target};
use vigil_k8s::source::Shared;
use vigil_kubelab::cluster::{Cluster, ClusterSpec};
use vigil_kubelab::metallb::METALLB_NAMESPACE;
use vigil_speaker::StatusSink;
use vigil_speaker::core::{Action, Trigger};
use vigil_speaker::observe::SourceCounters;

const TEST: &str = "sink_api";
/// Services announced.
const SERVICES: usize = 300;
/// Of which withdrawn again.
const WITHDRAWN: usize = 100;
/// The longest wait for the statuses to settle.
const LIMIT: Duration = Duration::from_secs(120);

fn leftover(name: &str, node: &str, service: &str) -> String {
    format!(
        "apiVersion: metallb.io/v1beta1\nkind: ServiceL2Status\nmetadata:\n  name: {name}\n  namespace: {METALLB_NAMESPACE}\n  labels:\n    metallb.io/node: {node}\n    metallb.io/service-name: {service}\n    metallb.io/service-namespace: t\n"
    )
}

/// The Services `node`'s statuses name, once the list settles on `want` (or the limit passes).
async fn settle(api: &Api<ServiceL2Status>, node: &str, want: &BTreeSet<String>) -> Vec<String> {
    let end = Instant::now() + LIMIT;
    loop {
        let list = api
            .list(&ListParams::default().labels(&format!("{LABEL_ANNOUNCE_NODE}={node}")))
            .await
            .expect("list ServiceL2Status");
        let mut named: Vec<String> = list
            .items
            .iter()
            .filter(|s| s.status.as_ref().is_some_and(|st| st.node.is_some()))
            .filter_map(|s| {
                let st = s.status.as_ref()?;
                Some(format!(
                    "{}/{}",
                    st.service_namespace.as_deref()?,
                    st.service_name.as_deref()?
                ))
            })
            .collect();
        named.sort();
        let all = list.items.len();
        if (all == named.len()
            && named.iter().cloned().collect::<BTreeSet<_>>() == *want
            && named.len() == want.len())
            || Instant::now() > end
        {
            return named;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn notice(sink: &mut K8sSink, service: &str, announced: bool) {
    let vip: IpAddr = "198.18.0.200".parse().unwrap();
    let services = vec![service.to_string()];
    let action = if announced {
        Action::Announced {
            vip,
            services,
            reason: String::new(),
            trigger: Trigger::Desired,
        }
    } else {
        Action::Withdrawn {
            vip,
            services,
            reason: String::new(),
            successor: None,
            trigger: Trigger::Desired,
        }
    };
    sink.notice(&action);
}

#[test]
fn statuses_follow_the_wishes_leftovers_go_and_nothing_is_written_twice() {
    let Some(c) = Cluster::start(TEST, "sinkapi", &ClusterSpec::nodes(1)) else {
        return;
    };
    let node = c.nodes()[0].to_string();
    c.apply("leftovers", &leftover("l2-left-mine", &node, "gone"));
    c.apply(
        "leftovers",
        &leftover("l2-left-other", "node-other", "kept"),
    );
    let client = c.client().clone();
    c.block_on(async move {
        let api: Api<ServiceL2Status> = Api::namespaced(client.clone(), METALLB_NAMESPACE);
        let counters = SourceCounters::default();
        // No Service or Pod is known: no Event goes, and the statuses have no owner.
        let (services, _) = reflector::store::<CachedService>();
        let (pods, _) = reflector::store::<Pod>();
        let target = Target {
            client: client.clone(),
            namespace: METALLB_NAMESPACE.into(),
            node: node.clone(),
            pod: None,
        };
        let mut sink =
            K8sSink::start_with(target, Shared::default(), services, pods, &counters);
        let started = Instant::now();
        let ids: Vec<String> = (0..SERVICES).map(|i| format!("t/s{i:03}")).collect();
        for id in &ids {
            notice(&mut sink, id, true);
        }
        let want: BTreeSet<String> = ids.iter().cloned().collect();
        let named = settle(&api, &node, &want).await;
        let written = started.elapsed();
        assert_eq!(named.len(), SERVICES, "one status per announced Service");
        assert_eq!(named.iter().cloned().collect::<BTreeSet<_>>(), want, "{named:?}");

        let withdrawn_at = Instant::now();
        for id in &ids[..WITHDRAWN] {
            notice(&mut sink, id, false);
        }
        let want: BTreeSet<String> = ids[WITHDRAWN..].iter().cloned().collect();
        let named = settle(&api, &node, &want).await;
        let deleted = withdrawn_at.elapsed();
        assert_eq!(named.iter().cloned().collect::<BTreeSet<_>>(), want);
        let other = api.get_opt("l2-left-other").await.expect("get");
        assert!(other.is_some(), "another node's status is not this writer's");

        let m = counters.status_writes().metrics().expect("writer metrics");
        println!(
            "{TEST}: {SERVICES} statuses written in {written:?}, {WITHDRAWN} deleted in {deleted:?}; {m:?}"
        );
        assert_eq!((m.create.ok, m.create.failed), (SERVICES as u64, 0));
        assert_eq!((m.patch_status.ok, m.patch_status.failed), (SERVICES as u64, 0));
        // The withdrawn ones and the leftover.
        assert_eq!((m.delete.ok, m.delete.failed), (WITHDRAWN as u64 + 1, 0));
        assert_eq!(m.observed, (SERVICES - WITHDRAWN) as u64);
        drop(sink);
    });
}
