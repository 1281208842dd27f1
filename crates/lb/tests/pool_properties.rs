//! Properties of `lb::pool` over random sequences of service changes, releases and pool
//! changes, on small pools so that exhaustion, sharing and conflicts happen often:
//! no IP is ever held by two services that may not share it, releases return IPs, counters
//! equal a recount, failed operations change nothing, and a restart rebuilt from the IPs
//! services carry keeps every allocation.

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::net::IpAddr;
use vigil_lb::pool::{
    Allocator, Failure, Family, FamilyPolicy, PoolSpec, Pools, Port, Request, ServiceAllocation,
    ServiceFamily, backend_key,
};
use vigil_lb::selector::Selector;

/// IPv4 blocks of eight addresses crossing a /24 boundary (.252 to .3), so that
/// `avoidBuggyIPs` matters, and IPv6 blocks of four.
fn v4_block(i: u8) -> String {
    format!("198.18.{i}.252-198.18.{}.3", i + 1)
}

fn v6_block(i: u8) -> String {
    format!("2001:db8:{i}::/126")
}

const V4_BLOCKS: u8 = 4;
const V6_BLOCKS: u8 = 3;
const POOLS: usize = 3;
const SERVICES: usize = 8;

#[derive(Debug, Clone)]
struct PoolShape {
    auto_assign: bool,
    avoid_buggy: bool,
    /// None, or (priority, only namespace "a", only app=x).
    allocation: Option<(i32, bool, bool)>,
}

#[derive(Debug, Clone)]
struct PoolsShape {
    /// For each v4 and then v6 block, the pool it goes to (or none).
    owner: Vec<Option<usize>>,
    shapes: Vec<PoolShape>,
}

fn pools_shape() -> impl Strategy<Value = PoolsShape> {
    let shape = (
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop::option::weighted(0.4, (0i32..3, any::<bool>(), any::<bool>())),
    )
        .prop_map(|(auto_assign, avoid_buggy, allocation)| PoolShape {
            auto_assign,
            avoid_buggy,
            allocation,
        });
    (
        prop::collection::vec(
            prop::option::weighted(0.8, 0..POOLS),
            (V4_BLOCKS + V6_BLOCKS) as usize,
        ),
        prop::collection::vec(shape, POOLS),
    )
        .prop_map(|(owner, shapes)| PoolsShape { owner, shapes })
}

fn build_pools(shape: &PoolsShape) -> Pools {
    let mut specs = Vec::new();
    for (p, s) in shape.shapes.iter().enumerate() {
        let mut addresses = Vec::new();
        for (b, owner) in shape.owner.iter().enumerate() {
            if *owner == Some(p) {
                let b = b as u8;
                addresses.push(if b < V4_BLOCKS {
                    v4_block(b)
                } else {
                    v6_block(b - V4_BLOCKS)
                });
            }
        }
        if addresses.is_empty() {
            continue;
        }
        specs.push(PoolSpec {
            name: format!("p{p}"),
            addresses,
            auto_assign: s.auto_assign,
            avoid_buggy_ips: s.avoid_buggy,
            service_allocation: s.allocation.map(|(priority, ns, app)| ServiceAllocation {
                priority,
                namespaces: if ns { vec!["a".into()] } else { vec![] },
                namespace_selectors: vec![],
                service_selectors: if app {
                    vec![Selector::parse("app in (x)").unwrap()]
                } else {
                    vec![]
                },
            }),
        });
    }
    Pools::new(specs).expect("generated pools never overlap")
}

#[derive(Debug, Clone)]
struct Spec {
    namespace_a: bool,
    app_x: bool,
    /// 0 v4, 1 v6, 2 dual Prefer, 3 dual Require, 4 single v4 Prefer.
    family: u8,
    primary_v6: bool,
    pool: Option<usize>,
    /// None, or a v4 offset (and, for dual, a v6 offset) into the block universe.
    requested: Option<(u8, u8)>,
    sharing: Option<u8>,
    ports: Vec<u8>,
    local: Option<bool>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        any::<bool>(),
        0u8..5,
        any::<bool>(),
        prop::option::weighted(0.15, 0..POOLS + 1),
        prop::option::weighted(0.1, (0u8..V4_BLOCKS * 8, 0u8..V6_BLOCKS * 4)),
        prop::option::weighted(0.7, prop_oneof![3 => Just(0u8), 1 => Just(1u8)]),
        prop::collection::vec(0u8..3, 1..2),
        prop::option::weighted(0.2, any::<bool>()),
    )
        .prop_map(
            |(namespace_a, app_x, family, primary_v6, pool, requested, sharing, ports, local)| {
                Spec {
                    namespace_a,
                    app_x,
                    family,
                    primary_v6,
                    pool,
                    requested,
                    sharing,
                    ports,
                    local,
                }
            },
        )
}

fn v4_at(offset: u8) -> IpAddr {
    let block = offset / 8;
    let k = offset % 8;
    if k < 4 {
        format!("198.18.{block}.{}", 252 + k).parse().unwrap()
    } else {
        format!("198.18.{}.{}", block + 1, k - 4).parse().unwrap()
    }
}

fn v6_at(offset: u8) -> IpAddr {
    format!("2001:db8:{}::{}", offset / 4, offset % 4)
        .parse()
        .unwrap()
}

fn request(i: usize, s: &Spec) -> Request {
    let ns = if s.namespace_a { "a" } else { "b" };
    let mut r = Request::new(ns, &format!("s{i}"));
    r.labels = [(
        "app".to_string(),
        if s.app_x { "x" } else { "y" }.to_string(),
    )]
    .into();
    (r.family, r.policy) = match s.family {
        0 => (ServiceFamily::Single(Family::V4), FamilyPolicy::SingleStack),
        1 => (ServiceFamily::Single(Family::V6), FamilyPolicy::SingleStack),
        2 => (ServiceFamily::Dual, FamilyPolicy::PreferDualStack),
        3 => (ServiceFamily::Dual, FamilyPolicy::RequireDualStack),
        _ => (
            ServiceFamily::Single(Family::V4),
            FamilyPolicy::PreferDualStack,
        ),
    };
    r.primary = if s.primary_v6 || s.family == 1 {
        Family::V6
    } else {
        Family::V4
    };
    r.pool = s.pool.map(|p| format!("p{p}"));
    r.requested_ips = Ok(match s.requested {
        None => vec![],
        Some((a, b)) => match r.family {
            ServiceFamily::Single(Family::V4) => vec![v4_at(a)],
            ServiceFamily::Single(Family::V6) => vec![v6_at(b)],
            ServiceFamily::Dual => vec![v4_at(a), v6_at(b)],
        },
    });
    r.sharing_key = s.sharing.map(|k| format!("k{k}"));
    r.ports = s
        .ports
        .iter()
        .map(|p| match p {
            0 => Port::tcp(80),
            1 => Port::tcp(443),
            _ => Port::udp(53),
        })
        .collect();
    if let Some(x) = s.local {
        let sel: BTreeMap<String, String> =
            [("app".to_string(), if x { "x" } else { "y" }.to_string())].into();
        r.backend_key = backend_key(true, &sel);
    }
    r
}

#[derive(Debug, Clone)]
enum Op {
    /// The service is created or changed, and converged with the IPs it carries.
    Converge(usize, Spec),
    /// The service is converged again, unchanged.
    Again(usize),
    /// The service is deleted.
    Delete(usize),
    /// The pools change; every service is converged again, as MetalLB's ReprocessAll.
    SetPools(PoolsShape),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..SERVICES, spec()).prop_map(|(i, s)| Op::Converge(i, s)),
        2 => (0..SERVICES).prop_map(Op::Again),
        2 => (0..SERVICES).prop_map(Op::Delete),
        1 => pools_shape().prop_map(Op::SetPools),
    ]
}

/// The controller's view: each live service's request and the IPs its status carries.
#[derive(Debug, Default, Clone)]
struct Cluster {
    services: BTreeMap<usize, (Request, Vec<IpAddr>)>,
}

impl Cluster {
    fn converge(&mut self, alloc: &mut Allocator, i: usize) -> Result<(), TestCaseError> {
        let (req, carried) = self.services.get(&i).cloned().unwrap();
        let c = alloc.converge(&req, &carried);
        // What the status says is what the allocator holds.
        let held = alloc.allocation(&req.key);
        prop_assert_eq!(&c.ips, &held.map(|a| a.ips.clone()).unwrap_or_default());
        prop_assert_eq!(&c.pool, &held.map(|a| a.pool.clone()));
        match &c.failure {
            None => {
                prop_assert!(!c.ips.is_empty());
                let wanted = req.requested_ips.clone().unwrap();
                if !wanted.is_empty() {
                    let (mut a, mut b) = (wanted, c.ips.clone());
                    a.sort();
                    b.sort();
                    prop_assert_eq!(a, b, "requested IPs granted exactly");
                }
                if let Some(pool) = &req.pool {
                    prop_assert_eq!(c.pool.as_ref(), Some(pool));
                }
                let pool = alloc.pools().get(c.pool.as_ref().unwrap()).unwrap();
                prop_assert!(pool.admits(&req.namespace, &req.namespace_labels, &req.labels));
            }
            Some(Failure::Allocation(_)) | Some(Failure::NoPools) => prop_assert!(c.ips.is_empty()),
            Some(Failure::InvalidRequest(_)) => unreachable!("requests are always readable here"),
        }
        self.services.get_mut(&i).unwrap().1 = c.ips;
        Ok(())
    }
}

fn audit(alloc: &Allocator) -> Result<(), TestCaseError> {
    alloc.audit().map_err(TestCaseError::fail)?;
    // Counters against an independent count of each pool's usable addresses.
    for pool in alloc.pools().iter() {
        let counters = alloc.counters(pool.name()).unwrap();
        let mut usable = [0u64; 2];
        let mut held = [0u64; 2];
        for range in pool.ranges() {
            let (first, last) = (to_u128(range.first), to_u128(range.last));
            for n in first..=last {
                let ip = from_u128(range.first, n);
                if pool.owns(ip) {
                    let f = (Family::of(ip) == Family::V6) as usize;
                    usable[f] += 1;
                    if alloc.services_on(ip).next().is_some() {
                        held[f] += 1;
                    }
                }
            }
        }
        prop_assert_eq!(
            [counters.assigned_ipv4, counters.assigned_ipv6],
            held,
            "assigned of {}",
            pool.name()
        );
        prop_assert_eq!(
            [counters.available_ipv4, counters.available_ipv6],
            [usable[0] - held[0], usable[1] - held[1]],
            "available of {}",
            pool.name()
        );
    }
    Ok(())
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4).into(),
        IpAddr::V6(v6) => v6.into(),
    }
}

fn from_u128(like: IpAddr, n: u128) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4((n as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(n.into()),
    }
}

fn run(initial: &PoolsShape, ops: &[Op]) -> Result<(Allocator, Cluster), TestCaseError> {
    let mut alloc = Allocator::new(build_pools(initial));
    let mut cluster = Cluster::default();
    for op in ops {
        match op {
            Op::Converge(i, s) => {
                let req = request(*i, s);
                let mut carried = Vec::new();
                if let Some((old, ips)) = cluster.services.get(i) {
                    if old.key == req.key {
                        carried = ips.clone();
                    } else {
                        // Another namespace: a different Service; the old one is deleted.
                        alloc.release(&old.key);
                    }
                }
                cluster.services.insert(*i, (req, carried));
                cluster.converge(&mut alloc, *i)?;
            }
            Op::Again(i) => {
                if cluster.services.contains_key(i) {
                    let before = alloc.clone();
                    let had = alloc.allocation(&cluster.services[i].0.key).cloned();
                    cluster.converge(&mut alloc, *i)?;
                    let after = alloc.allocation(&cluster.services[i].0.key).cloned();
                    // Converging an unchanged service keeps what it holds (it may only gain
                    // a missing family or, if it held nothing, an allocation).
                    if let (Some(had), Some(after)) = (&had, &after) {
                        prop_assert_eq!(&had.ips[..], &after.ips[..had.ips.len()]);
                    }
                    if had.is_some() && after.is_none() {
                        return Err(TestCaseError::fail(format!("{i} lost its IPs: {before:?}")));
                    }
                }
            }
            Op::Delete(i) => {
                if let Some((req, _)) = cluster.services.remove(i) {
                    let held = alloc.allocation(&req.key).cloned();
                    let counters_before: BTreeMap<String, _> = alloc
                        .pools()
                        .iter()
                        .map(|p| (p.name().to_string(), alloc.counters(p.name())))
                        .collect();
                    let released = alloc.release(&req.key);
                    prop_assert_eq!(&released, &held);
                    prop_assert!(alloc.allocation(&req.key).is_none());
                    if let Some(a) = released {
                        for ip in &a.ips {
                            prop_assert!(
                                alloc.services_on(*ip).all(|s| s != req.key),
                                "{ip} still held"
                            );
                        }
                        // Exactly the IPs nobody else holds come back.
                        let freed = a
                            .ips
                            .iter()
                            .filter(|ip| alloc.services_on(**ip).next().is_none())
                            .count() as u64;
                        let (before, after) = (
                            counters_before[&a.pool].unwrap(),
                            alloc.counters(&a.pool).unwrap(),
                        );
                        prop_assert_eq!(
                            before.assigned_ipv4 + before.assigned_ipv6 - freed,
                            after.assigned_ipv4 + after.assigned_ipv6
                        );
                    }
                }
            }
            Op::SetPools(shape) => {
                alloc.set_pools(build_pools(shape));
                audit(&alloc)?;
                let keys: Vec<usize> = cluster.services.keys().copied().collect();
                for i in keys {
                    cluster.converge(&mut alloc, i)?;
                }
            }
        }
        audit(&alloc)?;
    }
    Ok((alloc, cluster))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_histories_keep_every_invariant(initial in pools_shape(), ops in prop::collection::vec(op(), 1..40)) {
        let (alloc, _) = run(&initial, &ops)?;
        // Pure and deterministic: the same history gives the same state.
        let (again, _) = run(&initial, &ops)?;
        prop_assert_eq!(alloc, again);
    }

    #[test]
    fn a_restart_keeps_every_allocation(initial in pools_shape(), ops in prop::collection::vec(op(), 1..40), seed in any::<u64>()) {
        let (live, cluster) = run(&initial, &ops)?;
        let carried: Vec<(Request, Vec<IpAddr>)> = cluster.services.values().cloned().collect();
        let (rebuilt, _) = Allocator::rebuild(live.pools().clone(), carried.clone());
        audit(&rebuilt)?;
        let mut grew = false;
        for (key, had) in live.allocations() {
            let now = rebuilt.allocation(key).expect("kept");
            prop_assert_eq!(&now.pool, &had.pool);
            prop_assert_eq!(&now.ips[..had.ips.len()], &had.ips[..], "{} kept its IPs", key);
            grew |= now.ips.len() > had.ips.len();
        }
        // With nobody waiting and nothing to add, the rebuilt state is the live one.
        let waiting = carried.iter().any(|(req, _)| live.allocation(&req.key).is_none());
        if !waiting && !grew {
            prop_assert_eq!(live.allocations(), rebuilt.allocations());
        }
        // The order services are listed in does not matter.
        let mut shuffled = carried;
        let n = shuffled.len();
        if n > 1 {
            let mut s = seed;
            for i in (1..n).rev() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                shuffled.swap(i, (s >> 33) as usize % (i + 1));
            }
        }
        let (reordered, _) = Allocator::rebuild(live.pools().clone(), shuffled);
        prop_assert_eq!(reordered, rebuilt);
    }

    #[test]
    fn failed_assigns_change_nothing_and_successful_ones_are_shareable(
        initial in pools_shape(),
        specs in prop::collection::vec((0..SERVICES, spec(), 0u8..V4_BLOCKS * 8, 0u8..V6_BLOCKS * 4, 0u8..3), 1..40),
    ) {
        let mut alloc = Allocator::new(build_pools(&initial));
        for (i, s, a, b, shape) in specs {
            let req = request(i, &s);
            let ips = match shape {
                0 => vec![v4_at(a)],
                1 => vec![v6_at(b)],
                _ => vec![v4_at(a), v6_at(b)],
            };
            let before = alloc.clone();
            match alloc.assign(&req, &ips) {
                Ok(()) => {
                    prop_assert_eq!(&alloc.allocation(&req.key).unwrap().ips, &ips);
                    // Assigning the same again is a no-op.
                    let once = alloc.clone();
                    alloc.assign(&req, &ips).unwrap();
                    prop_assert_eq!(&alloc, &once);
                }
                Err(_) => prop_assert_eq!(&alloc, &before),
            }
            audit(&alloc)?;
        }
    }
}
