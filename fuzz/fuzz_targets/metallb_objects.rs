//! MetalLB's model (`vigil-metallb`) under random objects: IPAddressPools, L2Advertisements,
//! Services, EndpointSlices, Nodes and speaker Pods go through the speaker's
//! `Config::parse`, the controller's `pools::pools` and `translate`. Nothing may panic; every
//! refusal reads as a non-empty message (both vigil's and MetalLB's wording); the speaker's
//! pool reader and the controller refuse the same pool sets with the same error; every
//! Service `translate` hands on has an election key.
//!
//! An input starting with `{` is read as one JSON document (`{"pools": [...], "ads": [...],
//! "services": [...], "slices": [...], "nodes": [...], "pods": [...], "node": "...",
//! "lbClass": "...", "ignoreExcludeLb": bool, "speakerSelector": "..."}`, every field
//! optional), so whole objects can be seeded and mutated. Any other input is read as a stream
//! of choices that builds the objects from a small vocabulary of meaningful values (addresses,
//! names, labels, operators, IPs) with free text from the input mixed in.
#![no_main]

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use vigil_metallb::config::{self, Config};
use vigil_metallb::crd::{IPAddressPool, L2Advertisement};
use vigil_metallb::selector::Selector;
use vigil_metallb::{Cluster, Options, pools, translate};

/// Every object kind the model reads, and the speaker's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Objects {
    pools: Vec<IPAddressPool>,
    ads: Vec<L2Advertisement>,
    services: Vec<Service>,
    slices: Vec<EndpointSlice>,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    node: String,
    lb_class: Option<String>,
    ignore_exclude_lb: bool,
    speaker_selector: Option<String>,
}

fuzz_target!(|data: &[u8]| {
    let objects = if data.first() == Some(&b'{') {
        match serde_json::from_slice::<Objects>(data) {
            Ok(o) => o,
            Err(_) => return,
        }
    } else {
        build(&mut Input(data))
    };
    check(&objects);
});

fn check(o: &Objects) {
    let speaker = Config::parse(&o.pools, &o.ads, &o.nodes);
    let speaker_pools = config::read_pools(&o.pools);
    let controller = pools::pools(&o.pools);
    for e in [speaker.as_ref().err(), controller.as_ref().err()]
        .into_iter()
        .flatten()
    {
        assert!(!e.to_string().is_empty(), "empty refusal: {e:?}");
        assert!(!e.metallb_message().is_empty(), "empty refusal: {e:?}");
    }
    match (&speaker_pools, &controller) {
        (Ok(_), Ok(_)) => {}
        (Err(s), Err(c)) => assert_eq!(s, c, "speaker and controller refuse differently"),
        (s, c) => panic!("speaker pools {:?}, controller {:?}", s.is_ok(), c.is_ok()),
    }
    if speaker.is_ok() {
        assert!(
            speaker_pools.is_ok(),
            "the speaker accepted pools its reader refuses"
        );
    }
    let opts = Options {
        node_name: o.node.clone(),
        namespace: "metallb-system".to_string(),
        lb_class: o.lb_class.clone(),
        ignore_exclude_lb: o.ignore_exclude_lb,
        speaker_selector: o
            .speaker_selector
            .as_deref()
            .and_then(|s| Selector::parse(s).ok()),
    };
    let cluster = Cluster {
        services: &o.services,
        endpoint_slices: &o.slices,
        nodes: &o.nodes,
        pods: &o.pods,
    };
    // Without a valid configuration the speaker keeps its last good one; the empty one stands
    // in for it here, so Services are still looked at.
    let config = speaker.unwrap_or_default();
    let view = translate(&config, &cluster, &opts);
    for a in &view.services {
        assert!(!a.vips.is_empty(), "{} handed on without an IP", a.id);
        let key = a.key();
        assert!(
            config.pools[&a.pool].cidrs.iter().any(|c| c.contains(key)),
            "{}: {key} outside pool {}",
            a.id,
            a.pool
        );
    }
}

/// Reads fuzz input as a stream of small integers; runs dry as zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n.max(1)
    }

    fn chance(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// One of `vocabulary`, or (one time in eight) free text taken from the input.
    fn text(&mut self, vocabulary: &[&str]) -> String {
        let pick = self.byte();
        if pick >= 224 {
            let n = usize::from(self.byte() % 24).min(self.0.len());
            let (b, rest) = self.0.split_at(n);
            self.0 = rest;
            return String::from_utf8_lossy(b).into_owned();
        }
        vocabulary[usize::from(pick) % vocabulary.len()].to_string()
    }

    fn texts(&mut self, vocabulary: &[&str], max: usize) -> Vec<String> {
        (0..self.below(max + 1))
            .map(|_| self.text(vocabulary))
            .collect()
    }
}

const ADDRESSES: &[&str] = &[
    "198.18.0.0/24",
    "198.18.0.10-198.18.0.20",
    "198.18.1.0/00024",
    " 198.18.2.1 - 198.18.2.3 ",
    "::ffff:198.18.3.0/120",
    "::ffff:198.18.3.0/24",
    "::ffff:198.18.4.1-198.18.4.9",
    "198.18.0.128/25",
    "198.18.0.0/15",
    "2001:db8::/126",
    "2001:db8::10-2001:db8::1f",
    "2001:db8::/32",
    "::/0",
    "0.0.0.0/0",
    "198.18.5.9-198.18.5.1",
    "198.18.0.1-2001:db8::1",
    "198.018.0.0/24",
    "198.18.0.0/+8",
    "fe80::1%eth0/64",
    "a-b-c",
    "",
];
const NAMES: &[&str] = &["a", "b", "c", "", "pool-1"];
const KEYS: &[&str] = &[
    "app",
    "example.com/team",
    "kubernetes.io/hostname",
    "node.kubernetes.io/exclude-from-external-load-balancers",
    "",
    "-bad",
    "a/b/c",
];
const VALUES: &[&str] = &["web", "db", "", "n1", "x y", "-bad"];
const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Equals", ""];
const IPS: &[&str] = &[
    "198.18.0.1",
    "198.18.0.15",
    "198.18.0.200",
    "::ffff:198.18.0.2",
    "198.18.3.7",
    "2001:db8::1",
    "2001:db8::11",
    "198.19.0.1",
    "bogus",
    "",
];
const NODES: &[&str] = &["n1", "n2", "n3", ""];
const NAMESPACES: &[&str] = &["default", "metallb-system", "other"];
const INTERFACES: &[&str] = &["eth0", "eth1", "lo"];

/// Decodes `value` as `T`, dropping it when the built JSON does not fit the type.
fn decoded<T: DeserializeOwned>(value: Value) -> Option<T> {
    serde_json::from_value(value).ok()
}

fn labels(u: &mut Input<'_>) -> Value {
    let mut m = Map::new();
    for _ in 0..u.below(3) {
        m.insert(u.text(KEYS), json!(u.text(VALUES)));
    }
    Value::Object(m)
}

fn selector(u: &mut Input<'_>) -> Value {
    let mut s = Map::new();
    if u.chance() {
        s.insert("matchLabels".into(), labels(u));
    }
    if u.chance() {
        let exprs: Vec<Value> = (0..u.below(3))
            .map(|_| {
                let mut e = json!({"key": u.text(KEYS), "operator": u.text(OPERATORS)});
                if u.chance() {
                    e["values"] = json!(u.texts(VALUES, 3));
                }
                e
            })
            .collect();
        s.insert("matchExpressions".into(), json!(exprs));
    }
    Value::Object(s)
}

fn selectors(u: &mut Input<'_>) -> Value {
    let mut list: Vec<Value> = (0..u.below(3)).map(|_| selector(u)).collect();
    if u.below(4) == 0
        && let Some(first) = list.first().cloned()
    {
        list.push(first);
    }
    json!(list)
}

fn pool(u: &mut Input<'_>) -> Value {
    let mut spec = json!({"addresses": u.texts(ADDRESSES, 3)});
    if u.chance() {
        spec["autoAssign"] = json!(u.chance());
    }
    if u.chance() {
        spec["avoidBuggyIPs"] = json!(u.chance());
    }
    if u.chance() {
        let priority = i64::from(u.byte() as i8) << (u.below(4) * 16);
        spec["serviceAllocation"] = json!({
            "priority": priority,
            "namespaces": u.texts(NAMESPACES, 2),
            "namespaceSelectors": selectors(u),
            "serviceSelectors": selectors(u),
        });
    }
    json!({"metadata": {"name": u.text(NAMES), "namespace": "metallb-system", "labels": labels(u)},
           "spec": spec})
}

/// Builds one field's value from the input.
type MakeField = fn(&mut Input<'_>) -> Value;

fn advertisement(u: &mut Input<'_>) -> Value {
    let mut spec = Map::new();
    let fields: [(&str, MakeField); 6] = [
        ("ipAddressPools", |u| json!(u.texts(NAMES, 3))),
        ("ipAddressPoolSelectors", selectors),
        ("nodeSelectors", selectors),
        ("serviceSelectors", selectors),
        ("interfaces", |u| json!(u.texts(INTERFACES, 2))),
        ("preferredNodeSelectors", |u| {
            let prefs: Vec<Value> = (0..u.below(3))
                .map(|_| json!({"weight": i32::from(u.byte()) - 8, "preference": selector(u)}))
                .collect();
            json!(prefs)
        }),
    ];
    for (field, make) in fields {
        if u.chance() {
            spec.insert(field.into(), make(u));
        }
    }
    json!({"metadata": {"name": u.text(NAMES), "namespace": "metallb-system"}, "spec": spec})
}

fn service(u: &mut Input<'_>, i: usize) -> Value {
    let mut annotations = Map::new();
    if u.below(4) == 0 {
        annotations.insert("metallb.io/allow-shared-ip".into(), json!("k"));
    }
    let mut spec = json!({
        "type": if u.below(5) == 0 { "ClusterIP" } else { "LoadBalancer" },
        "externalTrafficPolicy": if u.chance() { "Local" } else { "Cluster" },
    });
    if u.below(6) == 0 {
        spec["loadBalancerClass"] = json!(u.text(&["metallb", "other"]));
    }
    let ingress: Vec<Value> = (0..u.below(3))
        .map(|_| json!({"ip": u.text(IPS)}))
        .collect();
    json!({
        "metadata": {"name": format!("s{i}"), "namespace": u.text(NAMESPACES),
                     "labels": labels(u), "annotations": annotations},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": ingress}},
    })
}

fn slice(u: &mut Input<'_>) -> Value {
    let endpoints: Vec<Value> = (0..u.below(3))
        .map(|_| {
            let mut conditions = Map::new();
            for c in ["ready", "serving", "terminating"] {
                if u.chance() {
                    conditions.insert(c.into(), json!(u.chance()));
                }
            }
            json!({"addresses": ["198.18.9.9"], "nodeName": u.text(NODES), "conditions": conditions})
        })
        .collect();
    json!({
        "metadata": {"name": format!("e{}", u.byte()), "namespace": u.text(NAMESPACES),
                     "labels": {"kubernetes.io/service-name": format!("s{}", u.below(4))}},
        "addressType": "IPv4",
        "endpoints": endpoints,
    })
}

fn node(u: &mut Input<'_>) -> Value {
    json!({
        "metadata": {"name": u.text(NODES), "labels": labels(u)},
        "status": {
            "conditions": [{"type": "NetworkUnavailable", "status": if u.chance() { "True" } else { "False" }}],
            "addresses": [{"type": "InternalIP", "address": u.text(IPS)}],
        },
    })
}

fn pod(u: &mut Input<'_>) -> Value {
    json!({
        "metadata": {"name": format!("speaker-{}", u.byte()), "namespace": u.text(NAMESPACES),
                     "labels": labels(u)},
        "spec": {"nodeName": u.text(NODES), "hostNetwork": u.chance(), "containers": []},
        "status": {"podIP": u.text(IPS)},
    })
}

fn build(u: &mut Input<'_>) -> Objects {
    let mut o = Objects::default();
    for _ in 0..u.below(4) {
        o.pools.extend(decoded(pool(u)));
    }
    for _ in 0..u.below(3) {
        o.ads.extend(decoded(advertisement(u)));
    }
    for i in 0..u.below(5) {
        o.services.extend(decoded(service(u, i)));
    }
    for _ in 0..u.below(3) {
        o.slices.extend(decoded(slice(u)));
    }
    for _ in 0..u.below(4) {
        o.nodes.extend(decoded(node(u)));
    }
    for _ in 0..u.below(3) {
        o.pods.extend(decoded(pod(u)));
    }
    o.node = u.text(NODES);
    if u.below(4) == 0 {
        o.lb_class = Some(u.text(&["metallb", "other", ""]));
    }
    o.ignore_exclude_lb = u.chance();
    if u.chance() {
        o.speaker_selector = Some(u.text(&["app=metallb", "app in (metallb)", "!app", "", "a b"]));
    }
    o
}
