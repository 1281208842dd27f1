//! Strings quoted as Go's `%q` (`strconv.Quote`) quotes them, so that messages about what a
//! user wrote read exactly as MetalLB's do, escapes included.
//!
//! Go's rules, in our words: `"` and `\` get a backslash; printable characters (letters, marks,
//! numbers, punctuation, symbols and the ASCII space) stay as they are; `\a \b \f \n \r \t \v`
//! keep their short forms; any other character below U+0020, and U+007F, is `\xHH`; any other
//! non-printable character is `\uHHHH`, or `\UHHHHHHHH` above U+FFFF.

use std::fmt;

/// Displays a string as Go's `%q` does.
#[derive(Debug, Clone, Copy)]
pub struct GoQuoted<'a>(pub &'a str);

impl fmt::Display for GoQuoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for c in self.0.chars() {
            match c {
                '"' => f.write_str("\\\"")?,
                '\\' => f.write_str("\\\\")?,
                '\u{7}' => f.write_str("\\a")?,
                '\u{8}' => f.write_str("\\b")?,
                '\u{c}' => f.write_str("\\f")?,
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\u{b}' => f.write_str("\\v")?,
                c if c < ' ' || c == '\u{7f}' => write!(f, "\\x{:02x}", c as u32)?,
                c if go_printable(c) => write!(f, "{c}")?,
                c if (c as u32) < 0x10000 => write!(f, "\\u{:04x}", c as u32)?,
                c => write!(f, "\\U{:08x}", c as u32)?,
            }
        }
        f.write_str("\"")
    }
}

/// Go's `unicode.IsPrint`, closely: graphic characters and the ASCII space, but no other
/// space, control or format character. Rust's own escaping (`escape_debug`) marks the
/// non-printable ones (controls, format characters, unassigned and private-use code points).
/// One known difference: Rust also escapes combining marks, which Go prints as they are.
fn go_printable(c: char) -> bool {
    if c == ' ' || c == '\'' {
        return true;
    }
    if c.is_whitespace() || c.is_control() {
        return false;
    }
    c.escape_debug().len() == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_go() {
        let q = |s: &str| GoQuoted(s).to_string();
        assert_eq!(q("198.18.0.0/33"), r#""198.18.0.0/33""#);
        assert_eq!(q("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(q("\0\u{1}\u{7f}"), r#""\x00\x01\x7f""#);
        assert_eq!(q("\t\n\u{b}"), r#""\t\n\v""#);
        assert_eq!(q("\u{a0}x"), r#""\u00a0x""#);
        assert_eq!(q("\u{200b}"), r#""\u200b""#);
        assert_eq!(q("é中'"), "\"é中'\"");
    }
}
