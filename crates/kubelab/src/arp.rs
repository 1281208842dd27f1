//! Asking "who has this IPv4 address?" from a lab host, on a raw socket opened inside that
//! host's namespace: the question a client on the LAN asks before it sends a packet to a
//! LoadBalancer IP, and the answer whoever announces it (MetalLB's speaker, vigil's) gives.
//!
//! The socket is opened by a short-lived thread that has joined the host's network namespace,
//! so nothing is sent anywhere but on the lab's bridge. The interface's index and MAC come from
//! `ip -n <ns> link` (sysfs, as mounted for the test process, shows the root namespace).

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sched::{CloneFlags, setns};
use vigil_l2::frames;
use vigil_l2::wire::arp;
use vigil_l2::wire::ethernet::{self, Address as EthernetAddress, EtherType};
use vigil_l2_net::{Filter, PacketSocket};

/// One ARP reply to the question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpAnswer {
    /// The sender hardware address in the reply: the MAC the answerer claims for the IP.
    pub mac: String,
    /// The Ethernet source of the frame.
    pub eth_src: String,
}

/// The most a caller may wait for answers to one question.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// Sends one broadcast ARP request for `target` from interface `iface` of namespace `ns`
/// (sender `src`, which should be that interface's address), and returns every reply about
/// `target` addressed to `src` that arrives within `wait` (at most 30 s), in arrival order.
pub fn arp_ask(
    ns: &str,
    iface: &str,
    src: Ipv4Addr,
    target: Ipv4Addr,
    wait: Duration,
) -> io::Result<Vec<ArpAnswer>> {
    let (ifindex, mac) = link(ns, iface)?;
    let netns = File::open(Path::new("/run/netns").join(ns))
        .map_err(|e| io::Error::new(e.kind(), format!("namespace {ns}: {e}")))?;
    let wait = wait.min(MAX_WAIT);
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                setns(&netns, CloneFlags::CLONE_NEWNET)
                    .map_err(|e| io::Error::other(format!("setns into {ns}: {e}")))?;
                let socket = PacketSocket::open(ifindex, Filter::Answers)?;
                socket.send(&frames::arp_request(mac, src, target))?;
                collect(&socket, src, target, wait)
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Reads replies about `target` addressed to `src` until `wait` has passed.
fn collect(
    socket: &PacketSocket,
    src: Ipv4Addr,
    target: Ipv4Addr,
    wait: Duration,
) -> io::Result<Vec<ArpAnswer>> {
    let end = Instant::now() + wait;
    let mut buf = vec![0u8; 2048];
    let mut answers = Vec::new();
    loop {
        while let Some(n) = socket.recv(&mut buf)? {
            if let Some(answer) = reply_about(&buf[..n], src, target) {
                answers.push(answer);
            }
        }
        let now = Instant::now();
        if now >= end {
            return Ok(answers);
        }
        socket.wait_readable(end - now)?;
    }
}

/// The answer in `frame`, if it is an ARP reply about `target` to `src`; anything else
/// (gratuitous frames, other questions' answers, junk) is ignored.
fn reply_about(frame: &[u8], src: Ipv4Addr, target: Ipv4Addr) -> Option<ArpAnswer> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    let repr = arp::Repr::parse(&arp::Packet::new_checked(eth.payload()).ok()?).ok()?;
    (repr.operation == arp::Operation::Reply
        && repr.source_protocol_addr == target
        && repr.target_protocol_addr == src)
        .then(|| ArpAnswer {
            mac: repr.source_hardware_addr.to_string(),
            eth_src: eth.src_addr().to_string(),
        })
}

/// The index and MAC of `iface` in namespace `ns`, from `ip -j link show`.
fn link(ns: &str, iface: &str) -> io::Result<(u32, EthernetAddress)> {
    let out = Command::new("ip")
        .args(["-n", ns, "-j", "link", "show", "dev", iface])
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip -n {ns} link show dev {iface}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let bad = |what: &str| io::Error::other(format!("{ns} {iface}: no {what} in `ip -j link`"));
    let links: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| io::Error::other(format!("ip -j link: {e}")))?;
    let link = links.get(0).ok_or_else(|| bad("link"))?;
    let index = link
        .get("ifindex")
        .and_then(serde_json::Value::as_u64)
        .and_then(|i| u32::try_from(i).ok())
        .ok_or_else(|| bad("ifindex"))?;
    let mac: EthernetAddress = link
        .get("address")
        .and_then(serde_json::Value::as_str)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| bad("address"))?;
    Ok((index, mac))
}
