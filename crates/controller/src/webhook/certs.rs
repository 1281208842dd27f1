//! The webhook's certificates (no I/O; the time is a parameter, keys come from the OS
//! generator): a CA and a serving certificate made and judged as MetalLB's cert rotator
//! (open-policy-agent/cert-controller, as MetalLB v0.16.2 sets it up) does, kept in the same
//! Secret keys so either controller can take the Secret over from the other.
//!
//! The facts followed: the Secret holds `ca.crt`, `ca.key`, `tls.crt`, `tls.key` (PEM); keys
//! are RSA 2048 written as PKCS#1 (MetalLB reads the CA key back only in that form); the CA is
//! named `cert` (common name and DNS name) in organisation `metallb` and lasts 10 years; the
//! serving certificate is for `<service>.<namespace>.svc` only, for server authentication, and
//! lasts 1 year; both start an hour in the past. A pair is replaced when it would not verify
//! 90 days from now (the CA and both certificates when the CA fails, else the serving one).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_RSA_SHA256, SanType,
};
use rsa::RsaPrivateKey;
use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPrivateKey, LineEnding};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The Secret's keys (cert-controller's names).
pub const CA_CERT: &str = "ca.crt";
/// The CA's private key.
pub const CA_KEY: &str = "ca.key";
/// The serving certificate.
pub const TLS_CERT: &str = "tls.crt";
/// The serving key.
pub const TLS_KEY: &str = "tls.key";
/// All four, as MetalLB's Secret has them.
pub const SECRET_KEYS: [&str; 4] = [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY];

/// The CA's name (common name and DNS name).
const CA_NAME: &str = "cert";
/// The CA's organisation.
const CA_ORGANIZATION: &str = "metallb";
const DAY: Duration = Duration::from_secs(24 * 3600);
/// How long a CA lasts.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// How long a serving certificate lasts.
pub const SERVING_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How far ahead a certificate must still be valid to be kept.
pub const LOOKAHEAD: Duration = Duration::from_secs(90 * 24 * 3600);
/// How far in the past a new certificate starts (clock skew between nodes).
const BACKDATE: Duration = Duration::from_secs(3600);
const RSA_BITS: usize = 2048;

/// The four PEM files of the Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Bundle {
    /// `ca.crt`.
    pub ca_cert: Vec<u8>,
    /// `ca.key`.
    pub ca_key: Vec<u8>,
    /// `tls.crt`.
    pub tls_cert: Vec<u8>,
    /// `tls.key`.
    pub tls_key: Vec<u8>,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print keys.
        f.debug_struct("Bundle").finish_non_exhaustive()
    }
}

/// What a Secret's certificates need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Both pairs verify 90 days from now: keep them.
    Keep,
    /// The CA is good, the serving pair is not: make a new serving pair with this CA.
    NewServing,
    /// The CA is missing, bad or ending: make everything anew.
    NewAll,
}

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The RSA key could not be generated or encoded.
    #[error("RSA key: {0}")]
    Rsa(String),
    /// The certificate could not be made or signed.
    #[error("certificate: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// The CA in the Secret could not be read back to sign with.
    #[error("the CA in the Secret cannot sign: {0}")]
    Ca(String),
}

/// Judges the four files as the rotator does, `now` being the present time.
pub fn verdict(
    ca_cert: Option<&[u8]>,
    ca_key: Option<&[u8]>,
    tls_cert: Option<&[u8]>,
    tls_key: Option<&[u8]>,
    dns_name: &str,
    now: SystemTime,
) -> Verdict {
    let at = now + LOOKAHEAD;
    let (Some(ca_cert), Some(ca_key)) = (ca_cert, ca_key) else {
        return Verdict::NewAll;
    };
    if !pair_verifies(ca_cert, ca_cert, ca_key, CA_NAME, at, true) {
        return Verdict::NewAll;
    }
    match (tls_cert, tls_key) {
        (Some(c), Some(k)) if pair_verifies(ca_cert, c, k, dns_name, at, false) => Verdict::Keep,
        _ => Verdict::NewServing,
    }
}

/// Whether `cert` (PEM) with `key` (PEM) is signed by `ca` (PEM), names `dns_name`, and is
/// valid at `at` (and the CA too).
fn pair_verifies(
    ca: &[u8],
    cert: &[u8],
    key: &[u8],
    dns_name: &str,
    at: SystemTime,
    is_ca: bool,
) -> bool {
    let Ok((_, ca_pem)) = x509_parser::pem::parse_x509_pem(ca) else {
        return false;
    };
    let Ok(ca_x509) = ca_pem.parse_x509() else {
        return false;
    };
    let Ok((_, pem)) = x509_parser::pem::parse_x509_pem(cert) else {
        return false;
    };
    let Ok(x509) = pem.parse_x509() else {
        return false;
    };
    let Some(at) = asn1_time(at) else {
        return false;
    };
    if !x509.validity().is_valid_at(at) || !ca_x509.validity().is_valid_at(at) {
        return false;
    }
    if is_ca != x509.is_ca() || !ca_x509.is_ca() {
        return false;
    }
    if x509.verify_signature(Some(ca_x509.public_key())).is_err() {
        return false;
    }
    let names_it = x509
        .subject_alternative_name()
        .ok()
        .flatten()
        .is_some_and(|san| {
            san.value.general_names.iter().any(|n| {
                matches!(n, x509_parser::extensions::GeneralName::DNSName(d) if d.eq_ignore_ascii_case(dns_name))
            })
        });
    if !names_it {
        return false;
    }
    if !is_ca {
        let serves = x509
            .extended_key_usage()
            .ok()
            .flatten()
            .is_some_and(|eku| eku.value.server_auth || eku.value.any);
        if !serves {
            return false;
        }
    }
    key_matches(key, x509.public_key().raw)
}

/// Whether the private key (PEM, PKCS#1 or PKCS#8 RSA) belongs to the public key (SPKI DER).
fn key_matches(key_pem: &[u8], spki_der: &[u8]) -> bool {
    let Some(key) = read_rsa_key(key_pem) else {
        return false;
    };
    rsa::RsaPublicKey::from_public_key_der(spki_der)
        .is_ok_and(|public| public == key.to_public_key())
}

fn read_rsa_key(pem: &[u8]) -> Option<RsaPrivateKey> {
    let text = std::str::from_utf8(pem).ok()?;
    RsaPrivateKey::from_pkcs1_pem(text)
        .ok()
        .or_else(|| RsaPrivateKey::from_pkcs8_pem(text).ok())
}

fn asn1_time(t: SystemTime) -> Option<x509_parser::time::ASN1Time> {
    let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    x509_parser::time::ASN1Time::from_timestamp(i64::try_from(secs).ok()?).ok()
}

fn offset_time(t: SystemTime) -> Result<time::OffsetDateTime, CertError> {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map_err(|e| CertError::Ca(e.to_string()))?
        .as_secs();
    time::OffsetDateTime::from_unix_timestamp(secs as i64).map_err(|e| CertError::Ca(e.to_string()))
}

/// A new RSA 2048 key: as PKCS#1 PEM (the Secret's form) and as rcgen's signing key.
fn new_key() -> Result<(String, KeyPair), CertError> {
    let key = RsaPrivateKey::new(&mut rand::rngs::OsRng, RSA_BITS)
        .map_err(|e| CertError::Rsa(e.to_string()))?;
    signing_pair(&key)
}

fn signing_pair(key: &RsaPrivateKey) -> Result<(String, KeyPair), CertError> {
    let pkcs1 = key
        .to_pkcs1_pem(LineEnding::LF)
        .map_err(|e| CertError::Rsa(e.to_string()))?;
    let pkcs8 = key
        .to_pkcs8_der()
        .map_err(|e| CertError::Rsa(e.to_string()))?;
    let pair = KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8.as_bytes().into(), &PKCS_RSA_SHA256)?;
    Ok((pkcs1.to_string(), pair))
}

fn ca_params(now: SystemTime) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(vec![CA_NAME.to_string()])?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_NAME);
    dn.push(DnType::OrganizationName, CA_ORGANIZATION);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    params.not_before = offset_time(now - BACKDATE)?;
    params.not_after = offset_time(now + CA_LIFETIME)?;
    Ok(params)
}

/// A new CA and a serving certificate it signs.
pub fn new_all(dns_name: &str, now: SystemTime) -> Result<Bundle, CertError> {
    let (ca_key_pem, ca_key) = new_key()?;
    let ca_cert = ca_params(now)?.self_signed(&ca_key)?;
    let ca_cert_pem = ca_cert.pem();
    let issuer = Issuer::from_ca_cert_pem(&ca_cert_pem, &ca_key)?;
    let (tls_cert, tls_key) = serving(&issuer, dns_name, now)?;
    Ok(Bundle {
        ca_cert: ca_cert_pem.into_bytes(),
        ca_key: ca_key_pem.into_bytes(),
        tls_cert,
        tls_key,
    })
}

/// A new serving certificate from the CA of `ca_cert`/`ca_key` (PEM; the CA is kept).
pub fn new_serving(
    ca_cert: &[u8],
    ca_key: &[u8],
    dns_name: &str,
    now: SystemTime,
) -> Result<Bundle, CertError> {
    let key =
        read_rsa_key(ca_key).ok_or_else(|| CertError::Ca("ca.key is not an RSA key".into()))?;
    let (_, signing) = signing_pair(&key)?;
    let text = std::str::from_utf8(ca_cert).map_err(|e| CertError::Ca(e.to_string()))?;
    let issuer = Issuer::from_ca_cert_pem(text, &signing)?;
    let (tls_cert, tls_key) = serving(&issuer, dns_name, now)?;
    Ok(Bundle {
        ca_cert: ca_cert.to_vec(),
        ca_key: ca_key.to_vec(),
        tls_cert,
        tls_key,
    })
}

fn serving(
    issuer: &Issuer<'_, &KeyPair>,
    dns_name: &str,
    now: SystemTime,
) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    let (key_pem, key) = new_key()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.subject_alt_names = vec![SanType::DnsName(dns_name.try_into()?)];
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, dns_name);
    params.distinguished_name = dn;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = offset_time(now - BACKDATE)?;
    params.not_after = offset_time(now + SERVING_LIFETIME)?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem().into_bytes(), key_pem.into_bytes()))
}

/// When the serving certificate in `bundle` stops verifying with the lookahead (the time to
/// check again, at the latest).
pub fn next_check(bundle: &Bundle) -> Option<SystemTime> {
    let end = |pem: &[u8]| -> Option<SystemTime> {
        let (_, p) = x509_parser::pem::parse_x509_pem(pem).ok()?;
        let x = p.parse_x509().ok()?;
        let secs = u64::try_from(x.validity().not_after.timestamp()).ok()?;
        Some(UNIX_EPOCH + Duration::from_secs(secs))
    };
    let first = end(&bundle.tls_cert)?.min(end(&bundle.ca_cert)?);
    first.checked_sub(LOOKAHEAD + DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: &str = "metallb-webhook-service.metallb-system.svc";

    fn judge(b: &Bundle, now: SystemTime) -> Verdict {
        verdict(
            Some(&b.ca_cert),
            Some(&b.ca_key),
            Some(&b.tls_cert),
            Some(&b.tls_key),
            DNS,
            now,
        )
    }

    #[test]
    fn a_new_bundle_is_kept_until_ninety_days_before_its_end() {
        let now = SystemTime::now();
        let b = new_all(DNS, now).unwrap();
        assert!(
            std::str::from_utf8(&b.ca_key)
                .unwrap()
                .starts_with("-----BEGIN RSA PRIVATE KEY-----")
        );
        assert_eq!(judge(&b, now), Verdict::Keep);
        // The serving certificate (1 year) needs renewing first; the CA (10 years) stays.
        assert_eq!(
            judge(&b, now + SERVING_LIFETIME - LOOKAHEAD + DAY),
            Verdict::NewServing
        );
        assert_eq!(
            judge(&b, now + CA_LIFETIME - LOOKAHEAD + DAY),
            Verdict::NewAll
        );
        let wrong_name = verdict(
            Some(&b.ca_cert),
            Some(&b.ca_key),
            Some(&b.tls_cert),
            Some(&b.tls_key),
            "other.metallb-system.svc",
            now,
        );
        assert_eq!(wrong_name, Verdict::NewServing);
        assert_eq!(verdict(None, None, None, None, DNS, now), Verdict::NewAll);

        let renewed = new_serving(&b.ca_cert, &b.ca_key, DNS, now).unwrap();
        assert_eq!(renewed.ca_cert, b.ca_cert);
        assert_ne!(renewed.tls_cert, b.tls_cert);
        assert_eq!(judge(&renewed, now), Verdict::Keep);
        // A key that is not the certificate's is refused.
        let mixed = Bundle {
            tls_key: b.tls_key.clone(),
            ..renewed
        };
        assert_eq!(judge(&mixed, now), Verdict::NewServing);
        let next = next_check(&b).unwrap();
        assert!(next > now + SERVING_LIFETIME - LOOKAHEAD - 2 * DAY);
    }
}
