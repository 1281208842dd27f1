//! Speakers' key acknowledgements: one `coordination.k8s.io/v1` Lease per node,
//! `vigil-keyring-<node>` in the speaker's namespace, which `vigil controller` reads to
//! advance a key rotation (`vigil_controller::rotation`).
//!
//! The Lease says (never any key material, only [`key_id`](crate::secret::key_id)s):
//! - `holderIdentity`: the node; `renewTime`: the heartbeat, renewed every interval;
//!   `leaseDurationSeconds`: how long the acknowledgement counts without renewal (the
//!   controller treats a speaker as live while `renewTime + leaseDurationSeconds` is ahead);
//! - [`INSTALLED`]: the ids of the keys installed in this speaker's gossip, comma-separated;
//! - [`PRIMARY`]: the id of the key it sends with;
//! - [`MEMBERS`]: the gossip members it sees alive (or suspect), comma-separated, so the
//!   controller finds members that acknowledge nothing: MetalLB speakers.
//!
//! This is the pure half ([`Acknowledgement`], [`lease`], [`from_lease`]), tested without an
//! API server; `vigil_k8s::key_ack::AckWriter` writes the Lease (server-side apply: the
//! speaker needs leases get/create/update/patch in its namespace).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The Lease name's prefix; the node name follows.
pub const LEASE_PREFIX: &str = "vigil-keyring-";
/// Annotation: ids of the installed keys, comma-separated.
pub const INSTALLED: &str = "vigil.io/keyring-installed";
/// Annotation: id of the primary key.
pub const PRIMARY: &str = "vigil.io/keyring-primary";
/// Annotation: live gossip members seen, comma-separated.
pub const MEMBERS: &str = "vigil.io/memberlist-members";
/// Label on every acknowledgement Lease (the controller lists by it).
pub const LABEL: (&str, &str) = ("app.kubernetes.io/component", "vigil-keyring-ack");
/// The field manager of the speaker's writes.
pub const FIELD_MANAGER: &str = "vigil-speaker-keyring";

/// The Lease of `node`.
pub fn lease_name(node: &str) -> String {
    format!("{LEASE_PREFIX}{node}")
}

/// One speaker's acknowledgement, as the controller reads it (times since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement {
    /// The node.
    pub node: String,
    /// When it was last renewed.
    pub renewed: Duration,
    /// How long it counts without renewal.
    pub valid_for: Duration,
    /// Ids of the installed keys.
    pub installed: BTreeSet<String>,
    /// Id of the key it sends with (`None`: no encryption).
    pub primary: Option<String>,
    /// Live gossip members it sees (`None`: not reported).
    pub members: Option<BTreeSet<String>>,
}

/// What a speaker reports (the Lease's content without the times).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Ids of the installed keys, primary first.
    pub installed: Vec<String>,
    /// Live gossip members seen; `None` until the first view.
    pub members: Option<BTreeSet<String>>,
}

fn joined<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    items
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

fn split(text: &str) -> BTreeSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The Lease for `report` of `node`, renewed at `now` (server-side apply body).
pub fn lease(
    namespace: &str,
    node: &str,
    report: &Report,
    valid_for: Duration,
    now: k8s_openapi::jiff::Timestamp,
) -> Lease {
    let mut annotations = BTreeMap::from([(INSTALLED.to_string(), joined(&report.installed))]);
    if let Some(primary) = report.installed.first() {
        annotations.insert(PRIMARY.to_string(), primary.clone());
    }
    if let Some(members) = &report.members {
        annotations.insert(MEMBERS.to_string(), joined(members));
    }
    Lease {
        metadata: ObjectMeta {
            name: Some(lease_name(node)),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(LABEL.0.into(), LABEL.1.into())])),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(
                i32::try_from(valid_for.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// Reads an acknowledgement Lease; `None` for a Lease that is not one (wrong name, no
/// holder, no renewal time), which the controller ignores.
pub fn from_lease(lease: &Lease) -> Option<Acknowledgement> {
    let name = lease.metadata.name.as_deref()?;
    let node = name.strip_prefix(LEASE_PREFIX)?;
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(node) {
        return None;
    }
    let renewed = u64::try_from(spec.renew_time.as_ref()?.0.as_microsecond()).ok()?;
    let valid_for = u64::try_from(spec.lease_duration_seconds?).ok()?;
    let annotations = lease.metadata.annotations.clone().unwrap_or_default();
    Some(Acknowledgement {
        node: node.to_string(),
        renewed: Duration::from_micros(renewed),
        valid_for: Duration::from_secs(valid_for),
        installed: annotations
            .get(INSTALLED)
            .map(|s| split(s))
            .unwrap_or_default(),
        primary: annotations.get(PRIMARY).filter(|s| !s.is_empty()).cloned(),
        members: annotations.get(MEMBERS).map(|s| split(s)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_round_trips_and_carries_no_key() {
        let report = Report {
            installed: vec!["aaaaaaaaaaaa".into(), "bbbbbbbbbbbb".into()],
            members: Some(["node-a".to_string(), "node-b".to_string()].into()),
        };
        let now = k8s_openapi::jiff::Timestamp::from_second(1_796_173_200).unwrap();
        let lease = lease(
            "metallb-system",
            "node-a",
            &report,
            Duration::from_secs(15),
            now,
        );
        assert_eq!(lease.metadata.name.as_deref(), Some("vigil-keyring-node-a"));
        let ack = from_lease(&lease).unwrap();
        assert_eq!(ack.node, "node-a");
        assert_eq!(ack.renewed, Duration::from_secs(1_796_173_200));
        assert_eq!(ack.valid_for, Duration::from_secs(15));
        assert_eq!(ack.primary.as_deref(), Some("aaaaaaaaaaaa"));
        assert_eq!(ack.installed.len(), 2);
        assert_eq!(ack.members, report.members);
        // Another holder, or another Lease, is not an acknowledgement.
        let mut other = lease.clone();
        other.spec.as_mut().unwrap().holder_identity = Some("node-b".into());
        assert_eq!(from_lease(&other), None);
        let mut other = lease;
        other.metadata.name = Some("vigil-controller".into());
        assert_eq!(from_lease(&other), None);
        // Nothing reported yet: no primary, members unknown.
        let empty = super::lease("ns", "n", &Report::default(), Duration::from_secs(3), now);
        let ack = from_lease(&empty).unwrap();
        assert_eq!((ack.primary, ack.members), (None, None));
    }
}
