//! The agent: a bare gossip member that announces nothing, for operators and tests.
//!
//! It joins a memberlist cluster (Go or vigil nodes), prints every membership event as a JSON
//! line on stdout ([`events`]), and serves an HTTP endpoint on the shared server
//! ([`routes`]). A keyring file is watched here and applied as data ([`keyring`]). When
//! `shutdown` completes it leaves gracefully (bounded by the leave timeout) and returns. `cmd::agent` parses the command line and turns signals into `shutdown`.

mod events;
mod keyring;
mod routes;
mod settings;

pub use settings::{Args, LONG_ABOUT, Settings};

use events::{EventCounts, emit, print_event};
use serde_json::json;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use vigil_gossip_net::{Memberlist, watch_keyring_file};
use vigil_observe::Guard;

/// Runs the agent until `shutdown` completes or the gossip driver stops.
pub async fn run(mut s: Settings, shutdown: impl Future<Output = ()>) -> Result<(), String> {
    let keyrings = match &s.keyring_file {
        Some(path) => {
            let (keys, changes) =
                watch_keyring_file(path.clone(), KEYRING_POLL).map_err(|e| e.to_string())?;
            s.options.keys = keys;
            Some(changes)
        }
        None => None,
    };
    let (ml, mut events) = Memberlist::start(s.options)
        .await
        .map_err(|e| e.to_string())?;
    let counts = Arc::new(Mutex::new(EventCounts::default()));
    let keyring_task = keyrings
        .map(|changes| tokio::spawn(keyring::apply_changes(ml.clone(), changes, counts.clone())));
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin = match s.admin {
        Some(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|e| format!("cannot bind admin address {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| e.to_string())?;
            let state = routes::AgentState {
                ml: ml.clone(),
                counts: counts.clone(),
            };
            let router = routes::router(state, &Guard::new(s.admin_token));
            tokio::spawn(vigil_observe::http::serve(listener, router, async {
                let _ = http_stopped.await;
            }));
            Some(local)
        }
        None => None,
    };
    emit(
        "ready",
        json!({
            "name": ml.name(),
            "bind": ml.local_addr().to_string(),
            "addr": ml.advertise_addr().to_string(),
            "admin": admin.map(|a| a.to_string()),
        }),
    );
    if !s.seeds.is_empty() {
        tokio::spawn(join_loop(ml.clone(), s.seeds, s.retry_join));
    }
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(ev) => print_event(ev, &mut counts.lock().unwrap_or_else(PoisonError::into_inner)),
                None => return Err("the gossip driver stopped".into()),
            },
            () = &mut shutdown => break,
        }
    }
    if let Some(task) = keyring_task {
        task.abort();
    }
    emit("leaving", json!({}));
    let _ = ml.leave(s.leave_timeout).await;
    let _ = stop_http.send(());
    ml.shutdown().await;
    emit("stopped", json!({}));
    Ok(())
}

/// How often the keyring file is looked at for changes.
const KEYRING_POLL: Duration = Duration::from_secs(1);

/// Joins through `seeds`; with `retry`, tries again after that long until one answers.
async fn join_loop(ml: Memberlist, seeds: Vec<String>, retry: Option<Duration>) {
    loop {
        match ml.join(&seeds).await {
            Ok(n) => return emit("joined", json!({ "n": n })),
            Err(e) => emit("joined", json!({ "n": 0, "error": e.to_string() })),
        }
        let Some(after) = retry else { return };
        tokio::time::sleep(after).await;
    }
}

#[cfg(test)]
mod tests;
