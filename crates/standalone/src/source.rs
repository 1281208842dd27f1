//! Standalone mode as a source of snapshots for `vigil_speaker::run`: the file is read again
//! on SIGHUP and whenever its text changes (looked at every second); a valid file becomes a
//! whole [`DesiredState`], a bad one is logged, counted and dropped (the old one stays in
//! force); restart-only settings that changed are a warning. The health checks of the
//! services in force run here, and their flips go out as [`HealthReport`]s. The keyring
//! file is watched on its own and sent as key lists.

use super::config::Config;
use super::health::{Checks, HealthChange};
use futures_util::{Stream, StreamExt};
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tracing::{error, info, warn};
use vigil_gossip::wire::SecretKey;
use vigil_gossip_net::watch_keyring_file;
use vigil_speaker::model::DesiredState;
use vigil_speaker::observe::SourceCounters;
use vigil_speaker::{HealthReport, Source};

/// How often the configuration file is looked at for changes.
const FILE_POLL: Duration = Duration::from_secs(1);
/// How often the keyring file is looked at for changes.
const KEYRING_POLL: Duration = Duration::from_secs(1);

/// The speaker's source for this file, with the watch task started. Errors are start-up
/// failures (the keyring file, SIGHUP).
pub fn start(
    path: PathBuf,
    config: Config,
    default_name: Option<String>,
) -> Result<
    Source<
        impl Stream<Item = DesiredState> + Unpin,
        impl Stream<Item = Vec<SecretKey>> + Unpin,
        impl Stream<Item = HealthReport> + Unpin,
    >,
    String,
> {
    let (initial_keys, keyrings) = match &config.gossip.keyring_file {
        Some(file) => {
            let (keys, changes) = watch_keyring_file(file.clone(), KEYRING_POLL)
                .map_err(|e| format!("gossip.keyring_file: {e}"))?;
            let changes = changes.filter_map(|change| async move {
                match change {
                    Ok(keys) => Some(keys),
                    Err(e) => {
                        error!(event = "keyring_rejected", error = %e, "keyring file rejected; old keys kept");
                        None
                    }
                }
            });
            (keys, changes.boxed())
        }
        None => (Vec::new(), futures_util::stream::pending().boxed()),
    };
    let hup = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?;
    let counters = SourceCounters::default();
    let (desired_tx, desired_rx) = mpsc::channel(8);
    let (health_tx, health_rx) = mpsc::unbounded_channel();
    let (checks, changes) = Checks::new();
    let initial = config.desired();
    let watch = FileWatch {
        file_text: std::fs::read_to_string(&path).ok(),
        path,
        default_name,
        started: config.clone(),
        config,
        checks,
        counters: counters.clone(),
        desired: desired_tx,
        health: health_tx,
    };
    tokio::spawn(watch.run(hup, changes));
    Ok(Source {
        initial,
        initial_keys,
        desired: receiver_stream(desired_rx),
        keyrings,
        health: unbounded_stream(health_rx),
        counters,
    })
}

fn receiver_stream<T>(mut rx: mpsc::Receiver<T>) -> impl Stream<Item = T> + Unpin {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn unbounded_stream<T>(mut rx: mpsc::UnboundedReceiver<T>) -> impl Stream<Item = T> + Unpin {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The task behind the source: the file, its checks, and what they send.
struct FileWatch {
    path: PathBuf,
    default_name: Option<String>,
    /// The file's text when last read, to notice changes.
    file_text: Option<String>,
    /// The configuration at start: its restart-only part stays in force.
    started: Config,
    /// The configuration whose runtime part is in force.
    config: Config,
    checks: Checks,
    counters: SourceCounters,
    desired: mpsc::Sender<DesiredState>,
    health: mpsc::UnboundedSender<HealthReport>,
}

impl FileWatch {
    async fn run(
        mut self,
        mut hup: tokio::signal::unix::Signal,
        mut changes: mpsc::UnboundedReceiver<HealthChange>,
    ) {
        self.checks.sync(&self.config.health_checks());
        let mut poll = tokio::time::interval(FILE_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = hup.recv() => self.reload("SIGHUP").await,
                _ = poll.tick() => {
                    if self.read_file() != self.file_text {
                        self.reload("file changed").await;
                    }
                }
                Some(change) = changes.recv() => {
                    let report = HealthReport {
                        service: change.service,
                        passing: change.passing,
                        detail: change.detail,
                    };
                    if self.health.send(report).is_err() {
                        return;
                    }
                }
            }
            if self.desired.is_closed() {
                return;
            }
        }
    }

    fn read_file(&self) -> Option<String> {
        std::fs::read_to_string(&self.path).ok()
    }

    async fn reload(&mut self, why: &str) {
        self.file_text = self.read_file();
        let new = match Config::load(&self.path, self.default_name.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                error!(event = "config_rejected", trigger = why, error = %e, "new configuration rejected; the old one stays in force");
                self.counters.count_rejected();
                return;
            }
        };
        let fixed = restart_only_changes(&self.started, &new);
        if !fixed.is_empty() {
            warn!(event = "config_needs_restart", fields = ?fixed, "these settings change only on restart; the rest is applied");
        }
        let checks = new.health_checks();
        if new.desired() == self.config.desired() && checks == self.config.health_checks() {
            info!(
                event = "config_unchanged",
                trigger = why,
                "configuration unchanged"
            );
            return;
        }
        // A check that changed restarts failing: say so before the snapshot that uses it.
        let was_checked = self.config.health_checks();
        for service in self.checks.sync(&checks) {
            if was_checked.contains_key(&service) {
                let _ = self.health.send(HealthReport {
                    service,
                    passing: false,
                    detail: "check changed; restarted".into(),
                });
            }
        }
        let desired = new.desired();
        let services = desired.services.len();
        self.config = new;
        if self.desired.send(desired).await.is_err() {
            return;
        }
        self.counters.count_applied();
        info!(
            event = "config_reloaded",
            trigger = why,
            services,
            "configuration reloaded"
        );
    }
}

/// Settings a reload cannot change, by their name in the file: the speaker's restart-only
/// [`StaticSettings`](vigil_speaker::model::StaticSettings) (one `!=` decides) and the keyring
/// file's path.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let (before, after) = (old.settings(), new.settings());
    let mut out: Vec<&'static str> = if before == after {
        Vec::new()
    } else {
        before
            .changed_fields(&after)
            .into_iter()
            .map(|field| match field {
                "node_name" => "node.name",
                "local_address" => "announce.local_address",
                "refresh" => "announce.refresh",
                "http_listen" => "http.listen",
                "hold_down" => "election.hold_down",
                other => other,
            })
            .collect()
    };
    if old.gossip.keyring_file != new.gossip.keyring_file {
        out.push("gossip.keyring_file");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rejoin_interval_changes_only_on_restart() {
        let text = |rejoin: &str| {
            format!("node: {{name: a}}\ngossip: {{bind: 198.18.0.11, rejoin_interval: {rejoin}}}\n")
        };
        let old = Config::parse(&text("5s"), None).unwrap();
        let new = Config::parse(&text("2s"), None).unwrap();
        assert_eq!(restart_only_changes(&old, &new), ["gossip.rejoin_interval"]);
    }

    #[test]
    fn the_local_address_changes_only_on_restart() {
        let text =
            |extra: &str| format!("node: {{name: a}}\ngossip: {{bind: 198.18.0.11}}\n{extra}");
        let old = Config::parse(&text(""), None).unwrap();
        let new = Config::parse(&text("announce: {local_address: lo}\n"), None).unwrap();
        assert_eq!(restart_only_changes(&old, &new), ["announce.local_address"]);
    }
}
