//! URL query strings read as Go's `net/url.ParseQuery` reads them, the one decoder of every
//! port (the CDS API, the credential API, the console): upstream's servers take their
//! parameters from `r.URL.Query()`, so a query means here what it means to them.
//!
//! Go's rules, where the WHATWG form decoding (`form_urlencoded`) differs: pairs are split on
//! `&` only and a pair holding a `;` is dropped (Go 1.17 on); a malformed percent escape (`%zz`,
//! a `%` with fewer than two hex digits after it, `%+A`) drops its pair instead of being kept as
//! text. An empty pair is skipped, a pair without `=` is a key with an empty value, `+` is a
//! space. The pairs that decode are kept either way, and the error says what was dropped: the
//! first bad escape, unless a `;` came anywhere (Go overwrites any earlier error with that
//! one). Go 1.24's cap of 10,000 pairs is not applied: upstream's binaries predate it, and the
//! ports bound the request line anyway.

use crate::config::go_compat;

/// A decoded query: its pairs in order, and why any were dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub pairs: Vec<(String, String)>,
    /// What Go's `ParseQuery` returns as its error; upstream's `r.URL.Query()` discards it.
    pub error: Option<QueryError>,
}

/// Why a pair was dropped, with Go's texts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("invalid semicolon separator in query")]
    Semicolon,
    /// The escape as Go quotes it: the `%` and at most the two bytes after it.
    #[error("invalid URL escape {}", go_compat::quote(.0))]
    Escape(String),
}

impl Query {
    /// Decodes `raw`, the part of a URL after its `?`.
    pub fn parse(raw: &str) -> Query {
        let mut query = Query::default();
        for pair in raw.split('&') {
            if pair.contains(';') {
                query.error = Some(QueryError::Semicolon);
                continue;
            }
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match unescape(key).and_then(|key| Ok((key, unescape(value)?))) {
                Ok(decoded) => query.pairs.push(decoded),
                Err(e) => {
                    query.error.get_or_insert(e);
                }
            }
        }
        query
    }

    /// The values of `key`, in order.
    pub fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> {
        self.pairs.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The first value of `key` (Go's `Values.Get`, but `None` where Go says "").
    pub fn first(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// Go's `url.QueryUnescape`. Bytes that are not UTF-8 once decoded become U+FFFD (Go keeps
/// them, and writes them as U+FFFD in JSON).
fn unescape(s: &str) -> Result<String, QueryError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'%' => {
                let hex = |at: usize| bytes.get(at).and_then(|&h| char::from(h).to_digit(16));
                let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) else {
                    let bad = &bytes[i..bytes.len().min(i + 3)];
                    return Err(QueryError::Escape(String::from_utf8_lossy(bad).into_owned()));
                };
                // Two hex digits: at most 0xff.
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query, the pairs Go decodes from it, and Go's error.
    type Row<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<QueryError>);

    /// Each row as Go 1.26's `url.ParseQuery` answers it (checked with a Go program); the
    /// comment says what `form_urlencoded::parse` makes of the same bytes where it differs.
    #[test]
    fn queries_decode_as_gos_parse_query() {
        let semicolon = Some(QueryError::Semicolon);
        let escape = |e: &str| Some(QueryError::Escape(e.into()));
        let rows: [Row<'_>; 19] = [
            // form_urlencoded: ("a", "1;b=2").
            ("a=1;b=2", &[], semicolon.clone()),
            // form_urlencoded: ("a", "%zz").
            ("a=%zz", &[], escape("%zz")),
            // form_urlencoded: ("a", "% A"), the `+` a space; a `+` sign read as part of the
            // hex number made it "\n".
            ("a=%+A", &[], escape("%+A")),
            // form_urlencoded: ("a", "%2") and ("a", "%").
            ("a=%2", &[], escape("%2")),
            ("a=%", &[], escape("%")),
            // form_urlencoded: ("%zz", "1") kept too.
            ("%zz=1&b=2", &[("b", "2")], escape("%zz")),
            // A `;` overwrites an earlier error, an escape never replaces one.
            ("a=%zz&b;c", &[], semicolon.clone()),
            ("b;c&a=%zz", &[], semicolon.clone()),
            ("a=%zz&b=%yy", &[], escape("%zz")),
            // Where the two agree.
            ("a=x+y%21", &[("a", "x y!")], None),
            ("a=%C3%A9", &[("a", "é")], None),
            ("a&&b=", &[("a", ""), ("b", "")], None),
            ("=x", &[("", "x")], None),
            ("a=b=c", &[("a", "b=c")], None),
            ("a=%3B", &[("a", ";")], None),
            ("a=1&a=2", &[("a", "1"), ("a", "2")], None),
            ("%41=%42", &[("A", "B")], None),
            ("a+b=1", &[("a b", "1")], None),
            ("", &[], None),
        ];
        for (raw, pairs, error) in rows {
            let want = Query { pairs: pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect(), error };
            assert_eq!(Query::parse(raw), want, "{raw}");
        }
        assert_eq!(QueryError::Escape("%+A".into()).to_string(), r#"invalid URL escape "%+A""#);
        assert_eq!(QueryError::Semicolon.to_string(), "invalid semicolon separator in query");
        // Not UTF-8 once decoded: Go keeps the byte, JSON shows U+FFFD.
        assert_eq!(Query::parse("a=%e9").first("a"), Some("\u{fffd}"));
    }

    #[test]
    fn values_in_order() {
        let q = Query::parse("a=1&b=2&a=3");
        assert_eq!(q.values("a").collect::<Vec<_>>(), ["1", "3"]);
        assert_eq!((q.first("b"), q.first("c")), (Some("2"), None));
    }
}
