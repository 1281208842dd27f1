//! The core driven with plain values: no API server, no clock. Each scenario feeds watch
//! events and write results, and reads the writes the core asks for.

use super::*;
use crate::{events, service};
use serde_json::json;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A LoadBalancer Service `ns/name` at version `rv`, with `annotations`, showing `ingress`.
fn lb(
    ns: &str,
    name: &str,
    rv: &str,
    annotations: &[(&str, &str)],
    ingress: &[&str],
) -> Arc<Service> {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    let ingress: Vec<_> = ingress.iter().map(|i| json!({"ip": i})).collect();
    let status = if ingress.is_empty() {
        json!({})
    } else {
        json!({"loadBalancer": {"ingress": ingress}})
    };
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{ns}-{name}"),
                         "resourceVersion": rv, "annotations": annotations},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                     "ports": [{"port": 80, "protocol": "TCP"}]},
            "status": status,
        }))
        .unwrap(),
    )
}

fn pool(name: &str, addresses: &[&str]) -> IPAddressPool {
    serde_json::from_value(json!({
        "metadata": {"namespace": "metallb-system", "name": name, "uid": format!("uid-{name}"),
                     "resourceVersion": "1"},
        "spec": {"addresses": addresses},
    }))
    .unwrap()
}

fn namespaces() -> BTreeMap<String, Labels> {
    ["a", "b", "n"]
        .into_iter()
        .map(|n| (n.to_string(), Labels::new()))
        .collect()
}

/// A core allocating from `pools`, every Service listed (none at first, unless given).
fn started(pools: &[IPAddressPool], services: Vec<Arc<Service>>) -> AllocatorCore {
    let mut core = AllocatorCore::new(None);
    core.handle_config(pools.iter().cloned(), namespaces());
    core.handle_services_listed(services);
    assert!(core.is_allocating());
    core
}

fn drain(core: &mut AllocatorCore) -> Vec<Write> {
    std::iter::from_fn(|| core.poll_write()).collect()
}

/// The Service status writes in `writes`: (key, ingress IPs, resourceVersion made from).
fn status_writes(writes: &[Write]) -> Vec<(String, Vec<IpAddr>, String)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::ServiceStatus(s) => Some((
                service::key(s),
                service::ingress_ips(s),
                s.metadata.resource_version.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

/// The events in `writes`: (key, reason).
fn events_of(writes: &[Write]) -> Vec<(String, &'static str)> {
    writes
        .iter()
        .filter_map(|w| match w {
            Write::Event { service, event } => Some((service::key(service), event.reason)),
            _ => None,
        })
        .collect()
}

/// Answers every pool status write in `writes` as stored.
fn pools_stored(core: &mut AllocatorCore, writes: &[Write]) {
    for w in writes {
        if let Write::PoolStatus { name, .. } = w {
            let stored = WriteResult::Written {
                resource_version: Some("9".into()),
                uid: Some(format!("uid-{name}")),
            };
            core.handle_written(&WriteId::Pool(name.clone()), stored);
        }
    }
}

/// Drains the writes asked for, answering pool status writes as stored.
fn settle(core: &mut AllocatorCore) -> Vec<Write> {
    let w = drain(core);
    pools_stored(core, &w);
    w
}

fn stored(core: &mut AllocatorCore, key: &str, rv: &str) {
    let result = WriteResult::Written {
        resource_version: Some(rv.into()),
        uid: None,
    };
    core.handle_written(&WriteId::Service(key.into()), result);
}

#[test]
fn a_new_service_gets_one_status_write_then_its_event_and_the_pool_counters() {
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], vec![]);
    let first = drain(&mut core);
    // The new pool's status, before any Service.
    assert!(
        matches!(&first[..], [Write::PoolStatus { name, counters }] if name == "p" && counters.assigned_ipv4 == 0)
    );
    pools_stored(&mut core, &first);

    core.handle_service(lb("n", "web", "1", &[], &[]));
    let w = settle(&mut core);
    assert_eq!(
        status_writes(&w),
        vec![("n/web".into(), vec![ip("198.18.0.0")], "1".into())]
    );
    // The pool counts the IP as soon as the allocator holds it; the event waits for the
    // write.
    assert!(matches!(&w[1..], [Write::PoolStatus { counters, .. }] if counters.assigned_ipv4 == 1));
    stored(&mut core, "n/web", "2");
    let w = drain(&mut core);
    assert_eq!(events_of(&w), vec![("n/web".into(), events::IP_ALLOCATED)]);
    assert_eq!(w.len(), 1, "{w:?}");

    // The watch delivers the write: nothing more to do.
    let from_p = [("metallb.io/ip-allocated-from-pool", "p")];
    core.handle_service(lb("n", "web", "2", &from_p, &["198.18.0.0"]));
    assert_eq!(drain(&mut core), vec![]);
}

#[test]
fn a_deleted_service_readmits_one_waiting_for_its_ip() {
    let mut core = started(&[pool("p", &["198.18.0.7/32"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "first", "1", &[], &[]));
    stored(&mut core, "n/first", "2");
    settle(&mut core);
    core.handle_service(lb("n", "second", "3", &[], &[]));
    let w = drain(&mut core);
    assert_eq!(status_writes(&w), vec![]);
    assert_eq!(
        events_of(&w),
        vec![("n/second".into(), events::ALLOCATION_FAILED)]
    );

    core.handle_service_deleted("n/first", Some("uid-n-first"));
    let w = drain(&mut core);
    assert_eq!(
        status_writes(&w),
        vec![("n/second".into(), vec![ip("198.18.0.7")], "3".into())]
    );
    assert_eq!(core.allocation("n/first"), None);
}

#[test]
fn a_pool_added_readmits_waiting_services_in_metallbs_order() {
    let holder = lb("b", "holder", "1", &[], &["198.18.0.1"]);
    let mut core = started(&[pool("full", &["198.18.0.1/32"])], vec![holder]);
    settle(&mut core);
    for (ns, name) in [("b", "one"), ("a", "two"), ("a", "one")] {
        core.handle_service(lb(ns, name, "2", &[], &[]));
    }
    let w = drain(&mut core);
    assert_eq!(status_writes(&w), vec![]);
    assert_eq!(events_of(&w).len(), 3, "{w:?}");

    // Two more IPs: the waiting Services by namespace and name, the holder untouched.
    let pools = [
        pool("full", &["198.18.0.1/32"]),
        pool("more", &["198.18.1.0/31"]),
    ];
    core.handle_config(pools, namespaces());
    let w = drain(&mut core);
    assert_eq!(
        status_writes(&w),
        vec![
            ("a/one".into(), vec![ip("198.18.1.0")], "2".into()),
            ("a/two".into(), vec![ip("198.18.1.1")], "2".into()),
        ]
    );
    assert_eq!(
        events_of(&w),
        vec![("b/one".into(), events::ALLOCATION_FAILED)]
    );
    assert_eq!(core.allocation("b/holder"), Some(&[ip("198.18.0.1")][..]));
}

#[test]
fn a_conflict_is_written_again_from_the_newer_version_keeping_the_ip() {
    let mut core = started(&[pool("p", &["198.18.0.7/32"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "1", &[], &[]));
    assert_eq!(status_writes(&drain(&mut core)).len(), 1);
    core.handle_written(&WriteId::Service("n/web".into()), WriteResult::Conflict);
    // Nothing to write until the newer version arrives; the IP stays held meanwhile.
    let w = drain(&mut core);
    assert_eq!(status_writes(&w), vec![]);
    core.handle_service(lb("n", "other", "2", &[], &[]));
    assert_eq!(
        events_of(&drain(&mut core)),
        vec![("n/other".into(), events::ALLOCATION_FAILED)]
    );
    core.handle_service(lb("n", "web", "3", &[("note", "changed")], &[]));
    assert_eq!(
        status_writes(&drain(&mut core)),
        vec![("n/web".into(), vec![ip("198.18.0.7")], "3".into())]
    );
}

#[test]
fn a_change_during_a_write_is_written_once_after_it() {
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "1", &[], &[]));
    assert_eq!(
        status_writes(&drain(&mut core)),
        vec![("n/web".into(), vec![ip("198.18.0.0")], "1".into())]
    );
    // Someone asks for another IP while the first write is out: nothing more is sent.
    let asks = [("metallb.io/loadBalancerIPs", "198.18.0.2")];
    core.handle_service(lb("n", "web", "2", &asks, &[]));
    assert_eq!(core.allocation("n/web"), Some(&[ip("198.18.0.2")][..]));
    assert_eq!(status_writes(&drain(&mut core)), vec![]);
    // The first write meets the newer version; one write follows, from that version.
    core.handle_written(&WriteId::Service("n/web".into()), WriteResult::Conflict);
    let w = drain(&mut core);
    assert_eq!(
        status_writes(&w),
        vec![("n/web".into(), vec![ip("198.18.0.2")], "2".into())]
    );
    stored(&mut core, "n/web", "3");
    assert_eq!(status_writes(&drain(&mut core)), vec![]);
}

#[test]
fn a_version_older_than_the_own_write_is_not_converged() {
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "1", &[], &[]));
    drain(&mut core);
    stored(&mut core, "n/web", "5");
    settle(&mut core);
    // The watch, behind, delivers a version from before the write again.
    core.handle_service(lb("n", "web", "1", &[], &[]));
    assert_eq!(drain(&mut core), vec![]);
    assert_eq!(core.allocation("n/web"), Some(&[ip("198.18.0.0")][..]));
}

#[test]
fn a_service_gone_before_its_write_frees_its_ip_for_a_waiting_one() {
    let mut core = started(&[pool("p", &["198.18.0.7/32"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "1", &[], &[]));
    drain(&mut core);
    core.handle_service(lb("n", "late", "2", &[], &[]));
    drain(&mut core);
    core.handle_written(&WriteId::Service("n/web".into()), WriteResult::Gone);
    assert_eq!(
        status_writes(&drain(&mut core)),
        vec![("n/late".into(), vec![ip("198.18.0.7")], "2".into())]
    );
}

#[test]
fn a_restart_keeps_what_services_carry_and_writes_nothing() {
    let carried = vec![
        lb(
            "n",
            "web",
            "4",
            &[("metallb.io/ip-allocated-from-pool", "p")],
            &["198.18.0.3"],
        ),
        lb(
            "n",
            "api",
            "5",
            &[("metallb.io/ip-allocated-from-pool", "p")],
            &["198.18.0.1"],
        ),
    ];
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], carried);
    let w = drain(&mut core);
    assert_eq!(status_writes(&w), vec![]);
    assert_eq!(core.allocation("n/web"), Some(&[ip("198.18.0.3")][..]));
    assert_eq!(core.allocation("n/api"), Some(&[ip("198.18.0.1")][..]));
}

#[test]
fn invalid_pools_touch_nothing_until_they_are_fixed() {
    let mut core = AllocatorCore::new(None);
    core.handle_services_listed(vec![lb("n", "web", "1", &[], &[])]);
    core.handle_config([pool("p", &["not an address"])], namespaces());
    assert!(!core.is_allocating());
    assert_eq!(drain(&mut core), vec![]);
    core.handle_config([pool("p", &["198.18.0.0/30"])], namespaces());
    assert_eq!(status_writes(&drain(&mut core)).len(), 1);
}

#[test]
fn a_write_whose_version_the_watch_brings_first_is_not_waited_for() {
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "1", &[], &[]));
    settle(&mut core);
    // The watch is quicker than the write's answer, and a change follows at once.
    let from_p = [("metallb.io/ip-allocated-from-pool", "p")];
    core.handle_service(lb("n", "web", "2", &from_p, &["198.18.0.0"]));
    stored(&mut core, "n/web", "2");
    let asks = [
        ("metallb.io/ip-allocated-from-pool", "p"),
        ("metallb.io/loadBalancerIPs", "198.18.0.3"),
    ];
    core.handle_service(lb("n", "web", "3", &asks, &["198.18.0.0"]));
    assert_eq!(
        status_writes(&drain(&mut core)),
        vec![("n/web".into(), vec![ip("198.18.0.3")], "3".into())]
    );
}

#[test]
fn a_newer_version_after_a_relist_is_taken_even_if_the_own_write_was_never_seen() {
    let mut core = started(&[pool("p", &["198.18.0.0/30"])], vec![]);
    settle(&mut core);
    core.handle_service(lb("n", "web", "10", &[], &[]));
    settle(&mut core);
    stored(&mut core, "n/web", "11");
    // The watch skipped version 11 (a relist in between); 12 is newer than the write.
    let asks = [("metallb.io/loadBalancerIPs", "198.18.0.3")];
    core.handle_service(lb("n", "web", "12", &asks, &["198.18.0.0"]));
    assert_eq!(
        status_writes(&drain(&mut core)),
        vec![("n/web".into(), vec![ip("198.18.0.3")], "12".into())]
    );
}

#[test]
fn a_pool_status_counts_as_metallb_does_with_avoid_buggy_ips() {
    let mut buggy = pool("b", &["198.18.101.0-198.18.101.0"]);
    buggy.spec.avoid_buggy_ips = Some(true);
    let mut core = started(&[buggy], vec![]);
    let w = drain(&mut core);
    // MetalLB takes the one address off twice: -1 available.
    assert!(
        matches!(&w[..], [Write::PoolStatus { counters, .. }] if counters.available_ipv4 == -1),
        "{w:?}"
    );
}
