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

/// The status as two tables: members, then VIPs ([`Status::render`]).
pub fn render(s: &Status) -> String {
    s.render()
}
