use super::*;
use crate::crd::InterfaceInfo;

const NODE: &str = "node-a";
const POD: &str = "uid-pod-a";

fn status(service: &str, interfaces: &[&str]) -> ServiceL2StatusStatus {
    let (ns, name) = service.split_once('/').unwrap();
    ServiceL2StatusStatus {
        node: Some(NODE.into()),
        service_name: Some(name.into()),
        service_namespace: Some(ns.into()),
        interfaces: (!interfaces.is_empty()).then(|| {
            interfaces
                .iter()
                .map(|i| InterfaceInfo {
                    name: Some((*i).into()),
                })
                .collect()
        }),
    }
}

fn pod() -> Option<OwnerReference> {
    Some(OwnerReference {
        uid: POD.into(),
        ..OwnerReference::default()
    })
}

fn want(service: &str) -> Option<Want> {
    Some(Want {
        status: status(service, &[]),
        owner: pod(),
    })
}

fn seen(name: &str, version: &str, status: Option<ServiceL2StatusStatus>) -> Seen {
    Seen {
        name: name.into(),
        version: version.into(),
        status,
        owners: vec![POD.into()],
    }
}

/// A reconciler whose first list showed `objects`.
fn listed(max: usize, objects: &[(&str, Seen)]) -> Reconciler {
    let mut r = Reconciler::new(max);
    r.observe(Observation::Init);
    for (key, s) in objects {
        r.observe(Observation::InitApply((*key).into(), s.clone()));
    }
    r.observe(Observation::InitDone);
    r
}

fn ok(effects: Vec<Effect>) -> Outcome {
    Outcome { effects, ok: true }
}

/// Every operation available now.
fn drain(r: &mut Reconciler, now: Instant) -> Vec<Op> {
    std::iter::from_fn(|| r.next_op(now)).collect()
}

#[test]
fn nothing_is_decided_before_the_first_list_then_leftovers_go_and_wishes_are_written() {
    let t = Instant::now();
    let mut r = Reconciler::new(16);
    r.desire("default/web".into(), want("default/web"));
    assert_eq!(r.next_op(t), None, "the watch has not listed yet");
    r.observe(Observation::Init);
    // Left by an earlier run: this node no longer announces default/old.
    let old = seen("l2-old", "1", Some(status("default/old", &[])));
    r.observe(Observation::InitApply("default/old".into(), old));
    assert_eq!(r.next_op(t), None, "the list is not complete");
    r.observe(Observation::InitDone);
    let ops = drain(&mut r, t);
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert!(ops.contains(&Op {
        key: "default/old".into(),
        step: Step::Delete {
            name: "l2-old".into()
        },
        want: None,
    }));
    assert!(ops.contains(&Op {
        key: "default/web".into(),
        step: Step::Create,
        want: want("default/web"),
    }));
}

#[test]
fn announce_withdraw_announce_with_the_create_in_flight_writes_once() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[]);
    r.desire(key.into(), want(key));
    let op = r.next_op(t).unwrap();
    assert_eq!(op.step, Step::Create);
    // The wishes change while the create runs: they wait, and the newest wins.
    r.desire(key.into(), None);
    assert_eq!(r.next_op(t), None, "one operation per Service");
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t), None, "one operation per Service");
    r.finished(
        key,
        ok(vec![
            Effect::Wrote(seen("l2-x", "1", None)),
            Effect::Wrote(seen("l2-x", "2", Some(status(key, &[])))),
        ]),
        t,
    );
    assert_eq!(r.next_op(t), None, "announced and written: nothing left");
    // The echoes come: the create's, then the patch's.
    r.observe(Observation::Apply(key.into(), seen("l2-x", "1", None)));
    assert_eq!(r.next_op(t), None, "an older echo changes nothing");
    r.observe(Observation::Apply(
        key.into(),
        seen("l2-x", "2", Some(status(key, &[]))),
    ));
    assert_eq!(r.next_op(t), None);
    assert!(r.is_settled());
}

#[test]
fn announce_withdraw_announce_with_each_write_in_flight_ends_announced() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[]);
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t).unwrap().step, Step::Create);
    r.desire(key.into(), None);
    r.finished(
        key,
        ok(vec![Effect::Wrote(seen(
            "l2-x",
            "2",
            Some(status(key, &[])),
        ))]),
        t,
    );
    // Withdrawn meanwhile: the object just created goes.
    let op = r.next_op(t).unwrap();
    assert_eq!(
        op.step,
        Step::Delete {
            name: "l2-x".into()
        }
    );
    // Announced again while the delete runs: it waits for the delete.
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t), None);
    r.finished(key, ok(vec![Effect::Deleted("l2-x".into())]), t);
    let op = r.next_op(t).unwrap();
    assert_eq!((op.step, op.want), (Step::Create, want(key)));
    r.finished(
        key,
        ok(vec![Effect::Wrote(seen(
            "l2-y",
            "4",
            Some(status(key, &[])),
        ))]),
        t,
    );
    assert_eq!(r.next_op(t), None);
    // Echoes, late and in order: the first object, its delete, the second.
    r.observe(Observation::Apply(
        key.into(),
        seen("l2-x", "2", Some(status(key, &[]))),
    ));
    assert_eq!(r.next_op(t), None, "the old object is known deleted");
    r.observe(Observation::Delete(
        key.into(),
        seen("l2-x", "3", Some(status(key, &[]))),
    ));
    r.observe(Observation::Apply(
        key.into(),
        seen("l2-y", "4", Some(status(key, &[]))),
    ));
    assert_eq!(r.next_op(t), None);
    assert!(r.is_settled());
    assert_eq!(r.observed(), 1);
}

#[test]
fn a_withdrawn_service_is_forgotten_once_its_status_is_gone() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[(key, seen("l2-x", "1", Some(status(key, &[]))))]);
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t), None, "already right: kept, not written");
    r.desire(key.into(), None);
    let op = r.next_op(t).unwrap();
    assert_eq!(
        op.step,
        Step::Delete {
            name: "l2-x".into()
        }
    );
    // The API server answered 404: gone all the same.
    r.finished(key, ok(vec![Effect::Deleted("l2-x".into())]), t);
    r.observe(Observation::Delete(key.into(), seen("l2-x", "2", None)));
    assert_eq!(r.next_op(t), None);
    assert!(r.desired.is_empty(), "{:?}", r.desired);
    assert!(r.is_settled());
}

#[test]
fn a_failed_status_patch_is_patched_again_after_its_backoff_not_recreated() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[]);
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t).unwrap().step, Step::Create);
    // Created, but the status patch failed.
    r.finished(
        key,
        Outcome {
            effects: vec![Effect::Wrote(seen("l2-x", "1", None))],
            ok: false,
        },
        t,
    );
    assert_eq!(r.next_op(t), None, "backing off");
    assert_eq!((r.queue_depth(), r.backing_off()), (1, 1));
    assert_eq!(r.deadline(), Some(t + RETRY_MIN));
    let op = r.next_op(t + RETRY_MIN).unwrap();
    assert_eq!(
        op.step,
        Step::PatchStatus {
            name: "l2-x".into()
        }
    );
    // It fails again: the wait doubles.
    r.finished(
        key,
        Outcome {
            effects: vec![],
            ok: false,
        },
        t + RETRY_MIN,
    );
    assert_eq!(r.next_op(t + RETRY_MIN * 2), None);
    assert!(r.next_op(t + RETRY_MIN * 3).is_some());
}

#[test]
fn one_failing_service_stalls_nothing_else() {
    let t = Instant::now();
    let mut r = listed(16, &[]);
    r.desire("default/a".into(), want("default/a"));
    let a = r.next_op(t).unwrap();
    r.finished(
        &a.key,
        Outcome {
            effects: vec![],
            ok: false,
        },
        t,
    );
    r.desire("default/b".into(), want("default/b"));
    let b = r.next_op(t).unwrap();
    assert_eq!((b.key.as_str(), b.step), ("default/b", Step::Create));
    // A newer wish for the failing Service waits for its backoff too, then wins.
    r.desire("default/a".into(), None);
    assert_eq!(r.next_op(t), None);
    assert_eq!(r.next_op(t + RETRY_MIN), None, "nothing exists to delete");
    assert!(
        !r.desired.contains_key("default/a"),
        "forgotten once settled"
    );
}

#[test]
fn at_most_max_in_flight_and_one_per_service() {
    let t = Instant::now();
    let mut r = listed(16, &[]);
    for i in 0..40 {
        let key = format!("default/s{i}");
        r.desire(key.clone(), want(&key));
    }
    let ops = drain(&mut r, t);
    assert_eq!(ops.len(), 16);
    assert_eq!(r.in_flight(), 16);
    assert_eq!(r.queue_depth(), 24);
    let keys: HashSet<&str> = ops.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys.len(), 16, "one operation per Service");
    r.finished(&ops[0].key, ok(vec![]), t);
    // The finished Service is looked at again (queued last); a new one starts.
    let next = r.next_op(t).unwrap();
    assert_ne!(next.key, ops[0].key);
    assert_eq!(r.next_op(t), None);
}

#[test]
fn a_status_that_cannot_be_kept_is_deleted_then_created_and_extras_go() {
    let t = Instant::now();
    let key = "default/web";
    let mut foreign = seen("l2-foreign", "1", Some(status(key, &[])));
    foreign.owners = vec!["uid-an-old-pod".into()];
    let mut other_node = seen("l2-node", "2", Some(status(key, &[])));
    if let Some(s) = other_node.status.as_mut() {
        s.node = Some("node-b".into());
    }
    let mut r = listed(16, &[(key, foreign), (key, other_node)]);
    r.desire(key.into(), want(key));
    for name in ["l2-foreign", "l2-node"] {
        let op = r.next_op(t).unwrap();
        assert_eq!(op.step, Step::Delete { name: name.into() });
        assert_eq!(r.next_op(t), None);
        r.finished(key, ok(vec![Effect::Deleted(name.into())]), t);
    }
    assert_eq!(r.next_op(t).unwrap().step, Step::Create);

    // Two keepable objects: the right one stays, the other goes.
    let right = seen("l2-b", "3", Some(status(key, &[])));
    let stale = seen("l2-a", "4", None);
    let mut r = listed(16, &[(key, right), (key, stale)]);
    r.desire(key.into(), want(key));
    let op = r.next_op(t).unwrap();
    assert_eq!(
        op.step,
        Step::Delete {
            name: "l2-a".into()
        }
    );
}

#[test]
fn interfaces_changing_is_a_status_patch() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[(key, seen("l2-x", "1", Some(status(key, &[]))))]);
    let eth0 = Some(Want {
        status: status(key, &["eth0"]),
        owner: pod(),
    });
    r.desire(key.into(), eth0.clone());
    let op = r.next_op(t).unwrap();
    assert_eq!(
        (op.step, op.want),
        (
            Step::PatchStatus {
                name: "l2-x".into()
            },
            eth0
        )
    );
}

#[test]
fn a_status_deleted_by_someone_else_is_created_again() {
    let t = Instant::now();
    let key = "default/web";
    let mut r = listed(16, &[(key, seen("l2-x", "1", Some(status(key, &[]))))]);
    r.desire(key.into(), want(key));
    assert_eq!(r.next_op(t), None);
    // The garbage collector (its owner Pod went) or a person deleted it.
    r.observe(Observation::Delete(key.into(), seen("l2-x", "2", None)));
    assert_eq!(r.next_op(t).unwrap().step, Step::Create);
}

#[test]
fn a_relist_replaces_what_was_seen_and_keeps_unechoed_writes() {
    let t = Instant::now();
    let mut r = listed(
        16,
        &[(
            "default/a",
            seen("l2-a", "1", Some(status("default/a", &[]))),
        )],
    );
    r.desire("default/a".into(), want("default/a"));
    r.desire("default/b".into(), want("default/b"));
    let op = r.next_op(t).unwrap();
    assert_eq!(op.key, "default/b");
    r.finished(
        "default/b",
        ok(vec![Effect::Wrote(seen(
            "l2-b",
            "5",
            Some(status("default/b", &[])),
        ))]),
        t,
    );
    // The watch lost its place; the relist began before b's create and a was deleted.
    r.observe(Observation::Init);
    r.observe(Observation::InitDone);
    let ops = drain(&mut r, t);
    assert_eq!(
        ops.iter()
            .map(|o| (o.key.as_str(), &o.step))
            .collect::<Vec<_>>(),
        vec![("default/a", &Step::Create)],
        "b's create is still expected, not repeated"
    );
    // b's echo never comes: after the TTL the watch alone is believed.
    assert_eq!(
        r.next_op(t + EXPECTATION_TTL).map(|o| o.key),
        Some("default/b".into())
    );
}

#[test]
fn an_object_without_service_labels_is_not_this_writers() {
    let object = ServiceL2Status::default();
    assert_eq!(Seen::of(&object), None);
    let object = crate::status::service_l2_status(
        "metallb-system",
        NODE,
        "default",
        "web",
        &crate::Interfaces::All,
    );
    let mut object = object;
    object.metadata.name = Some("l2-x".into());
    object.metadata.resource_version = Some("7".into());
    let (key, s) = Seen::of(&object).unwrap();
    assert_eq!(key, "default/web");
    assert_eq!((s.name.as_str(), s.version.as_str()), ("l2-x", "7"));
    assert_eq!(s.status, Some(status("default/web", &[])));
}

#[test]
fn retry_delay_doubles_up_to_its_bound() {
    assert_eq!(retry_delay(1), RETRY_MIN);
    assert_eq!(retry_delay(2), RETRY_MIN * 2);
    assert_eq!(retry_delay(40), RETRY_MAX);
}
