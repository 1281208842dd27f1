//! Keyring files: a JSON array of base64 keys, the first one primary (the format Serf and
//! Consul use for their keyring files), e.g. `["T9jncgl9mbLus+baTTa7q7nPSUrXwbDi2dhbtqir37s="]`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures_util::Stream;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;
use vigil_gossip::wire::SecretKey;

/// Why a keyring file or key could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyringFileError {
    /// The file could not be read.
    #[error("cannot read keyring file {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// The file is not a JSON array of strings.
    #[error("keyring file {path} is not a JSON array of base64 keys: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The parse error.
        reason: String,
    },
    /// The file holds no key.
    #[error("keyring file {0} holds no key")]
    Empty(PathBuf),
    /// A key is not valid base64 or not 16, 24 or 32 bytes long.
    #[error("key #{index}: {reason}")]
    BadKey {
        /// Position in the file (0 = primary), or 0 for a single key.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// Decodes one base64 key of 16, 24 or 32 bytes (AES-128, -192, -256).
pub fn parse_key(text: &str) -> Result<SecretKey, KeyringFileError> {
    let bad = |reason: String| KeyringFileError::BadKey { index: 0, reason };
    let bytes = STANDARD
        .decode(text.trim())
        .map_err(|e| bad(format!("not base64: {e}")))?;
    SecretKey::new(&bytes).map_err(|_| {
        bad(format!(
            "{} bytes; a key must be 16, 24 or 32 bytes",
            bytes.len()
        ))
    })
}

/// Parses keyring file contents; the first key is the primary.
pub(crate) fn parse_keyring(path: &Path, text: &str) -> Result<Vec<SecretKey>, KeyringFileError> {
    let list: Vec<String> = serde_json::from_str(text).map_err(|e| KeyringFileError::Format {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    if list.is_empty() {
        return Err(KeyringFileError::Empty(path.to_owned()));
    }
    list.iter()
        .enumerate()
        .map(|(index, k)| {
            parse_key(k).map_err(|e| match e {
                KeyringFileError::BadKey { reason, .. } => {
                    KeyringFileError::BadKey { index, reason }
                }
                other => other,
            })
        })
        .collect()
}

/// Reads a keyring file; the first key is the primary.
pub fn read_keyring_file(path: &Path) -> Result<Vec<SecretKey>, KeyringFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| KeyringFileError::Read {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    parse_keyring(path, &text)
}

/// The keyring file's keys each time its contents change, or why they cannot be used.
pub type KeyringChanges =
    Pin<Box<dyn Stream<Item = Result<Vec<SecretKey>, KeyringFileError>> + Send + 'static>>;

/// Reads a keyring file now, and returns its keys with a stream that yields the file's keys
/// again each time its contents change (looked at every `poll`), or why the new contents
/// cannot be used (the caller keeps the keys in force). Hand the stream to the speaker, which
/// applies each list with [`Memberlist::set_keyring`](crate::Memberlist::set_keyring).
pub fn watch_keyring_file(
    path: PathBuf,
    poll: Duration,
) -> Result<(Vec<SecretKey>, KeyringChanges), KeyringFileError> {
    let text = std::fs::read_to_string(&path).map_err(|e| KeyringFileError::Read {
        path: path.clone(),
        reason: e.to_string(),
    })?;
    let keys = parse_keyring(&path, &text)?;
    let mut ticker = tokio::time::interval(poll.max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = (path, Some(text), ticker);
    let changes = futures_util::stream::unfold(state, |(path, mut seen, mut ticker)| async move {
        loop {
            ticker.tick().await;
            let item = match std::fs::read_to_string(&path) {
                Ok(text) if seen.as_deref() == Some(text.as_str()) => continue,
                Ok(text) => {
                    let parsed = parse_keyring(&path, &text);
                    seen = Some(text);
                    parsed
                }
                // Report a read failure once, and read the file again when it is back.
                Err(_) if seen.is_none() => continue,
                Err(e) => {
                    seen = None;
                    Err(KeyringFileError::Read {
                        path: path.clone(),
                        reason: e.to_string(),
                    })
                }
            };
            return Some((item, (path, seen, ticker)));
        }
    });
    Ok((keys, Box::pin(changes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_of_every_size_and_rejects_others() {
        let p = Path::new("k.json");
        let keys = parse_keyring(
            p,
            r#"["AAAAAAAAAAAAAAAAAAAAAA==", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]"#,
        )
        .unwrap();
        assert_eq!(
            keys.iter().map(|k| k.as_bytes().len()).collect::<Vec<_>>(),
            [16, 24, 32]
        );
        assert!(matches!(
            parse_keyring(p, r#"["AAAA"]"#),
            Err(KeyringFileError::BadKey { index: 0, .. })
        ));
        assert!(matches!(
            parse_keyring(p, r#"["AAAAAAAAAAAAAAAAAAAAAA==", "!!"]"#),
            Err(KeyringFileError::BadKey { index: 1, .. })
        ));
        assert!(matches!(
            parse_keyring(p, "[]"),
            Err(KeyringFileError::Empty(_))
        ));
        assert!(matches!(
            parse_keyring(p, "{}"),
            Err(KeyringFileError::Format { .. })
        ));
    }
}
