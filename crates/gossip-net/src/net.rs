//! Sockets: binding UDP and TCP on one port, resolving seeds, and the per-connection tasks.

use crate::Error;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, timeout_at};
use vigil_gossip::{IncomingStream, StreamFailure, StreamId, StreamProgress, StreamRequest};

/// Go asks the kernel for a 2 MB UDP receive buffer; so do we (the kernel may give less).
const UDP_RECV_BUFFER: usize = 2 * 1024 * 1024;
/// Hard cap on what one TCP connection may send us, beyond the engine's own limits.
const MAX_STREAM_BYTES: usize = 64 * 1024 * 1024;

/// Binds TCP and UDP on the same address. With port 0, picks a port free for both.
pub(crate) fn bind(addr: SocketAddr) -> Result<(TcpListener, UdpSocket), Error> {
    let tries = if addr.port() == 0 { 20 } else { 1 };
    let mut last = None;
    for _ in 0..tries {
        let tcp = bind_tcp(addr).map_err(|source| Error::Bind { addr, source })?;
        let port = tcp
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        match bind_udp(port) {
            Ok(udp) => return Ok((tcp, udp)),
            Err(source) => last = Some(Error::Bind { addr: port, source }),
        }
    }
    Err(last.expect("at least one try"))
}

fn bind_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    TcpListener::from_std(s.into())
}

fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    // Best effort: an unprivileged process is capped at net.core.rmem_max.
    let _ = s.set_recv_buffer_size(UDP_RECV_BUFFER);
    // Best effort too: without it we just hear no ICMP errors.
    let _ = crate::icmp::enable(&s, addr.is_ipv6());
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
}

/// Resolves seeds written as Go's `Join` takes them: `[name/]host[:port]`, with IPv6 literals
/// in brackets when a port is given; `default_port` fills in a missing port.
pub async fn resolve_seeds(seeds: &[String], default_port: u16) -> Result<Vec<SocketAddr>, Error> {
    let mut out = Vec::new();
    for seed in seeds {
        let bad = |reason: String| Error::Resolve {
            seed: seed.clone(),
            reason,
        };
        let host = match seed.split_once('/') {
            Some((_, rest)) => rest,
            None => seed.as_str(),
        };
        if host.is_empty() {
            return Err(bad("empty address".into()));
        }
        if let Ok(addr) = host.parse::<SocketAddr>() {
            out.push(addr);
            continue;
        }
        if let Ok(ip) = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>() {
            out.push(SocketAddr::new(ip, default_port));
            continue;
        }
        let with_port = if host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            host.to_string()
        } else {
            format!("{host}:{default_port}")
        };
        let found: Vec<SocketAddr> = tokio::net::lookup_host(with_port)
            .await
            .map_err(|e| bad(e.to_string()))?
            .collect();
        if found.is_empty() {
            return Err(bad("no addresses".into()));
        }
        out.extend(found);
    }
    Ok(out)
}

/// What connection tasks ask of the driver.
pub(crate) enum StreamInput {
    /// An accepted connection has delivered `buf` so far.
    Incoming {
        buf: Vec<u8>,
        reply: oneshot::Sender<(Vec<u8>, IncomingStream)>,
    },
    /// An outgoing exchange has delivered `buf` so far.
    Response {
        id: StreamId,
        buf: Vec<u8>,
        reply: oneshot::Sender<(Vec<u8>, StreamProgress)>,
    },
    /// An outgoing exchange failed.
    Failed {
        id: StreamId,
        to: SocketAddr,
        why: StreamFailure,
    },
}

async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.len() >= MAX_STREAM_BYTES {
        return Err(io::Error::other("stream too long"));
    }
    buf.reserve(16 * 1024);
    sock.read_buf(buf).await
}

/// Serves one accepted connection until the engine is done with it or `deadline` passes.
pub(crate) async fn serve_incoming(
    mut sock: TcpStream,
    tx: mpsc::Sender<StreamInput>,
    deadline: Instant,
) {
    let work = async {
        let mut buf = Vec::new();
        loop {
            if read_more(&mut sock, &mut buf).await? == 0 {
                return Ok(());
            }
            let (reply, rx) = oneshot::channel();
            if tx.send(StreamInput::Incoming { buf, reply }).await.is_err() {
                return Ok(());
            }
            let Ok((back, decision)) = rx.await else {
                return Ok(());
            };
            buf = back;
            match decision {
                IncomingStream::NeedMore => {}
                IncomingStream::Reply(bytes) => {
                    sock.write_all(&bytes).await?;
                    sock.shutdown().await?;
                    return Ok(());
                }
                _ => return Ok(()),
            }
        }
    };
    let _: Result<io::Result<()>, _> = timeout_at(deadline, work).await;
}

/// Performs one exchange the engine asked for and reports its end.
pub(crate) async fn run_outgoing(req: StreamRequest, tx: mpsc::Sender<StreamInput>) {
    let deadline = Instant::from_std(req.deadline);
    let (id, to) = (req.id, req.to);
    let work = async {
        let mut sock = TcpStream::connect(to).await.map_err(|e| {
            if e.kind() == io::ErrorKind::ConnectionRefused {
                StreamFailure::Refused
            } else {
                StreamFailure::Io
            }
        })?;
        let _ = sock.set_nodelay(true);
        sock.write_all(&req.bytes)
            .await
            .map_err(|_| StreamFailure::Io)?;
        if !req.expects_reply {
            let _ = sock.shutdown().await;
            return Ok(());
        }
        let mut buf = Vec::new();
        loop {
            match read_more(&mut sock, &mut buf).await {
                Ok(0) | Err(_) => return Err(StreamFailure::Io),
                Ok(_) => {}
            }
            let (reply, rx) = oneshot::channel();
            if tx
                .send(StreamInput::Response { id, buf, reply })
                .await
                .is_err()
            {
                return Ok(());
            }
            let Ok((back, progress)) = rx.await else {
                return Ok(());
            };
            buf = back;
            if progress == StreamProgress::Done {
                return Ok(());
            }
        }
    };
    let why = match timeout_at(deadline, work).await {
        Ok(Ok(())) => return,
        Ok(Err(why)) => why,
        Err(_) => StreamFailure::TimedOut,
    };
    let _ = tx.send(StreamInput::Failed { id, to, why }).await;
}
