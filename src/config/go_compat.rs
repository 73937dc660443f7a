//! Go library behaviour that leaks into the dataplane's error texts.
//!
//! `stunnerd` reports validation errors built with Go's `%q` verb and `net/url` parse errors;
//! the operator copies some of them into status conditions verbatim. These helpers reproduce
//! the texts so that users and scripts see the same messages from either implementation.

use std::fmt::Write;

/// Go's `strconv.Quote`: a double-quoted string with Go escape sequences.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_printable(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// Close to Go's `strconv.IsPrint` for the characters that appear in configs.
fn is_printable(c: char) -> bool {
    !c.is_control() && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}' | '\u{ad}')
}

/// Checks `raw` the way Go's `url.Parse` does and returns Go's error text on failure.
///
/// Go accepts almost any string as a URL; this covers the failures Go reports for the inputs
/// a configuration can plausibly hold: control characters, a missing scheme before a colon,
/// a colon in the first path segment, a bad percent escape and a non-numeric port.
pub(crate) fn check_url(raw: &str) -> Result<(), String> {
    url_problem(raw).map_err(|msg| format!("parse {}: {msg}", quote(raw)))
}

fn url_problem(raw: &str) -> Result<(), String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let (without_fragment, fragment) = match raw.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (raw, None),
    };
    if let Some(f) = fragment {
        check_escapes(f)?;
    }
    let (scheme, rest) = split_scheme(without_fragment)?;
    let rest = rest.split_once('?').map_or(rest, |(p, _)| p);
    if !rest.starts_with('/') {
        if scheme.is_some() {
            return Ok(()); // opaque URL such as "mailto:x"
        }
        if rest.split('/').next().unwrap_or("").contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    let has_authority = rest.starts_with("//") && (scheme.is_some() || !rest.starts_with("///"));
    let path = if has_authority {
        let after = &rest[2..];
        let (authority, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
        check_authority(authority)?;
        path
    } else {
        rest
    };
    check_escapes(path)
}

fn split_scheme(raw: &str) -> Result<(Option<&str>, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((Some(&raw[..i]), &raw[i + 1..])),
            _ => return Ok((None, raw)),
        }
    }
    Ok((None, raw))
}

fn check_authority(authority: &str) -> Result<(), String> {
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port = if host.starts_with('[') {
        match host.find(']') {
            Some(i) => &host[i + 1..],
            None => return Err("missing ']' in host".into()),
        }
    } else {
        host.rfind(':').map_or("", |i| &host[i..])
    };
    if !port.is_empty() && (!port.starts_with(':') || !port[1..].bytes().all(|b| b.is_ascii_digit())) {
        return Err(format!("invalid port {} after host", quote(port)));
    }
    check_escapes(host)
}

fn check_escapes(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok = i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
            if !ok {
                let end = (i + 3).min(b.len());
                return Err(format!("invalid URL escape {}", quote(&s[i..end])));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_matches_go() {
        assert_eq!(quote("abc"), r#""abc""#);
        assert_eq!(quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("é"), "\"é\"");
    }

    #[test]
    fn url_accepts_what_go_accepts() {
        for ok in ["", "http://:8086", "http://:8080/metrics", "http://[::1]:80/x", "foo", "/path", "mailto:x"] {
            assert_eq!(check_url(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn url_rejects_with_go_text() {
        assert_eq!(check_url(":8080").unwrap_err(), r#"parse ":8080": missing protocol scheme"#);
        assert_eq!(
            check_url("http://h:port").unwrap_err(),
            r#"parse "http://h:port": invalid port ":port" after host"#
        );
        assert_eq!(check_url("http://h/%zz").unwrap_err(), r#"parse "http://h/%zz": invalid URL escape "%zz""#);
        assert_eq!(check_url("a\u{1}").unwrap_err(), r#"parse "a\x01": net/url: invalid control character in URL"#);
        assert_eq!(
            check_url("1.2.3.4:80").unwrap_err(),
            r#"parse "1.2.3.4:80": first path segment in URL cannot contain colon"#
        );
    }
}
