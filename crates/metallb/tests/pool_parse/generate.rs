//! Random IPAddressPool sets, as the JSON an API server would hand out: valid and invalid
//! addresses (IPv4, IPv6, IPv4-mapped, odd spellings), overlaps within and across pools, and
//! `serviceAllocation` selectors valid and invalid. Valid addresses stay inside 198.18.0.0/15
//! and 2001:db8::/32 (and their IPv4-mapped forms), in a small corner of each so that entries
//! often overlap or touch.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Label keys, valid ones first: the selectors and the label sets they are tried on draw from
/// the same few keys so that matches are common.
pub(crate) const VALID_KEYS: &[&str] = &["app", "tier", "example.com/team", "a.b-c_d", "App"];
const INVALID_KEYS: &[&str] = &[
    "",
    "_a",
    "a_",
    ".a",
    "a.",
    "x/",
    "x.y/-a",
    "a b/c",
    "-app",
    "app-",
    "bad key",
    "example.com/",
    "/app",
    "a/b/c",
    "Example.com/x",
    "a..b/c",
    "ü",
];
/// Label values, valid ones first.
pub(crate) const VALID_VALUES: &[&str] = &["", "web", "db", "a-b.c_d", "Z9"];
const INVALID_VALUES: &[&str] = &["-web", "web-", "x y", "ü", "a/b"];

fn long(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        24 => prop::sample::select(VALID_KEYS).prop_map(str::to_string),
        1 => Just(long('k', 63)),
        1 => Just(long('k', 64)),
        1 => Just(format!("{}/a_b", long('p', 253))),
        1 => Just(format!("{}/a", long('p', 254))),
        1 => Just(format!("x.example.com/{}", long('n', 63))),
        1 => Just(format!("x.example.com/{}", long('n', 64))),
        2 => prop::sample::select(INVALID_KEYS).prop_map(str::to_string),
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        24 => prop::sample::select(VALID_VALUES).prop_map(str::to_string),
        1 => Just(long('v', 63)),
        1 => Just(long('v', 64)),
        2 => prop::sample::select(INVALID_VALUES).prop_map(str::to_string),
    ]
}

fn operator() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("In"),
        3 => Just("NotIn"),
        3 => Just("Exists"),
        3 => Just("DoesNotExist"),
        1 => prop::sample::select(&["in", "Equals", "", "Gt", "!="][..]),
    ]
    .prop_map(str::to_string)
}

/// One `matchExpressions` entry: mostly with the number of values its operator wants, sometimes
/// without values for In, with values for Exists, or with a value repeated.
fn expression() -> impl Strategy<Value = Value> {
    (
        key(),
        operator(),
        prop::collection::vec(value(), 1..4),
        0u8..10,
    )
        .prop_map(|(key, op, mut values, shape)| {
            let wants_values = matches!(op.as_str(), "In" | "NotIn");
            let values = match shape {
                0 if wants_values => None,
                1 if wants_values => Some(Vec::new()),
                0 | 1 => Some(values),
                2 => {
                    values.push(values[0].clone());
                    Some(values)
                }
                _ if wants_values => Some(values),
                _ => None,
            };
            let mut e = json!({"key": key, "operator": op});
            if let Some(v) = values {
                e["values"] = json!(v);
            }
            e
        })
}

/// A `LabelSelector`.
pub(crate) fn selector() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.6, prop::collection::btree_map(key(), value(), 0..3)),
        prop::option::weighted(0.7, prop::collection::vec(expression(), 0..3)),
        any::<bool>(),
    )
        .prop_map(|(labels, exprs, repeat_expr)| {
            let mut s = Map::new();
            if let Some(l) = labels {
                s.insert("matchLabels".into(), json!(l));
            }
            if let Some(mut e) = exprs {
                if repeat_expr && e.len() == 1 {
                    // The same expression twice: MetalLB's duplicate check refuses it.
                    e.push(e[0].clone());
                }
                s.insert("matchExpressions".into(), Value::Array(e));
            }
            Value::Object(s)
        })
}

/// A list of selectors, sometimes with one repeated (its values reversed: MetalLB sorts them
/// before comparing, so it is still a duplicate).
fn selectors() -> impl Strategy<Value = Vec<Value>> {
    (prop::collection::vec(selector(), 0..3), 0u8..16).prop_map(|(mut list, repeat)| {
        if repeat == 0 && !list.is_empty() {
            let mut again = list[0].clone();
            for e in again["matchExpressions"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if let Some(v) = e["values"].as_array_mut() {
                    v.reverse();
                }
            }
            list.push(again);
        }
        list
    })
}

pub(crate) fn service_allocation() -> impl Strategy<Value = Value> {
    (
        prop::option::of(prop_oneof![
            Just(0i64),
            Just(-1),
            1i64..4,
            Just(i64::from(i32::MAX))
        ]),
        prop::option::of(prop::collection::vec(
            prop::sample::select(&["x", "y", "z"][..]),
            0..3,
        )),
        prop::option::weighted(0.4, selectors()),
        prop::option::weighted(0.6, selectors()),
    )
        .prop_map(|(priority, namespaces, ns_sel, svc_sel)| {
            let mut a = Map::new();
            if let Some(p) = priority {
                a.insert("priority".into(), json!(p));
            }
            if let Some(n) = namespaces {
                a.insert("namespaces".into(), json!(n));
            }
            if let Some(s) = ns_sel {
                a.insert("namespaceSelectors".into(), json!(s));
            }
            if let Some(s) = svc_sel {
                a.insert("serviceSelectors".into(), json!(s));
            }
            Value::Object(a)
        })
}

/// An offset into one of the address blocks: mostly within its first few thousand addresses,
/// sometimes anywhere in it.
fn offset(span: u128) -> impl Strategy<Value = u128> {
    prop_oneof![6 => 0u128..4096, 1 => 0u128..span]
}

/// A run's length: mostly a handful of addresses, sometimes hundreds or thousands.
fn run_length() -> impl Strategy<Value = u128> {
    prop_oneof![6 => 0u128..16, 2 => 0u128..300, 1 => 0u128..5000]
}

const V4_BASE: u32 = 0xc612_0000; // 198.18.0.0
const V4_SPAN: u128 = 1 << 17; // 198.18.0.0/15
const V6_BASE: u128 = 0x2001_0db8 << 96; // 2001:db8::
const V6_SPAN: u128 = 1 << 96; // 2001:db8::/32

fn v4_at(n: u128) -> Ipv4Addr {
    Ipv4Addr::from(V4_BASE + (n % V4_SPAN) as u32)
}

fn v6_at(n: u128) -> Ipv6Addr {
    Ipv6Addr::from(V6_BASE + n % V6_SPAN)
}

/// An IPv4 address in 198.18.0.0/15, mostly in its first /20.
fn v4() -> impl Strategy<Value = String> {
    offset(V4_SPAN).prop_map(|n| v4_at(n).to_string())
}

/// An IPv6 address in 2001:db8::/32, mostly in its first few thousand addresses.
fn v6() -> impl Strategy<Value = String> {
    offset(V6_SPAN).prop_map(|n| v6_at(n).to_string())
}

/// How an IPv4 address is written: mostly plainly, sometimes IPv4-mapped.
fn v4_spelling() -> impl Strategy<Value = bool> {
    prop::bool::weighted(0.2)
}

fn spell_v4(a: Ipv4Addr, mapped: bool) -> String {
    if mapped {
        format!("::ffff:{a}")
    } else {
        a.to_string()
    }
}

/// `start-end` over a short run, mostly in order, sometimes backwards.
fn v4_range() -> impl Strategy<Value = String> {
    (
        offset(V4_SPAN),
        run_length(),
        v4_spelling(),
        v4_spelling(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(start, len, m1, m2, backwards)| {
            let (a, b) = (v4_at(start), v4_at((start + len).min(V4_SPAN - 1)));
            let (a, b) = if backwards { (b, a) } else { (a, b) };
            format!("{}-{}", spell_v4(a, m1), spell_v4(b, m2))
        })
}

fn v6_range() -> impl Strategy<Value = String> {
    (offset(V6_SPAN), run_length(), prop::bool::weighted(0.1)).prop_map(
        |(start, len, backwards)| {
            let (a, b) = (v6_at(start), v6_at(start + len));
            let (a, b) = if backwards { (b, a) } else { (a, b) };
            format!("{a}-{b}")
        },
    )
}

/// One well-formed entry (it may still overlap others, or be a range written backwards or
/// across families).
fn plain_entry() -> impl Strategy<Value = String> {
    prop_oneof![
        10 => (v4(), prop_oneof![6 => 26u8..=32, 1 => 15u8..=32])
            .prop_map(|(a, p)| format!("{a}/{p}")),
        6 => (v6(), prop_oneof![6 => 116u8..=128, 1 => 32u8..=128])
            .prop_map(|(a, p)| format!("{a}/{p}")),
        // IPv4-mapped: /96 and longer is the IPv4 prefix, shorter an IPv6 one.
        4 => (v4(), prop_oneof![6 => 122u8..=128, 1 => 96u8..=128, 1 => 0u8..96])
            .prop_map(|(a, p)| format!("::ffff:{a}/{p}")),
        8 => v4_range(),
        4 => v6_range(),
        1 => (v4(), v4_spelling(), v6()).prop_map(|(a, m, b)| format!("{}-{b}", spell_v4(a.parse().unwrap(), m))),
    ]
}

/// An entry respelled: leading zeros in the prefix length or an octet, spaces around range
/// ends or the whole entry, `+` before the length, a zone, upper case, a third range end. The
/// spellings Go accepts (leading zeros in the length, spaces around range ends) come most often.
fn respelled_entry() -> impl Strategy<Value = String> {
    (plain_entry(), 0u8..20, 1usize..5).prop_map(|(e, how, n)| {
        let zeros = |e: &str| e.replace('/', &format!("/{}", long('0', n)));
        let spaced = |e: &str| e.replace('-', " - ");
        match how {
            0..=4 if e.contains('/') => zeros(&e),
            0..=4 => spaced(&e),
            5..=8 if e.contains('-') => spaced(&e),
            5..=8 => zeros(&e),
            9 | 10 => format!("\t{}\u{a0}", e.replace('-', "\t-  ")),
            11 => e.replacen("198.18.", "198.018.", 1),
            12 => format!(" {e}"),
            13 => e.replace('/', "/+"),
            14 => match e.split_once('/') {
                Some((a, p)) => format!("{a}%eth0/{p}"),
                None => e.replacen('-', "%eth0-", 1),
            },
            15 => e.to_uppercase(),
            16 => format!("{e}-198.18.0.9"),
            17 => e.replacen("2001:db8:", "2001:0db8:0000:", 1),
            18 => e.replace('/', "/-"),
            _ => e.replacen(':', "::", 1),
        }
    })
}

/// Entries at the edges, most of which no reading accepts.
pub(crate) const ODD_ENTRIES: &[&str] = &[
    "",
    "-",
    "198.18.0.1-",
    "-198.18.0.1",
    "198.18.0.0/",
    "/24",
    "198.18.0.0",
    "2001:db8::",
    "198.18.0.0/33",
    "2001:db8::/129",
    "::ffff:198.18.0.0/129",
    "198.18.0.0/24/24",
    "198.18.0.0/99999999999",
    "198.18.0.0/16777215",
    "198.18.0.0/16777216",
    "198.18.0.256/24",
    "198.18.0.0/24-198.18.1.0",
    "a-b-c",
    "fe80::1%eth0/64",
    "2001:db8::1%eth0-2001:db8::5",
    "2001:db8::1::2/128",
    "2001:db8:0:0:0:0:0:0:1/128",
    "2001:db8:1:2:3:4:5::/128",
    "2001:db8:1:2:3:4:5:6::/128",
    "::2001:db8:1:2:3:4:5:6/128",
    "2001:db8::00001/128",
    "2001:db8::/032",
    "::198.18.0.1/128",
    "::ffff:198.018.0.1/128",
    "::ffff:198.18.0.1/96",
    "::FFFF:198.18.0.1/120",
    "0:0:0:0:0:ffff:198.18.0.1/128",
    "::ffff:c612:1/128",
    "::ffff:c612:1-::ffff:c612:5",
    "2001:db8::198.18.0.1/128",
    "2001:db8::198.18.0/128",
    "198.18.0.1/32 ",
    "198.18.0.1/ 32",
    "198.18.0.9-198.18.0.9",
    "198.18.0.9 -198.18.0.9-",
    "2001:db8::ffff:ffff-2001:db8::1:0",
    "198.18.1.255-198.18.2.0",
    "0198.18.0.1/32",
    "198.18.0.0/0x18",
    "198.18.0.1\n-198.18.0.2",
    "198.18.0.1\u{2003}-\u{2003}198.18.0.2",
    "198.18.0.1\u{200b}-198.18.0.2",
    "198.18.0.1-198.18.0.2\u{0}",
    "１98.18.0.1/32",
    "198.18.0.1-::ffff:198.18.0.0",
    "::ffff:198.18.0.1-198.18.0.0",
];

fn odd_entry() -> impl Strategy<Value = String> {
    prop::sample::select(ODD_ENTRIES).prop_map(str::to_string)
}

/// One `spec.addresses` entry.
pub(crate) fn entry() -> impl Strategy<Value = String> {
    prop_oneof![40 => plain_entry(), 6 => respelled_entry(), 1 => odd_entry()]
}

/// One pool: `name` as given, 0 to 3 entries (rarely `addresses` absent), the flags, and
/// sometimes a `serviceAllocation`.
fn pool(name: String) -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            1 => Just(None),
            1 => Just(Some(Vec::new())),
            60 => prop::collection::vec(entry(), 1..4).prop_map(Some),
        ],
        prop::option::of(any::<bool>()),
        prop::option::of(any::<bool>()),
        prop::option::weighted(0.4, service_allocation()),
        prop::option::weighted(0.2, prop::sample::select(&["red", "blue"][..])),
    )
        .prop_map(move |(addresses, auto, buggy, alloc, colour)| {
            let mut spec = Map::new();
            if let Some(a) = addresses {
                spec.insert("addresses".into(), json!(a));
            }
            if let Some(a) = auto {
                spec.insert("autoAssign".into(), json!(a));
            }
            if let Some(b) = buggy {
                spec.insert("avoidBuggyIPs".into(), json!(b));
            }
            if let Some(a) = alloc {
                spec.insert("serviceAllocation".into(), a);
            }
            let mut metadata = json!({"name": &name, "namespace": "metallb-system"});
            if let Some(c) = colour {
                metadata["labels"] = json!({"colour": c});
            }
            if name.is_empty() {
                metadata.as_object_mut().map(|m| m.remove("name"));
            }
            json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                   "metadata": metadata, "spec": spec})
        })
}

/// A set of pools: up to four, with distinct names (as one namespace of an API server holds
/// them), rarely one without a name or two with one name.
pub(crate) fn pool_set() -> impl Strategy<Value = Vec<Value>> {
    (
        prop_oneof![
            1 => prop::sample::subsequence(vec!["a", "b", "c", "d"], 0..=4),
            4 => prop::sample::subsequence(vec!["a", "b", "c", "d"], 1..=4),
        ],
        0u8..30,
    )
        .prop_flat_map(|(names, extra)| {
            let mut names: Vec<String> = names.into_iter().map(str::to_string).collect();
            match extra {
                0 => names.push(String::new()),
                1 if !names.is_empty() => names.push(names[0].clone()),
                _ => {}
            }
            names.into_iter().map(pool).collect::<Vec<_>>()
        })
}

/// Label sets to try selectors on: drawn from the valid keys and values.
pub(crate) fn label_sets() -> impl Strategy<Value = Vec<BTreeMap<String, String>>> {
    prop::collection::vec(
        prop::collection::btree_map(
            prop::sample::select(VALID_KEYS).prop_map(str::to_string),
            prop::sample::select(VALID_VALUES).prop_map(str::to_string),
            0..4,
        ),
        8,
    )
}
