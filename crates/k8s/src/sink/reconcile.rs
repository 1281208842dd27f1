//! The status writer's decisions, without I/O: what this node wants (a ServiceL2Status per
//! Service it announces) against what its watch shows (this node's ServiceL2Status objects),
//! giving one operation at a time per Service.
//!
//! - **Level, not edges.** A wish is the newest word per Service (announced or not); a wish
//!   made while that Service's operation runs waits and replaces any older one. Nothing is
//!   remembered about what was written except as an expectation (below): after a restart or
//!   a relist the watch alone says what exists, so leftovers of an earlier run are deleted
//!   like any status this node does not want, with no start-up sweep.
//! - **One operation per Service**, at most `max_in_flight` in all; a Service whose write
//!   failed backs off alone (doubling from [`RETRY_MIN`] to [`RETRY_MAX`]).
//! - **Expectations.** The watch echoes a write some time after it returns; until then the
//!   writer decides from what the write returned, so a create is never repeated because its
//!   echo is late. An expectation ends with its echo (the same `resourceVersion`, or the
//!   delete), with a relist that shows it, or after [`EXPECTATION_TTL`].
//! - A status is kept when its immutable fields (node, service name and namespace: CEL
//!   `self == oldSelf` in MetalLB's CRD) match or are unset, and it is owned by the wanted
//!   owner (the speaker Pod, so that it is collected with it); its status is patched when
//!   only the rest differs. Otherwise it is deleted and created again. Extra objects for one
//!   Service are deleted.
//!
//! Time comes in as a parameter; tests drive it by hand.

use crate::crd::{
    LABEL_SERVICE_NAME, LABEL_SERVICE_NAMESPACE, ServiceL2Status, ServiceL2StatusStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

/// The first wait after a failed write; it doubles per failure up to [`RETRY_MAX`].
pub const RETRY_MIN: Duration = Duration::from_millis(500);
/// The longest wait after failed writes.
pub const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long a write's echo is waited for before the watch alone is believed again.
pub const EXPECTATION_TTL: Duration = Duration::from_secs(30);

/// A Service id, `namespace/name`.
pub type Key = String;

/// One ServiceL2Status as seen: from the watch, or returned by a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion` (compared for equality only).
    pub version: String,
    /// Its status (`None` between the create and the status patch).
    pub status: Option<ServiceL2StatusStatus>,
    /// The uids of its owners.
    pub owners: Vec<String>,
}

impl Seen {
    /// The Service an object belongs to (from its labels) and what is seen of it; `None` for
    /// an object without a name or without both Service labels.
    pub fn of(object: &ServiceL2Status) -> Option<(Key, Self)> {
        let meta = &object.metadata;
        let labels = meta.labels.as_ref()?;
        let key = format!(
            "{}/{}",
            labels.get(LABEL_SERVICE_NAMESPACE)?,
            labels.get(LABEL_SERVICE_NAME)?
        );
        let seen = Self {
            name: meta.name.clone()?,
            version: meta.resource_version.clone().unwrap_or_default(),
            status: object.status.clone(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect(),
        };
        Some((key, seen))
    }
}

/// What the watch reports, as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// An object added or changed.
    Apply(Key, Seen),
    /// An object deleted.
    Delete(Key, Seen),
    /// A (re)list begins.
    Init,
    /// An object of the (re)list.
    InitApply(Key, Seen),
    /// The (re)list is complete: what it did not show is gone.
    InitDone,
}

/// The ServiceL2Status this node wants for a Service it announces.
#[derive(Debug, Clone, PartialEq)]
pub struct Want {
    /// The status.
    pub status: ServiceL2StatusStatus,
    /// The owner it must have (the speaker Pod, compared by uid); `None`: any owner will do
    /// (the Pod is unknown).
    pub owner: Option<OwnerReference>,
}

impl Want {
    /// Whether `seen` can be kept, its status patched if need be.
    fn keeps(&self, seen: &Seen) -> bool {
        let fixed = |have: &Option<String>, want: &Option<String>| have.is_none() || have == want;
        let immutable_ok = seen.status.as_ref().is_none_or(|s| {
            fixed(&s.node, &self.status.node)
                && fixed(&s.service_name, &self.status.service_name)
                && fixed(&s.service_namespace, &self.status.service_namespace)
        });
        let owner_ok = self
            .owner
            .as_ref()
            .is_none_or(|owner| seen.owners.contains(&owner.uid));
        immutable_ok && owner_ok
    }

    /// Whether `seen` is exactly what is wanted.
    fn done_by(&self, seen: &Seen) -> bool {
        self.keeps(seen) && seen.status.as_ref() == Some(&self.status)
    }
}

/// One write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the object (`generateName: l2-`), then patch its status to `want`.
    Create,
    /// Patch the status of object `name` to `want`.
    PatchStatus {
        /// The object.
        name: String,
    },
    /// Delete object `name`.
    Delete {
        /// The object.
        name: String,
    },
}

/// An operation to run: one step for one Service. `want` is the wish it serves (for
/// [`Step::Create`] and [`Step::PatchStatus`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// The Service.
    pub key: Key,
    /// The write.
    pub step: Step,
    /// What the object must become (none for a delete).
    pub want: Option<Want>,
}

/// What a write did to the objects, reported even when it failed half-way (a create whose
/// status patch failed leaves an object without status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The object as a write returned it.
    Wrote(Seen),
    /// The object is gone (deleted, or not found).
    Deleted(String),
}

/// How one operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What it changed, in order.
    pub effects: Vec<Effect>,
    /// Whether every request succeeded.
    pub ok: bool,
}

/// What a write should show once the watch echoes it.
#[derive(Debug)]
struct Expectation {
    /// Objects as the writes returned them, by name.
    present: BTreeMap<String, Seen>,
    /// Objects deleted.
    gone: BTreeSet<String>,
    /// Which of a key's successive expectations this is (for the TTL queue).
    serial: u64,
}

impl Expectation {
    fn is_empty(&self) -> bool {
        self.present.is_empty() && self.gone.is_empty()
    }
}

/// Per-Service backoff after failed writes.
#[derive(Debug)]
struct Backoff {
    failures: u32,
    until: Instant,
}

/// One Service's objects of this node as the watch shows them, in name order: almost
/// always one, which a `BTreeMap` would hold in a whole B-tree node (about 2 KiB per
/// Service at 5,000 Services).
#[derive(Debug, Default)]
struct Named(Vec<Seen>);

impl Named {
    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|s| s.name.as_str().cmp(name))
    }

    fn get(&self, name: &str) -> Option<&Seen> {
        self.position(name).ok().map(|i| &self.0[i])
    }

    fn contains(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Puts `seen` in, replacing the object of its name.
    fn insert(&mut self, seen: Seen) {
        match self.position(&seen.name) {
            Ok(i) => self.0[i] = seen,
            Err(i) => self.0.insert(i, seen),
        }
    }

    fn remove(&mut self, name: &str) {
        if let Ok(i) = self.position(name) {
            self.0.remove(i);
        }
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn iter(&self) -> std::slice::Iter<'_, Seen> {
        self.0.iter()
    }
}

/// The reconciler: wishes and observations in, operations out.
#[derive(Debug)]
pub struct Reconciler {
    max_in_flight: usize,
    /// The newest wish per Service: `Some` announced, `None` not (kept until nothing of it
    /// is left to delete).
    desired: HashMap<Key, Option<Want>>,
    /// This node's objects per Service, from the watch.
    observed: HashMap<Key, Named>,
    /// A relist in progress.
    relist: Option<HashMap<Key, Named>>,
    /// The first list is done: before it nothing is decided.
    ready: bool,
    expectations: HashMap<Key, Expectation>,
    /// Expectation deadlines, in order (the TTL is fixed): key and serial.
    expiries: VecDeque<(Instant, Key, u64)>,
    serial: u64,
    in_flight: HashSet<Key>,
    backoff: HashMap<Key, Backoff>,
    /// Backoff deadlines: a key is looked at again when its deadline passes.
    timers: BTreeSet<(Instant, Key)>,
    /// Services to look at, each once.
    queue: VecDeque<Key>,
    queued: HashSet<Key>,
}

impl Reconciler {
    /// A reconciler running at most `max_in_flight` operations (at least one).
    pub fn new(max_in_flight: usize) -> Self {
        Self {
            max_in_flight: max_in_flight.max(1),
            desired: HashMap::new(),
            observed: HashMap::new(),
            relist: None,
            ready: false,
            expectations: HashMap::new(),
            expiries: VecDeque::new(),
            serial: 0,
            in_flight: HashSet::new(),
            backoff: HashMap::new(),
            timers: BTreeSet::new(),
            queue: VecDeque::new(),
            queued: HashSet::new(),
        }
    }

    /// The newest wish for Service `key`: `Some` while this node announces it.
    pub fn desire(&mut self, key: Key, want: Option<Want>) {
        if self.desired.get(&key) == Some(&want) {
            return;
        }
        self.desired.insert(key.clone(), want);
        self.enqueue(key);
    }

    /// One report of the watch.
    pub fn observe(&mut self, observation: Observation) {
        match observation {
            Observation::Apply(key, seen) => {
                // Another version is an older echo (of the create before its status
                // patch, or of an object deleted since): the expectation stays.
                if let Some(e) = self.expectations.get_mut(&key)
                    && e.present
                        .get(&seen.name)
                        .is_some_and(|p| p.version == seen.version)
                {
                    e.present.remove(&seen.name);
                }
                self.settle_expectation(&key);
                self.observed.entry(key.clone()).or_default().insert(seen);
                self.enqueue(key);
            }
            Observation::Delete(key, seen) => {
                if let Some(e) = self.expectations.get_mut(&key) {
                    e.gone.remove(&seen.name);
                    // Deleted after a write of ours: the delete is newer.
                    e.present.remove(&seen.name);
                }
                self.settle_expectation(&key);
                if let Some(objects) = self.observed.get_mut(&key) {
                    objects.remove(&seen.name);
                    if objects.is_empty() {
                        self.observed.remove(&key);
                    }
                }
                self.enqueue(key);
            }
            Observation::Init => self.relist = Some(HashMap::new()),
            Observation::InitApply(key, seen) => {
                self.relist
                    .get_or_insert_with(HashMap::new)
                    .entry(key)
                    .or_default()
                    .insert(seen);
            }
            Observation::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                let old = std::mem::replace(&mut self.observed, listed);
                // A list shows every write that returned before it began; one that did not
                // show stays expected (its echo follows the list).
                let keys: Vec<Key> = self.expectations.keys().cloned().collect();
                for key in keys {
                    let objects = self.observed.get(&key);
                    if let Some(e) = self.expectations.get_mut(&key) {
                        let shown = |name: &String| objects.is_some_and(|o| o.contains(name));
                        e.present.retain(|name, _| !shown(name));
                        e.gone.retain(|name| shown(name));
                    }
                    self.settle_expectation(&key);
                }
                let touched: BTreeSet<Key> = old
                    .into_keys()
                    .chain(self.observed.keys().cloned())
                    .collect();
                for key in touched {
                    self.enqueue(key);
                }
                if !self.ready {
                    self.ready = true;
                    let wished: Vec<Key> = self.desired.keys().cloned().collect();
                    for key in wished {
                        self.enqueue(key);
                    }
                }
            }
        }
    }

    /// The next operation to run now, if any; it counts as in flight until
    /// [`Reconciler::finished`].
    pub fn next_op(&mut self, now: Instant) -> Option<Op> {
        if !self.ready {
            return None;
        }
        self.expire(now);
        while let Some((at, key)) = self.timers.first().cloned() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            self.enqueue(key);
        }
        while self.in_flight.len() < self.max_in_flight {
            let key = self.queue.pop_front()?;
            self.queued.remove(&key);
            if self.in_flight.contains(&key) {
                // Looked at again when its operation ends.
                continue;
            }
            if self.backoff.get(&key).is_some_and(|b| b.until > now) {
                // Its timer brings it back.
                continue;
            }
            match self.decide(&key) {
                Some(op) => {
                    self.in_flight.insert(key);
                    return Some(op);
                }
                None => {
                    // Settled: a past failure no longer matters.
                    self.backoff.remove(&key);
                    self.forget_if_settled(&key);
                }
            }
        }
        None
    }

    /// Operation on `key` ended.
    pub fn finished(&mut self, key: &str, outcome: Outcome, now: Instant) {
        self.in_flight.remove(key);
        let observed = self.observed.get(key);
        let mut fresh = Vec::new();
        for effect in outcome.effects {
            // A write's echo that came before its answer needs no expectation. A delete's
            // cannot be told from a create never echoed, so it is always awaited (a delete
            // of an object already gone waits out the TTL, changing nothing meanwhile).
            let echoed = match &effect {
                Effect::Wrote(s) => observed
                    .and_then(|o| o.get(&s.name))
                    .is_some_and(|o| o.version == s.version),
                Effect::Deleted(_) => false,
            };
            fresh.push((effect, echoed));
        }
        if fresh.iter().any(|(_, echoed)| !echoed) {
            self.serial += 1;
            let serial = self.serial;
            let e = self
                .expectations
                .entry(key.to_string())
                .or_insert_with(|| Expectation {
                    present: BTreeMap::new(),
                    gone: BTreeSet::new(),
                    serial,
                });
            e.serial = serial;
            for (effect, echoed) in fresh {
                match effect {
                    Effect::Wrote(s) => {
                        e.gone.remove(&s.name);
                        if echoed {
                            e.present.remove(&s.name);
                        } else {
                            e.present.insert(s.name.clone(), s);
                        }
                    }
                    Effect::Deleted(name) => {
                        e.present.remove(&name);
                        if !echoed {
                            e.gone.insert(name);
                        }
                    }
                }
            }
            self.expiries
                .push_back((now + EXPECTATION_TTL, key.to_string(), serial));
            self.settle_expectation(key);
        }
        if outcome.ok {
            self.backoff.remove(key);
            self.enqueue(key.to_string());
        } else {
            let failures = self.backoff.get(key).map_or(0, |b| b.failures) + 1;
            let until = now + retry_delay(failures);
            self.backoff
                .insert(key.to_string(), Backoff { failures, until });
            self.timers.insert((until, key.to_string()));
        }
    }

    /// When [`Reconciler::next_op`] may have something new without any input: the earliest
    /// backoff or expectation deadline.
    pub fn deadline(&self) -> Option<Instant> {
        let timer = self.timers.first().map(|(at, _)| *at);
        let expiry = self.expiries.front().map(|(at, _, _)| *at);
        match (timer, expiry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Services waiting to be looked at, now or after a backoff.
    pub fn queue_depth(&self) -> usize {
        self.queue.len() + self.timers.len()
    }

    /// Services backing off after a failure.
    pub fn backing_off(&self) -> usize {
        self.timers.len()
    }

    /// Operations in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Objects the watch shows.
    pub fn observed(&self) -> usize {
        self.observed.values().map(Named::len).sum()
    }

    /// Whether every wish is written as the watch shows it, with nothing running or waiting.
    pub fn is_settled(&self) -> bool {
        self.ready
            && self.in_flight.is_empty()
            && self.queue.is_empty()
            && self.timers.is_empty()
            && self.expectations.is_empty()
    }

    fn enqueue(&mut self, key: Key) {
        if self.queued.insert(key.clone()) {
            self.queue.push_back(key);
        }
    }

    /// Drops a key's expectation once nothing of it is awaited.
    fn settle_expectation(&mut self, key: &str) {
        if self
            .expectations
            .get(key)
            .is_some_and(Expectation::is_empty)
        {
            self.expectations.remove(key);
        }
    }

    /// Drops expectations whose echo never came: the watch alone is believed again.
    fn expire(&mut self, now: Instant) {
        while let Some((at, _, _)) = self.expiries.front() {
            if *at > now {
                break;
            }
            let Some((_, key, serial)) = self.expiries.pop_front() else {
                break;
            };
            if self
                .expectations
                .get(&key)
                .is_some_and(|e| e.serial == serial)
            {
                self.expectations.remove(&key);
                self.enqueue(key);
            }
        }
    }

    /// This node's objects for `key` as far as is known: the watch's, overlaid with what
    /// writes not yet echoed returned.
    fn view(&self, key: &str) -> BTreeMap<&str, &Seen> {
        let mut view: BTreeMap<&str, &Seen> = self
            .observed
            .get(key)
            .into_iter()
            .flat_map(Named::iter)
            .map(|seen| (seen.name.as_str(), seen))
            .collect();
        if let Some(e) = self.expectations.get(key) {
            for name in &e.gone {
                view.remove(name.as_str());
            }
            for (name, seen) in &e.present {
                view.insert(name.as_str(), seen);
            }
        }
        view
    }

    /// The one step that brings `key` closer to its wish, if any.
    fn decide(&self, key: &str) -> Option<Op> {
        let view = self.view(key);
        let op = |step: Step, want: Option<&Want>| Op {
            key: key.to_string(),
            step,
            want: want.cloned(),
        };
        let delete = |name: &str| {
            Some(op(
                Step::Delete {
                    name: name.to_string(),
                },
                None,
            ))
        };
        let Some(Some(want)) = self.desired.get(key) else {
            // Not announced (or never said): nothing of this node's may stay.
            return view.keys().next().and_then(|name| delete(name));
        };
        if let Some((name, _)) = view.iter().find(|(_, seen)| !want.keeps(seen)) {
            return delete(name);
        }
        // Of several, the one already right (else the first by name) stays.
        let keep = view
            .iter()
            .find(|(_, seen)| want.done_by(seen))
            .or_else(|| view.iter().next())
            .map(|(name, seen)| (*name, *seen));
        match keep {
            None => Some(op(Step::Create, Some(want))),
            Some((kept, _)) if view.len() > 1 => {
                let extra = view.keys().find(|name| **name != kept)?;
                delete(extra)
            }
            Some((_, seen)) if want.done_by(seen) => None,
            Some((name, _)) => Some(op(
                Step::PatchStatus {
                    name: name.to_string(),
                },
                Some(want),
            )),
        }
    }

    /// Forgets a withdrawn Service once nothing of it is left or awaited.
    fn forget_if_settled(&mut self, key: &str) {
        let withdrawn = matches!(self.desired.get(key), Some(None));
        if withdrawn
            && !self.observed.contains_key(key)
            && !self.expectations.contains_key(key)
            && !self.backoff.contains_key(key)
        {
            self.desired.remove(key);
        }
    }
}

/// The wait after `failures` failed writes in a row.
fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_MIN.saturating_mul(1 << doublings).min(RETRY_MAX)
}

#[cfg(test)]
mod tests;
