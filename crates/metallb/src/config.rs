//! MetalLB's configuration as its speaker parses it for L2 (`internal/config/config.go:For`,
//! the pool and L2Advertisement parts): pools with their CIDRs and the L2Advertisements
//! attached to each, with node sets resolved against the Node list at parse time.
//!
//! Validation is MetalLB's: a bad pool (no addresses, a bad CIDR or range, a duplicate
//! namespace), overlapping CIDRs (within or across pools), a duplicate or invalid selector or
//! pool name in an L2Advertisement. An L2Advertisement naming a pool that does not exist is
//! *not* an error in MetalLB: it simply attaches to nothing (and attaches once the pool
//! appears). Objects are taken in name order, as the API server lists them, so the first
//! error MetalLB would report is the one reported here.
//!
//! Not covered: the BGP-side objects (BGPPeer, BGPAdvertisement, BFDProfile, Community) that
//! MetalLB's `For` also parses; a configuration MetalLB rejects only because of those is
//! accepted here.

use crate::addr::{AddressError, Cidr, parse_pool_entry};
use crate::crd::{IPAddressPool, L2Advertisement};
use crate::selector::{Selector, SelectorError, SelectorExt, Shown, duplicate_key, expr_key};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use vigil_lb::GoQuoted;

/// A parsed, valid configuration (what MetalLB's speaker keeps as `c.config`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Pools by name.
    pub pools: BTreeMap<String, Pool>,
}

/// One pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// Its name.
    pub name: String,
    /// Its addresses as CIDRs (ranges summarised).
    pub cidrs: Vec<Cidr>,
    /// `autoAssign` (default true).
    pub auto_assign: bool,
    /// `avoidBuggyIPs`.
    pub avoid_buggy_ips: bool,
    /// `spec.addresses` as written (the controller's allocator keeps each entry as one range).
    pub addresses: Vec<String>,
    /// `spec.serviceAllocation`, its selectors read.
    pub service_allocation: Option<PoolAllocation>,
    /// The L2Advertisements that apply to the pool, in name order.
    pub l2_advertisements: Vec<L2Ad>,
}

/// A pool's `spec.serviceAllocation`, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolAllocation {
    /// `priority` (0 when unset: after every positive priority).
    pub priority: i32,
    /// `namespaces`.
    pub namespaces: Vec<String>,
    /// `namespaceSelectors`.
    pub namespace_selectors: Vec<Selector>,
    /// `serviceSelectors`.
    pub service_selectors: Vec<Selector>,
}

/// One L2Advertisement as attached to a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L2Ad {
    /// The object's name (for messages; MetalLB's parsed form carries none).
    pub name: String,
    /// Nodes its `nodeSelectors` chose when the configuration was parsed (all nodes when it
    /// has none).
    pub nodes: BTreeSet<String>,
    /// `interfaces`; empty means every interface.
    pub interfaces: BTreeSet<String>,
    /// The `serviceSelectors`; empty means every service.
    pub service_selectors: Vec<Selector>,
    /// Preference weight per node from `preferredNodeSelectors`, for nodes in `nodes` only;
    /// nodes with no matching preference are absent.
    pub preferred_nodes: BTreeMap<String, i64>,
}

impl L2Ad {
    /// Whether the ad announces from every interface.
    pub fn all_interfaces(&self) -> bool {
        self.interfaces.is_empty()
    }

    /// Whether the ad applies to a service with these labels.
    pub fn selects_service(&self, labels: &BTreeMap<String, String>) -> bool {
        self.service_selectors.is_empty()
            || self.service_selectors.iter().any(|s| s.matches(labels))
    }
}

impl Config {
    /// The pool containing every one of `ips` (MetalLB's `poolFor`). Pools never overlap in a
    /// valid configuration, so at most one does.
    pub fn pool_for(&self, ips: &[IpAddr]) -> Option<&Pool> {
        self.pools.values().find(|p| {
            !ips.is_empty() && ips.iter().all(|ip| p.cidrs.iter().any(|c| c.contains(*ip)))
        })
    }

    /// Parses and validates MetalLB's objects as its speaker does. `nodes` resolves the
    /// advertisements' node selectors.
    pub fn parse(
        pools: &[IPAddressPool],
        ads: &[L2Advertisement],
        nodes: &[Node],
    ) -> Result<Self, ConfigError> {
        let mut parsed = read_pools(pools)?;
        let mut pools: Vec<&IPAddressPool> = pools.iter().collect();
        pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut ads: Vec<&L2Advertisement> = ads.iter().collect();
        ads.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

        for ad in &ads {
            let name = ad.metadata.name.clone().unwrap_or_default();
            let parsed_ad = parse_ad(&name, ad, nodes)?;
            let spec = &ad.spec;
            let by_name = spec.ip_address_pools.clone().unwrap_or_default();
            let pool_selectors = spec.ip_address_pool_selectors.clone().unwrap_or_default();
            let mut targets: BTreeSet<String> = by_name.into_iter().collect();
            if targets.is_empty() && pool_selectors.is_empty() {
                targets = parsed.keys().cloned().collect();
            }
            let selectors = pool_selectors
                .iter()
                .map(|s| {
                    Selector::from_label_selector(s).map_err(|source| ConfigError::Advertisement {
                        ad: name.clone(),
                        field: "ipAddressPoolSelectors",
                        problem: Box::new(AdProblem::Selector {
                            shown: Shown(s).to_string(),
                            go: go_value(s, true),
                            source,
                        }),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            for p in &pools {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                if selectors.iter().any(|s| s.matches(&labels)) {
                    targets.insert(p.metadata.name.clone().unwrap_or_default());
                }
            }
            // Names of pools that do not exist are skipped, as MetalLB does.
            for target in targets {
                if let Some(pool) = parsed.get_mut(&target) {
                    pool.l2_advertisements.push(parsed_ad.clone());
                }
            }
        }
        Ok(Self { pools: parsed })
    }
}

/// Reads and checks the pools alone, as MetalLB does before it looks at advertisements (in name
/// order, so the first error is MetalLB's first): each pool's fields, then no two CIDRs
/// overlapping, within a pool or across pools. The speaker's [`Config::parse`] and the
/// controller's [`crate::pools::pools`] both start here.
pub fn read_pools(pools: &[IPAddressPool]) -> Result<BTreeMap<String, Pool>, ConfigError> {
    let mut pools: Vec<&IPAddressPool> = pools.iter().collect();
    pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    read_pools_in_order(&pools)
}

/// [`read_pools`] in the order given instead of name order: MetalLB's webhook reads the
/// pools it listed (name order) with the pool under review last (or in the place of the one it
/// replaces), so its first error is the one found in that order.
pub fn read_pools_in_order(
    pools: &[&IPAddressPool],
) -> Result<BTreeMap<String, Pool>, ConfigError> {
    let mut parsed: BTreeMap<String, Pool> = BTreeMap::new();
    let mut seen: Vec<(Cidr, String)> = Vec::new();
    for p in pools {
        let pool = parse_pool(p)?;
        if parsed.contains_key(&pool.name) {
            return Err(ConfigError::DuplicatePool(pool.name));
        }
        for cidr in &pool.cidrs {
            if let Some((existing, _)) = seen.iter().find(|(c, _)| c.overlaps(cidr)) {
                return Err(ConfigError::Overlap {
                    pool: pool.name.clone(),
                    cidr: *cidr,
                    existing: *existing,
                });
            }
            seen.push((*cidr, pool.name.clone()));
        }
        parsed.insert(pool.name.clone(), pool);
    }
    Ok(parsed)
}

fn parse_pool(p: &IPAddressPool) -> Result<Pool, ConfigError> {
    let name = p.metadata.name.clone().unwrap_or_default();
    let err = |problem| ConfigError::Pool {
        pool: name.clone(),
        problem: Box::new(problem),
    };
    if name.is_empty() {
        return Err(err(PoolProblem::NoName));
    }
    let addresses = p.spec.addresses.clone().unwrap_or_default();
    if addresses.is_empty() {
        return Err(err(PoolProblem::NoAddresses));
    }
    let mut cidrs = Vec::new();
    for entry in &addresses {
        cidrs.extend(parse_pool_entry(entry).map_err(|source| {
            err(PoolProblem::Address {
                pool: name.clone(),
                entry: entry.clone(),
                source,
            })
        })?);
    }
    let mut service_allocation = None;
    if let Some(alloc) = &p.spec.service_allocation {
        let mut namespaces = BTreeSet::new();
        for ns in alloc.namespaces.iter().flatten() {
            if !namespaces.insert(ns) {
                return Err(err(PoolProblem::DuplicateNamespace(ns.clone())));
            }
        }
        let mut read = PoolAllocation {
            namespaces: alloc.namespaces.clone().unwrap_or_default(),
            ..PoolAllocation::default()
        };
        for (field, sels) in [
            ("namespaceSelectors", &alloc.namespace_selectors),
            ("serviceSelectors", &alloc.service_selectors),
        ] {
            let sels = sels.clone().unwrap_or_default();
            check_duplicates(&sels).map_err(|d| err(PoolProblem::Duplicate { field, what: d }))?;
            for s in &sels {
                let selector = Selector::from_label_selector(s).map_err(|source| {
                    err(PoolProblem::Selector {
                        field,
                        shown: Shown(s).to_string(),
                        source,
                    })
                })?;
                match field {
                    "namespaceSelectors" => read.namespace_selectors.push(selector),
                    _ => read.service_selectors.push(selector),
                }
            }
        }
        let priority = alloc.priority.unwrap_or(0);
        read.priority =
            i32::try_from(priority).map_err(|_| err(PoolProblem::Priority(priority)))?;
        service_allocation = Some(read);
    }
    Ok(Pool {
        name: name.clone(),
        cidrs,
        auto_assign: p.spec.auto_assign.unwrap_or(true),
        avoid_buggy_ips: p.spec.avoid_buggy_ips.unwrap_or(false),
        addresses,
        service_allocation,
        l2_advertisements: Vec::new(),
    })
}

fn parse_ad(name: &str, ad: &L2Advertisement, nodes: &[Node]) -> Result<L2Ad, ConfigError> {
    let spec = &ad.spec;
    let err = |field, problem| ConfigError::Advertisement {
        ad: name.to_string(),
        field,
        problem: Box::new(problem),
    };
    let mut pool_names = BTreeSet::new();
    for p in spec.ip_address_pools.iter().flatten() {
        if !pool_names.insert(p) {
            return Err(err(
                "ipAddressPools",
                AdProblem::Duplicate(format!("duplicate definition of ipAddressPools {p:?}")),
            ));
        }
    }
    let node_selectors = spec.node_selectors.clone().unwrap_or_default();
    let service_selectors = spec.service_selectors.clone().unwrap_or_default();
    for (field, sels) in [
        (
            "ipAddressPoolSelectors",
            spec.ip_address_pool_selectors.clone().unwrap_or_default(),
        ),
        ("nodeSelectors", node_selectors.clone()),
        ("serviceSelectors", service_selectors.clone()),
    ] {
        check_duplicates(&sels)
            .map_err(|d| err(field, AdProblem::Duplicate(d.replace("{field}", field))))?;
    }
    let parse_all = |field, sels: &[LabelSelector]| {
        sels.iter()
            .map(|s| {
                Selector::from_label_selector(s).map_err(|source| {
                    err(
                        field,
                        AdProblem::Selector {
                            shown: Shown(s).to_string(),
                            go: go_value(s, true),
                            source,
                        },
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let node_sels = parse_all("nodeSelectors", &node_selectors)?;
    let mut service_sels = parse_all("serviceSelectors", &service_selectors)?;
    service_sels.sort();
    let node_labels = |n: &Node| n.metadata.labels.clone().unwrap_or_default();
    let selected: BTreeSet<String> = nodes
        .iter()
        .filter(|n| node_sels.is_empty() || node_sels.iter().any(|s| s.matches(&node_labels(n))))
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let mut preferred_nodes = BTreeMap::new();
    let mut weighted = Vec::new();
    for p in spec.preferred_node_selectors.iter().flatten() {
        let pref = p.preference.clone().unwrap_or_default();
        let sel = Selector::from_label_selector(&pref).map_err(|source| {
            err(
                "preferredNodeSelectors",
                AdProblem::Selector {
                    shown: Shown(&pref).to_string(),
                    go: go_value(&pref, false),
                    source,
                },
            )
        })?;
        weighted.push((sel, i64::from(p.weight.unwrap_or(0))));
    }
    for n in nodes {
        let Some(node) = n.metadata.name.as_ref() else {
            continue;
        };
        if !selected.contains(node) {
            continue;
        }
        let total: i64 = weighted
            .iter()
            .filter(|(s, _)| s.matches(&node_labels(n)))
            .map(|(_, w)| w)
            .sum();
        if total > 0 {
            preferred_nodes.insert(node.clone(), total);
        }
    }
    Ok(L2Ad {
        name: name.to_string(),
        nodes: selected,
        interfaces: spec.interfaces.iter().flatten().cloned().collect(),
        service_selectors: service_sels,
        preferred_nodes,
    })
}

/// MetalLB's `validateLabelSelectorDuplicate`: no two equal selectors, and within each
/// expression no repeated value and no repeated expression. The message has a `{field}`
/// placeholder for the caller.
fn check_duplicates(sels: &[LabelSelector]) -> Result<(), String> {
    for (i, s) in sels.iter().enumerate() {
        let exprs = s.match_expressions.clone().unwrap_or_default();
        for (j, e) in exprs.iter().enumerate() {
            let values = e.values.clone().unwrap_or_default();
            for (k, v) in values.iter().enumerate() {
                if values[k + 1..].contains(v) {
                    return Err(format!(
                        "duplicate definition of match expression value in label selector {v:?}"
                    ));
                }
            }
            if exprs[j + 1..].iter().any(|o| expr_key(o) == expr_key(e)) {
                return Err(format!(
                    "duplicate definition of match expressions {:?}",
                    format!("{} {}", e.key, e.operator)
                ));
            }
        }
        if sels[i + 1..]
            .iter()
            .any(|o| duplicate_key(o) == duplicate_key(s))
        {
            return Err(format!(
                "duplicate definition of {{field}} {:?}",
                Shown(s).to_string()
            ));
        }
    }
    Ok(())
}

/// Why a configuration is invalid. `Display` gives MetalLB's message where MetalLB names the
/// object, and adds the object and field where it does not; [`ConfigError::metallb_message`]
/// is the text MetalLB's speaker puts in its ConfigurationState.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A bad IPAddressPool.
    #[error("parsing address pool {pool}: {problem}")]
    Pool {
        /// The pool's name.
        pool: String,
        /// What is wrong.
        problem: Box<PoolProblem>,
    },
    /// Two pools with one name (impossible from one namespace of an API server).
    #[error("duplicate definition of pool {0:?}")]
    DuplicatePool(String),
    /// A CIDR that overlaps one already defined (in this pool or an earlier one).
    #[error("CIDR {:?} in pool {pool:?} overlaps with already defined CIDR {:?}", cidr.to_string(), existing.to_string())]
    Overlap {
        /// The pool of the later CIDR.
        pool: String,
        /// The later CIDR.
        cidr: Cidr,
        /// The CIDR it overlaps.
        existing: Cidr,
    },
    /// A bad L2Advertisement.
    #[error("L2Advertisement {ad:?} spec.{field}: {problem}")]
    Advertisement {
        /// The advertisement's name.
        ad: String,
        /// The field (`ipAddressPools`, `nodeSelectors`, ...).
        field: &'static str,
        /// What is wrong.
        problem: Box<AdProblem>,
    },
}

impl ConfigError {
    /// The message as MetalLB words it (what goes after `configuration error: `).
    pub fn metallb_message(&self) -> String {
        match self {
            Self::Advertisement { ad, field, problem } => match problem.as_ref() {
                AdProblem::Duplicate(msg) => msg.clone(),
                AdProblem::Selector { go, source, .. } => match *field {
                    // config.go: l2AdvertisementFromCR -> selectedNodes -> filterWithLabelSelector
                    "nodeSelectors" => format!(
                        "{source}\ninvalid label selector {go}\nfailed to parse node selector for {ad}"
                    ),
                    // config.go: parseSelectors
                    "serviceSelectors" => format!(
                        "invalid service selector {go}: {source}\nfailed to parse service selector for {ad}"
                    ),
                    // config.go: preferredNodeScores
                    "preferredNodeSelectors" => format!(
                        "{source}\ninvalid preferred node selector {go}\nfailed to parse preferred node selectors for {ad}"
                    ),
                    // config.go: filterPoolsWithLabelSelector
                    _ => format!("{source}\ninvalid label selector {go}"),
                },
            },
            other => other.to_string(),
        }
    }
}

/// What is wrong with a pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolProblem {
    /// No `metadata.name`.
    #[error("missing pool name")]
    NoName,
    /// `spec.addresses` empty or absent.
    #[error("pool has no prefixes defined")]
    NoAddresses,
    /// One `spec.addresses` entry does not parse.
    #[error(
        "invalid CIDR {} in pool {}: {source}",
        GoQuoted(entry),
        GoQuoted(pool)
    )]
    Address {
        /// The pool's name.
        pool: String,
        /// The entry.
        entry: String,
        /// Why.
        source: AddressError,
    },
    /// `spec.serviceAllocation.namespaces` repeats a name.
    #[error("duplicate definition in namespaces field")]
    DuplicateNamespace(String),
    /// A repeated selector in `spec.serviceAllocation`.
    #[error("{}", what.replace("{field}", field))]
    Duplicate {
        /// `namespaceSelectors` or `serviceSelectors`.
        field: &'static str,
        /// MetalLB's message.
        what: String,
    },
    /// `spec.serviceAllocation.priority` beyond what vigil's allocator ranks (an i32).
    #[error("spec.serviceAllocation.priority {0} is out of range")]
    Priority(i64),
    /// The allocator refused pools this reader accepted (a bug: the two check the same rules).
    #[error("{0}")]
    Allocator(String),
    /// An invalid selector in `spec.serviceAllocation`.
    #[error("spec.serviceAllocation.{field} {shown}: {source}")]
    Selector {
        /// `namespaceSelectors` or `serviceSelectors`.
        field: &'static str,
        /// The selector.
        shown: String,
        /// Why.
        source: SelectorError,
    },
}

/// What is wrong with an L2Advertisement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdProblem {
    /// A repeated pool name, selector, expression or value (MetalLB's message).
    Duplicate(String),
    /// A selector that is not valid.
    Selector {
        /// The selector.
        shown: String,
        /// The selector as Go's `%v` prints the value (MetalLB's messages quote it so).
        go: String,
        /// Why.
        source: SelectorError,
    },
}

impl fmt::Display for AdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Duplicate(m) => f.write_str(m),
            Self::Selector { shown, source, .. } => write!(f, "selector {shown}: {source}"),
        }
    }
}

impl fmt::Display for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

/// A `LabelSelector` as Go's `%v` prints the struct value: `{map[k:v] [{key Op [v1 v2]}]}`.
/// `sorted`: MetalLB's duplicate check sorts each expression's values in place before the
/// selectors are parsed, so for the fields it checks the printed values are sorted.
fn go_value(ls: &LabelSelector, sorted: bool) -> String {
    let labels: Vec<String> = ls
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    let exprs: Vec<String> = ls
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            let mut values = e.values.clone().unwrap_or_default();
            if sorted {
                values.sort();
            }
            format!("{{{} {} [{}]}}", e.key, e.operator, values.join(" "))
        })
        .collect();
    format!("{{map[{}] [{}]}}", labels.join(" "), exprs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_docs(yaml: &str) -> Result<Config, ConfigError> {
        let (mut pools, mut ads) = (Vec::new(), Vec::new());
        for doc in serde_norway::Deserializer::from_str(yaml) {
            let v: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
            match v["kind"].as_str() {
                Some("IPAddressPool") => pools.push(serde_json::from_value(v).unwrap()),
                Some("L2Advertisement") => ads.push(serde_json::from_value(v).unwrap()),
                _ => panic!("unexpected {v}"),
            }
        }
        Config::parse(&pools, &ads, &[])
    }

    fn pool(addresses: &str) -> String {
        format!("{{kind: IPAddressPool, metadata: {{name: p}}, spec: {{addresses: {addresses}}}}}")
    }

    fn message(yaml: &str) -> String {
        format!(
            "configuration error: {}",
            parse_docs(yaml).unwrap_err().metallb_message()
        )
    }

    // Each expected text is what MetalLB v0.16.2's own internal/config.For printed for the same
    // objects (a throw-away Go program built against the module, run once; not kept).
    #[test]
    fn messages_match_metallb() {
        let ad = |spec: &str| {
            format!(
                "{}\n---\n{{kind: L2Advertisement, metadata: {{name: ad}}, spec: {spec}}}",
                pool("[198.18.0.0/24]")
            )
        };
        for (yaml, want) in [
            (
                pool(r#"["198.18.0.0/24", "198.18.0.128/25"]"#),
                r#"configuration error: CIDR "198.18.0.128/25" in pool "p" overlaps with already defined CIDR "198.18.0.0/24""#,
            ),
            (pool("[]"), "configuration error: parsing address pool p: pool has no prefixes defined"),
            (
                pool(r#"["198.18.0.1-2001:db8::1"]"#),
                r#"configuration error: parsing address pool p: invalid CIDR "198.18.0.1-2001:db8::1" in pool "p": invalid IP range "198.18.0.1-2001:db8::1": start and end IPs must be the same family"#,
            ),
            (
                pool(r#"["198.018.0.0/24"]"#),
                r#"configuration error: parsing address pool p: invalid CIDR "198.018.0.0/24" in pool "p": invalid CIDR "198.018.0.0/24""#,
            ),
            (
                "{kind: IPAddressPool, metadata: {name: p}, spec: {addresses: [198.18.0.0/24], serviceAllocation: {namespaces: [a, a]}}}".to_string(),
                "configuration error: parsing address pool p: duplicate definition in namespaces field",
            ),
            (ad("{ipAddressPools: [p, p]}"), r#"configuration error: duplicate definition of ipAddressPools "p""#),
            (
                ad("{serviceSelectors: [{matchExpressions: [{key: app, operator: Bad}]}]}"),
                "configuration error: invalid service selector {map[] [{app Bad []}]}: \"Bad\" is not a valid label selector operator\nfailed to parse service selector for ad",
            ),
            (
                ad("{ipAddressPoolSelectors: [{matchExpressions: [{key: app, operator: Nope}]}]}"),
                "configuration error: \"Nope\" is not a valid label selector operator\ninvalid label selector {map[] [{app Nope []}]}",
            ),
            (
                ad("{preferredNodeSelectors: [{weight: 3, preference: {matchExpressions: [{key: app, operator: Nope, values: [b, a]}]}}]}"),
                "configuration error: \"Nope\" is not a valid label selector operator\ninvalid preferred node selector {map[] [{app Nope [b a]}]}\nfailed to parse preferred node selectors for ad",
            ),
        ] {
            assert_eq!(message(&yaml), want, "{yaml}");
        }
    }

    #[test]
    fn addresses_summarise_as_metallb() {
        let cfg = parse_docs(&pool(
            r#"[" 198.18.0.1 - 198.18.0.10 ", "::ffff:198.18.1.0/120", "198.18.2.7/032"]"#,
        ))
        .unwrap();
        let cidrs: Vec<String> = cfg.pools["p"]
            .cidrs
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            cidrs,
            [
                "198.18.0.1/32",
                "198.18.0.2/31",
                "198.18.0.4/30",
                "198.18.0.8/31",
                "198.18.0.10/32",
                "198.18.1.0/24",
                "198.18.2.7/32"
            ]
        );
    }

    #[test]
    fn typed_errors_name_object_and_field() {
        let e = parse_docs(&format!(
            "{}\n---\n{{kind: L2Advertisement, metadata: {{name: ad}}, spec: {{nodeSelectors: [{{}}, {{}}]}}}}",
            pool("[198.18.0.0/24]")
        ))
        .unwrap_err();
        assert!(
            matches!(&e, ConfigError::Advertisement { ad, field: "nodeSelectors", .. } if ad == "ad"),
            "{e:?}"
        );
        assert!(
            e.to_string().starts_with(
                "L2Advertisement \"ad\" spec.nodeSelectors: duplicate definition of nodeSelectors"
            ),
            "{e}"
        );
        let e = parse_docs(&pool("[bad]")).unwrap_err();
        assert!(matches!(&e, ConfigError::Pool { pool, .. } if pool == "p"));
    }
}
