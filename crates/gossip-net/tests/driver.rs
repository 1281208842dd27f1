//! In-process tests of the driver: real sockets on loopback, vigil nodes only.

use std::net::SocketAddr;
use std::time::Duration;
use vigil_gossip::wire::{Label, SecretKey};
use vigil_gossip::{Config, MemberState};
use vigil_gossip_net::{Event, Events, Memberlist, Options};

fn opts(name: &str) -> Options {
    let mut o = Options::new(name, "127.0.0.1:0".parse().unwrap());
    o.config = Config::fast();
    o
}

async fn wait_for<F: AsyncFnMut() -> bool>(what: &str, mut cond: F) {
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < end {
        if cond().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn alive(m: &Memberlist) -> Vec<String> {
    let mut v: Vec<String> = m
        .members()
        .await
        .unwrap()
        .into_iter()
        .filter(|x| x.state == MemberState::Alive)
        .map(|x| x.name.to_string())
        .collect();
    v.sort();
    v
}

async fn next_user_msg(ev: &mut Events) -> Vec<u8> {
    loop {
        match tokio::time::timeout(Duration::from_secs(20), ev.recv()).await {
            Ok(Some(Event::Gossip(vigil_gossip::Event::UserMsg(m)))) => return m,
            Ok(Some(_)) => {}
            other => panic!("no user message: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_join_exchange_messages_and_see_a_leave() {
    let (a, _ea) = Memberlist::start(opts("a")).await.unwrap();
    let (b, mut eb) = Memberlist::start(opts("b")).await.unwrap();
    let (c, _ec) = Memberlist::start(opts("c")).await.unwrap();
    let seed = vec![a.local_addr().to_string()];
    assert_eq!(b.join(&seed).await.unwrap(), 1);
    assert_eq!(c.join(&seed).await.unwrap(), 1);
    for m in [&a, &b, &c] {
        wait_for("all see all", async || alive(m).await == ["a", "b", "c"]).await;
    }
    a.send_user(b.local_addr(), b"over tcp".to_vec(), true)
        .unwrap();
    assert_eq!(next_user_msg(&mut eb).await, b"over tcp");
    a.send_user(b.local_addr(), b"over udp".to_vec(), false)
        .unwrap();
    assert_eq!(next_user_msg(&mut eb).await, b"over udp");
    c.leave(Duration::from_secs(2)).await.unwrap();
    c.shutdown().await;
    wait_for("c seen as left", async || {
        a.members()
            .await
            .unwrap()
            .iter()
            .any(|m| &*m.name == "c" && m.state == MemberState::Left)
    })
    .await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_node_is_declared_dead() {
    let (a, _ea) = Memberlist::start(opts("a")).await.unwrap();
    let (b, _eb) = Memberlist::start(opts("b")).await.unwrap();
    b.join(&[a.local_addr().to_string()]).await.unwrap();
    wait_for("join", async || alive(&a).await.len() == 2).await;
    b.shutdown().await;
    wait_for("b dead", async || {
        a.members()
            .await
            .unwrap()
            .iter()
            .any(|m| &*m.name == "b" && m.state == MemberState::Dead)
    })
    .await;
    // b's UDP port answered a's probes with ICMP port unreachable.
    assert!(a.stats().await.unwrap().icmp_unreachable > 0);
    a.shutdown().await;
}

/// With the `fast` profile a stopped node's closed port is a proof of absence: a probe's TCP
/// fallback ping is refused and reported to the engine, which declares the node dead without
/// waiting for a suspicion to expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_proves_a_stopped_node_absent() {
    let (a, _ea) = Memberlist::start(opts("a")).await.unwrap();
    let (b, _eb) = Memberlist::start(opts("b")).await.unwrap();
    let (c, _ec) = Memberlist::start(opts("c")).await.unwrap();
    let seed = vec![a.local_addr().to_string()];
    b.join(&seed).await.unwrap();
    c.join(&seed).await.unwrap();
    for m in [&a, &b, &c] {
        wait_for("all see all", async || alive(m).await.len() == 3).await;
    }
    c.shutdown().await;
    for m in [&a, &b] {
        wait_for("c dead", async || {
            m.members()
                .await
                .unwrap()
                .iter()
                .any(|x| &*x.name == "c" && x.state == MemberState::Dead)
        })
        .await;
    }
    let (sa, sb) = (a.stats().await.unwrap(), b.stats().await.unwrap());
    assert!(
        sa.engine.absences_proven + sb.engine.absences_proven >= 1,
        "a refused fallback ping proved c absent: {sa:?} {sb:?}"
    );
    assert!(sa.streams_refused + sb.streams_refused >= 1);
    assert_eq!(alive(&a).await, ["a", "b"]);
    assert_eq!(alive(&b).await, ["a", "b"]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_key_or_label_never_joins() {
    let key = |b: u8| SecretKey::new(&[b; 16]).unwrap();
    let mut o = opts("a");
    o.keys = vec![key(1)];
    let (a, _ea) = Memberlist::start(o).await.unwrap();
    let mut o = opts("b");
    o.keys = vec![key(2)];
    let (b, _eb) = Memberlist::start(o).await.unwrap();
    assert!(b.join(&[a.local_addr().to_string()]).await.is_err());
    assert!(a.stats().await.unwrap().engine.decrypt_failures > 0);

    let mut o = opts("c");
    o.keys = vec![key(1)];
    o.label = Label::new("other").unwrap();
    let (c, _ec) = Memberlist::start(o).await.unwrap();
    assert!(c.join(&[a.local_addr().to_string()]).await.is_err());
    assert_eq!(alive(&a).await, ["a"]);

    let mut o = opts("d");
    o.keys = vec![key(1)];
    let (d, _ed) = Memberlist::start(o).await.unwrap();
    assert_eq!(d.join(&[a.local_addr().to_string()]).await.unwrap(), 1);
    for m in [&a, &b, &c, &d] {
        m.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_loopback_works() {
    let mk = |n: &str| {
        let mut o = Options::new(n, "[::1]:0".parse::<SocketAddr>().unwrap());
        o.config = Config::fast();
        o
    };
    let (a, _ea) = Memberlist::start(mk("a")).await.unwrap();
    let (b, _eb) = Memberlist::start(mk("b")).await.unwrap();
    b.join(&[a.local_addr().to_string()]).await.unwrap();
    wait_for("v6 join", async || alive(&a).await.len() == 2).await;
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_without_peers_and_unspecified_bind_needs_advertise() {
    let o = Options::new("x", "0.0.0.0:0".parse().unwrap());
    assert!(Memberlist::start(o).await.is_err());
    let (a, _e) = Memberlist::start(opts("a")).await.unwrap();
    a.leave(Duration::from_millis(100)).await.unwrap();
    a.shutdown().await;
    assert!(a.members().await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_keyring_installs_switches_and_removes_and_a_watched_file_feeds_it() {
    use futures_util::StreamExt;
    let dir = std::env::temp_dir().join(format!("vigil-gossip-net-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("keyring.json");
    std::fs::write(&path, r#"["AQEBAQEBAQEBAQEBAQEBAQ=="]"#).unwrap();
    let (keys, changes) =
        vigil_gossip_net::watch_keyring_file(path.clone(), Duration::from_millis(20)).unwrap();
    let mut changes = changes;
    let mut o = opts("a");
    o.keys = keys;
    let (a, _ea) = Memberlist::start(o).await.unwrap();
    let mut o = opts("b");
    o.keys = vec![SecretKey::new(&[1; 16]).unwrap()];
    let (b, _eb) = Memberlist::start(o).await.unwrap();
    assert_eq!(b.join(&[a.local_addr().to_string()]).await.unwrap(), 1);
    // Rotate on a: the new key becomes primary, the old one stays readable until removed.
    std::fs::write(
        &path,
        r#"["AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=", "AQEBAQEBAQEBAQEBAQEBAQ=="]"#,
    )
    .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(20), changes.next()).await;
    let keys = next.unwrap().unwrap().unwrap();
    a.set_keyring(keys).await.unwrap();
    assert_eq!(a.keys().await.unwrap(), vec![vec![2u8; 32], vec![1u8; 16]]);
    // Only the new key: the old one is removed, the primary stays.
    std::fs::write(&path, r#"["AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI="]"#).unwrap();
    let next = tokio::time::timeout(Duration::from_secs(20), changes.next()).await;
    a.set_keyring(next.unwrap().unwrap().unwrap())
        .await
        .unwrap();
    assert_eq!(a.keys().await.unwrap(), vec![vec![2u8; 32]]);
    // Bad contents come out as an error and change nothing; an empty list is refused.
    std::fs::write(&path, "not json").unwrap();
    let next = tokio::time::timeout(Duration::from_secs(20), changes.next()).await;
    assert!(next.unwrap().unwrap().is_err());
    assert!(a.set_keyring(Vec::new()).await.is_err());
    assert_eq!(a.keys().await.unwrap(), vec![vec![2u8; 32]]);
    // Two keyrings applied, one refused.
    let stats = a.stats().await.unwrap();
    assert_eq!((stats.keyring_reloads, stats.keyring_errors), (2, 1));
    a.shutdown().await;
    b.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
