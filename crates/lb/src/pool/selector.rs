//! Kubernetes label selectors as pure values: `matchLabels` plus `matchExpressions`.
//!
//! The rules are Kubernetes' own (`metav1.LabelSelectorAsSelector`), which MetalLB uses for a
//! pool's `serviceAllocation.namespaceSelectors` and `serviceSelectors`:
//! - every `matchLabels` pair and every expression must hold (AND);
//! - `In`: the key is present and its value is one of `values`;
//! - `NotIn`: the key is absent, or its value is none of `values`;
//! - `Exists` / `DoesNotExist`: the key is present / absent, whatever its value;
//! - the empty selector matches everything.

use std::collections::BTreeMap;
use std::fmt;

/// Labels of an object: key to value.
pub type Labels = BTreeMap<String, String>;

/// How a [`Requirement`] compares a label with its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// The key is present and its value is listed.
    In,
    /// The key is absent, or its value is not listed.
    NotIn,
    /// The key is present.
    Exists,
    /// The key is absent.
    DoesNotExist,
}

impl Operator {
    /// The operator as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::In => "In",
            Self::NotIn => "NotIn",
            Self::Exists => "Exists",
            Self::DoesNotExist => "DoesNotExist",
        }
    }
}

impl std::str::FromStr for Operator {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "In" => Ok(Self::In),
            "NotIn" => Ok(Self::NotIn),
            "Exists" => Ok(Self::Exists),
            "DoesNotExist" => Ok(Self::DoesNotExist),
            other => Err(SelectorError::UnknownOperator(other.to_string())),
        }
    }
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How the label is compared.
    pub operator: Operator,
    /// The values for `In` and `NotIn`; empty for `Exists` and `DoesNotExist`.
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A label selector: `matchLabels` and `matchExpressions`, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    pub match_labels: Labels,
    /// Further requirements.
    pub match_expressions: Vec<Requirement>,
}

/// Why a selector is not valid (Kubernetes rejects the same ones).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A `matchLabels` key or an expression key is empty.
    #[error("empty label key")]
    EmptyKey,
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("unknown operator {0:?} (want In, NotIn, Exists or DoesNotExist)")]
    UnknownOperator(String),
    /// `In` or `NotIn` with no values.
    #[error("operator {operator} on key {key:?} needs at least one value")]
    MissingValues {
        /// The key of the expression.
        key: String,
        /// Its operator.
        operator: &'static str,
    },
    /// `Exists` or `DoesNotExist` with values.
    #[error("operator {operator} on key {key:?} takes no values")]
    UnexpectedValues {
        /// The key of the expression.
        key: String,
        /// Its operator.
        operator: &'static str,
    },
    /// The same value twice in one expression (MetalLB rejects it).
    #[error("duplicate value {value:?} in the expression on key {key:?}")]
    DuplicateValue {
        /// The key of the expression.
        key: String,
        /// The repeated value.
        value: String,
    },
    /// The same expression twice in one selector (MetalLB rejects it).
    #[error("duplicate match expression on key {0:?}")]
    DuplicateExpression(String),
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector with only `matchLabels`.
    pub fn labels<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            match_labels: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// Adds a requirement.
    pub fn with(mut self, key: impl Into<String>, operator: Operator, values: &[&str]) -> Self {
        self.match_expressions.push(Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        });
        self
    }

    /// Checks the selector as Kubernetes and MetalLB's configuration parser do.
    pub fn validate(&self) -> Result<(), SelectorError> {
        if self.match_labels.keys().any(String::is_empty) {
            return Err(SelectorError::EmptyKey);
        }
        for (i, r) in self.match_expressions.iter().enumerate() {
            if r.key.is_empty() {
                return Err(SelectorError::EmptyKey);
            }
            let operator = r.operator.as_str();
            match r.operator {
                Operator::In | Operator::NotIn if r.values.is_empty() => {
                    return Err(SelectorError::MissingValues {
                        key: r.key.clone(),
                        operator,
                    });
                }
                Operator::Exists | Operator::DoesNotExist if !r.values.is_empty() => {
                    return Err(SelectorError::UnexpectedValues {
                        key: r.key.clone(),
                        operator,
                    });
                }
                _ => {}
            }
            for (j, v) in r.values.iter().enumerate() {
                if r.values[..j].contains(v) {
                    return Err(SelectorError::DuplicateValue {
                        key: r.key.clone(),
                        value: v.clone(),
                    });
                }
            }
            if self.match_expressions[..i].iter().any(|o| {
                o.key == r.key && o.operator == r.operator && same_set(&o.values, &r.values)
            }) {
                return Err(SelectorError::DuplicateExpression(r.key.clone()));
            }
        }
        Ok(())
    }

    /// Whether `labels` satisfy every part of the selector.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Whether two selectors say the same thing (value order in expressions aside), which is
    /// how MetalLB finds duplicate selectors in one list.
    pub fn same_as(&self, other: &Self) -> bool {
        self.match_labels == other.match_labels
            && self.match_expressions.len() == other.match_expressions.len()
            && self
                .match_expressions
                .iter()
                .zip(&other.match_expressions)
                .all(|(a, b)| {
                    a.key == b.key && a.operator == b.operator && same_set(&a.values, &b.values)
                })
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    b.sort();
    a == b
}

impl fmt::Display for LabelSelector {
    /// Kubernetes' text form (`k=v,k2 in (a,b),!k3`), for messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self
            .match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for r in &self.match_expressions {
            parts.push(match r.operator {
                Operator::In => format!("{} in ({})", r.key, r.values.join(",")),
                Operator::NotIn => format!("{} notin ({})", r.key, r.values.join(",")),
                Operator::Exists => r.key.clone(),
                Operator::DoesNotExist => format!("!{}", r.key),
            });
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(LabelSelector::everything().matches(&Labels::new()));
        assert!(LabelSelector::everything().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_need_every_pair() {
        let s = LabelSelector::labels([("app", "web"), ("tier", "front")]);
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "front"), ("x", "y")])));
        assert!(!s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "back")])));
    }

    #[test]
    fn operators_follow_kubernetes() {
        let has = labels(&[("env", "prod")]);
        let other = labels(&[("env", "dev")]);
        let none = Labels::new();
        let sel = |op, values: &[&str]| LabelSelector::everything().with("env", op, values);
        let in_ = sel(Operator::In, &["prod", "stage"]);
        assert!(in_.matches(&has) && !in_.matches(&other) && !in_.matches(&none));
        let not_in = sel(Operator::NotIn, &["prod"]);
        // NotIn matches when the key is absent.
        assert!(!not_in.matches(&has) && not_in.matches(&other) && not_in.matches(&none));
        let exists = sel(Operator::Exists, &[]);
        assert!(exists.matches(&has) && exists.matches(&other) && !exists.matches(&none));
        let absent = sel(Operator::DoesNotExist, &[]);
        assert!(!absent.matches(&has) && absent.matches(&none));
    }

    #[test]
    fn invalid_selectors_are_named() {
        let e = LabelSelector::everything()
            .with("k", Operator::In, &[])
            .validate();
        assert!(matches!(e, Err(SelectorError::MissingValues { .. })));
        let e = LabelSelector::everything()
            .with("k", Operator::Exists, &["v"])
            .validate();
        assert!(matches!(e, Err(SelectorError::UnexpectedValues { .. })));
        let e = LabelSelector::everything()
            .with("k", Operator::In, &["a", "a"])
            .validate();
        assert!(matches!(e, Err(SelectorError::DuplicateValue { .. })));
        let e = LabelSelector::everything()
            .with("k", Operator::In, &["a", "b"])
            .with("k", Operator::In, &["b", "a"])
            .validate();
        assert!(matches!(e, Err(SelectorError::DuplicateExpression(_))));
        assert_eq!(
            "Nope".parse::<Operator>(),
            Err(SelectorError::UnknownOperator("Nope".into()))
        );
        assert!(LabelSelector::labels([("", "v")]).validate().is_err());
    }
}
