//! `process_*`: the process families MetalLB's programs export (Prometheus Go client's
//! process collector, on Linux), with its names, types and help texts, read from `/proc`.
//!
//! A file that cannot be read leaves its families out of the scrape (the Go collector reports
//! an error for them instead). CPU time is in the kernel's `USER_HZ` ticks (100 a second on
//! Linux), and resident pages are 4 KiB, as the Go collector assumes.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use std::path::{Path, PathBuf};

/// Clock ticks a second in `/proc/<pid>/stat` (`USER_HZ`).
const USER_HZ: f64 = 100.0;
/// The page size `/proc/<pid>/stat`'s resident pages are counted in.
const PAGE_SIZE: f64 = 4096.0;

/// The process figures of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessMetrics {
    /// From `/proc/<pid>/stat` (and `/proc/stat`'s boot time).
    pub stat: Option<Stat>,
    /// Open file descriptors (`/proc/<pid>/fd`).
    pub open_fds: Option<u64>,
    /// Soft limits (`/proc/<pid>/limits`): open files, address space (`None`: unlimited).
    pub limits: Option<(Option<u64>, Option<u64>)>,
    /// IP bytes received and sent in the process's network namespace
    /// (`/proc/<pid>/net/netstat`, `IpExt`).
    pub network: Option<(u64, u64)>,
}

/// What `/proc/<pid>/stat` gives.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stat {
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
    /// Virtual memory, bytes.
    pub virtual_bytes: u64,
    /// Resident memory, bytes.
    pub resident_bytes: u64,
    /// Start time, seconds since the Unix epoch (`None` without `/proc/stat`'s `btime`).
    pub start_time: Option<f64>,
}

impl ProcessMetrics {
    /// This process's figures now.
    pub fn read() -> Self {
        Self::read_from(Path::new("/proc"), "self")
    }

    /// The figures of process `pid` under a proc file system mounted at `proc`.
    pub fn read_from(proc: &Path, pid: &str) -> Self {
        let dir: PathBuf = proc.join(pid);
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let boot_time = std::fs::read_to_string(proc.join("stat"))
            .ok()
            .and_then(|s| parse_boot_time(&s));
        Self {
            stat: read("stat").and_then(|s| parse_stat(&s, boot_time)),
            open_fds: std::fs::read_dir(dir.join("fd"))
                .ok()
                .map(|d| d.count() as u64),
            limits: read("limits").and_then(|s| parse_limits(&s)),
            network: read("net/netstat").and_then(|s| parse_netstat(&s)),
        }
    }
}

/// `btime` of `/proc/stat`.
fn parse_boot_time(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Fields of `/proc/<pid>/stat` after the command name (which may hold spaces and
/// parentheses: the last `)` ends it).
fn parse_stat(text: &str, boot_time: Option<f64>) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts at field 3 (state); utime is field 14, so index 11 here.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    let (utime, stime) = (num(11)?, num(12)?);
    let start_ticks = num(19)?;
    Some(Stat {
        cpu_seconds: (utime + stime) as f64 / USER_HZ,
        virtual_bytes: num(20)?,
        resident_bytes: (num(21)? as f64 * PAGE_SIZE) as u64,
        start_time: boot_time.map(|b| b + start_ticks as f64 / USER_HZ),
    })
}

/// The soft limits on open files and address space (`None` inside: unlimited).
fn parse_limits(text: &str) -> Option<(Option<u64>, Option<u64>)> {
    let soft = |name: &str| -> Option<Option<u64>> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let value = line[name.len()..].split_whitespace().next()?;
        Some(value.parse().ok())
    };
    Some((soft("Max open files")?, soft("Max address space")?))
}

/// `IpExt`'s `InOctets` and `OutOctets`.
fn parse_netstat(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines().filter(|l| l.starts_with("IpExt:"));
    let names: Vec<&str> = lines.next()?.split_whitespace().collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().collect();
    let get = |name: &str| {
        let i = names.iter().position(|n| *n == name)?;
        values.get(i)?.parse().ok()
    };
    Some((get("InOctets")?, get("OutOctets")?))
}

/// Go's collector writes an unlimited limit as the largest 64-bit value.
fn limit(value: Option<u64>) -> f64 {
    value.map_or(u64::MAX as f64, |v| v as f64)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(enc.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// `name` without `_total`.
fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(enc.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for ProcessMetrics {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        if let Some(s) = &self.stat {
            counter(
                &mut enc,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                s.cpu_seconds,
            )?;
        }
        if let Some(n) = self.open_fds {
            gauge(
                &mut enc,
                "process_open_fds",
                "Number of open file descriptors.",
                n as f64,
            )?;
        }
        if let Some((files, address_space)) = self.limits {
            gauge(
                &mut enc,
                "process_max_fds",
                "Maximum number of open file descriptors.",
                limit(files),
            )?;
            gauge(
                &mut enc,
                "process_virtual_memory_max_bytes",
                "Maximum amount of virtual memory available in bytes.",
                limit(address_space),
            )?;
        }
        if let Some(s) = &self.stat {
            gauge(
                &mut enc,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                s.virtual_bytes as f64,
            )?;
            gauge(
                &mut enc,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                s.resident_bytes as f64,
            )?;
            if let Some(t) = s.start_time {
                gauge(
                    &mut enc,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    t,
                )?;
            }
        }
        if let Some((received, sent)) = self.network {
            counter(
                &mut enc,
                "process_network_receive_bytes",
                "Number of bytes received by the process over the network.",
                received as f64,
            )?;
            counter(
                &mut enc,
                "process_network_transmit_bytes",
                "Number of bytes sent by the process over the network.",
                sent as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read() {
        let stat = "4242 (vigil (x) y) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0 8 0 1000 123456789 1000 18446744073709551615";
        let s = parse_stat(stat, Some(1_700_000_000.0)).unwrap();
        assert_eq!(s.cpu_seconds, 2.0);
        assert_eq!(s.virtual_bytes, 123_456_789);
        assert_eq!(s.resident_bytes, 1000 * 4096);
        assert_eq!(s.start_time, Some(1_700_000_010.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\nMax address space         unlimited            unlimited            bytes\n";
        assert_eq!(parse_limits(limits), Some((Some(1_048_576), None)));
        let netstat =
            "TcpExt: A B\nTcpExt: 1 2\nIpExt: InNoRoutes InOctets OutOctets\nIpExt: 0 1234 5678\n";
        assert_eq!(parse_netstat(netstat), Some((1234, 5678)));
        assert_eq!(parse_boot_time("cpu 1 2\nbtime 1700000000\n"), Some(1.7e9));
    }

    #[test]
    fn this_process_has_every_family() {
        let m = ProcessMetrics::read();
        let text = crate::metrics::Scrape::new().with(m).render();
        for family in [
            "process_cpu_seconds_total counter",
            "process_open_fds gauge",
            "process_max_fds gauge",
            "process_virtual_memory_bytes gauge",
            "process_virtual_memory_max_bytes gauge",
            "process_resident_memory_bytes gauge",
            "process_start_time_seconds gauge",
            "process_network_receive_bytes_total counter",
            "process_network_transmit_bytes_total counter",
        ] {
            assert!(
                text.contains(&format!("# TYPE {family}\n")),
                "{family}:\n{text}"
            );
        }
    }
}
