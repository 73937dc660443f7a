//! Which fields hold secrets, and how anything that formats a value keeps them out: one list
//! ([`SECRET_FIELDS`]), read by the manifest validator's messages, the decoder's errors, the
//! CRD types' `Debug` output and every log line that quotes an error of a watched object. A
//! message about a secret field names its path and why it failed, never its value: logs are
//! kept by pipelines that people without access to the Secrets read.

/// The secret fields: the kind they belong to and the path of the field (JSON names, list
/// indices left out: `listeners.key` is the `key` of every listener). A field is secret with
/// everything under it (`data` covers `data.tls.key`).
pub(crate) const SECRET_FIELDS: &[(&str, &str)] = &[
    // Inline credentials of a GatewayConfig (every version).
    ("GatewayConfig", "spec.userName"),
    ("GatewayConfig", "spec.password"),
    ("GatewayConfig", "spec.sharedSecret"),
    // Any Secret's content: the `authRef` credentials, TLS certificates' keys.
    ("Secret", "data"),
    ("Secret", "stringData"),
    // The rendered dataplane config: its credentials, its listeners' TLS keys and the license.
    ("StunnerConfig", "auth.credentials"),
    ("StunnerConfig", "listeners.key"),
    ("StunnerConfig", "admin.license_config"),
];

/// Whether the field at `path` (`spec.password`, `data.tls.key`, `listeners[0].key`) of an
/// object of `kind` holds a secret.
pub fn is_secret_field(kind: &str, path: &str) -> bool {
    let path = without_indices(path);
    SECRET_FIELDS.iter().any(|(k, field)| {
        *k == kind && path.strip_prefix(field).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })
}

/// `listeners[0].key` as `listeners.key`.
fn without_indices(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut depth = 0usize;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// What a message shows in place of a secret value.
pub const REDACTED: &str = "<redacted>";

/// How secrets show in `Debug` output.
pub(crate) fn redacted(secret: &Option<String>) -> Option<&'static str> {
    secret.as_ref().map(|_| REDACTED)
}

/// The words serde's errors put before a value they quote (`invalid type: integer `5``,
/// `invalid value: string "x"`, `unknown variant `x``): the value follows in backquotes, or
/// for strings as a quoted Rust string.
const QUOTING: &[&str] = &["integer ", "floating point ", "boolean ", "character ", "unknown variant ", "string "];

/// A serde error message without the values it quotes (`invalid type: string "Hunter2",
/// expected i32` becomes `invalid type: string <redacted>, expected i32`). A decoder's error
/// has no path to tell a secret field from another, so every quoted value goes: what is left
/// says which type was found and which was expected.
pub fn without_values(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    'outer: while !rest.is_empty() {
        for word in QUOTING {
            let Some(after) = rest.strip_prefix(word) else { continue };
            if let Some(len) = quoted_len(after) {
                out.push_str(word);
                out.push_str(REDACTED);
                rest = &after[len..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The length of the quoted value `text` starts with: `` `…` `` (up to the last backquote
/// before a `,` or the end, since the value may hold backquotes itself) or `"…"` with Rust's
/// escapes; `None` if it starts with neither.
fn quoted_len(text: &str) -> Option<usize> {
    if let Some(inner) = text.strip_prefix('`') {
        // serde writes `, expected …` after the value, or nothing: the value ends at the last
        // backquote before the last such comma, or the last of all.
        let end = match inner.rfind("`, expected") {
            Some(i) => i,
            None => inner.rfind('`')?,
        };
        return Some(end + 2);
    }
    let inner = text.strip_prefix('"')?;
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Some(i + 2),
            _ => {}
        }
    }
    // Unterminated (cut short by someone): all of it.
    Some(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_fields_are_matched_by_kind_and_path() {
        assert!(is_secret_field("GatewayConfig", "spec.password"));
        assert!(is_secret_field("GatewayConfig", "spec.userName"));
        assert!(is_secret_field("GatewayConfig", "spec.sharedSecret"));
        assert!(!is_secret_field("GatewayConfig", "spec.passwordHint"), "a prefix of a name is not the field");
        assert!(!is_secret_field("GatewayConfig", "spec.realm"));
        assert!(!is_secret_field("Gateway", "spec.password"), "only of its kind");
        assert!(is_secret_field("Secret", "data"));
        assert!(is_secret_field("Secret", "data.tls.key"));
        assert!(is_secret_field("Secret", "stringData.password"));
        assert!(!is_secret_field("Secret", "metadata.name"));
        assert!(is_secret_field("StunnerConfig", "listeners[3].key"));
        assert!(is_secret_field("StunnerConfig", "admin.license_config.key"));
    }

    #[test]
    fn serde_messages_lose_their_values() {
        for (message, expected) in [
            (r#"invalid type: string "Hunter2 Secret", expected i32"#, "invalid type: string <redacted>, expected i32"),
            (
                "invalid type: integer `987654321012`, expected a string",
                "invalid type: integer <redacted>, expected a string",
            ),
            (
                r#"invalid value: string "a\"b,`c", expected a base64-encoded string"#,
                "invalid value: string <redacted>, expected a base64-encoded string",
            ),
            (
                "invalid type: floating point `1.5`, expected u16",
                "invalid type: floating point <redacted>, expected u16",
            ),
            ("unknown variant `x`y`, expected one of `A`, `B`", "unknown variant <redacted>, expected one of `A`, `B`"),
            ("invalid type: map, expected a string", "invalid type: map, expected a string"),
            ("missing field `name`", "missing field `name`"),
        ] {
            assert_eq!(without_values(message), expected, "{message}");
        }
    }
}
