//! JSON encoding that the Go dataplane parses safely.
//!
//! `stunnerd` feeds every watched document to a YAML parser first (stunner-config.md §1), and
//! some characters that are legal in JSON strings are line breaks or forbidden in YAML; a
//! document carrying one raw can crash the client. This encoder escapes them as `\uXXXX`.
//! It also escapes `<`, `>` and `&` the way Go's `encoding/json` does, so our bytes equal the
//! Go operator's byte for byte (port ranges such as `10.0.0.1:<5000-6000>` included).

use serde::Serialize;
use serde_json::ser::Formatter;
use std::io;

/// Encodes `value` as compact JSON with Go- and YAML-safe string escaping.
pub(crate) fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoSafeFormatter);
    value.serialize(&mut ser).expect("wire types serialize infallibly into memory");
    out
}

/// Like [`to_vec`], as a `String`.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> String {
    String::from_utf8(to_vec(value)).expect("serde_json writes UTF-8")
}

/// Like [`to_vec`], with the trailing newline Go's `json.Encoder` writes on HTTP bodies.
pub fn to_vec_line<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut out = to_vec(value);
    out.push(b'\n');
    out
}

fn needs_escape(c: char) -> bool {
    matches!(c, '<' | '>' | '&' | '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
}

/// Compact like serde_json's default formatter (the trait's defaults), plus [`needs_escape`].
struct GoSafeFormatter;

impl Formatter for GoSafeFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if needs_escape(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                write!(writer, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html_and_yaml_hostile_characters() {
        let s = "a<b>&c\u{7f}\u{85}\u{2028}\u{2029}\u{fffe}\u{ffff}é\n\"";
        let got = String::from_utf8(to_vec(&s)).unwrap();
        assert_eq!(got, r#""a\u003cb\u003e\u0026c\u007f\u0085\u2028\u2029\ufffe\uffffé\n\"""#);
        let back: String = serde_json::from_str(&got).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn port_range_endpoint_matches_go_bytes() {
        let got = to_vec(&["10.0.0.1:<5000-6000>"]);
        assert_eq!(got, br#"["10.0.0.1:\u003c5000-6000\u003e"]"#);
    }
}
