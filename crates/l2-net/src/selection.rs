//! Which interfaces get a responder, after MetalLB's rules (`research/metallb-l2.md` 4.1), with
//! per-family responders. Names are excluded by glob (standalone's list) or by MetalLB's
//! regular expressions ([`NamePatterns`], Kubernetes mode's `excludel2.yaml`).

use std::collections::BTreeSet;

use vigil_l2::Interface;
use vigil_l2::wire::ethernet::Address as EthernetAddress;

use crate::netlink::Link;

/// MetalLB's default exclude list, as glob patterns.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "docker*",
    "cbr*",
    "dummy*",
    "virbr*",
    "lxcbr*",
    "veth*",
    "lo",
    "cali*",
    "tunl*",
    "flannel*",
    "kube-ipvs*",
    "cni*",
    "vxlan.calico*",
    "vxlan-v6.calico*",
    "nodelocaldns*",
];

const ARPHRD_ETHER: u16 = 1;
const IFF_UP: u32 = 0x1;
const IFF_BROADCAST: u32 = 0x2;
const IFF_LOOPBACK: u32 = 0x8;
const IFF_NOARP: u32 = 0x80;
const IFF_LOWER_UP: u32 = 0x1_0000;

/// Why an interface gets no responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Its name matches an exclude pattern.
    Excluded,
    /// An include list is set and does not name it.
    NotIncluded,
    /// Not an Ethernet link, or the loopback.
    NotEthernet,
    /// Administratively down, or no carrier.
    Down,
    /// Enslaved to a bridge, bond or VRF: the master answers instead.
    Enslaved,
    /// Flagged NOARP: no neighbour protocol runs on it.
    NoArp,
    /// Neither family qualifies: no broadcast (ARP) and no IPv6 address (NDP).
    NoFamily,
}

/// Interface selection rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Glob patterns (`*` matches any run of characters) of names never used.
    pub exclude: Vec<String>,
    /// Regular expressions of names never used (MetalLB's `excludel2.yaml`), beside `exclude`.
    pub exclude_matching: Option<NamePatterns>,
    /// If set, only these names are used.
    pub include: Option<BTreeSet<String>>,
}

impl Default for Selection {
    fn default() -> Self {
        Self {
            exclude: DEFAULT_EXCLUDES.iter().map(|s| (*s).to_string()).collect(),
            exclude_matching: None,
            include: None,
        }
    }
}

/// A list of regular expressions over interface names, matched as MetalLB's speaker matches
/// its `announcedInterfacesToExclude` (`speaker/main.go:parseAnnouncedInterfacesToExclude`,
/// `internal/layer2/announcer.go:updateInterfaces`): joined as `(r1)|(r2)|...` and searched
/// anywhere in the name (Go's `MatchString` is unanchored; `^`/`$` anchor where written).
///
/// Go's RE2 syntax and the `regex` crate agree on everything interface names need; they
/// differ only in `\d`, `\w`, `\s` and `\b`, which Rust reads as Unicode classes and Go as
/// ASCII ones: the same answers on ASCII names.
#[derive(Debug, Clone)]
pub struct NamePatterns {
    patterns: Vec<String>,
    regex: regex::Regex,
}

impl NamePatterns {
    /// Compiles the list; `None` for an empty one (it excludes nothing, as in MetalLB).
    pub fn new(patterns: Vec<String>) -> Result<Option<Self>, regex::Error> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let regex = regex::Regex::new(&format!("({})", patterns.join(")|(")))?;
        Ok(Some(Self { patterns, regex }))
    }

    /// Whether some expression matches somewhere in `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }

    /// The expressions, as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

impl PartialEq for NamePatterns {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for NamePatterns {}

/// Matches `name` against a glob where `*` stands for any run of characters.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len())
                .filter(|i| tail.is_char_boundary(*i))
                .any(|i| glob_match(rest, &tail[i..]))
        }
    }
}

impl Selection {
    /// Decides whether `link` gets a responder, and for which families. `has_ipv6` says
    /// whether the link holds any IPv6 address (IPv6 is enabled on it).
    ///
    /// Unlike MetalLB, the IPv6 responder needs no usable link-local address: advertisements
    /// are sourced from the VIP itself (MetalLB #2685). The carrier must be up, so that a link
    /// whose cable comes back is treated as new and re-announced.
    pub fn qualify(&self, link: &Link, has_ipv6: bool) -> Result<Interface, Skip> {
        if self.exclude.iter().any(|p| glob_match(p, &link.name))
            || self
                .exclude_matching
                .as_ref()
                .is_some_and(|p| p.matches(&link.name))
        {
            return Err(Skip::Excluded);
        }
        if self
            .include
            .as_ref()
            .is_some_and(|names| !names.contains(&link.name))
        {
            return Err(Skip::NotIncluded);
        }
        let mac = match link.mac {
            Some(mac) if link.link_type == ARPHRD_ETHER && link.flags & IFF_LOOPBACK == 0 => {
                EthernetAddress(mac)
            }
            _ => return Err(Skip::NotEthernet),
        };
        if link.flags & IFF_UP == 0 || link.flags & IFF_LOWER_UP == 0 {
            return Err(Skip::Down);
        }
        if link.master.is_some() {
            return Err(Skip::Enslaved);
        }
        if link.flags & IFF_NOARP != 0 {
            return Err(Skip::NoArp);
        }
        let arp = link.flags & IFF_BROADCAST != 0;
        if !arp && !has_ipv6 {
            return Err(Skip::NoFamily);
        }
        Ok(Interface {
            name: link.name.clone(),
            mac,
            arp,
            ndp: has_ipv6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(name: &str, flags: u32) -> Link {
        Link {
            index: 3,
            name: name.into(),
            mac: Some([2, 0, 0, 0, 0, 1]),
            flags,
            link_type: ARPHRD_ETHER,
            master: None,
        }
    }

    const RUNNING: u32 = IFF_UP | IFF_BROADCAST | IFF_LOWER_UP;

    #[test]
    fn globs() {
        assert!(glob_match("veth*", "veth1234"));
        assert!(glob_match("lo", "lo"));
        assert!(!glob_match("lo", "lo0"));
        assert!(glob_match("*calico*", "vxlan.calico"));
        assert!(!glob_match("cni*", "eth0"));
    }

    /// MetalLB's list: unanchored search unless anchored, any expression of the list.
    #[test]
    fn name_patterns_search_as_metallb() {
        let p = NamePatterns::new(vec!["^veth.*".into(), "th1".into(), "^lo$".into()])
            .unwrap()
            .unwrap();
        for excluded in ["veth0", "eth1", "beth10", "lo"] {
            assert!(p.matches(excluded), "{excluded}");
        }
        for kept in ["eth0", "myveth", "lo0", "blo"] {
            assert!(!p.matches(kept), "{kept}");
        }
        assert!(NamePatterns::new(Vec::new()).unwrap().is_none());
        assert!(NamePatterns::new(vec!["(".into()]).is_err());
        let s = Selection {
            exclude: Vec::new(),
            exclude_matching: Some(p),
            include: None,
        };
        assert_eq!(s.qualify(&link("eth1", RUNNING), true), Err(Skip::Excluded));
        assert!(s.qualify(&link("veth-not-glob", RUNNING), true).is_err());
        assert!(s.qualify(&link("eth0", RUNNING), true).is_ok());
        // Without the default globs, names MetalLB's list does not name are used.
        assert!(s.qualify(&link("docker0", RUNNING), true).is_ok());
    }

    #[test]
    fn metallb_rules_and_families() {
        let s = Selection::default();
        assert_eq!(
            s.qualify(&link("veth0", RUNNING), true),
            Err(Skip::Excluded)
        );
        assert_eq!(
            s.qualify(&link("eth0", IFF_UP | IFF_BROADCAST), true),
            Err(Skip::Down)
        );
        assert_eq!(
            s.qualify(&link("eth0", RUNNING | IFF_NOARP), true),
            Err(Skip::NoArp)
        );
        let mut enslaved = link("eth0", RUNNING);
        enslaved.master = Some(9);
        assert_eq!(s.qualify(&enslaved, true), Err(Skip::Enslaved));
        let v4_only = s.qualify(&link("eth0", RUNNING), false).unwrap();
        assert!(v4_only.arp && !v4_only.ndp);
        let both = s.qualify(&link("eth0", RUNNING), true).unwrap();
        assert!(both.arp && both.ndp);
        assert_eq!(
            s.qualify(&link("eth0", IFF_UP | IFF_LOWER_UP), false),
            Err(Skip::NoFamily)
        );
        let only = Selection {
            include: Some(["eth1".to_string()].into()),
            ..Selection::default()
        };
        assert_eq!(
            only.qualify(&link("eth0", RUNNING), true),
            Err(Skip::NotIncluded)
        );
    }
}
