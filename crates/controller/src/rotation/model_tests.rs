//! Property tests of [`plan`](super::plan::plan) against a model of a cluster: speakers that
//! apply the Secret late, die, come back, lose the API server; MetalLB speakers; two
//! controller replicas with caches that lag, restarting at any time, writing with
//! resourceVersion preconditions. Time is in whole ticks of one second.
//!
//! The model's bounds are the real system's assumptions: a running speaker that reaches the
//! API server applies a new keyring within [`APPLY_LAG`] (longer than `settle`: a slow watch)
//! and renews its acknowledgement every tick; a starting speaker acknowledges and joins
//! within [`START_LAG`] of reading the Secret; a controller's caches are never older than [`VIEW_LAG`]; `settle` is longer
//! than the view lag. MetalLB speakers start only while no step is near (the residual race:
//! one that starts within the detection delay of a step can miss it, see docs/KUBERNETES.md).

use super::plan::{Decision, Policy, plan};
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;
use vigil_metallb::key_ack::Acknowledgement;
use vigil_metallb::secret::{KeyringForm, Phase};

const VIEW_LAG: u64 = 2;
const APPLY_LAG: u64 = 8;
const VALID_FOR: u64 = 3;
/// From reading the Secret at start to the first acknowledgement and the gossip join.
const START_LAG: u64 = 1;
const POLICY: Policy = Policy {
    period: Duration::from_secs(6),
    settle: Duration::from_secs(VIEW_LAG + 2),
    retain: Duration::from_secs(3),
};

#[derive(Debug, Clone)]
struct Held {
    installed: BTreeSet<String>,
    primary: String,
}

impl Held {
    fn of(form: &KeyringForm) -> Self {
        let ids = form.key_ids();
        Self {
            primary: ids[0].clone(),
            installed: ids.into_iter().collect(),
        }
    }
}

#[derive(Debug, Clone)]
struct Speaker {
    name: String,
    /// A MetalLB speaker: one key, read at start, no acknowledgement.
    go: bool,
    running: bool,
    api: bool,
    held: Option<Held>,
    /// The Secret version it holds, and since when a newer one exists.
    version: usize,
    behind_since: Option<u64>,
    /// Started at this tick, and neither acknowledged nor in gossip yet (the speaker reads
    /// the Secret, then writes its Lease and joins; the two are not atomic).
    starting: Option<u64>,
    lease: Option<Acknowledgement>,
}

#[derive(Debug, Clone)]
struct ControllerView {
    version: usize,
    form: KeyringForm,
    acks: Vec<Acknowledgement>,
    at: u64,
}

struct World {
    t: u64,
    form: KeyringForm,
    version: usize,
    speakers: Vec<Speaker>,
    controllers: Vec<ControllerView>,
    secrets_made: u64,
    completed: u64,
    policy: Policy,
}

impl World {
    fn new(vigil: usize, go: usize) -> Self {
        let form = KeyringForm::steady("k0".into(), 0);
        let mut speakers = Vec::new();
        for i in 0..vigil + go {
            speakers.push(Speaker {
                name: format!("node-{i}"),
                go: i >= vigil,
                running: false,
                api: true,
                held: None,
                version: 0,
                behind_since: None,
                starting: None,
                lease: None,
            });
        }
        let mut world = Self {
            t: 0,
            form: form.clone(),
            version: 0,
            speakers,
            controllers: Vec::new(),
            secrets_made: 0,
            completed: 0,
            policy: POLICY,
        };
        for i in 0..vigil {
            world.start(i);
            world.speakers[i].starting = None;
        }
        world.renew();
        for _ in 0..2 {
            let view = world.view();
            world.controllers.push(view);
        }
        world
    }

    fn now(&self) -> Duration {
        Duration::from_secs(self.t)
    }

    fn view(&self) -> ControllerView {
        ControllerView {
            version: self.version,
            form: self.form.clone(),
            acks: self
                .speakers
                .iter()
                .filter_map(|s| s.lease.clone())
                .collect(),
            at: self.t,
        }
    }

    fn members(&self) -> BTreeSet<String> {
        self.speakers
            .iter()
            .filter(|s| s.running && s.starting.is_none())
            .map(|s| s.name.clone())
            .collect()
    }

    fn renew_one(&mut self, i: usize) {
        let members = self.members();
        let now = self.now();
        let s = &mut self.speakers[i];
        if s.go || !s.running || !s.api || s.starting.is_some() {
            return;
        }
        let held = s.held.clone().expect("a running vigil speaker holds keys");
        s.lease = Some(Acknowledgement {
            node: s.name.clone(),
            renewed: now,
            valid_for: Duration::from_secs(VALID_FOR),
            installed: held.installed,
            primary: Some(held.primary),
            members: Some(members),
        });
    }

    fn renew(&mut self) {
        for i in 0..self.speakers.len() {
            self.renew_one(i);
        }
    }

    fn apply(&mut self, i: usize) {
        let (form, version) = (self.form.clone(), self.version);
        let s = &mut self.speakers[i];
        if s.go || !s.running || !s.api {
            return;
        }
        s.held = Some(Held::of(&form));
        s.version = version;
        s.behind_since = None;
        self.renew_one(i);
    }

    /// A speaker starts: it reads the Secret through the API (a vigil speaker's source
    /// waits for the API before it gossips), then acknowledges and joins within
    /// [`START_LAG`]; a MetalLB speaker reads `secretkey` alone and joins at once.
    fn start(&mut self, i: usize) {
        let t = self.t;
        let form = self.form.clone();
        let version = self.version;
        let s = &mut self.speakers[i];
        // A MetalLB speaker reads its mounted file: it starts without the API.
        if s.running || (!s.go && !s.api) {
            return;
        }
        s.running = true;
        s.version = version;
        s.behind_since = None;
        s.starting = (!s.go).then_some(t);
        s.held = Some(if s.go {
            let id = form.key_ids()[0].clone();
            Held {
                installed: [id.clone()].into(),
                primary: id,
            }
        } else {
            Held::of(&form)
        });
        self.renew();
    }

    /// A starting speaker's Lease is written and it joins gossip.
    fn joined(&mut self, i: usize) {
        self.speakers[i].starting = None;
        self.renew();
    }

    fn stop(&mut self, i: usize) {
        let s = &mut self.speakers[i];
        s.running = false;
        s.held = None;
        self.renew();
    }

    fn act(&mut self, c: usize) {
        let view = self.controllers[c].clone();
        self.secrets_made += 1;
        let fresh = format!("k{}", self.secrets_made);
        if let Decision::Write(next) =
            plan(&view.form, &view.acks, self.now(), &self.policy, || fresh)
        {
            // The update carries the resourceVersion of the view: stale views conflict.
            if view.version != self.version {
                return;
            }
            if next.phase == Phase::Steady && self.form.phase == Phase::Switching {
                self.completed += 1;
            }
            self.form = next;
            self.version += 1;
            let t = self.t;
            for s in &mut self.speakers {
                if s.running && !s.go && s.behind_since.is_none() {
                    s.behind_since = Some(t);
                }
            }
            // The writer's own cache sees its write.
            self.controllers[c] = ControllerView {
                acks: view.acks,
                ..self.view()
            };
        }
    }

    /// One second passes; the model's bounds are enforced.
    fn tick(&mut self) {
        self.t += 1;
        for i in 0..self.speakers.len() {
            if self.speakers[i]
                .starting
                .is_some_and(|at| self.t - at >= START_LAG)
            {
                self.speakers[i].starting = None;
            }
        }
        for i in 0..self.speakers.len() {
            let s = &self.speakers[i];
            if s.running && s.api && !s.go && s.version != self.version {
                let late = s.behind_since.is_some_and(|b| self.t - b >= APPLY_LAG);
                if late {
                    self.apply(i);
                }
            }
        }
        self.renew();
        for c in 0..self.controllers.len() {
            if self.t - self.controllers[c].at >= VIEW_LAG {
                self.controllers[c] = self.view();
            }
        }
    }

    fn can_talk(a: &Held, b: &Held) -> bool {
        b.installed.contains(&a.primary) && a.installed.contains(&b.primary)
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let held: Vec<(&str, &Held)> = self
            .speakers
            .iter()
            .filter(|s| s.running)
            .filter_map(|s| s.held.as_ref().map(|h| (s.name.as_str(), h)))
            .collect();
        for (i, (a, ha)) in held.iter().enumerate() {
            for (b, hb) in &held[i + 1..] {
                prop_assert!(
                    Self::can_talk(ha, hb),
                    "t={} {a} {ha:?} and {b} {hb:?} cannot talk; Secret {:?}",
                    self.t,
                    self.form
                );
            }
        }
        Ok(())
    }

    /// Whether a MetalLB speaker may start now without racing a step (see the module doc).
    fn quiet(&self) -> bool {
        self.form.phase == Phase::Steady
            && self.t + VIEW_LAG + 2 < self.form.since + self.policy.period.as_secs()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Tick,
    Apply(usize),
    Stop(usize),
    Start(usize),
    Joined(usize),
    CutApi(usize),
    RestoreApi(usize),
    Refresh(usize),
    Act(usize),
    /// A controller restarts: a fresh cache, and it acts at once.
    Restart(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => Just(Op::Tick),
        3 => (0..6usize).prop_map(Op::Apply),
        1 => (0..6usize).prop_map(Op::Stop),
        2 => (0..6usize).prop_map(Op::Start),
        2 => (0..6usize).prop_map(Op::Joined),
        1 => (0..6usize).prop_map(Op::CutApi),
        2 => (0..6usize).prop_map(Op::RestoreApi),
        2 => (0..2usize).prop_map(Op::Refresh),
        4 => (0..2usize).prop_map(Op::Act),
        1 => (0..2usize).prop_map(Op::Restart),
    ]
}

fn run_ops(world: &mut World, ops: &[Op]) -> Result<(), TestCaseError> {
    for op in ops {
        let n = world.speakers.len();
        match *op {
            Op::Tick => world.tick(),
            Op::Apply(i) => world.apply(i % n),
            Op::Stop(i) => world.stop(i % n),
            Op::Start(i) => {
                let i = i % n;
                if !world.speakers[i].go || world.quiet() {
                    world.start(i);
                }
            }
            Op::Joined(i) => world.joined(i % n),
            Op::CutApi(i) => {
                let i = i % n;
                world.speakers[i].api = false;
            }
            Op::RestoreApi(i) => {
                let i = i % n;
                world.speakers[i].api = true;
                world.apply(i);
            }
            Op::Refresh(c) => world.controllers[c] = world.view(),
            Op::Act(c) => world.act(c),
            Op::Restart(c) => {
                world.controllers[c] = world.view();
                world.act(c);
            }
        }
        world.check()?;
    }
    Ok(())
}

/// Everyone cooperates: MetalLB speakers gone, every vigil speaker running with the API,
/// applying at once, both controllers acting every tick.
fn cooperate(world: &mut World, ticks: u64) -> Result<(), TestCaseError> {
    for i in 0..world.speakers.len() {
        if world.speakers[i].go {
            world.stop(i);
        } else {
            world.speakers[i].api = true;
            world.start(i);
            world.joined(i);
            world.apply(i);
        }
    }
    for _ in 0..ticks {
        world.tick();
        for i in 0..world.speakers.len() {
            world.apply(i);
        }
        for c in 0..world.controllers.len() {
            world.act(c);
        }
        world.check()?;
    }
    Ok(())
}

/// Long enough for one rotation from any point, with every wait at its longest.
const COOPERATIVE_TICKS: u64 = 6 + 4 * (4 + VALID_FOR + APPLY_LAG + VIEW_LAG) + 3 + 20;

/// The race `settle` covers, played out: a speaker reads the Secret at start, and before its
/// acknowledgement exists the controller writes two steps. Without settle the two keyrings
/// cannot talk; with it the second step waits.
#[test]
fn settle_covers_a_speaker_that_starts_between_two_steps() {
    for (settle, safe) in [(POLICY.settle, true), (Duration::ZERO, false)] {
        let mut world = World::new(3, 0);
        world.policy.settle = settle;
        world.stop(2);
        while world.t < POLICY.period.as_secs() {
            world.tick();
        }
        // node-2 starts: it reads steady [k0]; its Lease is not written yet.
        world.start(2);
        world.controllers[0] = world.view();
        world.act(0);
        assert_eq!(world.form.phase, Phase::Adding);
        world.apply(0);
        world.apply(1);
        world.controllers[0] = world.view();
        world.act(0);
        world.apply(0);
        assert_eq!(
            world.check().is_ok(),
            safe,
            "settle {settle:?}: {:?}",
            world.form
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn live_speakers_can_always_talk_and_rotation_completes(
        vigil in 1usize..=5,
        go in 0usize..=1,
        ops in proptest::collection::vec(op(), 0..300),
    ) {
        let mut world = World::new(vigil, go);
        run_ops(&mut world, &ops)?;
        let before = world.completed;
        cooperate(&mut world, COOPERATIVE_TICKS)?;
        prop_assert!(
            world.completed > before,
            "no rotation completed in {COOPERATIVE_TICKS} cooperative ticks; Secret {:?}",
            world.form
        );
    }

    #[test]
    fn a_metallb_speaker_holds_rotation(
        vigil in 1usize..=4,
        ops in proptest::collection::vec(op(), 0..100),
    ) {
        let mut world = World::new(vigil, 1);
        run_ops(&mut world, &ops)?;
        // Bring the cluster to steady with everyone cooperating, then start the MetalLB
        // speaker in a quiet moment: no key may change while it runs.
        cooperate(&mut world, COOPERATIVE_TICKS)?;
        for _ in 0..10 * COOPERATIVE_TICKS {
            if world.quiet() {
                break;
            }
            world.tick();
            for c in 0..2 { world.act(c); }
        }
        prop_assert!(world.quiet());
        let go = world.speakers.len() - 1;
        world.start(go);
        let version = world.version;
        for _ in 0..COOPERATIVE_TICKS {
            world.tick();
            for i in 0..go { world.apply(i); }
            for c in 0..2 { world.act(c); }
            world.check()?;
        }
        prop_assert_eq!(world.version, version, "the keyring changed beside a MetalLB speaker");
    }
}
