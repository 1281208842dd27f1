//! The speaker without memberlist, as MetalLB's runs when `--ml-labels` or `--ml-bindaddr` is
//! unset: no failure detection, and every Node the translation finds eligible (its Node object
//! exists, is not NetworkUnavailable, not excluded, matched by an advertisement, hosts an
//! endpoint when the policy is Local) counts as a live speaker. MetalLB assumes a speaker Pod
//! runs on every node then (`speakersForAds` with the speaker list disabled).
//!
//! vigil's speaker core elects among live gossip members. Here the gossip node runs alone on
//! loopback (no peers, nothing sent on the network), so the one live member is this node; the
//! election over all eligible nodes is done before the core sees a Service: each Service's
//! candidate set is cut to the node MetalLB would elect (the preference score, then the
//! SHA-256 order keyed by the Service's first IP, per Service as MetalLB does). The core then
//! takes the IP exactly when that node is this one. A node that fails keeps "owning" its IPs
//! until its Node object changes, as in MetalLB without memberlist.

use futures_util::{Stream, StreamExt};
use std::collections::BTreeSet;
use std::sync::Arc;
use vigil_lb::{NodeMeta, NodeView, Policy};
use vigil_speaker::model::{DesiredState, DesiredUpdate, ServiceSpec};

/// The owner MetalLB's speakers elect for `service` when every eligible node runs a speaker:
/// `Some(set)` becomes `Some({owner})` (or empty when no node is eligible); `None` (any node)
/// is left alone.
pub fn elect_among_nodes(service: &mut ServiceSpec) {
    let Some(eligible) = &service.nodes else {
        return;
    };
    if service.vips.is_empty() {
        return;
    }
    let nodes: Vec<NodeView> = eligible
        .iter()
        .map(|n| NodeView::live(n.clone(), NodeMeta::default()))
        .collect();
    let policy = Policy {
        per_service: true,
        ..Policy::default()
    };
    let owner = vigil_lb::elect(&[service.to_lb()], &nodes, &policy)
        .first()
        .and_then(|g| g.owner().map(str::to_string));
    service.nodes = Some(Arc::new(owner.into_iter().collect::<BTreeSet<_>>()));
}

/// [`elect_among_nodes`] for every Service of a snapshot.
pub fn whole(mut desired: DesiredState) -> DesiredState {
    desired.services.iter_mut().for_each(elect_among_nodes);
    desired
}

/// [`elect_among_nodes`] for every Service of an update.
pub fn update(update: DesiredUpdate) -> DesiredUpdate {
    match update {
        DesiredUpdate::Whole(desired) => DesiredUpdate::Whole(whole(desired)),
        DesiredUpdate::Changes(mut changes) => {
            changes.upserts.iter_mut().for_each(elect_among_nodes);
            DesiredUpdate::Changes(changes)
        }
    }
}

/// The source's stream of updates, each elected as above.
pub fn updates<S>(desired: S) -> impl Stream<Item = DesiredUpdate> + Unpin
where
    S: Stream + Unpin,
    S::Item: Into<DesiredUpdate>,
{
    desired.map(|u| update(u.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn service(vip: &str, nodes: &[&str]) -> ServiceSpec {
        let vip: IpAddr = vip.parse().unwrap();
        ServiceSpec {
            nodes: Some(Arc::new(nodes.iter().map(|n| n.to_string()).collect())),
            ..ServiceSpec::new("ns/svc", [vip])
        }
    }

    #[test]
    fn the_hash_order_picks_one_node_per_service() {
        let nodes = ["node-a", "node-b", "node-c"];
        let mut owners = BTreeSet::new();
        for i in 1..=30 {
            let vip = format!("198.18.0.{i}");
            let mut s = service(&vip, &nodes);
            elect_among_nodes(&mut s);
            let picked = s.nodes.unwrap();
            assert_eq!(picked.len(), 1);
            let expected = vigil_lb::rank(nodes, vip.parse().unwrap())[0];
            assert!(picked.contains(expected), "{vip}");
            owners.extend(picked.iter().cloned());
        }
        assert_eq!(owners.len(), 3, "30 IPs spread over all three nodes");
    }

    #[test]
    fn preferences_and_empty_sets() {
        let mut s = service("198.18.0.1", &["node-a", "node-b"]);
        let last = vigil_lb::rank(["node-a", "node-b"], "198.18.0.1".parse().unwrap())[1];
        s.preferences.insert(last.to_string(), 10);
        elect_among_nodes(&mut s);
        assert_eq!(
            s.nodes.as_deref(),
            Some(&BTreeSet::from([last.to_string()]))
        );
        let mut none = service("198.18.0.1", &[]);
        elect_among_nodes(&mut none);
        assert_eq!(none.nodes.as_deref(), Some(&BTreeSet::new()));
        let mut any = ServiceSpec::new("x", ["198.18.0.1".parse().unwrap()]);
        elect_among_nodes(&mut any);
        assert_eq!(any.nodes, None);
    }
}
