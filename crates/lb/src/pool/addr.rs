//! Address families and the integer view of addresses the range walks use.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of `ip`, reading an IPv4-mapped IPv6 address as IPv4 as Go does.
    pub fn of(ip: IpAddr) -> Self {
        match canonical(ip) {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }

    /// The other family.
    pub fn other(self) -> Self {
        match self {
            Self::V4 => Self::V6,
            Self::V6 => Self::V4,
        }
    }

    pub(crate) fn bits(self) -> u32 {
        match self {
            Self::V4 => 32,
            Self::V6 => 128,
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Self::V4 => 0,
            Self::V6 => 1,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::V4 => "IPv4",
            Self::V6 => "IPv6",
        })
    }
}

/// `ip` with an IPv4-mapped IPv6 address turned into IPv4: Go's `net.IP` makes no difference
/// between the two, so neither may we (`::ffff:198.18.0.1` is `198.18.0.1`).
pub fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

pub(crate) fn to_u128(ip: IpAddr) -> u128 {
    match canonical(ip) {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// Truncates to 32 bits for IPv4: callers stay inside a family's range.
pub(crate) fn from_u128(family: Family, n: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(n as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(n)),
    }
}
