//! `hasLabelMsg` (memberlist 0.3.0+): `[244][len: u8, 1..=255][label]` before a UDP packet, or
//! once at the start of a TCP stream written by its dialer. A label keeps clusters that share
//! addresses apart; with encryption it is also authenticated as GCM additional data.

use super::{DecodeError, MessageType};
use core::fmt;

/// A cluster label: up to 255 bytes; empty means "no label".
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Label(Vec<u8>);

/// A label longer than 255 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelTooLong(pub usize);

impl fmt::Display for LabelTooLong {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "label is {} bytes; at most 255 are allowed", self.0)
    }
}

impl std::error::Error for LabelTooLong {}

impl Label {
    /// Checks the length.
    pub fn new(label: impl Into<Vec<u8>>) -> Result<Self, LabelTooLong> {
        let label = label.into();
        if label.len() > 255 {
            return Err(LabelTooLong(label.len()));
        }
        Ok(Self(label))
    }

    /// The label's bytes (empty when there is none).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether there is no label.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes the header adds to each packet (0 without a label).
    pub fn overhead(&self) -> usize {
        if self.0.is_empty() {
            0
        } else {
            2 + self.0.len()
        }
    }

    /// Appends the header; nothing when there is no label.
    pub fn write_header(&self, out: &mut Vec<u8>) {
        if !self.0.is_empty() {
            out.push(MessageType::HasLabel.into());
            out.push(self.0.len() as u8);
            out.extend_from_slice(&self.0);
        }
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Label({:?})", String::from_utf8_lossy(&self.0))
    }
}

/// Splits a label header off the front of `buf`, if there is one.
pub fn split(buf: &[u8]) -> Result<(Option<&[u8]>, &[u8]), DecodeError> {
    match buf {
        [244, rest @ ..] => {
            let (&len, rest) = rest.split_first().ok_or(DecodeError::Truncated)?;
            if len == 0 {
                return Err(DecodeError::EmptyLabel);
            }
            let len = usize::from(len);
            if rest.len() < len {
                return Err(DecodeError::Truncated);
            }
            let (label, rest) = rest.split_at(len);
            Ok((Some(label), rest))
        }
        _ => Ok((None, buf)),
    }
}

/// Go's inbound rule: the received label (absent = empty) must equal ours, unless we skip the
/// check, in which case a label header is an error and unlabelled input counts as ours.
pub fn check(
    received: Option<&[u8]>,
    ours: &Label,
    skip_inbound_check: bool,
) -> Result<(), DecodeError> {
    match (skip_inbound_check, received) {
        (true, Some(_)) => Err(DecodeError::UnexpectedLabel),
        (true, None) => Ok(()),
        (false, r) if r.unwrap_or_default() == ours.as_bytes() => Ok(()),
        (false, _) => Err(DecodeError::LabelMismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_errors() {
        let label = Label::new("foo").unwrap();
        let mut out = Vec::new();
        label.write_header(&mut out);
        out.extend_from_slice(b"rest");
        assert_eq!(hex::encode(&out[..5]), "f403666f6f");
        assert_eq!(split(&out), Ok((Some(&b"foo"[..]), &b"rest"[..])));
        assert_eq!(split(&[244, 0, 1]), Err(DecodeError::EmptyLabel));
        assert_eq!(split(&[244, 5, 1]), Err(DecodeError::Truncated));
        assert_eq!(split(&[244]), Err(DecodeError::Truncated));
        assert!(Label::new(vec![b'x'; 255]).is_ok());
        assert_eq!(Label::new(vec![b'x'; 256]), Err(LabelTooLong(256)));
    }

    #[test]
    fn inbound_rules() {
        let foo = Label::new("foo").unwrap();
        let none = Label::default();
        assert_eq!(check(Some(b"foo"), &foo, false), Ok(()));
        assert_eq!(check(None, &foo, false), Err(DecodeError::LabelMismatch));
        assert_eq!(
            check(Some(b"bar"), &foo, false),
            Err(DecodeError::LabelMismatch)
        );
        assert_eq!(
            check(Some(b"foo"), &none, false),
            Err(DecodeError::LabelMismatch)
        );
        assert_eq!(check(None, &none, false), Ok(()));
        assert_eq!(check(None, &foo, true), Ok(()));
        assert_eq!(
            check(Some(b"foo"), &foo, true),
            Err(DecodeError::UnexpectedLabel)
        );
    }
}
