//! The keyring file, watched here and applied to the gossip member as data: each new list
//! goes in whole with [`Memberlist::set_keyring`], and every outcome is an event line.

use super::events::{EventCounts, emit};
use futures_util::StreamExt;
use serde_json::json;
use std::sync::{Arc, Mutex, PoisonError};
use vigil_gossip_net::{KeyringChanges, Memberlist};

/// Applies each keyring the file yields until the stream ends or the task is stopped (the
/// agent aborts it on shutdown). Contents that cannot be used keep the keys in force and are
/// counted for `/metrics` (the driver counts what it applies and what it refuses).
pub(super) async fn apply_changes(
    ml: Memberlist,
    mut changes: KeyringChanges,
    counts: Arc<Mutex<EventCounts>>,
) {
    while let Some(change) = changes.next().await {
        let keys = match change {
            Ok(keys) => keys,
            Err(e) => {
                counts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .keyring_file_errors += 1;
                emit("keyring_rejected", json!({ "error": e.to_string() }));
                continue;
            }
        };
        let n = keys.len();
        match ml.set_keyring(keys).await {
            Ok(()) => emit("keyring_reloaded", json!({ "keys": n })),
            Err(e) => emit("keyring_rejected", json!({ "error": e.to_string() })),
        }
    }
}
