//! Label selectors: the engine is `vigil_lb::selector` (the one the controller's pools match
//! with too); this module reads the API's structured `LabelSelector` into it, as
//! `metav1.LabelSelectorAsSelector` does, and gives MetalLB's duplicate checks their
//! identities.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use std::collections::BTreeMap;
use std::fmt;
pub use vigil_lb::selector::{Labels, Operator, Requirement, Selector, SelectorError};

/// Reading an API selector.
pub trait SelectorExt: Sized {
    /// Validates and converts a structured selector, as `LabelSelectorAsSelector` does.
    fn from_label_selector(ls: &LabelSelector) -> Result<Self, SelectorError>;
}

impl SelectorExt for Selector {
    fn from_label_selector(ls: &LabelSelector) -> Result<Self, SelectorError> {
        Self::from_parts(
            ls.match_labels
                .iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str())),
            ls.match_expressions.iter().flatten().map(|e| {
                (
                    e.key.as_str(),
                    e.operator.as_str(),
                    e.values.as_deref().unwrap_or_default(),
                )
            }),
        )
    }
}

/// One expression's identity: key, operator, sorted values.
pub(crate) type ExprIdentity = (String, String, Vec<String>);
/// A selector's identity: its labels and its expressions in order.
pub(crate) type SelectorIdentity = (BTreeMap<String, String>, Vec<ExprIdentity>);

/// A structured selector's identity for MetalLB's duplicate checks: the labels, and the
/// expressions in order with their values sorted (MetalLB compares the selectors' printed
/// form after sorting each expression's values).
pub(crate) fn duplicate_key(ls: &LabelSelector) -> SelectorIdentity {
    let labels = ls.match_labels.clone().unwrap_or_default();
    let exprs = ls
        .match_expressions
        .iter()
        .flatten()
        .map(expr_key)
        .collect();
    (labels, exprs)
}

pub(crate) fn expr_key(e: &LabelSelectorRequirement) -> ExprIdentity {
    let mut values = e.values.clone().unwrap_or_default();
    values.sort();
    (e.key.clone(), e.operator.clone(), values)
}

/// A short, stable rendering of a structured selector for error messages.
pub(crate) struct Shown<'a>(pub &'a LabelSelector);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (labels, exprs) = duplicate_key(self.0);
        let mut parts: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.extend(
            exprs
                .iter()
                .map(|(k, op, vs)| format!("{k} {op} ({})", vs.join(","))),
        );
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ls(yaml: &str) -> LabelSelector {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn structured_selectors_match_as_apimachinery() {
        let s = Selector::from_label_selector(&ls(
            "matchLabels: {zone: a}\nmatchExpressions:\n- {key: tier, operator: NotIn, values: [db]}\n- {key: gpu, operator: DoesNotExist}\n",
        ))
        .unwrap();
        assert!(s.matches(&labels(&[("zone", "a")])));
        assert!(s.matches(&labels(&[("zone", "a"), ("tier", "web")])));
        assert!(!s.matches(&labels(&[("zone", "a"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("zone", "a"), ("gpu", "")])));
        assert!(!s.matches(&labels(&[("zone", "b")])));
        assert!(
            Selector::from_label_selector(&ls("{}"))
                .unwrap()
                .is_everything()
        );
    }

    #[test]
    fn bad_structured_selectors_are_errors() {
        let e = |y| Selector::from_label_selector(&ls(y)).unwrap_err();
        assert_eq!(
            e("matchExpressions: [{key: a, operator: Equals, values: [x]}]"),
            SelectorError::Operator("Equals".into())
        );
        assert_eq!(
            e("matchExpressions: [{key: a, operator: In}]"),
            SelectorError::NoValues("a".into())
        );
        assert_eq!(
            e("matchExpressions: [{key: a, operator: Exists, values: [x]}]"),
            SelectorError::UnexpectedValues("a".into())
        );
        assert!(matches!(
            e("matchLabels: {'-a': x}"),
            SelectorError::Key { .. }
        ));
        assert!(matches!(
            e("matchLabels: {a: 'x y'}"),
            SelectorError::Value { .. }
        ));
    }
}
