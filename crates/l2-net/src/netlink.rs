//! Route netlink, spoken by hand: a subscription to link and address changes, and dumps of the
//! current state. Parsing is safe code over byte slices; only the socket calls are `unsafe`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

// linux/netlink.h, linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h
pub(crate) const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
pub(crate) const RTM_NEWADDR: u16 = 20;
pub(crate) const RTM_DELADDR: u16 = 21;
const RTM_GETADDR: u16 = 22;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_MASTER: u16 = 10;
pub(crate) const IFA_ADDRESS: u16 = 1;
pub(crate) const IFA_LOCAL: u16 = 2;
const RTMGRP_LINK: u32 = 0x1;
const RTMGRP_IPV4_IFADDR: u32 = 0x10;
const RTMGRP_IPV6_IFADDR: u32 = 0x100;

pub(crate) const NLMSG_HDR_LEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
pub(crate) const IFADDRMSG_LEN: usize = 8;

/// A network interface as netlink describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Interface name.
    pub name: String,
    /// Hardware address, when it is a 6-byte one.
    pub mac: Option<[u8; 6]>,
    /// `IFF_*` flags.
    pub flags: u32,
    /// `ARPHRD_*` link type.
    pub link_type: u16,
    /// Index of the bridge, bond or VRF it is enslaved to.
    pub master: Option<u32>,
}

/// One change reported by the kernel (or one line of a dump).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An interface exists with this state (new or changed).
    Link(Link),
    /// An interface is gone.
    LinkRemoved(u32),
    /// An address was added to an interface.
    Address(u32, IpAddr),
    /// An address was removed from an interface.
    AddressRemoved(u32, IpAddr),
    /// The kernel dropped notifications (our queue overflowed): the state must be re-read.
    Overrun,
}

pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_ne(b: &[u8]) -> u16 {
    u16::from_ne_bytes([b[0], b[1]])
}

pub(crate) fn u32_ne(b: &[u8]) -> u32 {
    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
}

/// Iterates `(type, data)` over route attributes; stops at the first malformed one.
fn attributes(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = usize::from(u16_ne(&data[0..2]));
        if len < 4 || len > data.len() {
            return None;
        }
        let kind = u16_ne(&data[2..4]) & 0x3fff; // strip NLA_F_NESTED / NLA_F_NET_BYTEORDER
        let value = &data[4..len];
        data = &data[align4(len).min(data.len())..];
        Some((kind, value))
    })
}

fn parse_link(body: &[u8]) -> Option<Link> {
    if body.len() < IFINFOMSG_LEN {
        return None;
    }
    // Bridge port notifications (family AF_BRIDGE) describe bridge membership, not the link:
    // an RTM_DELLINK of that family means "left the bridge", not "gone".
    if body[0] != 0 {
        return None;
    }
    let mut link = Link {
        link_type: u16_ne(&body[2..4]),
        index: u32_ne(&body[4..8]),
        flags: u32_ne(&body[8..12]),
        name: String::new(),
        mac: None,
        master: None,
    };
    for (kind, value) in attributes(&body[IFINFOMSG_LEN..]) {
        match kind {
            IFLA_IFNAME => {
                let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
                link.name = String::from_utf8_lossy(&value[..end]).into_owned();
            }
            IFLA_ADDRESS if value.len() == 6 => {
                let mut mac = [0; 6];
                mac.copy_from_slice(value);
                link.mac = Some(mac);
            }
            IFLA_MASTER if value.len() == 4 => {
                link.master = Some(u32_ne(value)).filter(|m| *m != 0);
            }
            _ => {}
        }
    }
    Some(link)
}

fn parse_addr(body: &[u8]) -> Option<(u32, IpAddr)> {
    if body.len() < IFADDRMSG_LEN {
        return None;
    }
    let family = i32::from(body[0]);
    let index = u32_ne(&body[4..8]);
    let mut address = None;
    let mut local = None;
    for (kind, value) in attributes(&body[IFADDRMSG_LEN..]) {
        let ip = match (family, value.len()) {
            (libc::AF_INET, 4) => IpAddr::V4(Ipv4Addr::new(value[0], value[1], value[2], value[3])),
            (libc::AF_INET6, 16) => {
                let mut octets = [0; 16];
                octets.copy_from_slice(value);
                IpAddr::V6(Ipv6Addr::from(octets))
            }
            _ => continue,
        };
        match kind {
            IFA_ADDRESS => address = Some(ip),
            IFA_LOCAL => local = Some(ip),
            _ => {}
        }
    }
    // For IPv4, IFA_LOCAL is ours and IFA_ADDRESS may be a point-to-point peer.
    local.or(address).map(|ip| (index, ip))
}

/// Parses a buffer of netlink messages into events. Returns true if it held the end of a dump.
/// Malformed messages end the parse: what came before them is kept.
pub fn parse(mut buf: &[u8], events: &mut Vec<Event>) -> bool {
    let mut done = false;
    while buf.len() >= NLMSG_HDR_LEN {
        let len = u32_ne(&buf[0..4]) as usize;
        if len < NLMSG_HDR_LEN || len > buf.len() {
            break;
        }
        let kind = u16_ne(&buf[4..6]);
        let body = &buf[NLMSG_HDR_LEN..len];
        match kind {
            NLMSG_DONE | NLMSG_ERROR => done = true,
            NLMSG_OVERRUN => events.push(Event::Overrun),
            RTM_NEWLINK => events.extend(parse_link(body).map(Event::Link)),
            RTM_DELLINK => {
                events.extend(parse_link(body).map(|link| Event::LinkRemoved(link.index)));
            }
            RTM_NEWADDR => events.extend(parse_addr(body).map(|(i, a)| Event::Address(i, a))),
            RTM_DELADDR => {
                events.extend(parse_addr(body).map(|(i, a)| Event::AddressRemoved(i, a)));
            }
            _ => {}
        }
        buf = &buf[align4(len).min(buf.len())..];
    }
    done
}

/// A route netlink socket subscribed to `groups` (0 for none), bound, with a large receive
/// buffer.
pub(crate) fn open_socket(groups: u32, nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: plain syscall with constant arguments; the result is checked before use.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: `sockaddr_nl` is plain old data for which all-zero bytes are valid.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: `addr` is a valid `sockaddr_nl` alive across the call, and the length is its size.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let buffer: libc::c_int = 1 << 20;
    // SAFETY: `buffer` is a live `c_int` and the length passed is its size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const buffer).cast::<libc::c_void>(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

/// One datagram into `buf`: `Ok(None)` when nothing waits on a non-blocking socket.
pub(crate) fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes during the call.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
                0,
            )
        };
        if n >= 0 {
            return Ok(Some(usize::try_from(n).unwrap_or(0)));
        }
        let err = io::Error::last_os_error();
        match err.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => {}
            _ => return Err(err),
        }
    }
}

/// Sends one request (the kernel takes a netlink datagram whole or not at all).
pub(crate) fn send(fd: BorrowedFd<'_>, request: &[u8]) -> io::Result<()> {
    // SAFETY: `request` is valid for reads of `request.len()` bytes during the call.
    let sent = unsafe {
        libc::send(
            fd.as_raw_fd(),
            request.as_ptr().cast::<libc::c_void>(),
            request.len(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(crate) const RECV_BUFFER: usize = 64 * 1024;

/// A subscription to link and address changes.
#[derive(Debug)]
pub struct Watch {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl Watch {
    /// Subscribes to link, IPv4 address and IPv6 address notifications. Subscribe before
    /// dumping, so that no change falls between the dump and the subscription.
    pub fn open() -> io::Result<Self> {
        let groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
        Ok(Self {
            fd: open_socket(groups, true)?,
            buf: vec![0; RECV_BUFFER],
        })
    }

    /// Reads every notification waiting, without blocking. A kernel-side overflow (ENOBUFS)
    /// becomes [`Event::Overrun`].
    pub fn read(&mut self, events: &mut Vec<Event>) -> io::Result<()> {
        loop {
            match recv(self.fd.as_fd(), &mut self.buf) {
                Ok(Some(n)) => {
                    parse(&self.buf[..n], events);
                }
                Ok(None) => return Ok(()),
                Err(err) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                    events.push(Event::Overrun);
                }
                Err(err) => return Err(err),
            }
        }
    }
}

impl AsFd for Watch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Reads the current links and addresses, as a list of events, on a socket of its own.
pub fn dump(timeout: Duration) -> io::Result<Vec<Event>> {
    let fd = open_socket(0, true)?;
    let mut buf = vec![0; RECV_BUFFER];
    let mut events = Vec::new();
    let deadline = Instant::now() + timeout;
    for (seq, (kind, body_len)) in [(RTM_GETLINK, IFINFOMSG_LEN), (RTM_GETADDR, IFADDRMSG_LEN)]
        .into_iter()
        .enumerate()
    {
        let len = NLMSG_HDR_LEN + body_len;
        let mut request = vec![0u8; len];
        request[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        request[4..6].copy_from_slice(&kind.to_ne_bytes());
        request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        request[8..12].copy_from_slice(&(seq as u32 + 1).to_ne_bytes());
        send(fd.as_fd(), &request)?;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "netlink dump"));
            }
            crate::poll::wait(&[fd.as_fd()], left)?;
            match recv(fd.as_fd(), &mut buf)? {
                Some(n) if parse(&buf[..n], &mut events) => break,
                _ => {}
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, body: &[u8]) -> Vec<u8> {
        let len = NLMSG_HDR_LEN + body.len();
        let mut m = vec![0u8; NLMSG_HDR_LEN];
        m[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        m[4..6].copy_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(body);
        m.resize(align4(m.len()), 0);
        m
    }

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align4(a.len()), 0);
        a
    }

    fn link_body(family: u8, index: u32, flags: u32) -> Vec<u8> {
        let mut body = vec![family, 0];
        body.extend_from_slice(&1u16.to_ne_bytes());
        body.extend_from_slice(&index.to_ne_bytes());
        body.extend_from_slice(&flags.to_ne_bytes());
        body.extend_from_slice(&0u32.to_ne_bytes());
        body.extend(attr(IFLA_IFNAME, b"eth0\0"));
        body.extend(attr(IFLA_ADDRESS, &[2, 0, 0, 0, 0, 1]));
        body.extend(attr(IFLA_MASTER, &7u32.to_ne_bytes()));
        body
    }

    #[test]
    fn parses_links_addresses_and_done() {
        let mut buf = message(RTM_NEWLINK, &link_body(0, 4, 0x1043));
        let mut addr = vec![libc::AF_INET6 as u8, 64, 0, 0];
        addr.extend_from_slice(&4u32.to_ne_bytes());
        addr.extend(attr(
            IFA_ADDRESS,
            &"2001:db8::5".parse::<Ipv6Addr>().unwrap().octets(),
        ));
        buf.extend(message(RTM_NEWADDR, &addr));
        buf.extend(message(RTM_DELLINK, &link_body(0, 4, 0)));
        // A bridge-port notification must not read as the link going away.
        buf.extend(message(RTM_DELLINK, &link_body(7, 4, 0)));
        buf.extend(message(NLMSG_DONE, &[0; 4]));
        let mut events = Vec::new();
        assert!(parse(&buf, &mut events));
        assert_eq!(
            events,
            vec![
                Event::Link(Link {
                    index: 4,
                    name: "eth0".into(),
                    mac: Some([2, 0, 0, 0, 0, 1]),
                    flags: 0x1043,
                    link_type: 1,
                    master: Some(7),
                }),
                Event::Address(4, "2001:db8::5".parse().unwrap()),
                Event::LinkRemoved(4),
            ]
        );
    }

    #[test]
    fn garbage_never_panics() {
        let mut events = Vec::new();
        for len in 0..64 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            parse(&junk, &mut events);
        }
        let mut truncated = message(RTM_NEWLINK, &link_body(0, 4, 1));
        truncated[0] = 200;
        parse(&truncated, &mut events);
    }
}
