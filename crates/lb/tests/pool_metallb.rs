//! Differential test: random scenarios run through MetalLB's own allocator (v0.16.2's
//! `internal/allocator`, behind `metallb-alloc-probe` from `conformance/build.sh
//! metallb-alloc`) and through `lb::pool`; every step must give the same IPs from the same
//! pool, fail in the same places, and leave the same pool counters. Steps: allocate (after
//! clearing), assign IPs as given, release, and replace the pools.
//!
//! Scenarios avoid the two places where MetalLB's choice is random (Go map order): at most one
//! auto-assignable pool without `serviceAllocation`, and pinned pools with distinct
//! priorities (at most one without). They also avoid the one documented difference in
//! admission (namespace selectors that match no namespace). Each `alloc` step clears the
//! service first, as `convergeBalancer` does before `allocateIPs`.
//!
//! Skips with a note when the probe is not built, unless `VIGIL_REQUIRE_GO=1`.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use vigil_lb::pool::{
    Allocator, Family, FamilyPolicy, PoolSpec, Pools, Port, Request, ServiceAllocation,
    ServiceFamily,
};
use vigil_lb::selector::{Operator, Selector};

const SCENARIOS: usize = 1000;
const SERVICES: u64 = 8;

/// A small deterministic generator (SplitMix64), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Debug, Clone)]
struct PoolPlan {
    name: String,
    addresses: Vec<String>,
    auto_assign: bool,
    avoid_buggy: bool,
    /// (priority, variant) of the serviceAllocation.
    allocation: Option<(i32, u64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Clear the service, then allocate (`allocateIPs`).
    Alloc,
    /// `Assign` the IPs as they are (no clearing first).
    Assign,
    /// `Unassign`.
    Release,
    /// `SetPools` with new pools.
    SetPools,
}

#[derive(Debug, Clone)]
struct Step {
    kind: Kind,
    new_pools: Vec<PoolPlan>,
    service: u64,
    namespace_a: bool,
    app_x: bool,
    /// 0 v4, 1 v6, 2 dual.
    family: u64,
    policy: FamilyPolicy,
    primary_v6: bool,
    pool: Option<String>,
    ips: Vec<IpAddr>,
    sharing: Option<String>,
    /// One or two ports (MetalLB's handling of services without ports differs, see
    /// `tests/pool.rs`).
    ports: Vec<Port>,
    backend: String,
}

fn v4_block(i: u64) -> String {
    format!("198.18.{i}.252-198.18.{}.3", i + 1)
}

fn v6_block(i: u64) -> String {
    format!("2001:db8:{i}::/126")
}

fn random_v4(rng: &mut Rng) -> IpAddr {
    let block = rng.below(4);
    let k = rng.below(8);
    let s = if k < 4 {
        format!("198.18.{block}.{}", 252 + k)
    } else {
        format!("198.18.{}.{}", block + 1, k - 4)
    };
    s.parse().unwrap()
}

fn random_v6(rng: &mut Rng) -> IpAddr {
    format!("2001:db8:{}::{}", rng.below(3), rng.below(4))
        .parse()
        .unwrap()
}

fn plan_pools(rng: &mut Rng) -> Vec<PoolPlan> {
    let count = 1 + rng.below(3) as usize;
    let mut plans: Vec<PoolPlan> = (0..count)
        .map(|i| PoolPlan {
            name: format!("p{i}"),
            addresses: Vec::new(),
            auto_assign: true,
            avoid_buggy: rng.chance(40),
            allocation: None,
        })
        .collect();
    for b in 0..7u64 {
        if rng.chance(80) {
            let p = rng.below(count as u64) as usize;
            plans[p]
                .addresses
                .push(if b < 4 { v4_block(b) } else { v6_block(b - 4) });
        }
    }
    plans.retain(|p| !p.addresses.is_empty());
    let mut open_taken = false;
    let mut zero_taken = false;
    let mut priorities: Vec<i32> = vec![10, 20, 30];
    for plan in &mut plans {
        match rng.below(3) {
            0 if !open_taken => open_taken = true,
            1 => plan.auto_assign = false,
            _ => {
                let priority = if !zero_taken && rng.chance(30) {
                    zero_taken = true;
                    0
                } else {
                    priorities.remove(rng.below(priorities.len() as u64) as usize)
                };
                plan.allocation = Some((priority, rng.below(8)));
            }
        }
    }
    plans
}

fn plan_step(rng: &mut Rng, pools: usize) -> Step {
    let family = rng.below(3);
    let policy = match (family, rng.below(3)) {
        (2, 0) => FamilyPolicy::RequireDualStack,
        (2, _) => FamilyPolicy::PreferDualStack,
        (_, 0) => FamilyPolicy::PreferDualStack,
        _ => FamilyPolicy::SingleStack,
    };
    let kind = match rng.below(100) {
        0..60 => Kind::Alloc,
        60..75 => Kind::Assign,
        75..93 => Kind::Release,
        _ => Kind::SetPools,
    };
    let ips = if kind == Kind::Assign {
        match rng.below(4) {
            0 => vec![random_v4(rng)],
            1 => vec![random_v6(rng)],
            2 => vec![random_v4(rng), random_v6(rng)],
            _ => vec![random_v4(rng), random_v4(rng)],
        }
    } else if rng.chance(15) {
        match family {
            0 => vec![random_v4(rng)],
            1 => vec![random_v6(rng)],
            _ => vec![random_v4(rng), random_v6(rng)],
        }
    } else {
        Vec::new()
    };
    let new_pools = if kind == Kind::SetPools {
        plan_pools(rng)
    } else {
        Vec::new()
    };
    let all = [Port::tcp(80), Port::tcp(443), Port::udp(53)];
    let first = rng.below(3) as usize;
    let mut ports = vec![all[first].clone()];
    if rng.chance(30) {
        ports.push(all[(first + 1 + rng.below(2) as usize) % 3].clone());
    }
    Step {
        kind,
        new_pools,
        service: rng.below(SERVICES),
        namespace_a: rng.chance(50),
        app_x: rng.chance(50),
        family,
        policy,
        primary_v6: family == 1 || rng.chance(30),
        pool: rng
            .chance(25)
            .then(|| format!("p{}", rng.below(pools as u64 + 1))),
        ips,
        sharing: rng.chance(60).then(|| format!("k{}", rng.below(2))),
        ports,
        backend: match rng.below(4) {
            0 => "app=x".into(),
            1 => "app=y".into(),
            _ => String::new(),
        },
    }
}

fn selectors(variant: u64) -> (Vec<String>, Vec<Selector>, Vec<Selector>) {
    let sel = |text: &str| Selector::parse(text).unwrap();
    let prod = sel("env=prod");
    let app_x = sel("app=x");
    let app_in = sel("app in (x)");
    let not_x = sel("app notin (x)");
    let has_app = sel("app");
    let no_team = sel("!team");
    let env_in = sel("env in (dev,test)");
    match variant {
        0 => (vec![], vec![], vec![]),
        1 => (vec!["a".into()], vec![], vec![]),
        2 => (vec![], vec![prod], vec![]),
        3 => (vec![], vec![], vec![app_x]),
        4 => (vec!["b".into()], vec![], vec![app_in]),
        5 => (vec![], vec![env_in], vec![not_x]),
        6 => (vec![], vec![], vec![has_app.clone(), no_team]),
        _ => (vec!["a".into()], vec![sel("env=dev")], vec![has_app]),
    }
}

/// The selector as the API's structured form (`k=v` as `matchLabels`).
fn selector_json(s: &Selector) -> Value {
    let mut labels = serde_json::Map::new();
    let mut exprs = Vec::new();
    for r in s.requirements() {
        let values: Vec<&String> = r.values.iter().collect();
        let operator = match r.op {
            Operator::Equals => {
                labels.insert(r.key.clone(), json!(values[0]));
                continue;
            }
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::NotEquals => unreachable!("the structured form has no !="),
        };
        exprs.push(json!({"key": r.key, "operator": operator, "values": values}));
    }
    json!({"matchLabels": labels, "matchExpressions": exprs})
}

fn pool_json(p: &PoolPlan) -> Value {
    let mut spec = json!({
        "addresses": p.addresses,
        "autoAssign": p.auto_assign,
        "avoidBuggyIPs": p.avoid_buggy,
    });
    if let Some((priority, variant)) = p.allocation {
        let (namespaces, ns_sel, svc_sel) = selectors(variant);
        spec["serviceAllocation"] = json!({
            "priority": priority,
            "namespaces": namespaces,
            "namespaceSelectors": ns_sel.iter().map(selector_json).collect::<Vec<_>>(),
            "serviceSelectors": svc_sel.iter().map(selector_json).collect::<Vec<_>>(),
        });
    }
    json!({"metadata": {"name": p.name, "namespace": "metallb-system"}, "spec": spec})
}

fn resources_json(pools: &[PoolPlan]) -> Value {
    json!({
        "ipaddresspools": pools.iter().map(pool_json).collect::<Vec<_>>(),
        "namespaces": [
            {"metadata": {"name": "a", "labels": {"env": "prod"}}},
            {"metadata": {"name": "b", "labels": {"env": "dev"}}},
        ],
    })
}

fn build_pools(pools: &[PoolPlan]) -> Pools {
    Pools::new(pools.iter().map(pool_spec)).unwrap()
}

fn pool_spec(p: &PoolPlan) -> PoolSpec {
    PoolSpec {
        name: p.name.clone(),
        addresses: p.addresses.clone(),
        auto_assign: p.auto_assign,
        avoid_buggy_ips: p.avoid_buggy,
        service_allocation: p.allocation.map(|(priority, variant)| {
            let (namespaces, namespace_selectors, service_selectors) = selectors(variant);
            ServiceAllocation {
                priority,
                namespaces,
                namespace_selectors,
                service_selectors,
            }
        }),
    }
}

fn namespace_of(step: &Step) -> &'static str {
    if step.namespace_a { "a" } else { "b" }
}

fn key_of(step: &Step) -> String {
    format!("{}/s{}", namespace_of(step), step.service)
}

fn policy_name(p: FamilyPolicy) -> &'static str {
    match p {
        FamilyPolicy::SingleStack => "SingleStack",
        FamilyPolicy::PreferDualStack => "PreferDualStack",
        FamilyPolicy::RequireDualStack => "RequireDualStack",
    }
}

fn step_json(step: &Step) -> Value {
    match step.kind {
        Kind::Release => return json!({"op": "release", "key": key_of(step)}),
        Kind::SetPools => {
            return json!({"op": "setpools", "resources": resources_json(&step.new_pools)});
        }
        Kind::Alloc | Kind::Assign => {}
    }
    let families = match (step.family, step.primary_v6) {
        (0, _) => vec!["IPv4"],
        (1, _) => vec!["IPv6"],
        (_, true) => vec!["IPv6", "IPv4"],
        (_, false) => vec!["IPv4", "IPv6"],
    };
    let family = ["ipv4", "ipv6", "dual"][step.family as usize];
    json!({
        "op": if step.kind == Kind::Assign { "assign" } else { "alloc" },
        "key": key_of(step),
        "service": {
            "metadata": {
                "namespace": namespace_of(step),
                "name": format!("s{}", step.service),
                "labels": {"app": if step.app_x { "x" } else { "y" }},
            },
            "spec": {"ipFamilyPolicy": policy_name(step.policy), "ipFamilies": families},
        },
        "family": family,
        "pool": step.pool.clone().unwrap_or_default(),
        "ips": step.ips.iter().map(|ip| ip.to_string()).collect::<Vec<_>>(),
        "ports": step.ports.iter().map(|p| json!({"protocol": p.protocol, "port": p.port})).collect::<Vec<_>>(),
        "sharing": step.sharing.clone().unwrap_or_default(),
        "backend": step.backend,
    })
}

fn request(step: &Step) -> Request {
    let ns = namespace_of(step);
    let mut r = Request::new(ns, &format!("s{}", step.service));
    r.namespace_labels = [(
        "env".to_string(),
        if step.namespace_a { "prod" } else { "dev" }.to_string(),
    )]
    .into();
    r.labels = [(
        "app".to_string(),
        if step.app_x { "x" } else { "y" }.to_string(),
    )]
    .into();
    r.family = match step.family {
        0 => ServiceFamily::Single(Family::V4),
        1 => ServiceFamily::Single(Family::V6),
        _ => ServiceFamily::Dual,
    };
    r.policy = step.policy;
    r.primary = if step.primary_v6 {
        Family::V6
    } else {
        Family::V4
    };
    r.pool = step.pool.clone();
    r.requested_ips = Ok(step.ips.clone());
    r.ports = step.ports.clone();
    r.sharing_key = step.sharing.clone();
    r.backend_key = step.backend.clone();
    r
}

fn probe() -> Option<PathBuf> {
    let dir = std::env::var_os("VIGIL_GO_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/.build/bin")
        });
    let bin = dir.join("metallb-alloc-probe");
    if bin.is_file() {
        return Some(bin);
    }
    if std::env::var("VIGIL_REQUIRE_GO").as_deref() == Ok("1") {
        panic!(
            "{} missing: run conformance/build.sh metallb-alloc",
            bin.display()
        );
    }
    eprintln!(
        "note: {} not built (conformance/build.sh metallb-alloc); skipping",
        bin.display()
    );
    None
}

#[test]
fn lb_pool_allocates_as_metallb_does() {
    let Some(bin) = probe() else {
        return;
    };
    let mut scenarios = Vec::new();
    let mut input = Vec::new();
    for seed in 0..SCENARIOS as u64 {
        let mut rng = Rng(seed);
        let pools = plan_pools(&mut rng);
        let steps: Vec<Step> = (0..1 + rng.below(30))
            .map(|_| plan_step(&mut rng, pools.len()))
            .collect();
        let line = json!({
            "resources": resources_json(&pools),
            "ops": steps.iter().map(step_json).collect::<Vec<_>>(),
        });
        serde_json::to_writer(&mut input, &line).unwrap();
        input.push(b'\n');
        scenarios.push((seed, pools, steps));
    }
    let mut child = Command::new(&bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run metallb-alloc-probe");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "metallb-alloc-probe failed");
    let outputs: Vec<Value> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(outputs.len(), scenarios.len());

    let (mut steps_run, mut allocations, mut failures, mut shared) = (0, 0, 0, 0);
    let (mut assigns_ok, mut assigns_refused, mut pool_changes) = (0, 0, 0);
    for ((seed, pools, steps), got) in scenarios.iter().zip(&outputs) {
        assert!(
            got.get("config_err").is_none(),
            "seed {seed}: MetalLB refused {pools:?}: {got}"
        );
        let mut ours = Allocator::new(build_pools(pools));
        for (i, (step, theirs)) in steps
            .iter()
            .zip(got["results"].as_array().unwrap())
            .enumerate()
        {
            let key = key_of(step);
            let (ips, pool, failed) = match step.kind {
                Kind::Release => {
                    ours.release(&key);
                    (Vec::new(), None, false)
                }
                Kind::SetPools => {
                    ours.set_pools(build_pools(&step.new_pools));
                    (Vec::new(), None, false)
                }
                Kind::Alloc => {
                    ours.release(&key);
                    match ours.allocate(&request(step)) {
                        Ok(ips) => (ips, ours.allocation(&key).map(|a| a.pool.clone()), false),
                        Err(_) => (Vec::new(), None, true),
                    }
                }
                Kind::Assign => {
                    let failed = ours.assign(&request(step), &step.ips).is_err();
                    let held = ours.allocation(&key);
                    (
                        held.map(|a| a.ips.clone()).unwrap_or_default(),
                        held.map(|a| a.pool.clone()),
                        failed,
                    )
                }
            };
            let their_ips: Vec<IpAddr> = theirs["ips"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().parse().unwrap())
                .collect();
            let their_pool =
                Some(theirs["pool"].as_str().unwrap().to_string()).filter(|p| !p.is_empty());
            let their_failed = theirs.get("err").is_some();
            let context = || {
                format!("seed {seed} step {i}: {step:?}\npools {pools:?}\nmetallb said {theirs}")
            };
            assert_eq!(failed, their_failed, "failure differs; {}", context());
            if matches!(step.kind, Kind::Alloc | Kind::Assign) {
                assert_eq!(ips, their_ips, "IPs differ; {}", context());
                assert_eq!(pool, their_pool, "pool differs; {}", context());
            }
            let counters: BTreeMap<String, [u64; 4]> = theirs["counters"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, c)| {
                    let n = |k: &str| c[k].as_u64().unwrap();
                    (
                        name.clone(),
                        [
                            n("AssignedIPv4"),
                            n("AssignedIPv6"),
                            n("AvailableIPv4"),
                            n("AvailableIPv6"),
                        ],
                    )
                })
                .collect();
            for (name, theirs) in &counters {
                let c = ours.counters(name).unwrap();
                let mine = [
                    c.assigned_ipv4,
                    c.assigned_ipv6,
                    c.available_ipv4,
                    c.available_ipv6,
                ];
                assert_eq!(&mine, theirs, "counters of {name} differ; {}", context());
            }
            ours.audit().unwrap();
            steps_run += 1;
            match (step.kind, failed) {
                (Kind::Assign, false) => assigns_ok += 1,
                (Kind::Assign, true) => assigns_refused += 1,
                (Kind::SetPools, _) => pool_changes += 1,
                _ => {}
            }
            if step.kind == Kind::Alloc {
                if failed {
                    failures += 1;
                } else {
                    allocations += 1;
                    shared += usize::from(ips.iter().any(|ip| ours.services_on(*ip).count() > 1));
                }
            }
        }
    }
    println!(
        "{} scenarios, {steps_run} steps: {allocations} allocations ({shared} onto a shared IP), {failures} failed allocations, {assigns_ok} assigns and {assigns_refused} refused, {pool_changes} pool changes; all as MetalLB v0.16.2",
        scenarios.len()
    );
    // The scenarios must exercise both outcomes, or the comparison says little.
    assert!(
        allocations > 1000 && failures > 100 && shared > 50,
        "{allocations} {failures} {shared}"
    );
}
