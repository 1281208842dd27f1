//! The two sides: a lab each, MetalLB's controller on one and vigil's on the other, how an
//! operation is applied to both, and when both have settled.

use crate::allowed::{StepContext, unmatched_selector_pools};
use crate::ops::{Op, apply};
use crate::seen::{Seen, event_totals, read};
use crate::{APP_NAMESPACES, MIN_WAIT, NS, POLL, SETTLE_LIMIT, TEST, common};
use kube::Client;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use vigil_kubelab::metallb::{self, ControllerConfig, MemberlistKey, MetalLbProcess};
use vigil_kubelab::{ControlPlaneConfig, KubeLab, create_pod};

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

/// The two clusters, MetalLB's controller on one and vigil's on the other.
pub(crate) struct Sides {
    metallb_lab: KubeLab,
    vigil_lab: KubeLab,
    metallb_client: Client,
    vigil_client: Client,
    metallb: MetalLbProcess,
    _vigil: common::Replica,
    vigil_activity: Arc<AtomicU64>,
    /// What each side showed after the last step.
    pub(crate) last: (Seen, Seen),
    /// The pools' specs and the namespaces' labels as the test last wrote them.
    pool_specs: BTreeMap<String, Value>,
    ns_labels: BTreeMap<&'static str, BTreeMap<String, String>>,
}

impl Sides {
    pub(crate) fn start() -> Option<Self> {
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
    pub(crate) fn apply(&mut self, op: &Op) -> bool {
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
    pub(crate) fn settle(&mut self, op: &Op, quiet: Duration) -> (Seen, Seen) {
        let start = Instant::now();
        let mut state = (self.read_both(), self.activity());
        let mut changed = Instant::now();
        let mut what_changed = String::new();
        loop {
            std::thread::sleep(POLL);
            self.metallb.check_running().unwrap();
            let now = (self.read_both(), self.activity());
            if now != state {
                what_changed = what_changed_between(&state, &now);
                state = now;
                changed = Instant::now();
            } else if start.elapsed() >= MIN_WAIT && changed.elapsed() >= quiet {
                return state.0;
            }
            assert!(
                start.elapsed() < SETTLE_LIMIT,
                "{op:?}: not settled within {SETTLE_LIMIT:?}; last change: {what_changed}"
            );
        }
    }

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

    /// What the allowed list may look at for the step from [`Sides::last`] to `after`.
    pub(crate) fn step_context(&self, after: &(Seen, Seen)) -> StepContext {
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
        StepContext {
            metallb_event_totals: event_totals(&self.last.0),
            waiting_before,
            contenders,
            contenders_hold_the_same_ips,
            pool_ties,
            unmatched_selector_pools: unmatched_selector_pools(&self.pool_specs, &self.ns_labels),
        }
    }
}

/// What differs between two successive reads while settling (for a step that never settles).
fn what_changed_between(a: &((Seen, Seen), (u64, u64)), b: &((Seen, Seen), (u64, u64))) -> String {
    let mut out = Vec::new();
    for (side, x, y) in [("MetalLB", &a.0.0, &b.0.0), ("vigil", &a.0.1, &b.0.1)] {
        for (key, s) in &y.services {
            if x.services.get(key) != Some(s) {
                out.push(format!("{side}: Service {key} now {s:?}"));
            }
        }
        for (name, p) in &y.pools {
            if x.pools.get(name) != Some(p) {
                out.push(format!("{side}: pool {name} now {p:?}"));
            }
        }
        if x.events != y.events {
            out.push(format!("{side}: events"));
        }
    }
    if a.1.0 != b.1.0 {
        out.push("MetalLB's log".into());
    }
    if a.1.1 != b.1.1 {
        out.push(format!("vigil's tracing events (+{})", b.1.1 - a.1.1));
    }
    out.join("; ")
}
