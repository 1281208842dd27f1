//! The standalone configuration file: its YAML shape, and validation of the whole file into a
//! [`Config`] before anything starts. Every error names the field at fault, e.g.
//! `services[1].vips[0]: "198.18.0.300" is not an IP address`.
//!
//! One job per module: `schema` is the file as serde reads it (strings, so that validation
//! can report every bad field in one pass), `validate` turns it into the model, `fields`
//! parses and checks single values, and `model` is the [`Config`] and its split into the
//! speaker's [`StaticSettings`](vigil_speaker::model::StaticSettings) and
//! [`DesiredState`](vigil_speaker::model::DesiredState). This module reads the file and holds
//! the errors.

mod fields;
mod model;
mod schema;
#[cfg(test)]
mod tests;
mod validate;

pub use model::{
    ArpSysctlsMode, Config, ElectionConfig, GossipConfig, HealthCheck, InterfacesConfig,
    LocalAddressConfig, NodeConfig, Probe, ServiceConfig,
};

use schema::RawConfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// memberlist's default port.
pub const DEFAULT_GOSSIP_PORT: u16 = 7946;
/// Where the HTTP endpoint listens unless told otherwise (MetalLB's old metrics port, on
/// loopback: `/metrics` and `vigil status` are local).
pub const DEFAULT_HTTP_LISTEN: &str = "127.0.0.1:7472";
/// How often seeds that are not live members are joined again, by default: a healed
/// partition merges within about this long.
pub const DEFAULT_REJOIN_INTERVAL: Duration = Duration::from_secs(5);
/// The shortest `gossip.rejoin_interval` allowed: each round may open a TCP push/pull to
/// every seed that is not a live member.
pub const MIN_REJOIN_INTERVAL: Duration = Duration::from_secs(1);

/// A configuration that failed validation: which field, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The field's path, e.g. `services[0].health_check.interval`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// Why a file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Reading failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Not YAML of the right shape.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the field and line).
        message: String,
    },
    /// Fields have bad values (every one found), or a file the configuration names cannot
    /// be used.
    #[error("{}", .errors.iter().map(|e| format!("{}: {e}", .path.display())).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Each field and its problem.
        errors: Vec<ConfigError>,
    },
}

impl Config {
    /// Reads and validates a file, then checks the files it names ([`check_files`](Self::check_files)):
    /// what the start and a reload use. `default_name` is used when `node.name` is absent.
    pub fn load(path: &Path, default_name: Option<&str>) -> Result<Self, LoadError> {
        let config = Self::read(path, default_name)?;
        config.check_files().map_err(|e| LoadError::Invalid {
            path: path.to_owned(),
            errors: vec![e],
        })?;
        Ok(config)
    }

    /// Reads and validates a file without touching the files it names (so `vigil status -c`
    /// needs no access to the keyring).
    pub fn read(path: &Path, default_name: Option<&str>) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, default_name).map_err(|e| match e {
            ParseError::Yaml(message) => LoadError::Parse {
                path: path.to_owned(),
                message,
            },
            ParseError::Invalid(errors) => LoadError::Invalid {
                path: path.to_owned(),
                errors,
            },
        })
    }

    /// Reads the files the configuration names (the keyring file), as the start will: a
    /// missing or bad keyring is an error naming `gossip.keyring_file`. Kept apart from
    /// [`parse`](Self::parse), which reads nothing.
    pub fn check_files(&self) -> Result<(), ConfigError> {
        if let Some(path) = &self.gossip.keyring_file {
            vigil_gossip_net::read_keyring_file(path)
                .map_err(|e| bad("gossip.keyring_file", e.to_string()))?;
        }
        Ok(())
    }

    /// Parses and validates YAML text; pure (no file is read).
    pub fn parse(text: &str, default_name: Option<&str>) -> Result<Self, ParseError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_norway::from_str(text).map_err(|e| ParseError::Yaml(e.to_string()))?
        };
        validate::file(raw, default_name).map_err(ParseError::Invalid)
    }
}

/// Why text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not YAML of the right shape (the message names the field and line).
    #[error("{0}")]
    Yaml(String),
    /// Fields have bad values: every one found, in file order by section.
    #[error("{}", Invalid::lines(.0))]
    Invalid(Vec<ConfigError>),
}

/// Formats a list of field errors one per line.
struct Invalid;

impl Invalid {
    fn lines(errors: &[ConfigError]) -> String {
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}
