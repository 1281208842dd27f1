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

use sha2::{Digest, Sha256};

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
