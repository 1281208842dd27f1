//! MetalLB's `/etc/metallb/excludel2.yaml` (ConfigMap `metallb-excludel2`): regular
//! expressions naming interfaces the speaker never announces from
//! (`speaker/main.go:parseAnnouncedInterfacesToExclude`).
//!
//! Format: a YAML map whose `announcedInterfacesToExclude` key (matched case-insensitively,
//! as Go's JSON decoding does after sigs.k8s.io/yaml) holds a list of expressions. They are
//! joined as `(r1)|(r2)|...` and searched unanchored in each interface name
//! (the speaker hands [`InterfaceExclusions::patterns`] to the announcer's interface selection,
//! which compiles them the same way). A
//! missing file or an empty list excludes nothing (MetalLB has no built-in list: its
//! manifests ship [`DEFAULT_EXCLUDES`] in the ConfigMap); a file that does not parse, or an
//! expression that does not compile, is a startup error.

/// The path MetalLB's speaker reads.
pub const EXCLUDE_L2_PATH: &str = "/etc/metallb/excludel2.yaml";

/// The list MetalLB's manifests and Helm chart ship (v0.16.2 `config/native/exclude-l2-config.yaml`).
pub const DEFAULT_EXCLUDES: [&str; 14] = [
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo$",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^nodelocaldns.*",
    "^lxc.*",
];

/// Interfaces excluded from announcing.
#[derive(Debug, Clone, Default)]
pub struct InterfaceExclusions {
    patterns: Vec<String>,
    /// `(r1)|(r2)|...`; `None` for an empty list.
    regex: Option<regex::Regex>,
}

impl PartialEq for InterfaceExclusions {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Eq for InterfaceExclusions {}

/// Why the file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ExcludeError {
    /// Not YAML of the expected shape.
    #[error("excludel2: cannot parse announcedInterfacesToExclude: {0}")]
    Parse(String),
    /// An expression that does not compile.
    #[error("excludel2: announcedInterfacesToExclude: {0}")]
    Regex(#[from] regex::Error),
}

impl InterfaceExclusions {
    /// Reads the file's contents (`None`: the file does not exist).
    pub fn parse(contents: Option<&str>) -> Result<Self, ExcludeError> {
        let Some(text) = contents else {
            return Ok(Self::default());
        };
        let value: serde_norway::Value =
            serde_norway::from_str(text).map_err(|e| ExcludeError::Parse(e.to_string()))?;
        let list = match &value {
            serde_norway::Value::Null => None,
            serde_norway::Value::Mapping(m) => m
                .iter()
                .filter(|(k, _)| {
                    k.as_str()
                        .is_some_and(|k| k.eq_ignore_ascii_case("announcedInterfacesToExclude"))
                })
                .map(|(_, v)| v)
                .last(),
            _ => return Err(ExcludeError::Parse("expected a map".into())),
        };
        let patterns: Vec<String> = match list {
            None | Some(serde_norway::Value::Null) => Vec::new(),
            Some(v) => serde_norway::from_value(v.clone())
                .map_err(|e| ExcludeError::Parse(e.to_string()))?,
        };
        Self::from_patterns(patterns)
    }

    /// Reads the file at `path`; a missing file excludes nothing, as in MetalLB.
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Self::parse(text.as_deref()).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Builds the exclusion from a list of expressions.
    pub fn from_patterns(patterns: Vec<String>) -> Result<Self, ExcludeError> {
        let regex = if patterns.is_empty() {
            None
        } else {
            Some(regex::Regex::new(&format!("({})", patterns.join(")|(")))?)
        };
        Ok(Self { patterns, regex })
    }

    /// MetalLB's shipped list.
    pub fn metallb_default() -> Self {
        // The shipped expressions compile.
        Self::from_patterns(DEFAULT_EXCLUDES.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default()
    }

    /// Whether the interface is excluded.
    pub fn excludes(&self, interface: &str) -> bool {
        self.regex.as_ref().is_some_and(|r| r.is_match(interface))
    }

    /// The expressions.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_excludes_what_metallb_excludes() {
        let text = "announcedInterfacesToExclude: [\"^docker.*\", \"^cbr.*\", \"^dummy.*\", \"^virbr.*\", \"^lxcbr.*\", \"^veth.*\", \"^lo$\", \"^cali.*\", \"^tunl.*\", \"^flannel.*\", \"^kube-ipvs.*\", \"^cni.*\", \"^nodelocaldns.*\", \"^lxc.*\"]\n";
        let ex = InterfaceExclusions::parse(Some(text)).unwrap();
        assert_eq!(
            ex.patterns(),
            InterfaceExclusions::metallb_default().patterns()
        );
        for excluded in [
            "docker0",
            "veth1a2b",
            "lo",
            "cali123",
            "kube-ipvs0",
            "lxc_health",
            "cni0",
        ] {
            assert!(ex.excludes(excluded), "{excluded}");
        }
        for kept in ["eth0", "ens3", "bond0", "br0", "lo0", "vlan10", "mydocker"] {
            assert!(!ex.excludes(kept), "{kept}");
        }
    }

    #[test]
    fn missing_or_empty_excludes_nothing_and_bad_input_is_an_error() {
        assert!(
            !InterfaceExclusions::parse(None)
                .unwrap()
                .excludes("docker0")
        );
        assert!(
            !InterfaceExclusions::parse(Some(""))
                .unwrap()
                .excludes("docker0")
        );
        assert!(
            !InterfaceExclusions::parse(Some("announcedInterfacesToExclude: []"))
                .unwrap()
                .excludes("x")
        );
        // Unanchored search, key matched case-insensitively.
        assert!(
            InterfaceExclusions::parse(Some("AnnouncedInterfacesToExclude: [tap]"))
                .unwrap()
                .excludes("mytap0")
        );
        assert!(matches!(
            InterfaceExclusions::parse(Some("announcedInterfacesToExclude: ['(']")),
            Err(ExcludeError::Regex(_))
        ));
        assert!(matches!(
            InterfaceExclusions::parse(Some("announcedInterfacesToExclude: {a: b}")),
            Err(ExcludeError::Parse(_))
        ));
        assert!(matches!(
            InterfaceExclusions::parse(Some("[1, 2")),
            Err(ExcludeError::Parse(_))
        ));
    }
}
