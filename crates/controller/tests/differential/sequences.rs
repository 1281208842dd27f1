//! The hand-picked sequences, one per feature of MetalLB's allocation.

use crate::ops::{Op, Svc, del, ns_labels, pool, svc};
use serde_json::json;

pub(crate) const A: &str = "dt-a";
pub(crate) const B: &str = "dt-b";

pub(crate) fn hand_picked() -> Vec<(&'static str, Vec<Op>)> {
    let shared = |name: &str, key: &str, ports: &[u16]| {
        Svc::lb(A, name)
            .ann("metallb.io/address-pool", "one")
            .ann("metallb.io/allow-shared-ip", key)
            .ports(ports)
    };
    vec![
        (
            "exhaustion and release",
            vec![
                pool("small", json!({"addresses": ["198.18.10.0/31"]})),
                svc(Svc::lb(A, "a")),
                svc(Svc::lb(A, "b")),
                svc(Svc::lb(A, "c")),
                del(A, "a"),
                svc(Svc::lb(B, "d")),
                pool("small", json!({"addresses": ["198.18.10.0/30"]})),
            ],
        ),
        (
            "sharing",
            vec![
                pool(
                    "one",
                    json!({"addresses": ["198.18.11.7/32"], "autoAssign": false}),
                ),
                svc(shared("s80", "web", &[80])),
                svc(shared("s443", "web", &[443])),
                svc(shared("s80-again", "web", &[80])),
                svc(shared("other-key", "db", &[5432])),
                svc(shared("s80-again", "web", &[8080])),
                del(A, "s80"),
                del(A, "s443"),
                del(A, "s80-again"),
            ],
        ),
        (
            "requested IPs and pools",
            vec![
                pool("auto", json!({"addresses": ["198.18.12.0/30"]})),
                pool(
                    "manual",
                    json!({"addresses": ["198.18.13.10-198.18.13.12"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "by-spec").ip("198.18.13.11")),
                svc(Svc::lb(A, "by-annotation").ann("metallb.io/loadBalancerIPs", "198.18.12.2")),
                svc(Svc::lb(A, "taken").ann("metallb.io/loadBalancerIPs", "198.18.13.11")),
                svc(Svc::lb(A, "outside").ip("198.18.99.1")),
                svc(Svc::lb(A, "both")
                    .ip("198.18.13.10")
                    .ann("metallb.io/loadBalancerIPs", "198.18.13.10")),
                svc(Svc::lb(A, "by-pool").ann("metallb.io/address-pool", "manual")),
                svc(Svc::lb(A, "pool-and-ip")
                    .ann("metallb.io/address-pool", "auto")
                    .ann("metallb.io/loadBalancerIPs", "198.18.13.12")),
                svc(Svc::lb(A, "no-such-pool").ann("metallb.io/address-pool", "nope")),
                svc(Svc::lb(A, "bad-ip").ann("metallb.io/loadBalancerIPs", "not-an-ip")),
                // Moving a Service by changing what it asks for.
                svc(Svc::lb(A, "by-spec").ip("198.18.13.12")),
                svc(Svc::lb(A, "by-pool").ann("metallb.io/address-pool", "auto")),
                svc(Svc::lb(A, "by-annotation")),
            ],
        ),
        (
            "deprecated annotations",
            vec![
                pool(
                    "legacy",
                    json!({"addresses": ["198.18.14.0/30"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "old-pool").ann("metallb.universe.tf/address-pool", "legacy")),
                svc(Svc::lb(A, "old-ip").ann("metallb.universe.tf/loadBalancerIPs", "198.18.14.3")),
                svc(Svc::lb(A, "old-share-1")
                    .ann("metallb.universe.tf/address-pool", "legacy")
                    .ann("metallb.universe.tf/allow-shared-ip", "k")),
                svc(Svc::lb(A, "old-share-2")
                    .ports(&[81])
                    .ann("metallb.universe.tf/address-pool", "legacy")
                    .ann("metallb.universe.tf/allow-shared-ip", "k")),
                svc(Svc::lb(A, "old-pool").ann("metallb.io/address-pool", "legacy")),
            ],
        ),
        (
            "dual stack",
            vec![
                pool(
                    "dual",
                    json!({"addresses": ["198.18.15.0/31", "2001:db8:15::/127"]}),
                ),
                pool(
                    "v4only",
                    json!({"addresses": ["198.18.16.0/31"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "both").families("RequireDualStack", &["IPv4", "IPv6"])),
                svc(Svc::lb(A, "v6").families("SingleStack", &["IPv6"])),
                svc(Svc::lb(A, "v6-more").families("SingleStack", &["IPv6"])),
                svc(Svc::lb(A, "prefer")
                    .families("PreferDualStack", &["IPv4", "IPv6"])
                    .ann("metallb.io/address-pool", "v4only")),
                svc(Svc::lb(A, "prefer-auto").families("PreferDualStack", &["IPv6", "IPv4"])),
                svc(Svc::lb(A, "require-v4only")
                    .families("RequireDualStack", &["IPv4", "IPv6"])
                    .ann("metallb.io/address-pool", "v4only")),
                del(A, "v6"),
                svc(Svc::lb(A, "v6-ip")
                    .families("SingleStack", &["IPv6"])
                    .ann("metallb.io/loadBalancerIPs", "198.18.15.1")),
            ],
        ),
        (
            "autoAssign and avoidBuggyIPs",
            vec![
                pool(
                    "buggy",
                    json!({"addresses": ["198.18.17.254-198.18.18.1"], "avoidBuggyIPs": true}),
                ),
                svc(Svc::lb(A, "first")),
                svc(Svc::lb(A, "second")),
                svc(Svc::lb(A, "asks-255").ann("metallb.io/loadBalancerIPs", "198.18.17.255")),
                svc(Svc::lb(A, "asks-18-0").ann("metallb.io/loadBalancerIPs", "198.18.18.0")),
                pool(
                    "buggy",
                    json!({"addresses": ["198.18.17.254-198.18.18.1"], "avoidBuggyIPs": false}),
                ),
                pool(
                    "buggy",
                    json!({"addresses": ["198.18.17.254-198.18.18.1"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "third")),
                del(A, "first"),
            ],
        ),
        (
            "serviceAllocation",
            vec![
                ns_labels(A, &[("team", "blue")]),
                ns_labels(B, &[("team", "green")]),
                pool("general", json!({"addresses": ["198.18.19.0/30"]})),
                pool(
                    "blue",
                    json!({"addresses": ["198.18.20.0/31"], "serviceAllocation": {
                        "priority": 10, "namespaceSelectors": [{"matchLabels": {"team": "blue"}},
                                                   {"matchLabels": {"team": "green"}}]}}),
                ),
                pool(
                    "first-choice",
                    json!({"addresses": ["198.18.21.0/32"], "serviceAllocation": {
                        "priority": 1, "namespaces": ["dt-a"]}}),
                ),
                pool(
                    "web",
                    json!({"addresses": ["198.18.22.0/31"], "serviceAllocation": {
                        "serviceSelectors": [{"matchExpressions":
                            [{"key": "tier", "operator": "In", "values": ["web"]}]}]}}),
                ),
                svc(Svc::lb(A, "a1")),
                svc(Svc::lb(A, "a2")),
                svc(Svc::lb(A, "a3")),
                svc(Svc::lb(B, "b1")),
                svc(Svc::lb(B, "b-web").label("tier", "web")),
                ns_labels(A, &[("team", "none")]),
                svc(Svc::lb(B, "b-web").label("tier", "db")),
                pool(
                    "first-choice",
                    json!({"addresses": ["198.18.21.0/32"], "serviceAllocation": {
                        "priority": 1, "namespaces": ["dt-b"]}}),
                ),
                ns_labels(A, &[("team", "green")]),
                ns_labels(B, &[("team", "blue")]),
            ],
        ),
        (
            "class and type changes",
            vec![
                pool("p", json!({"addresses": ["198.18.23.0/31"]})),
                svc(Svc::lb(A, "other-class").class("example.com/other")),
                svc(Svc::lb(A, "t")),
                svc(Svc::lb(A, "t").type_("ClusterIP")),
                svc(Svc::lb(A, "waiting-1")),
                svc(Svc::lb(A, "waiting-2")),
                svc(Svc::lb(A, "t")),
                svc(Svc::lb(A, "waiting-1").type_("NodePort")),
                svc(Svc::lb(A, "t")),
            ],
        ),
        (
            "pool changes",
            vec![
                pool("p", json!({"addresses": ["198.18.24.0/30"]})),
                pool(
                    "q",
                    json!({"addresses": ["198.18.25.0/30"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "x")),
                svc(Svc::lb(A, "y")),
                svc(Svc::lb(A, "z").ann("metallb.io/address-pool", "q")),
                // y's IP leaves the pool.
                pool(
                    "p",
                    json!({"addresses": ["198.18.24.0/32", "198.18.24.2/31"]}),
                ),
                Op::DeletePool("q".into()),
                pool(
                    "q",
                    json!({"addresses": ["198.18.25.0/30"], "autoAssign": false}),
                ),
                // The pool that holds x and y goes: both are cleared.
                Op::DeletePool("p".into()),
                pool("p2", json!({"addresses": ["198.18.26.0/30"]})),
            ],
        ),
        (
            "Local services share only with the same selector",
            vec![
                pool(
                    "one",
                    json!({"addresses": ["198.18.27.1/32"], "autoAssign": false}),
                ),
                svc(Svc::lb(A, "l1")
                    .local("x")
                    .ann("metallb.io/address-pool", "one")
                    .ann("metallb.io/allow-shared-ip", "k")),
                svc(Svc::lb(A, "l2")
                    .ports(&[81])
                    .local("y")
                    .ann("metallb.io/address-pool", "one")
                    .ann("metallb.io/allow-shared-ip", "k")),
                svc(Svc::lb(A, "l2")
                    .ports(&[81])
                    .local("x")
                    .ann("metallb.io/address-pool", "one")
                    .ann("metallb.io/allow-shared-ip", "k")),
                svc(Svc::lb(A, "c")
                    .ports(&[82])
                    .ann("metallb.io/address-pool", "one")
                    .ann("metallb.io/allow-shared-ip", "k")),
            ],
        ),
    ]
}
