//! The webhooks' verdicts, pure: what MetalLB v0.16.2's webhooks decide for each kind
//! (`internal/k8s/webhooks/**`), given the object under review and the objects of the MetalLB
//! namespace as the API server lists them.
//!
//! - IPAddressPool and L2Advertisement: a create outside the MetalLB namespace is refused
//!   (`resource must be created in <ns> namespace`); otherwise the configuration that would
//!   result (the listed objects with the reviewed one in place of its namesake, or last) is
//!   read by the one configuration reader, [`vigil_metallb::config`], and its error, in
//!   MetalLB's words, is the refusal. An L2Advertisement is read together with the listed
//!   pools (and no Nodes, as MetalLB's webhook passes none). Deletes are allowed.
//! - BGPPeer, BGPAdvertisement, Community, BFDProfile (BGP, which vigil does not run): a create
//!   outside the namespace is refused; a BFDProfile that a BGPPeer names cannot be deleted
//!   (MetalLB's message). Their BGP settings are not checked (never blocking).

use vigil_metallb::config::{Config, read_pools_in_order};
use vigil_metallb::crd::{IPAddressPool, L2Advertisement};

/// The kinds MetalLB's ValidatingWebhookConfiguration sends, by path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `metallb.io/v1beta1` IPAddressPool.
    IpAddressPool,
    /// `metallb.io/v1beta1` L2Advertisement.
    L2Advertisement,
    /// `metallb.io/v1beta2` BGPPeer.
    BgpPeer,
    /// `metallb.io/v1beta1` BGPAdvertisement.
    BgpAdvertisement,
    /// `metallb.io/v1beta1` Community.
    Community,
    /// `metallb.io/v1beta1` BFDProfile.
    BfdProfile,
}

impl Kind {
    /// Every kind with its path (MetalLB's).
    pub const PATHS: [(&'static str, Self); 6] = [
        (
            "/validate-metallb-io-v1beta1-ipaddresspool",
            Self::IpAddressPool,
        ),
        (
            "/validate-metallb-io-v1beta1-l2advertisement",
            Self::L2Advertisement,
        ),
        ("/validate-metallb-io-v1beta2-bgppeer", Self::BgpPeer),
        (
            "/validate-metallb-io-v1beta1-bgpadvertisement",
            Self::BgpAdvertisement,
        ),
        ("/validate-metallb-io-v1beta1-community", Self::Community),
        ("/validate-metallb-io-v1beta1-bfdprofile", Self::BfdProfile),
    ];

    /// The kind served at `path`.
    pub fn at(path: &str) -> Option<Self> {
        Self::PATHS
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, k)| *k)
    }
}

/// The operation under review (the ones MetalLB's webhooks act on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
    /// CONNECT or anything else: allowed.
    Other,
}

/// MetalLB's refusal of a create outside its namespace.
pub fn namespace_refusal(
    op: Op,
    object_namespace: &str,
    metallb_namespace: &str,
) -> Option<String> {
    (op == Op::Create && object_namespace != metallb_namespace)
        .then(|| format!("resource must be created in {metallb_namespace} namespace"))
}

/// `listed` with `reviewed` in place of the object of the same name, or last.
fn with_reviewed<'a, T>(
    listed: &'a [T],
    reviewed: &'a T,
    name: impl Fn(&T) -> Option<&str>,
) -> Vec<&'a T> {
    let mut all: Vec<&T> = listed.iter().collect();
    match all.iter().position(|o| name(o) == name(reviewed)) {
        Some(i) => all[i] = reviewed,
        None => all.push(reviewed),
    }
    all
}

/// The verdict on an IPAddressPool create or update: `Err` is MetalLB's message.
pub fn pool(
    op: Op,
    reviewed: &IPAddressPool,
    listed: &[IPAddressPool],
    metallb_namespace: &str,
) -> Result<(), String> {
    if !matches!(op, Op::Create | Op::Update) {
        return Ok(());
    }
    let ns = reviewed.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(refusal) = namespace_refusal(op, ns, metallb_namespace) {
        return Err(refusal);
    }
    let all = with_reviewed(listed, reviewed, |p| p.metadata.name.as_deref());
    read_pools_in_order(&all)
        .map(|_| ())
        .map_err(|e| e.metallb_message())
}

/// The verdict on an L2Advertisement create or update: `Err` is MetalLB's message.
pub fn l2_advertisement(
    op: Op,
    reviewed: &L2Advertisement,
    listed: &[L2Advertisement],
    pools: &[IPAddressPool],
    metallb_namespace: &str,
) -> Result<(), String> {
    if !matches!(op, Op::Create | Op::Update) {
        return Ok(());
    }
    let ns = reviewed.metadata.namespace.as_deref().unwrap_or_default();
    if let Some(refusal) = namespace_refusal(op, ns, metallb_namespace) {
        return Err(refusal);
    }
    let ads: Vec<L2Advertisement> = with_reviewed(listed, reviewed, |a| a.metadata.name.as_deref())
        .into_iter()
        .cloned()
        .collect();
    Config::parse(pools, &ads, &[])
        .map(|_| ())
        .map_err(|e| e.metallb_message())
}

/// The verdict on a BFDProfile delete: refused while a BGPPeer (`spec.bfdProfile` of each
/// listed peer, by name) uses it.
pub fn bfd_profile_delete(profile: &str, peers: &[(String, String)]) -> Result<(), String> {
    match peers.iter().find(|(_, used)| used == profile) {
        Some((peer, _)) => Err(format!(
            "failed to delete BFDProfile {profile}, used by BGPPeer {peer}"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use vigil_metallb::crd::IPAddressPoolSpec;

    fn pool_named(name: &str, ns: &str, addresses: &[&str]) -> IPAddressPool {
        IPAddressPool {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..ObjectMeta::default()
            },
            spec: IPAddressPoolSpec {
                addresses: Some(addresses.iter().map(|a| a.to_string()).collect()),
                ..IPAddressPoolSpec::default()
            },
            status: None,
        }
    }

    #[test]
    fn pools_as_metallb_judges_them() {
        let ns = "metallb-system";
        let listed = vec![pool_named("z", ns, &["198.18.0.0/24"])];
        assert_eq!(
            pool(
                Op::Create,
                &pool_named("a", ns, &["198.18.1.0/24"]),
                &listed,
                ns
            ),
            Ok(())
        );
        // The reviewed pool is read last, whatever its name: the overlap is reported on it.
        let e = pool(
            Op::Create,
            &pool_named("a", ns, &["198.18.0.128/25"]),
            &listed,
            ns,
        )
        .unwrap_err();
        assert_eq!(
            e,
            r#"CIDR "198.18.0.128/25" in pool "a" overlaps with already defined CIDR "198.18.0.0/24""#
        );
        // An update replaces its namesake (no overlap with its own old self).
        assert_eq!(
            pool(
                Op::Update,
                &pool_named("z", ns, &["198.18.0.0/25"]),
                &listed,
                ns
            ),
            Ok(())
        );
        let e = pool(
            Op::Create,
            &pool_named("b", ns, &["198.18.300.0/24"]),
            &listed,
            ns,
        )
        .unwrap_err();
        assert!(e.starts_with("parsing address pool b: invalid CIDR"), "{e}");
        assert_eq!(
            pool(
                Op::Create,
                &pool_named("b", "default", &["198.18.1.0/24"]),
                &listed,
                ns
            ),
            Err("resource must be created in metallb-system namespace".into())
        );
        // MetalLB checks the namespace on create only.
        assert_eq!(
            pool(
                Op::Update,
                &pool_named("b", "default", &["198.18.1.0/24"]),
                &listed,
                ns
            ),
            Ok(())
        );
        assert_eq!(
            pool(Op::Delete, &pool_named("b", ns, &[]), &listed, ns),
            Ok(())
        );
    }

    #[test]
    fn paths_and_bfd() {
        assert_eq!(
            Kind::at("/validate-metallb-io-v1beta1-ipaddresspool"),
            Some(Kind::IpAddressPool)
        );
        assert_eq!(Kind::at("/validate"), None);
        let peers = vec![("p1".to_string(), "fast".to_string())];
        assert_eq!(
            bfd_profile_delete("fast", &peers),
            Err("failed to delete BFDProfile fast, used by BGPPeer p1".into())
        );
        assert_eq!(bfd_profile_delete("slow", &peers), Ok(()));
    }
}
