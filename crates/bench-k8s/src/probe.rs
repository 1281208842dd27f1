//! The client's view: netlab's failover prober (an ARP request every few milliseconds, each
//! answer timestamped with the MAC that gave it) on a thread inside the client's namespace.

use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vigil_l2::wire::ethernet::Address as Mac;
use vigil_l2_net::{Filter, PacketSocket};
use vigil_netlab::prober::{self, Event, Kind, Recording, WatchConfig};

/// The probing client: its namespace, interface and address.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    /// Its network namespace.
    pub(crate) ns: String,
    /// Its interface's index in that namespace.
    pub(crate) ifindex: u32,
    /// Its interface's MAC.
    pub(crate) mac: Mac,
    /// Its address.
    pub(crate) ip: Ipv4Addr,
}

/// How to watch one address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The address asked for.
    pub(crate) target: Ipv4Addr,
    /// Between questions.
    pub(crate) interval: Duration,
    /// The watch's bound.
    pub(crate) bound: Duration,
    /// End this long after the answers first come from another MAC.
    pub(crate) after_change: Option<Duration>,
    /// End at the first ARP answer.
    pub(crate) until_first_answer: bool,
}

/// A watch running on its own thread.
pub(crate) struct Watch {
    thread: JoinHandle<Result<(Recording, Option<Instant>), String>>,
}

impl Watch {
    /// Starts watching and returns once the first question has gone out.
    pub(crate) fn start(client: &Client, plan: Plan) -> Result<Self, String> {
        let (tx, rx) = mpsc::channel();
        let client = client.clone();
        let thread = std::thread::spawn(move || {
            vigil_netlab::netns::enter(&client.ns).map_err(|e| e.to_string())?;
            let socket = PacketSocket::open(client.ifindex, Filter::Answers)
                .map_err(|e| format!("client socket: {e}"))?;
            let config = WatchConfig {
                src_mac: client.mac,
                src_ip: client.ip,
                target: plan.target,
                interval: plan.interval,
                duration: plan.bound,
                icmp: false,
                icmp_id: 0,
                stop_after_change: plan.after_change,
                ipv6: None,
                senders: None,
                linger: Duration::ZERO,
            };
            let mut first_answer = None;
            let mut told = false;
            let recording = prober::watch(&socket, &config, |event| {
                match event {
                    Event::Round { .. } if !told => {
                        told = true;
                        let _ = tx.send(Instant::now());
                    }
                    Event::Answer(a) if a.kind == Kind::Arp && first_answer.is_none() => {
                        first_answer = Some(Instant::now());
                        if plan.until_first_answer {
                            return ControlFlow::Break(());
                        }
                    }
                    _ => {}
                }
                ControlFlow::Continue(())
            })
            .map_err(|e| format!("prober: {e}"))?;
            Ok((recording, first_answer))
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(_) => Ok(Self { thread }),
            Err(_) => match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => Err("the prober never asked".to_string()),
            },
        }
    }

    /// Waits for the watch to end: what it recorded, and when the first ARP answer came.
    pub(crate) fn finish(self) -> Result<(Recording, Option<Instant>), String> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the prober panicked".to_string()))
    }
}
