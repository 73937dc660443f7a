//! A YAML stream split into its documents, each with the line its content starts on.
//!
//! The YAML parser does the parsing (so `--- {inline}`, `...` document ends, directives and
//! comments mean what YAML says); it only keeps no position of a document that parsed. The
//! lines come from the rule that makes them unambiguous: YAML forbids a line that starts with
//! `---` or `...` followed by a space, a tab or the line's end inside any content (spec 1.2
//! §9.1.4, `c-forbidden`), so such a line always is a document marker. Everything else that is
//! not blank, a comment or a directive starts a document's content.

use super::depth::{MAX_FLOW_DEPTH, check_flow_depth};
use serde::Deserialize;
use serde_json::Value;

/// Why a stream could not be parsed: the 1-based line of the problem and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub message: String,
}

/// The documents of `text` in order, each with its 1-based first line of content (for a
/// document without content, the line of its `---`). Empty documents are kept as `Null`:
/// what to make of them is the caller's business.
pub(crate) fn documents(text: &str) -> Result<Vec<(usize, Value)>, SyntaxError> {
    check_flow_depth(text).map_err(|line| SyntaxError {
        line,
        message: format!("nested deeper than {MAX_FLOW_DEPTH} levels; not parsed"),
    })?;
    let starts = document_lines(text);
    let mut out = Vec::with_capacity(starts.len());
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc)
            .map_err(|e| SyntaxError { line: e.location().map_or(1, |l| l.line()), message: e.to_string() })?;
        // The scan and the parser agree on where documents are (see the module doc and the
        // test `the_scan_finds_the_documents_the_parser_finds`), but for a stream without any
        // document, which the parser reads as one empty document: line 1.
        let line = starts.get(i).copied().unwrap_or(1);
        out.push((line, value));
    }
    Ok(out)
}

/// Whether `line` is the marker `marker` (`---` or `...`): at the start of the line, followed
/// by whitespace or the end of the line. Returns what follows the marker.
fn after_marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(marker)?;
    (rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n'])).then_some(rest)
}

/// Whether a line holds no content: blank, or a comment.
fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// The first line of content of each document of `text`, in order.
fn document_lines(text: &str) -> Vec<usize> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut starts = Vec::new();
    // The document being read: the line of its marker, and of its first content once seen.
    let mut open: Option<(usize, Option<usize>)> = None;
    let close = |open: &mut Option<(usize, Option<usize>)>, starts: &mut Vec<usize>| {
        if let Some((marker, content)) = open.take() {
            starts.push(content.unwrap_or(marker));
        }
    };
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = after_marker(line, "---") {
            close(&mut open, &mut starts);
            open = Some((n, (!is_blank_or_comment(rest)).then_some(n)));
        } else if after_marker(line, "...").is_some() {
            close(&mut open, &mut starts);
        } else if is_blank_or_comment(line) {
        } else if let Some((_, content @ None)) = &mut open {
            *content = Some(n);
        } else if open.is_none() && !line.starts_with('%') {
            // Content outside any document starts a bare one (directives only precede `---`).
            open = Some((n, Some(n)));
        }
    }
    close(&mut open, &mut starts);
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams whose document boundaries a literal `---` split gets wrong or that test the edges.
    const STREAMS: &[&str] = &[
        "",
        "# only a comment\n",
        "a: 1\n",
        "---\n",
        "---\n---\n",
        "a: 1\n---\nb: 2\n",
        "# header\n---\na: 1\n",
        "%YAML 1.2\n---\na: 1\n",
        "a: 1\n...\n",
        "a: 1\n...\n# trailing\n",
        "a: 1\n...\n---\nb: 2\n",
        "--- {a: 1}\n--- {b: 2}\n",
        "---\t# tab\na: 1\n",
        "a: |\n  text\n  ---x\n---\nb: 2\n",
        "a: 1\n--- \nb: 2\n---\r\nc: 3\n",
        "\u{feff}a: 1\n---\nb: 2\n",
        "{\"a\": 1}",
        "a:\n  - 1\n  - ---\n---\nb: 1\n",
    ];

    #[test]
    fn the_scan_finds_the_documents_the_parser_finds() {
        for text in STREAMS {
            let parsed = serde_yaml_ng::Deserializer::from_str(text).count();
            let scanned = document_lines(text).len();
            assert!(scanned == parsed || (scanned, parsed) == (0, 1), "{text:?}: {scanned} found, {parsed} parsed");
        }
        assert_eq!(documents("# nothing\n").unwrap(), [(1, Value::Null)]);
    }

    fn lines_and_values(text: &str) -> Vec<(usize, Value)> {
        documents(text).unwrap()
    }

    #[test]
    fn each_document_starts_at_its_first_line_of_content() {
        let docs = lines_and_values("# header\napiVersion: v1\nkind: A\n---\n# comment only\n---\n\nkind: B\n");
        let lines: Vec<usize> = docs.iter().map(|(l, _)| *l).collect();
        assert_eq!(lines, [2, 4, 8]);
        assert_eq!(docs[1].1, Value::Null, "a document of comments is empty");
        assert_eq!(docs[2].1["kind"], "B");
    }

    #[test]
    fn markers_are_read_as_yaml_reads_them() {
        // Content on the marker's line, and a document end: a split on literal `---` lines
        // drops the first two documents and reads `...` as content.
        let docs = lines_and_values("--- {kind: A}\n--- {kind: B}\n...\n---\n# c\nkind: C\n");
        let got: Vec<(usize, &str)> = docs.iter().map(|(l, v)| (*l, v["kind"].as_str().unwrap())).collect();
        assert_eq!(got, [(1, "A"), (2, "B"), (6, "C")]);
        // `---` inside a block scalar that is not at the line's start is text.
        let docs = lines_and_values("kind: A\nnote: |\n  ---\n  more\n");
        assert_eq!((docs.len(), docs[0].1["note"].as_str()), (1, Some("---\nmore\n")));
    }

    #[test]
    fn syntax_errors_name_the_line_in_the_whole_stream() {
        let err = documents("kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n").unwrap_err();
        assert!(err.line >= 5, "{err:?}");
        let deep = format!("a: 1\nb: {}{}\n", "[".repeat(200), "]".repeat(200));
        let err = documents(&deep).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("nested deeper than"), "{err:?}");
    }
}
