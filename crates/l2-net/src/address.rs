//! Host addresses for VIPs: adding and removing a single-host address (IPv4 /32, IPv6 /128
//! without duplicate address detection) on a device with route netlink, and the ARP sysctls
//! that keep a host's kernel from answering for addresses it holds on another device.
//!
//! A VIP held as a local address lets the kernel accept traffic sent to it. Linux answers ARP
//! for any local address on any interface unless `arp_ignore` says otherwise, so a host that
//! still holds a VIP (its speaker crashed) would answer beside the new owner;
//! [`ArpSysctls::SAFE`] closes that. IPv6 needs nothing: the kernel answers a neighbour
//! solicitation only for addresses on the interface that received it.

use std::io;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::netlink::{
    self, IFA_ADDRESS, IFA_LOCAL, IFADDRMSG_LEN, NLM_F_REQUEST, NLMSG_ERROR, NLMSG_HDR_LEN,
    RTM_DELADDR, RTM_NEWADDR,
};

// linux/netlink.h, linux/if_addr.h
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const IFA_FLAGS: u16 = 8;
const IFA_F_NODAD: u32 = 0x02;

/// How long the kernel may take to acknowledge one request.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);

/// What an add or a remove found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel made the change.
    Done,
    /// Nothing to do: the address was already there (add) or already gone (remove).
    Unchanged,
}

/// The index of the device called `name`, or `NotFound`.
pub fn interface_index(name: &str) -> io::Result<u32> {
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the name"))?;
    // SAFETY: `c_name` is a NUL-terminated string alive across the call.
    let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no device {name:?}"),
        ));
    }
    Ok(index)
}

/// The prefix length of a single-host address of `ip`'s family.
fn host_prefix(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn push_attr(buf: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = 4 + value.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(value);
    buf.resize(netlink::align4(buf.len()), 0);
}

/// An RTM_NEWADDR or RTM_DELADDR request for `ip` as a single-host address on `index`.
fn address_request(kind: u16, flags: u16, seq: u32, index: u32, ip: IpAddr) -> Vec<u8> {
    let mut m = vec![0u8; NLMSG_HDR_LEN];
    m[4..6].copy_from_slice(&kind.to_ne_bytes());
    m[6..8].copy_from_slice(&flags.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    let (family, octets, ifa_flags): (i32, Vec<u8>, u32) = match ip {
        IpAddr::V4(v4) => (libc::AF_INET, v4.octets().to_vec(), 0),
        // No duplicate address detection: the VIP is on other hosts' loopbacks too, and a
        // tentative address would not accept traffic for a second or more.
        IpAddr::V6(v6) => (libc::AF_INET6, v6.octets().to_vec(), IFA_F_NODAD),
    };
    // struct ifaddrmsg: family, prefix length, flags, scope (universe), index.
    m.extend_from_slice(&[family as u8, host_prefix(ip), ifa_flags as u8, 0]);
    m.extend_from_slice(&index.to_ne_bytes());
    debug_assert_eq!(m.len(), NLMSG_HDR_LEN + IFADDRMSG_LEN);
    push_attr(&mut m, IFA_LOCAL, &octets);
    push_attr(&mut m, IFA_ADDRESS, &octets);
    if ifa_flags != 0 {
        push_attr(&mut m, IFA_FLAGS, &ifa_flags.to_ne_bytes());
    }
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m
}

/// Reads the acknowledgement of request `seq` from a buffer of netlink messages: `Some(0)` for
/// success, `Some(errno)` for a failure, `None` if the buffer holds no answer to it.
fn ack_of(mut buf: &[u8], seq: u32) -> Option<i32> {
    while buf.len() >= NLMSG_HDR_LEN {
        let len = netlink::u32_ne(&buf[0..4]) as usize;
        if len < NLMSG_HDR_LEN || len > buf.len() {
            return None;
        }
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        let msg_seq = netlink::u32_ne(&buf[8..12]);
        if kind == NLMSG_ERROR && msg_seq == seq && len >= NLMSG_HDR_LEN + 4 {
            let error = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            return Some(-error);
        }
        buf = &buf[netlink::align4(len).min(buf.len())..];
    }
    None
}

/// Sends one request on a socket of its own and waits (bounded) for its acknowledgement.
fn request(kind: u16, flags: u16, index: u32, ip: IpAddr) -> io::Result<()> {
    let fd = netlink::open_socket(0, true)?;
    let seq = 1;
    let message = address_request(kind, flags | NLM_F_REQUEST | NLM_F_ACK, seq, index, ip);
    netlink::send(fd.as_fd(), &message)?;
    let mut buf = vec![0u8; 8 * 1024];
    let deadline = Instant::now() + ACK_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no netlink acknowledgement",
            ));
        }
        crate::poll::wait(&[fd.as_fd()], left)?;
        if let Some(n) = netlink::recv(fd.as_fd(), &mut buf)? {
            match ack_of(&buf[..n], seq) {
                Some(0) => return Ok(()),
                Some(errno) => return Err(io::Error::from_raw_os_error(errno)),
                None => {}
            }
        }
    }
}

/// Adds `ip` as a single-host address (/32 or /128, IPv6 without DAD) on device `index`. An
/// address already there is [`Outcome::Unchanged`].
pub fn add_host_address(index: u32, ip: IpAddr) -> io::Result<Outcome> {
    match request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, index, ip) {
        Ok(()) => Ok(Outcome::Done),
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Ok(Outcome::Unchanged),
        Err(e) => Err(e),
    }
}

/// Removes the single-host address `ip` (/32 or /128) from device `index`. An address not
/// there (or there with another prefix length, so not one of ours) is [`Outcome::Unchanged`].
pub fn remove_host_address(index: u32, ip: IpAddr) -> io::Result<Outcome> {
    match request(RTM_DELADDR, 0, index, ip) {
        Ok(()) => Ok(Outcome::Done),
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Ok(Outcome::Unchanged),
        Err(e) => Err(e),
    }
}

/// The two IPv4 ARP settings of one `net.ipv4.conf.<device>` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpSysctls {
    /// `arp_ignore`: which requests the kernel answers.
    pub arp_ignore: u8,
    /// `arp_announce`: which source address the kernel's own requests carry.
    pub arp_announce: u8,
}

impl ArpSysctls {
    /// `arp_ignore=1`: answer only for addresses on the receiving interface (so not for a
    /// VIP held on `lo`); `arp_announce=2`: ask with the outgoing interface's own address,
    /// never a VIP held elsewhere, so a host's requests do not point neighbours' caches for
    /// the VIP at it.
    pub const SAFE: Self = Self {
        arp_ignore: 1,
        arp_announce: 2,
    };

    /// Whether these values, as the kernel combines them, are at least as strict as
    /// [`SAFE`](Self::SAFE). The kernel uses the larger of `all` and the device's value for both.
    /// `arp_ignore` 1, 2 and 8 never answer for an address held on another device; 3 does
    /// for addresses of global scope.
    pub fn is_safe(self) -> bool {
        matches!(self.arp_ignore, 1 | 2 | 8) && self.arp_announce == 2
    }

    /// The values in force on a device: the larger of `all`'s and its own.
    pub fn effective(all: Self, device: Self) -> Self {
        Self {
            arp_ignore: all.arp_ignore.max(device.arp_ignore),
            arp_announce: all.arp_announce.max(device.arp_announce),
        }
    }
}

fn sysctl_path(device: &str, name: &str) -> io::Result<String> {
    if device.is_empty() || device.contains('/') || device == "." || device == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{device:?} is not a device name"),
        ));
    }
    Ok(format!("/proc/sys/net/ipv4/conf/{device}/{name}"))
}

/// Reads `net.ipv4.conf.<device>.arp_ignore` and `.arp_announce` (`device` may be `all`).
pub fn read_arp_sysctls(device: &str) -> io::Result<ArpSysctls> {
    let read = |name: &str| -> io::Result<u8> {
        let text = std::fs::read_to_string(sysctl_path(device, name)?)?;
        text.trim().parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} of {device}: {text:?}"),
            )
        })
    };
    Ok(ArpSysctls {
        arp_ignore: read("arp_ignore")?,
        arp_announce: read("arp_announce")?,
    })
}

/// Writes `net.ipv4.conf.<device>.arp_ignore` and `.arp_announce`.
pub fn write_arp_sysctls(device: &str, values: ArpSysctls) -> io::Result<()> {
    std::fs::write(
        sysctl_path(device, "arp_ignore")?,
        values.arp_ignore.to_string(),
    )?;
    std::fs::write(
        sysctl_path(device, "arp_announce")?,
        values.arp_announce.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_a_host_prefix_and_nodad_for_ipv6() {
        let v4 = address_request(
            RTM_NEWADDR,
            NLM_F_CREATE,
            7,
            1,
            "198.18.0.100".parse().unwrap(),
        );
        assert_eq!(netlink::u32_ne(&v4[0..4]) as usize, v4.len());
        assert_eq!(v4[16], libc::AF_INET as u8);
        assert_eq!(v4[17], 32);
        assert_eq!(v4[18], 0);
        assert_eq!(netlink::u32_ne(&v4[20..24]), 1);
        // Two 8-byte attributes, local and address, both the VIP.
        assert_eq!(v4.len(), NLMSG_HDR_LEN + IFADDRMSG_LEN + 16);
        assert_eq!(&v4[28..32], &[198, 18, 0, 100]);
        assert_eq!(&v4[36..40], &[198, 18, 0, 100]);

        let v6 = address_request(RTM_DELADDR, 0, 8, 1, "2001:db8::100".parse().unwrap());
        assert_eq!(v6[16], libc::AF_INET6 as u8);
        assert_eq!(v6[17], 128);
        assert_eq!(u32::from(v6[18]), IFA_F_NODAD);
        // local, address (20 bytes each), flags (8 bytes).
        assert_eq!(v6.len(), NLMSG_HDR_LEN + IFADDRMSG_LEN + 48);
        assert_eq!(u16::from_ne_bytes([v6[66], v6[67]]), IFA_FLAGS);
    }

    #[test]
    fn acknowledgements_are_matched_by_sequence() {
        let ack = |seq: u32, errno: i32| {
            let mut m = vec![0u8; NLMSG_HDR_LEN];
            m[0..4].copy_from_slice(&36u32.to_ne_bytes());
            m[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
            m[8..12].copy_from_slice(&seq.to_ne_bytes());
            m.extend_from_slice(&(-errno).to_ne_bytes());
            m.resize(36, 0);
            m
        };
        assert_eq!(ack_of(&ack(1, 0), 1), Some(0));
        assert_eq!(ack_of(&ack(1, libc::EEXIST), 1), Some(libc::EEXIST));
        let mut two = ack(9, libc::EPERM);
        two.extend(ack(1, 0));
        assert_eq!(ack_of(&two, 1), Some(0));
        assert_eq!(ack_of(&ack(2, 0), 1), None);
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 53 + 7) as u8).collect();
            let _ = ack_of(&junk, 1);
        }
    }

    #[test]
    fn sysctls_combine_as_the_kernel_does() {
        let off = ArpSysctls {
            arp_ignore: 0,
            arp_announce: 0,
        };
        assert!(!off.is_safe());
        assert!(ArpSysctls::effective(ArpSysctls::SAFE, off).is_safe());
        assert!(ArpSysctls::effective(off, ArpSysctls::SAFE).is_safe());
        let scope_only = ArpSysctls {
            arp_ignore: 3,
            arp_announce: 2,
        };
        assert!(!scope_only.is_safe());
        assert!(sysctl_path("../x", "arp_ignore").is_err());
        assert!(sysctl_path("eth0.100", "arp_ignore").is_ok());
    }
}
