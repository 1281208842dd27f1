//! Pool addresses parsed as MetalLB parses them (`internal/config/config.go:ParseCIDR`, with
//! Go's `net.ParseCIDR` / `net.ParseIP` rules), so that vigil accepts and rejects exactly the
//! pools MetalLB does and finds the same pool for a Service's IPs.
//!
//! - `a.b.c.d/n` or `v6/n`: host bits are allowed and masked off; the prefix length is decimal
//!   digits only (leading zeros allowed: `/00024` is `/24`), at most the family's bit length.
//! - `start-end`: split at the first `-`, each side trimmed of spaces; both the same family
//!   (an IPv4-mapped IPv6 address counts as IPv4, as Go's `To4` says); start not after end.
//!   The range is summarised into the fewest CIDRs, as MetalLB does, because overlap errors
//!   name those CIDRs.
//! - An IPv4-mapped IPv6 prefix of length 96 or more means the IPv4 prefix it embeds (Go's
//!   `IPNet.Contains` and `String` treat it so).

use crate::{GoQuoted, go_ip_string};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One CIDR prefix, normalised: the network address with host bits cleared, IPv4-mapped
/// prefixes as IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn new(addr: IpAddr, prefix: u8) -> Self {
        let (addr, prefix) = match addr {
            IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => (
                IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)),
                prefix - 96,
            ),
            other => (other, prefix),
        };
        let network = match addr {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix))),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix))),
        };
        Self { network, prefix }
    }

    /// The last address inside.
    pub fn last(&self) -> IpAddr {
        match self.network {
            IpAddr::V4(n) => IpAddr::V4(Ipv4Addr::from(u32::from(n) | !mask32(self.prefix))),
            IpAddr::V6(n) => IpAddr::V6(Ipv6Addr::from(u128::from(n) | !mask128(self.prefix))),
        }
    }

    /// Whether `ip` is inside (an IPv4-mapped IPv6 `ip` counts as the IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => u32::from(a) & mask32(self.prefix) == u32::from(n),
            (IpAddr::V6(n), IpAddr::V6(a)) => u128::from(a) & mask128(self.prefix) == u128::from(n),
            _ => false,
        }
    }

    /// MetalLB's overlap test (`cidrsOverlap`): one prefix contains the other.
    pub fn overlaps(&self, other: &Self) -> bool {
        let nests = |outer: &Self, inner: &Self| {
            (outer.prefix == inner.prefix && outer.network == inner.network)
                || (outer.prefix < inner.prefix && outer.contains(inner.network))
        };
        nests(self, other) || nests(other, self)
    }
}

impl fmt::Display for Cidr {
    /// As Go's `IPNet.String()`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", go_ip_string(self.network), self.prefix)
    }
}

fn mask32(prefix: u8) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    }
}

fn mask128(prefix: u8) -> u128 {
    if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    }
}

/// Why one `addresses` entry is invalid; the text is MetalLB's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Not `addr/len`.
    #[error("invalid CIDR {}", GoQuoted(.0))]
    Cidr(String),
    /// A range whose start does not parse.
    #[error(
        "invalid IP range {}: invalid start IP {}",
        GoQuoted(range),
        GoQuoted(start)
    )]
    RangeStart {
        /// The entry.
        range: String,
        /// Its start, as written.
        start: String,
    },
    /// A range whose end does not parse.
    #[error(
        "invalid IP range {}: invalid end IP {}",
        GoQuoted(range),
        GoQuoted(end)
    )]
    RangeEnd {
        /// The entry.
        range: String,
        /// Its end, as written.
        end: String,
    },
    /// IPv4 start, IPv6 end or the other way round.
    #[error("invalid IP range {}: start and end IPs must be the same family", GoQuoted(.0))]
    RangeFamily(String),
    /// Start after end.
    #[error(
        "invalid IP range {}: start IP {} is after the end IP {}",
        GoQuoted(range),
        GoQuoted(start),
        GoQuoted(end)
    )]
    RangeOrder {
        /// The entry.
        range: String,
        /// The start, as Go prints it.
        start: String,
        /// The end, as Go prints it.
        end: String,
    },
}

/// Parses one `addresses` entry into its CIDRs.
pub fn parse_pool_entry(entry: &str) -> Result<Vec<Cidr>, AddressError> {
    if !entry.contains('-') {
        return parse_cidr(entry)
            .map(|c| vec![c])
            .ok_or_else(|| AddressError::Cidr(entry.to_string()));
    }
    let (start_text, end_text) = entry.split_once('-').unwrap_or((entry, ""));
    let start = parse_ip(start_text.trim()).ok_or_else(|| AddressError::RangeStart {
        range: entry.to_string(),
        start: start_text.to_string(),
    })?;
    let end = parse_ip(end_text.trim()).ok_or_else(|| AddressError::RangeEnd {
        range: entry.to_string(),
        end: end_text.to_string(),
    })?;
    let (start, end) = (start.to_canonical(), end.to_canonical());
    let (first, last, bits) = match (start, end) {
        (IpAddr::V4(s), IpAddr::V4(e)) => (u128::from(u32::from(s)), u128::from(u32::from(e)), 32),
        (IpAddr::V6(s), IpAddr::V6(e)) => (u128::from(s), u128::from(e), 128),
        _ => return Err(AddressError::RangeFamily(entry.to_string())),
    };
    if first > last {
        return Err(AddressError::RangeOrder {
            range: entry.to_string(),
            start: go_ip_string(start),
            end: go_ip_string(end),
        });
    }
    Ok(summarize(first, last, bits)
        .into_iter()
        .map(|(net, prefix)| {
            let addr = if bits == 32 {
                IpAddr::V4(Ipv4Addr::from(net as u32))
            } else {
                IpAddr::V6(Ipv6Addr::from(net))
            };
            Cidr::new(addr, prefix)
        })
        .collect())
}

/// The fewest aligned prefixes covering `first..=last` in a `bits`-wide space, in order.
fn summarize(mut first: u128, last: u128, bits: u32) -> Vec<(u128, u8)> {
    let mut out = Vec::new();
    loop {
        // Largest block aligned at `first`...
        let mut size_log = if first == 0 {
            bits
        } else {
            first.trailing_zeros().min(bits)
        };
        // ...that does not run past `last`.
        while size_log > 0 && last - first < block(size_log) - 1 {
            size_log -= 1;
        }
        if size_log == 128 {
            out.push((first, 0));
            return out;
        }
        out.push((first, (bits - size_log) as u8));
        let next = first + (block(size_log) - 1);
        if next >= last {
            return out;
        }
        first = next + 1;
    }
}

/// 2^log as a block size (saturating at the full 128-bit space).
fn block(log: u32) -> u128 {
    if log >= 128 { u128::MAX } else { 1u128 << log }
}

/// Go's `net.ParseCIDR`: `addr/len`, no zone; the length is decimal digits (leading zeros
/// allowed, as Go's `dtoi` reads them) within the family's bits.
fn parse_cidr(s: &str) -> Option<Cidr> {
    let (addr, len) = s.split_once('/')?;
    let addr = parse_ip(addr)?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Go gives up past 0xFFFFFF; any such length is too long for either family anyway.
    let prefix = len.bytes().try_fold(0u32, |n, b| {
        let n = n * 10 + u32::from(b - b'0');
        (n < 0x00FF_FFFF).then_some(n)
    })?;
    let bits = if addr.is_ipv4() { 32 } else { 128 };
    if prefix > bits {
        return None;
    }
    Some(Cidr::new(addr, prefix as u8))
}

/// Go's `net.ParseIP`: dotted-quad IPv4 (no leading zeros) or IPv6 (an embedded IPv4 tail
/// allowed), no zone.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(s: &str) -> Vec<String> {
        parse_pool_entry(s)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn cidrs_parse_as_go() {
        assert_eq!(cidrs("198.18.0.5/24"), ["198.18.0.0/24"]);
        assert_eq!(cidrs("2001:DB8::1/64"), ["2001:db8::/64"]);
        assert_eq!(cidrs("198.18.0.7/032"), ["198.18.0.7/32"]);
        // Go's dtoi reads any number of leading zeros.
        assert_eq!(cidrs("198.18.0.0/00024"), ["198.18.0.0/24"]);
        assert_eq!(cidrs("2001:db8::/0000000064"), ["2001:db8::/64"]);
        // An IPv4-mapped prefix shorter than /96 is an IPv6 prefix, as Go reads it.
        assert_eq!(cidrs("::ffff:198.18.1.0/24"), ["::/24"]);
        assert_eq!(cidrs("::ffff:198.18.1.0/120"), ["198.18.1.0/24"]);
        for bad in [
            "198.18.0.0/33",
            "198.18.0.0/",
            "198.18.0.0/+8",
            "198.18.0.0",
            "198.018.0.0/24",
            "fe80::1%eth0/64",
            "2001:db8::/129",
            "198.18.0.0/99999999",
        ] {
            assert_eq!(
                parse_pool_entry(bad),
                Err(AddressError::Cidr(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges_summarise_as_ipaddr_summarize() {
        assert_eq!(
            cidrs("198.18.0.1 - 198.18.0.10"),
            [
                "198.18.0.1/32",
                "198.18.0.2/31",
                "198.18.0.4/30",
                "198.18.0.8/31",
                "198.18.0.10/32"
            ]
        );
        assert_eq!(cidrs("198.18.0.0-198.18.1.255"), ["198.18.0.0/23"]);
        assert_eq!(cidrs("0.0.0.0-255.255.255.255"), ["0.0.0.0/0"]);
        assert_eq!(
            cidrs("::-ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
            ["::/0"]
        );
        assert_eq!(cidrs("2001:db8::-2001:db8::3"), ["2001:db8::/126"]);
        assert_eq!(cidrs("198.18.0.9-198.18.0.9"), ["198.18.0.9/32"]);
    }

    #[test]
    fn bad_ranges_say_why_in_metallbs_words() {
        assert_eq!(
            parse_pool_entry("198.18.0.10-198.18.0.1")
                .unwrap_err()
                .to_string(),
            r#"invalid IP range "198.18.0.10-198.18.0.1": start IP "198.18.0.10" is after the end IP "198.18.0.1""#
        );
        assert_eq!(
            parse_pool_entry("198.18.0.1-2001:db8::1")
                .unwrap_err()
                .to_string(),
            r#"invalid IP range "198.18.0.1-2001:db8::1": start and end IPs must be the same family"#
        );
        assert_eq!(
            parse_pool_entry("x-198.18.0.1").unwrap_err().to_string(),
            r#"invalid IP range "x-198.18.0.1": invalid start IP "x""#
        );
    }

    #[test]
    fn containment_and_overlap() {
        let net = parse_pool_entry("198.18.0.0/24").unwrap()[0];
        assert!(net.contains("198.18.0.9".parse().unwrap()));
        assert!(net.contains("::ffff:198.18.0.9".parse().unwrap()));
        assert!(!net.contains("198.18.1.9".parse().unwrap()));
        let inner = parse_pool_entry("198.18.0.128/25").unwrap()[0];
        let other = parse_pool_entry("198.18.1.0/24").unwrap()[0];
        assert!(net.overlaps(&inner) && inner.overlaps(&net));
        assert!(!net.overlaps(&other));
    }
}
