//! MetalLB's allocation rules, one test per rule, each stating what MetalLB v0.16.2 does
//! (`internal/allocator/allocator.go`, `controller/service.go`).

use std::net::IpAddr;
use vigil_lb::pool::{
    AllocError, Allocator, ClearReason, Failure, Family, FamilyPolicy, Labels, Note, PoolCounters,
    PoolSpec, Pools, Port, Request, RequestError, ServiceAllocation, ServiceFamily, ShareRefusal,
};
use vigil_lb::selector::Selector;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| ip(s)).collect()
}

fn allocator(specs: Vec<PoolSpec>) -> Allocator {
    Allocator::new(Pools::new(specs).unwrap())
}

fn svc(name: &str) -> Request {
    Request::new("default", name)
}

fn in_ns(ns: &str, name: &str) -> Request {
    Request::new(ns, name)
}

fn sharing(mut r: Request, key: &str, ports: &[Port]) -> Request {
    r.sharing_key = Some(key.to_string());
    r.ports = ports.to_vec();
    r
}

fn dual(mut r: Request, policy: FamilyPolicy) -> Request {
    r.family = ServiceFamily::Dual;
    r.policy = policy;
    r
}

fn v6(mut r: Request) -> Request {
    r.family = ServiceFamily::Single(Family::V6);
    r.primary = Family::V6;
    r
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn with_allocation(mut spec: PoolSpec, sa: ServiceAllocation) -> PoolSpec {
    spec.service_allocation = Some(sa);
    spec
}

fn checked(a: &Allocator) {
    a.audit().unwrap();
}

#[test]
fn lowest_free_ip_first_and_release_returns_it() {
    // getIPFromCIDR walks each entry upwards; entries in configuration order.
    let mut a = allocator(vec![PoolSpec::new(
        "p",
        &["198.18.0.10-198.18.0.11", "198.18.0.1/32"],
    )]);
    assert_eq!(a.allocate(&svc("a")), Ok(ips(&["198.18.0.10"])));
    assert_eq!(a.allocate(&svc("b")), Ok(ips(&["198.18.0.11"])));
    assert_eq!(a.allocate(&svc("c")), Ok(ips(&["198.18.0.1"])));
    assert_eq!(a.allocate(&svc("d")), Err(AllocError::NoAvailableIps));
    let freed = a.release("default/a").unwrap();
    assert_eq!(freed.ips, ips(&["198.18.0.10"]));
    assert_eq!(a.release("default/a"), None);
    assert_eq!(a.allocate(&svc("d")), Ok(ips(&["198.18.0.10"])));
    checked(&a);
}

#[test]
fn assigning_what_a_service_holds_changes_nothing() {
    // Assign is idempotent: "s1 idempotent reassign" in MetalLB's TestAssignment.
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/30"])]);
    let s1 = svc("s1");
    a.assign(&s1, &ips(&["198.18.0.1"])).unwrap();
    let before = a.clone();
    a.assign(&s1, &ips(&["198.18.0.1"])).unwrap();
    assert_eq!(a, before);
    assert_eq!(a.allocate(&s1), Ok(ips(&["198.18.0.1"])));
    assert_eq!(a, before);
}

#[test]
fn an_ip_is_never_given_to_two_services_that_do_not_share() {
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/30"])]);
    a.assign(&svc("s1"), &ips(&["198.18.0.1"])).unwrap();
    let before = a.clone();
    let e = a.assign(&svc("s2"), &ips(&["198.18.0.1"])).unwrap_err();
    assert_eq!(
        e,
        AllocError::IpInUse {
            ip: ip("198.18.0.1"),
            services: vec!["default/s1".into()],
            refusal: ShareRefusal::ExistingDoesNotShare,
        }
    );
    // A failed assign changes nothing.
    assert_eq!(a, before);
    // A sharer meets a service that does not share.
    let e = a
        .assign(
            &sharing(svc("s3"), "k", &[Port::tcp(80)]),
            &ips(&["198.18.0.1"]),
        )
        .unwrap_err();
    assert!(matches!(
        e,
        AllocError::IpInUse {
            refusal: ShareRefusal::ExistingDoesNotShare,
            ..
        }
    ));
}

#[test]
fn buggy_ips_are_skipped_and_cannot_be_asked_for() {
    // MetalLB's TestBuggyIPs: /31s at .0 and .254; only the avoiding pools skip .0 and .255.
    let mut specs = vec![
        PoolSpec::new("a", &["198.18.3.0/31"]),
        PoolSpec::new("b", &["198.18.3.254/31"]),
        PoolSpec::new("c", &["198.18.4.0/31"]),
        PoolSpec::new("d", &["198.18.4.254/31"]),
    ];
    specs[2].avoid_buggy_ips = true;
    specs[3].avoid_buggy_ips = true;
    let mut a = allocator(specs);
    let mut got: Vec<IpAddr> = (0..6)
        .map(|i| a.allocate(&svc(&format!("s{i}"))).unwrap()[0])
        .collect();
    got.sort();
    assert_eq!(
        got,
        ips(&[
            "198.18.3.0",
            "198.18.3.1",
            "198.18.3.254",
            "198.18.3.255",
            "198.18.4.1",
            "198.18.4.254"
        ])
    );
    assert_eq!(a.allocate(&svc("s6")), Err(AllocError::NoAvailableIps));
    a.release("default/s4");
    let mut asks = svc("s7");
    asks.requested_ips = Ok(ips(&["198.18.4.0"]));
    assert_eq!(
        a.allocate(&asks),
        Err(AllocError::NotInAnyPool {
            ips: ips(&["198.18.4.0"])
        })
    );
}

#[test]
fn auto_assign_false_pools_serve_only_who_asks() {
    // MetalLB's TestAutoAssign: automatic allocation skips the pool; the pool annotation and
    // requested IPs still reach it.
    let mut off = PoolSpec::new("manual", &["198.18.0.4/31", "2001:db8::4/127"]);
    off.auto_assign = false;
    let mut a = allocator(vec![
        off.clone(),
        PoolSpec::new("auto", &["198.18.0.10/31"]),
    ]);
    assert_eq!(a.allocate(&svc("a")), Ok(ips(&["198.18.0.10"])));
    assert_eq!(a.allocate(&svc("b")), Ok(ips(&["198.18.0.11"])));
    assert_eq!(a.allocate(&svc("c")), Err(AllocError::NoAvailableIps));
    let mut pinned = svc("c");
    pinned.pool = Some("manual".into());
    assert_eq!(a.allocate(&pinned), Ok(ips(&["198.18.0.4"])));
    let mut asks = svc("d");
    asks.requested_ips = Ok(ips(&["198.18.0.5"]));
    assert_eq!(a.allocate(&asks), Ok(ips(&["198.18.0.5"])));
    // With only a manual pool, no pool matches at all.
    let mut a = allocator(vec![off]);
    assert_eq!(a.allocate(&svc("a")), Err(AllocError::NoPoolMatches));
    checked(&a);
}

#[test]
fn pinned_pools_by_priority_then_open_pools() {
    // pinnedPoolsForService + sortPools: pools whose serviceAllocation admits the service come
    // first, positive priority ascending, then priority 0; then Allocate falls back to the
    // auto-assignable pools without serviceAllocation.
    let ns = |p: i32| ServiceAllocation {
        priority: p,
        namespaces: vec!["team".into()],
        ..ServiceAllocation::default()
    };
    let mut a = allocator(vec![
        with_allocation(PoolSpec::new("low", &["198.18.1.1/32"]), ns(20)),
        with_allocation(PoolSpec::new("high", &["198.18.2.1/32"]), ns(10)),
        with_allocation(PoolSpec::new("none", &["198.18.3.1/32"]), ns(0)),
        PoolSpec::new("open", &["198.18.9.0/30"]),
    ]);
    let got: Vec<String> = (0..4)
        .map(|i| {
            a.allocate(&in_ns("team", &format!("s{i}"))).unwrap();
            a.allocation(&format!("team/s{i}")).unwrap().pool.clone()
        })
        .collect();
    assert_eq!(got, ["high", "low", "none", "open"]);
    // Another namespace never sees the pinned pools.
    a.allocate(&in_ns("other", "x")).unwrap();
    assert_eq!(a.allocation("other/x").unwrap().pool, "open");
    // Asking for a pinned pool from outside it is refused.
    a.release("team/s0");
    let mut outsider = in_ns("other", "y");
    outsider.pool = Some("high".into());
    assert_eq!(
        a.allocate(&outsider),
        Err(AllocError::PoolNotAllowed {
            pool: "high".into()
        })
    );
    let mut outsider = in_ns("other", "y");
    outsider.requested_ips = Ok(ips(&["198.18.2.1"]));
    assert_eq!(
        a.allocate(&outsider),
        Err(AllocError::PoolNotAllowed {
            pool: "high".into()
        })
    );
    checked(&a);
}

#[test]
fn namespace_and_service_selectors_must_both_hold() {
    // isPoolCompatibleWithService: namespace (listed or selected) AND one service selector.
    let sa = ServiceAllocation {
        priority: 1,
        namespaces: vec![],
        namespace_selectors: vec![Selector::parse("env=prod").unwrap()],
        service_selectors: vec![Selector::parse("app in (web,api)").unwrap()],
    };
    let mut a = allocator(vec![
        with_allocation(PoolSpec::new("prod-web", &["198.18.1.0/30"]), sa),
        PoolSpec::new("open", &["198.18.9.0/30"]),
    ]);
    let mut r = in_ns("shop", "front");
    r.namespace_labels = labels(&[("env", "prod")]);
    r.labels = labels(&[("app", "web")]);
    a.allocate(&r).unwrap();
    assert_eq!(a.allocation("shop/front").unwrap().pool, "prod-web");
    // Right namespace, wrong service labels: open pool.
    let mut r2 = r.clone();
    r2.key = "shop/db".into();
    r2.labels = labels(&[("app", "db")]);
    a.allocate(&r2).unwrap();
    assert_eq!(a.allocation("shop/db").unwrap().pool, "open");
    // Right labels, wrong namespace labels: open pool.
    let mut r3 = r.clone();
    r3.key = "shop/dev".into();
    r3.namespace_labels = labels(&[("env", "dev")]);
    a.allocate(&r3).unwrap();
    assert_eq!(a.allocation("shop/dev").unwrap().pool, "open");
    checked(&a);
}

#[test]
fn service_allocation_with_only_a_priority_admits_everyone() {
    // addressPoolServiceAllocationsFromCR: no namespaces and no selectors selects every
    // service, so the pool is pinned for all and beats pools without serviceAllocation.
    let mut a = allocator(vec![
        PoolSpec::new("a-open", &["198.18.1.0/30"]),
        with_allocation(
            PoolSpec::new("z-prio", &["198.18.2.0/30"]),
            ServiceAllocation {
                priority: 5,
                ..ServiceAllocation::default()
            },
        ),
    ]);
    a.allocate(&in_ns("any", "s")).unwrap();
    assert_eq!(a.allocation("any/s").unwrap().pool, "z-prio");
}

#[test]
fn requested_ips_are_checked_as_metallb_checks_them() {
    let mut a = allocator(vec![
        PoolSpec::new("a", &["198.18.1.0/24", "2001:db8:1::/64"]),
        PoolSpec::new("b", &["198.18.2.0/24", "2001:db8:2::/64"]),
    ]);
    let ask = |list: &[&str]| {
        let mut r = svc("s");
        r.requested_ips = Ok(ips(list));
        r
    };
    assert_eq!(
        a.allocate(&ask(&["203.0.113.1"])),
        Err(AllocError::NotInAnyPool {
            ips: ips(&["203.0.113.1"])
        })
    );
    assert!(matches!(
        a.allocate(&ask(&["2001:db8:1::5"])),
        Err(AllocError::RequestedFamilyMismatch { .. })
    ));
    // Dual-stack IPs must come from one pool.
    let mut d = dual(
        ask(&["198.18.1.5", "2001:db8:2::5"]),
        FamilyPolicy::RequireDualStack,
    );
    assert!(matches!(
        a.allocate(&d),
        Err(AllocError::NotInAnyPool { .. })
    ));
    d.requested_ips = Ok(ips(&["198.18.1.5", "2001:db8:1::5"]));
    assert_eq!(a.allocate(&d), Ok(ips(&["198.18.1.5", "2001:db8:1::5"])));
    // Requested IPs outside the requested pool.
    let mut both = ask(&["198.18.2.7"]);
    both.key = "default/t".into();
    both.pool = Some("a".into());
    let before = a.clone();
    assert_eq!(
        a.allocate(&both),
        Err(AllocError::RequestedIpsNotInPool {
            ips: ips(&["198.18.2.7"]),
            pool: "a".into()
        })
    );
    assert_eq!(a, before);
    // An unreadable request fails allocation.
    let mut bad = svc("u");
    bad.requested_ips = Err(RequestError::BothIpFields);
    assert_eq!(
        a.allocate(&bad),
        Err(AllocError::BadRequest(RequestError::BothIpFields))
    );
    // IPv4-mapped IPv6 is IPv4, as Go reads it.
    assert_eq!(
        a.allocate(&ask(&["::ffff:198.18.1.9"])),
        Ok(ips(&["198.18.1.9"]))
    );
    checked(&a);
}

#[test]
fn named_pool_errors() {
    let mut a = allocator(vec![PoolSpec::new("v4", &["198.18.0.1/32"])]);
    let mut r = svc("a");
    r.pool = Some("nope".into());
    assert_eq!(
        a.allocate(&r),
        Err(AllocError::UnknownPool {
            pool: "nope".into()
        })
    );
    r.pool = Some("v4".into());
    let r6 = v6(r.clone());
    assert_eq!(
        a.allocate(&r6),
        Err(AllocError::NoFamilyInPool {
            pool: "v4".into(),
            family: ServiceFamily::Single(Family::V6)
        })
    );
    a.allocate(&r).unwrap();
    let mut r2 = r.clone();
    r2.key = "default/b".into();
    assert_eq!(
        a.allocate(&r2),
        Err(AllocError::PoolExhausted { pool: "v4".into() })
    );
}

#[test]
fn dual_stack_follows_the_family_policy() {
    let mut a = allocator(vec![
        PoolSpec::new("a-v4only", &["198.18.1.0/30"]),
        PoolSpec::new("b-dual", &["2001:db8:2::/126", "198.18.2.0/30"]),
    ]);
    // RequireDualStack: the first pool with both families; IPv4 listed first.
    let req = dual(svc("r"), FamilyPolicy::RequireDualStack);
    assert_eq!(a.allocate(&req), Ok(ips(&["198.18.2.0", "2001:db8:2::"])));
    // PreferDualStack: both if a pool has both.
    assert_eq!(
        a.allocate(&dual(svc("p"), FamilyPolicy::PreferDualStack)),
        Ok(ips(&["198.18.2.1", "2001:db8:2::1"]))
    );
    // Split pools: Require fails, Prefer takes the first pool with the primary family.
    let mut split = allocator(vec![
        PoolSpec::new("a-v6", &["2001:db8:1::/126"]),
        PoolSpec::new("b-v4", &["198.18.1.0/30"]),
    ]);
    assert_eq!(
        split.allocate(&dual(svc("r"), FamilyPolicy::RequireDualStack)),
        Err(AllocError::NoAvailableIps)
    );
    assert_eq!(
        split.allocate(&dual(svc("p"), FamilyPolicy::PreferDualStack)),
        Ok(ips(&["198.18.1.0"]))
    );
    let mut six_first = dual(svc("q"), FamilyPolicy::PreferDualStack);
    six_first.primary = Family::V6;
    assert_eq!(split.allocate(&six_first), Ok(ips(&["2001:db8:1::"])));
    checked(&split);
}

#[test]
fn prefer_dual_stack_gains_the_missing_family_later() {
    // convergeBalancer + AllocateFromPoolForAdditionalFamily: one IP held, the other family
    // tried from the same pool on each convergence.
    let mut a = allocator(vec![PoolSpec::new(
        "p",
        &["198.18.0.0/31", "2001:db8::/128"],
    )]);
    a.allocate(&v6(svc("blocker"))).unwrap();
    let req = dual(svc("s"), FamilyPolicy::PreferDualStack);
    let c = a.converge(&req, &[]);
    assert_eq!(c.ips, ips(&["198.18.0.0"]));
    let c = a.converge(&req, &c.ips);
    assert!(c.notes.contains(&Note::Kept));
    assert!(matches!(
        c.notes.last(),
        Some(Note::AddFamilyFailed(AllocError::NoFamilyInPool { .. }))
    ));
    a.release("default/blocker");
    let c = a.converge(&req, &c.ips);
    assert_eq!(c.ips, ips(&["198.18.0.0", "2001:db8::"]));
    assert_eq!(c.notes.last(), Some(&Note::AddedFamily(ip("2001:db8::"))));
    // Single-stack PreferDualStack (one cluster IP) never gets a second family.
    let single = {
        let mut r = svc("single");
        r.policy = FamilyPolicy::PreferDualStack;
        r
    };
    let c = a.converge(&single, &[]);
    assert_eq!(c.ips, ips(&["198.18.0.1"]));
    let c2 = a.converge(&single, &c.ips);
    assert_eq!(c2.ips, c.ips);
    checked(&a);
}

#[test]
fn sharing_services_pack_onto_one_ip() {
    // getIPFromCIDR takes the first IP checkSharing accepts, used or not.
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/29"])]);
    let web = sharing(svc("web"), "k", &[Port::tcp(80)]);
    let tls = sharing(svc("tls"), "k", &[Port::tcp(443)]);
    let dns_udp = sharing(svc("dns-udp"), "k", &[Port::udp(80)]);
    let clash = sharing(svc("clash"), "k", &[Port::tcp(80)]);
    let other_key = sharing(svc("other"), "j", &[Port::tcp(8080)]);
    assert_eq!(a.allocate(&web), Ok(ips(&["198.18.0.0"])));
    assert_eq!(a.allocate(&tls), Ok(ips(&["198.18.0.0"])));
    // TCP/80 and UDP/80 are different ports.
    assert_eq!(a.allocate(&dns_udp), Ok(ips(&["198.18.0.0"])));
    // Same key but a port in use: next IP.
    assert_eq!(a.allocate(&clash), Ok(ips(&["198.18.0.1"])));
    assert_eq!(a.allocate(&other_key), Ok(ips(&["198.18.0.2"])));
    assert_eq!(
        a.services_on(ip("198.18.0.0")).collect::<Vec<_>>(),
        ["default/dns-udp", "default/tls", "default/web"]
    );
    // Counted once.
    assert_eq!(a.counters("p").unwrap().assigned_ipv4, 3);
    // The port conflict, asked for directly.
    let mut asks = sharing(svc("late"), "k", &[Port::tcp(443)]);
    asks.requested_ips = Ok(ips(&["198.18.0.0"]));
    assert!(matches!(
        a.allocate(&asks),
        Err(AllocError::IpInUse { refusal: ShareRefusal::PortInUse(p), .. }) if p == Port::tcp(443)
    ));
    asks.sharing_key = Some("j".into());
    assert!(matches!(
        a.allocate(&asks),
        Err(AllocError::IpInUse {
            refusal: ShareRefusal::KeyMismatch { .. },
            ..
        })
    ));
    checked(&a);
}

#[test]
fn local_services_share_only_with_the_same_selector() {
    // k8salloc.BackendKey: Local services compare their pod selectors; Cluster ones "".
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/30"])]);
    let local = |name: &str, app: &str, port: u16| {
        let mut r = sharing(svc(name), "k", &[Port::tcp(port)]);
        r.backend_key = vigil_lb::pool::backend_key(true, &labels(&[("app", app)]));
        r
    };
    let a1 = local("a1", "shop", 80);
    a.assign(&a1, &ips(&["198.18.0.1"])).unwrap();
    a.assign(&local("a2", "shop", 443), &ips(&["198.18.0.1"]))
        .unwrap();
    let e = a
        .assign(&local("b", "blog", 8080), &ips(&["198.18.0.1"]))
        .unwrap_err();
    assert!(matches!(
        e,
        AllocError::IpInUse {
            refusal: ShareRefusal::BackendMismatch { .. },
            ..
        }
    ));
    let cluster = sharing(svc("c"), "k", &[Port::tcp(9090)]);
    assert!(a.assign(&cluster, &ips(&["198.18.0.1"])).is_err());
    // Allocated automatically, they go elsewhere.
    assert_eq!(
        a.allocate(&local("b", "blog", 8080)),
        Ok(ips(&["198.18.0.0"]))
    );
    checked(&a);
}

#[test]
fn a_service_alone_may_change_its_sharing_key_in_place() {
    // checkSharing: a key mismatch only matters if other services hold the IP.
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/30"])]);
    a.assign(
        &sharing(svc("s4"), "k1", &[Port::tcp(80)]),
        &ips(&["198.18.0.1"]),
    )
    .unwrap();
    a.assign(
        &sharing(svc("s4"), "k2", &[Port::tcp(80)]),
        &ips(&["198.18.0.1"]),
    )
    .unwrap();
    a.assign(
        &sharing(svc("s3"), "k2", &[Port::tcp(53)]),
        &ips(&["198.18.0.1"]),
    )
    .unwrap();
    // Now it is not alone: the key cannot change.
    let e = a
        .assign(
            &sharing(svc("s3"), "k3", &[Port::tcp(53)]),
            &ips(&["198.18.0.1"]),
        )
        .unwrap_err();
    assert!(matches!(e, AllocError::IpInUse { .. }));
    // But its ports can.
    a.assign(
        &sharing(svc("s3"), "k2", &[Port::tcp(54)]),
        &ips(&["198.18.0.1"]),
    )
    .unwrap();
    checked(&a);
}

#[test]
fn converge_keeps_clears_and_moves_as_converge_balancer() {
    let mut a = allocator(vec![
        PoolSpec::new("a", &["198.18.1.0/30"]),
        PoolSpec::new("b", &["198.18.2.0/30"]),
    ]);
    let s = svc("s");
    let c = a.converge(&s, &[]);
    assert_eq!(
        (c.ips.clone(), c.pool.as_deref()),
        (ips(&["198.18.1.0"]), Some("a"))
    );
    assert_eq!(c.notes, vec![Note::Allocated(ips(&["198.18.1.0"]))]);
    // Converging again keeps it.
    let again = a.converge(&s, &c.ips);
    assert_eq!(
        (again.ips.clone(), again.notes.clone()),
        (c.ips.clone(), vec![Note::Kept])
    );
    // Another pool asked for: cleared, then allocated there.
    let mut to_b = s.clone();
    to_b.pool = Some("b".into());
    let moved = a.converge(&to_b, &c.ips);
    assert_eq!(moved.ips, ips(&["198.18.2.0"]));
    assert!(matches!(
        moved.notes[0],
        Note::Cleared {
            reason: ClearReason::DifferentPoolRequested,
            ..
        }
    ));
    // Other IPs asked for: moved to them.
    let mut to_ip = to_b.clone();
    to_ip.requested_ips = Ok(ips(&["198.18.2.3"]));
    let moved = a.converge(&to_ip, &moved.ips);
    assert_eq!(moved.ips, ips(&["198.18.2.3"]));
    // An unreadable request with IPs held: they are kept, LoadBalancerFailed.
    let mut broken = to_b.clone();
    broken.requested_ips = Err(RequestError::BadLoadBalancerIp("x".into()));
    let kept = a.converge(&broken, &moved.ips);
    assert_eq!(kept.ips, moved.ips);
    assert_eq!(
        kept.failure,
        Some(Failure::InvalidRequest(RequestError::BadLoadBalancerIp(
            "x".into()
        )))
    );
    // Carried IPs of the wrong family: cleared and re-allocated.
    let wrong = a.converge(&s, &ips(&["2001:db8::1"]));
    assert!(matches!(
        wrong.notes[0],
        Note::Cleared {
            reason: ClearReason::FamilyChanged,
            ..
        }
    ));
    assert_eq!(wrong.ips, ips(&["198.18.1.0"]));
    // Carried IPs outside every pool: ClearAssignment, then a new IP.
    let outside = a.converge(&s, &ips(&["203.0.113.9"]));
    assert!(matches!(
        &outside.notes[0],
        Note::Cleared {
            reason: ClearReason::NotAllowed(AllocError::NotInAnyPool { .. }),
            ..
        }
    ));
    assert_eq!(outside.ips, ips(&["198.18.1.0"]));
    checked(&a);
}

#[test]
fn allocation_failure_leaves_the_service_with_nothing() {
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.1/32"])]);
    a.converge(&svc("first"), &[]);
    let c = a.converge(&svc("second"), &[]);
    assert_eq!(
        c.failure,
        Some(Failure::Allocation(AllocError::NoAvailableIps))
    );
    assert!(c.ips.is_empty() && c.pool.is_none());
    // No pools at all: cleared.
    let mut empty = Allocator::new(Pools::default());
    let c = empty.converge(&svc("x"), &ips(&["198.18.0.1"]));
    assert_eq!(c.failure, Some(Failure::NoPools));
    assert!(matches!(
        c.notes[0],
        Note::Cleared {
            reason: ClearReason::NoPools,
            ..
        }
    ));
}

#[test]
fn pool_changes_move_or_release_allocations() {
    // SetPools: an allocation follows its IPs to whichever pool holds them now.
    let mut a = allocator(vec![
        PoolSpec::new("old", &["198.18.1.0/30"]),
        PoolSpec::new("z-gone", &["198.18.2.0/30"]),
    ]);
    let mut to_gone = svc("g");
    to_gone.pool = Some("z-gone".into());
    a.allocate(&svc("s")).unwrap();
    a.allocate(&to_gone).unwrap();
    let released = a.set_pools(Pools::new([PoolSpec::new("new", &["198.18.1.0/29"])]).unwrap());
    assert_eq!(released, ["default/g"]);
    assert_eq!(a.allocation("default/s").unwrap().pool, "new");
    assert_eq!(a.counters("new").unwrap().assigned_ipv4, 1);
    assert_eq!(a.counters("z-gone"), None);
    checked(&a);
    // Turning avoidBuggyIPs on releases a .0.
    let mut avoid = PoolSpec::new("new", &["198.18.1.0/29"]);
    avoid.avoid_buggy_ips = true;
    assert_eq!(a.set_pools(Pools::new([avoid]).unwrap()), ["default/s"]);
}

#[test]
fn restart_keeps_allocations_and_the_first_service_wins_a_conflict() {
    // reprocessAll: services with more IPs first, then list order; convergeBalancer then
    // keeps the first holder and re-allocates the loser (ClearAssignment).
    let pools = || Pools::new([PoolSpec::new("p", &["198.18.0.0/29", "2001:db8::/125"])]).unwrap();
    let carried = vec![
        (svc("b-loser"), ips(&["198.18.0.1"])),
        (svc("a-winner"), ips(&["198.18.0.1"])),
        (svc("c-bystander"), ips(&["198.18.0.0"])),
        (
            dual(svc("z-dual"), FamilyPolicy::RequireDualStack),
            ips(&["198.18.0.5", "2001:db8::1"]),
        ),
        (svc("new"), vec![]),
    ];
    let (a, results) = Allocator::rebuild(pools(), carried.clone());
    let order: Vec<&str> = results.iter().map(|(k, _)| k.as_str()).collect();
    // z-dual carries two IPs, so it goes first; then namespace/name order.
    let expected = [
        "default/z-dual",
        "default/a-winner",
        "default/b-loser",
        "default/c-bystander",
        "default/new",
    ];
    assert_eq!(order, expected);
    let held = |k: &str| a.allocation(k).unwrap().ips.clone();
    assert_eq!(held("default/z-dual"), ips(&["198.18.0.5", "2001:db8::1"]));
    assert_eq!(held("default/a-winner"), ips(&["198.18.0.1"]));
    // The loser is re-allocated. MetalLB, converging in one pass, would give it .0, which
    // c-bystander (later in the order) still carries, and then move c-bystander too; here
    // the bystander keeps .0 and the loser gets the first IP nobody carries.
    assert_eq!(held("default/c-bystander"), ips(&["198.18.0.0"]));
    assert_eq!(held("default/b-loser"), ips(&["198.18.0.2"]));
    assert_eq!(held("default/new"), ips(&["198.18.0.3"]));
    let (_, loser) = &results[2];
    assert!(matches!(
        &loser.notes[0],
        Note::Cleared {
            reason: ClearReason::NotAllowed(AllocError::IpInUse { .. }),
            ..
        }
    ));
    assert_eq!(
        loser.notes.last(),
        Some(&Note::Allocated(ips(&["198.18.0.2"])))
    );
    checked(&a);
    // The input order does not matter.
    let mut reversed = carried;
    reversed.reverse();
    assert_eq!(Allocator::rebuild(pools(), reversed).0, a);
}

#[test]
fn counters_follow_metallb_pool_status() {
    let mut a = allocator(vec![PoolSpec::new(
        "p",
        &["198.18.0.0/30", "2001:db8::/126"],
    )]);
    assert_eq!(
        a.counters("p"),
        Some(PoolCounters {
            assigned_ipv4: 0,
            assigned_ipv6: 0,
            available_ipv4: 4,
            available_ipv6: 4
        })
    );
    a.allocate(&dual(svc("d"), FamilyPolicy::RequireDualStack))
        .unwrap();
    a.allocate(&v6(svc("six"))).unwrap();
    assert_eq!(
        a.counters("p"),
        Some(PoolCounters {
            assigned_ipv4: 1,
            assigned_ipv6: 2,
            available_ipv4: 3,
            available_ipv6: 2
        })
    );
    a.release("default/d");
    assert_eq!(a.counters("p").unwrap().assigned_ipv6, 1);
    assert_eq!(a.counters("nope"), None);
}

#[test]
fn huge_ipv6_pools_allocate_without_walking_them() {
    let mut a = allocator(vec![PoolSpec::new("big", &["2001:db8::/64"])]);
    for i in 0..200 {
        let got = a.allocate(&v6(svc(&format!("s{i}")))).unwrap();
        assert_eq!(got[0], ip(&format!("2001:db8::{i:x}")));
    }
    let c = a.counters("big").unwrap();
    assert_eq!(
        (c.assigned_ipv6, c.available_ipv6),
        (200, i64::MAX as u64 - 200)
    );
}

#[test]
fn where_we_differ_from_metallb() {
    // Both differences checked against MetalLB v0.16.2 with conformance/metallb-alloc.
    //
    // 1. A pool whose namespaceSelectors match no namespace: MetalLB resolves them to an empty
    //    namespace set and then admits every namespace (a/s got 198.18.0.0 from it when asking
    //    for the pool); we admit only namespaces that match.
    let mut a = allocator(vec![with_allocation(
        PoolSpec::new("p", &["198.18.0.0/30"]),
        ServiceAllocation {
            namespace_selectors: vec![Selector::parse("env=none").unwrap()],
            ..ServiceAllocation::default()
        },
    )]);
    let mut r = in_ns("a", "s");
    r.namespace_labels = labels(&[("env", "prod")]);
    r.pool = Some("p".into());
    assert_eq!(
        a.allocate(&r),
        Err(AllocError::PoolNotAllowed { pool: "p".into() })
    );
    // 2. A lone /32 ending in .0 in an avoiding pool: MetalLB counts it as -1 address (with
    //    198.18.1.0/31 next to it, the pool reported 0 available); we count 0, so 1 here.
    let mut spec = PoolSpec::new("q", &["198.18.0.0/32", "198.18.1.0/31"]);
    spec.avoid_buggy_ips = true;
    let a = allocator(vec![spec]);
    assert_eq!(a.counters("q").unwrap().available_ipv4, 1);
    // 3. A sharer without ports: MetalLB forgets an IP's sharing key when its last port goes,
    //    so after b (key k, TCP/80) left, c (no key) was let onto the IP a (key k, no ports)
    //    still held. We check every holder and refuse c.
    let mut a = allocator(vec![PoolSpec::new("p", &["198.18.0.0/30"])]);
    let x = ips(&["198.18.0.1"]);
    a.assign(&sharing(svc("a"), "k", &[]), &x).unwrap();
    a.assign(&sharing(svc("b"), "k", &[Port::tcp(80)]), &x)
        .unwrap();
    a.release("default/b");
    assert!(matches!(
        a.assign(&svc("c"), &x),
        Err(AllocError::IpInUse {
            refusal: ShareRefusal::NewDoesNotShare,
            ..
        })
    ));
    checked(&a);
}
