//! AES-GCM encryption as memberlist does it, and the keyring that holds its keys.
//!
//! Layout of an encrypted message: `[version][nonce: 12][ciphertext][tag: 16]`. Version 1
//! encrypts the plaintext as is; version 0 (spoken only by nodes on protocol version 1) first
//! pads it PKCS#7-style to a multiple of 16. The key's length picks AES-128, -192 or -256.

use super::DecodeError;
use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::aes::Aes192;
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm, Nonce, Tag};
use core::fmt;
use rand_core::CryptoRngCore;

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const BLOCK_LEN: usize = 16;

/// Which encryption layout to write. Both are always accepted on receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncryptionVersion {
    /// PKCS#7-padded plaintext; what protocol-version-1 nodes write.
    V0,
    /// Unpadded plaintext; what every newer node writes.
    #[default]
    V1,
}

impl EncryptionVersion {
    fn byte(self) -> u8 {
        match self {
            Self::V0 => 0,
            Self::V1 => 1,
        }
    }

    /// Bytes encryption adds in the worst case (Go's `encryptOverhead`).
    pub fn overhead(self) -> usize {
        match self {
            Self::V0 => 1 + NONCE_LEN + BLOCK_LEN + TAG_LEN,
            Self::V1 => 1 + NONCE_LEN + TAG_LEN,
        }
    }

    /// Length of the encrypted form of `plaintext_len` bytes (Go's `encryptedLength`).
    pub fn encrypted_len(self, plaintext_len: usize) -> usize {
        match self {
            Self::V0 => 1 + NONCE_LEN + (plaintext_len / BLOCK_LEN + 1) * BLOCK_LEN + TAG_LEN,
            Self::V1 => 1 + NONCE_LEN + plaintext_len + TAG_LEN,
        }
    }
}

/// Why a key or keyring change was refused. Nothing changed when one of these is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyringError {
    /// Keys must be 16, 24 or 32 bytes (AES-128, -192, -256); this one had the given length.
    InvalidKeyLength(usize),
    /// The key to make primary is not installed.
    NotInstalled,
    /// The primary key cannot be removed; make another key primary first.
    RemovePrimary,
    /// The keyring is empty, so there is nothing to encrypt with.
    Empty,
}

impl fmt::Display for KeyringError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidKeyLength(n) => {
                write!(f, "key is {n} bytes; it must be 16, 24 or 32 bytes")
            }
            Self::NotInstalled => f.write_str("the requested key is not in the keyring"),
            Self::RemovePrimary => f.write_str("removing the primary key is not allowed"),
            Self::Empty => f.write_str("the keyring has no keys"),
        }
    }
}

impl std::error::Error for KeyringError {}

/// One AES key with its expanded cipher, ready to use.
#[derive(Clone)]
pub struct SecretKey {
    bytes: Vec<u8>,
    cipher: Cipher,
}

#[derive(Clone)]
enum Cipher {
    Aes128(Aes128Gcm),
    Aes192(AesGcm<Aes192, U12>),
    Aes256(Aes256Gcm),
}

impl SecretKey {
    /// Accepts 16, 24 or 32 bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, KeyringError> {
        let cipher = match bytes.len() {
            16 => Cipher::Aes128(Aes128Gcm::new_from_slice(bytes).expect("length checked")),
            24 => Cipher::Aes192(AesGcm::new_from_slice(bytes).expect("length checked")),
            32 => Cipher::Aes256(Aes256Gcm::new_from_slice(bytes).expect("length checked")),
            n => return Err(KeyringError::InvalidKeyLength(n)),
        };
        Ok(Self {
            bytes: bytes.to_vec(),
            cipher,
        })
    }

    /// The raw key.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn seal(&self, nonce: &[u8; NONCE_LEN], aad: &[u8], buf: &mut [u8]) -> Tag {
        let nonce = Nonce::from_slice(nonce);
        let result = match &self.cipher {
            Cipher::Aes128(c) => c.encrypt_in_place_detached(nonce, aad, buf),
            Cipher::Aes192(c) => c.encrypt_in_place_detached(nonce, aad, buf),
            Cipher::Aes256(c) => c.encrypt_in_place_detached(nonce, aad, buf),
        };
        result.expect("AES-GCM accepts any message memberlist can carry")
    }

    fn open(&self, nonce: &[u8], aad: &[u8], buf: &mut [u8], tag: &[u8]) -> bool {
        let nonce = Nonce::from_slice(nonce);
        let tag = Tag::from_slice(tag);
        match &self.cipher {
            Cipher::Aes128(c) => c.decrypt_in_place_detached(nonce, aad, buf, tag),
            Cipher::Aes192(c) => c.decrypt_in_place_detached(nonce, aad, buf, tag),
            Cipher::Aes256(c) => c.decrypt_in_place_detached(nonce, aad, buf, tag),
        }
        .is_ok()
    }
}

impl PartialEq for SecretKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for SecretKey {}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        write!(f, "SecretKey(AES-{})", self.bytes.len() * 8)
    }
}

/// Appends `plaintext` encrypted under `key` with the given nonce. Production code gets the
/// nonce from [`Keyring::encrypt`]; a fixed nonce is for known-answer tests.
pub fn encrypt_with_nonce(
    version: EncryptionVersion,
    key: &SecretKey,
    nonce: &[u8; NONCE_LEN],
    plaintext: &[u8],
    aad: &[u8],
    out: &mut Vec<u8>,
) {
    out.reserve(version.encrypted_len(plaintext.len()));
    out.push(version.byte());
    out.extend_from_slice(nonce);
    let start = out.len();
    out.extend_from_slice(plaintext);
    if version == EncryptionVersion::V0 {
        let pad = BLOCK_LEN - plaintext.len() % BLOCK_LEN;
        out.extend(core::iter::repeat_n(pad as u8, pad));
    }
    let tag = key.seal(nonce, aad, &mut out[start..]);
    out.extend_from_slice(&tag);
}

/// Tries one key on an encrypted message; `None` if it does not authenticate.
fn decrypt_with(key: &SecretKey, msg: &[u8], aad: &[u8]) -> Option<Result<Vec<u8>, DecodeError>> {
    let (version, rest) = msg.split_first()?;
    let (nonce, rest) = rest.split_at(NONCE_LEN);
    let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
    let mut plain = ciphertext.to_vec();
    if !key.open(nonce, aad, &mut plain, tag) {
        return None;
    }
    if *version == 0 {
        // Go strips the pad by its last byte without validating it; a pad longer than the
        // message would make Go panic, so refuse it instead.
        let pad = usize::from(*plain.last()?);
        if pad > plain.len() {
            return Some(Err(DecodeError::BadPadding));
        }
        plain.truncate(plain.len() - pad);
    }
    Some(Ok(plain))
}

/// memberlist's keyring: an ordered set of keys whose first is the primary. The primary
/// encrypts; every key is tried, primary first, to decrypt. Rules follow Go's `Keyring`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keyring {
    keys: Vec<SecretKey>,
}

impl Keyring {
    /// A keyring with `primary` first, then the other keys in order (duplicates dropped).
    pub fn new(primary: SecretKey, others: impl IntoIterator<Item = SecretKey>) -> Self {
        let mut ring = Self {
            keys: vec![primary],
        };
        for key in others {
            ring.install(key);
        }
        ring
    }

    /// Whether there are keys, i.e. whether encryption is on.
    pub fn is_enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The installed keys, primary first.
    pub fn keys(&self) -> &[SecretKey] {
        &self.keys
    }

    /// The key that encrypts.
    pub fn primary(&self) -> Option<&SecretKey> {
        self.keys.first()
    }

    /// Go's `AddKey`: installs a key for decryption (appended; primary only if the ring was
    /// empty). Installing a key twice changes nothing.
    pub fn install(&mut self, key: SecretKey) {
        if !self.keys.contains(&key) {
            self.keys.push(key);
        }
    }

    /// Go's `UseKey`: makes an installed key the primary; the others keep their order.
    pub fn use_key(&mut self, key: &[u8]) -> Result<(), KeyringError> {
        let i = self
            .keys
            .iter()
            .position(|k| k.as_bytes() == key)
            .ok_or(KeyringError::NotInstalled)?;
        let k = self.keys.remove(i);
        self.keys.insert(0, k);
        Ok(())
    }

    /// Go's `RemoveKey`: removes a key that is not the primary (absent keys are fine).
    pub fn remove(&mut self, key: &[u8]) -> Result<(), KeyringError> {
        if self.primary().is_some_and(|p| p.as_bytes() == key) {
            return Err(KeyringError::RemovePrimary);
        }
        self.keys.retain(|k| k.as_bytes() != key);
        Ok(())
    }

    /// Appends `plaintext` encrypted with the primary key and a fresh random nonce.
    pub fn encrypt(
        &self,
        version: EncryptionVersion,
        rng: &mut impl CryptoRngCore,
        plaintext: &[u8],
        aad: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), KeyringError> {
        let key = self.primary().ok_or(KeyringError::Empty)?;
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        encrypt_with_nonce(version, key, &nonce, plaintext, aad, out);
        Ok(())
    }

    /// Decrypts a message of either version with the first key that authenticates it.
    pub fn decrypt(&self, msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let (&version, _) = msg.split_first().ok_or(DecodeError::Empty)?;
        let min = match version {
            0 => EncryptionVersion::V0.encrypted_len(0),
            1 => EncryptionVersion::V1.encrypted_len(0),
            v => return Err(DecodeError::UnknownEncryptionVersion(v)),
        };
        if msg.len() < min {
            return Err(DecodeError::CiphertextTooShort);
        }
        if self.keys.is_empty() {
            return Err(DecodeError::EncryptionMismatch);
        }
        self.keys
            .iter()
            .find_map(|key| decrypt_with(key, msg, aad))
            .unwrap_or(Err(DecodeError::NoKeyDecrypts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(first: u8, len: usize) -> SecretKey {
        SecretKey::new(&(first..first + len as u8).collect::<Vec<_>>()).unwrap()
    }

    const NONCE: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
    const PLAIN: &[u8] = b"this is a plain text message";

    // Known answers computed with Go's crypto/aes + cipher.NewGCM (research note, 9.2).
    #[test]
    fn known_answers() {
        let k = key(0, 16);
        let cases = [
            (
                EncryptionVersion::V1,
                &b""[..],
                "01000102030405060708090a0be704cebd467284742af211e657ca1e28c743629273809885954096489047d84675c17bfb118e66203ff84f73",
            ),
            (
                EncryptionVersion::V1,
                &b"lbl"[..],
                "01000102030405060708090a0be704cebd467284742af211e657ca1e28c74362927380988595409648a2ef5b7fc56ea6baf2004150b3daf0c5",
            ),
            (
                EncryptionVersion::V0,
                &b""[..],
                "00000102030405060708090a0be704cebd467284742af211e657ca1e28c743629273809885954096481040a668d7470baa7b77278b8287fbe7be58403e",
            ),
        ];
        for (version, aad, want) in cases {
            let mut out = Vec::new();
            encrypt_with_nonce(version, &k, &NONCE, PLAIN, aad, &mut out);
            assert_eq!(hex::encode(&out), want, "{version:?} aad={aad:?}");
            assert_eq!(out.len(), version.encrypted_len(PLAIN.len()));
            let ring = Keyring::new(k.clone(), []);
            assert_eq!(ring.decrypt(&out, aad).unwrap(), PLAIN);
            assert_eq!(
                ring.decrypt(&out, b"other"),
                Err(DecodeError::NoKeyDecrypts)
            );
        }
    }

    #[test]
    fn padding_round_trips_for_every_length() {
        let k = key(3, 24);
        let ring = Keyring::new(k.clone(), []);
        for len in 0..=64 {
            let plain = vec![0xab; len];
            let mut out = Vec::new();
            encrypt_with_nonce(EncryptionVersion::V0, &k, &NONCE, &plain, b"", &mut out);
            assert_eq!(out.len(), EncryptionVersion::V0.encrypted_len(len));
            assert_eq!(ring.decrypt(&out, b"").unwrap(), plain);
        }
    }

    #[test]
    fn keyring_follows_gos_rules() {
        let (a, b, c) = (key(0, 16), key(16, 24), key(40, 32));
        let mut ring = Keyring::new(a.clone(), [b.clone()]);
        assert_eq!(ring.keys(), &[a.clone(), b.clone()]);
        ring.install(b.clone());
        assert_eq!(ring.keys().len(), 2, "installing twice is a no-op");
        assert_eq!(ring.use_key(c.as_bytes()), Err(KeyringError::NotInstalled));
        ring.install(c.clone());
        ring.use_key(c.as_bytes()).unwrap();
        assert_eq!(ring.keys(), &[c.clone(), a.clone(), b.clone()]);
        assert_eq!(ring.remove(c.as_bytes()), Err(KeyringError::RemovePrimary));
        ring.remove(a.as_bytes()).unwrap();
        ring.remove(a.as_bytes()).unwrap();
        assert_eq!(ring.keys(), &[c.clone(), b.clone()]);
        assert_eq!(
            SecretKey::new(&[0; 17]),
            Err(KeyringError::InvalidKeyLength(17))
        );
        assert_eq!(format!("{a:?}"), "SecretKey(AES-128)");

        // Every installed key decrypts; a removed key no longer does.
        let mut old = Vec::new();
        encrypt_with_nonce(EncryptionVersion::V1, &b, &NONCE, PLAIN, b"", &mut old);
        assert_eq!(ring.decrypt(&old, b"").unwrap(), PLAIN);
        ring.remove(b.as_bytes()).unwrap();
        assert_eq!(ring.decrypt(&old, b""), Err(DecodeError::NoKeyDecrypts));
    }

    #[test]
    fn malformed_ciphertexts_are_typed_errors() {
        let ring = Keyring::new(key(0, 16), []);
        assert_eq!(ring.decrypt(&[], b""), Err(DecodeError::Empty));
        assert_eq!(
            ring.decrypt(&[2; 40], b""),
            Err(DecodeError::UnknownEncryptionVersion(2))
        );
        assert_eq!(
            ring.decrypt(&[1; 28], b""),
            Err(DecodeError::CiphertextTooShort)
        );
        assert_eq!(
            ring.decrypt(&[0; 44], b""),
            Err(DecodeError::CiphertextTooShort)
        );
        assert_eq!(
            Keyring::default().decrypt(&[1; 29], b""),
            Err(DecodeError::EncryptionMismatch)
        );
    }
}
