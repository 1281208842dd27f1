//! A tiny command-line reader for the demo binaries (no argument-parsing dependency).

use std::str::FromStr;

/// Command-line flags: `--name value` pairs and bare `--switch`es, in order.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pairs: Vec<(String, Option<String>)>,
}

impl Args {
    /// Reads `args`; `switches` lists the flags that take no value.
    pub fn parse(args: impl Iterator<Item = String>, switches: &[&str]) -> Result<Self, String> {
        let mut pairs = Vec::new();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let Some(name) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument {arg:?}"));
            };
            if switches.contains(&name) {
                pairs.push((name.to_string(), None));
            } else {
                let value = args
                    .next()
                    .ok_or_else(|| format!("--{name} needs a value"))?;
                pairs.push((name.to_string(), Some(value)));
            }
        }
        Ok(Self { pairs })
    }

    /// Whether a switch is present.
    pub fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(n, _)| n == name)
    }

    /// Every value given for `name`, parsed.
    pub fn all<T: FromStr>(&self, name: &str) -> Result<Vec<T>, String> {
        self.pairs
            .iter()
            .filter(|(n, _)| n == name)
            .filter_map(|(_, v)| v.as_deref())
            .map(|v| v.parse().map_err(|_| format!("bad --{name} {v:?}")))
            .collect()
    }

    /// The last value given for `name`, parsed.
    pub fn get<T: FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        Ok(self.all(name)?.pop())
    }

    /// The last value given for `name`, parsed; an error if absent.
    pub fn required<T: FromStr>(&self, name: &str) -> Result<T, String> {
        self.get(name)?
            .ok_or_else(|| format!("--{name} is required"))
    }
}

/// An interface's index and MAC, read from sysfs.
pub fn interface(name: &str) -> Result<(u32, [u8; 6]), String> {
    let read = |file: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{name}/{file}"))
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{name}: {e}"))
    };
    let index = read("ifindex")?
        .parse()
        .map_err(|_| format!("{name}: bad ifindex"))?;
    let mac: vigil_l2::wire::ethernet::Address = read("address")?
        .parse()
        .map_err(|_| format!("{name}: bad address"))?;
    Ok((index, mac.0))
}
