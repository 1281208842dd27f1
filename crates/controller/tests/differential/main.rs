//! vigil's controller against MetalLB v0.16.2's own controller: two real API servers
//! (vigil-testenv, one lab each), MetalLB's controller on one, `vigil_controller::run` (what
//! `vigil controller` runs) on the other, and the same sequences of IPAddressPool, Namespace
//! and Service creations, updates and deletions applied to both, one operation at a time.
//!
//! After each operation both sides are left to settle, then compared per Service: the IPs of
//! `status.loadBalancer.ingress` (in order), `metallb.io/ip-allocated-from-pool`, and the
//! event reasons raised during that step; and per pool, its status counters. Any difference
//! fails the test unless [`ALLOWED`] lists it, with the reason ours is right.
//!
//! **Settled** means: at least [`MIN_WAIT`] since the operation, and then for [`QUIET`] on
//! both sides nothing changed: no Service, pool or Event changed in either API server (their
//! resourceVersions and event counts), MetalLB's controller wrote no log line (it logs the
//! start and end of every reconcile at info level), and vigil's controller emitted no
//! tracing event (it logs every reconcile at debug level). A step that does not settle within
//! [`SETTLE_LIMIT`] fails the test. A step with a difference that is not allowed, or one
//! that ends the sequence, is looked at once more after a longer quiet period,
//! [`RECHECK_QUIET`], before it counts. Some allowed differences (MetalLB's random orders)
//! leave the two clusters in different valid states; the rest of that sequence is then
//! skipped, and the count of sequences cut short is printed with the run's size.
//!
//! The hand-picked sequences cover sharing, annotations (current and deprecated),
//! `spec.loadBalancerIP`, `metallb.io/address-pool`, exhaustion, dual stack, `autoAssign:
//! false`, `avoidBuggyIPs`, `serviceAllocation` (priority, namespaces, namespace and service
//! selectors), `loadBalancerClass`, type changes, pool changes and deletions. The random ones
//! are seeded (`VIGIL_DIFF_SEED`, printed); `VIGIL_DIFF_RANDOM_SEQUENCES` (default 2) and
//! `VIGIL_DIFF_RANDOM_OPS` (default 10) size them for a bigger run.
//!
//! Needs root, vigil-testenv and MetalLB's controller (`VIGIL_GO_BIN_DIR`); skips without them
//! unless `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`.

mod common;

use k8s_openapi::api::core::v1::{Event, Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use vigil_k8s::crd::IPAddressPool;
use vigil_kubelab::metallb::{self, ControllerConfig, MemberlistKey, MetalLbProcess};
use vigil_kubelab::{ControlPlaneConfig, KubeLab, create_pod};

const TEST: &str = "vigil_and_metallb_controllers_allocate_alike";
/// The pools' namespace (both controllers').
const NS: &str = common::NS;
/// The Services' namespaces.
const APP_NAMESPACES: [&str; 2] = ["dt-a", "dt-b"];
/// The field manager of the test's own writes.
const MANAGER: &str = "vigil-difftest";
/// Least time between an operation and calling the state settled.
const MIN_WAIT: Duration = Duration::from_millis(400);
/// How long nothing may change before the state counts as settled.
const QUIET: Duration = Duration::from_millis(800);
/// The quiet period of the second look at a step that showed differences.
const RECHECK_QUIET: Duration = Duration::from_secs(3);
/// Bound on one settle.
const SETTLE_LIMIT: Duration = Duration::from_secs(45);
/// How often the state is read while settling.
const POLL: Duration = Duration::from_millis(150);

// ---------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------

/// A Service as the test writes it (server-side apply: fields left out are removed).
#[derive(Debug, Clone, Default)]
struct Svc {
    ns: &'static str,
    name: String,
    /// `spec.type` (LoadBalancer when empty).
    type_: &'static str,
    /// TCP ports.
    ports: Vec<u16>,
    annotations: BTreeMap<String, String>,
    labels: BTreeMap<String, String>,
    load_balancer_ip: Option<String>,
    /// `spec.ipFamilyPolicy` and `spec.ipFamilies`.
    families: Option<(&'static str, Vec<&'static str>)>,
    local: bool,
    selector: BTreeMap<String, String>,
    class: Option<&'static str>,
}

impl Svc {
    fn lb(ns: &'static str, name: &str) -> Self {
        Self {
            ns,
            name: name.to_string(),
            ports: vec![80],
            ..Self::default()
        }
    }
    fn ann(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }
    fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
    fn ports(mut self, ports: &[u16]) -> Self {
        self.ports = ports.to_vec();
        self
    }
    fn ip(mut self, ip: &str) -> Self {
        self.load_balancer_ip = Some(ip.into());
        self
    }
    fn families(mut self, policy: &'static str, families: &[&'static str]) -> Self {
        self.families = Some((policy, families.to_vec()));
        self
    }
    fn local(mut self, app: &str) -> Self {
        self.local = true;
        self.selector.insert("app".into(), app.into());
        self
    }
    fn type_(mut self, t: &'static str) -> Self {
        self.type_ = t;
        self
    }
    fn class(mut self, c: &'static str) -> Self {
        self.class = Some(c);
        self
    }

    fn manifest(&self) -> Value {
        let ports: Vec<Value> = self
            .ports
            .iter()
            .map(|p| json!({"name": format!("p{p}"), "port": p, "protocol": "TCP"}))
            .collect();
        let mut spec = json!({
            "type": if self.type_.is_empty() { "LoadBalancer" } else { self.type_ },
            "ports": ports,
        });
        if let Some(ip) = &self.load_balancer_ip {
            spec["loadBalancerIP"] = json!(ip);
        }
        if let Some((policy, families)) = &self.families {
            spec["ipFamilyPolicy"] = json!(policy);
            spec["ipFamilies"] = json!(families);
        }
        if self.local {
            spec["externalTrafficPolicy"] = json!("Local");
        }
        if !self.selector.is_empty() {
            spec["selector"] = json!(self.selector);
        }
        if let Some(c) = self.class {
            spec["loadBalancerClass"] = json!(c);
        }
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": self.name, "namespace": self.ns,
                         "annotations": self.annotations, "labels": self.labels},
            "spec": spec,
        })
    }
}

/// One operation, applied to both API servers.
#[derive(Debug, Clone)]
enum Op {
    /// Create or update IPAddressPool `name` with `spec`.
    Pool(String, Value),
    DeletePool(String),
    /// Create or update a Service.
    Svc(Svc),
    DeleteSvc(&'static str, String),
    /// Set a namespace's labels.
    NsLabels(&'static str, BTreeMap<String, String>),
    /// Delete every Service and pool (the end of a sequence), as one step.
    Clear,
}

fn pool(name: &str, spec: Value) -> Op {
    Op::Pool(name.into(), spec)
}
fn svc(s: Svc) -> Op {
    Op::Svc(s)
}
fn del(ns: &'static str, name: &str) -> Op {
    Op::DeleteSvc(ns, name.into())
}
fn ns_labels(ns: &'static str, labels: &[(&str, &str)]) -> Op {
    Op::NsLabels(
        ns,
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn apply_params() -> PatchParams {
    PatchParams::apply(MANAGER).force()
}

/// Applies `op` through `client`; an API refusal is returned as text (it must be the same
/// on both sides).
async fn apply(client: &Client, op: &Op) -> Result<(), String> {
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    let r = match op {
        Op::Pool(name, spec) => {
            let doc = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                             "metadata": {"name": name, "namespace": NS}, "spec": spec});
            pools
                .patch(name, &apply_params(), &Patch::Apply(&doc))
                .await
                .map(drop)
        }
        Op::DeletePool(name) => pools.delete(name, &DeleteParams::default()).await.map(drop),
        Op::Svc(s) => Api::<Service>::namespaced(client.clone(), s.ns)
            .patch(&s.name, &apply_params(), &Patch::Apply(&s.manifest()))
            .await
            .map(drop),
        Op::DeleteSvc(ns, name) => Api::<Service>::namespaced(client.clone(), ns)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop),
        Op::NsLabels(ns, labels) => {
            let doc = json!({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": ns, "labels": labels}});
            Api::<Namespace>::all(client.clone())
                .patch(ns, &apply_params(), &Patch::Apply(&doc))
                .await
                .map(drop)
        }
        Op::Clear => {
            for ns in APP_NAMESPACES {
                let api: Api<Service> = Api::namespaced(client.clone(), ns);
                for s in api.list(&ListParams::default()).await.unwrap().items {
                    let _ = api.delete(&s.name_any(), &DeleteParams::default()).await;
                }
            }
            for p in pools.list(&ListParams::default()).await.unwrap().items {
                let _ = pools.delete(&p.name_any(), &DeleteParams::default()).await;
            }
            Ok(())
        }
    };
    r.map_err(|e| match e {
        kube::Error::Api(s) => format!("{} {}", s.code, s.reason),
        other => other.to_string(),
    })
}

// ---------------------------------------------------------------------------------------
// What each side shows
// ---------------------------------------------------------------------------------------

/// One Service as a controller left it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shown {
    /// A LoadBalancer Service this controller handles (no class).
    load_balancer: bool,
    ingress: Vec<String>,
    pool: Option<String>,
    resource_version: String,
}

/// Everything compared, and everything whose change means "not settled yet".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Seen {
    services: BTreeMap<String, Shown>,
    /// Event uid → (Service key, type, reason, count).
    events: BTreeMap<String, (String, String, String, i32)>,
    /// Pool → (resourceVersion, assigned v4, assigned v6, available v4, available v6).
    pools: BTreeMap<String, (String, [Option<i64>; 4])>,
}

async fn read(client: &Client) -> Seen {
    let mut seen = Seen::default();
    for ns in APP_NAMESPACES {
        let api: Api<Service> = Api::namespaced(client.clone(), ns);
        for s in api.list(&ListParams::default()).await.unwrap().items {
            let key = format!("{ns}/{}", s.name_any());
            seen.services.insert(
                key,
                Shown {
                    load_balancer: s.spec.as_ref().is_some_and(|sp| {
                        sp.type_.as_deref() == Some("LoadBalancer")
                            && sp.load_balancer_class.is_none()
                    }),
                    ingress: common::ingress(&s).iter().map(|i| i.to_string()).collect(),
                    pool: common::pool_of(&s),
                    resource_version: s.resource_version().unwrap_or_default(),
                },
            );
        }
        let events: Api<Event> = Api::namespaced(client.clone(), ns);
        for e in events.list(&ListParams::default()).await.unwrap().items {
            let obj = &e.involved_object;
            // Only the controllers' own events (the API server raises some about Services too,
            // e.g. ClusterIPNotAllocated from its repair loop).
            let from_controller = e.source.as_ref().and_then(|s| s.component.as_deref())
                == Some("metallb-controller")
                || e.reporting_component.as_deref()
                    == Some(vigil_controller::engine::FIELD_MANAGER);
            if obj.kind.as_deref() != Some("Service") || !from_controller {
                continue;
            }
            let key = format!("{ns}/{}", obj.name.as_deref().unwrap_or_default());
            let count = e
                .series
                .as_ref()
                .and_then(|s| s.count)
                .or(e.count)
                .unwrap_or(1);
            seen.events.insert(
                e.metadata.uid.clone().unwrap_or_default(),
                (
                    key,
                    e.type_.clone().unwrap_or_default(),
                    e.reason.clone().unwrap_or_default(),
                    count,
                ),
            );
        }
    }
    let pools: Api<IPAddressPool> = Api::namespaced(client.clone(), NS);
    for p in pools.list(&ListParams::default()).await.unwrap().items {
        let s = p.status.clone().unwrap_or_default();
        seen.pools.insert(
            p.name_any(),
            (
                p.resource_version().unwrap_or_default(),
                [
                    s.assigned_ipv4,
                    s.assigned_ipv6,
                    s.available_ipv4,
                    s.available_ipv6,
                ],
            ),
        );
    }
    seen
}

/// The (type, reason) pairs raised per Service between `before` and `after` (new events, or
/// events whose count went up).
fn raised(before: &Seen, after: &Seen) -> BTreeMap<String, BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, BTreeSet<(String, String)>> = BTreeMap::new();
    for (uid, (key, type_, reason, count)) in &after.events {
        let old = before.events.get(uid).map_or(0, |e| e.3);
        if *count > old {
            out.entry(key.clone())
                .or_default()
                .insert((type_.clone(), reason.clone()));
        }
    }
    out
}

/// The total events MetalLB's recorder has written about each Service so far.
fn event_totals(seen: &Seen) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for (key, _, _, count) in seen.events.values() {
        *out.entry(key.clone()).or_insert(0) += count;
    }
    out
}

// ---------------------------------------------------------------------------------------
// The two sides
// ---------------------------------------------------------------------------------------

/// Counts the tracing events of vigil's controller (its activity signal).
struct CountEvents(Arc<AtomicU64>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for CountEvents {
    fn on_event(
        &self,
        _event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn install_activity_counter() -> Arc<AtomicU64> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    let count = Arc::new(AtomicU64::new(0));
    let targets = tracing_subscriber::filter::Targets::new()
        .with_target("vigil_controller", tracing::Level::DEBUG);
    let fmt = tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(tracing_subscriber::EnvFilter::from_default_env());
    let subscriber = tracing_subscriber::registry()
        .with(CountEvents(Arc::clone(&count)).with_filter(targets))
        .with(fmt);
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber per test binary");
    count
}

struct Sides {
    metallb_lab: KubeLab,
    vigil_lab: KubeLab,
    metallb_client: Client,
    vigil_client: Client,
    metallb: MetalLbProcess,
    _vigil: common::Replica,
    vigil_activity: Arc<AtomicU64>,
    /// What each side showed after the last step.
    last: (Seen, Seen),
    /// The pools' specs and the namespaces' labels as the test last wrote them.
    pool_specs: BTreeMap<String, Value>,
    ns_labels: BTreeMap<&'static str, BTreeMap<String, String>>,
}

/// What differed in one step, before the allowed list is consulted.
#[derive(Debug, Clone)]
struct Difference {
    what: &'static str,
    key: String,
    metallb: String,
    vigil: String,
    /// For event reasons: those only MetalLB raised, and those only vigil raised.
    only: Option<(Reasons, Reasons)>,
}

type Reasons = BTreeSet<(String, String)>;

/// A difference that is expected, and why ours is right.
struct Allowed {
    name: &'static str,
    why: &'static str,
    applies: fn(&Difference, &StepContext) -> bool,
    /// The two sides now hold different (each valid) states, so the rest of the sequence
    /// cannot be compared: it is cut short (and counted).
    cuts: bool,
}

/// What the allowed list may look at.
struct StepContext {
    /// MetalLB's total events per Service before this step.
    metallb_event_totals: BTreeMap<String, i32>,
    /// LoadBalancer Services holding no IP on MetalLB's side before this step.
    waiting_before: BTreeSet<String>,
    /// Services that were waiting, or whose IPs changed in this step on both sides.
    contenders: BTreeSet<String>,
    /// Whether the contenders hold the same set of IPs on both sides, whoever holds which.
    contenders_hold_the_same_ips: bool,
    /// Services given IPs from different pools on the two sides, when MetalLB ranks those two
    /// pools equally, and those pools.
    pool_ties: BTreeSet<String>,
    /// Pools (after this step) whose `namespaceSelectors` match no namespace.
    unmatched_selector_pools: Vec<String>,
}

/// client-go's event recorder (which MetalLB's controller uses) drops events about one object
/// beyond a burst of 25 (one more per 5 minutes: its EventCorrelator spam filter); kube-rs's
/// recorder keeps one Event per message and counts repeats in `series`, so nothing is dropped.
const SPAM_FILTER_BURST: i32 = 25;

const ALLOWED: &[Allowed] = &[
    Allowed {
        name: "metallb-event-spam-filter",
        why: "MetalLB's client-go recorder drops events about a Service after 25 of them \
              (EventCorrelator spam filter); vigil's recorder counts repeats in the Event's series",
        applies: |d, ctx| {
            d.what == "event reasons"
                && ctx
                    .metallb_event_totals
                    .get(&d.key)
                    .is_some_and(|n| *n >= SPAM_FILTER_BURST)
        },
        cuts: false,
    },
    Allowed {
        name: "metallb-deprecated-annotation-on-every-pass",
        why: "MetalLB means to raise deprecatedAnnotation only when it changes the Service, but \
              compares its fresh ingress (no ipMode) with the stored one (ipMode: VIP, filled in \
              by the API server since Kubernetes 1.30), so it sees a change, and raises it, every \
              time it looks at an allocated Service; vigil raises it when it writes",
        applies: |d, _| {
            d.only.as_ref().is_some_and(|(metallb, vigil)| {
                vigil.is_empty()
                    && metallb
                        .iter()
                        .all(|(t, r)| t == "Warning" && r == "deprecatedAnnotation")
            })
        },
        cuts: false,
    },
    Allowed {
        name: "metallb-order-among-equals",
        why: "when several Services are given IPs in one pass (after a pool or namespace change, \
              or when an IP frees up and several are waiting), MetalLB takes them in its \
              informer cache's map order, which is random (its sort only puts Services carrying \
              more IPs first); vigil takes them by namespace and name, one of MetalLB's orders. \
              Allowed only for those Services: ones given IPs on both sides that together hold \
              the same IPs on both sides, or ones that were waiting, at least two of them",
        applies: |d, ctx| {
            // (Pool counters follow from which of them got what.)
            let theirs = |set: &BTreeSet<String>| d.what == "pool status" || set.contains(&d.key);
            ctx.contenders.len() >= 2
                && (ctx.contenders_hold_the_same_ips && theirs(&ctx.contenders)
                    || ctx.waiting_before.len() >= 2 && theirs(&ctx.waiting_before))
        },
        cuts: true,
    },
    Allowed {
        name: "metallb-order-among-equal-pools",
        why: "MetalLB tries pools without serviceAllocation in Go map order (random) and sorts \
              equal priorities unstably; vigil breaks those ties by pool name (one of MetalLB's \
              orders; lb::pool's documented difference). Allowed only for a Service whose two \
              pools MetalLB ranks equally, and those pools' counters",
        applies: |d, ctx| ctx.pool_ties.contains(&d.key),
        cuts: true,
    },
    Allowed {
        name: "metallb-pool-status-race",
        why: "MetalLB's pool status controller may look at a new pool before its allocator knows \
              it, read zero counters, find them equal to the empty status and write nothing until \
              the next allocation in that pool; vigil writes a new pool's counters at once",
        applies: |d, _| d.what == "pool status" && d.metallb == "Some([None, None, None, None])",
        cuts: false,
    },
    Allowed {
        name: "metallb-selector-matching-no-namespace",
        why: "MetalLB resolves namespaceSelectors into a namespace list when it reads the \
              pools, and an empty list means no restriction, so a pool whose selectors match no \
              namespace admits every namespace; vigil admits only matching namespaces",
        applies: |_, ctx| !ctx.unmatched_selector_pools.is_empty(),
        cuts: true,
    },
];

impl Sides {
    fn start() -> Option<Self> {
        let (m, v) = std::thread::scope(|s| {
            let m = s.spawn(|| KubeLab::start("dfm", TEST, ControlPlaneConfig::default()));
            let v = s.spawn(|| KubeLab::start("dfv", TEST, ControlPlaneConfig::default()));
            (m.join().unwrap(), v.join().unwrap())
        });
        let (metallb_lab, vigil_lab) = (m?, v?);
        let binaries = metallb::metallb_binaries(TEST)?;
        let metallb_client = metallb_lab.cp().client().unwrap();
        let vigil_client = vigil_lab.cp().client().unwrap();
        let key = MemberlistKey::random().unwrap();
        for (lab, client) in [(&metallb_lab, &metallb_client), (&vigil_lab, &vigil_client)] {
            lab.cp().block_on(async {
                metallb::install_metallb(client, NS, &key).await.unwrap();
                for ns in APP_NAMESPACES {
                    vigil_kubelab::ensure_namespace(client, ns).await.unwrap();
                }
            });
        }
        let config = ControllerConfig::default();
        metallb_lab
            .cp()
            .block_on(create_pod(&metallb_client, &config.pod()))
            .unwrap();
        let metallb = metallb::start_controller(metallb_lab.cp(), &binaries, &config).unwrap();
        let vigil_activity = install_activity_counter();
        let vigil = common::Replica::start(vigil_lab.cp(), common::settings("difftest"));
        Some(Self {
            metallb_lab,
            vigil_lab,
            metallb_client,
            vigil_client,
            metallb,
            _vigil: vigil,
            vigil_activity,
            last: (Seen::default(), Seen::default()),
            pool_specs: BTreeMap::new(),
            ns_labels: BTreeMap::new(),
        })
    }

    fn read_both(&self) -> (Seen, Seen) {
        let m = self.metallb_lab.cp().block_on(read(&self.metallb_client));
        let v = self.vigil_lab.cp().block_on(read(&self.vigil_client));
        (m, v)
    }

    fn activity(&self) -> (u64, u64) {
        let log = std::fs::metadata(self.metallb.log_path()).map_or(0, |m| m.len());
        (log, self.vigil_activity.load(Ordering::Relaxed))
    }

    /// Applies `op` to both sides; `false` if both refused it (then it is no step).
    fn apply(&mut self, op: &Op) -> bool {
        let m = self
            .metallb_lab
            .cp()
            .block_on(apply(&self.metallb_client, op));
        let v = self.vigil_lab.cp().block_on(apply(&self.vigil_client, op));
        match (m, v) {
            (Ok(()), Ok(())) => {
                match op {
                    Op::Pool(name, spec) => {
                        self.pool_specs.insert(name.clone(), spec.clone());
                    }
                    Op::DeletePool(name) => {
                        self.pool_specs.remove(name);
                    }
                    Op::NsLabels(ns, labels) => {
                        self.ns_labels.insert(ns, labels.clone());
                    }
                    Op::Clear => self.pool_specs.clear(),
                    Op::Svc(_) | Op::DeleteSvc(..) => {}
                }
                true
            }
            (Err(a), Err(b)) if a == b => false,
            (m, v) => panic!("{op:?}: the API servers disagree: MetalLB's {m:?}, vigil's {v:?}"),
        }
    }

    /// Waits until both sides have settled (module docs) and returns what they show.
    fn settle(&mut self, op: &Op, quiet: Duration) -> (Seen, Seen) {
        let start = Instant::now();
        let mut state = (self.read_both(), self.activity());
        let mut changed = Instant::now();
        loop {
            std::thread::sleep(POLL);
            self.metallb.check_running().unwrap();
            let now = (self.read_both(), self.activity());
            if now != state {
                state = now;
                changed = Instant::now();
            } else if start.elapsed() >= MIN_WAIT && changed.elapsed() >= quiet {
                return state.0;
            }
            assert!(
                start.elapsed() < SETTLE_LIMIT,
                "{op:?}: not settled within {SETTLE_LIMIT:?}"
            );
        }
    }

    /// Compares what the step did on both sides.
    fn compare(&self, before: &(Seen, Seen), after: &(Seen, Seen)) -> Vec<Difference> {
        let (m, v) = after;
        let mut out = Vec::new();
        let keys: BTreeSet<&String> = m.services.keys().chain(v.services.keys()).collect();
        for key in &keys {
            let (a, b) = (m.services.get(*key), v.services.get(*key));
            let ingress = |s: Option<&Shown>| s.map(|s| s.ingress.clone());
            let pool = |s: Option<&Shown>| s.and_then(|s| s.pool.clone());
            if ingress(a) != ingress(b) {
                out.push(Difference {
                    what: "ingress",
                    key: key.to_string(),
                    metallb: format!("{:?}", ingress(a)),
                    vigil: format!("{:?}", ingress(b)),
                    only: None,
                });
            }
            if pool(a) != pool(b) {
                out.push(Difference {
                    what: "ip-allocated-from-pool",
                    key: key.to_string(),
                    metallb: format!("{:?}", pool(a)),
                    vigil: format!("{:?}", pool(b)),
                    only: None,
                });
            }
        }
        let (rm, rv) = (raised(&before.0, m), raised(&before.1, v));
        let keys: BTreeSet<&String> = rm.keys().chain(rv.keys()).collect();
        for key in keys {
            // A Service deleted in this step: its last events are of no interest.
            if !m.services.contains_key(key) && !v.services.contains_key(key) {
                continue;
            }
            let empty = BTreeSet::new();
            let (a, b) = (rm.get(key).unwrap_or(&empty), rv.get(key).unwrap_or(&empty));
            if a != b {
                out.push(Difference {
                    what: "event reasons",
                    key: key.clone(),
                    metallb: format!("{a:?}"),
                    vigil: format!("{b:?}"),
                    only: Some((a - b, b - a)),
                });
            }
        }
        let names: BTreeSet<&String> = m.pools.keys().chain(v.pools.keys()).collect();
        for name in names {
            let (a, b) = (
                m.pools.get(name).map(|p| p.1),
                v.pools.get(name).map(|p| p.1),
            );
            if a != b {
                out.push(Difference {
                    what: "pool status",
                    key: name.clone(),
                    metallb: format!("{a:?}"),
                    vigil: format!("{b:?}"),
                    only: None,
                });
            }
        }
        out
    }
}

/// Pools whose `namespaceSelectors` (`matchLabels` only, as the test writes them) match none
/// of the test's namespaces (the others carry no labels the test selects on).
fn unmatched_selector_pools(
    pools: &BTreeMap<String, Value>,
    ns_labels: &BTreeMap<&'static str, BTreeMap<String, String>>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, spec) in pools {
        let Some(selectors) = spec["serviceAllocation"]["namespaceSelectors"].as_array() else {
            continue;
        };
        if selectors.is_empty() {
            continue;
        }
        let matches = |sel: &Value| {
            APP_NAMESPACES.iter().any(|ns| {
                let labels = ns_labels.get(ns).cloned().unwrap_or_default();
                sel["matchLabels"].as_object().is_some_and(|want| {
                    want.iter()
                        .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
                })
            })
        };
        if !selectors.iter().any(matches) {
            out.push(name.clone());
        }
    }
    out
}

/// The run's tally.
#[derive(Default)]
struct Tally {
    sequences: usize,
    operations: usize,
    refused: usize,
    /// Sequences cut short by an allowed difference, and the operations skipped.
    cut: usize,
    skipped: usize,
    allowed: BTreeMap<&'static str, usize>,
    failures: Vec<String>,
}

impl Sides {
    /// Whether MetalLB's automatic allocation ranks pools `a` and `b` equally: both
    /// auto-assign, and neither has `serviceAllocation` or both have the same priority.
    fn ranked_equally(&self, a: &str, b: &str) -> bool {
        let (Some(a), Some(b)) = (self.pool_specs.get(a), self.pool_specs.get(b)) else {
            return false;
        };
        let auto = |p: &Value| p["autoAssign"].as_bool() != Some(false);
        let rank = |p: &Value| {
            let sa = &p["serviceAllocation"];
            (!sa.is_null()).then(|| sa["priority"].as_i64().unwrap_or(0))
        };
        auto(a) && auto(b) && rank(a) == rank(b)
    }

    /// The differences of the step that led to `after`, each with the allowed difference
    /// that covers it, if any.
    fn judge(&self, after: &(Seen, Seen)) -> Vec<(Difference, Option<&'static Allowed>)> {
        let waiting_before: BTreeSet<String> = self
            .last
            .0
            .services
            .iter()
            .filter(|(_, s)| s.load_balancer && s.ingress.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        let changed = |before: &Seen, now: &Seen| -> BTreeSet<String> {
            now.services
                .iter()
                .filter(|(k, s)| before.services.get(*k).map(|b| &b.ingress) != Some(&s.ingress))
                .map(|(k, _)| k.clone())
                .collect()
        };
        // Those given IPs in this step on both sides, and those that were waiting.
        let mut contenders = waiting_before.clone();
        contenders.extend(
            changed(&self.last.0, &after.0)
                .intersection(&changed(&self.last.1, &after.1))
                .cloned(),
        );
        let held = |seen: &Seen| -> Vec<String> {
            let mut ips: Vec<String> = contenders
                .iter()
                .filter_map(|k| seen.services.get(k))
                .flat_map(|s| s.ingress.clone())
                .collect();
            // A set: Services sharing one IP take it together.
            ips.sort();
            ips.dedup();
            ips
        };
        let contenders_hold_the_same_ips = held(&after.0) == held(&after.1);
        let mut pool_ties = BTreeSet::new();
        for (key, m) in &after.0.services {
            let Some(v) = after.1.services.get(key) else {
                continue;
            };
            if let (Some(a), Some(b)) = (&m.pool, &v.pool)
                && a != b
                && self.ranked_equally(a, b)
            {
                pool_ties.extend([key.clone(), a.clone(), b.clone()]);
            }
        }
        let ctx = StepContext {
            metallb_event_totals: event_totals(&self.last.0),
            waiting_before,
            contenders,
            contenders_hold_the_same_ips,
            pool_ties,
            unmatched_selector_pools: unmatched_selector_pools(&self.pool_specs, &self.ns_labels),
        };
        self.compare(&self.last, after)
            .into_iter()
            .map(|d| {
                let a = ALLOWED.iter().find(|a| (a.applies)(&d, &ctx));
                (d, a)
            })
            .collect()
    }

    fn run_sequence(&mut self, name: &str, ops: &[Op], tally: &mut Tally) {
        tally.sequences += 1;
        let mut cut = false;
        for (i, op) in ops.iter().chain([&Op::Clear]).enumerate() {
            if cut && !matches!(op, Op::Clear) {
                tally.skipped += 1;
                continue;
            }
            if !self.apply(op) {
                tally.refused += 1;
                continue;
            }
            tally.operations += 1;
            let mut after = self.settle(op, QUIET);
            let mut judged = self.judge(&after);
            // A loaded machine can delay a controller past the quiet period: before a
            // difference counts (or cuts a sequence short), both sides get a second, longer
            // quiet period.
            if judged.iter().any(|(_, a)| a.is_none_or(|a| a.cuts)) {
                after = self.settle(op, RECHECK_QUIET);
                judged = self.judge(&after);
            }
            for (d, allowed) in judged {
                match allowed {
                    Some(a) => {
                        *tally.allowed.entry(a.name).or_insert(0) += 1;
                        if a.cuts && !cut {
                            cut = true;
                            tally.cut += 1;
                            eprintln!(
                                "{TEST}: {name} cut short at step {i} ({}): {} of {}: MetalLB {} / vigil {}",
                                a.name, d.what, d.key, d.metallb, d.vigil
                            );
                        }
                    }
                    None => tally.failures.push(format!(
                        "{name} step {i} {op:?}: {} of {}: MetalLB {} / vigil {}",
                        d.what, d.key, d.metallb, d.vigil
                    )),
                }
            }
            self.last = after;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sequences
// ---------------------------------------------------------------------------------------

const A: &str = "dt-a";
const B: &str = "dt-b";

fn hand_picked() -> Vec<(&'static str, Vec<Op>)> {
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

/// splitmix64: a seeded generator, so a failing random sequence can be replayed.
struct Rng(u64);

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

fn random_sequence(rng: &mut Rng, ops: usize) -> Vec<Op> {
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

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn vigil_and_metallb_controllers_allocate_alike() {
    let started = Instant::now();
    let Some(mut sides) = Sides::start() else {
        return;
    };
    let seed = std::env::var("VIGIL_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    let random_sequences = env_usize("VIGIL_DIFF_RANDOM_SEQUENCES", 2);
    let random_ops = env_usize("VIGIL_DIFF_RANDOM_OPS", 10);
    eprintln!("{TEST}: seed {seed} (VIGIL_DIFF_SEED={seed} replays the random sequences)");

    // Both controllers up: one Service allocated on each side.
    let mut tally = Tally::default();
    sides.run_sequence(
        "warm-up",
        &[
            pool("warm", json!({"addresses": ["198.18.9.0/32"]})),
            svc(Svc::lb(A, "warm")),
        ],
        &mut tally,
    );
    // VIGIL_DIFF_ONLY=<prefix> runs only the hand-picked sequences whose name starts so.
    let only = std::env::var("VIGIL_DIFF_ONLY").unwrap_or_default();
    for (name, ops) in hand_picked() {
        if !name.starts_with(&only) {
            continue;
        }
        sides.run_sequence(name, &ops, &mut tally);
    }
    let mut rng = Rng(seed);
    for i in 0..random_sequences {
        let ops = random_sequence(&mut rng, random_ops);
        sides.run_sequence(&format!("random {i} (seed {seed})"), &ops, &mut tally);
    }
    eprintln!(
        "{TEST}: {} sequences, {} operations ({} refused by both API servers; {} sequences cut \
         short, {} operations skipped), {} differences not allowed, allowed: {:?}, {:.0} s",
        tally.sequences,
        tally.operations,
        tally.refused,
        tally.cut,
        tally.skipped,
        tally.failures.len(),
        tally.allowed,
        started.elapsed().as_secs_f64()
    );
    for a in ALLOWED {
        eprintln!("{TEST}: allowed difference {}: {}", a.name, a.why);
    }
    assert!(
        tally.failures.is_empty(),
        "differences:\n{}",
        tally.failures.join("\n")
    );
}
