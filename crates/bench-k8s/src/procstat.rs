//! A process's CPU time and memory from `/proc/<pid>` (the speakers' cost).

use std::time::Duration;

/// Linux reports `utime`/`stime` in USER_HZ, which is 100 on every architecture Linux
/// exports to user space (the kernel converts from its own HZ).
const USER_HZ: u64 = 100;

/// One reading of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reading {
    /// User plus system CPU time so far.
    pub(crate) cpu: Duration,
    /// Resident set size now, KiB.
    pub(crate) rss_kib: u64,
    /// Peak resident set size, KiB.
    pub(crate) hwm_kib: u64,
}

/// `utime + stime` from the text of `/proc/<pid>/stat` (fields 14 and 15, counted after the
/// command name, which may itself hold spaces and parentheses).
fn cpu_of_stat(stat: &str) -> Option<Duration> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state), so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 1000 / USER_HZ))
}

/// A `Vm...:   N kB` line's value from `/proc/<pid>/status`.
fn kib_of_status(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Reads process `pid`, or `None` when it is gone.
pub(crate) fn read(pid: i32) -> Option<Reading> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some(Reading {
        cpu: cpu_of_stat(&stat)?,
        rss_kib: kib_of_status(&status, "VmRSS:")?,
        hwm_kib: kib_of_status(&status, "VmHWM:")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_and_status() {
        let stat = "4242 (metallb (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 \
                    12 0 100 1000000 2000 18446744073709551615";
        assert_eq!(cpu_of_stat(stat), Some(Duration::from_secs(3)));
        let status = "Name:\tspeaker\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(kib_of_status(status, "VmRSS:"), Some(40960));
        assert_eq!(kib_of_status(status, "VmHWM:"), Some(51200));
        assert_eq!(kib_of_status(status, "VmSwap:"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = read(i32::try_from(std::process::id()).expect("pid")).expect("/proc/self");
        assert!(me.rss_kib > 0 && me.hwm_kib >= me.rss_kib);
    }
}
