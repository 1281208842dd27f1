//! `vigil-l2-client`: asks ARP and Neighbour Discovery questions on a raw socket and prints the
//! answers, for the network-namespace tests and the benchmark (no arping or ndisc6 needed).
//!
//! ```text
//! vigil-l2-client arp   --iface I --src-ip IPv4 --target IPv4 [--count N] [--interval-ms MS] [--wait-ms MS]
//! vigil-l2-client ns    --iface I --src-ip IPv6 --target IPv6 [--unicast-mac MAC] [--hop-limit N]
//!                       [--count N] [--interval-ms MS] [--wait-ms MS]
//! vigil-l2-client raw   --iface I --hex FRAME [--hex FRAME]..
//! vigil-l2-client listen --iface I --target IP [--wait-ms MS]
//! vigil-l2-client poke  --target IP
//! vigil-l2-client bench --iface I --src-ip IPv4 --target IPv4 [--samples N] [--rates R,R,..] [--window-ms MS]
//! vigil-l2-client watch --iface I --src-ip IPv4 --target IPv4 [--interval-ms N] [--duration-ms D]
//!                       [--icmp] [--gap-ms G] [--stop-after-change-ms S] [--answers] [--rounds]
//!                       [--sender-first IPv4 [--sender-count N]] [--linger-ms L] [--stop-file PATH]
//! ```
//!
//! `watch` asks for the target every `--interval-ms` (default 5) with an ARP request and, with
//! `--icmp`, an ICMP echo request sent to the MAC that last answered ARP, for `--duration-ms`
//! (default 3000, at most an hour), and prints `key=value` lines (times in ms since the start):
//!
//! ```text
//! round n=N t_ms=T                                     (each round of questions, only with --rounds)
//! answer t_ms=T kind=arp|icmp mac=M gratuitous=0|1 round=N  (each answer, only with --answers)
//! icmp-to t_ms=T mac=M                                  (ICMP probes now go to M)
//! mac-change t_ms=T kind=arp|icmp from=M to=M           (the answering MAC differs from the last)
//! outage kind=K from_ms=T to_ms=T|open length_ms=L before=M|none after=M|none
//! summary kind=K probes=N answers=N outages=N max_gap_ms=L max_outage_ms=L mac_changes=N
//!         conflicts=N macs=M,M first_mac=M|none last_mac=M|none open=0|1 send_errors=N
//! ```
//!
//! An outage is a span longer than `--gap-ms` (default 3 intervals) with no answer of a kind;
//! `max_gap_ms` is the longest span without one, also counting the watch's start and end;
//! `open=1` when the last outage had not ended when the watch did. A conflict is a probe round
//! that two MACs answered. With `--stop-after-change-ms S` the watch ends S ms after the ARP
//! answers first come from another MAC, and with `--stop-file PATH` it stops asking once PATH
//! exists (looked for every 20 rounds). `--linger-ms L` keeps listening L ms after the last
//! question. With `--sender-first A` each round's ARP question comes from the next of
//! `--sender-count` addresses from A on (default 254; .0 and .255 skipped), so that a reply
//! names the round it answers (`round=`) even when it comes after the next question; otherwise
//! an answer belongs to the latest round sent when it arrived.
//!
//! `listen` prints what arrives about the target (gratuitous ARP replies, advertisements) without
//! asking; `poke` sends one UDP datagram to the target so that the host's own kernel resolves it.
//!
//! Every answer about `--target` is printed as one line of `key=value` words, starting with
//! `arp-reply` or `na`. Loops are bounded by `--count` and `--wait-ms`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::ControlFlow;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use vigil_l2::frames;
use vigil_l2::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use vigil_l2::wire::{arp, icmpv6, ipv6, ndisc};
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::args::{self, Args};
use vigil_netlab::prober::{self as watch, Event, Kind, SenderRange, WatchConfig};

/// An answer about the target, as printed.
fn describe(frame: &[u8], target: IpAddr) -> Option<String> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    match eth.ethertype() {
        EtherType::Arp => {
            let repr = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).ok()?).ok()?;
            (repr.operation == arp::Operation::Reply
                && IpAddr::V4(repr.source_protocol_addr) == target)
                .then(|| {
                    format!(
                        "arp-reply ip={} mac={} eth_src={} eth_dst={} target_mac={} target_ip={}",
                        repr.source_protocol_addr,
                        repr.source_hardware_addr,
                        eth.src_addr(),
                        eth.dst_addr(),
                        repr.target_hardware_addr,
                        repr.target_protocol_addr
                    )
                })
        }
        EtherType::Ipv6 => {
            let ip = ipv6::Packet::new_checked(eth.payload()).ok()?;
            let ip_repr = ipv6::Repr::parse(&ip).ok()?;
            let icmp = icmpv6::Packet::new_checked(ip.payload()).ok()?;
            let icmpv6::Repr::Ndisc(ndisc::Repr::NeighborAdvert {
                flags,
                target_addr,
                lladdr,
            }) = icmpv6::Repr::parse(ip_repr.src_addr, ip_repr.dst_addr, &icmp).ok()?
            else {
                return None;
            };
            let mut flag_text = String::new();
            for (bit, name) in [
                (ndisc::NeighborFlags::ROUTER, 'R'),
                (ndisc::NeighborFlags::SOLICITED, 'S'),
                (ndisc::NeighborFlags::OVERRIDE, 'O'),
            ] {
                if flags.contains(bit) {
                    flag_text.push(name);
                }
            }
            (IpAddr::V6(target_addr) == target).then(|| {
                format!(
                    "na target={} mac={} flags={} src={} dst={} hop_limit={} eth_src={} eth_dst={}",
                    target_addr,
                    lladdr.map_or("none".to_string(), |m| m.to_string()),
                    if flag_text.is_empty() {
                        "-"
                    } else {
                        &flag_text
                    },
                    ip_repr.src_addr,
                    ip_repr.dst_addr,
                    ip_repr.hop_limit,
                    eth.src_addr(),
                    eth.dst_addr()
                )
            })
        }
        _ => None,
    }
}

fn open(args: &Args) -> Result<(PacketSocket, EthernetAddress), String> {
    let name: String = args.required("iface")?;
    let (index, mac) = args::interface(&name)?;
    let socket = PacketSocket::open(index, Filter::Answers).map_err(|e| format!("{name}: {e}"))?;
    Ok((socket, EthernetAddress(mac)))
}

/// Sends `question` `count` times, `interval` apart, printing answers until `wait` after the
/// last one.
fn ask(args: &Args, target: IpAddr, question: &[u8], socket: &PacketSocket) -> Result<(), String> {
    let count: u32 = args.get("count")?.unwrap_or(1).min(10_000);
    let interval = Duration::from_millis(args.get("interval-ms")?.unwrap_or(100));
    let wait = Duration::from_millis(args.get::<u64>("wait-ms")?.unwrap_or(500).min(30_000));
    let mut buf = vec![0u8; 4096];
    let mut sent = 0;
    let mut next = Instant::now();
    let mut stop = None;
    loop {
        let now = Instant::now();
        if sent < count && now >= next {
            socket.send(question).map_err(|e| format!("send: {e}"))?;
            sent += 1;
            next = now + interval;
            if sent == count {
                stop = Some(now + wait);
            }
        }
        while let Some(n) = socket.recv(&mut buf).map_err(|e| format!("recv: {e}"))? {
            if let Some(line) = describe(&buf[..n], target) {
                println!("{line}");
            }
        }
        let deadline = match stop {
            Some(at) if now >= at => return Ok(()),
            Some(at) => at,
            None => next,
        };
        socket
            .wait_readable(deadline.saturating_duration_since(now))
            .map_err(|e| format!("poll: {e}"))?;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Counts ARP replies from `target` to `asker` waiting on the socket (not gratuitous ones).
fn count_replies(
    socket: &PacketSocket,
    buf: &mut [u8],
    target: Ipv4Addr,
    asker: Ipv4Addr,
) -> Result<u64, String> {
    let mut replies = 0;
    let to_us = format!("target_ip={asker}");
    while let Some(n) = socket.recv(buf).map_err(|e| format!("recv: {e}"))? {
        let line = describe(&buf[..n], IpAddr::V4(target));
        replies += u64::from(line.is_some_and(|l| l.ends_with(&to_us)));
    }
    Ok(replies)
}

fn bench(args: &Args) -> Result<(), String> {
    let (socket, mac) = open(args)?;
    let src: Ipv4Addr = args.required("src-ip")?;
    let target: Ipv4Addr = args.required("target")?;
    let samples: usize = args.get("samples")?.unwrap_or(2000).min(100_000);
    let window = Duration::from_millis(args.get::<u64>("window-ms")?.unwrap_or(1000).min(5000));
    let rates: Vec<u64> = args
        .get::<String>("rates")?
        .unwrap_or_else(|| "1000,2000,5000,10000,20000,50000,100000".into())
        .split(',')
        .map(|r| r.parse().map_err(|_| format!("bad rate {r:?}")))
        .collect::<Result<_, _>>()?;
    let question = frames::arp_request(mac, src, target);
    let mut buf = vec![0u8; 4096];

    // Latency: one question at a time.
    let mut rtts = Vec::with_capacity(samples);
    let mut lost = 0;
    for _ in 0..samples {
        let sent = Instant::now();
        socket.send(&question).map_err(|e| format!("send: {e}"))?;
        let deadline = sent + Duration::from_millis(100);
        loop {
            let now = Instant::now();
            if now >= deadline {
                lost += 1;
                break;
            }
            socket
                .wait_readable(deadline - now)
                .map_err(|e| format!("poll: {e}"))?;
            if count_replies(&socket, &mut buf, target, src)? > 0 {
                rtts.push(sent.elapsed());
                break;
            }
        }
    }
    rtts.sort();
    println!(
        "latency samples={} lost={} p50_us={} p99_us={} max_us={}",
        rtts.len(),
        lost,
        percentile(&rtts, 50.0).as_micros(),
        percentile(&rtts, 99.0).as_micros(),
        rtts.last().copied().unwrap_or_default().as_micros()
    );

    // Rate: paced questions for one window per rate; no drops means every one answered.
    let mut best = 0;
    for rate in rates {
        let total = rate * window.as_millis() as u64 / 1000;
        let gap = Duration::from_secs_f64(1.0 / rate as f64);
        let start = Instant::now();
        let mut sent = 0u64;
        let mut replies = 0u64;
        let mut send_errors = 0u64;
        while sent < total {
            let due = start + gap * u32::try_from(sent).unwrap_or(u32::MAX);
            if Instant::now() >= due {
                if socket.send(&question).is_err() {
                    send_errors += 1;
                }
                sent += 1;
            } else {
                replies += count_replies(&socket, &mut buf, target, src)?;
            }
            if start.elapsed() > window * 3 {
                break; // cannot keep up with the pacing: stop, bounded
            }
        }
        let achieved = sent as f64 / start.elapsed().as_secs_f64().max(1e-9);
        let drain_until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < drain_until {
            socket
                .wait_readable(Duration::from_millis(20))
                .map_err(|e| format!("poll: {e}"))?;
            replies += count_replies(&socket, &mut buf, target, src)?;
        }
        let ok = sent == total && replies == sent && send_errors == 0;
        println!(
            "rate target_pps={rate} sent={sent} answered={replies} send_errors={send_errors} achieved_pps={achieved:.0} no_drop={ok}"
        );
        if !ok {
            break;
        }
        best = rate;
    }
    println!("max_no_drop_pps={best}");
    Ok(())
}

fn millis(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn mac_or_none(mac: Option<EthernetAddress>) -> String {
    mac.map_or_else(|| "none".to_string(), |m| m.to_string())
}

fn watch(args: &Args) -> Result<(), String> {
    let (socket, mac) = open(args)?;
    let interval = Duration::from_millis(args.get::<u64>("interval-ms")?.unwrap_or(5).max(1));
    let config = WatchConfig {
        src_mac: mac,
        src_ip: args.required("src-ip")?,
        target: args.required("target")?,
        interval,
        duration: Duration::from_millis(args.get::<u64>("duration-ms")?.unwrap_or(3000))
            .min(watch::MAX_DURATION),
        icmp: args.flag("icmp"),
        icmp_id: (std::process::id() & 0xffff) as u16,
        stop_after_change: args
            .get::<u64>("stop-after-change-ms")?
            .map(Duration::from_millis),
        ipv6: None,
        senders: match args.get::<Ipv4Addr>("sender-first")? {
            Some(first) => Some(SenderRange {
                first,
                count: args.get("sender-count")?.unwrap_or(254),
            }),
            None => None,
        },
        linger: Duration::from_millis(args.get::<u64>("linger-ms")?.unwrap_or(0)),
    };
    let stop_file: Option<std::path::PathBuf> = args.get("stop-file")?;
    let print_rounds = args.flag("rounds");
    let gap = args
        .get::<u64>("gap-ms")?
        .map_or(interval * 3, Duration::from_millis);
    let print_answers = args.flag("answers");
    let mut last_mac: [Option<EthernetAddress>; 2] = [None, None];
    let recording = watch::watch(&socket, &config, |event| {
        print_event(event, print_answers, &mut last_mac);
        if let Event::Round { round, at } = event {
            if print_rounds {
                println!("round n={round} t_ms={}", millis(*at));
            }
            // Every 20th round: is the stop file there?
            if round % 20 == 0 && stop_file.as_ref().is_some_and(|f| f.exists()) {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    })
    .map_err(|e| format!("watch: {e}"))?;
    for kind in [Kind::Arp, Kind::Icmp] {
        if kind == Kind::Icmp && !config.icmp {
            continue;
        }
        print_summary(&recording, kind, gap);
    }
    Ok(())
}

/// One `answer`, `mac-change` or `icmp-to` line, as the event calls for.
fn print_event(event: &Event, print_answers: bool, last_mac: &mut [Option<EthernetAddress>; 2]) {
    match event {
        Event::Answer(answer) => {
            if print_answers {
                println!(
                    "answer t_ms={} kind={} mac={} gratuitous={} round={}",
                    millis(answer.at),
                    answer.kind.name(),
                    answer.mac,
                    u8::from(answer.gratuitous),
                    answer.round
                );
            }
            let last = &mut last_mac[usize::from(answer.kind == Kind::Icmp)];
            if let Some(from) = last.filter(|m| *m != answer.mac) {
                println!(
                    "mac-change t_ms={} kind={} from={from} to={}",
                    millis(answer.at),
                    answer.kind.name(),
                    answer.mac
                );
            }
            *last = Some(answer.mac);
        }
        Event::IcmpTo(at, mac) => println!("icmp-to t_ms={} mac={mac}", millis(*at)),
        Event::Round { .. } => {}
    }
}

/// The `outage` lines and the `summary` line of `kind`.
fn print_summary(recording: &watch::Recording, kind: Kind, gap: Duration) {
    let summary = watch::summarize(&recording.answers, kind, gap, recording.end);
    for outage in &summary.outages {
        println!(
            "outage kind={} from_ms={} to_ms={} length_ms={} before={} after={}",
            kind.name(),
            millis(outage.from),
            outage.to.map_or_else(|| "open".to_string(), millis),
            millis(outage.length),
            mac_or_none(outage.before),
            mac_or_none(outage.after)
        );
    }
    let max_outage = summary.outages.iter().map(|o| o.length).max();
    let probes = match kind {
        Kind::Arp => recording.arp_probes,
        Kind::Icmp => recording.icmp_probes,
        Kind::Ndp => recording.ndp_probes,
    };
    println!(
        "summary kind={} probes={probes} answers={} outages={} max_gap_ms={} max_outage_ms={} mac_changes={} conflicts={} macs={} first_mac={} last_mac={} open={} send_errors={}",
        kind.name(),
        summary.answers,
        summary.outages.len(),
        millis(summary.max_gap),
        millis(max_outage.unwrap_or_default()),
        summary.mac_changes,
        summary.conflicts,
        if summary.macs.is_empty() {
            "none".to_string()
        } else {
            summary
                .macs
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        },
        mac_or_none(summary.macs.first().copied()),
        mac_or_none(
            recording
                .answers
                .iter()
                .rev()
                .find(|a| a.kind == kind)
                .map(|a| a.mac)
        ),
        u8::from(summary.outages.last().is_some_and(|o| o.to.is_none())),
        recording.send_errors
    );
}

fn run() -> Result<(), String> {
    let mut argv = std::env::args().skip(1);
    let mode = argv.next().unwrap_or_default();
    let args = Args::parse(argv, &["icmp", "answers", "rounds"])?;
    match mode.as_str() {
        "arp" => {
            let (socket, mac) = open(&args)?;
            let src: Ipv4Addr = args.required("src-ip")?;
            let target: Ipv4Addr = args.required("target")?;
            ask(
                &args,
                IpAddr::V4(target),
                &frames::arp_request(mac, src, target),
                &socket,
            )
        }
        "ns" => {
            let (socket, mac) = open(&args)?;
            let src: Ipv6Addr = args.required("src-ip")?;
            let target: Ipv6Addr = args.required("target")?;
            let unicast: Option<EthernetAddress> = args
                .get::<String>("unicast-mac")?
                .map(|m| m.parse().map_err(|_| format!("bad MAC {m:?}")))
                .transpose()?;
            let hop_limit: u8 = args.get("hop-limit")?.unwrap_or(255);
            let (dst_mac, dst_ip) = match unicast {
                Some(mac) => (mac, target),
                None => {
                    let group = ipv6::solicited_node(target);
                    (EthernetAddress::from_ipv6_multicast(group), group)
                }
            };
            let question = frames::ndisc_frame(
                &frames::NdiscAddressing {
                    src_mac: mac,
                    dst_mac,
                    src_ip: src,
                    dst_ip,
                    hop_limit,
                },
                &ndisc::Repr::NeighborSolicit {
                    target_addr: target,
                    lladdr: Some(mac),
                },
            );
            ask(&args, IpAddr::V6(target), &question, &socket)
        }
        "raw" => {
            let (socket, _) = open(&args)?;
            for hex in args.all::<String>("hex")? {
                let bytes = (0..hex.len() / 2)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| format!("bad hex {hex:?}"))?;
                socket.send(&bytes).map_err(|e| format!("send: {e}"))?;
            }
            Ok(())
        }
        "listen" => {
            let (socket, _) = open(&args)?;
            let target: IpAddr = args.required("target")?;
            let wait =
                Duration::from_millis(args.get::<u64>("wait-ms")?.unwrap_or(1000).min(60_000));
            let deadline = Instant::now() + wait;
            let mut buf = vec![0u8; 4096];
            loop {
                while let Some(n) = socket.recv(&mut buf).map_err(|e| format!("recv: {e}"))? {
                    if let Some(line) = describe(&buf[..n], target) {
                        println!("{line}");
                    }
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(());
                }
                socket
                    .wait_readable(left)
                    .map_err(|e| format!("poll: {e}"))?;
            }
        }
        "poke" => {
            // One UDP datagram to the discard port: the kernel resolves the target first.
            let target: IpAddr = args.required("target")?;
            let bind = if target.is_ipv4() {
                "0.0.0.0:0"
            } else {
                "[::]:0"
            };
            let socket = std::net::UdpSocket::bind(bind).map_err(|e| format!("bind: {e}"))?;
            socket
                .send_to(b"vigil", (target, 9))
                .map_err(|e| format!("send: {e}"))?;
            Ok(())
        }
        "bench" => bench(&args),
        "watch" => watch(&args),
        _ => {
            Err("usage: vigil-l2-client arp|ns|raw|listen|poke|bench|watch --iface NAME ...".into())
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vigil-l2-client: {e}");
            ExitCode::FAILURE
        }
    }
}
