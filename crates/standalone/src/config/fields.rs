//! Parsers and checks of single fields (names, addresses, durations, URLs), each giving a
//! [`ConfigError`] that names the field.

use super::{ConfigError, DEFAULT_GOSSIP_PORT, Probe, bad};
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Linux's rule for a device name (`dev_valid_name`): 1 to 15 bytes, not `.` or `..`, no
/// `/`, `:` or whitespace.
pub(super) fn check_device_name(field: &str, name: &str) -> Result<(), ConfigError> {
    let plausible = !name.is_empty()
        && name.len() < 16
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if plausible {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{name:?} is not a device name (1 to 15 bytes, no '/', ':' or spaces)"),
        ))
    }
}

pub(super) fn parse_http_url(field: &str, url: &str) -> Result<Probe, ConfigError> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        bad(
            field,
            format!("{url:?} is not an http:// URL (https is not supported)"),
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    // Without a port, HTTP's 80.
    let authority = if authority.parse::<SocketAddr>().is_ok()
        || (!authority.ends_with(']') && authority.matches(':').count() == 1)
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    check_authority(field, &authority)?;
    if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad(
            field,
            format!("path {path:?} has spaces or control characters"),
        ));
    }
    Ok(Probe::Http {
        authority,
        path: path.to_string(),
    })
}

/// `host:port` where the port is a number; the host is resolved when the check runs.
pub(super) fn check_authority(field: &str, s: &str) -> Result<(), ConfigError> {
    let ok = s.rsplit_once(':').is_some_and(|(host, port)| {
        !host.is_empty() && !host.chars().any(char::is_whitespace) && port.parse::<u16>().is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(bad(field, format!("{s:?} is not host:port")))
    }
}

pub(super) fn check_seed(field: &str, s: &str) -> Result<(), ConfigError> {
    let ok = !s.is_empty()
        && !s.chars().any(char::is_whitespace)
        && (s.parse::<SocketAddr>().is_ok()
            || s.parse::<IpAddr>().is_ok()
            || match s.split_once(':') {
                None => true,
                Some((host, port)) => {
                    !host.is_empty() && !port.contains(':') && port.parse::<u16>().is_ok()
                }
            });
    if ok {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{s:?} is not host[:port] (IPv6 with a port: [addr]:port)"),
        ))
    }
}

pub(super) fn socket_addr(field: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.trim_matches(|c| c == '[' || c == ']').parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, DEFAULT_GOSSIP_PORT));
    }
    Err(bad(
        field,
        format!("{s:?} is not an IP address with an optional port"),
    ))
}

/// A duration as humantime writes them (`250ms`, `1.5s`, `10m`, `1h 30m`).
fn duration(field: &str, s: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        bad(
            field,
            format!("{s:?} is not a duration ({e}; try 250ms, 1.5s, 10m)"),
        )
    })
}

/// The longest `announce.refresh`: a refresh rarer than this refreshes nothing a switch or
/// neighbour cache would still hold.
const MAX_REFRESH: Duration = Duration::from_secs(3600);

pub(super) fn refresh_interval(field: &str, s: &str) -> Result<Duration, ConfigError> {
    let d = positive_duration(field, s)?;
    if d > MAX_REFRESH {
        return Err(bad(
            field,
            format!(
                "{s:?} is longer than {}",
                humantime::format_duration(MAX_REFRESH)
            ),
        ));
    }
    Ok(d)
}

pub(super) fn positive_duration(field: &str, s: &str) -> Result<Duration, ConfigError> {
    let d = duration(field, s)?;
    if d.is_zero() {
        return Err(bad(field, "must be longer than zero"));
    }
    Ok(d)
}

/// Names go into metric labels, logs and gossip metadata: keep them printable and simple.
pub(super) fn check_name(field: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(bad(field, "is empty"));
    }
    if name.len() > 253 {
        return Err(bad(field, format!("{} bytes; at most 253", name.len())));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
    {
        return Err(bad(
            field,
            format!("{name:?} has {c:?}; use letters, digits, '-', '_', '.', '/'"),
        ));
    }
    Ok(())
}

pub(super) fn check_label(field: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    check_name(field, key)?;
    if value.chars().any(|c| c.is_control()) {
        return Err(bad(
            field,
            format!("value {value:?} has control characters"),
        ));
    }
    Ok(())
}

pub(super) fn names_set(field: &str, names: Vec<String>) -> Result<BTreeSet<String>, ConfigError> {
    let mut set = BTreeSet::new();
    for (i, n) in names.into_iter().enumerate() {
        let f = format!("{field}[{i}]");
        if n.trim().is_empty() || n.chars().any(char::is_whitespace) {
            return Err(bad(f, format!("{n:?} is not a name")));
        }
        if !set.insert(n.clone()) {
            return Err(bad(f, format!("{n:?} is listed twice")));
        }
    }
    Ok(set)
}

/// A set of names that, when given, must name something: an empty list would leave the
/// service with nowhere to go, so it is refused with `empty_means` saying why.
pub(super) fn non_empty_names_set(
    field: &str,
    names: Vec<String>,
    empty_means: &str,
) -> Result<BTreeSet<String>, ConfigError> {
    let set = names_set(field, names)?;
    if set.is_empty() {
        return Err(bad(field, format!("is empty: {empty_means}")));
    }
    Ok(set)
}

pub(super) fn is_broadcast(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V4(v4) if v4.is_broadcast())
}
