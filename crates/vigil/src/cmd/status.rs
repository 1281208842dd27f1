//! `vigil status`: asks the local daemon (its `/status` endpoint) for the members and their
//! state, and which node owns each VIP.

use super::standalone::config::{Config, DEFAULT_HTTP_LISTEN};
use super::standalone::host_name;
use super::standalone::state::Status;
use clap::Parser;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Print the cluster's members and which node owns each VIP, as the local daemon sees them.
#[derive(Debug, Parser)]
pub struct Args {
    /// The daemon's HTTP address (default: `http.listen` from --config, else 127.0.0.1:7472).
    #[arg(long)]
    pub addr: Option<SocketAddr>,

    /// The daemon's configuration file, to find its HTTP address.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,

    /// Print the raw JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Runs `vigil status`.
pub fn run(args: Args) -> ExitCode {
    let addr = match (args.addr, &args.config) {
        (Some(a), _) => a,
        (None, Some(path)) => match Config::read(path, host_name().as_deref()) {
            Ok(c) => match c.http_listen {
                Some(a) => a,
                None => {
                    eprintln!("vigil status: {}: http.listen is off", path.display());
                    return ExitCode::FAILURE;
                }
            },
            Err(e) => {
                eprintln!("vigil status: {e}");
                return ExitCode::FAILURE;
            }
        },
        (None, None) => DEFAULT_HTTP_LISTEN.parse().expect("a socket address"),
    };
    let body = match http_get(addr, "/status", Duration::from_secs(5)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("vigil status: cannot ask the daemon at {addr}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.json {
        print!("{body}");
        return ExitCode::SUCCESS;
    }
    match serde_json::from_str::<Status>(&body) {
        Ok(status) => {
            print!("{}", render(&status));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vigil status: unexpected answer from {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A plain HTTP/1.0 GET bounded by `limit` (connect, each read and write); the body of a 200
/// answer, at most 16 MiB. `vigil lab` uses it too, from a thread inside a host's namespace.
pub(crate) fn http_get(addr: SocketAddr, path: &str, limit: Duration) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(limit))
        .map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.take(16 * 1024 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("not an HTTP answer")?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("{status}: {}", body.trim()));
    }
    Ok(body.to_string())
}

/// The status as two tables: members, then VIPs.
pub fn render(s: &Status) -> String {
    let mut out = String::new();
    let guard = if s.quorum.needed == 0 {
        "split-brain guard off".to_string()
    } else if s.quorum.live >= s.quorum.needed {
        format!(
            "quorum ok ({} live, {} needed)",
            s.quorum.live, s.quorum.needed
        )
    } else {
        format!(
            "NO QUORUM ({} live, {} needed): announcing nothing",
            s.quorum.live, s.quorum.needed
        )
    };
    let hold = if s.holding {
        ", in fail-back hold-down"
    } else {
        ""
    };
    out.push_str(&format!("node {}: {guard}{hold}\n\n", s.node));
    let dash = |v: String| if v.is_empty() { "-".to_string() } else { v };
    let mut rows = vec![[
        "MEMBER".to_string(),
        "ADDRESS".into(),
        "STATE".into(),
        "LABELS".into(),
        "FAILING".into(),
    ]];
    for m in &s.members {
        let mut state = m.state.clone();
        if m.holding {
            state.push_str(" (holding)");
        }
        let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let failing: Vec<&str> = m.failing.iter().map(String::as_str).collect();
        rows.push([
            m.name.clone(),
            m.addr.clone(),
            state,
            dash(labels.join(",")),
            dash(failing.join(",")),
        ]);
    }
    table(&mut out, &rows);
    out.push('\n');
    let mut rows = vec![[
        "VIP".to_string(),
        "SERVICES".into(),
        "OWNER".into(),
        "HERE".into(),
        "CANDIDATES".into(),
    ]];
    for v in &s.vips {
        rows.push([
            v.vip.clone(),
            v.services.join(","),
            v.owner.clone().unwrap_or_else(|| "(none)".into()),
            if v.announced_here { "yes" } else { "no" }.into(),
            dash(v.candidates.join(",")),
        ]);
    }
    table(&mut out, &rows);
    out
}

fn table<const N: usize>(out: &mut String, rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::standalone::state::{StatusMember, StatusQuorum, StatusVip};

    #[test]
    fn status_prints_members_and_owners_in_columns() {
        let status = Status {
            node: "host-a".into(),
            members: vec![
                StatusMember {
                    name: "host-a".into(),
                    addr: "198.18.0.11:7946".into(),
                    state: "alive".into(),
                    labels: [("rack".to_string(), "r1".to_string())].into(),
                    ..StatusMember::default()
                },
                StatusMember {
                    name: "host-b".into(),
                    addr: "198.18.0.12:7946".into(),
                    state: "suspect".into(),
                    failing: ["web".to_string()].into(),
                    holding: true,
                    ..StatusMember::default()
                },
            ],
            vips: vec![StatusVip {
                vip: "198.18.0.100".into(),
                services: vec!["web".into()],
                owner: Some("host-a".into()),
                announced_here: true,
                candidates: vec!["host-a".into()],
            }],
            quorum: StatusQuorum { live: 2, needed: 2 },
            ..Status::default()
        };
        let text = render(&status);
        assert!(
            text.starts_with("node host-a: quorum ok (2 live, 2 needed)\n"),
            "{text}"
        );
        assert!(
            text.contains("host-a  198.18.0.11:7946  alive              rack=r1  -\n"),
            "{text}"
        );
        assert!(
            text.contains("host-b  198.18.0.12:7946  suspect (holding)  -        web\n"),
            "{text}"
        );
        assert!(
            text.contains("198.18.0.100  web       host-a  yes   host-a\n"),
            "{text}"
        );
    }
}
