//! The demonstration: build, settle, fail the owner, report what the client saw, tear down (or
//! keep the lab and say how to poke at it).

use super::cluster::{self, CLIENT4, CLIENT6, HTTP, Lab, VIP4, VIP6};
use super::probe::{self, Family, Outage, Prober, Questions};
use super::{Args, DEFAULT_PREFIX, Scenario, Stop, check_interrupt, pause};
use crate::cmd::standalone::state::Status;
use crate::cmd::status::render;
use nix::sys::signal::Signal;
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};
use vigil_l2::wire::ethernet::Address as Mac;
use vigil_netlab::netns;

/// Prints steps with the time since the start.
pub(super) struct Steps {
    pub(super) start: Instant,
}

impl Steps {
    /// Prints one step.
    pub(super) fn say(&self, text: &str) {
        let t = self.start.elapsed().as_secs_f64();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "[{t:6.2}s] {text}");
        let _ = out.flush();
    }

    /// Prints a block (a status table) indented under the steps.
    pub(super) fn block(text: &str) {
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

pub(super) fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// The whole demonstration.
pub(super) fn demo(args: &Args) -> Result<(), Stop> {
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
        vip6: Some(VIP6),
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
    let old_mac = old.mac;
    let failed_at = prober.now();
    let what = fail_owner(args.scenario, lab, owner)?;
    steps.say(&format!("{what}; the client asks every 10 ms"));

    let limit = args.profile.takeover_limit();
    let (v4, v6) =
        await_takeover(prober, failed_at, old_mac, true, limit).map_err(|e| match e {
            Stop::Failed(why) => Stop::failed(format!(
                "{why} (profile {}).\n{}",
                args.profile.name(),
                lab.log_tails(5)
            )),
            interrupted => interrupted,
        })?;
    let v6 = v6.expect("asked for both families");
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
    // A little of what came after, then the client's timeline around the failure.
    pause(Duration::from_millis(300))?;
    Steps::block(&timeline_block(
        prober,
        Family::V4,
        &VIP4.to_string(),
        failed_at,
        &v4,
        |mac| lab.who(mac),
    ));

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

/// Makes `owner` fail as `scenario` says; what was done, for the report.
pub(super) fn fail_owner(scenario: Scenario, lab: &mut Lab, owner: &str) -> Result<String, Stop> {
    let old_pid = lab.host(owner).and_then(|h| h.pid).unwrap_or_default();
    Ok(match scenario {
        Scenario::HostLoss | Scenario::ApiDown => {
            cluster::ip(&[
                "-n",
                &lab.bridge_ns(),
                "link",
                "set",
                &lab.port(owner),
                "down",
            ])?;
            format!(
                "host loss: {owner}'s link is down (its bridge port, in {})",
                lab.bridge_ns()
            )
        }
        Scenario::Freeze => {
            lab.signal(owner, Signal::SIGSTOP)?;
            format!("freeze: SIGSTOP to {owner}'s speaker (pid {old_pid})")
        }
        Scenario::Crash => {
            lab.signal(owner, Signal::SIGKILL)?;
            // Reaped at once (SIGKILL cannot be caught), so the lab knows it is gone.
            let _ = lab.wait_exit(owner, Duration::from_secs(5));
            format!("crash: SIGKILL to {owner}'s speaker (pid {old_pid})")
        }
        Scenario::Graceful => {
            lab.signal(owner, Signal::SIGTERM)?;
            format!("graceful: SIGTERM to {owner}'s speaker (pid {old_pid}); it leaves the cluster")
        }
        Scenario::None => return Err(Stop::failed("no failure to make")),
    })
}

/// Waits (at most `limit`) until another MAC than `old` answers for the IPv4 VIP and, with
/// `v6`, for the IPv6 VIP; the outages as the client saw them.
pub(super) fn await_takeover(
    prober: &Prober,
    failed_at: Duration,
    old: Mac,
    v6: bool,
    limit: Duration,
) -> Result<(Outage, Option<Outage>), Stop> {
    let mut o4: Option<Outage> = None;
    let mut o6: Option<Outage> = None;
    let from = prober.len().saturating_sub(5);
    let started = Instant::now();
    while o4.is_none() || (v6 && o6.is_none()) {
        pause(Duration::from_millis(10))?;
        let rounds = prober.rounds_from(from);
        o4 = o4.or_else(|| probe::outage(&rounds, Family::V4, failed_at, old));
        if v6 {
            o6 = o6.or_else(|| probe::outage(&rounds, Family::V6, failed_at, old));
        }
        if started.elapsed() > limit {
            let which = if o4.is_none() {
                "the IPv4 VIP"
            } else {
                "the IPv6 VIP"
            };
            return Err(Stop::failed(format!(
                "no other host answered for {which} within {} s of the failure",
                limit.as_secs()
            )));
        }
        if let Some(why) = prober.stopped() {
            return Err(Stop::failed(why));
        }
    }
    Ok((o4.expect("loop ends with it"), o6))
}

/// The client's questions for `vip` from 50 ms before the failure to 300 ms after the
/// takeover, run by run, as a block for the report; `name` says who a MAC is.
pub(super) fn timeline_block(
    prober: &Prober,
    family: Family,
    vip: &str,
    failed_at: Duration,
    outage: &Outage,
    name: impl Fn(Mac) -> String,
) -> String {
    let from = failed_at.saturating_sub(Duration::from_millis(50));
    let to = failed_at + outage.takeover + Duration::from_millis(300);
    let runs = probe::timeline(&prober.rounds_from(0), family, from, to);
    let question = match family {
        Family::V4 => "ARP questions",
        Family::V6 => "neighbour solicitations",
    };
    format!(
        "the client's {question} for {vip} (ms from the failure; who answered):\n{}",
        probe::render_timeline(&runs, failed_at, name)
    )
}

/// One line on what the client saw for one VIP.
pub(super) fn describe(o: &Outage, vip: String) -> String {
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
    status_at(ns, HTTP.parse().expect("a socket address"))
}

/// Asks the speaker serving HTTP at `addr` in `ns` for its status.
pub(super) fn status_at(ns: &str, addr: std::net::SocketAddr) -> Result<Status, String> {
    let body = netns::run_in(ns, || {
        crate::cmd::status::http_get(addr, "/status", Duration::from_secs(2))
    })
    .map_err(|e| e.to_string())??;
    serde_json::from_str(&body).map_err(|e| format!("{ns}: bad /status: {e}"))
}

pub(super) fn owner_of(s: &Status, vip: &str) -> Option<String> {
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

/// What to type to poke at a kept lab: commands with their comments aligned.
fn print_keep_help(lab: &Lab, exe: &std::path::Path, args: &Args, owner: &str) {
    let exe = exe.display();
    let p = &args.prefix;
    let prefix_arg = if p == DEFAULT_PREFIX {
        String::new()
    } else {
        format!(" --prefix {p}")
    };
    let first = &lab.hosts[0];
    let br = lab.bridge_ns();
    let mut lines: Vec<(String, String)> = vec![
        (
            format!("ip netns exec {} {exe} status", first.ns),
            format!("the cluster as {} sees it", first.name),
        ),
        (
            format!("{exe} lab --watch{prefix_arg}"),
            format!("who answers for {VIP4} and {VIP6}, from the client"),
        ),
    ];
    for h in lab.hosts.iter().filter(|h| h.speaker.is_some()) {
        if let Some(pid) = h.pid {
            lines.push((
                format!("kill -9 {pid}"),
                format!(
                    "crash {}'s speaker (kill -STOP/-CONT freeze and thaw it)",
                    h.name
                ),
            ));
        }
    }
    if args.scenario == Scenario::Freeze
        && let Some(pid) = lab.host(owner).and_then(|h| h.pid)
    {
        lines.push((
            format!("kill -CONT {pid}"),
            format!("thaw {owner}'s speaker (the lab froze it)"),
        ));
    }
    if args.scenario == Scenario::HostLoss {
        lines.push((
            format!("ip -n {br} link set {} up", lab.port(owner)),
            format!("plug {owner} back in (the lab unplugged it)"),
        ));
    } else {
        lines.push((
            format!("ip -n {br} link set {} down", lab.port(&first.name)),
            format!("unplug {} (up plugs it back in)", first.name),
        ));
    }
    lines.push((
        format!("tail -f {}/host-*.log", lab.dir.display()),
        "the speakers' logs (JSON lines)".into(),
    ));
    lines.push((
        format!("ip netns exec {} bash", lab.client_ns()),
        format!("a shell on the client ({CLIENT4})"),
    ));
    let width = lines.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    let mut t = String::from("\nThe lab keeps running (--keep). To poke at it:\n");
    for (command, comment) in &lines {
        let _ = writeln!(t, "  {command:<width$}  # {comment}");
    }
    let _ = writeln!(t, "When done:\n  {exe} lab --down{prefix_arg}");
    print!("{t}");
}
