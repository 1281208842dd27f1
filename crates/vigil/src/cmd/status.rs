//! `vigil status`: asks the local daemon (its `/status` endpoint) for the members and their
//! state, and which node owns each VIP; `vigil status <ip>`: for one VIP, who owns it, why,
//! who is next, since when, and what moved it last (with the stages of that change as this
//! node saw them).

use super::standalone::config::{Config, DEFAULT_HTTP_LISTEN};
use super::standalone::host_name;
use super::standalone::state::Status;
use clap::Parser;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use vigil_observe::client::{self, Transport};

/// Print the cluster's members and which node owns each VIP, as the local daemon sees them;
/// with an IP, who owns that VIP, why, who is next, since when and what moved it last.
#[derive(Debug, Parser)]
pub struct Args {
    /// One VIP to explain.
    pub ip: Option<IpAddr>,

    /// The daemon's HTTP address (default: `http.listen` from --config, else 127.0.0.1:7472).
    #[arg(long)]
    pub addr: Option<SocketAddr>,

    /// The daemon's configuration file, to find its HTTP address.
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,

    /// Print the raw JSON document.
    #[arg(long)]
    pub json: bool,

    /// Ask over HTTPS: the Kubernetes speaker serves `/status` on its metrics port (9120)
    /// behind TokenReview and SubjectAccessReview, as MetalLB serves `/metrics`. The
    /// certificate is not checked (it is self-signed unless one was given); the token is what
    /// the speaker reviews.
    #[arg(long)]
    pub https: bool,

    /// A file holding the bearer token to present (e.g. a ServiceAccount token allowed `get`
    /// on the non-resource URL `/status`).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
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
    let token = match &args.token_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) if !t.trim().is_empty() => Some(t.trim().to_string()),
            Ok(_) => {
                eprintln!("vigil status: --token-file {}: empty", path.display());
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("vigil status: --token-file {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    let transport = if args.https {
        Transport::Tls
    } else {
        Transport::Plain
    };
    let limit = Duration::from_secs(5);
    let body = match fetch(addr, "/status", token.as_deref(), transport, limit) {
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
        Ok(status) => match args.ip {
            None => {
                print!("{}", render(&status));
                ExitCode::SUCCESS
            }
            Some(ip) => match explain(&status, ip) {
                Some(text) => {
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                None => {
                    eprintln!("vigil status: {ip} is not a VIP node {} knows", status.node);
                    ExitCode::FAILURE
                }
            },
        },
        Err(e) => {
            eprintln!("vigil status: unexpected answer from {addr}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A plain HTTP GET bounded by `limit` (connect, each read and write); the body of a 200
/// answer, at most 16 MiB. `vigil lab` uses it too, from a thread inside a host's namespace.
pub(crate) fn http_get(addr: SocketAddr, path: &str, limit: Duration) -> Result<String, String> {
    fetch(addr, path, None, Transport::Plain, limit)
}

/// A GET through vigil's one client of its endpoints; the body of a 200 answer, else the
/// status and body as the error.
fn fetch(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    transport: Transport,
    limit: Duration,
) -> Result<String, String> {
    let answer = client::get(addr, path, token, transport, limit).map_err(|e| e.to_string())?;
    if answer.status != 200 {
        return Err(format!("HTTP {}: {}", answer.status, answer.body.trim()));
    }
    Ok(answer.body)
}

/// The status as two tables: members, then VIPs ([`Status::render`]).
pub fn render(s: &Status) -> String {
    s.render()
}

/// One VIP explained: its owner and why, the next candidate, since when, and the last change
/// of its owner as the daemon saw it. `None` when the daemon knows no such VIP.
pub fn explain(s: &Status, ip: IpAddr) -> Option<String> {
    let want = ip.to_string();
    let vips: Vec<_> = s.vips.iter().filter(|v| v.vip == want).collect();
    let change = s.changes.iter().find(|c| c.vip == want);
    if vips.is_empty() && change.is_none() {
        return None;
    }
    let mut out = String::new();
    let mut line = |key: &str, value: String| out.push_str(&format!("{key:<11}{value}\n"));
    let services: Vec<&str> = vips
        .iter()
        .flat_map(|v| v.services.iter().map(String::as_str))
        .collect();
    line(
        "vip:",
        format!(
            "{ip} (services: {}; as node {} sees it)",
            services.join(","),
            s.node
        ),
    );
    // Per-service elections may give a shared IP one owner per service.
    for v in &vips {
        let prefix = if vips.len() > 1 {
            format!("[{}] ", v.services.join(","))
        } else {
            String::new()
        };
        let here = if v.announced_here {
            ", answering from here"
        } else {
            ""
        };
        match &v.owner {
            Some(owner) if s.quorum.live >= s.quorum.needed => {
                line("owner:", format!("{prefix}{owner}{here}"));
                line(
                    "why:",
                    format!(
                        "{prefix}first of {} live candidate(s): {}",
                        v.candidates.len(),
                        v.candidates.join(", ")
                    ),
                );
            }
            Some(_) => {
                line("owner:", format!("{prefix}none"));
                line(
                    "why:",
                    format!(
                        "{prefix}split-brain guard: {} live member(s) seen, {} needed",
                        s.quorum.live, s.quorum.needed
                    ),
                );
            }
            None => {
                line("owner:", format!("{prefix}none"));
                line("why:", format!("{prefix}no live candidate admits it"));
            }
        }
        line(
            "next:",
            format!(
                "{prefix}{}",
                v.candidates.get(1).map_or("none", String::as_str)
            ),
        );
    }
    match change {
        None => line(
            "since:",
            "before this node's first election (no change seen)".into(),
        ),
        Some(c) => {
            let ago = format!("{:.1} s ago", c.age_ms / 1e3);
            let since = c
                .since
                .as_ref()
                .map_or(ago.clone(), |t| format!("{t} ({ago})"));
            line("since:", since);
            line("last move:", c.description.clone());
            line(
                "previous:",
                c.previous.clone().unwrap_or_else(|| "none".into()),
            );
            let member = c
                .member
                .as_ref()
                .map_or(String::new(), |m| format!(" ({m})"));
            line("cause:", format!("{}{member}", c.cause));
            let stages: Vec<String> = c
                .stages
                .iter()
                .map(|st| format!("{} +{:.1} ms", st.stage, st.after_ms))
                .collect();
            line("stages:", stages.join(", "));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_speaker::core::{Cause, Stage, StatusChange, StatusStage, StatusVip};

    #[test]
    fn one_vip_is_explained_with_owner_reason_next_and_last_move() {
        let status = Status {
            node: "node-c".into(),
            vips: vec![StatusVip {
                vip: "198.18.0.100".into(),
                services: vec!["web".into()],
                owner: Some("node-b".into()),
                announced_here: false,
                candidates: vec!["node-b".into(), "node-c".into()],
            }],
            changes: vec![StatusChange {
                vip: "198.18.0.100".into(),
                services: vec!["web".into()],
                owner: Some("node-b".into()),
                previous: Some("node-a".into()),
                next: Some("node-c".into()),
                cause: Cause::MemberDead,
                member: Some("node-a".into()),
                description: "node-b took over from node-a: node-a was declared dead".into(),
                age_ms: 1500.0,
                since: Some("2026-12-06T03:20:01.123Z".into()),
                stages: vec![
                    StatusStage {
                        stage: Stage::Suspect,
                        after_ms: 0.0,
                    },
                    StatusStage {
                        stage: Stage::Dead,
                        after_ms: 150.5,
                    },
                ],
            }],
            ..Status::default()
        };
        let text = explain(&status, "198.18.0.100".parse().unwrap()).unwrap();
        for want in [
            "vip:       198.18.0.100 (services: web; as node node-c sees it)\n",
            "owner:     node-b\n",
            "why:       first of 2 live candidate(s): node-b, node-c\n",
            "next:      node-c\n",
            "since:     2026-12-06T03:20:01.123Z (1.5 s ago)\n",
            "last move: node-b took over from node-a: node-a was declared dead\n",
            "previous:  node-a\n",
            "cause:     member_dead (node-a)\n",
            "stages:    suspect +0.0 ms, dead +150.5 ms\n",
        ] {
            assert!(text.contains(want), "{want:?} missing:\n{text}");
        }
        assert_eq!(explain(&status, "198.18.0.1".parse().unwrap()), None);
    }
}
