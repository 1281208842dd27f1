//! `vigil lab`: a failover demonstration in network namespaces, in one command (as root).
//!
//! It builds N hosts and a client on a bridge of their own, starts `vigil standalone` on every
//! host with encrypted gossip, waits until the cluster agrees on the VIP's owner and the
//! client hears it, makes the owner fail, reports how long the client's questions went
//! unanswered, and tears it all down (also on Ctrl-C, errors and panics).
//!
//! - [`cluster`]: the namespaces, configurations and speakers, owned by a guard;
//! - [`probe`]: the client's ARP/NDP questions and the outage read out of the answers;
//! - [`netns`]: running code inside a namespace;
//! - [`signals`]: Ctrl-C and SIGTERM turned into an orderly teardown;
//! - [`run`]: the steps, printed as they go.

mod cluster;
mod netns;
mod probe;
mod signals;

use crate::cmd::standalone::state::Status;
use crate::cmd::status::render;
use clap::{Parser, ValueEnum};
use cluster::{CLIENT4, CLIENT6, HTTP, Lab, VIP4, VIP6};
use nix::sys::signal::Signal;
use probe::{Family, Outage, Prober, Questions};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as Mac;

/// The help text's long description.
pub const LONG_ABOUT: &str = "\
Run a failover lab in network namespaces and watch the VIP move (as root).

Builds N hosts and a client on a bridge in a namespace of its own (198.18.0.0/24 and
2001:db8::/64; nothing outside the lab is touched), writes each host's configuration and a
fresh gossip key, starts `vigil standalone` on every host, waits until they agree on who owns
the VIPs 198.18.0.100 and 2001:db8::100 and the client hears the owner, then makes the owner
fail. The client asks for the VIPs every 10 ms (ARP and neighbour solicitation) and the lab
prints how long the questions went unanswered and which host answers now. Then everything is
torn down, also on Ctrl-C.

Scenarios:
  host-loss  the owner's host vanishes: its link goes down on the bridge
  crash      the owner's speaker is killed with SIGKILL
  graceful   the owner's speaker is stopped with SIGTERM (it leaves the cluster)
  none       no failure: build, settle and show the cluster (useful with --keep)

Examples:
  vigil lab                          3 hosts, host loss, fast profile
  vigil lab --scenario crash --nodes 5
  vigil lab --profile lan            Go memberlist's LAN timing, for comparison
  vigil lab --scenario none --keep   leave a healthy lab running to poke at
  vigil lab --watch                  follow who answers for the VIP in a kept lab
  vigil lab --down                   tear a kept lab down";

/// The namespace prefix unless `--prefix` says otherwise.
pub const DEFAULT_PREFIX: &str = "vigil-lab";

/// Run a failover lab in network namespaces and watch the VIP move (as root).
#[derive(Debug, Parser)]
pub struct Args {
    /// How many hosts run a speaker.
    #[arg(long, short = 'n', default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=16))]
    pub nodes: u8,

    /// How the owner fails.
    #[arg(long, short = 's', value_enum, default_value_t = Scenario::HostLoss)]
    pub scenario: Scenario,

    /// The gossip timing profile of every speaker.
    #[arg(long, short = 'p', value_enum, default_value_t = LabProfile::Fast)]
    pub profile: LabProfile,

    /// Leave the lab running at the end and print how to poke at it and how to remove it.
    #[arg(long)]
    pub keep: bool,

    /// Namespace prefix: the lab's namespaces are PREFIX-br, PREFIX-client, PREFIX-host-N and
    /// its files are in /tmp/PREFIX (letters, digits and '-', at most 24 characters).
    #[arg(long, default_value = DEFAULT_PREFIX, value_parser = parse_prefix)]
    pub prefix: String,

    /// Tear down the lab with this prefix (one left by --keep or by a killed run) and exit.
    #[arg(long, conflicts_with_all = ["keep", "watch", "nodes", "scenario", "profile"])]
    pub down: bool,

    /// Follow, from the client, which host answers for the VIPs of the running lab with this
    /// prefix (until Ctrl-C, at most 10 minutes).
    #[arg(long, conflicts_with_all = ["keep", "nodes", "scenario", "profile"])]
    pub watch: bool,
}

/// How the owner fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// The owner's host vanishes: its link goes down on the bridge.
    HostLoss,
    /// The owner's speaker is killed with SIGKILL.
    Crash,
    /// The owner's speaker is stopped with SIGTERM and leaves the cluster.
    Graceful,
    /// No failure: build, settle and show the cluster.
    None,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Self::HostLoss => "host-loss",
            Self::Crash => "crash",
            Self::Graceful => "graceful",
            Self::None => "none",
        }
    }
}

/// The gossip timing profiles (see `vigil sim --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabProfile {
    /// vigil's: sub-second detection.
    Fast,
    /// Go memberlist's DefaultLANConfig.
    Lan,
    /// Go memberlist's DefaultWANConfig (detection takes minutes).
    Wan,
    /// Go memberlist's DefaultLocalConfig.
    Local,
}

impl LabProfile {
    fn name(self) -> &'static str {
        match self {
            Self::Fast => "fast",
            Self::Lan => "lan",
            Self::Wan => "wan",
            Self::Local => "local",
        }
    }

    /// How long a takeover may take before the lab gives up: generous bounds above each
    /// profile's worst-case detection for a handful of nodes.
    fn takeover_limit(self) -> Duration {
        Duration::from_secs(match self {
            Self::Fast => 20,
            Self::Lan | Self::Local => 60,
            Self::Wan => 240,
        })
    }
}

/// A namespace prefix: short enough for namespace names, and only characters that need no
/// quoting anywhere.
fn parse_prefix(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 24 {
        return Err("must be 1 to 24 characters".into());
    }
    if !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') || s.starts_with('-') {
        return Err("only letters, digits and '-' (not first)".into());
    }
    Ok(s.to_string())
}

/// Why the lab stopped early.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Ctrl-C or SIGTERM.
    Interrupted(Signal),
    /// Something failed; the message says what.
    Failed(String),
}

impl Stop {
    fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }
}

impl From<&str> for Stop {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_string())
    }
}

impl From<String> for Stop {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

/// `Err(Stop::Interrupted)` once Ctrl-C or SIGTERM arrived.
fn check_interrupt() -> Result<(), Stop> {
    signals::received().map_or(Ok(()), |s| Err(Stop::Interrupted(s)))
}

/// Sleeps `d` unless interrupted.
fn pause(d: Duration) -> Result<(), Stop> {
    check_interrupt()?;
    std::thread::sleep(d);
    check_interrupt()
}

/// Runs `vigil lab`.
pub fn run(args: Args) -> ExitCode {
    if let Err(e) = preflight(&args) {
        eprintln!("vigil lab: {e}");
        return ExitCode::from(2);
    }
    if args.down {
        return down(&args.prefix);
    }
    if let Err(e) = signals::install(&args.prefix) {
        eprintln!("vigil lab: {e}");
        return ExitCode::FAILURE;
    }
    let result = if args.watch {
        watch(&args.prefix)
    } else {
        demo(&args)
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stop::Interrupted(signal)) => {
            if args.watch {
                return ExitCode::SUCCESS;
            }
            eprintln!("vigil lab: stopped by {signal}; the lab is torn down");
            ExitCode::from(130)
        }
        Err(Stop::Failed(message)) => {
            eprintln!("vigil lab: {message}");
            if !args.watch {
                eprintln!("vigil lab: the lab is torn down");
            }
            ExitCode::FAILURE
        }
    }
}

/// What must hold before anything is made: root, `ip`, and (unless tearing down or watching)
/// no lab already there under the same prefix.
fn preflight(args: &Args) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("needs root to create network namespaces (try sudo)".into());
    }
    match Command::new("ip")
        .arg("-V")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err("`ip` not found: install iproute2 (apt-get install iproute2)".into());
        }
        Err(e) => return Err(format!("cannot run `ip`: {e}")),
    }
    if args.down || args.watch {
        return Ok(());
    }
    let stale = cluster::namespaces_with(&args.prefix)?;
    let dir = cluster::work_dir(&args.prefix);
    if !stale.is_empty() || dir.exists() {
        let what = if stale.is_empty() {
            format!("{} exists", dir.display())
        } else {
            format!("namespaces {} exist", stale.join(", "))
        };
        return Err(format!(
            "a lab with prefix {p:?} is already there ({what}; from --keep or a killed run): \
             remove it with `vigil lab --down --prefix {p}`, or pick another --prefix",
            p = args.prefix
        ));
    }
    Ok(())
}

/// Prints steps with the time since the start.
struct Steps {
    start: Instant,
}

impl Steps {
    fn say(&self, text: &str) {
        let t = self.start.elapsed().as_secs_f64();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "[{t:6.2}s] {text}");
        let _ = out.flush();
    }

    /// Prints a block (a status table) indented under the steps.
    fn block(text: &str) {
        let mut out = std::io::stdout().lock();
        for line in text.lines() {
            if line.trim().is_empty() {
                let _ = writeln!(out);
            } else {
                let _ = writeln!(out, "           {line}");
            }
        }
        let _ = out.flush();
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The whole demonstration.
fn demo(args: &Args) -> Result<(), Stop> {
    let exe = std::env::current_exe()
        .map_err(|e| Stop::failed(format!("cannot find the vigil executable: {e}")))?;
    let nodes = usize::from(args.nodes);
    let steps = Steps {
        start: Instant::now(),
    };
    println!(
        "vigil lab: {nodes} hosts, scenario {}, profile {} (namespaces {}-*)",
        args.scenario.name(),
        args.profile.name(),
        args.prefix
    );

    let mut lab = Lab::create(&args.prefix, nodes)?;
    steps.say(&format!(
        "network: bridge, client {CLIENT4}, hosts {}..{} on 198.18.0.0/24",
        cluster::host_ip(1),
        cluster::host_ip(nodes)
    ));
    lab.write_configs(args.profile.name())?;
    lab.start_speakers(&exe)?;
    steps.say(&format!(
        "started `vigil standalone` on {nodes} hosts (encrypted gossip, a fresh key; configs and logs in {})",
        lab.dir.display()
    ));

    let settle_limit = Duration::from_secs(30);
    let prober = Prober::start(Questions {
        ns: lab.client_ns(),
        ifindex: lab.client.0,
        mac: lab.client.1,
        src4: CLIENT4,
        src6: CLIENT6,
        vip4: VIP4,
        vip6: VIP6,
        interval: Duration::from_millis(10),
        limit: settle_limit + args.profile.takeover_limit() + Duration::from_secs(60),
    })
    .map_err(|e| Stop::failed(format!("cannot start the client's prober: {e}")))?;
    steps.say(&format!(
        "waiting until every host sees the others and agrees on the owner of {VIP4} (at most {} s)",
        settle_limit.as_secs()
    ));
    let (owner, status) = settle(&mut lab, &prober, settle_limit)?;
    let owner_mac = lab.host(&owner).map(|h| h.mac).unwrap_or_default();
    steps.say(&format!(
        "settled: {owner} owns {VIP4} and {VIP6}; the client hears both at {owner_mac}. {owner}'s view (`vigil status`):"
    ));
    Steps::block(&render(&status));

    let mut summary = format!(
        "result: scenario={} profile={} nodes={nodes} old_owner={owner}",
        args.scenario.name(),
        args.profile.name()
    );
    if args.scenario != Scenario::None {
        let (new_owner, failover) = fail_over(args, &mut lab, &prober, &steps, &owner)?;
        summary.push_str(&format!(" new_owner={new_owner} {failover}"));
    }
    drop(prober);
    println!("{summary}");

    if args.keep {
        lab.keep();
        print_keep_help(&lab, &exe, args, &owner);
        return Ok(());
    }
    let n = lab.teardown();
    steps.say(&format!(
        "torn down: {n} namespaces and the speakers are gone"
    ));
    Ok(())
}

/// Fails the owner as the scenario says, waits for another host to answer, and reports the
/// outage. Returns the new owner and the summary's outage fields.
fn fail_over(
    args: &Args,
    lab: &mut Lab,
    prober: &Prober,
    steps: &Steps,
    owner: &str,
) -> Result<(String, String), Stop> {
    let old = lab.host(owner).ok_or("the owner is not a lab host")?;
    let (old_mac, old_pid) = (old.mac, old.pid.unwrap_or_default());
    let failed_at = prober.now();
    let what = match args.scenario {
        Scenario::HostLoss => {
            cluster::ip(&["-n", &lab.bridge_ns(), "link", "set", owner, "down"])?;
            format!(
                "host loss: {owner}'s link is down (its bridge port, in {})",
                lab.bridge_ns()
            )
        }
        Scenario::Crash => {
            lab.signal(owner, Signal::SIGKILL)?;
            format!("crash: SIGKILL to {owner}'s speaker (pid {old_pid})")
        }
        Scenario::Graceful => {
            lab.signal(owner, Signal::SIGTERM)?;
            format!("graceful: SIGTERM to {owner}'s speaker (pid {old_pid}); it leaves the cluster")
        }
        Scenario::None => unreachable!("no failure to make"),
    };
    steps.say(&format!("{what}; the client asks every 10 ms"));

    let limit = args.profile.takeover_limit();
    let mut v4: Option<Outage> = None;
    let mut v6: Option<Outage> = None;
    let from = prober.len().saturating_sub(5);
    let started = Instant::now();
    while v4.is_none() || v6.is_none() {
        pause(Duration::from_millis(10))?;
        let rounds = prober.rounds_from(from);
        v4 = v4.or_else(|| probe::outage(&rounds, Family::V4, failed_at, old_mac));
        v6 = v6.or_else(|| probe::outage(&rounds, Family::V6, failed_at, old_mac));
        if started.elapsed() > limit {
            return Err(Stop::failed(format!(
                "no other host answered for {} within {} s of the failure (profile {}).\n{}",
                if v4.is_none() {
                    VIP4.to_string()
                } else {
                    VIP6.to_string()
                },
                limit.as_secs(),
                args.profile.name(),
                lab.log_tails(5)
            )));
        }
        if let Some(why) = prober.stopped() {
            return Err(Stop::failed(why));
        }
    }
    let (v4, v6) = (
        v4.expect("loop ends with both"),
        v6.expect("loop ends with both"),
    );
    let name_of = |mac: Mac| {
        lab.host_by_mac(mac)
            .map_or_else(|| format!("an unknown host ({mac})"), |h| h.name.clone())
    };
    let new_owner = name_of(v4.new_mac);
    steps.say(&format!(
        "{VIP4} answers from {new_owner} ({}) {} ms after the failure",
        v4.new_mac,
        ms(v4.takeover)
    ));
    Steps::block(&describe(&v4, VIP4.to_string()));
    Steps::block(&describe(&v6, VIP6.to_string()));
    if v6.new_mac != v4.new_mac {
        Steps::block(&format!(
            "note: {VIP6} moved to {} but {VIP4} to {new_owner}",
            name_of(v6.new_mac)
        ));
    }
    if args.scenario == Scenario::Graceful {
        let exit = lab
            .wait_exit(owner, Duration::from_secs(15))
            .unwrap_or_else(|| "still running after 15 s".into());
        Steps::block(&format!("{owner}'s speaker: {exit}"));
    }

    // The survivors' view, once one of them names the new owner (bounded).
    let survivor = lab
        .hosts
        .iter()
        .find(|h| h.name == new_owner)
        .or_else(|| lab.hosts.iter().find(|h| h.name != owner))
        .map(|h| h.ns.clone())
        .ok_or("no surviving host")?;
    let mut shown = None;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(s) = status(&survivor)
            && owner_of(&s, &VIP4.to_string()).as_deref() == Some(new_owner.as_str())
        {
            shown = Some(s);
            break;
        }
        pause(Duration::from_millis(100))?;
    }
    match shown {
        Some(s) => {
            steps.say(&format!("{new_owner}'s view now:"));
            Steps::block(&render(&s));
        }
        None => steps.say(&format!(
            "(the survivors' status did not name {new_owner} as the owner within 10 s)"
        )),
    }
    let fields = format!(
        "silent_ms={} takeover_ms={} unanswered={} v6_silent_ms={} v6_takeover_ms={}",
        ms(v4.silent),
        ms(v4.takeover),
        v4.unanswered,
        ms(v6.silent),
        ms(v6.takeover)
    );
    Ok((new_owner, fields))
}

/// One line on what the client saw for one VIP.
fn describe(o: &Outage, vip: String) -> String {
    let mut text = if o.unanswered == 0 {
        format!("{vip}: every question was answered (no gap at 10 ms resolution)")
    } else {
        format!(
            "{vip}: no answer for {} ms ({} questions unanswered), new owner after {} ms",
            ms(o.silent),
            o.unanswered,
            ms(o.takeover)
        )
    };
    if o.both > 0 {
        let _ = write!(
            text,
            "; {} round(s) heard both the old and the new owner",
            o.both
        );
    }
    text
}

/// Asks the speaker in `ns` for its status.
fn status(ns: &str) -> Result<Status, String> {
    let addr = HTTP.parse().expect("a socket address");
    let body = netns::run_in(ns, || {
        netns::http_get(addr, "/status", Duration::from_secs(2))
    })
    .map_err(|e| e.to_string())??;
    serde_json::from_str(&body).map_err(|e| format!("{ns}: bad /status: {e}"))
}

fn owner_of(s: &Status, vip: &str) -> Option<String> {
    s.vips
        .iter()
        .find(|v| v.vip == vip)
        .and_then(|v| v.owner.clone())
}

/// Waits until every host sees all hosts alive and names the same owner for both VIPs, and the
/// client hears that owner (only it) for both. The owner and its status.
fn settle(lab: &mut Lab, prober: &Prober, limit: Duration) -> Result<(String, Status), Stop> {
    let start = Instant::now();
    let n = lab.hosts.len();
    let mut waiting_for;
    loop {
        check_interrupt()?;
        if let Some((host, exit)) = lab.exited().into_iter().next() {
            return Err(Stop::failed(format!(
                "{host}'s speaker exited ({exit}).\n{}",
                lab.log_tails(10)
            )));
        }
        if let Some(why) = prober.stopped() {
            return Err(Stop::failed(why));
        }
        match agreed_owner(lab, n) {
            Err(why) => waiting_for = why,
            Ok((owner, status)) => {
                let mac = lab.host(&owner).map(|h| h.mac);
                let heard = prober.latest().is_some_and(|r| {
                    r.v4.len() == 1
                        && Some(r.v4[0]) == mac
                        && r.v6.len() == 1
                        && Some(r.v6[0]) == mac
                });
                if heard {
                    return Ok((owner, status));
                }
                waiting_for = format!("the client to hear {owner} answer for {VIP4} and {VIP6}");
            }
        }
        if start.elapsed() > limit {
            return Err(Stop::failed(format!(
                "the cluster did not settle within {} s: still waiting for {waiting_for}.\n\
                 Last log lines:\n{}",
                limit.as_secs(),
                lab.log_tails(5)
            )));
        }
        pause(Duration::from_millis(100))?;
    }
}

/// The owner every host names while seeing all `n` hosts alive, or what is missing.
fn agreed_owner(lab: &Lab, n: usize) -> Result<(String, Status), String> {
    let mut owner: Option<(String, Status)> = None;
    for h in &lab.hosts {
        let s = status(&h.ns).map_err(|e| format!("{}'s status ({e})", h.name))?;
        let alive = s.members.iter().filter(|m| m.state == "alive").count();
        if alive != n {
            return Err(format!(
                "{} to see {n} hosts alive (it sees {alive})",
                h.name
            ));
        }
        let o4 = owner_of(&s, &VIP4.to_string());
        let o6 = owner_of(&s, &VIP6.to_string());
        let Some(o) = o4.filter(|o| Some(o) == o6.as_ref()) else {
            return Err(format!("{} to name one owner for both VIPs", h.name));
        };
        match &owner {
            None => owner = Some((o, s)),
            Some((first, _)) if *first != o => {
                return Err(format!("the hosts to agree ({first} or {o})"));
            }
            Some(_) => {}
        }
    }
    let (o, _) = owner.ok_or("hosts")?;
    // The owner's own view, for display.
    let ns = lab
        .host(&o)
        .map(|h| h.ns.clone())
        .ok_or("the owner to be a lab host")?;
    let s = status(&ns).map_err(|e| format!("{o}'s status ({e})"))?;
    Ok((o, s))
}

/// What to type to poke at a kept lab.
fn print_keep_help(lab: &Lab, exe: &std::path::Path, args: &Args, owner: &str) {
    let exe = exe.display();
    let p = &args.prefix;
    let prefix_arg = if p == DEFAULT_PREFIX {
        String::new()
    } else {
        format!(" --prefix {p}")
    };
    let first = &lab.hosts[0];
    let mut t = String::new();
    let _ = writeln!(t, "\nThe lab keeps running (--keep). To poke at it:");
    let _ = writeln!(
        t,
        "  ip netns exec {} {exe} status          # the cluster as {} sees it",
        first.ns, first.name
    );
    let _ = writeln!(
        t,
        "  {exe} lab --watch{prefix_arg}                   # who answers for {VIP4}, from the client"
    );
    for h in &lab.hosts {
        if let Some(pid) = h.pid
            && h.speaker.is_some()
        {
            let _ = writeln!(
                t,
                "  kill -9 {pid}   # crash {}'s speaker (kill -STOP / -CONT freezes and thaws it)",
                h.name
            );
        }
    }
    let _ = writeln!(
        t,
        "  ip -n {} link set {} down   # unplug a host (up plugs it back)",
        lab.bridge_ns(),
        first.name
    );
    if args.scenario == Scenario::HostLoss {
        let _ = writeln!(
            t,
            "  ip -n {} link set {owner} up     # plug {owner} back in (the lab unplugged it)",
            lab.bridge_ns()
        );
    }
    let _ = writeln!(
        t,
        "  tail -f {}/host-*.log              # the speakers' logs (JSON lines)",
        lab.dir.display()
    );
    let _ = writeln!(
        t,
        "  ip netns exec {} bash               # a shell on the client (198.18.0.2)",
        lab.client_ns()
    );
    let _ = writeln!(t, "When done:\n  {exe} lab --down{prefix_arg}");
    print!("{t}");
}

/// `vigil lab --down`: kills what runs in the lab's namespaces, deletes them and its files.
fn down(prefix: &str) -> ExitCode {
    let namespaces = match cluster::namespaces_with(prefix) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("vigil lab: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dir = cluster::work_dir(prefix);
    if namespaces.is_empty() && !dir.exists() {
        println!("vigil lab: no lab with prefix {prefix}");
        return ExitCode::SUCCESS;
    }
    // Hosts and the client before the bridge.
    let (bridges, others): (Vec<&String>, Vec<&String>) =
        namespaces.iter().partition(|n| n.ends_with("-br"));
    let mut killed = 0;
    for ns in others.into_iter().chain(bridges) {
        killed += cluster::remove_namespace(ns);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let left = cluster::namespaces_with(prefix).unwrap_or_default();
    if !left.is_empty() {
        eprintln!("vigil lab: could not delete {}", left.join(", "));
        return ExitCode::FAILURE;
    }
    println!(
        "vigil lab: removed {} namespaces and {}, killed {killed} processes",
        namespaces.len(),
        dir.display()
    );
    ExitCode::SUCCESS
}

/// `vigil lab --watch`: which host answers for the VIPs of a running lab, printed on every
/// change, until Ctrl-C or 10 minutes.
fn watch(prefix: &str) -> Result<(), Stop> {
    let client = cluster::ns_name(prefix, "client");
    let (ifindex, mac) = cluster::link(&client)
        .map_err(|e| Stop::failed(format!("no running lab with prefix {prefix}? ({e})")))?;
    let mut names: Vec<(Mac, String)> = Vec::new();
    for ns in cluster::namespaces_with(prefix)? {
        let host = ns.trim_start_matches(&format!("{prefix}-")).to_string();
        if host.starts_with("host-")
            && let Ok((_, m)) = cluster::link(&ns)
        {
            names.push((m, host));
        }
    }
    let name = |answers: &[Mac]| -> String {
        if answers.is_empty() {
            return "no answer".into();
        }
        let v: Vec<String> = answers
            .iter()
            .map(|m| {
                names
                    .iter()
                    .find(|(n, _)| n == m)
                    .map_or_else(|| m.to_string(), |(_, h)| format!("{h} ({m})"))
            })
            .collect();
        v.join(" and ")
    };
    let limit = Duration::from_secs(600);
    let prober = Prober::start(Questions {
        ns: client,
        ifindex,
        mac,
        src4: CLIENT4,
        src6: CLIENT6,
        vip4: VIP4,
        vip6: VIP6,
        interval: Duration::from_millis(10),
        limit,
    })
    .map_err(|e| Stop::failed(format!("cannot start the prober: {e}")))?;
    println!(
        "asking for {VIP4} and {VIP6} every 10 ms from the client; Ctrl-C stops (at most 10 minutes)"
    );
    let mut seen = 0;
    let mut last: [Option<(Vec<Mac>, Duration)>; 2] = [None, None];
    loop {
        pause(Duration::from_millis(50))?;
        let rounds = prober.rounds_from(seen);
        seen += rounds.len();
        for r in &rounds {
            for (i, (family, vip)) in [
                (Family::V4, VIP4.to_string()),
                (Family::V6, VIP6.to_string()),
            ]
            .into_iter()
            .enumerate()
            {
                let answers = r.answers(family).to_vec();
                if last[i].as_ref().is_some_and(|(a, _)| *a == answers) {
                    continue;
                }
                let since = last[i]
                    .as_ref()
                    .filter(|(a, _)| a.is_empty())
                    .map(|(_, at)| {
                        format!(
                            " after {} ms without an answer",
                            ms(r.at.saturating_sub(*at))
                        )
                    })
                    .unwrap_or_default();
                println!(
                    "[{:8.3}s] {vip}: {}{since}",
                    r.at.as_secs_f64(),
                    name(&answers)
                );
                last[i] = Some((answers, r.at));
            }
        }
        if let Some(why) = prober.stopped() {
            println!("{why}");
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        let mut full = vec!["lab"];
        full.extend_from_slice(args);
        Args::try_parse_from(full)
    }

    #[test]
    fn defaults_are_three_hosts_losing_one_on_the_fast_profile() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.nodes, 3);
        assert_eq!(a.scenario, Scenario::HostLoss);
        assert_eq!(a.profile, LabProfile::Fast);
        assert_eq!(a.prefix, DEFAULT_PREFIX);
        assert!(!a.keep && !a.down && !a.watch);
    }

    #[test]
    fn node_counts_outside_two_to_sixteen_are_refused() {
        for bad in ["0", "1", "17", "300"] {
            let e = parse(&["--nodes", bad]).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{bad}: {e}"
            );
            assert!(e.to_string().contains("2..=16"), "{e}");
        }
        for bad in ["-3", "three", ""] {
            assert!(parse(&["--nodes", bad]).is_err(), "{bad}");
        }
        assert_eq!(parse(&["--nodes", "2"]).unwrap().nodes, 2);
        assert_eq!(parse(&["-n", "16"]).unwrap().nodes, 16);
    }

    #[test]
    fn scenarios_and_profiles_parse_by_name() {
        let a = parse(&["--scenario", "graceful", "--profile", "lan"]).unwrap();
        assert_eq!(
            (a.scenario, a.profile),
            (Scenario::Graceful, LabProfile::Lan)
        );
        assert_eq!(parse(&["-s", "crash"]).unwrap().scenario, Scenario::Crash);
        assert_eq!(
            parse(&["-s", "host-loss"]).unwrap().scenario,
            Scenario::HostLoss
        );
        assert!(parse(&["--scenario", "meteor"]).is_err());
        assert!(parse(&["--profile", "turbo"]).is_err());
        // Every profile name the lab offers is one the configuration file accepts.
        for p in LabProfile::value_variants() {
            assert!(p.name().parse::<vigil_gossip::Profile>().is_ok(), "{p:?}");
        }
    }

    #[test]
    fn prefixes_are_short_and_plain() {
        assert_eq!(parse(&["--prefix", "lab-2"]).unwrap().prefix, "lab-2");
        for bad in ["", "-x", "a b", "a/b", "x;rm", "abcdefghijklmnopqrstuvwxyz"] {
            assert!(parse(&["--prefix", bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn down_and_watch_take_no_lab_options() {
        assert!(parse(&["--down"]).unwrap().down);
        assert!(parse(&["--down", "--prefix", "x"]).is_ok());
        assert!(parse(&["--down", "--keep"]).is_err());
        assert!(parse(&["--down", "--nodes", "4"]).is_err());
        assert!(parse(&["--down", "--watch"]).is_err());
        assert!(parse(&["--watch", "--scenario", "crash"]).is_err());
        assert!(parse(&["--watch", "--prefix", "x"]).unwrap().watch);
    }
}
