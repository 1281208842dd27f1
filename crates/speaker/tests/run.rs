//! The runner in-process: a real gossip node on loopback and a real announcer thread that
//! qualifies no interface (so no frame leaves), driven through `run`'s streams and shutdown
//! future, observed through a recording `StatusSink`.

use futures_util::stream;
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use vigil_speaker::core::Action;
use vigil_speaker::model::{
    DesiredState, GossipSettings, InterfaceSelection, ServiceSpec, StaticSettings,
};
use vigil_speaker::observe::SourceCounters;
use vigil_speaker::{HealthReport, Source, StatusSink};

struct Recorder(mpsc::UnboundedSender<Action>);

impl StatusSink for Recorder {
    fn notice(&mut self, action: &Action) {
        let _ = self.0.send(action.clone());
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn settings() -> StaticSettings {
    StaticSettings {
        node_name: "solo".into(),
        gossip: GossipSettings {
            bind: "127.0.0.1:0".parse().unwrap(),
            advertise: None,
            profile: vigil_gossip::Profile::Fast,
            label: String::new(),
            rejoin_interval: Duration::from_secs(1),
            tuning: None,
        },
        // No interface has this name: the announcer opens no packet socket.
        interfaces: InterfaceSelection {
            include: Some(BTreeSet::from(["vigil-none0".to_string()])),
            exclude: None,
            exclude_matching: None,
        },
        local_address: None,
        http_listen: None,
        probe_listen: None,
        hold_down: None,
        refresh: None,
        announce_rate: None,
    }
}

fn desired(vip: &str) -> DesiredState {
    DesiredState {
        services: vec![ServiceSpec::new("web", [ip(vip)])],
        ..DesiredState::default()
    }
}

/// Waits for an action matching `want`, skipping others.
async fn next(
    rx: &mut mpsc::UnboundedReceiver<Action>,
    what: &str,
    want: impl Fn(&Action) -> bool,
) {
    let wait = async {
        loop {
            match rx.recv().await {
                Some(a) if want(&a) => return,
                Some(_) => {}
                None => panic!("the runner ended before {what}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .unwrap_or_else(|_| panic!("no {what} in time"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_speaker_announces_follows_new_snapshots_and_stops_on_shutdown() {
    let (notices, mut rx) = mpsc::unbounded_channel();
    let (desired_tx, mut desired_rx) = mpsc::channel::<DesiredState>(4);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let source = Source {
        initial: desired("198.18.0.100"),
        initial_keys: Vec::new(),
        desired: stream::poll_fn(move |cx| desired_rx.poll_recv(cx)),
        keyrings: stream::pending(),
        health: stream::pending::<HealthReport>(),
        counters: SourceCounters::default(),
    };
    let speaker = tokio::spawn(vigil_speaker::run(
        settings(),
        source,
        Recorder(notices),
        async move {
            let _ = stop_rx.await;
        },
    ));

    // Alone after its first join (no seeds), it owns the VIP.
    next(
        &mut rx,
        "the VIP announced",
        |a| matches!(a, Action::Announced { vip, .. } if *vip == ip("198.18.0.100")),
    )
    .await;
    // A new snapshot moves the service to another VIP: the old one goes silent (nobody
    // takes it), the new one is announced.
    desired_tx.send(desired("198.18.0.101")).await.unwrap();
    next(&mut rx, "the old VIP withdrawn", |a| {
        matches!(a, Action::Withdrawn { vip, successor: None, .. } if *vip == ip("198.18.0.100"))
    })
    .await;
    next(
        &mut rx,
        "the new VIP announced",
        |a| matches!(a, Action::Announced { vip, .. } if *vip == ip("198.18.0.101")),
    )
    .await;
    // Shutdown: leave, then stopped; `run` returns.
    stop_tx.send(()).unwrap();
    next(&mut rx, "a leave", |a| *a == Action::Leave).await;
    next(&mut rx, "the stop", |a| *a == Action::Stopped).await;
    let result = tokio::time::timeout(Duration::from_secs(10), speaker)
        .await
        .expect("run returns after the stop")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_checked_service_is_announced_only_once_its_check_passes() {
    let (notices, mut rx) = mpsc::unbounded_channel();
    let (health_tx, mut health_rx) = mpsc::channel::<HealthReport>(4);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let mut initial = desired("198.18.0.100");
    initial.services[0].health_checked = true;
    let source = Source {
        initial,
        initial_keys: Vec::new(),
        desired: stream::pending::<DesiredState>(),
        keyrings: stream::pending(),
        health: stream::poll_fn(move |cx| health_rx.poll_recv(cx)),
        counters: SourceCounters::default(),
    };
    let speaker = tokio::spawn(vigil_speaker::run(
        settings(),
        source,
        Recorder(notices),
        async move {
            let _ = stop_rx.await;
        },
    ));
    // The first election runs after the first join; a failing check keeps the VIP silent.
    next(&mut rx, "the first election", |a| {
        matches!(a, Action::Elected { .. })
    })
    .await;
    while let Ok(a) = rx.try_recv() {
        assert!(!matches!(a, Action::Announced { .. }), "{a:?}");
    }
    health_tx
        .send(HealthReport {
            service: "web".into(),
            passing: true,
            detail: "test".into(),
        })
        .await
        .unwrap();
    next(
        &mut rx,
        "the metadata without the failing check",
        |a| matches!(a, Action::PublishMeta(m) if m.failing.is_empty()),
    )
    .await;
    next(
        &mut rx,
        "the VIP announced",
        |a| matches!(a, Action::Announced { vip, .. } if *vip == ip("198.18.0.100")),
    )
    .await;
    stop_tx.send(()).unwrap();
    next(&mut rx, "the stop", |a| *a == Action::Stopped).await;
    let result = tokio::time::timeout(Duration::from_secs(10), speaker)
        .await
        .expect("run returns after the stop")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
}
