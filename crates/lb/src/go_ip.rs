//! IP addresses printed exactly as Go's `net.IP.String()` prints them, since the election
//! hashes that text and must agree with MetalLB's Go speakers byte for byte.
//!
//! Go's rules, in our words:
//! - an IPv4 address, or an IPv6 address of the IPv4-mapped form `::ffff:a.b.c.d`, prints as
//!   a dotted quad (so `::ffff:0:0` prints `0.0.0.0`); no other IPv6 form is treated as IPv4
//!   (`::1.2.3.4` prints `::102:304`);
//! - otherwise the eight 16-bit groups print in lower-case hex without leading zeros,
//!   separated by `:`;
//! - the longest run of two or more all-zero groups is replaced by `::`; of equally long runs
//!   the first one is; a single zero group is never compressed.

use std::fmt::Write as _;
use std::net::IpAddr;

/// Formats `ip` as Go's `net.IP.String()` does.
pub fn go_ip_string(ip: IpAddr) -> String {
    let v6 = match ip {
        IpAddr::V4(v4) => return v4.to_string(),
        IpAddr::V6(v6) => v6,
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return v4.to_string();
    }
    let groups = v6.segments();
    let (run_start, run_len) = longest_zero_run(&groups);
    let mut out = String::with_capacity(39);
    let mut i = 0;
    while i < groups.len() {
        if run_len >= 2 && i == run_start {
            out.push_str("::");
            i += run_len;
            continue;
        }
        if !out.is_empty() && !out.ends_with(':') {
            out.push(':');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{:x}", groups[i]);
        i += 1;
    }
    out
}

/// The first longest run of zero groups, as (start, length); length 0 if there is none.
fn longest_zero_run(groups: &[u16; 8]) -> (usize, usize) {
    let (mut best_start, mut best_len) = (0, 0);
    let mut i = 0;
    while i < groups.len() {
        if groups[i] != 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < groups.len() && groups[i] == 0 {
            i += 1;
        }
        if i - start > best_len {
            (best_start, best_len) = (start, i - start);
        }
    }
    (best_start, best_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(s: &str) -> String {
        go_ip_string(s.parse().unwrap())
    }

    #[test]
    fn ipv4_and_mapped_print_dotted() {
        assert_eq!(go("198.18.0.100"), "198.18.0.100");
        assert_eq!(go("::ffff:198.18.0.7"), "198.18.0.7");
        assert_eq!(go("::ffff:0:0"), "0.0.0.0");
        assert_eq!(go("::1.2.3.4"), "::102:304");
    }

    #[test]
    fn zero_runs_compress_first_longest_only() {
        assert_eq!(go("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(go("2001:db8:1:0:1:0:1:0"), "2001:db8:1:0:1:0:1:0");
        assert_eq!(go("::"), "::");
        assert_eq!(go("1::"), "1::");
        assert_eq!(go("0:1::"), "0:1::");
        assert_eq!(go("FE80::0001"), "fe80::1");
    }
}
