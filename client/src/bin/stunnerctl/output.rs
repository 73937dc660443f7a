//! Writing results to stdout in the chosen format, one document at a time, flushed at once so
//! that a watch shows each config as it arrives.

use super::cli::Output;
use serde::Serialize;
use std::error::Error;
use std::io::{self, Write};
use stunner_gateway::config::{StunnerConfig, json};

pub struct Printer {
    format: Output,
    /// Documents written so far: YAML needs a `---` before every one but the first.
    written: usize,
}

impl Printer {
    pub fn new(format: Output) -> Self {
        Printer { format, written: 0 }
    }

    /// A config, or upstream's one-liner when it is a deletion (its zero config).
    pub fn config(&mut self, config: &StunnerConfig) -> Result<(), Box<dyn Error>> {
        if config.normalized().is_ok_and(|c| c.is_deleted()) {
            return write(&format!("Gateway: {} <deleted>\n", config.admin.name));
        }
        self.document(config, super::summary::config)
    }

    /// `value` as JSON, YAML or a JSONPath template, or `summary(value)` as text.
    pub fn document<T: Serialize>(
        &mut self,
        value: &T,
        summary: impl FnOnce(&T) -> String,
    ) -> Result<(), Box<dyn Error>> {
        // Go-compatible escaping: the same bytes upstream stunnerctl prints.
        self.text(value, summary, |v| json::to_string(v))
    }

    /// Like [`Printer::document`], with the JSON text given: a body passed through as its
    /// server encoded it (stunnerd's status).
    pub fn text<T: Serialize>(
        &mut self,
        value: &T,
        summary: impl FnOnce(&T) -> String,
        json_text: impl FnOnce(&T) -> String,
    ) -> Result<(), Box<dyn Error>> {
        let text = match &self.format {
            Output::Summary => summary(value),
            Output::Json => json_text(value) + "\n",
            Output::Yaml => {
                let yaml = yaml(value)?;
                if self.written == 0 { yaml } else { format!("---\n{yaml}") }
            }
            Output::JsonPath(template) => template.render(&serde_json::to_value(value)?) + "\n",
        };
        self.written += 1;
        write(&text)
    }
}

/// YAML with every mapping's keys sorted, as upstream prints it (sigs.k8s.io/yaml goes through
/// a Go map): serde_json's map is ordered by key. Quoted scalars get Go's double quotes.
fn yaml<T: Serialize>(value: &T) -> Result<String, Box<dyn Error>> {
    let text = serde_yaml_ng::to_string(&serde_json::to_value(value)?)?;
    Ok(text.lines().map(|l| double_quoted(l) + "\n").collect())
}

/// A line whose value is a single-quoted scalar that would read as another type unquoted
/// (`key: ''`, `- '1'`, `'true'`), with the scalar double-quoted, as Go's yaml.v2 writes those
/// (`key: ""`); other quoting stays single, as yaml.v2 leaves it (`'{a:b}'`).
fn double_quoted(line: &str) -> String {
    let split = match line.find(": '") {
        Some(i) => i + 2,
        None => match line.trim_start().strip_prefix("- '") {
            Some(_) => line.len() - line.trim_start().len() + 2,
            None => return line.to_string(),
        },
    };
    let (head, scalar) = line.split_at(split);
    let Some(inner) = scalar.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) else {
        return line.to_string();
    };
    // Inside single quotes a quote is doubled; a lone one means this is not one whole scalar.
    if inner.replace("''", "").contains('\'') {
        return line.to_string();
    }
    let text = inner.replace("''", "'");
    let other_type = text.is_empty()
        || matches!(
            serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&text),
            Ok(serde_yaml_ng::Value::Null | serde_yaml_ng::Value::Bool(_) | serde_yaml_ng::Value::Number(_))
        );
    if !other_type {
        return line.to_string();
    }
    format!("{head}{}", serde_json::Value::String(text))
}

/// A note on stderr for a command that found nothing: stdout stays empty for scripts.
pub fn nothing_found(what: &str, all_namespaces: bool, namespace: &str) {
    let message = if all_namespaces {
        format!("No {what} found in any namespace.")
    } else {
        format!("No {what} found in namespace {namespace}; use -A (--all-namespaces) to look in every namespace.")
    };
    warn(&message);
}

/// A note on stderr that does not end the command (a watch reconnecting, a skipped config).
pub fn warn(message: &str) {
    let _ = writeln!(io::stderr(), "stunnerctl: {message}");
}

fn write(text: &str) -> Result<(), Box<dyn Error>> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_are_sorted_like_upstream() {
        let mut c = StunnerConfig::zero("ns/gw");
        c.admin.loglevel = "all:INFO".into();
        let y = yaml(&c).unwrap();
        let top: Vec<&str> = y.lines().filter(|l| !l.starts_with(' ') && !l.starts_with('-')).collect();
        let mut sorted = top.clone();
        sorted.sort();
        assert_eq!(top, sorted, "{y}");
        assert!(y.starts_with("admin:\n"), "{y}");
    }

    #[test]
    fn quoted_scalars_get_go_double_quotes() {
        assert_eq!(double_quoted("  lastError: ''"), "  lastError: \"\"");
        assert_eq!(double_quoted("- '123'"), "- \"123\"");
        assert_eq!(double_quoted("  - 'true'"), "  - \"true\"");
        assert_eq!(double_quoted("a: '{tier:free}'"), "a: '{tier:free}'");
        assert_eq!(double_quoted("  - 'it''s: x'"), "  - 'it''s: x'");
        assert_eq!(double_quoted("a: 'x' 'y'"), "a: 'x' 'y'");
        assert_eq!(double_quoted("a: b"), "a: b");
        assert_eq!(double_quoted("a: it's"), "a: it's");
    }
}
