//! ICMP errors on the UDP socket: with `IP_RECVERR` / `IPV6_RECVERR`, Linux queues an error
//! for each datagram that came back as "port unreachable" and hands it out on the socket's
//! error queue, together with the datagram's original destination. A destination whose port
//! is unreachable has no process listening: strong evidence for the engine.
//!
//! The queue is read with `recvmsg(MSG_ERRQUEUE)` through nix's safe wrapper (all raw FFI stays
//! inside nix). While errors are queued, the next `recv_from` or `send_to` on the socket
//! fails with the pending error, which is the driver's cue to read the queue.

use nix::errno::Errno;
use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg, setsockopt, sockopt,
};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// Asks the kernel to queue ICMP errors on `sock`.
pub(crate) fn enable(sock: &socket2::Socket, v6: bool) -> io::Result<()> {
    let r = if v6 {
        setsockopt(sock, sockopt::Ipv6RecvErr, &true)
    } else {
        setsockopt(sock, sockopt::Ipv4RecvErr, &true)
    };
    r.map_err(io::Error::from)
}

/// Empties the error queue; returns the destinations that answered "port unreachable".
pub(crate) fn drain(sock: &impl AsRawFd) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    let mut head = [0u8; 64];
    let mut cmsg = [0u8; 512];
    // Bounded: the queue is bounded by the receive buffer, and we come back on the next error.
    for _ in 0..256 {
        let mut iov = [IoSliceMut::new(&mut head)];
        let Ok(msg) = recvmsg::<SockaddrStorage>(
            sock.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
        ) else {
            break;
        };
        let refused = msg.cmsgs().into_iter().flatten().any(|c| match c {
            ControlMessageOwned::Ipv4RecvErr(e, _) | ControlMessageOwned::Ipv6RecvErr(e, _) => {
                e.ee_errno == Errno::ECONNREFUSED as u32
            }
            _ => false,
        });
        let dest = msg.address.as_ref().and_then(|a| {
            a.as_sockaddr_in()
                .map(|v4| SocketAddr::from(std::net::SocketAddrV4::from(*v4)))
                .or_else(|| {
                    a.as_sockaddr_in6()
                        .map(|v6| SocketAddr::from(std::net::SocketAddrV6::from(*v6)))
                })
        });
        if refused && let Some(dest) = dest {
            out.push(dest);
        }
    }
    out
}
