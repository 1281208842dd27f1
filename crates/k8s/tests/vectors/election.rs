//! MetalLB's L2 election over one [`Announceable`] (`speaker/layer2_controller.go`:
//! `ShouldAnnounce` steps 5-9 and `sortL2Candidates`), given the live gossip members.
//!
//! A test oracle, written from MetalLB's code apart from the product's election: `vigil_lb::elect` groups Services that
//! share a VIP and elects once per group with every service's filters intersected, while
//! MetalLB elects per Service, keyed by that Service's first IP, over that Service's own
//! candidates (so two Services sharing an IP with different candidates can land on different
//! nodes, and both then answer for the IP). It also adds the preference score that
//! `vigil_lb::rank` lacks. It reuses `vigil_lb::rank` for the hash order.

use vigil_metallb::translate::Announceable;

/// The candidates in MetalLB's order: members (alive or suspect; with memberlist disabled,
/// every Node) that are eligible, highest preference score first, then smallest
/// SHA-256(node + `#` + Go's spelling of the first VIP).
pub(crate) fn candidates<'a>(
    service: &Announceable,
    members: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let eligible = members
        .into_iter()
        .filter(|m| service.eligible_nodes.contains(*m));
    let mut ordered: Vec<String> = vigil_lb::rank(eligible, service.key())
        .into_iter()
        .map(str::to_string)
        .collect();
    ordered.dedup();
    // Stable: equal scores keep the hash order.
    ordered.sort_by_key(|n| std::cmp::Reverse(service.preferences.get(n).copied().unwrap_or(0)));
    ordered
}

/// The node MetalLB's election picks, if any.
pub(crate) fn owner<'a>(
    service: &Announceable,
    members: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    if service.nobody.is_some() {
        return None;
    }
    candidates(service, members).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_metallb::translate::{Interfaces, Nobody};

    fn svc(ip: &str, eligible: &[&str], prefs: &[(&str, i64)]) -> Announceable {
        Announceable {
            id: "default/web".into(),
            vips: vec![ip.parse().unwrap()],
            pool: "lan".into(),
            eligible_nodes: eligible.iter().map(|s| s.to_string()).collect(),
            preferences: prefs.iter().map(|(n, w)| (n.to_string(), *w)).collect(),
            interfaces: Interfaces::All,
            nobody: None,
        }
    }

    // Hash orders from Python hashlib: sha256(node#ip) ascending.
    #[test]
    fn hash_order_then_preferences() {
        let s = svc("198.18.0.11", &["a", "b", "c"], &[]);
        assert_eq!(candidates(&s, ["a", "b", "c", "b"]), ["c", "b", "a"]);
        let s = svc("198.18.0.11", &["a", "b", "c"], &[("a", 5), ("b", 5)]);
        assert_eq!(candidates(&s, ["a", "b", "c"]), ["b", "a", "c"]);
        assert_eq!(owner(&s, ["c"]), Some("c".into()));
        assert_eq!(owner(&s, ["x"]), None);
        let mut s = svc("198.18.0.11", &["a"], &[]);
        s.nobody = Some(Nobody::NoServableEndpoint);
        assert_eq!(owner(&s, ["a"]), None);
    }
}
