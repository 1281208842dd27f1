//! AF_PACKET sockets bound to one interface, with a classic BPF filter so that the kernel hands
//! us only the frames we care about, link-layer multicast membership for solicited-node
//! groups, and optionally the kernel's receive time of each frame.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, SystemTime};

/// Which frames a socket receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// ARP (any operation) and ICMPv6 neighbour solicitations: what an announcer answers.
    Questions,
    /// ARP (any operation) and ICMPv6 neighbour advertisements: what a client waits for.
    Answers,
    /// ARP (any operation) and IPv4 ICMP: what a failover watch reads (ARP answers and echo
    /// replies).
    ArpAndIcmp,
}

// Classic BPF opcodes (linux/filter.h).
const BPF_LD_H_ABS: u16 = 0x28;
const BPF_LD_B_ABS: u16 = 0x30;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;

const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter program for `filter`. Offsets assume an untagged Ethernet header (the kernel
/// strips VLAN tags before packet sockets see them).
fn program(filter: Filter) -> Vec<libc::sock_filter> {
    const ACCEPT: u32 = 0x0004_0000;
    let icmpv6_type = match filter {
        Filter::Questions => 135,
        Filter::Answers => 136,
        // Accept ARP; accept IPv4 whose protocol is ICMP; drop everything else.
        Filter::ArpAndIcmp => {
            return vec![
                insn(BPF_LD_H_ABS, 0, 0, 12),     // A = EtherType
                insn(BPF_JEQ_K, 3, 0, 0x0806),    // ARP -> accept
                insn(BPF_JEQ_K, 0, 3, 0x0800),    // not IPv4 -> drop
                insn(BPF_LD_B_ABS, 0, 0, 14 + 9), // A = IPv4 protocol
                insn(BPF_JEQ_K, 0, 1, 1),         // ICMP -> accept, else drop
                insn(BPF_RET_K, 0, 0, ACCEPT),
                insn(BPF_RET_K, 0, 0, 0),
            ];
        }
    };
    // Accept ARP; accept IPv6 whose next header is ICMPv6 and whose ICMPv6 type is the wanted
    // one; drop everything else. Extension headers are not walked: Neighbour Discovery does not
    // use them.
    vec![
        insn(BPF_LD_H_ABS, 0, 0, 12),       // A = EtherType
        insn(BPF_JEQ_K, 5, 0, 0x0806),      // ARP -> accept
        insn(BPF_JEQ_K, 0, 5, 0x86dd),      // not IPv6 -> drop
        insn(BPF_LD_B_ABS, 0, 0, 14 + 6),   // A = IPv6 next header
        insn(BPF_JEQ_K, 0, 3, 58),          // not ICMPv6 -> drop
        insn(BPF_LD_B_ABS, 0, 0, 14 + 40),  // A = ICMPv6 type
        insn(BPF_JEQ_K, 0, 1, icmpv6_type), // wanted type -> accept, else drop
        insn(BPF_RET_K, 0, 0, ACCEPT),
        insn(BPF_RET_K, 0, 0, 0),
    ]
}

fn attach(fd: BorrowedFd<'_>, filter: Filter) -> io::Result<()> {
    let mut insns = program(filter);
    let prog = libc::sock_fprog {
        len: u16::try_from(insns.len()).expect("short program"),
        filter: insns.as_mut_ptr(),
    };
    // The kernel copies the program, so `insns` may go once the call returns.
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

/// A raw AF_PACKET socket on one interface. Non-blocking.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
}

/// One frame from [`PacketSocket::recv_stamped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Its length in the buffer.
    pub len: usize,
    /// When the kernel received it (`CLOCK_REALTIME`), from a socket opened with
    /// [`PacketSocket::open_stamped`]; `None` when no timestamp came with it.
    pub at: Option<SystemTime>,
}

/// Room for the control messages of one receive: a `cmsghdr` and a `timespec` need 32 bytes on
/// 64-bit Linux; the rest is slack. Words, so the buffer is aligned as `cmsghdr` wants.
const CONTROL_WORDS: usize = 8;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn setsockopt<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(size_of::<T>()).expect("option size fits socklen_t");
    // SAFETY: `value` points to a live, initialised `T` of exactly `len` bytes for the duration
    // of the call, and `fd` is an open socket borrowed for that long.
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast::<libc::c_void>(),
            len,
        )
    };
    check(ret).map(drop)
}

impl PacketSocket {
    /// Opens a socket on interface `ifindex` that receives only what `filter` lets through.
    ///
    /// The socket is created with protocol 0, so it receives nothing until it is bound; the
    /// filter is attached before the bind, so no unfiltered frame is ever queued.
    pub fn open(ifindex: u32, filter: Filter) -> io::Result<Self> {
        Self::open_with(ifindex, filter, false)
    }

    /// Like [`PacketSocket::open`], and every frame carries the kernel's receive time (see
    /// [`PacketSocket::recv_stamped`]). The option is set before the bind, so every queued
    /// frame has one; but the first socket on the system that asks switches stamping on a
    /// moment later (a deferred static key), and a frame that arrives before that carries the
    /// time it is read at.
    pub fn open_stamped(ifindex: u32, filter: Filter) -> io::Result<Self> {
        Self::open_with(ifindex, filter, true)
    }

    fn open_with(ifindex: u32, filter: Filter, stamped: bool) -> io::Result<Self> {
        // SAFETY: plain syscall with constant arguments; the result is checked before use.
        let raw = check(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        attach(fd.as_fd(), filter)?;
        // Our own transmissions must not come back to us (kernels before 4.20 lack the option;
        // the announcer also ignores frames from its own MAC).
        let _ = setsockopt(
            fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &1 as &libc::c_int,
        );
        // Room for bursts of questions.
        let _ = setsockopt(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &(1 << 20) as &libc::c_int,
        );
        if stamped {
            // Software receive stamps, taken when the frame enters the stack (before it waits
            // in our queue), in nanoseconds. Without them frames come with no time, which
            // their reader must take as fresh: a socket that answers late beats none.
            let _ = setsockopt(
                fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                &1 as &libc::c_int,
            );
        }
        let socket = Self { fd, ifindex };
        socket.bind()?;
        Ok(socket)
    }

    fn sockaddr(&self) -> libc::sockaddr_ll {
        // SAFETY: `sockaddr_ll` is plain old data for which all-zero bytes are valid.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as libc::c_ushort;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = libc::c_int::try_from(self.ifindex).unwrap_or(0);
        addr
    }

    fn bind(&self) -> io::Result<()> {
        let addr = self.sockaddr();
        // SAFETY: `addr` is a valid `sockaddr_ll` that lives across the call, and the length
        // passed is its size.
        let ret = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&raw const addr).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        check(ret).map(drop)
    }

    /// The interface the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Replaces the socket's filter. Frames already queued under the old one stay queued.
    pub fn set_filter(&self, filter: Filter) -> io::Result<()> {
        attach(self.fd.as_fd(), filter)
    }

    /// Receives one frame into `buf`. `Ok(None)` when nothing is waiting. Frames longer than
    /// `buf` are cut to its length (the parsers then see a truncated frame and drop it).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        Ok(self.recv_stamped(buf)?.map(|received| received.len))
    }

    /// Like [`PacketSocket::recv`], with the kernel's receive time when the socket was opened
    /// with [`PacketSocket::open_stamped`] (and the control message fitted).
    pub fn recv_stamped(&self, buf: &mut [u8]) -> io::Result<Option<Received>> {
        loop {
            // SAFETY: `sockaddr_ll` is plain old data for which all-zero bytes are valid.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
                iov_len: buf.len(),
            };
            let mut control = [0u64; CONTROL_WORDS];
            // SAFETY: `msghdr` is plain old data for which all-zero bytes are valid (null
            // pointers, zero lengths).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&raw mut from).cast::<libc::c_void>();
            msg.msg_namelen = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
            msg.msg_controllen = size_of_val(&control) as _;
            // SAFETY: `msg` points to `from` (valid for writes of `msg_namelen` bytes), to one
            // `iovec` describing `buf` (valid for writes of `buf.len()` bytes) and to `control`
            // (valid for writes of `msg_controllen` bytes); all of them outlive the call.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &raw mut msg, 0) };
            if n < 0 {
                let err = io::Error::last_os_error();
                return match err.kind() {
                    io::ErrorKind::WouldBlock => Ok(None),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(err),
                };
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(Received {
                len: usize::try_from(n).unwrap_or(0),
                at: receive_time(&msg),
            }));
        }
    }

    /// Sends one whole Ethernet frame on the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes during the call.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast::<libc::c_void>(),
                frame.len(),
                0,
            )
        };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn membership(&self, option: libc::c_int, mac: [u8; 6]) -> io::Result<()> {
        let mut address = [0u8; 8];
        address[..6].copy_from_slice(&mac);
        let mreq = libc::packet_mreq {
            mr_ifindex: libc::c_int::try_from(self.ifindex).unwrap_or(0),
            mr_type: libc::PACKET_MR_MULTICAST as libc::c_ushort,
            mr_alen: 6,
            mr_address: address,
        };
        setsockopt(self.fd.as_fd(), libc::SOL_PACKET, option, &mreq)
    }

    /// Makes the interface accept frames sent to a link-layer multicast address (for as long
    /// as this socket lives or until [`PacketSocket::leave_multicast`]).
    pub fn join_multicast(&self, mac: [u8; 6]) -> io::Result<()> {
        self.membership(libc::PACKET_ADD_MEMBERSHIP, mac)
    }

    /// Undoes [`PacketSocket::join_multicast`].
    pub fn leave_multicast(&self, mac: [u8; 6]) -> io::Result<()> {
        self.membership(libc::PACKET_DROP_MEMBERSHIP, mac)
    }

    /// Waits until a frame is waiting or `timeout` passes. `Ok(false)` on timeout.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        crate::poll::wait(&[self.fd.as_fd()], timeout).map(|ready| ready[0])
    }
}

/// The `SCM_TIMESTAMPNS` control message of a message `recvmsg` filled, if there is one.
fn receive_time(msg: &libc::msghdr) -> Option<SystemTime> {
    let wanted = size_of::<libc::timespec>();
    // SAFETY: `msg` was filled by `recvmsg`: its control pointer and length describe a buffer
    // that is still alive, and the macro reads no further than that length.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !cmsg.is_null() {
        // SAFETY: a non-null header from `CMSG_FIRSTHDR` / `CMSG_NXTHDR` lies wholly inside the
        // control buffer, aligned for `cmsghdr`.
        let header = unsafe { &*cmsg };
        // SAFETY: `CMSG_LEN` is arithmetic on its argument.
        let full = unsafe { libc::CMSG_LEN(wanted as libc::c_uint) } as usize;
        if header.cmsg_level == libc::SOL_SOCKET
            && header.cmsg_type == libc::SCM_TIMESTAMPNS
            && header.cmsg_len as usize >= full
        {
            // SAFETY: the header says its data holds at least a `timespec` (checked above),
            // inside the control buffer; the read makes no assumption about its alignment.
            let stamp: libc::timespec =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>()) };
            return system_time(stamp);
        }
        // SAFETY: `cmsg` is a header of `msg`'s control buffer (see above); the macro returns
        // null past its end.
        cmsg = unsafe { libc::CMSG_NXTHDR(msg, cmsg) };
    }
    None
}

/// A `CLOCK_REALTIME` reading as a [`SystemTime`]; `None` before 1970 or malformed.
fn system_time(stamp: libc::timespec) -> Option<SystemTime> {
    let secs = u64::try_from(stamp.tv_sec).ok()?;
    let nanos = u32::try_from(stamp.tv_nsec)
        .ok()
        .filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
