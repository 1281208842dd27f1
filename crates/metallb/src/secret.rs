//! The memberlist key MetalLB derives from the `secretkey` file of its Secret.
//!
//! The file is read raw (no trimming) at startup. MetalLB's derivation changed between
//! releases, and the key must match the Go speakers' for a mixed cluster to talk:
//!
//! - v0.16.2 and later (`internal/speakerlist/speakerlist.go:secretKeyFor`): the SHA-256 of
//!   the file's bytes (AES-256);
//! - v0.14.0 to v0.16.1: `sha256.New().Sum(secret)[:32]`. `Sum` *appends* the digest of the
//!   empty input to its argument, so the key is the secret's bytes followed by
//!   SHA-256("") = e3b0c442..., cut to 32 bytes (a secret of 32 bytes or more is its own
//!   first 32 bytes);
//! - v0.13 and earlier: the same, cut to 16 bytes (AES-128), per the research note; not
//!   checked against that release's source here.
//!
//! An empty secret (or no secret path) means no encryption, with a warning, in every version.
//!
//! Verified independently: a throw-away Go program (`/tmp`, not kept) printed both Go
//! derivations for the secrets in the tests, and Python's hashlib gave the same bytes.
//!
//! # The keyring form (vigil's, for rotation)
//!
//! `vigil controller` rotates the memberlist key through one more data entry in the same
//! Secret, [`KEYRING_ENTRY`], a small JSON document ([`KeyringForm`]): the secrets in
//! MetalLB's format (each derived into a memberlist key exactly as `secretkey` is), primary
//! first, and the rotation phase with the time it began. The primary is always the secret in
//! `secretkey` as well (both are written in one update), so a MetalLB speaker, which reads
//! `secretkey` once at start, joins with the key every vigil speaker sends with. Each secret
//! is named in acknowledgements by its [`key_id`], a short hash that reveals nothing of it.
//!
//! ```json
//! {"version":1,"phase":"adding","keys":["<primary>","<new>"],"since":1796173200}
//! ```

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use vigil_gossip::wire::SecretKey;

/// The Secret's data entry (and mounted file) holding the [`KeyringForm`].
pub const KEYRING_ENTRY: &str = "vigil-keyring";

/// The only [`KeyringForm::version`] understood.
pub const KEYRING_VERSION: u32 = 1;

/// Where a rotation stands; the number of keys follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// One key, in use everywhere: waiting for the next rotation.
    Steady,
    /// `[primary, new]`: speakers install the new key; everyone still sends with the primary.
    Adding,
    /// `[new primary, old]`: speakers send with the new key; the old one is still accepted.
    Switching,
}

impl Phase {
    /// The word used in the form, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Adding => "adding",
            Self::Switching => "switching",
        }
    }

    fn key_count(self) -> usize {
        match self {
            Self::Steady => 1,
            Self::Adding | Self::Switching => 2,
        }
    }
}

/// The keyring entry of the memberlist Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyringForm {
    /// [`KEYRING_VERSION`].
    pub version: u32,
    /// The rotation's phase.
    pub phase: Phase,
    /// Secrets in MetalLB's format, primary first (one when steady, two while rotating).
    pub keys: Vec<String>,
    /// When this phase began, in seconds since the Unix epoch.
    pub since: u64,
}

/// Why a keyring entry was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    /// Not JSON of the expected shape.
    #[error("{KEYRING_ENTRY}: not a keyring document: {0}")]
    Syntax(String),
    /// A version this speaker does not know.
    #[error("{KEYRING_ENTRY}: version {0} (this speaker knows {KEYRING_VERSION})")]
    Version(u32),
    /// The number of keys does not fit the phase.
    #[error("{KEYRING_ENTRY}: phase {phase} needs {needed} key(s), found {found}")]
    KeyCount {
        /// The phase.
        phase: &'static str,
        /// Keys it needs.
        needed: usize,
        /// Keys found.
        found: usize,
    },
    /// An empty or repeated secret.
    #[error("{KEYRING_ENTRY}: keys must be distinct and non-empty")]
    BadKey,
    /// The primary differs from `secretkey`.
    #[error("{KEYRING_ENTRY}: the primary key is not the one in {SECRET_KEY_FILE}")]
    NotSecretKey,
    /// A secret does not derive into a memberlist key.
    #[error("{KEYRING_ENTRY}: not a memberlist key: {0}")]
    Key(String),
}

impl KeyringForm {
    /// A steady keyring of one secret.
    pub fn steady(secret: String, since: u64) -> Self {
        Self {
            version: KEYRING_VERSION,
            phase: Phase::Steady,
            keys: vec![secret],
            since,
        }
    }

    /// Parses and checks the entry against the Secret's `secretkey` (when the Secret has
    /// one): the version, the key count for the phase, distinct non-empty keys, and the
    /// primary being `secretkey`.
    pub fn parse(entry: &[u8], secret_key: Option<&[u8]>) -> Result<Self, KeyringError> {
        let form: Self =
            serde_json::from_slice(entry).map_err(|e| KeyringError::Syntax(e.to_string()))?;
        form.check(secret_key)?;
        Ok(form)
    }

    /// The checks of [`KeyringForm::parse`].
    pub fn check(&self, secret_key: Option<&[u8]>) -> Result<(), KeyringError> {
        if self.version != KEYRING_VERSION {
            return Err(KeyringError::Version(self.version));
        }
        let needed = self.phase.key_count();
        if self.keys.len() != needed {
            return Err(KeyringError::KeyCount {
                phase: self.phase.as_str(),
                needed,
                found: self.keys.len(),
            });
        }
        if self.keys.iter().any(String::is_empty)
            || (self.keys.len() == 2 && self.keys[0] == self.keys[1])
        {
            return Err(KeyringError::BadKey);
        }
        if let Some(file) = secret_key
            && file != self.primary().as_bytes()
        {
            return Err(KeyringError::NotSecretKey);
        }
        Ok(())
    }

    /// The secret everyone sends with.
    pub fn primary(&self) -> &str {
        &self.keys[0]
    }

    /// The JSON text stored in the Secret.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a keyring serialises")
    }

    /// The memberlist keys, primary first, derived as `secretkey` is.
    pub fn memberlist_keys(
        &self,
        derivation: KeyDerivation,
    ) -> Result<Vec<SecretKey>, KeyringError> {
        self.keys
            .iter()
            .map(|s| {
                let bytes = memberlist_key(s.as_bytes(), derivation).ok_or(KeyringError::BadKey)?;
                SecretKey::new(&bytes).map_err(|e| KeyringError::Key(e.to_string()))
            })
            .collect()
    }

    /// The [`key_id`]s of the keys, primary first.
    pub fn key_ids(&self) -> Vec<String> {
        self.keys.iter().map(|s| key_id(s.as_bytes())).collect()
    }
}

/// A secret's name in acknowledgements, logs and events: 12 hex digits of a domain-separated
/// SHA-256 of the secret (48 bits of a hash of 128 random bits: enough to tell keys apart,
/// nothing to recover one from).
pub fn key_id(secret: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(b"vigil memberlist key id\0");
    hash.update(secret);
    let digest = hash.finalize();
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// The file MetalLB reads in `METALLB_ML_SECRET_KEY_PATH`.
pub const SECRET_KEY_FILE: &str = "secretkey";

/// Which MetalLB release's derivation to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyDerivation {
    /// v0.16.2 and later: SHA-256 of the secret.
    #[default]
    Sha256,
    /// v0.14.0 to v0.16.1: secret ‖ SHA-256(""), first 32 bytes.
    AppendEmptyDigest,
    /// v0.13 and earlier: secret ‖ SHA-256(""), first 16 bytes.
    AppendEmptyDigest16,
}

impl KeyDerivation {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha256 => "sha256",
            Self::AppendEmptyDigest => "v0.14",
            Self::AppendEmptyDigest16 => "v0.13",
        }
    }
}

impl std::str::FromStr for KeyDerivation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Self::Sha256, Self::AppendEmptyDigest, Self::AppendEmptyDigest16]
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!("unknown key derivation {s:?}: expected sha256 (MetalLB v0.16.2+), v0.14 (v0.14.0-v0.16.1) or v0.13")
            })
    }
}

/// The memberlist key for `secret` (the file's bytes), or `None` for an empty secret
/// (memberlist unencrypted).
pub fn memberlist_key(secret: &[u8], derivation: KeyDerivation) -> Option<Vec<u8>> {
    if secret.is_empty() {
        return None;
    }
    let appended = |len: usize| {
        let mut key = secret.to_vec();
        key.extend_from_slice(&Sha256::digest(b""));
        key.truncate(len);
        key
    };
    Some(match derivation {
        KeyDerivation::Sha256 => Sha256::digest(secret).to_vec(),
        KeyDerivation::AppendEmptyDigest => appended(32),
        KeyDerivation::AppendEmptyDigest16 => appended(16),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_key(secret: &str, d: KeyDerivation) -> String {
        hex::encode(memberlist_key(secret.as_bytes(), d).unwrap())
    }

    // Vectors printed by Go 1.26 (crypto/sha256: `sha256.New().Sum([]byte(s))[:32]` and
    // `sha256.Sum256([]byte(s))`) and matched by Python's hashlib.
    #[test]
    fn keys_match_go() {
        assert_eq!(
            hex_key("abc", KeyDerivation::AppendEmptyDigest),
            "616263e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b78"
        );
        assert_eq!(
            hex_key("abc", KeyDerivation::Sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // A 22-character controller-generated secret.
        assert_eq!(
            hex_key("R1xS7d0ZtX2mIunQx6Bq9g", KeyDerivation::AppendEmptyDigest),
            "523178533764305a7458326d49756e51783642713967e3b0c44298fc1c149afb"
        );
        assert_eq!(
            hex_key("R1xS7d0ZtX2mIunQx6Bq9g", KeyDerivation::Sha256),
            "711a836ee7abd5a5093361c4d0b6af9418132a006e14a95a4fcb5f3093de2234"
        );
        let long = "0123456789abcdefghijklmnopqrstuvwxyzABCDEF";
        assert_eq!(
            hex_key(long, KeyDerivation::AppendEmptyDigest),
            hex::encode(&long.as_bytes()[..32])
        );
        assert_eq!(
            hex_key(long, KeyDerivation::Sha256),
            "317ffe986075b7e00998075b03dba810feb18996648d1418c39ef129d326778e"
        );
        assert_eq!(
            hex_key("abc", KeyDerivation::AppendEmptyDigest16),
            "616263e3b0c44298fc1c149afbf4c899"
        );
    }

    #[test]
    fn keyring_form_round_trips_and_is_checked() {
        let form = KeyringForm {
            version: 1,
            phase: Phase::Adding,
            keys: vec!["old-secret".into(), "new-secret".into()],
            since: 1_796_173_200,
        };
        let text = form.to_json();
        assert_eq!(
            text,
            r#"{"version":1,"phase":"adding","keys":["old-secret","new-secret"],"since":1796173200}"#
        );
        assert_eq!(
            KeyringForm::parse(text.as_bytes(), Some(b"old-secret")),
            Ok(form.clone())
        );
        assert_eq!(
            KeyringForm::parse(text.as_bytes(), Some(b"new-secret")),
            Err(KeyringError::NotSecretKey)
        );
        let bad = |s: &str| KeyringForm::parse(s.as_bytes(), None).unwrap_err();
        assert!(matches!(bad("{"), KeyringError::Syntax(_)));
        assert_eq!(
            bad(r#"{"version":2,"phase":"steady","keys":["a"],"since":0}"#),
            KeyringError::Version(2)
        );
        assert!(matches!(
            bad(r#"{"version":1,"phase":"steady","keys":["a","b"],"since":0}"#),
            KeyringError::KeyCount {
                needed: 1,
                found: 2,
                ..
            }
        ));
        assert_eq!(
            bad(r#"{"version":1,"phase":"switching","keys":["a","a"],"since":0}"#),
            KeyringError::BadKey
        );
        assert!(matches!(
            bad(r#"{"version":1,"phase":"rotating","keys":["a"],"since":0}"#),
            KeyringError::Syntax(_)
        ));
        let keys = form.memberlist_keys(KeyDerivation::Sha256).unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(
            keys[0].as_bytes(),
            memberlist_key(b"old-secret", KeyDerivation::Sha256).unwrap()
        );
    }

    #[test]
    fn key_ids_are_short_distinct_and_stable() {
        let id = key_id(b"R1xS7d0ZtX2mIunQx6Bq9g");
        assert_eq!(id.len(), 12);
        assert_eq!(id, key_id(b"R1xS7d0ZtX2mIunQx6Bq9g"));
        assert_ne!(id, key_id(b"R1xS7d0ZtX2mIunQx6Bq9h"));
        assert!(!id.contains("R1xS"));
    }

    #[test]
    fn empty_secret_means_no_encryption_and_newlines_count() {
        assert_eq!(memberlist_key(b"", KeyDerivation::Sha256), None);
        assert_ne!(
            memberlist_key(b"abc\n", KeyDerivation::Sha256),
            memberlist_key(b"abc", KeyDerivation::Sha256)
        );
        assert_eq!("v0.14".parse(), Ok(KeyDerivation::AppendEmptyDigest));
        assert!("md5".parse::<KeyDerivation>().is_err());
    }
}
