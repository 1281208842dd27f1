//! Kubernetes label selectors as apimachinery evaluates them: vigil's one selector engine.
//! The structured `LabelSelector` of MetalLB's CRDs (`metav1.LabelSelectorAsSelector`) comes
//! in through [`Selector::from_parts`] (the API types are read in `vigil-metallb`), the string
//! form of `METALLB_ML_LABELS` through [`Selector::parse`] (`labels.Parse`). The speaker's
//! advertisements and the controller's pools match with the same code.
//!
//! Rules, in our words:
//! - an empty selector (no labels, no expressions) matches everything;
//! - `matchLabels` entries and `matchExpressions` all have to match (AND);
//! - `In` needs the key with one of the values; `NotIn` matches a missing key or another value;
//!   `Exists` / `DoesNotExist` test the key only;
//! - `In` / `NotIn` need at least one value; `Exists` / `DoesNotExist` take none; any other
//!   operator is an error; keys must be qualified names and values label values.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Labels of an object: key to value.
pub type Labels = BTreeMap<String, String>;

/// One requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value` (and `matchLabels`).
    Equals,
    /// `key!=value`.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`.
    NotIn,
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
}

/// One requirement: all of a selector's requirements must hold.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// How it is tested.
    pub op: Operator,
    /// The values (sorted); empty for `Exists` / `DoesNotExist`.
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// Whether `labels` satisfy it.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.op {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A parsed, validated selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

/// Why a selector is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{0:?} is not a valid label selector operator")]
    Operator(String),
    /// `In` / `NotIn` with no values.
    #[error("key {0:?}: for 'in', 'notin' operators, values set can't be empty")]
    NoValues(String),
    /// `Exists` / `DoesNotExist` with values.
    #[error("key {0:?}: values set must be empty for exists and does not exist")]
    UnexpectedValues(String),
    /// A key that is not a qualified name.
    #[error("invalid label key {key:?}: {why}")]
    Key {
        /// The key.
        key: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A value that is not a label value.
    #[error("invalid label value {value:?} for key {key:?}: {why}")]
    Value {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A string selector that does not parse.
    #[error("cannot parse label selector {input:?}: {why}")]
    Syntax {
        /// The selector text.
        input: String,
        /// What is wrong.
        why: String,
    },
}

impl Selector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Validates and converts a structured selector, as `LabelSelectorAsSelector` does:
    /// `match_labels` pairs and `match_expressions` as (key, operator as the API spells it,
    /// values).
    pub fn from_parts<'a>(
        match_labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        match_expressions: impl IntoIterator<Item = (&'a str, &'a str, &'a [String])>,
    ) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in match_labels {
            requirements.push(requirement(k, Operator::Equals, [v.to_string()].into())?);
        }
        for (key, operator, values) in match_expressions {
            let op = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => return Err(SelectorError::Operator(other.to_string())),
            };
            requirements.push(requirement(key, op, values.iter().cloned().collect())?);
        }
        requirements.sort();
        Ok(Self { requirements })
    }

    /// The requirements, sorted.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether this selector matches everything.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Parses the string form (`app=metallb,component=speaker`, `k!=v`, `k in (a,b)`,
    /// `k notin (a)`, `k`, `!k`), as `labels.Parse` does. The empty string matches everything.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        let syntax = |why: &str| SelectorError::Syntax {
            input: input.to_string(),
            why: why.to_string(),
        };
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        for part in split_top_level(input).map_err(&syntax)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(syntax("empty requirement"));
            }
            if let Some(key) = part.strip_prefix('!') {
                requirements.push(requirement(
                    key.trim(),
                    Operator::DoesNotExist,
                    BTreeSet::new(),
                )?);
                continue;
            }
            if let Some((key, value)) = part.split_once("!=") {
                requirements.push(requirement(
                    key.trim(),
                    Operator::NotEquals,
                    [value.trim().to_string()].into(),
                )?);
                continue;
            }
            if let Some((key, value)) = part.split_once('=') {
                let value = value.strip_prefix('=').unwrap_or(value);
                requirements.push(requirement(
                    key.trim(),
                    Operator::Equals,
                    [value.trim().to_string()].into(),
                )?);
                continue;
            }
            let mut words = part.splitn(2, char::is_whitespace);
            let key = words.next().unwrap_or_default();
            let rest = words.next().unwrap_or_default().trim();
            if rest.is_empty() {
                requirements.push(requirement(key, Operator::Exists, BTreeSet::new())?);
                continue;
            }
            let (op, list) = if let Some(list) = rest.strip_prefix("notin") {
                (Operator::NotIn, list)
            } else if let Some(list) = rest.strip_prefix("in") {
                (Operator::In, list)
            } else {
                return Err(syntax("expected =, ==, !=, in or notin after the key"));
            };
            let list = list
                .trim()
                .strip_prefix('(')
                .and_then(|l| l.strip_suffix(')'))
                .ok_or_else(|| syntax("expected a parenthesised value list"))?;
            let values = list
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            requirements.push(requirement(key, op, values)?);
        }
        requirements.sort();
        Ok(Self { requirements })
    }
}

impl fmt::Display for Selector {
    /// Kubernetes' text form (`k=v,k2 in (a,b),!k3`), which [`Selector::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| {
                let values = r.values.iter().cloned().collect::<Vec<_>>().join(",");
                match r.op {
                    Operator::Equals => format!("{}={values}", r.key),
                    Operator::NotEquals => format!("{}!={values}", r.key),
                    Operator::In => format!("{} in ({values})", r.key),
                    Operator::NotIn => format!("{} notin ({values})", r.key),
                    Operator::Exists => r.key.clone(),
                    Operator::DoesNotExist => format!("!{}", r.key),
                }
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, &'static str> {
    let (mut depth, mut start, mut parts) = (0usize, 0, Vec::new());
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced parentheses")?,
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses");
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn requirement(
    key: &str,
    op: Operator,
    values: BTreeSet<String>,
) -> Result<Requirement, SelectorError> {
    check_key(key)?;
    match op {
        Operator::In | Operator::NotIn if values.is_empty() => {
            return Err(SelectorError::NoValues(key.to_string()));
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            return Err(SelectorError::UnexpectedValues(key.to_string()));
        }
        _ => {}
    }
    for v in &values {
        if let Err(why) = check_value(v) {
            return Err(SelectorError::Value {
                key: key.to_string(),
                value: v.clone(),
                why,
            });
        }
    }
    Ok(Requirement {
        key: key.to_string(),
        op,
        values,
    })
}

/// A qualified name: `[prefix/]name`, the prefix a DNS subdomain of at most 253 characters
/// (apimachinery's `IsDNS1123Subdomain` bounds the whole prefix, not each of its labels),
/// the name 1..=63 alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
fn check_key(key: &str) -> Result<(), SelectorError> {
    let err = |why| SelectorError::Key {
        key: key.to_string(),
        why,
    };
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if prefix.is_empty() || prefix.len() > 253 || !prefix.split('.').all(label_ok) {
            return Err(err("the prefix must be a lower-case DNS subdomain"));
        }
    }
    if name.is_empty() {
        return Err(err("the name part must not be empty"));
    }
    if name.len() > 63 {
        return Err(err("the name part must be at most 63 characters"));
    }
    if !label_value_shape(name) {
        return Err(err(
            "the name part must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
        ));
    }
    Ok(())
}

fn check_value(value: &str) -> Result<(), &'static str> {
    if value.len() > 63 {
        return Err("must be at most 63 characters");
    }
    if !value.is_empty() && !label_value_shape(value) {
        return Err(
            "must be alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
        );
    }
    Ok(())
}

fn label_value_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
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

    #[test]
    fn string_selectors_parse_as_labels_parse() {
        let s = Selector::parse("app=metallb, component==speaker").unwrap();
        assert!(s.matches(&labels(&[("app", "metallb"), ("component", "speaker")])));
        assert!(!s.matches(&labels(&[("app", "metallb")])));
        let s = Selector::parse("app.kubernetes.io/name in (metallb, vigil),!canary,tier!=db,zone")
            .unwrap();
        assert!(s.matches(&labels(&[
            ("app.kubernetes.io/name", "vigil"),
            ("zone", "x")
        ])));
        assert!(!s.matches(&labels(&[
            ("app.kubernetes.io/name", "vigil"),
            ("zone", "x"),
            ("canary", "1")
        ])));
        assert!(Selector::parse("").unwrap().is_everything());
        assert!(Selector::parse("a in (b").is_err());
        assert!(Selector::parse("a,,b").is_err());
        assert!(Selector::parse("a notin ()").is_err());
    }

    #[test]
    fn text_form_reads_back() {
        for text in ["", "a=b", "a!=b,c in (x,y),!d,e", "k notin (v)"] {
            let s = Selector::parse(text).unwrap();
            assert_eq!(Selector::parse(&s.to_string()).unwrap(), s, "{text}");
        }
    }
}
