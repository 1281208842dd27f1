//! The async runner, shared by every mode: one `select!` loop (quinn's driver shape) that feeds
//! [`SpeakerCore`] its inputs (gossip events, desired-state snapshots, keyrings, health,
//! the first join, the announcer's reports, time, shutdown) and carries out every
//! [`Action`] it returns with the gossip node (`vigil-gossip-net`), the announcer thread
//! (`vigil-l2-net`) and the host's addresses. Signals belong to the caller: `shutdown` is any
//! future.

use crate::core::{Action, MemberEventKind, MemberState, SpeakerCore};
use crate::join::join_loop;
use crate::local_address::LocalAddresses;
use crate::model::{DesiredState, DesiredUpdate, StaticSettings};
use crate::observe::SourceCounters;
use crate::observe::http::{self, HttpState};
use crate::observe::state::{LocalAddressState, Shared};
use crate::timeline::{self, AnnounceWatch};
use futures_util::{Stream, StreamExt};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{error, info, warn};
use vigil_gossip::wire::{Label, SecretKey};
use vigil_gossip_net::{Event, Memberlist, Options};
use vigil_l2_net::{Command, Driver, DriverConfig, EventWaker, Handle, Selection};

/// How long a graceful leave may take.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(1);
/// The shortest time between two rebuilds of the status (`/status`, `/metrics`): a rebuild
/// is O(services), and a burst of Kubernetes changes is many small turns.
const PUBLISH_SPACING: Duration = Duration::from_millis(200);
/// Rebuilds are also spaced by this many times the last one's duration, so that they take
/// at most 1 % of a core however many services there are (at 5,000 services a rebuild
/// takes milliseconds to tens of milliseconds: every 200 ms, it was most of a sync's CPU)...
const PUBLISH_COST_RATIO: u32 = 100;
/// ...but the status is never older than this while changes come.
const PUBLISH_SPACING_MAX: Duration = Duration::from_secs(5);
/// Gossip rounds a claim on an owned VIP counts for a handover that starts after it
/// (`vigil_l2::Config::claim_memory`): a successor learns that it takes over from the same
/// gossip as this node, a round or two apart; an older claim is a split's other side.
const CLAIM_MEMORY_ROUNDS: u32 = 3;
/// The shortest time between two push-pulls with the members held dead that claims on owned
/// VIPs start ([`Runner::rejoin_the_dead`]).
const CLAIM_REJOIN_SPACING: Duration = Duration::from_secs(1);

/// A local health check flipped (standalone mode runs the checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthReport {
    /// The service ([`ServiceSpec::id`](crate::model::ServiceSpec::id)).
    pub service: String,
    /// Whether it passes now.
    pub passing: bool,
    /// What the last probe saw, for the log.
    pub detail: String,
}

/// Where the speaker's inputs come from. Each stream may end; the speaker then keeps what it
/// has. Only whole, validated snapshots are sent: a source logs and counts what it rejects.
pub struct Source<D, K, H> {
    /// The desired state at start (VIPs left on the local device by a crashed run are
    /// removed for these, and the gossip metadata starts from it).
    pub initial: DesiredState,
    /// The gossip keys at start, primary first; empty: no encryption.
    pub initial_keys: Vec<SecretKey>,
    /// Later desired states: whole snapshots, or only what changed
    /// ([`DesiredUpdate`]; anything that turns into one, such as a [`DesiredState`]).
    pub desired: D,
    /// Later keyrings, each applied whole with `Memberlist::set_keyring`.
    pub keyrings: K,
    /// Local health flips.
    pub health: H,
    /// The source's reload counters, for `/metrics`.
    pub counters: SourceCounters,
}

/// Where the speaker's notices go besides its log and `/status`: the Kubernetes mode writes
/// Events and `ServiceL2Status`; standalone needs nothing more (`()`).
pub trait StatusSink: Send {
    /// An [`Action::Announced`] or [`Action::Withdrawn`] (and other notices) as it happens.
    fn notice(&mut self, action: &Action) {
        let _ = action;
    }
    /// The gossip view after a membership event or the first join (Kubernetes mode reports
    /// the members it sees in its key acknowledgement).
    fn members(&mut self, members: &[crate::core::Member]) {
        let _ = members;
    }
    /// A keyring from the source was installed with `Memberlist::set_keyring` (`Ok`) or
    /// refused (the old keys stay); Kubernetes mode acknowledges what is installed.
    fn keyring(&mut self, keys: &[SecretKey], result: Result<(), String>) {
        let _ = (keys, result);
    }
    /// An ownership change this node reports (it took the VIP, or nobody did), with its
    /// timeline; Kubernetes mode writes an Event on each of its Services for a move.
    fn ownership_changed(&mut self, change: &crate::core::OwnershipChange) {
        let _ = change;
    }
}

impl StatusSink for () {}

/// Why the speaker could not start, or stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A start-up step failed (sockets, the announcer, the local-address device); nothing
    /// is announced. The message names the setting at fault.
    #[error("{0}")]
    Start(String),
    /// The gossip driver stopped under the speaker; it handed over and stopped too.
    #[error("the gossip driver stopped")]
    GossipStopped,
}

/// Runs the speaker until `shutdown` completes, then hands over and leaves.
pub async fn run<D, K, H, S>(
    settings: StaticSettings,
    source: Source<D, K, H>,
    sink: S,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError>
where
    D: Stream + Unpin,
    D::Item: Into<DesiredUpdate>,
    K: Stream<Item = Vec<SecretKey>> + Unpin,
    H: Stream<Item = HealthReport> + Unpin,
    S: StatusSink,
{
    let Source {
        initial,
        initial_keys,
        mut desired,
        mut keyrings,
        mut health,
        counters,
    } = source;
    let mut selection = Selection::default();
    if let Some(exclude) = &settings.interfaces.exclude {
        selection.exclude = exclude.clone();
    }
    if let Some(patterns) = &settings.interfaces.exclude_matching {
        selection.exclude_matching = vigil_l2_net::NamePatterns::new(patterns.clone())
            .map_err(|e| RunError::Start(format!("interfaces.exclude_matching: {e}")))?;
    }
    selection.include = settings.interfaces.include.clone();
    // Before anything answers: the device exists, the ARP sysctls are safe, and addresses a
    // crashed run left behind are gone (netlink round trips: off the async workers).
    let local = {
        let (settings, selection, vips) = (
            settings.local_address.clone(),
            selection.clone(),
            initial.vips(),
        );
        tokio::task::spawn_blocking(move || {
            LocalAddresses::start(settings.as_ref(), &selection, &vips)
        })
        .await
        .map_err(|e| RunError::Start(format!("announce.local_address: {e}")))?
        .map_err(RunError::Start)?
    };
    let mut core = SpeakerCore::new(&settings, initial, now());

    let mut options = Options::new(settings.node_name.clone(), settings.gossip.bind);
    options.advertise = settings.gossip.advertise;
    let engine = settings.gossip.engine_config();
    let claim_memory = engine.gossip_interval * CLAIM_MEMORY_ROUNDS;
    options.config = engine;
    options.meta = core.meta().encode();
    options.label = Label::new(settings.gossip.label.clone())
        .map_err(|_| RunError::Start("gossip.label: too long".into()))?;
    options.keys = initial_keys;
    let (gossip, mut events) = Memberlist::start(options)
        .await
        .map_err(|e| RunError::Start(format!("gossip: {e}")))?;

    let announcer = vigil_l2::Config {
        refresh_interval: settings.refresh,
        announce_rate: settings.announce_rate,
        claim_memory,
        ..vigil_l2::Config::default()
    };
    // The announcer's reports (a claim by another host, a handover done) are read as soon as
    // they are made: a claim starts the push-pull that merges a healed partition, and a
    // handover's end releases the VIP.
    let announcer_reports = Arc::new(Notify::new());
    let (l2_thread, l2) = Driver::spawn(DriverConfig {
        announcer,
        selection,
        verbose: false,
        on_events: Some(EventWaker::new({
            let reports = Arc::clone(&announcer_reports);
            move || reports.notify_one()
        })),
    })
    .map_err(|e| RunError::Start(format!("announcer: {e} (vigil needs CAP_NET_RAW)")))?;

    let shared = Arc::new(Mutex::new(Shared::default()));
    let state = HttpState {
        shared: Arc::clone(&shared),
        reloads: counters,
        l2: l2.clone(),
        gossip: gossip.clone(),
    };
    // The same routes on both addresses, so the probe port's /healthz and /readyz are the
    // real ones. The probe port is not fatal: the kubelet's probes failing is how a cluster
    // notices, and gossip and failover are not stopped for it.
    let mut http_tasks = Vec::new();
    if let Some(addr) = settings.http_listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| RunError::Start(format!("http.listen {addr}: {e}")))?;
        http_tasks.push(tokio::spawn(http::serve(listener, state.clone())));
    }
    if let Some(addr) = settings.probe_listen {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => http_tasks.push(tokio::spawn(http::serve_probes(listener, state))),
            Err(e) => {
                warn!(event = "health_probe_bind_failed", %addr, error = %e, "cannot serve the health probes");
            }
        }
    }

    let (seeds_tx, seeds_rx) = watch::channel(core.desired().seeds.clone());
    let (first_join_tx, mut first_join) = oneshot::channel();
    let joiner = tokio::spawn(join_loop(
        gossip.clone(),
        seeds_rx,
        settings.gossip.rejoin_interval,
        first_join_tx,
    ));
    info!(
        event = "started",
        node = %settings.node_name,
        gossip = %gossip.advertise_addr(),
        profile = %settings.gossip.profile,
        services = core.desired().services.len(),
        hold_down = ?settings.hold_down,
        expected_members = ?core.desired().expected_members,
        "vigil speaker started"
    );

    let mut runner = Runner {
        gossip: gossip.clone(),
        l2: l2.clone(),
        local,
        shared,
        seeds: seeds_tx,
        sink,
        leave: None,
        published: Instant::now(),
        publish_spacing: PUBLISH_SPACING,
        publish_due: None,
        claim_rejoin_at: None,
        peers: Vec::new(),
    };
    runner.publish(&core);

    let mut result = Ok(());
    let mut shutdown = std::pin::pin!(shutdown);
    let mut gossip_open = true;
    let mut announce_watch = AnnounceWatch::default();
    loop {
        let timer = sleep_until_some(core.poll_timeout().map(Instant::from_std));
        let stopping = core.stopping();
        // A turn that changed nothing (a wake-up with no announcer report, a timer of the
        // first-frame watch or of the publisher) does not rebuild the status: that is
        // O(services).
        let mut quiet = false;
        let publish_timer = sleep_until_some(runner.publish_due);
        let watch_timer = sleep_until_some(announce_watch.poll_at());
        tokio::select! {
            () = publish_timer => quiet = true,
            () = watch_timer => quiet = true,
            event = events.recv(), if gossip_open => match event {
                Some(event) => {
                    timeline::on_gossip_event(&mut core, &event);
                    runner.on_gossip(&mut core, event).await;
                }
                None => {
                    gossip_open = false;
                    result = Err(RunError::GossipStopped);
                    core.begin_shutdown(now());
                }
            },
            Some(report) = health.next(), if !stopping => {
                if report.passing {
                    info!(event = "health_passing", service = %report.service, detail = %report.detail, "health check passes");
                } else {
                    warn!(event = "health_failing", service = %report.service, detail = %report.detail, "health check fails");
                }
                core.handle_local_health(&report.service, report.passing);
            }
            Some(next) = desired.next(), if !stopping => core.handle_update(now(), next.into()),
            Some(keys) = keyrings.next(), if !stopping => {
                let n = keys.len();
                let result = gossip.set_keyring(keys.clone()).await.map_err(|e| e.to_string());
                match &result {
                    Ok(()) => info!(event = "keyring_reloaded", keys = n, "keyring reloaded"),
                    Err(e) => error!(event = "keyring_rejected", error = %e, "keyring rejected; old keys kept"),
                }
                runner.sink.keyring(&keys, result);
            }
            _ = &mut first_join, if !core.joined() && !stopping => {
                let view = runner.members().await;
                runner.sink.members(&view);
                runner.set_peers(&view);
                core.handle_first_join(now(), view);
            }
            () = timer => core.handle_timeout(now()),
            () = announcer_reports.notified() => quiet = !runner.on_announcer_events(&mut core),
            () = &mut shutdown, if !stopping => {
                info!(event = "stopping", "leaving the cluster; answering until the successors speak");
                core.begin_shutdown(now());
            }
        }
        announce_watch.arm(&core, &runner.l2);
        let stopped = runner.apply(&mut core, quiet).await;
        announce_watch.report(&mut core, &runner.l2, &mut runner.sink, &runner.shared);
        if stopped {
            break;
        }
    }

    if let Some(leave) = runner.leave.take() {
        let _ = leave.await;
    }
    gossip.shutdown().await;
    joiner.abort();
    for t in http_tasks {
        t.abort();
    }
    let _ = l2.send(Command::Shutdown);
    let _ = tokio::task::spawn_blocking(move || l2_thread.join()).await;
    info!(event = "stopped", "vigil speaker stopped");
    result
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

/// Sleeps until `at`, or forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The I/O handles the actions are carried out with.
struct Runner<S> {
    gossip: Memberlist,
    l2: Handle,
    /// The VIPs held on `announce.local_address`, if set.
    local: Option<LocalAddresses>,
    shared: Arc<Mutex<Shared>>,
    seeds: watch::Sender<Vec<String>>,
    sink: S,
    /// The graceful leave, running while the handovers do.
    leave: Option<JoinHandle<()>>,
    /// When the status was last rebuilt, the time to leave before the next rebuild
    /// ([`PUBLISH_SPACING`], or more after a costly one), and when the next is due (changes
    /// came within that time of the last one).
    published: Instant,
    publish_spacing: Duration,
    publish_due: Option<Instant>,
    /// The earliest time a claim may start another push-pull with the dead.
    claim_rejoin_at: Option<Instant>,
    /// The peers last given to the announcer.
    peers: Vec<std::net::IpAddr>,
}

impl<S: StatusSink> Runner<S> {
    /// The gossip view now (empty if the driver is gone).
    async fn members(&self) -> Vec<crate::core::Member> {
        match self.gossip.members().await {
            Ok(members) => members.iter().map(Into::into).collect(),
            Err(e) => {
                error!(event = "resync_failed", error = %e, "cannot read the gossip view");
                Vec::new()
            }
        }
    }

    async fn on_gossip(&mut self, core: &mut SpeakerCore, event: Event) {
        use vigil_gossip::Event as Gossip;
        let kind = match &event {
            Event::Gossip(Gossip::Join(m)) => {
                info!(event = "member_joined", member = %m.name, addr = %m.addr, "member joined");
                MemberEventKind::Join
            }
            Event::Gossip(Gossip::Update(m)) => {
                info!(event = "member_updated", member = %m.name, "member metadata changed");
                MemberEventKind::Update
            }
            Event::Gossip(Gossip::Suspect { member, from }) => {
                warn!(event = "member_suspect", member = %member.name, accuser = %from, "member suspected (still a candidate)");
                MemberEventKind::Suspect
            }
            Event::Gossip(Gossip::Refuted(m)) => {
                info!(event = "member_refuted", member = %m.name, "suspected member answered");
                MemberEventKind::Refuted
            }
            Event::Gossip(Gossip::Dead(m)) => {
                warn!(event = "member_failed", member = %m.name, addr = %m.addr, "member failed");
                MemberEventKind::Dead
            }
            Event::Gossip(Gossip::Left(m)) => {
                info!(event = "member_left", member = %m.name, "member left");
                MemberEventKind::Left
            }
            Event::Gossip(Gossip::CutOff { silent_for }) => {
                warn!(
                    event = "cut_off",
                    silent_ms = silent_for.as_millis() as u64,
                    "heard no member (or did not run) for as long as the others need to declare this node dead; silent until a push/pull merges"
                );
                core.handle_cut_off(now());
                return;
            }
            Event::Gossip(Gossip::Reconnected { after }) => {
                info!(
                    event = "reconnected",
                    after_ms = after.as_millis() as u64,
                    "merged the cluster's state after a cut-off"
                );
                core.handle_reconnected(now());
                return;
            }
            Event::Gossip(Gossip::HeardBack { members }) => {
                info!(
                    event = "heard_back",
                    members, "every live member acknowledged this node's alive state"
                );
                core.handle_heard_back(now());
                return;
            }
            Event::Gossip(Gossip::Conflict {
                existing,
                other_addr,
            }) => {
                warn!(event = "name_conflict", member = %existing.name, other_addr = %other_addr, "another node claims a member's name");
                return;
            }
            _ => return,
        };
        let view = self.members().await;
        self.sink.members(&view);
        self.set_peers(&view);
        core.handle_members(now(), Some(kind), view);
    }

    /// Tells the announcer whom to ask for when a link comes back ([`Command::SetPeers`]):
    /// every member but those that left and ourselves, the dead included (after a cut link,
    /// the members this node declared dead are the ones it must reach again).
    fn set_peers(&mut self, view: &[crate::core::Member]) {
        let source = self.gossip.advertise_addr().ip();
        let mut peers: Vec<std::net::IpAddr> = view
            .iter()
            .filter(|m| m.state != MemberState::Left && m.addr.ip() != source)
            .map(|m| m.addr.ip())
            .collect();
        peers.sort_unstable();
        peers.dedup();
        if peers != self.peers {
            self.peers.clone_from(&peers);
            let _ = self.l2.set_peers(source, peers);
        }
    }

    /// Logs what the announcer saw and hands it to the core; returns whether it saw any.
    fn on_announcer_events(&mut self, core: &mut SpeakerCore) -> bool {
        let events = self.l2.take_events();
        for event in &events {
            if let vigil_l2::Event::Claimed { vip, by, .. } = event {
                // Once per VIP change, not per conflicting packet (a heal brings hundreds).
                if let Some(claims) = core.note_claim(now(), *vip, *by) {
                    warn!(event = "vip_claimed_elsewhere", vip = %vip, mac = %by, claims, "another host claims a VIP this node announces (reported once per VIP change and MAC; claims: heard since the last report)");
                }
                // Every claim, not only the reported ones: during a split whose sides still
                // hear each other's ARP (a firewall between racks), the first push-pull fails,
                // and only a later one, after the heal, merges (at most one a second).
                self.rejoin_the_dead();
            } else {
                log_announcer_event(event);
            }
            core.handle_announcer_event(now(), event);
        }
        !events.is_empty()
    }

    /// A claim on a VIP this node announces means another host believes it owns it: most
    /// often a member this node holds dead that is back (a healed partition, a thawed
    /// process) and whose refutation has not reached here. A push-pull with the members held
    /// dead merges now rather than at the next rejoin (5 s), so this node hears it is back and
    /// hands over. At most once per [`CLAIM_REJOIN_SPACING`].
    ///
    /// Not while leaving: the successors' claims are the handover, and a push-pull of a
    /// leaving node's state would refute its own leave (the others would hold it alive again,
    /// stop taking its VIPs, and declare it failed once it is gone).
    fn rejoin_the_dead(&mut self) {
        let now = Instant::now();
        if self.leave.is_some() || self.claim_rejoin_at.is_some_and(|at| now < at) {
            return;
        }
        self.claim_rejoin_at = Some(now + CLAIM_REJOIN_SPACING);
        let gossip = self.gossip.clone();
        tokio::spawn(async move {
            let dead: Vec<std::net::SocketAddr> = gossip
                .members()
                .await
                .unwrap_or_default()
                .iter()
                // Dead, not left: a member that said goodbye (ourselves, while leaving,
                // among them) is not the other side of a split.
                .filter(|m| m.state == vigil_gossip::MemberState::Dead)
                .map(|m| m.addr)
                .collect();
            if dead.is_empty() {
                return;
            }
            let asked = dead.len();
            match gossip.join_addrs(dead).await {
                // Logged when it reached someone: while a split lasts, one a second fails.
                Ok(answered) if answered > 0 => {
                    info!(
                        event = "claim_rejoin",
                        asked,
                        answered,
                        "a claim on an owned VIP: push-pull with the members held dead"
                    );
                }
                Ok(_) => {}
                Err(e) => {
                    warn!(event = "claim_rejoin_failed", asked, error = %e, "a claim on an owned VIP: push-pull with the members held dead failed");
                }
            }
        });
    }

    /// Carries out every queued action, in order, then publishes the status (unless the turn
    /// was `quiet` and queued nothing). Returns whether the speaker has stopped.
    async fn apply(&mut self, core: &mut SpeakerCore, quiet: bool) -> bool {
        let mut stopped = false;
        let mut acted = false;
        while let Some(action) = core.poll_action() {
            acted = true;
            match &action {
                Action::Announced {
                    vip,
                    services,
                    reason,
                    trigger,
                } => {
                    info!(event = "vip_taken", vip = %vip, services = %services.join(","), reason = %reason, trigger = %trigger, "VIP taken");
                }
                Action::Withdrawn {
                    vip,
                    successor: Some(node),
                    trigger: crate::core::Trigger::Stop,
                    ..
                } => {
                    info!(event = "vip_handing_over", vip = %vip, successor = %node, "answering until the successor claims the VIP");
                }
                Action::Withdrawn {
                    vip,
                    services,
                    reason,
                    successor,
                    trigger,
                } => {
                    info!(event = "vip_released", vip = %vip, services = %services.join(","), reason = %reason, successor = successor.as_deref().unwrap_or("none"), trigger = %trigger, "VIP released");
                }
                Action::HoldAddress(vip) => {
                    let vip = *vip;
                    self.with_local(move |local| local.take(vip)).await;
                }
                Action::ReleaseAddress { vip, why } => {
                    let (vip, why) = (*vip, why.as_str());
                    self.with_local(move |local| local.release(vip, why)).await;
                }
                Action::HandOver { vips, bound } => {
                    let command = Command::HandOver {
                        vips: vips.clone(),
                        bound: *bound,
                    };
                    if self.l2.send(command).is_err() {
                        error!(
                            event = "announcer_stopped",
                            "the announcer thread has stopped"
                        );
                    }
                }
                Action::SetOwned(vips) => {
                    if self.l2.set_owned(vips.clone()).is_err() {
                        error!(
                            event = "announcer_stopped",
                            "the announcer thread has stopped"
                        );
                    }
                }
                Action::UpdateOwned { own, disown } => {
                    if self.l2.update_owned(own.clone(), disown.clone()).is_err() {
                        error!(
                            event = "announcer_stopped",
                            "the announcer thread has stopped"
                        );
                    }
                }
                Action::Reannounce => {
                    let _ = self.l2.send(Command::Reannounce);
                }
                Action::PublishMeta(meta) => {
                    if let Err(e) = self.gossip.set_meta(meta.encode()).await {
                        error!(event = "meta_failed", error = %e, "cannot publish node metadata");
                    }
                }
                Action::ConfirmAlive => {
                    if self.gossip.confirm_alive().is_err() {
                        error!(event = "gossip_stopped", "the gossip driver has stopped");
                    }
                }
                Action::SetSeeds(seeds) => {
                    let _ = self.seeds.send(seeds.clone());
                }
                Action::HoldDownOver { skipped: true } => {
                    info!(
                        event = "hold_down_skipped",
                        "no other member has settled (a cold start): no fail-back hold-down"
                    );
                }
                Action::HoldDownOver { skipped: false } => {
                    info!(
                        event = "hold_down_over",
                        "fail-back hold-down over: this node may take VIPs"
                    );
                }
                Action::Elected {
                    trigger,
                    live,
                    changes,
                } => {
                    info!(event = "resync", trigger = %trigger, live, changes, "election run");
                }
                Action::Leave => {
                    let gossip = self.gossip.clone();
                    self.leave = Some(tokio::spawn(async move {
                        if let Err(e) = gossip.leave(LEAVE_TIMEOUT).await {
                            warn!(event = "leave_failed", error = %e, "leave failed");
                        }
                    }));
                }
                Action::Stopped => stopped = true,
            }
            self.sink.notice(&action);
        }
        if acted || !quiet || stopped {
            self.publish_soon(core, stopped);
        } else if self.publish_due.is_some_and(|at| Instant::now() >= at) {
            self.publish_soon(core, true);
        }
        stopped
    }

    /// Runs a host-address edit (blocking netlink) on the blocking pool, in order.
    async fn with_local(&mut self, edit: impl FnOnce(&mut LocalAddresses) + Send + 'static) {
        let Some(mut local) = self.local.take() else {
            return;
        };
        let joined = tokio::task::spawn_blocking(move || {
            edit(&mut local);
            local
        })
        .await;
        match joined {
            Ok(local) => self.local = Some(local),
            Err(e) => {
                error!(event = "local_address_failed", error = %e, "host-address edit panicked; addresses are no longer managed")
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Rebuilds the status now if the last rebuild is `publish_spacing` old (or `now`),
    /// otherwise once it is.
    fn publish_soon(&mut self, core: &SpeakerCore, now: bool) {
        let at = self.published + self.publish_spacing;
        if now || Instant::now() >= at {
            let started = Instant::now();
            self.publish(core);
            self.published = Instant::now();
            self.publish_spacing = ((self.published - started) * PUBLISH_COST_RATIO)
                .clamp(PUBLISH_SPACING, PUBLISH_SPACING_MAX);
            self.publish_due = None;
        } else {
            self.publish_due = Some(at);
        }
    }

    /// The status and counters for `/status` and `/metrics`.
    fn publish(&self, core: &SpeakerCore) {
        let counters = core.counters();
        let status = core.status();
        let announced = core.announced();
        let configured = core.desired().vips();
        let local = self.local.as_ref().map(|local| LocalAddressState {
            held: local.held().len(),
            counters: local.counters(),
        });
        let mut shared = self.lock();
        shared.status = status;
        shared.status.changes = timeline::status_changes(core);
        shared.announced = announced;
        shared.configured_vips = configured;
        shared.evaluations = counters.evaluations;
        shared.vips_taken = counters.vips_taken;
        shared.vips_released = counters.vips_released;
        // The core's count, the one `/status` shows: the runner keeps none of its own.
        shared.member_events = counters
            .member_events
            .iter()
            .map(|(kind, n)| (*kind, *n))
            .collect();
        shared.member_counts = member_counts(core.members());
        shared.ready = core.joined();
        shared.local_address = local;
    }
}

/// Members by state for `vigil_gossip_members`.
fn member_counts(members: &[crate::core::Member]) -> vigil_observe::metrics::MemberCounts {
    use crate::core::MemberState;
    let count = |state| members.iter().filter(|m| m.state == state).count() as u64;
    vigil_observe::metrics::MemberCounts {
        alive: count(MemberState::Alive),
        suspect: count(MemberState::Suspect),
        dead: count(MemberState::Dead),
        left: count(MemberState::Left),
    }
}

fn log_announcer_event(event: &vigil_l2::Event) {
    match event {
        // Reported through the core's claim log (`on_announcer_events`).
        vigil_l2::Event::Claimed { .. } => {}
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
            warn!(event = "vip_handover_expired", vip = %vip, bound = ?crate::core::HANDOVER_BOUND, "no successor heard within the bound; silent here");
        }
    }
}
