//! MetalLB's own configuration parser, v0.16.2's `internal/config.For`, behind
//! `metallb-alloc-probe` (`conformance/build.sh metallb-alloc`): for each pool set it prints
//! either the refusal or, per pool, the CIDRs MetalLB read, as Go's `IPNet.String()`.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use vigil_lb::cidr::{Cidr, parse_pool_entry};

/// The probe, or `None` (with a note) when it is not built and `VIGIL_REQUIRE_GO` is not 1.
pub(crate) fn probe() -> Option<PathBuf> {
    let dir = std::env::var_os("VIGIL_GO_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/.build/bin")
        });
    let bin = dir.join("metallb-alloc-probe");
    if bin.is_file() {
        return Some(bin);
    }
    if std::env::var("VIGIL_REQUIRE_GO").as_deref() == Ok("1") {
        panic!(
            "{} missing: run conformance/build.sh metallb-alloc",
            bin.display()
        );
    }
    eprintln!(
        "note: {} not built (conformance/build.sh metallb-alloc); skipping",
        bin.display()
    );
    None
}

/// MetalLB's reading of one pool set.
#[derive(Debug)]
pub(crate) enum Reading {
    /// `config.For` refused it, with this message.
    Refused(String),
    /// It accepted it: the CIDRs per pool, printed as Go prints them.
    Accepted(BTreeMap<String, Vec<String>>),
}

/// Runs every pool set (each in the order given: MetalLB reads pools in list order, as the
/// API server lists them) through the probe in one process.
pub(crate) fn read(bin: &PathBuf, sets: &[Vec<Value>]) -> Vec<Reading> {
    let mut input = Vec::new();
    for pools in sets {
        let line = json!({"resources": {"ipaddresspools": pools}, "ops": []});
        serde_json::to_writer(&mut input, &line).unwrap();
        input.push(b'\n');
    }
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run metallb-alloc-probe");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "metallb-alloc-probe failed");
    let readings: Vec<Reading> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_slice(l).unwrap();
            match v["config_err"].as_str() {
                Some(e) => Reading::Refused(e.to_string()),
                None => Reading::Accepted(
                    serde_json::from_value(v.get("pools").cloned().unwrap_or(json!({})))
                        .expect("pools: name -> CIDR strings"),
                ),
            }
        })
        .collect();
    assert_eq!(readings.len(), sets.len(), "one reading per pool set");
    readings
}

/// The CIDRs of one pool as vigil's parser reads them, entry by entry, printed as Go prints
/// them; `None` if an entry does not parse.
pub(crate) fn vigil_cidrs(pool: &Value) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for entry in pool["spec"]["addresses"].as_array().into_iter().flatten() {
        let cidrs = parse_pool_entry(entry.as_str()?).ok()?;
        out.extend(cidrs.iter().map(ToString::to_string));
    }
    Some(out)
}

/// Whether MetalLB's overlap check (`cidrsOverlap`) lets every CIDR of `pools` (in reading
/// order) through. It compares prefix lengths as Go stores them: an IPv4 prefix written
/// IPv4-mapped (`::ffff:198.18.1.0/120`) is kept in 16 bytes with a 120-bit mask, an IPv4
/// prefix written plainly or cut from a range in 4 bytes with a 24-bit one, so a plain prefix
/// lying strictly inside a mapped one, not at its start, is not seen as overlapping. vigil
/// reads both as the same IPv4 prefix and refuses the overlap. `None` if an entry does not
/// parse.
pub(crate) fn metallb_sees_no_overlap(pools: &[Value]) -> Option<bool> {
    let mut seen: Vec<(Cidr, u32)> = Vec::new();
    for pool in pools {
        for entry in pool["spec"]["addresses"].as_array().into_iter().flatten() {
            let entry = entry.as_str()?;
            let written_mapped = !entry.contains('-')
                && entry
                    .split_once('/')
                    .and_then(|(a, _)| a.parse::<Ipv6Addr>().ok())
                    .is_some_and(|a| a.to_ipv4_mapped().is_some());
            for cidr in parse_pool_entry(entry).ok()? {
                let bits = u32::from(cidr.prefix())
                    + if written_mapped && matches!(cidr.network(), IpAddr::V4(_)) {
                        96
                    } else {
                        0
                    };
                let contains = |outer: &(Cidr, u32), inner: &(Cidr, u32)| {
                    (outer.1 == inner.1 && outer.0.network() == inner.0.network())
                        || (outer.1 < inner.1 && outer.0.contains(inner.0.network()))
                };
                let new = (cidr, bits);
                if seen.iter().any(|m| contains(&new, m) || contains(m, &new)) {
                    return Some(false);
                }
                seen.push(new);
            }
        }
    }
    Some(true)
}
