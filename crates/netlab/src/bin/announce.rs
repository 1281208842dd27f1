//! `vigil-l2-announce`: runs the L2 announcer on this host's interfaces, for tests, benchmarks
//! and trying things out. The real daemon is `vigil`; this binary has no gossip.
//!
//! ```text
//! vigil-l2-announce [--vip IP[@IFACE,IFACE..]].. [--iface NAME].. [--exclude GLOB]..
//!                   [--no-default-excludes] [--refresh-ms N] [--router] [--standby]
//!                   [--stats-file PATH] [--verbose]
//! ```
//!
//! It owns the `--vip`s from the start (none with `--standby`). Commands on standard input, one
//! per line: `own IP[@IFACES] ...` (own exactly these; `own` alone releases all), `release`,
//! `reannounce`, `quit`. It prints `ready` once its sockets are open. With `--stats-file` it
//! rewrites that file with `name=value` counters whenever they change.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use vigil_l2::{InterfaceSet, Vip};
use vigil_l2_net::{Command, Driver, DriverConfig, DriverStats, Selection};
use vigil_netlab::args::Args;

fn parse_vip(text: &str) -> Result<Vip, String> {
    let (addr, ifaces) = match text.split_once('@') {
        Some((addr, ifaces)) => (addr, Some(ifaces)),
        None => (text, None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| format!("bad VIP {text:?}"))?;
    let interfaces = match ifaces {
        None => InterfaceSet::All,
        Some(list) => InterfaceSet::Only(list.split(',').map(str::to_string).collect()),
    };
    Ok(Vip { addr, interfaces })
}

fn stats_text(stats: &DriverStats) -> String {
    let a = &stats.announcer;
    let lines = [
        ("frames_received", a.frames_received),
        ("malformed", a.malformed),
        ("ignored", a.ignored),
        ("ndisc_bad_hop_limit", a.ndisc_bad_hop_limit),
        ("not_owned", a.not_owned),
        ("wrong_interface", a.wrong_interface),
        ("conflicts", a.conflicts),
        ("arp_requests_answered", a.arp_requests_answered),
        ("neighbor_solicits_answered", a.neighbor_solicits_answered),
        ("gratuitous_arp_sent", a.gratuitous_arp_sent),
        ("unsolicited_na_sent", a.unsolicited_na_sent),
        ("transmit_queue_full", a.transmit_queue_full),
        ("send_errors", stats.send_errors),
        ("recv_errors", stats.recv_errors),
        ("socket_errors", stats.socket_errors),
        ("multicast_errors", stats.multicast_errors),
        ("netlink_resyncs", stats.netlink_resyncs),
    ];
    let mut text: String = lines.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let names: Vec<&str> = stats.interfaces.iter().map(String::as_str).collect();
    text.push_str(&format!("interfaces={}\n", names.join(",")));
    text
}

fn run() -> Result<(), String> {
    let args = Args::parse(
        std::env::args().skip(1),
        &["no-default-excludes", "router", "standby", "verbose"],
    )?;
    let vips = args
        .all::<String>("vip")?
        .iter()
        .map(|v| parse_vip(v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut selection = Selection::default();
    if args.flag("no-default-excludes") {
        selection.exclude.clear();
    }
    selection.exclude.extend(args.all::<String>("exclude")?);
    let include: Vec<String> = args.all("iface")?;
    if !include.is_empty() {
        selection.include = Some(include.into_iter().collect::<BTreeSet<_>>());
    }
    let mut announcer = vigil_l2::Config {
        router: args.flag("router"),
        ..vigil_l2::Config::default()
    };
    announcer.refresh_interval = args.get::<u64>("refresh-ms")?.map(Duration::from_millis);
    let stats_file: Option<String> = args.get("stats-file")?;

    let config = DriverConfig {
        announcer,
        selection,
        verbose: args.flag("verbose"),
        on_events: None,
    };
    let (thread, handle) = Driver::spawn(config).map_err(|e| format!("driver: {e}"))?;
    if !args.flag("standby") {
        handle.set_owned(vips).map_err(|_| "driver stopped")?;
    }
    println!("ready");

    let commands = handle.clone();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let mut words = line.split_whitespace();
            let command = match words.next() {
                Some("own") => match words.map(parse_vip).collect::<Result<Vec<_>, _>>() {
                    Ok(vips) => Command::SetOwned(vips),
                    Err(e) => {
                        eprintln!("vigil-l2-announce: {e}");
                        continue;
                    }
                },
                Some("release") => Command::SetOwned(Vec::new()),
                Some("reannounce") => Command::Reannounce,
                Some("quit") => Command::Shutdown,
                _ => continue,
            };
            if commands.send(command).is_err() {
                break;
            }
        }
    });

    let mut written = String::new();
    let mut last_write = Instant::now();
    loop {
        let finished = thread.is_finished();
        if let Some(path) = &stats_file {
            let text = stats_text(&handle.stats());
            if text != written || last_write.elapsed() > Duration::from_secs(5) {
                let tmp = format!("{path}.tmp");
                if std::fs::write(&tmp, &text).is_ok() && std::fs::rename(&tmp, path).is_ok() {
                    written = text;
                    last_write = Instant::now();
                }
            }
        }
        if finished {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    match thread.join() {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("driver: {e}")),
        Err(_) => Err("driver thread panicked".into()),
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vigil-l2-announce: {e}");
            ExitCode::FAILURE
        }
    }
}
