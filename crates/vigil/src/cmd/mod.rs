//! One module per subcommand.

pub mod agent;
pub mod controller;
pub mod health_probe;
pub mod keygen;
#[cfg(feature = "lab")]
pub mod lab;
pub mod sim;
pub mod speaker;
pub mod standalone;
pub mod status;
pub mod without_memberlist;

use core::time::Duration;
use std::future::Future;

/// The daemons' shutdown: a future that completes on the first SIGTERM or SIGINT (the handlers
/// are installed now, before the daemon starts). Signals belong to `main`; the libraries only
/// see the future.
pub fn shutdown_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Parses a duration with humantime: one word such as `250ms`, `1.5s`, `10m`, `100us`, `2h`
/// or `1m30s` (a bare number is seconds). Spaces are refused so that a value is one token on a
/// command line and in a config file.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.contains(char::is_whitespace) {
        return Err(format!(
            "{s:?}: write a duration as one word (250ms, 1.5s, 1m30s)"
        ));
    }
    let with_unit = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        format!("{s}s")
    } else {
        s.to_string()
    };
    humantime::parse_duration(&with_unit)
        .map_err(|e| format!("{s:?} is not a duration (try 250ms, 1.5s, 10m): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("3fortnights").is_err());
    }
}
