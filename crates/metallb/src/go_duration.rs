//! Go's `time.ParseDuration`, exactly: an optional sign, then one or more decimal numbers
//! (fraction allowed) each with a unit of `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`;
//! `0` alone needs no unit. MetalLB's memberlist file uses it for every duration.

/// Parses a Go duration into nanoseconds.
pub(crate) fn parse(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {orig:?}");
    let mut s = orig;
    let mut neg = false;
    if let Some(c) = s.chars().next()
        && (c == '-' || c == '+')
    {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    const LIMIT: u64 = 1 << 63;
    let mut d: u64 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // Leading integer; overflow is an error.
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut v: u64 = 0;
        for c in s[..digits].bytes() {
            if v > LIMIT / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(c - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        // Fraction: digits beyond what fits are consumed and ignored.
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            let n = s.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for c in s[..n].bytes() {
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(c - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = n > 0;
            s = &s[n..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(s.len(), |(i, _)| i);
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {orig:?}"));
        }
        let unit_text = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match unit_text {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {unit_text:?} in duration {orig:?}"
                ));
            }
        };
        if v > LIMIT / unit {
            return Err(invalid());
        }
        v *= unit;
        if f > 0 {
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err(invalid());
            }
        }
        d += v;
        if d > LIMIT {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((d as i128).wrapping_neg() as i64);
    }
    if d > LIMIT - 1 {
        return Err(invalid());
    }
    Ok(d as i64)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn go_examples() {
        for (s, ns) in [
            ("0", 0i64),
            ("5s", 5_000_000_000),
            ("200ms", 200_000_000),
            ("1h2m3.5s", 3_723_500_000_000),
            ("1.5h", 5_400_000_000_000),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("-1.5s", -1_500_000_000),
            ("+3us", 3_000),
            ("3µs", 3_000),
            ("3μs", 3_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ] {
            assert_eq!(parse(s), Ok(ns), "{s}");
        }
        for bad in [
            "",
            "-",
            "s",
            "1",
            "1.",
            ".",
            "1d",
            "1 s",
            "9223372036854775808ns",
            "1e3s",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse("").unwrap_err(), r#"time: invalid duration """#);
        assert_eq!(
            parse("10").unwrap_err(),
            r#"time: missing unit in duration "10""#
        );
        assert_eq!(
            parse("3d").unwrap_err(),
            r#"time: unknown unit "d" in duration "3d""#
        );
    }
}
