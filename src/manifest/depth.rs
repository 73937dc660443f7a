//! A bound on the nesting of flow collections (`[...]`, `{...}`, so all of JSON), checked
//! before a document is parsed: the YAML parser's time grows with the square of that depth
//! (a 120 KB `a: [[[[…]]]]` took 16 s), and its own recursion limit only applies after.
//! Block nesting (by indentation) costs at least one character of indentation per level and
//! line, so the file size bounds it.
//!
//! This is a lexical scan, not a parser: it skips comments and quoted scalars, and counts a
//! bracket in block context only where a flow collection can start (after `:`, `-`, `?`,
//! another bracket or a comma, or at the start of a line), so brackets inside plain text
//! (`see [1`) do not count. It may overestimate on odd input; real manifests nest a few levels.

/// Deeper than anything the API server's objects need, below the parser's own limit (128).
pub(crate) const MAX_FLOW_DEPTH: usize = 100;

/// `Err(line)` (1-based, in `text`) where the flow nesting first exceeds [`MAX_FLOW_DEPTH`].
pub(crate) fn check_flow_depth(text: &str) -> Result<(), usize> {
    let mut depth = 0usize;
    let mut line = 1;
    // The last character that was not whitespace, on this line (block context only).
    let mut last: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let token_start = depth > 0 || matches!(last, None | Some(':' | '-' | '?' | '[' | '{' | ','));
        match c {
            '\n' => {
                line += 1;
                last = None;
                continue;
            }
            c if c.is_whitespace() => continue,
            '#' => {
                // A comment runs to the end of the line.
                while chars.next_if(|&c| c != '\n').is_some() {}
                continue;
            }
            '"' | '\'' if token_start => {
                let quote = c;
                while let Some(c) = chars.next() {
                    match c {
                        '\n' => line += 1,
                        // An escaped character is skipped, an escaped line break counted.
                        '\\' if quote == '"' => line += usize::from(chars.next() == Some('\n')),
                        // '' is an escaped quote inside single quotes: the scan goes on.
                        c if c == quote => break,
                        _ => {}
                    }
                }
            }
            '[' | '{' if token_start => {
                depth += 1;
                if depth > MAX_FLOW_DEPTH {
                    return Err(line);
                }
            }
            ']' | '}' if depth > 0 => depth -= 1,
            _ => {}
        }
        last = Some(c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_rejected_at_its_line() {
        let deep = format!("a: 1\nb: {}{}\n", "[".repeat(60_000), "]".repeat(60_000));
        assert_eq!(check_flow_depth(&deep), Err(2));
        let json = format!("{}{}", "{\"a\":".repeat(MAX_FLOW_DEPTH + 1), "}".repeat(MAX_FLOW_DEPTH + 1));
        assert_eq!(check_flow_depth(&json), Err(1));
        // A tag or an anchor before the first bracket does not hide the rest.
        assert!(check_flow_depth(&format!("a: !t {}", "[".repeat(MAX_FLOW_DEPTH + 2))).is_err());
    }

    #[test]
    fn brackets_in_text_comments_and_strings_do_not_count() {
        let many = "[".repeat(MAX_FLOW_DEPTH + 1);
        for text in [
            format!("note: see {many}\n"),
            format!("# {many}\nkind: A\n"),
            format!("a: \"{many}\"\nb: '{many}'\n"),
            format!("a: [\"{many}\", 'it''s {many}']\n"),
            format!("a: {}{}\n", "[".repeat(MAX_FLOW_DEPTH), "]".repeat(MAX_FLOW_DEPTH)),
        ] {
            assert_eq!(check_flow_depth(&text), Ok(()), "{text}");
        }
    }
}
