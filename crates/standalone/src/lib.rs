//! vigil's standalone mode: the speaker without Kubernetes, configured from a YAML file, like
//! keepalived with N nodes sharing many VIPs. The speaker itself is `vigil_speaker::run`,
//! shared with every mode; this crate is the file's side of it:
//!
//! - [`config`]: the file and its validation into [`Config`](config::Config), pure (nothing is
//!   read but the text) and whole (every bad field is reported, each named by its path, e.g.
//!   `services[1].vips[0]`), and its split into the speaker's restart-only
//!   [`StaticSettings`](vigil_speaker::model::StaticSettings) and runtime
//!   [`DesiredState`](vigil_speaker::model::DesiredState);
//! - [`source`]: the file/SIGHUP watch as a stream of validated snapshots (a restart-only
//!   change is a warning), the keyring file as a stream of key lists, the health flips;
//! - [`health`]: TCP, HTTP and command health checks whose results go out in gossip metadata.

pub mod config;
pub mod health;
pub mod source;

use std::future::Future;
use std::path::PathBuf;

/// The host name, the default node name.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Runs the speaker from `path` (already loaded as `config`) until `shutdown` completes.
/// Errors are start-up failures (sockets, the announcer, the keyring file).
pub async fn run(
    path: PathBuf,
    config: config::Config,
    default_name: Option<String>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let settings = config.settings();
    let source = source::start(path, config, default_name)?;
    vigil_speaker::run(settings, source, (), shutdown)
        .await
        .map_err(|e| e.to_string())
}
