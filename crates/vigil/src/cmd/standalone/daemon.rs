//! The standalone daemon: gossip (vigil-gossip-net), the election ([`Speaker`] over vigil-lb)
//! and the announcer (vigil-l2-net), wired by one loop that re-elects every VIP on every
//! membership event, health change, hold-down end and reload, and hands the owned set to the
//! announcer at once.

use super::config::{Config, HealthCheck};
use super::health::{Checks, HealthChange};
use super::http::{self, Sources};
use super::local_address::LocalAddresses;
use super::speaker::{Change, Member, Speaker};
use super::state::{Shared, Status, StatusMember, StatusQuorum, StatusVip};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{error, info, warn};
use vigil_gossip::wire::Label;
use vigil_gossip_net::{Event, Memberlist, Options, resolve_seeds};
use vigil_l2_net::{Command, Driver, DriverConfig, Handle, Selection};
use vigil_lb::NodeMeta;

/// How often the configuration file is looked at for changes.
const FILE_POLL: Duration = Duration::from_secs(1);
/// First retry interval while no seed has answered; it doubles up to `gossip.rejoin_interval`.
const JOIN_RETRY: Duration = Duration::from_secs(1);
/// How long a graceful leave may take.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a stopping node keeps answering for a VIP whose successor has not been heard
/// claiming it. The successor claims it once our leave reaches it: normally within a few
/// gossip rounds, so this is a bound for the case where it never speaks.
const HANDOVER_BOUND: Duration = Duration::from_secs(1);
/// How often the announcer's events are looked at while handing over.
const HANDOVER_POLL: Duration = Duration::from_millis(5);

/// Runs until SIGTERM or SIGINT. Errors are start-up failures (sockets, announcer).
pub async fn run(
    path: PathBuf,
    config: Config,
    default_name: Option<String>,
) -> Result<(), String> {
    let started = Instant::now();
    let mut selection = Selection::default();
    if let Some(exclude) = &config.interfaces.exclude {
        selection.exclude = exclude.clone();
    }
    selection.include = config.interfaces.include.clone();
    // Before anything answers: the device exists, the ARP sysctls are safe, and addresses a
    // crashed run left behind are gone.
    let local = LocalAddresses::start(&config, &selection)?;
    let failing: BTreeSet<String> = checks_of(&config).into_keys().collect();
    let holding = config.election.hold_down.is_some();
    let meta = NodeMeta {
        labels: config.node.labels.clone(),
        failing: failing.clone(),
        holding,
    };

    let mut options = Options::new(config.node.name.clone(), config.gossip.bind);
    options.advertise = config.gossip.advertise;
    options.config = vigil_gossip::Config::profile(config.gossip.profile);
    options.meta = meta.encode();
    options.label = Label::new(config.gossip.label.clone())
        .map_err(|_| "gossip.label: too long".to_string())?;
    options.keyring_file = config.gossip.keyring_file.clone();
    let (gossip, mut events) = Memberlist::start(options)
        .await
        .map_err(|e| format!("gossip: {e}"))?;

    let announcer = vigil_l2::Config {
        refresh_interval: config.refresh,
        ..vigil_l2::Config::default()
    };
    let (l2_thread, l2) = Driver::spawn(DriverConfig {
        announcer,
        selection,
        verbose: false,
    })
    .map_err(|e| format!("announcer: {e} (vigil needs CAP_NET_RAW)"))?;

    let shared = Arc::new(Mutex::new(Shared::default()));
    let http_task = match config.http_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("http.listen {addr}: {e}"))?;
            let sources = Sources {
                shared: Arc::clone(&shared),
                l2: l2.clone(),
                gossip: gossip.clone(),
            };
            Some(tokio::spawn(http::serve(listener, sources)))
        }
        None => None,
    };

    let (checks, health_rx) = Checks::new();
    let (seeds_tx, seeds_rx) = watch::channel(config.gossip.seeds.clone());
    let (first_join_tx, first_join) = tokio::sync::oneshot::channel();
    let joiner = tokio::spawn(join_loop(
        gossip.clone(),
        seeds_rx,
        config.gossip.rejoin_interval,
        first_join_tx,
    ));
    info!(
        event = "started",
        node = %config.node.name,
        gossip = %gossip.advertise_addr(),
        profile = %config.gossip.profile,
        services = config.services.len(),
        hold_down = ?config.election.hold_down,
        expected_members = ?config.election.expected_members,
        "vigil standalone started"
    );

    let mut daemon = Daemon {
        path,
        default_name,
        file_text: None,
        speaker: Speaker::new(config),
        gossip: gossip.clone(),
        l2: l2.clone(),
        shared,
        checks,
        failing,
        holding,
        seeds: seeds_tx,
        joined: false,
        local,
    };
    daemon.file_text = daemon.read_file();
    daemon.checks.sync(&checks_of(daemon.speaker.config()));
    daemon.resync("start").await;

    let result = daemon
        .run_loop(&mut events, health_rx, first_join, started)
        .await;

    // Gap-free handover: keep answering for the VIPs a successor will take, tell the others
    // we leave, and go silent on each VIP once its successor is heard claiming it (or at the
    // bound). VIPs nobody would take stop at once.
    let handing_over = daemon.start_handover();
    info!(
        event = "stopping",
        handing_over = handing_over.len(),
        "leaving the cluster; answering until the successors speak"
    );
    let leave = async {
        if let Err(e) = gossip.leave(LEAVE_TIMEOUT).await {
            warn!(event = "leave_failed", error = %e, "leave failed");
        }
    };
    tokio::join!(leave, wait_for_handover(&l2, handing_over));
    let _ = l2.set_owned(Vec::new());
    // The successors answer now (or nobody will): the addresses can go.
    if let Some(local) = &mut daemon.local {
        local.release_all();
    }
    gossip.shutdown().await;
    joiner.abort();
    if let Some(t) = http_task {
        t.abort();
    }
    let _ = l2.send(Command::Shutdown);
    let _ = tokio::task::spawn_blocking(move || l2_thread.join()).await;
    info!(event = "stopped", "vigil standalone stopped");
    result
}

/// The checked services and their checks.
fn checks_of(config: &Config) -> BTreeMap<String, HealthCheck> {
    config
        .services
        .iter()
        .filter_map(|s| s.health_check.clone().map(|h| (s.name.clone(), h)))
        .collect()
}

struct Daemon {
    path: PathBuf,
    default_name: Option<String>,
    /// The file's text when last read, to notice changes.
    file_text: Option<String>,
    speaker: Speaker,
    gossip: Memberlist,
    l2: Handle,
    shared: Arc<Mutex<Shared>>,
    checks: Checks,
    /// Checked services whose check does not pass here.
    failing: BTreeSet<String>,
    holding: bool,
    seeds: watch::Sender<Vec<String>>,
    /// The first join through the seeds is over. Until then this node elects nothing: alone,
    /// it would think itself the owner of every VIP and answer beside the real owners.
    joined: bool,
    /// The VIPs held on `announce.local_address`, if set.
    local: Option<LocalAddresses>,
}

impl Daemon {
    async fn run_loop(
        &mut self,
        events: &mut vigil_gossip_net::Events,
        mut health: tokio::sync::mpsc::UnboundedReceiver<HealthChange>,
        mut first_join: tokio::sync::oneshot::Receiver<()>,
        started: Instant,
    ) -> Result<(), String> {
        let mut hup = signal(SignalKind::hangup()).map_err(|e| format!("SIGHUP: {e}"))?;
        let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
        let mut file_poll = tokio::time::interval(FILE_POLL);
        file_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let hold_down_end = self
            .speaker
            .config()
            .election
            .hold_down
            .map(|d| started + d);
        loop {
            let hold_down = async {
                match hold_down_end {
                    Some(at) if self.holding => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => self.on_gossip(event).await,
                    None => return Err("the gossip driver stopped".into()),
                },
                Some(change) = health.recv() => self.on_health(change).await,
                _ = &mut first_join, if !self.joined => self.on_first_join().await,
                () = hold_down => {
                    self.holding = false;
                    info!(event = "hold_down_over", "fail-back hold-down over: this node may take VIPs");
                    self.publish_meta().await;
                    self.resync("hold-down over").await;
                }
                _ = hup.recv() => self.reload("SIGHUP").await,
                _ = file_poll.tick() => {
                    self.on_announcer_events();
                    if self.read_file() != self.file_text {
                        self.reload("file changed").await;
                    }
                }
                _ = term.recv() => return Ok(()),
                _ = int.recv() => return Ok(()),
            }
        }
    }

    /// The first join is over: elect from now on. The hold-down is for joining a cluster
    /// that already serves; if no other live member has settled (a cold start, or alone),
    /// holding back would only make VIPs hop as nodes settle one by one, so settle at once.
    async fn on_first_join(&mut self) {
        self.joined = true;
        if self.holding {
            match self.gossip.members().await {
                Ok(members) => self.speaker.set_members(members.iter().map(Member::from)),
                Err(e) => {
                    error!(event = "resync_failed", error = %e, "cannot read the gossip view")
                }
            }
            let local = self.speaker.config().node.name.clone();
            let serving = self
                .speaker
                .members()
                .iter()
                .any(|m| m.name != local && m.live() && !m.meta.holding);
            if !serving {
                self.holding = false;
                info!(
                    event = "hold_down_skipped",
                    "no other member has settled (a cold start): no fail-back hold-down"
                );
                self.publish_meta().await;
            }
        }
        self.resync("first join done").await;
    }

    fn read_file(&self) -> Option<String> {
        std::fs::read_to_string(&self.path).ok()
    }

    async fn on_gossip(&mut self, event: Event) {
        use vigil_gossip::Event as G;
        let kind = match &event {
            Event::Gossip(G::Join(m)) => {
                info!(event = "member_joined", member = %m.name, addr = %m.addr, "member joined");
                "join"
            }
            Event::Gossip(G::Update(m)) => {
                info!(event = "member_updated", member = %m.name, "member metadata changed");
                "update"
            }
            Event::Gossip(G::Suspect { member, from }) => {
                warn!(event = "member_suspect", member = %member.name, accuser = %from, "member suspected (still a candidate)");
                "suspect"
            }
            Event::Gossip(G::Refuted(m)) => {
                info!(event = "member_refuted", member = %m.name, "suspected member answered");
                "alive"
            }
            Event::Gossip(G::Dead(m)) => {
                warn!(event = "member_failed", member = %m.name, addr = %m.addr, "member failed");
                "dead"
            }
            Event::Gossip(G::Left(m)) => {
                info!(event = "member_left", member = %m.name, "member left");
                "left"
            }
            Event::Gossip(G::Conflict {
                existing,
                other_addr,
            }) => {
                warn!(event = "name_conflict", member = %existing.name, other_addr = %other_addr, "another node claims a member's name");
                return;
            }
            Event::KeyringReloaded { keys } => {
                info!(event = "keyring_reloaded", keys, "keyring file reloaded");
                return;
            }
            Event::KeyringRejected(e) => {
                error!(event = "keyring_rejected", error = %e, "keyring file rejected; old keys kept");
                return;
            }
            _ => return,
        };
        *self.lock().member_events.entry(kind).or_default() += 1;
        self.resync(kind).await;
        if kind == "join" && !self.speaker.owned_vips().is_empty() {
            // A member (re)appeared: after a partition heals, the other side's clients may
            // still hold its owner's MAC. Say again who answers for what we kept.
            let _ = self.l2.send(Command::Reannounce);
        }
    }

    async fn on_health(&mut self, change: HealthChange) {
        let known = self
            .speaker
            .config()
            .services
            .iter()
            .any(|s| s.name == change.service && s.health_check.is_some());
        if !known {
            return;
        }
        if change.passing {
            info!(event = "health_passing", service = %change.service, detail = %change.detail, "health check passes");
            self.failing.remove(&change.service);
        } else {
            warn!(event = "health_failing", service = %change.service, detail = %change.detail, "health check fails");
            self.failing.insert(change.service.clone());
        }
        self.publish_meta().await;
        self.resync("health change").await;
    }

    async fn reload(&mut self, why: &str) {
        self.file_text = self.read_file();
        let loaded = Config::load(&self.path, self.default_name.as_deref());
        let new = match loaded {
            Ok(c) => c,
            Err(e) => {
                error!(event = "config_rejected", trigger = why, error = %e, "new configuration rejected; the old one stays in force");
                self.lock().reloads_rejected += 1;
                return;
            }
        };
        let old = self.speaker.config().clone();
        let fixed = restart_only_changes(&old, &new);
        if !fixed.is_empty() {
            warn!(event = "config_needs_restart", fields = ?fixed, "these settings change only on restart; the rest is applied");
        }
        let mut merged = new;
        merged.node.name = old.node.name.clone();
        merged.gossip.bind = old.gossip.bind;
        merged.gossip.advertise = old.gossip.advertise;
        merged.gossip.profile = old.gossip.profile;
        merged.gossip.label = old.gossip.label.clone();
        merged.gossip.keyring_file = old.gossip.keyring_file.clone();
        merged.gossip.rejoin_interval = old.gossip.rejoin_interval;
        merged.interfaces = old.interfaces.clone();
        merged.refresh = old.refresh;
        merged.local_address = old.local_address.clone();
        merged.http_listen = old.http_listen;
        merged.election.hold_down = old.election.hold_down;
        if merged == old {
            info!(
                event = "config_unchanged",
                trigger = why,
                "configuration unchanged"
            );
            return;
        }
        let checks = checks_of(&merged);
        let restarted = self.checks.sync(&checks);
        self.failing.retain(|s| checks.contains_key(s));
        self.failing.extend(restarted);
        let _ = self.seeds.send(merged.gossip.seeds.clone());
        self.speaker.set_config(merged);
        self.lock().reloads_ok += 1;
        info!(
            event = "config_reloaded",
            trigger = why,
            services = self.speaker.config().services.len(),
            "configuration reloaded"
        );
        self.publish_meta().await;
        self.resync("reload").await;
    }

    async fn publish_meta(&mut self) {
        let meta = NodeMeta {
            labels: self.speaker.config().node.labels.clone(),
            failing: self.failing.clone(),
            holding: self.holding,
        };
        if let Err(e) = self.gossip.set_meta(meta.encode()).await {
            error!(event = "meta_failed", error = %e, "cannot publish node metadata");
        }
    }

    /// Reads the gossip view, re-elects every VIP and applies what changed.
    async fn resync(&mut self, trigger: &str) {
        match self.gossip.members().await {
            Ok(members) => self.speaker.set_members(members.iter().map(Member::from)),
            Err(e) => {
                error!(event = "resync_failed", error = %e, "cannot read the gossip view");
                return;
            }
        }
        let changes = if self.joined {
            self.speaker.evaluate()
        } else {
            Vec::new()
        };
        let (mut taken, mut released) = (0, 0);
        for change in &changes {
            match change {
                Change::Taken {
                    vip,
                    services,
                    reason,
                } => {
                    taken += 1;
                    info!(event = "vip_taken", vip = %vip, services = %services.join(","), reason = %reason, trigger, "VIP taken");
                }
                Change::Released {
                    vip,
                    services,
                    reason,
                    successor,
                } => {
                    released += 1;
                    info!(event = "vip_released", vip = %vip, services = %services.join(","), reason = %reason, successor = successor.as_deref().unwrap_or("none"), trigger, "VIP released");
                }
            }
        }
        // The kernel accepts traffic to a VIP before the announcer points clients at it; a
        // VIP nobody takes loses its address at once, one handed over once the successor
        // speaks (see `on_announcer_events`).
        if let Some(local) = &mut self.local {
            for change in &changes {
                match change {
                    Change::Taken { vip, .. } => local.take(*vip),
                    Change::Released {
                        vip,
                        successor: None,
                        ..
                    } => local.release(*vip, "released"),
                    Change::Released { .. } => {}
                }
            }
        }
        // Make before break: a VIP moving to another node is answered here until that node
        // is heard claiming it (or the bound passes); one nobody takes goes silent at once.
        let handing_over: Vec<std::net::IpAddr> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Released {
                    vip,
                    successor: Some(_),
                    ..
                } => Some(*vip),
                _ => None,
            })
            .collect();
        if !handing_over.is_empty()
            && self
                .l2
                .send(Command::HandOver {
                    vips: handing_over,
                    bound: HANDOVER_BOUND,
                })
                .is_err()
        {
            error!(
                event = "announcer_stopped",
                "the announcer thread has stopped"
            );
        }
        if !changes.is_empty() && self.l2.set_owned(self.speaker.owned_vips()).is_err() {
            error!(
                event = "announcer_stopped",
                "the announcer thread has stopped"
            );
        }
        if self.joined {
            let live = self.speaker.members().iter().filter(|m| m.live()).count();
            info!(
                event = "resync",
                trigger,
                live,
                changes = changes.len(),
                "re-elected every VIP"
            );
        }
        let status = self.status();
        let announced = self.speaker.announced();
        let configured = self
            .speaker
            .config()
            .services
            .iter()
            .flat_map(|s| s.vips.iter().copied())
            .collect();
        let mut shared = self.lock();
        shared.status = status;
        shared.announced = announced;
        shared.configured_vips = configured;
        shared.evaluations += 1;
        shared.vips_taken += taken;
        shared.vips_released += released;
        shared.ready = self.joined;
        shared.local_address = self.local.as_ref().map(local_address_state);
    }

    /// Hands the owned VIPs that have a successor to it (see [`vigil_l2::Announcer::hand_over`])
    /// and silences the others at once. Returns the VIPs being handed over.
    fn start_handover(&mut self) -> BTreeSet<std::net::IpAddr> {
        let successors = self.speaker.successors();
        let mut handing_over = BTreeSet::new();
        for (vip, next) in &successors {
            match next {
                Some(node) => {
                    info!(event = "vip_handing_over", vip = %vip, successor = %node, "answering until the successor claims the VIP");
                    handing_over.insert(*vip);
                }
                None => {
                    info!(event = "vip_released", vip = %vip, reason = "no node would take it", trigger = "stop", "VIP released");
                }
            }
        }
        let sent = self
            .l2
            .send(Command::HandOver {
                vips: handing_over.iter().copied().collect(),
                bound: HANDOVER_BOUND,
            })
            .is_ok()
            && self.l2.set_owned(Vec::new()).is_ok();
        if !sent {
            error!(
                event = "announcer_stopped",
                "the announcer thread has stopped"
            );
            return BTreeSet::new();
        }
        handing_over
    }

    /// Logs what the announcer saw (handovers ending, other hosts claiming our VIPs), and takes
    /// a VIP handed over to its successor off the local-address device, unless it came back.
    fn on_announcer_events(&mut self) {
        let events = self.l2.take_events();
        for event in &events {
            log_announcer_event(event);
        }
        let Some(local) = &mut self.local else { return };
        let owned: BTreeSet<std::net::IpAddr> =
            self.speaker.owned_vips().iter().map(|v| v.addr).collect();
        let mut changed = false;
        for event in &events {
            if let vigil_l2::Event::HandedOver { vip, .. } = event
                && !owned.contains(vip)
                && local.held().contains(vip)
            {
                local.release(*vip, "handed over");
                changed = true;
            }
        }
        if changed {
            let state = local_address_state(local);
            self.lock().local_address = Some(state);
        }
    }

    fn status(&self) -> Status {
        let quorum = self.speaker.quorum();
        Status {
            node: self.speaker.config().node.name.clone(),
            members: self
                .speaker
                .members()
                .iter()
                .map(StatusMember::from)
                .collect(),
            vips: self
                .speaker
                .vip_status()
                .iter()
                .map(StatusVip::from)
                .collect(),
            quorum: StatusQuorum {
                live: quorum.live,
                needed: quorum.needed,
            },
            holding: self.holding,
            health: checks_of(self.speaker.config())
                .into_keys()
                .map(|s| {
                    let ok = !self.failing.contains(&s);
                    (s, ok)
                })
                .collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Settings a reload cannot change (sockets, identity, announcer set-up), by field name.
fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |changed: bool, field| {
        if changed {
            out.push(field);
        }
    };
    check(old.node.name != new.node.name, "node.name");
    check(old.gossip.bind != new.gossip.bind, "gossip.bind");
    check(
        old.gossip.advertise != new.gossip.advertise,
        "gossip.advertise",
    );
    check(old.gossip.profile != new.gossip.profile, "gossip.profile");
    check(old.gossip.label != new.gossip.label, "gossip.label");
    check(
        old.gossip.keyring_file != new.gossip.keyring_file,
        "gossip.keyring_file",
    );
    check(
        old.gossip.rejoin_interval != new.gossip.rejoin_interval,
        "gossip.rejoin_interval",
    );
    check(old.interfaces != new.interfaces, "interfaces");
    check(old.refresh != new.refresh, "announce.refresh");
    check(
        old.local_address != new.local_address,
        "announce.local_address",
    );
    check(old.http_listen != new.http_listen, "http.listen");
    check(
        old.election.hold_down != new.election.hold_down,
        "election.hold_down",
    );
    out
}

/// What `/metrics` shows of the local-address device.
fn local_address_state(local: &LocalAddresses) -> super::state::LocalAddressState {
    super::state::LocalAddressState {
        held: local.held().len(),
        counters: local.counters(),
    }
}

fn log_announcer_event(event: &vigil_l2::Event) {
    match event {
        vigil_l2::Event::Claimed { vip, by, .. } => {
            warn!(event = "vip_claimed_elsewhere", vip = %vip, mac = %by, "another host claims a VIP this node announces");
        }
        vigil_l2::Event::HandedOver {
            vip,
            successor: Some(mac),
        } => {
            info!(event = "vip_handed_over", vip = %vip, successor_mac = %mac, "the successor claimed the VIP; silent here");
        }
        vigil_l2::Event::HandedOver {
            vip,
            successor: None,
        } => {
            warn!(event = "vip_handover_expired", vip = %vip, bound = ?HANDOVER_BOUND, "no successor heard within the bound; silent here");
        }
    }
}

/// Waits until every VIP in `pending` is handed over (the announcer's events say so), or
/// a little past [`HANDOVER_BOUND`], which the announcer enforces itself.
async fn wait_for_handover(l2: &Handle, mut pending: BTreeSet<std::net::IpAddr>) {
    let deadline = Instant::now() + HANDOVER_BOUND + Duration::from_millis(500);
    while !pending.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(HANDOVER_POLL).await;
        for event in l2.take_events() {
            log_announcer_event(&event);
            if let vigil_l2::Event::HandedOver { vip, .. } = event {
                pending.remove(&vip);
            }
        }
    }
}

/// The seed addresses worth a join: not this node, not a live member, each once. At most one
/// per configured seed address, so a round's work is bounded by the configuration, and none
/// at all while every seed is in the cluster.
fn rejoin_targets(
    seeds: Vec<SocketAddr>,
    live: &BTreeSet<SocketAddr>,
    local: SocketAddr,
) -> Vec<SocketAddr> {
    let mut out: Vec<SocketAddr> = seeds
        .into_iter()
        .filter(|a| *a != local && !live.contains(a))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Joins the seeds until one answers, then every `rejoin` joins again those that are not live
/// members, so that a healed partition merges (MetalLB does this every 60 s). The work per
/// round is one push/pull per configured seed that is not a live member: nothing at all while
/// every seed is in the cluster.
async fn join_loop(
    gossip: Memberlist,
    mut seeds: watch::Receiver<Vec<String>>,
    rejoin: Duration,
    first_join: tokio::sync::oneshot::Sender<()>,
) {
    let mut first_join = Some(first_join);
    let mut joined = false;
    let mut retry = JOIN_RETRY;
    loop {
        let list = seeds.borrow_and_update().clone();
        let port = gossip.local_addr().port();
        let targets: Vec<SocketAddr> = match resolve_seeds(&list, port).await {
            Ok(addrs) => {
                let live: BTreeSet<SocketAddr> = gossip
                    .members()
                    .await
                    .unwrap_or_default()
                    .iter()
                    .filter(|m| !m.state.is_gone())
                    .map(|m| m.addr)
                    .collect();
                rejoin_targets(addrs, &live, gossip.advertise_addr())
            }
            Err(e) => {
                warn!(event = "seed_unresolved", error = %e, "cannot resolve a seed");
                Vec::new()
            }
        };
        if targets.is_empty() {
            joined = true;
        } else {
            match gossip.join_addrs(targets.clone()).await {
                Ok(n) if n > 0 => {
                    info!(
                        event = "joined",
                        answered = n,
                        asked = targets.len(),
                        "joined the cluster through seeds"
                    );
                    joined = true;
                }
                Ok(_) | Err(_) if !joined => {
                    warn!(
                        event = "join_failed",
                        asked = targets.len(),
                        retry_in = ?retry,
                        "no seed answered; retrying"
                    );
                }
                _ => {}
            }
        }
        // Answered or not, the first attempt is over: alone, this node elects among itself.
        if let Some(tx) = first_join.take() {
            let _ = tx.send(());
        }
        let wait = if joined {
            rejoin
        } else {
            let wait = retry;
            retry = (retry * 2).min(rejoin);
            wait
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            changed = seeds.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([198, 18, 0, last], 7946))
    }

    #[test]
    fn rejoin_targets_are_the_seeds_outside_the_cluster_once_each() {
        let seeds = vec![addr(11), addr(12), addr(13), addr(14), addr(13)];
        let live: BTreeSet<SocketAddr> = [addr(11), addr(12)].into();
        // This node (11) and live members are skipped; a seed listed twice is asked once.
        assert_eq!(
            rejoin_targets(seeds.clone(), &live, addr(11)),
            [addr(13), addr(14)]
        );
        // Everyone in: no work at all.
        let all: BTreeSet<SocketAddr> = seeds.iter().copied().collect();
        assert!(rejoin_targets(seeds, &all, addr(11)).is_empty());
    }

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
