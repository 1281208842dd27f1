//! Seeded random sequences over three pool slots and six Service slots.

use crate::APP_NAMESPACES;
use crate::ops::{Op, Svc, ns_labels, pool, svc};
use serde_json::json;

/// splitmix64: a seeded generator, so a failing random sequence can be replayed.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len())]
    }
}

/// Pool slot `i`'s addresses lie in 198.18.(100+i).0/28 and 2001:db8:(100+i)::/124, so pools
/// never overlap whatever each draw makes of them.
fn random_pool(rng: &mut Rng, slot: usize) -> Op {
    let net = 100 + slot;
    let mut addresses = Vec::new();
    let first = rng.below(4);
    let len = 1 + rng.below(3);
    addresses.push(format!(
        "198.18.{net}.{first}-198.18.{net}.{}",
        first + len - 1
    ));
    if rng.chance(30) {
        addresses.push(format!("198.18.{net}.8/31"));
    }
    if rng.chance(40) {
        addresses.push(format!("2001:db8:{net}::/127"));
    }
    let mut spec = json!({"addresses": addresses});
    if rng.chance(25) {
        spec["autoAssign"] = json!(false);
    }
    if rng.chance(20) {
        spec["avoidBuggyIPs"] = json!(true);
    }
    if rng.chance(35) {
        let mut sa = json!({});
        if rng.chance(60) {
            sa["priority"] = json!(rng.below(3));
        }
        if rng.chance(40) {
            sa["namespaces"] = json!([rng.pick(&APP_NAMESPACES)]);
        }
        if rng.chance(30) {
            sa["namespaceSelectors"] =
                json!([{"matchLabels": {"team": rng.pick(&["blue", "green"])}}]);
        }
        if rng.chance(30) {
            sa["serviceSelectors"] = json!([{"matchLabels": {"tier": "web"}}]);
        }
        spec["serviceAllocation"] = sa;
    }
    pool(&format!("r{slot}"), spec)
}

/// Service slot `i` keeps its name, namespace and IP families for a whole sequence (the API
/// server does not let a Service switch families freely); the rest is drawn each time.
fn random_service(rng: &mut Rng, slot: usize) -> Op {
    let ns = APP_NAMESPACES[slot % 2];
    let mut s = Svc::lb(ns, &format!("s{slot}"));
    s = match slot % 4 {
        1 => s.families("SingleStack", &["IPv6"]),
        3 => s.families(
            rng.pick(&["PreferDualStack", "RequireDualStack"]),
            &["IPv4", "IPv6"],
        ),
        _ => s,
    };
    if rng.chance(10) {
        s = s.type_(rng.pick(&["ClusterIP", "NodePort"]));
    }
    s = s.ports(&[rng.pick(&[80, 443, 8080])]);
    if rng.chance(40) {
        s = s.ann("metallb.io/allow-shared-ip", rng.pick(&["k1", "k2"]));
    }
    if rng.chance(25) {
        s = s.ann(
            "metallb.io/address-pool",
            rng.pick(&["r0", "r1", "r2", "none"]),
        );
    }
    if rng.chance(15) {
        let net = 100 + rng.below(3);
        let ip = format!("198.18.{net}.{}", rng.below(5));
        s = if rng.chance(50) {
            s.ip(&ip)
        } else {
            s.ann("metallb.io/loadBalancerIPs", &ip)
        };
    }
    if rng.chance(20) {
        s = s.label("tier", "web");
    }
    if rng.chance(15) {
        s = s.local(rng.pick(&["x", "y"]));
    }
    svc(s)
}

pub(crate) fn random_sequence(rng: &mut Rng, ops: usize) -> Vec<Op> {
    let mut out = vec![
        ns_labels(APP_NAMESPACES[0], &[("team", "blue")]),
        ns_labels(APP_NAMESPACES[1], &[("team", "green")]),
        random_pool(rng, 0),
    ];
    for _ in 1..ops {
        out.push(match rng.below(100) {
            0..15 => {
                let slot = rng.below(3);
                random_pool(rng, slot)
            }
            15..20 => Op::DeletePool(format!("r{}", rng.below(3))),
            20..75 => {
                let slot = rng.below(6);
                random_service(rng, slot)
            }
            75..90 => {
                let slot = rng.below(6);
                Op::DeleteSvc(APP_NAMESPACES[slot % 2], format!("s{slot}"))
            }
            _ => {
                // Mostly a team each, so that selectors usually match some namespace.
                let ns = rng.pick(&APP_NAMESPACES);
                match rng.below(4) {
                    0 => ns_labels(ns, &[]),
                    1 | 2 => ns_labels(ns, &[("team", "blue")]),
                    _ => ns_labels(ns, &[("team", "green")]),
                }
            }
        });
    }
    out
}
