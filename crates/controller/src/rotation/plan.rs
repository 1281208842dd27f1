//! The rotation state machine, pure: what the Secret's keyring should become next, given the
//! keyring now, the speakers' acknowledgements and the time. No state of its own: a
//! controller that restarts calls [`plan`] with what it reads and carries on where the Secret
//! says the rotation stands.
//!
//! A rotation, from `steady [K0]`:
//!
//! 1. `adding [K0, K1]`: every speaker installs K1 and still sends with K0;
//! 2. once every live speaker acknowledges both installed, `switching [K1, K0]`: K1 becomes
//!    primary (and `secretkey`), K0 is still accepted;
//! 3. once every live speaker acknowledges K1 as primary, and K0 has been kept `retain`
//!    since the switch, `steady [K1]`.
//!
//! Why no two live speakers ever hold keyrings that cannot talk (each one's primary is
//! installed at the other): a speaker holds the keyring of some version `v` of the Secret,
//! and any two neighbouring versions are compatible (`[K0]`/`[K0,K1]`, `[K0,K1]`/`[K1,K0]`,
//! `[K1,K0]`/`[K1]`). The controller writes version `v+2` only when every live speaker has
//! acknowledged `v+1`, and at least `settle` after writing `v+1`, so a speaker that started
//! in between (reading `v`) has had time to show up in the acknowledgements it waits for.
//! A gossip member that acknowledges nothing (a MetalLB speaker: one key, read at start) or
//! whose acknowledgement went stale while others still see it (a speaker cut off from the
//! API server, still gossiping) pauses the rotation: it cannot be known to follow.
//!
//! Live speakers are those whose acknowledgement is fresh: renewed within the validity it
//! states (its Lease's `leaseDurationSeconds`), by the controller's clock.

use std::collections::BTreeSet;
use std::time::Duration;
use vigil_metallb::key_ack::Acknowledgement;
use vigil_metallb::secret::{KeyringForm, Phase, key_id};

/// The timing of rotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// From one completed rotation to the start of the next.
    pub period: Duration,
    /// The least time from one step to the next (covers the delay between a speaker
    /// reading the Secret and the controller seeing its acknowledgement).
    pub settle: Duration,
    /// How long the old key stays after the switch at least (a speaker that reads a lagging
    /// copy of the Secret, such as a mounted file, still finds the key everyone uses).
    pub retain: Duration,
}

/// The step a rotation is at, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Waiting for the next rotation.
    Steady,
    /// The new key is being installed.
    Adding,
    /// The new key is primary; the old one is still accepted.
    Switching,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Self; 3] = [Self::Steady, Self::Adding, Self::Switching];

    /// The word in metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Adding => "adding",
            Self::Switching => "switching",
        }
    }

    fn of(phase: Phase) -> Self {
        match phase {
            Phase::Steady => Self::Steady,
            Phase::Adding => Self::Adding,
            Phase::Switching => Self::Switching,
        }
    }
}

/// Why the rotation cannot go on at all.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseReason {
    /// Gossip members with no acknowledgement at all: MetalLB speakers (or vigil speakers
    /// that have not written one yet).
    GoSpeaker(BTreeSet<String>),
    /// Gossip members whose acknowledgement is stale (cut off from the API server).
    StaleAcknowledgement(BTreeSet<String>),
    /// No live vigil speaker: nobody could follow (and MetalLB speakers may be all there is).
    NoLiveSpeakers,
}

impl PauseReason {
    /// The label in `vigil_controller_key_rotation_paused{reason}`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::GoSpeaker(_) => "metallb_speaker",
            Self::StaleAcknowledgement(_) => "stale_acknowledgement",
            Self::NoLiveSpeakers => "no_live_speakers",
        }
    }

    /// Every label, for a metric that shows each reason.
    pub const LABELS: [&'static str; 3] = [
        "metallb_speaker",
        "stale_acknowledgement",
        "no_live_speakers",
    ];
}

impl std::fmt::Display for PauseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        match self {
            Self::GoSpeaker(m) => write!(
                f,
                "gossip members without a vigil key acknowledgement (MetalLB speakers read one key at start): {}",
                list(m)
            ),
            Self::StaleAcknowledgement(m) => write!(
                f,
                "gossip members whose key acknowledgement is stale (cut off from the API server?): {}",
                list(m)
            ),
            Self::NoLiveSpeakers => write!(f, "no live vigil speaker acknowledges keys"),
        }
    }
}

/// What the step waits for, when nothing is to be written yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The next rotation is due at this time.
    Due(Duration),
    /// The last step is younger than `settle`; look again at this time.
    Settling(Duration),
    /// These live speakers have not acknowledged what the step needs.
    Speakers(BTreeSet<String>),
    /// The old key is kept until this time.
    Retaining(Duration),
}

/// What to do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Write this keyring (its primary into `secretkey` too) in one update.
    Write(KeyringForm),
    /// Nothing to write yet.
    Wait(Waiting),
    /// The rotation cannot go on.
    Paused(PauseReason),
}

/// Whether `ack` counts as a live speaker at `now` (time since the Unix epoch).
pub fn is_live(ack: &Acknowledgement, now: Duration) -> bool {
    ack.renewed + ack.valid_for > now
}

/// The step `form` is at.
pub fn step(form: &KeyringForm) -> Step {
    Step::of(form.phase)
}

/// Decides the next move. `now` is the time since the Unix epoch; `new_secret` makes a fresh
/// random secret (called only when a rotation starts).
pub fn plan(
    form: &KeyringForm,
    acks: &[Acknowledgement],
    now: Duration,
    policy: &Policy,
    new_secret: impl FnOnce() -> String,
) -> Decision {
    let since = Duration::from_secs(form.since);
    let live: Vec<&Acknowledgement> = acks.iter().filter(|a| is_live(a, now)).collect();
    if form.phase == Phase::Steady && now < since + policy.period {
        return Decision::Wait(Waiting::Due(since + policy.period));
    }
    if let Some(reason) = pause_reason(acks, &live) {
        return Decision::Paused(reason);
    }
    if now < since + policy.settle {
        return Decision::Wait(Waiting::Settling(since + policy.settle));
    }
    let ids = form.key_ids();
    let at = now.as_secs();
    match form.phase {
        Phase::Steady => Decision::Write(KeyringForm {
            phase: Phase::Adding,
            keys: vec![form.keys[0].clone(), new_secret()],
            since: at,
            ..form.clone()
        }),
        Phase::Adding => {
            let missing = lagging(&live, |a| ids.iter().all(|id| a.installed.contains(id)));
            if !missing.is_empty() {
                return Decision::Wait(Waiting::Speakers(missing));
            }
            Decision::Write(KeyringForm {
                phase: Phase::Switching,
                keys: vec![form.keys[1].clone(), form.keys[0].clone()],
                since: at,
                ..form.clone()
            })
        }
        Phase::Switching => {
            let missing = lagging(&live, |a| {
                a.primary.as_deref() == Some(ids[0].as_str()) && a.installed.contains(&ids[0])
            });
            if !missing.is_empty() {
                return Decision::Wait(Waiting::Speakers(missing));
            }
            if now < since + policy.retain {
                return Decision::Wait(Waiting::Retaining(since + policy.retain));
            }
            Decision::Write(KeyringForm::steady(form.keys[0].clone(), at))
        }
    }
}

/// The keyring a Secret stands for: its valid keyring entry, else one steady key from
/// `secretkey` dated `created` (a Secret MetalLB's or vigil's controller made: its first
/// rotation is one period after its creation). `None`: no usable key at all.
pub fn current_form(
    entry: Option<&[u8]>,
    secret_key: Option<&[u8]>,
    created: u64,
) -> Option<KeyringForm> {
    if let Some(entry) = entry
        && let Ok(form) = KeyringForm::parse(entry, secret_key)
    {
        return Some(form);
    }
    let secret = std::str::from_utf8(secret_key?).ok()?;
    (!secret.is_empty()).then(|| KeyringForm::steady(secret.to_string(), created))
}

/// The id every acknowledgement should name as primary for `form`.
pub fn primary_id(form: &KeyringForm) -> String {
    key_id(form.primary().as_bytes())
}

fn lagging(live: &[&Acknowledgement], done: impl Fn(&Acknowledgement) -> bool) -> BTreeSet<String> {
    live.iter()
        .filter(|a| !done(a))
        .map(|a| a.node.clone())
        .collect()
}

fn pause_reason(all: &[Acknowledgement], live: &[&Acknowledgement]) -> Option<PauseReason> {
    if live.is_empty() {
        return Some(PauseReason::NoLiveSpeakers);
    }
    let seen: BTreeSet<&String> = live
        .iter()
        .filter_map(|a| a.members.as_ref())
        .flatten()
        .collect();
    let known: BTreeSet<&String> = all.iter().map(|a| &a.node).collect();
    let live_nodes: BTreeSet<&String> = live.iter().map(|a| &a.node).collect();
    let unknown: BTreeSet<String> = seen
        .iter()
        .filter(|m| !known.contains(*m))
        .map(|m| (*m).clone())
        .collect();
    if !unknown.is_empty() {
        return Some(PauseReason::GoSpeaker(unknown));
    }
    let stale: BTreeSet<String> = seen
        .iter()
        .filter(|m| !live_nodes.contains(*m))
        .map(|m| (*m).clone())
        .collect();
    (!stale.is_empty()).then_some(PauseReason::StaleAcknowledgement(stale))
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        period: Duration::from_secs(100),
        settle: Duration::from_secs(2),
        retain: Duration::from_secs(10),
    };

    fn ack(node: &str, form: &KeyringForm, renewed: u64, members: &[&str]) -> Acknowledgement {
        Acknowledgement {
            node: node.into(),
            renewed: Duration::from_secs(renewed),
            valid_for: Duration::from_secs(15),
            installed: form.key_ids().into_iter().collect(),
            primary: Some(primary_id(form)),
            members: Some(members.iter().map(|m| m.to_string()).collect()),
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn one_rotation_step_by_step() {
        let k0 = KeyringForm::steady("k0".into(), 1000);
        let members = ["a", "b"];
        let acks =
            |form: &KeyringForm, t| vec![ack("a", form, t, &members), ack("b", form, t, &members)];
        // Not due yet.
        assert_eq!(
            plan(
                &k0,
                &acks(&k0, 1050),
                secs(1050),
                &POLICY,
                || unreachable!()
            ),
            Decision::Wait(Waiting::Due(secs(1100)))
        );
        let Decision::Write(adding) =
            plan(&k0, &acks(&k0, 1100), secs(1100), &POLICY, || "k1".into())
        else {
            panic!("rotation starts when due")
        };
        assert_eq!(
            (adding.phase, adding.keys.clone(), adding.since),
            (Phase::Adding, vec!["k0".into(), "k1".into()], 1100)
        );
        // Too soon after the write, then waiting for b.
        assert_eq!(
            plan(
                &adding,
                &acks(&k0, 1101),
                secs(1101),
                &POLICY,
                || unreachable!()
            ),
            Decision::Wait(Waiting::Settling(secs(1102)))
        );
        let mixed = vec![
            ack("a", &adding, 1103, &members),
            ack("b", &k0, 1103, &members),
        ];
        assert_eq!(
            plan(&adding, &mixed, secs(1103), &POLICY, || unreachable!()),
            Decision::Wait(Waiting::Speakers(["b".to_string()].into()))
        );
        let Decision::Write(switching) = plan(
            &adding,
            &acks(&adding, 1104),
            secs(1104),
            &POLICY,
            || unreachable!(),
        ) else {
            panic!("switch once all installed")
        };
        assert_eq!(switching.keys, ["k1", "k0"]);
        // Everyone uses k1, but k0 is retained 10 s after the switch.
        assert_eq!(
            plan(
                &switching,
                &acks(&switching, 1107),
                secs(1107),
                &POLICY,
                || unreachable!()
            ),
            Decision::Wait(Waiting::Retaining(secs(1114)))
        );
        assert_eq!(
            plan(
                &switching,
                &acks(&switching, 1114),
                secs(1114),
                &POLICY,
                || unreachable!()
            ),
            Decision::Write(KeyringForm::steady("k1".into(), 1114))
        );
    }

    #[test]
    fn pauses_name_their_reason() {
        let k0 = KeyringForm::steady("k0".into(), 0);
        let now = secs(1000);
        assert_eq!(
            plan(&k0, &[], now, &POLICY, || "k1".into()),
            Decision::Paused(PauseReason::NoLiveSpeakers)
        );
        // A member nobody acknowledges for: a MetalLB speaker.
        let acks = vec![ack("a", &k0, 1000, &["a", "metallb-0"])];
        assert_eq!(
            plan(&k0, &acks, now, &POLICY, || "k1".into()),
            Decision::Paused(PauseReason::GoSpeaker(["metallb-0".to_string()].into()))
        );
        // b's acknowledgement went stale while a still sees it in gossip.
        let acks = vec![
            ack("a", &k0, 1000, &["a", "b"]),
            ack("b", &k0, 900, &["a", "b"]),
        ];
        assert_eq!(
            plan(&k0, &acks, now, &POLICY, || "k1".into()),
            Decision::Paused(PauseReason::StaleAcknowledgement(["b".to_string()].into()))
        );
        // A stale speaker nobody sees any more (stopped) is simply not live.
        let acks = vec![ack("a", &k0, 1000, &["a"]), ack("b", &k0, 900, &["a", "b"])];
        assert!(matches!(
            plan(&k0, &acks, now, &POLICY, || "k1".into()),
            Decision::Write(_)
        ));
    }

    #[test]
    fn a_secret_without_a_keyring_is_steady_on_its_secretkey() {
        assert_eq!(
            current_form(None, Some(b"abc"), 7),
            Some(KeyringForm::steady("abc".into(), 7))
        );
        assert_eq!(
            current_form(Some(b"garbage"), Some(b"abc"), 7),
            Some(KeyringForm::steady("abc".into(), 7))
        );
        assert_eq!(current_form(None, Some(b""), 7), None);
        let adding = KeyringForm {
            phase: Phase::Adding,
            keys: vec!["abc".into(), "def".into()],
            ..KeyringForm::steady(String::new(), 9)
        };
        assert_eq!(
            current_form(Some(adding.to_json().as_bytes()), Some(b"abc"), 7),
            Some(adding)
        );
    }
}
