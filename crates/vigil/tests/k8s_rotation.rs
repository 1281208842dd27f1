//! Gossip keys that rotate themselves, end to end: a real kube-apiserver (vigil-testenv),
//! five `vigil speaker`s on lab hosts (under MetalLB's speaker ServiceAccount plus a Role for
//! their acknowledgement Leases), and `vigil controller` rotating the memberlist Secret's
//! key every few seconds, while a client asks ARP for the VIP without pause.
//!
//! Each test asserts that no speaker ever suspected or lost a member during the rotations,
//! that no MAC but the owner's ever answered for the VIP, and that every rotation ended with
//! every live speaker sending with the new key. No duration is asserted; every wait is a
//! bounded poll; the time one full rotation took on five nodes is printed.
//!
//! Lab: `vigil_kubelab::cluster`: the API server on `cp` (198.18.0.2), speakers `a`..`e`
//! (198.18.0.11-15), a client (198.18.0.100), one bridge; namespace prefixes `krota`, `krotb`,
//! `krotc`. Root and the Go programs
//! are needed (skips otherwise, fails under `VIGIL_REQUIRE_ROOT=1` / `VIGIL_REQUIRE_GO=1`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams};
use vigil_k8s::key_ack;
use vigil_k8s::secret::{KEYRING_ENTRY, KeyringForm, Phase, SECRET_KEY_FILE, key_id};
use vigil_kubelab::arp_ask;
use vigil_kubelab::cluster::{
    CLIENT, CLIENT4, Cluster, ClusterSpec, KEY_ACK_RBAC, LabProcess, LbService, pool_yaml,
};
use vigil_kubelab::metallb::{self, MEMBERLIST_SECRET, METALLB_NAMESPACE};

const VIP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 200);
/// The pool the VIP comes from (advertised on every interface).
const POOL: &str = "198.18.0.200-198.18.0.209";
/// How many speaker hosts [`Rig::start`] runs.
const NODES: usize = 5;
/// One lab at a time: each runs six to seven busy processes, and CI has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Where each speaker serves `/metrics` (on its gossip address).
const METRICS_PORT: u16 = 7472;
/// Bounds on the waits (generous: two shared cores).
const SETTLE_LIMIT: Duration = Duration::from_secs(60);
const ROTATION_LIMIT: Duration = Duration::from_secs(90);

/// The `vigil` binary under test.
fn vigil() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_vigil"))
}

/// The cluster, its processes and what the tests look at.
struct Rig {
    speakers: Vec<LabProcess>,
    controllers: Vec<LabProcess>,
    // Last: the lab goes after every process in it.
    c: Cluster,
}

impl Rig {
    /// The cluster with [`NODES`] speaker hosts, MetalLB's objects, the acknowledgement Role,
    /// the pool, Service `smoke/web` at [`VIP`] with endpoints on every node; then a vigil
    /// speaker on each.
    fn start(test: &str, tag: &str) -> Option<Self> {
        Self::start_some(test, tag, NODES, NODES)
    }

    /// As [`Rig::start`] with `nodes` speaker hosts, the first `vigil` of them running
    /// `vigil speaker` (the rest is for MetalLB's speaker).
    fn start_some(test: &str, tag: &str, nodes: usize, vigil: usize) -> Option<Self> {
        let c = Cluster::start(test, tag, &ClusterSpec::nodes(nodes))?;
        c.apply("acknowledgement RBAC", KEY_ACK_RBAC);
        c.apply("pool and L2Advertisement", &pool_yaml(&[POOL], &[]));
        c.namespace("smoke");
        c.add_service(
            &LbService::new("smoke", "web")
                .endpoints_on(&c.nodes(), 10)
                .ingress(&[IpAddr::V4(VIP)]),
        );
        let mut rig = Self {
            speakers: Vec::new(),
            controllers: Vec::new(),
            c,
        };
        for i in 0..vigil {
            let speaker = rig.start_speaker(i);
            rig.speakers.push(speaker);
        }
        Some(rig)
    }

    /// `vigil speaker` on host `i` (a restart logs to a fresh file).
    fn start_speaker(&self, i: usize) -> LabProcess {
        let args = [
            format!("--ml-secret-name={MEMBERLIST_SECRET}"),
            "--key-ack-interval=1s".to_string(),
            format!("--port={METRICS_PORT}"),
            // MetalLB's memberlist timing: tolerant of a loaded machine's stalls, so a
            // suspicion here means keys, not CPU (the fast profile is tested elsewhere).
            "--profile=lan".to_string(),
        ];
        self.c.vigil_speaker(vigil(), i, &args)
    }

    /// `vigil controller` with a short rotation period, the admin's kubeconfig, on `cp`,
    /// serving `/metrics` on the control plane's address.
    fn start_controller(&mut self, identity: &str) {
        let args = [
            format!("--ml-secret-name={MEMBERLIST_SECRET}"),
            "--key-rotation-period=4s".to_string(),
            "--key-rotation-settle=1s".to_string(),
            "--key-rotation-retain=2s".to_string(),
            "--lease-duration=3s".to_string(),
            "--lease-grace=1s".to_string(),
            format!("--metrics-addr={}", self.controller_metrics()),
        ];
        let controller = self.c.vigil_controller(vigil(), identity, &args);
        self.controllers.push(controller);
    }

    fn controller_metrics(&self) -> SocketAddr {
        SocketAddr::new(self.c.lab.cp().addr().ip(), METRICS_PORT)
    }

    fn check_running(&mut self) {
        check_running(&mut self.speakers, &mut self.controllers);
    }

    fn logs(&self) -> String {
        self.speakers
            .iter()
            .chain(&self.controllers)
            .map(|p| format!("--- {}\n{}", p.name(), p.log_tail(15)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The MAC that alone answers for the VIP, once one does (bounded).
    fn wait_single_owner(&mut self) -> String {
        let Self {
            speakers,
            controllers,
            c,
        } = self;
        match c.wait_single_answer(VIP, SETTLE_LIMIT, || check_running(speakers, controllers)) {
            Ok(node) => c.mac(&node).to_string(),
            Err(last) => panic!("no single owner for {VIP}: {last:?}\n{}", self.logs()),
        }
    }

    /// The Secret's keyring entry (`None` before the first rotation writes one) and
    /// `secretkey`.
    fn keyring(&self) -> (Option<KeyringForm>, String) {
        let secrets: Api<Secret> = Api::namespaced(self.c.client().clone(), METALLB_NAMESPACE);
        let secret = self
            .c
            .block_on(secrets.get(MEMBERLIST_SECRET))
            .expect("get the memberlist Secret");
        let data = secret.data.unwrap_or_default();
        let entry = |k: &str| data.get(k).map(|b| b.0.clone());
        let form = entry(KEYRING_ENTRY).map(|e| {
            KeyringForm::parse(&e, entry(SECRET_KEY_FILE).as_deref())
                .expect("the controller writes a valid keyring, primary = secretkey")
        });
        let key = String::from_utf8(entry(SECRET_KEY_FILE).unwrap_or_default()).expect("utf-8");
        (form, key)
    }

    /// Polls the Secret until `done` holds (bounded; panics with the logs otherwise).
    fn wait_keyring(&mut self, what: &str, done: impl Fn(&KeyringForm) -> bool) -> KeyringForm {
        let end = Instant::now() + ROTATION_LIMIT;
        loop {
            self.check_running();
            if let (Some(form), _) = self.keyring()
                && done(&form)
            {
                return form;
            }
            assert!(
                Instant::now() < end,
                "keyring never {what}: {:?}\n{}",
                self.keyring(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The speakers' acknowledgements.
    fn acks(&self) -> Vec<key_ack::Acknowledgement> {
        let leases: Api<Lease> = Api::namespaced(self.c.client().clone(), METALLB_NAMESPACE);
        let list = self
            .c
            .block_on(leases.list(&ListParams::default()))
            .expect("list Leases");
        list.items.iter().filter_map(key_ack::from_lease).collect()
    }

    /// Waits until the running speakers all acknowledge `primary` (as id) as what they send
    /// with, and each sees every running speaker as a member.
    fn wait_acks(&mut self, primary: &str) {
        let id = key_id(primary.as_bytes());
        let running: BTreeSet<String> = self
            .speakers
            .iter()
            .filter(|p| p.running())
            .map(|p| p.name().to_string())
            .collect();
        let end = Instant::now() + SETTLE_LIMIT;
        loop {
            let acks = self.acks();
            // Each sees every other running speaker (itself too, or not: either is fine).
            let sees_all = |a: &key_ack::Acknowledgement| {
                a.members.as_ref().is_some_and(|m| {
                    let mut others = m.clone();
                    others.insert(a.node.clone());
                    others == running
                })
            };
            let good = running.iter().all(|node| {
                acks.iter().any(|a| {
                    &a.node == node && a.primary.as_deref() == Some(id.as_str()) && sees_all(a)
                })
            });
            if good {
                return;
            }
            assert!(
                Instant::now() < end,
                "speakers {running:?} never all acknowledged {id}: {acks:#?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `vigil_gossip_decrypt_failures_total` of every running speaker: packets or streams
    /// no installed key decrypted (any would mean two keyrings that cannot talk).
    fn decrypt_failures(&self) -> Vec<(String, u64)> {
        self.speaker_metric("vigil_gossip_decrypt_failures_total")
    }

    /// One series (`name` with its labels, as rendered) of every running speaker.
    fn speaker_metric(&self, series: &str) -> Vec<(String, u64)> {
        self.speakers
            .iter()
            .zip(&self.c.speakers)
            .filter(|(p, _)| p.running())
            .map(|(p, s)| {
                let addr = SocketAddr::new(s.ip, METRICS_PORT);
                let text = (self.c)
                    .scrape(&self.c.ns(&s.host), addr, "/metrics")
                    .unwrap_or_else(|e| panic!("{}: GET /metrics: {e}", p.name()))
                    .body;
                let value = text
                    .lines()
                    .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
                    .unwrap_or_else(|| panic!("{}: no {series} in\n{text}", p.name()));
                (p.name().to_string(), value.trim().parse().expect("a count"))
            })
            .collect()
    }

    /// Gossip trouble in every speaker's log: suspicions and deaths.
    fn gossip_trouble(&self) -> Vec<String> {
        self.speakers
            .iter()
            .flat_map(|p| {
                p.log_text()
                    .lines()
                    .filter(|l| {
                        l.contains("\"event\":\"member_suspect\"")
                            || l.contains("\"event\":\"member_failed\"")
                    })
                    .map(|l| format!("{}: {l}", p.name()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// Panics, with the end of its log, when a process the test started has exited by itself.
fn check_running(speakers: &mut [LabProcess], controllers: &mut [LabProcess]) {
    for p in speakers.iter_mut().chain(controllers.iter_mut()) {
        p.check_running();
    }
}

/// A client asking ARP for the VIP back to back (each question waits 100 ms for answers)
/// until stopped or five minutes pass.
struct Prober {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<ProbeLog>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default, Clone)]
struct ProbeLog {
    questions: u64,
    unanswered: u64,
    /// Answers from a MAC other than the owner's.
    foreign: Vec<String>,
}

impl Prober {
    fn start(ns: String, owner: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(ProbeLog::default()));
        let thread = {
            let (stop, seen) = (Arc::clone(&stop), Arc::clone(&seen));
            std::thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(300);
                while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                    let answers = arp_ask(&ns, "eth0", CLIENT4, VIP, Duration::from_millis(100))
                        .expect("ask ARP from the client");
                    let mut log = seen.lock().expect("probe log");
                    log.questions += 1;
                    if answers.is_empty() {
                        log.unanswered += 1;
                    }
                    for a in answers.iter().filter(|a| a.mac != owner) {
                        log.foreign.push(a.mac.clone());
                    }
                }
            })
        };
        Self {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> ProbeLog {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.seen.lock().expect("probe log").clone()
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Waits for the next rotation to begin after `from` (the primary in force) and to end;
/// returns the new primary and how long it took from the first sight of `adding` to
/// `steady` again.
fn one_rotation(rig: &mut Rig, from: &str) -> (String, Duration) {
    let adding = rig.wait_keyring("began a rotation", |f| {
        f.phase == Phase::Adding && f.keys[0] == from
    });
    let began = Instant::now();
    let new = adding.keys[1].clone();
    rig.wait_keyring("completed the rotation", |f| {
        f.phase == Phase::Steady && f.keys == [new.clone()]
    });
    (new, began.elapsed())
}

fn assert_quiet(test: &str, rig: &Rig, probes: &ProbeLog) {
    let failures = rig.decrypt_failures();
    assert!(
        failures.iter().all(|(_, n)| *n == 0),
        "{test}: packets no installed key decrypted: {failures:?}"
    );
    let trouble = rig.gossip_trouble();
    assert!(
        trouble.is_empty(),
        "{test}: gossip suspicions or deaths during rotation:\n{}",
        trouble.join("\n")
    );
    assert!(
        probes.foreign.is_empty(),
        "{test}: the VIP moved: answers from {:?}",
        probes.foreign
    );
    assert!(probes.questions > 0, "{test}: the client asked nothing");
}

#[test]
fn keys_rotate_on_five_nodes_without_a_suspicion_and_a_new_controller_resumes() {
    let test = "keys_rotate_on_five_nodes_without_a_suspicion_and_a_new_controller_resumes";
    let _serial = one_at_a_time();
    let Some(mut rig) = Rig::start(test, "krota") else {
        return;
    };
    let owner = rig.wait_single_owner();
    assert!(rig.c.macs.contains(&owner), "{owner} is no speaker's MAC");
    let initial = rig.keyring().1;
    rig.wait_acks(&initial);
    let prober = Prober::start(rig.c.ns(CLIENT), owner.clone());
    rig.start_controller("controller-0");

    // (a) One full rotation, everyone cooperating.
    let (k1, took) = one_rotation(&mut rig, &initial);
    rig.wait_acks(&k1);
    eprintln!(
        "{test}: one full rotation on {} nodes took {took:?} (adding seen to steady; settle 1s, retain 2s, acknowledgements every 1s)",
        NODES
    );

    // (d) The controller killed in the middle of the next rotation: a new one resumes from
    // the Secret and the Leases alone.
    let adding = rig.wait_keyring("began the second rotation", |f| {
        f.phase == Phase::Adding && f.keys[0] == k1
    });
    rig.controllers[0].kill();
    rig.start_controller("controller-1");
    let k2 = adding.keys[1].clone();
    rig.wait_keyring("completed the second rotation", |f| {
        f.phase == Phase::Steady && f.keys == [k2.clone()]
    });
    rig.wait_acks(&k2);
    let resumed = rig.controllers[1].log_text();
    assert!(
        resumed.contains("\"event\":\"key_rotation_step\""),
        "{test}: the new controller wrote no step:\n{}",
        rig.controllers[1].log_tail(20)
    );
    // Bad keyring data in the Secret (the controller stopped, so nobody repairs it): every
    // speaker counts and logs it and keeps the keyring in force; none stops.
    rig.controllers[1].kill();
    let rejected = "vigil_config_reloads_total{result=\"rejected\"}";
    let before = rig.speaker_metric(rejected);
    let secrets: Api<Secret> = Api::namespaced(rig.c.client().clone(), METALLB_NAMESPACE);
    let garbage = serde_json::json!({ "stringData": { KEYRING_ENTRY: "{not a keyring" } });
    rig.c
        .block_on(secrets.patch(
            MEMBERLIST_SECRET,
            &PatchParams::default(),
            &Patch::Merge(&garbage),
        ))
        .expect("write a bad keyring");
    let end = Instant::now() + SETTLE_LIMIT;
    loop {
        rig.check_running();
        let after = rig.speaker_metric(rejected);
        if after.iter().zip(&before).all(|(a, b)| a.1 > b.1) {
            break;
        }
        assert!(
            Instant::now() < end,
            "{test}: the bad keyring was not counted by every speaker: {before:?} -> {after:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    rig.wait_acks(&k2);
    assert!(
        rig.speakers
            .iter()
            .all(|p| p.log_text().contains("\"event\":\"keyring_rejected\"")),
        "{test}: a speaker did not log the bad keyring\n{}",
        rig.logs()
    );
    let probes = prober.finish();
    assert_quiet(test, &rig, &probes);
    eprintln!(
        "{test}: 2 rotations, then a bad keyring kept out; the client asked {} times, {} unanswered, no other MAC answered",
        probes.questions, probes.unanswered
    );
}

#[test]
fn keys_rotate_through_an_api_outage_and_past_a_node_that_was_offline() {
    let test = "keys_rotate_through_an_api_outage_and_past_a_node_that_was_offline";
    let _serial = one_at_a_time();
    let Some(mut rig) = Rig::start(test, "krotb") else {
        return;
    };
    let owner = rig.wait_single_owner();
    let initial = rig.keyring().1;
    rig.wait_acks(&initial);
    let prober = Prober::start(rig.c.ns(CLIENT), owner.clone());
    rig.start_controller("controller-0");

    // (b) The API server stopped in the middle of a rotation: gossip goes on; the rotation
    // finishes once it is back.
    let adding = rig.wait_keyring("began a rotation", |f| {
        f.phase == Phase::Adding && f.keys[0] == initial
    });
    rig.c.lab.cp_mut().stop();
    std::thread::sleep(Duration::from_secs(4));
    rig.check_running();
    rig.c.lab.cp_mut().start_again().expect("API server back");
    let k1 = adding.keys[1].clone();
    rig.wait_keyring("completed the rotation after the outage", |f| {
        f.phase == Phase::Steady && f.keys == [k1.clone()]
    });
    rig.wait_acks(&k1);

    // (c) A node that is not the owner goes offline during the next rotation; the rotation
    // completes without it; it comes back afterwards and rejoins with the new key.
    let offline = (0..rig.c.speakers.len())
        .find(|&i| rig.c.macs[i] != owner)
        .expect("a node that is not the owner");
    let adding = rig.wait_keyring("began the second rotation", |f| {
        f.phase == Phase::Adding && f.keys[0] == k1
    });
    rig.speakers[offline].terminate(Duration::from_secs(10));
    let k2 = adding.keys[1].clone();
    rig.wait_keyring("completed the rotation without the offline node", |f| {
        f.phase == Phase::Steady && f.keys == [k2.clone()]
    });
    // Its old log (from before the stop) is kept aside; the new run logs afresh.
    rig.speakers[offline] = rig.start_speaker(offline);
    let current = rig.keyring().1;
    rig.wait_acks(&current);
    let probes = prober.finish();
    assert_quiet(test, &rig, &probes);
    eprintln!(
        "{test}: {} was offline through a rotation and back (now on {}); the client asked {} times, {} unanswered, no other MAC answered",
        rig.c.speakers[offline].node,
        key_id(k2.as_bytes()),
        probes.questions,
        probes.unanswered
    );
}

#[test]
fn a_metallb_speaker_in_the_cluster_pauses_rotation_until_it_leaves() {
    let test = "a_metallb_speaker_in_the_cluster_pauses_rotation_until_it_leaves";
    let _serial = one_at_a_time();
    let Some(binaries) = metallb::metallb_binaries(test) else {
        return;
    };
    let Some(mut rig) = Rig::start_some(test, "krotc", 4, 3) else {
        return;
    };
    // Host 3's speaker is MetalLB's, under MetalLB's speaker ServiceAccount.
    let go_config = rig.c.speakers[3].clone();
    let mut go =
        vigil_kubelab::MetalLbSpeaker::start(&rig.c.lab, &binaries, &go_config, &rig.c.key)
            .expect("start MetalLB's speaker");
    let initial = rig.keyring().1;
    // The vigil speakers see the MetalLB speaker in gossip (it has no acknowledgement).
    let end = Instant::now() + SETTLE_LIMIT;
    while !rig.acks().iter().any(|a| {
        a.members
            .as_ref()
            .is_some_and(|m| m.contains(&go_config.node))
    }) {
        rig.check_running();
        assert!(
            Instant::now() < end,
            "{test}: no vigil speaker sees {} in gossip\n{}",
            go_config.node,
            rig.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    rig.start_controller("controller-0");

    // Paused: a Warning event naming the MetalLB speaker, the metric, and no key change.
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(rig.c.client().clone(), METALLB_NAMESPACE);
    let end = Instant::now() + SETTLE_LIMIT;
    let note = loop {
        rig.check_running();
        let list = rig
            .c
            .block_on(events.list(&ListParams::default().fields(&format!(
                "involvedObject.name={MEMBERLIST_SECRET},reason=KeyRotationPaused"
            ))))
            .expect("list events");
        if let Some(e) = list
            .items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning"))
        {
            break e.message.unwrap_or_default();
        }
        assert!(
            Instant::now() < end,
            "{test}: no KeyRotationPaused event\n{}",
            rig.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(note.contains(&go_config.node), "{test}: {note}");
    let metrics = (rig.c)
        .scrape(rig.c.lab.cp().ns(), rig.controller_metrics(), "/metrics")
        .expect("GET the controller's /metrics")
        .body;
    assert!(
        metrics.contains("vigil_controller_key_rotation_paused{reason=\"metallb_speaker\"} 1"),
        "{test}: {metrics}"
    );
    // Several periods (4 s) pass: the key stays.
    std::thread::sleep(Duration::from_secs(10));
    let (form, key) = rig.keyring();
    assert_eq!(
        key, initial,
        "{test}: secretkey changed beside a MetalLB speaker"
    );
    assert!(
        form.as_ref()
            .is_none_or(|f| f.phase == Phase::Steady && f.keys == [initial.clone()]),
        "{test}: the keyring moved: {form:?}"
    );
    // The MetalLB speaker leaves: the rotation goes on.
    go.process_mut().stop();
    let (k1, _) = one_rotation(&mut rig, &initial);
    rig.wait_acks(&k1);
    eprintln!("{test}: paused with \"{note}\"; rotated once the MetalLB speaker left");
}
