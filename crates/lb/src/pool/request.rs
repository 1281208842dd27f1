//! What a Service asks of the allocator, read from its fields and annotations as MetalLB's
//! controller reads them (`controller/service.go`, `internal/allocator/k8salloc`).

use super::addr::{Family, canonical};
use super::error::RequestError;
use crate::selector::Labels;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

/// The annotation prefix MetalLB reads.
pub const ANNOTATION_PREFIX: &str = "metallb.io/";
/// The deprecated prefix, still read when the current one is absent (with a Warning event
/// `deprecatedAnnotation` from the controller).
pub const DEPRECATED_PREFIX: &str = "metallb.universe.tf/";
/// Pins the pool: `metallb.io/address-pool`.
pub const ADDRESS_POOL: &str = "address-pool";
/// Requested IPs, comma-separated: `metallb.io/loadBalancerIPs`.
pub const LOAD_BALANCER_IPS: &str = "loadBalancerIPs";
/// The sharing key: `metallb.io/allow-shared-ip`.
pub const ALLOW_SHARED_IP: &str = "allow-shared-ip";
/// Written by the controller: the pool the IPs came from, `metallb.io/ip-allocated-from-pool`.
pub const IP_ALLOCATED_FROM_POOL: &str = "ip-allocated-from-pool";

/// One service port as the sharing rule compares ports: protocol and port number.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port {
    /// `TCP`, `UDP` or `SCTP`, as the API spells it.
    pub protocol: String,
    /// The service port (`spec.ports[].port`).
    pub port: u16,
}

impl Port {
    /// A TCP port.
    pub fn tcp(port: u16) -> Self {
        Self {
            protocol: "TCP".into(),
            port,
        }
    }

    /// A UDP port.
    pub fn udp(port: u16) -> Self {
        Self {
            protocol: "UDP".into(),
            port,
        }
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.protocol, self.port)
    }
}

/// The family of a service, from its cluster IPs (MetalLB's `ipfamily.ForService`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceFamily {
    /// One cluster IP, of this family.
    Single(Family),
    /// Two cluster IPs, one of each family.
    Dual,
}

impl ServiceFamily {
    /// The family of a list of addresses: one address is its family; two of different families
    /// are dual; anything else has no family.
    pub fn of(ips: &[IpAddr]) -> Option<Self> {
        match ips {
            [ip] => Some(Self::Single(Family::of(*ip))),
            [a, b] if Family::of(*a) != Family::of(*b) => Some(Self::Dual),
            _ => None,
        }
    }
}

impl fmt::Display for ServiceFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Single(family) => family.fmt(f),
            Self::Dual => f.write_str("dual-stack"),
        }
    }
}

/// `spec.ipFamilyPolicy` (SingleStack when unset, as MetalLB reads it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FamilyPolicy {
    /// One IP of the service's family.
    #[default]
    SingleStack,
    /// Both families if one pool can give both, else one.
    PreferDualStack,
    /// Both families from one pool, or nothing.
    RequireDualStack,
}

impl std::str::FromStr for FamilyPolicy {
    type Err = RequestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "SingleStack" => Ok(Self::SingleStack),
            "PreferDualStack" => Ok(Self::PreferDualStack),
            "RequireDualStack" => Ok(Self::RequireDualStack),
            other => Err(RequestError::UnknownFamilyPolicy(other.to_string())),
        }
    }
}

/// Everything the allocator needs to know about one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `namespace/name`: the allocation's identity.
    pub key: String,
    /// The service's namespace.
    pub namespace: String,
    /// The labels of that namespace (for `namespaceSelectors`).
    pub namespace_labels: Labels,
    /// The service's labels (for `serviceSelectors`).
    pub labels: Labels,
    /// Its family, from its cluster IPs.
    pub family: ServiceFamily,
    /// `spec.ipFamilyPolicy`.
    pub policy: FamilyPolicy,
    /// The family preferred when only one can be had: `spec.ipFamilies[0]` if it is IPv6,
    /// else IPv4.
    pub primary: Family,
    /// `metallb.io/address-pool`.
    pub pool: Option<String>,
    /// `metallb.io/loadBalancerIPs` or `spec.loadBalancerIP` (empty if neither), or why they
    /// could not be read.
    pub requested_ips: Result<Vec<IpAddr>, RequestError>,
    /// `spec.ports` as protocol and port.
    pub ports: Vec<Port>,
    /// `metallb.io/allow-shared-ip`; `None` (or empty) shares with nobody.
    pub sharing_key: Option<String>,
    /// What services sharing an IP must agree on besides the sharing key: see [`backend_key`].
    pub backend_key: String,
}

impl Request {
    /// A single-stack IPv4 request for `namespace/name` with no labels, no ports and nothing
    /// requested: the base the tests and simple callers adjust.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            key: format!("{namespace}/{name}"),
            namespace: namespace.to_string(),
            namespace_labels: Labels::new(),
            labels: Labels::new(),
            family: ServiceFamily::Single(Family::V4),
            policy: FamilyPolicy::SingleStack,
            primary: Family::V4,
            pool: None,
            requested_ips: Ok(Vec::new()),
            ports: Vec::new(),
            sharing_key: None,
            backend_key: String::new(),
        }
    }

    /// The sharing key, with an empty key read as none (MetalLB's `sharingOK`).
    pub(crate) fn sharing(&self) -> Option<&str> {
        self.sharing_key.as_deref().filter(|k| !k.is_empty())
    }
}

/// MetalLB's backend key (`k8salloc.BackendKey`): for `externalTrafficPolicy: Local`, the
/// pod selector printed as Kubernetes prints a label set (`k=v` pairs sorted by key, joined by
/// `,`); for `Cluster`, empty. Services on one IP must have equal backend keys, so `Local`
/// services share only with `Local` services of the same selector (and a `Local` service with
/// an empty selector counts as a `Cluster` one, as in MetalLB).
pub fn backend_key(traffic_policy_local: bool, selector: &BTreeMap<String, String>) -> String {
    if !traffic_policy_local {
        return String::new();
    }
    selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The value of a MetalLB annotation: `metallb.io/<name>` if present, else the deprecated
/// `metallb.universe.tf/<name>` (MetalLB's `valueForAnnotation`).
pub fn annotation<'a>(annotations: &'a BTreeMap<String, String>, name: &str) -> Option<&'a str> {
    annotations
        .get(&format!("{ANNOTATION_PREFIX}{name}"))
        .or_else(|| annotations.get(&format!("{DEPRECATED_PREFIX}{name}")))
        .map(String::as_str)
}

/// The deprecated annotations a service carries (each earns MetalLB's `deprecatedAnnotation`
/// Warning event when the controller changes the service).
pub fn deprecated_annotations(annotations: &BTreeMap<String, String>) -> Vec<&str> {
    annotations
        .keys()
        .filter(|k| k.starts_with(DEPRECATED_PREFIX))
        .map(String::as_str)
        .collect()
}

/// The requested IPs (MetalLB's `getDesiredLbIPs`): the annotation, split at commas with
/// spaces trimmed, or `spec.loadBalancerIP`; never both. An empty value counts as absent.
pub fn requested_ips(
    annotations: &BTreeMap<String, String>,
    load_balancer_ip: Option<&str>,
) -> Result<Vec<IpAddr>, RequestError> {
    let listed = annotation(annotations, LOAD_BALANCER_IPS).filter(|s| !s.is_empty());
    let spec = load_balancer_ip.filter(|s| !s.is_empty());
    match (listed, spec) {
        (None, None) => Ok(Vec::new()),
        (Some(_), Some(_)) => Err(RequestError::BothIpFields),
        (Some(list), None) => {
            let ips = list
                .split(',')
                .map(|s| s.trim().parse::<IpAddr>().map(canonical))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| RequestError::BadLoadBalancerIps(list.to_string()))?;
            if ServiceFamily::of(&ips).is_none() {
                return Err(RequestError::BadIpFamilies(ips));
            }
            Ok(ips)
        }
        (None, Some(one)) => one
            .parse::<IpAddr>()
            .map(|ip| vec![canonical(ip)])
            .map_err(|_| RequestError::BadLoadBalancerIp(one.to_string())),
    }
}

/// The Service fields a [`Request`] is read from, as plain values.
#[derive(Debug, Clone, Copy)]
pub struct ServiceFields<'a> {
    /// `metadata.namespace`.
    pub namespace: &'a str,
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.annotations`.
    pub annotations: &'a BTreeMap<String, String>,
    /// `metadata.labels`.
    pub labels: &'a Labels,
    /// The labels of the service's namespace.
    pub namespace_labels: &'a Labels,
    /// `spec.clusterIPs`, or `[spec.clusterIP]` when that list is empty.
    pub cluster_ips: &'a [String],
    /// `spec.ipFamilies`.
    pub ip_families: &'a [String],
    /// `spec.ipFamilyPolicy`.
    pub ip_family_policy: Option<&'a str>,
    /// `spec.loadBalancerIP`.
    pub load_balancer_ip: Option<&'a str>,
    /// `spec.externalTrafficPolicy == Local`.
    pub traffic_policy_local: bool,
    /// `spec.selector`.
    pub selector: &'a BTreeMap<String, String>,
    /// `spec.ports`.
    pub ports: &'a [Port],
}

impl Request {
    /// Reads a request from a Service. Fails (and MetalLB then clears the service's state)
    /// when the cluster IPs give no family, or `RequireDualStack` comes with one cluster IP.
    /// Bad requested IPs do not fail here: they are kept in [`Request::requested_ips`],
    /// because MetalLB keeps a service's current IPs in that case.
    pub fn from_service(f: &ServiceFields<'_>) -> Result<Self, RequestError> {
        let cluster_ips: Vec<IpAddr> = f
            .cluster_ips
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<IpAddr>().map(canonical))
            .collect::<Result<_, _>>()
            .map_err(|_| RequestError::BadClusterIps(f.cluster_ips.to_vec()))?;
        if cluster_ips.is_empty() {
            return Err(RequestError::NoClusterIps);
        }
        let family = ServiceFamily::of(&cluster_ips)
            .ok_or_else(|| RequestError::BadClusterIps(f.cluster_ips.to_vec()))?;
        let policy = match f.ip_family_policy {
            Some(p) => p.parse()?,
            None => FamilyPolicy::SingleStack,
        };
        if policy == FamilyPolicy::RequireDualStack && cluster_ips.len() < 2 {
            return Err(RequestError::NotEnoughClusterIps);
        }
        let primary = match f.ip_families.first().map(String::as_str) {
            Some("IPv6") => Family::V6,
            _ => Family::V4,
        };
        Ok(Self {
            key: format!("{}/{}", f.namespace, f.name),
            namespace: f.namespace.to_string(),
            namespace_labels: f.namespace_labels.clone(),
            labels: f.labels.clone(),
            family,
            policy,
            primary,
            pool: annotation(f.annotations, ADDRESS_POOL)
                .filter(|p| !p.is_empty())
                .map(str::to_string),
            requested_ips: requested_ips(f.annotations, f.load_balancer_ip),
            ports: f.ports.to_vec(),
            sharing_key: annotation(f.annotations, ALLOW_SHARED_IP)
                .filter(|k| !k.is_empty())
                .map(str::to_string),
            backend_key: backend_key(f.traffic_policy_local, f.selector),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn current_annotation_wins_over_deprecated() {
        let a = map(&[
            ("metallb.universe.tf/address-pool", "old"),
            ("metallb.io/address-pool", "new"),
        ]);
        assert_eq!(annotation(&a, ADDRESS_POOL), Some("new"));
        let a = map(&[("metallb.universe.tf/address-pool", "old")]);
        assert_eq!(annotation(&a, ADDRESS_POOL), Some("old"));
        assert_eq!(
            deprecated_annotations(&a),
            vec!["metallb.universe.tf/address-pool"]
        );
    }

    #[test]
    fn requested_ips_follow_get_desired_lb_ips() {
        let none = BTreeMap::new();
        assert_eq!(requested_ips(&none, None), Ok(vec![]));
        assert_eq!(requested_ips(&none, Some("")), Ok(vec![]));
        let ip: IpAddr = "198.18.0.5".parse().unwrap();
        assert_eq!(requested_ips(&none, Some("198.18.0.5")), Ok(vec![ip]));
        assert_eq!(
            requested_ips(&none, Some("::ffff:198.18.0.5")),
            Ok(vec![ip])
        );
        let a = map(&[("metallb.io/loadBalancerIPs", "198.18.0.5, 2001:db8::5")]);
        assert_eq!(requested_ips(&a, None).unwrap().len(), 2);
        assert_eq!(
            requested_ips(&a, Some("198.18.0.5")),
            Err(RequestError::BothIpFields)
        );
        let a = map(&[("metallb.io/loadBalancerIPs", "198.18.0.5,")]);
        assert!(matches!(
            requested_ips(&a, None),
            Err(RequestError::BadLoadBalancerIps(_))
        ));
        let a = map(&[("metallb.io/loadBalancerIPs", "198.18.0.5,198.18.0.6")]);
        assert!(matches!(
            requested_ips(&a, None),
            Err(RequestError::BadIpFamilies(_))
        ));
        assert!(matches!(
            requested_ips(&none, Some("x")),
            Err(RequestError::BadLoadBalancerIp(_))
        ));
    }

    #[test]
    fn backend_key_is_the_sorted_selector_for_local_only() {
        let sel = map(&[("tier", "web"), ("app", "shop")]);
        assert_eq!(backend_key(true, &sel), "app=shop,tier=web");
        assert_eq!(backend_key(false, &sel), "");
        assert_eq!(backend_key(true, &BTreeMap::new()), "");
    }

    #[test]
    fn from_service_reads_families_and_rejects_what_metallb_clears() {
        let empty = BTreeMap::new();
        let cluster = ["10.96.0.1".to_string(), "fd00::1".to_string()];
        let families = ["IPv6".to_string(), "IPv4".to_string()];
        let ports = [Port::tcp(80)];
        let annotations = map(&[
            ("metallb.io/allow-shared-ip", "k"),
            ("metallb.io/address-pool", "p"),
        ]);
        let fields = ServiceFields {
            namespace: "ns",
            name: "web",
            annotations: &annotations,
            labels: &empty,
            namespace_labels: &empty,
            cluster_ips: &cluster,
            ip_families: &families,
            ip_family_policy: Some("PreferDualStack"),
            load_balancer_ip: None,
            traffic_policy_local: false,
            selector: &empty,
            ports: &ports,
        };
        let r = Request::from_service(&fields).unwrap();
        assert_eq!(r.key, "ns/web");
        assert_eq!(
            (r.family, r.policy, r.primary),
            (
                ServiceFamily::Dual,
                FamilyPolicy::PreferDualStack,
                Family::V6
            )
        );
        assert_eq!(
            (r.pool.as_deref(), r.sharing_key.as_deref()),
            (Some("p"), Some("k"))
        );
        let one = ["10.96.0.1".to_string()];
        let e = Request::from_service(&ServiceFields {
            cluster_ips: &one,
            ip_family_policy: Some("RequireDualStack"),
            ..fields
        });
        assert_eq!(e, Err(RequestError::NotEnoughClusterIps));
        let e = Request::from_service(&ServiceFields {
            cluster_ips: &[],
            ..fields
        });
        assert_eq!(e, Err(RequestError::NoClusterIps));
        let e = Request::from_service(&ServiceFields {
            ip_family_policy: Some("Sometimes"),
            ..fields
        });
        assert!(matches!(e, Err(RequestError::UnknownFamilyPolicy(_))));
    }
}
