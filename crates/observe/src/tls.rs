//! The TLS side of the metrics port, with MetalLB v0.16's flags and defaults.
//!
//! MetalLB's speaker and controller take `--tls-min-version`, `--tls-cipher-suites`,
//! `--tls-curve-preferences` and `--metrics-cert-dir`, and hand them to controller-runtime's
//! metrics server. What those flags mean there, and here:
//!
//! | flag | MetalLB v0.16.2 | vigil |
//! |---|---|---|
//! | `--tls-min-version` | `VersionTLS10` … `VersionTLS13`; empty: TLS 1.3 | the same names; empty: TLS 1.3. rustls speaks 1.2 and 1.3 only, so `VersionTLS10` and `VersionTLS11` serve 1.2 and 1.3 (nothing older can be negotiated) |
//! | `--tls-cipher-suites` | Go's names, comma-separated; they restrict TLS 1.2 only (Go's TLS 1.3 suites cannot be chosen); an unknown name is an error | the same. The AEAD suites (ECDHE with AES-GCM or ChaCha20-Poly1305) are served; a name Go knows but rustls does not implement (CBC, RSA key exchange, RC4, 3DES) is an error naming the flag |
//! | `--tls-curve-preferences` | numeric CurveIDs, comma-separated; out of range, duplicate or unknown is an error; empty: Go's defaults | the same checks; 23 (P-256), 24 (P-384) and 29 (X25519) are served; an ID Go knows but vigil's rustls (on ring) does not (25 P-521, 4587-4589 the ML-KEM hybrids) is an error naming the flag; empty: X25519, P-256, P-384 |
//! | `--metrics-cert-dir` | `tls.crt` and `tls.key` there (empty: controller-runtime's default directory, `$TMPDIR/k8s-metrics-server/serving-certs`), reloaded when they change; when either is missing, a self-signed certificate for `localhost` and 127.0.0.1 made at start | the same ([`CertificateSource`]) |
//!
//! [`TlsArgs`] is the flags (flattened into both programs' command lines); [`TlsArgs::settings`]
//! checks them into [`TlsSettings`]; [`TlsSettings::server_config`] builds rustls's server
//! configuration around a certificate resolver. Anything else that serves TLS with MetalLB's
//! flags (the webhook) can reuse the last two.

use rustls::crypto::SupportedKxGroup;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, NamedGroup, SupportedCipherSuite};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// controller-runtime's metrics certificate directory when `--metrics-cert-dir` is empty,
/// under the temporary directory (`$TMPDIR`, else `/tmp`).
pub const DEFAULT_CERT_SUBDIR: &str = "k8s-metrics-server/serving-certs";
/// The certificate's file name in the directory.
pub const CERT_FILE: &str = "tls.crt";
/// The key's file name in the directory.
pub const KEY_FILE: &str = "tls.key";
/// How often the certificate files are looked at for a change (controller-runtime's watcher
/// also polls every 10 s, beside its file notifications).
pub const RELOAD_CHECK: Duration = Duration::from_secs(10);

/// MetalLB's TLS flags for the metrics port, in both the speaker and the controller.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct TlsArgs {
    /// Minimum TLS version (VersionTLS12 or VersionTLS13); empty: VersionTLS13, as MetalLB.
    #[arg(long = "tls-min-version", default_value = "")]
    pub tls_min_version: String,
    /// Comma-separated TLS 1.2 cipher suites (Go's names); empty: rustls's defaults.
    #[arg(long = "tls-cipher-suites", default_value = "")]
    pub tls_cipher_suites: String,
    /// Comma-separated numeric CurveIDs (23 P-256, 24 P-384, 29 X25519); empty: defaults.
    #[arg(long = "tls-curve-preferences", default_value = "")]
    pub tls_curve_preferences: String,
    /// Directory holding tls.crt and tls.key for the metrics port; empty: controller-runtime's
    /// default directory, and a self-signed certificate when the files are not there.
    #[arg(long = "metrics-cert-dir", default_value = "")]
    pub metrics_cert_dir: String,
}

/// A TLS flag that cannot be used, or a certificate that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `--tls-min-version` is not one of Go's version names.
    #[error(
        "--tls-min-version {0:?}: unknown TLS version (VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13)"
    )]
    MinVersion(String),
    /// A `--tls-cipher-suites` name that Go does not know either.
    #[error("--tls-cipher-suites: cipher suite {0} not supported or doesn't exist")]
    UnknownCipherSuite(String),
    /// A `--tls-cipher-suites` name that MetalLB accepts but rustls does not implement.
    #[error(
        "--tls-cipher-suites: {0} is accepted by MetalLB but not implemented by vigil's TLS (rustls serves only AEAD suites: {supported})",
        supported = TLS12_SUITES.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
    )]
    UnimplementedCipherSuite(String),
    /// A `--tls-curve-preferences` entry that is not a number from 0 to 65535.
    #[error(
        "--tls-curve-preferences: invalid curve preference {0:?}: must be a numeric CurveID (0-65535)"
    )]
    CurveNotNumeric(String),
    /// A `--tls-curve-preferences` entry of 0.
    #[error("--tls-curve-preferences: curve preference {0} is out of range (must be 1-65535)")]
    CurveOutOfRange(u16),
    /// A `--tls-curve-preferences` entry given twice.
    #[error("--tls-curve-preferences: duplicate curve preference {0}")]
    CurveDuplicate(u16),
    /// A `--tls-curve-preferences` entry vigil's TLS does not implement.
    #[error(
        "--tls-curve-preferences: curve preference {0} is not supported by vigil's TLS (rustls on ring: 23 P-256, 24 P-384, 29 X25519)"
    )]
    CurveUnsupported(u16),
    /// The certificate or key file cannot be read or parsed.
    #[error("--metrics-cert-dir: {path}: {reason}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The self-signed certificate could not be made.
    #[error("self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    /// rustls refused the configuration (no suite usable with the versions chosen).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The lowest TLS version served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MinVersion {
    /// TLS 1.2 and 1.3 (`VersionTLS12`, and `VersionTLS10`/`VersionTLS11`, which rustls cannot
    /// go below).
    Tls12,
    /// TLS 1.3 only (`VersionTLS13`, and the default).
    Tls13,
}

/// [`TlsArgs`], checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The lowest version served.
    pub min_version: MinVersion,
    /// The TLS 1.2 suites, in the order given; `None`: rustls's defaults.
    pub tls12_suites: Option<Vec<CipherSuite>>,
    /// The key-exchange groups, in the order given; `None`: rustls's defaults.
    pub groups: Option<Vec<NamedGroup>>,
    /// Where the certificate comes from.
    pub certificate: CertificateSource,
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateSource {
    /// `tls.crt` and `tls.key` in this directory when both exist at start (reloaded when they
    /// change), else a self-signed certificate.
    Directory(PathBuf),
}

/// Go's names of the TLS 1.2 suites rustls implements, with rustls's identifiers (Go also
/// accepts the two ChaCha20 names without `_SHA256`).
const TLS12_SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// Go's aliases for two of [`TLS12_SUITES`].
const TLS12_ALIASES: &[(&str, CipherSuite)] = &[
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// Go's TLS 1.3 suite names: accepted and, as in Go, without effect (TLS 1.3's suites are not
/// configurable there).
const TLS13_NAMES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Names Go accepts (its secure and insecure lists) that rustls does not implement.
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

impl TlsArgs {
    /// Checks the flags, with MetalLB's defaults for empty ones.
    pub fn settings(&self) -> Result<TlsSettings, TlsError> {
        Ok(TlsSettings {
            min_version: min_version(&self.tls_min_version)?,
            tls12_suites: cipher_suites(&self.tls_cipher_suites)?,
            groups: curve_preferences(&self.tls_curve_preferences)?,
            certificate: CertificateSource::Directory(if self.metrics_cert_dir.is_empty() {
                std::env::temp_dir().join(DEFAULT_CERT_SUBDIR)
            } else {
                PathBuf::from(&self.metrics_cert_dir)
            }),
        })
    }
}

fn min_version(value: &str) -> Result<MinVersion, TlsError> {
    match value {
        "" | "VersionTLS13" => Ok(MinVersion::Tls13),
        "VersionTLS10" | "VersionTLS11" | "VersionTLS12" => Ok(MinVersion::Tls12),
        other => Err(TlsError::MinVersion(other.to_string())),
    }
}

fn cipher_suites(value: &str) -> Result<Option<Vec<CipherSuite>>, TlsError> {
    if value.is_empty() {
        return Ok(None);
    }
    let mut suites = Vec::new();
    for name in value.split(',').map(str::trim) {
        if let Some((_, suite)) = TLS12_SUITES
            .iter()
            .chain(TLS12_ALIASES)
            .find(|(n, _)| *n == name)
        {
            if !suites.contains(suite) {
                suites.push(*suite);
            }
        } else if TLS13_NAMES.contains(&name) {
            // Accepted, no effect: Go's TLS 1.3 suites are fixed.
        } else if GO_ONLY_SUITES.contains(&name) {
            return Err(TlsError::UnimplementedCipherSuite(name.to_string()));
        } else {
            return Err(TlsError::UnknownCipherSuite(name.to_string()));
        }
    }
    Ok(Some(suites))
}

fn curve_preferences(value: &str) -> Result<Option<Vec<NamedGroup>>, TlsError> {
    if value.is_empty() {
        return Ok(None);
    }
    let mut seen = Vec::new();
    let mut groups = Vec::new();
    for part in value.split(',').map(str::trim) {
        let id: u16 = part
            .parse()
            .map_err(|_| TlsError::CurveNotNumeric(part.to_string()))?;
        if id == 0 {
            return Err(TlsError::CurveOutOfRange(id));
        }
        if seen.contains(&id) {
            return Err(TlsError::CurveDuplicate(id));
        }
        seen.push(id);
        let group = NamedGroup::from(id);
        if provider_groups().iter().any(|g| g.name() == group) {
            groups.push(group);
        } else {
            // Go 1.26 also knows 25 (P-521) and 4587-4589 (the ML-KEM hybrids); ring has none.
            return Err(TlsError::CurveUnsupported(id));
        }
    }
    Ok(Some(groups))
}

fn provider_groups() -> Vec<&'static dyn SupportedKxGroup> {
    rustls::crypto::ring::default_provider().kx_groups
}

impl TlsSettings {
    /// rustls's server configuration for these settings, serving what `certificates`
    /// resolves. No ALPN protocol is set (the caller adds its own, if any).
    pub fn server_config(
        &self,
        certificates: Arc<dyn ResolvesServerCert>,
    ) -> Result<Arc<rustls::ServerConfig>, TlsError> {
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(chosen) = &self.tls12_suites {
            // Go's list restricts TLS 1.2 alone; every TLS 1.3 suite stays.
            let all = std::mem::take(&mut provider.cipher_suites);
            let tls13 = all
                .iter()
                .filter(|s| matches!(s, SupportedCipherSuite::Tls13(_)));
            let tls12 = chosen
                .iter()
                .filter_map(|c| all.iter().find(|s| s.suite() == *c));
            provider.cipher_suites = tls13.chain(tls12).copied().collect();
        }
        if let Some(chosen) = &self.groups {
            let all = std::mem::take(&mut provider.kx_groups);
            provider.kx_groups = chosen
                .iter()
                .filter_map(|c| all.iter().find(|g| g.name() == *c).copied())
                .collect();
        }
        let versions: &[&rustls::SupportedProtocolVersion] = match self.min_version {
            MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
            MinVersion::Tls13 => &[&rustls::version::TLS13],
        };
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(versions)?
            .with_no_client_auth()
            .with_cert_resolver(certificates);
        Ok(Arc::new(config))
    }

    /// The certificate resolver for [`Self::certificate`]: the directory's files when both
    /// exist now, else a self-signed certificate for `localhost` and 127.0.0.1 (as
    /// controller-runtime's metrics server).
    pub fn certificates(&self) -> Result<Arc<dyn ResolvesServerCert>, TlsError> {
        let CertificateSource::Directory(dir) = &self.certificate;
        let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        if cert.exists() && key.exists() {
            Ok(Arc::new(CertificateFiles::load(cert, key)?))
        } else {
            Ok(Arc::new(SelfSigned::new(
                vec!["localhost".into()],
                vec![std::net::Ipv4Addr::LOCALHOST.into()],
            )?))
        }
    }
}

/// A certificate made at start, signed by its own key.
#[derive(Debug)]
pub struct SelfSigned(Arc<CertifiedKey>);

impl SelfSigned {
    /// A fresh key (ECDSA P-256) and a certificate naming `dns_names` and `ips`.
    pub fn new(dns_names: Vec<String>, ips: Vec<std::net::IpAddr>) -> Result<Self, TlsError> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(dns_names)?;
        params
            .subject_alt_names
            .extend(ips.into_iter().map(rcgen::SanType::IpAddress));
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        let cert = params.self_signed(&key)?;
        let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
            .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)?;
        Ok(Self(Arc::new(CertifiedKey::new(
            vec![cert.der().clone()],
            signing,
        ))))
    }
}

impl ResolvesServerCert for SelfSigned {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// `tls.crt` and `tls.key` from a directory, read again when either file changes (checked at
/// most every [`RELOAD_CHECK`], on a handshake). A change that does not parse keeps the old
/// pair in service and is logged.
#[derive(Debug)]
pub struct CertificateFiles {
    cert: PathBuf,
    key: PathBuf,
    current: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    pair: Arc<CertifiedKey>,
    stamps: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl CertificateFiles {
    /// Reads the pair now (an error names the file).
    pub fn load(cert: PathBuf, key: PathBuf) -> Result<Self, TlsError> {
        let pair = read_pair(&cert, &key)?;
        let stamps = (modified(&cert), modified(&key));
        Ok(Self {
            current: Mutex::new(Loaded {
                pair,
                stamps,
                checked: Instant::now(),
            }),
            cert,
            key,
        })
    }
}

impl ResolvesServerCert for CertificateFiles {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut loaded = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if loaded.checked.elapsed() >= RELOAD_CHECK {
            loaded.checked = Instant::now();
            let stamps = (modified(&self.cert), modified(&self.key));
            if stamps != loaded.stamps {
                match read_pair(&self.cert, &self.key) {
                    Ok(pair) => {
                        tracing::info!(event = "metrics_certificate_reloaded", cert = %self.cert.display(), "metrics certificate reloaded");
                        loaded.pair = pair;
                        loaded.stamps = stamps;
                    }
                    Err(e) => {
                        tracing::warn!(event = "metrics_certificate_reload_failed", error = %e, "keeping the previous metrics certificate");
                    }
                }
            }
        }
        Some(Arc::clone(&loaded.pair))
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let bad = |path: &Path, reason: String| TlsError::Certificate {
        path: path.to_path_buf(),
        reason,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(cert, "no certificate in the file".into()));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, e.to_string()))?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)
        .map_err(|e| bad(key, e.to_string()))?;
    Ok(Arc::new(CertifiedKey::new(chain, signing)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(min: &str, suites: &str, curves: &str) -> TlsArgs {
        TlsArgs {
            tls_min_version: min.into(),
            tls_cipher_suites: suites.into(),
            tls_curve_preferences: curves.into(),
            metrics_cert_dir: String::new(),
        }
    }

    #[test]
    fn metallb_defaults() {
        let s = TlsArgs::default().settings().unwrap();
        assert_eq!(s.min_version, MinVersion::Tls13);
        assert_eq!(s.tls12_suites, None);
        assert_eq!(s.groups, None);
        assert_eq!(
            s.certificate,
            CertificateSource::Directory(std::env::temp_dir().join(DEFAULT_CERT_SUBDIR))
        );
    }

    #[test]
    fn metallb_values_are_read_and_bad_ones_name_the_flag() {
        let s = args(
            "VersionTLS12",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            "29,23",
        )
        .settings()
        .unwrap();
        assert_eq!(s.min_version, MinVersion::Tls12);
        assert_eq!(
            s.tls12_suites.unwrap(),
            [
                CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );
        assert_eq!(
            s.groups.unwrap(),
            [NamedGroup::X25519, NamedGroup::secp256r1]
        );
        assert_eq!(
            args("VersionTLS11", "", "").settings().unwrap().min_version,
            MinVersion::Tls12
        );
        for (bad, flag) in [
            (args("TLS1.2", "", ""), "--tls-min-version"),
            (args("", "TLS_NOPE", ""), "--tls-cipher-suites"),
            (
                args("", "TLS_RSA_WITH_AES_128_CBC_SHA", ""),
                "--tls-cipher-suites",
            ),
            (args("", "", "x25519"), "--tls-curve-preferences"),
            (args("", "", "0"), "--tls-curve-preferences"),
            (args("", "", "23,23"), "--tls-curve-preferences"),
            (args("", "", "25"), "--tls-curve-preferences"),
            (args("", "", "70000"), "--tls-curve-preferences"),
        ] {
            let e = bad.settings().unwrap_err().to_string();
            assert!(e.starts_with(flag), "{e}");
        }
    }

    #[test]
    fn a_config_builds_with_a_self_signed_certificate() {
        let s = args(
            "VersionTLS12",
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            "29",
        )
        .settings()
        .unwrap();
        let certs = Arc::new(SelfSigned::new(vec!["localhost".into()], vec![]).unwrap());
        let config = s.server_config(certs).unwrap();
        assert!(config.alpn_protocols.is_empty());
    }
}
