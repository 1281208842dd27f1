//! What a reading of a pool covers, as integer intervals of one family each, and Kubernetes'
//! label selector rules written out once more, plainly, as the oracle the engine is checked
//! against.

use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;
use vigil_lb::cidr::Cidr;
use vigil_lb::pool::AddressRange;

/// An inclusive run of addresses: family (4 or 6), first, last. Addresses are taken as they
/// are stored, not canonicalised, so an IPv6 prefix that happens to reach into the
/// IPv4-mapped block stays IPv6.
pub(crate) type Interval = (u8, u128, u128);

fn raw(ip: IpAddr) -> (u8, u128) {
    match ip {
        IpAddr::V4(a) => (4, u128::from(u32::from(a))),
        IpAddr::V6(a) => (6, u128::from(a)),
    }
}

fn interval(first: IpAddr, last: IpAddr) -> Interval {
    let ((f, a), (g, b)) = (raw(first), raw(last));
    assert_eq!(f, g, "{first}..{last} spans two families");
    assert!(a <= b, "{first}..{last} runs backwards");
    (f, a, b)
}

/// The union of `runs`, sorted, with touching and overlapping runs joined.
fn merge(mut runs: Vec<Interval>) -> Vec<Interval> {
    runs.sort_unstable();
    let mut out: Vec<Interval> = Vec::new();
    for (f, a, b) in runs {
        match out.last_mut() {
            Some((g, _, end)) if *g == f && (*end == u128::MAX || a <= *end + 1) => {
                *end = (*end).max(b);
            }
            _ => out.push((f, a, b)),
        }
    }
    out
}

/// What the speaker's CIDRs cover.
pub(crate) fn of_cidrs(cidrs: &[Cidr]) -> Vec<Interval> {
    merge(
        cidrs
            .iter()
            .map(|c| interval(c.network(), c.last()))
            .collect(),
    )
}

/// What the controller's ranges cover.
pub(crate) fn of_ranges(ranges: &[AddressRange]) -> Vec<Interval> {
    merge(ranges.iter().map(|r| interval(r.first, r.last)).collect())
}

/// Addresses at and just beyond the edges of every CIDR, and the IPv4-mapped spelling of each
/// IPv4 one: where a disagreement about containment would show.
pub(crate) fn edge_addresses(cidrs: &[Cidr]) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for c in cidrs {
        for ip in [c.network(), c.last()] {
            let (family, n) = raw(ip);
            for m in [n.checked_sub(1), Some(n), n.checked_add(1)]
                .into_iter()
                .flatten()
            {
                out.push(match family {
                    4 => match u32::try_from(m) {
                        Ok(m) => IpAddr::V4(m.into()),
                        Err(_) => continue,
                    },
                    _ => IpAddr::V6(m.into()),
                });
            }
        }
    }
    let mapped: Vec<IpAddr> = out
        .iter()
        .filter_map(|ip| match ip {
            IpAddr::V4(a) => Some(IpAddr::V6(a.to_ipv6_mapped())),
            IpAddr::V6(_) => None,
        })
        .collect();
    out.extend(mapped);
    out
}

/// Kubernetes' meaning of a valid structured `LabelSelector` (its JSON form): every
/// `matchLabels` pair present; `In` the key with one of the values, `NotIn` the key missing or
/// with another value, `Exists` and `DoesNotExist` the key alone.
pub(crate) fn oracle_matches(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let pairs_hold = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str());
    let expressions_hold = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let value = labels.get(e["key"].as_str().unwrap_or_default());
            let listed = |v: &String| {
                e["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|x| x.as_str() == Some(v))
            };
            match e["operator"].as_str().unwrap_or_default() {
                "In" => value.is_some_and(listed),
                "NotIn" => !value.is_some_and(listed),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("operator {other:?} in a selector that was accepted"),
            }
        });
    pairs_hold && expressions_hold
}

/// A label set the selector should match, when it can: its pairs, and for each expression a
/// value that satisfies it.
pub(crate) fn satisfying_labels(selector: &Value) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        match e["operator"].as_str().unwrap_or_default() {
            "In" => {
                let first = e["values"][0].as_str().unwrap_or_default().to_string();
                labels.entry(key).or_insert(first);
            }
            "Exists" => {
                labels.entry(key).or_insert_with(|| "web".to_string());
            }
            "DoesNotExist" => {
                labels.remove(&key);
            }
            _ => {}
        }
    }
    labels
}
