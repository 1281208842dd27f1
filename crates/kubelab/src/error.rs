//! What can go wrong starting the control plane or talking to it.

use std::path::Path;
use std::time::Duration;

/// An error of the test support: the control plane did not come up, or a helper's request
/// failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting or state that makes the request impossible.
    #[error("{0}")]
    Config(String),
    /// A file or process operation failed.
    #[error("{path}: {source}")]
    Io {
        /// What was being worked on.
        path: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// `vigil-testenv` exited before its ready line.
    #[error("vigil-testenv exited before it was ready ({status}); its log ends:\n{log}")]
    Exited {
        /// Its exit status.
        status: String,
        /// The last lines of its log.
        log: String,
    },
    /// `vigil-testenv` printed no ready line in time (it was killed).
    #[error("vigil-testenv was not ready within {limit:?}; its log ends:\n{log}")]
    NotReady {
        /// The bound that passed.
        limit: Duration,
        /// The last lines of its log.
        log: String,
    },
    /// The kubeconfig written by `vigil-testenv` could not be used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// A request to the API server failed.
    #[error("API request: {0}")]
    Kube(#[from] kube::Error),
    /// A YAML manifest could not be applied.
    #[error("manifest {source_name}, document {index}: {reason}")]
    Manifest {
        /// The file (or label) the YAML came from.
        source_name: String,
        /// The document's position (from 0) among the non-empty ones.
        index: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// Something the helper waits for did not happen in time.
    #[error("timed out after {limit:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The bound that passed.
        limit: Duration,
    },
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
