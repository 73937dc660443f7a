//! Kubernetes manifests in a directory: multi-document YAML and JSON files, parsed into
//! documents that remember where they came from, with the last good content of each file
//! kept when an edit breaks it.

use super::depth::{MAX_FLOW_DEPTH, check_flow_depth};
use super::scan::{self, SkippedDir, Unreadable};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a document starts: file and 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub path: PathBuf,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)
    }
}

/// One object of a manifest file.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    pub origin: Origin,
    pub value: Value,
}

/// A file that could not be parsed, with the position of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ParseError {
    pub origin: Origin,
    pub message: String,
}

/// Whether `path` looks like a manifest (and not an editor's backup or swap file).
pub fn is_manifest(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !name.starts_with('.')
        && !name.ends_with('~')
        && matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Parses one file's text into its documents. Empty documents are skipped; a `kind: List`
/// (as `kubectl get -o yaml` writes) is flattened into its items.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Document>, ParseError> {
    let mut docs = Vec::new();
    for (line, chunk) in split_documents(text) {
        let origin = |offset: usize| Origin { path: path.to_path_buf(), line: line + offset };
        check_flow_depth(chunk).map_err(|at| ParseError {
            origin: origin(at - 1),
            message: format!("nested deeper than {MAX_FLOW_DEPTH} levels; not parsed"),
        })?;
        let value: Value = serde_yaml_ng::from_str(chunk).map_err(|e| ParseError {
            origin: origin(e.location().map_or(0, |l| l.line().saturating_sub(1))),
            message: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
                let items = o.get("items").and_then(Value::as_array).cloned().unwrap_or_default();
                docs.extend(items.into_iter().map(|value| Document { origin: origin(0), value }));
            }
            Value::Object(_) => docs.push(Document { origin: origin(0), value }),
            other => {
                let message = format!("expected a Kubernetes object, found {}", kind_of(&other));
                return Err(ParseError { origin: origin(0), message });
            }
        }
    }
    Ok(docs)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "a list",
        Value::String(_) => "a string",
        Value::Number(_) => "a number",
        Value::Bool(_) => "a boolean",
        _ => "something else",
    }
}

/// Splits YAML text at `---` lines; yields each document with its 1-based first line.
/// (JSON files are one document and contain no such line.)
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_end();
        if trimmed == "---" || trimmed.starts_with("--- ") {
            out.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    out.push((start_line, &text[start..]));
    out
}

/// What a decoder makes of one document.
pub enum Decoded<T> {
    /// An object to keep.
    Object(T),
    /// Not for us (e.g. a kind the operator does not watch): skipped with a warning.
    Skip(String),
}

/// The decoded objects of every manifest file, by file. A file that fails to parse or to
/// decode keeps its previous objects: its last good content stays in force.
#[derive(Debug)]
pub struct ManifestSet<T> {
    files: BTreeMap<PathBuf, FileState<T>>,
}

impl<T> Default for ManifestSet<T> {
    fn default() -> Self {
        ManifestSet { files: BTreeMap::new() }
    }
}

#[derive(Debug)]
struct FileState<T> {
    text: String,
    objects: Vec<(Origin, T)>,
}

/// What a rescan found.
#[derive(Debug, Default)]
pub struct Rescan {
    /// Files whose objects changed (added, edited or removed files).
    pub changed: Vec<PathBuf>,
    /// Files that failed to parse or decode; their last good content was kept.
    pub errors: Vec<ParseError>,
    /// Documents skipped in the files that changed.
    pub skipped: Vec<ParseError>,
    /// Manifest files that could not be read; their last good content was kept.
    pub unreadable: Vec<(PathBuf, Unreadable)>,
    /// Subdirectories that could not be walked; the files last read there were kept.
    pub skipped_dirs: Vec<(PathBuf, SkippedDir)>,
}

impl Rescan {
    /// Whether something could not be read for a reason that may go away by itself (e.g. out
    /// of file descriptors): the rescan is worth repeating without a file event.
    pub fn incomplete(&self) -> bool {
        self.unreadable.iter().any(|(_, e)| e.is_transient())
            || self.skipped_dirs.iter().any(|(_, e)| matches!(e, SkippedDir::Io(_)))
    }
}

impl<T> ManifestSet<T> {
    /// Re-reads every manifest under `dir` (recursively); only files whose text changed are
    /// parsed and decoded again. Fails only if `dir` itself cannot be listed.
    pub fn rescan(
        &mut self,
        dir: &Path,
        decode: impl Fn(&Document) -> Result<Decoded<T>, String>,
    ) -> std::io::Result<Rescan> {
        let listing = scan::list(dir)?;
        let mut result = Rescan { skipped_dirs: listing.skipped_dirs, ..Rescan::default() };
        let mut seen = Vec::with_capacity(listing.files.len());
        for (path, content) in listing.files {
            seen.push(path.clone());
            let text = match content {
                Ok(text) => text,
                Err(e) => {
                    result.unreadable.push((path, e));
                    continue;
                }
            };
            if self.files.get(&path).is_some_and(|f| f.text == text) {
                continue;
            }
            match decode_file(&path, &text, &decode) {
                Ok((objects, skipped)) => {
                    self.files.insert(path.clone(), FileState { text, objects });
                    result.changed.push(path);
                    result.skipped.extend(skipped);
                }
                Err(e) => result.errors.push(e),
            }
        }
        // What a skipped directory held is unknown: its files are not gone.
        let unknown = |p: &Path| result.skipped_dirs.iter().any(|(d, _)| p.starts_with(d));
        let gone: Vec<PathBuf> = self.files.keys().filter(|p| !seen.contains(p) && !unknown(p)).cloned().collect();
        for path in gone {
            self.files.remove(&path);
            result.changed.push(path);
        }
        Ok(result)
    }

    /// Every object, in file order then document order.
    pub fn objects(&self) -> impl Iterator<Item = &(Origin, T)> {
        self.files.values().flat_map(|f| f.objects.iter())
    }
}

pub(crate) type DecodedFile<T> = (Vec<(Origin, T)>, Vec<ParseError>);

pub(crate) fn decode_file<T>(
    path: &Path,
    text: &str,
    decode: impl Fn(&Document) -> Result<Decoded<T>, String>,
) -> Result<DecodedFile<T>, ParseError> {
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    for doc in parse(path, text)? {
        match decode(&doc) {
            Ok(Decoded::Object(t)) => objects.push((doc.origin, t)),
            Ok(Decoded::Skip(message)) => skipped.push(ParseError { origin: doc.origin, message }),
            Err(message) => return Err(ParseError { origin: doc.origin, message }),
        }
    }
    Ok((objects, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_with_origins() {
        let text = "apiVersion: v1\nkind: A\n---\n# comment only\n---\napiVersion: v1\nkind: B\n";
        let docs = parse(Path::new("m.yaml"), text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].origin.line, 1);
        assert_eq!(docs[1].origin.line, 6);
        assert_eq!(docs[1].value["kind"], "B");
    }

    #[test]
    fn json_and_lists() {
        let text = r#"{"apiVersion":"v1","kind":"List","items":[{"kind":"A"},{"kind":"B"}]}"#;
        let docs = parse(Path::new("l.json"), text).unwrap();
        assert_eq!(docs.iter().map(|d| d.value["kind"].as_str().unwrap()).collect::<Vec<_>>(), ["A", "B"]);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let text = "kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n";
        let err = parse(Path::new("bad.yaml"), text).unwrap_err();
        assert_eq!(err.origin.path, Path::new("bad.yaml"));
        assert!(err.origin.line >= 4, "{err}");
        assert!(err.to_string().starts_with("bad.yaml:"), "{err}");
        let err = parse(Path::new("s.yaml"), "just a string\n").unwrap_err();
        assert!(err.message.contains("expected a Kubernetes object"), "{err}");
    }

    #[test]
    fn rescan_keeps_the_last_good_content_and_notices_removals() {
        let dir = tempdir();
        std::fs::write(dir.join("a.yaml"), "kind: A\n").unwrap();
        std::fs::write(dir.join("b.yml"), "kind: B\n").unwrap();
        std::fs::write(dir.join(".hidden.yaml"), "kind: H\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
        // Kinds A and B are ours, C is skipped, anything else is an error.
        let decode = |d: &Document| match d.value["kind"].as_str() {
            Some(k @ ("A" | "B")) => Ok(Decoded::Object(k.to_string())),
            Some("C") => Ok(Decoded::Skip("unknown kind C".into())),
            _ => Err("bad object".to_string()),
        };
        let kinds = |set: &ManifestSet<String>| set.objects().map(|(_, k)| k.clone()).collect::<Vec<_>>();
        let mut set = ManifestSet::default();
        let r = set.rescan(&dir, decode).unwrap();
        assert_eq!(r.changed.len(), 2);
        assert_eq!(kinds(&set), ["A", "B"]);
        assert!(set.rescan(&dir, decode).unwrap().changed.is_empty(), "unchanged files are not re-parsed");

        std::fs::write(dir.join("a.yaml"), "kind: [broken\n").unwrap();
        let r = set.rescan(&dir, decode).unwrap();
        assert_eq!(r.errors.len(), 1);
        assert!(r.changed.is_empty());
        assert_eq!(kinds(&set), ["A", "B"], "last good content kept");

        std::fs::write(dir.join("a.yaml"), "kind: A\n---\nkind: Z\n").unwrap();
        let r = set.rescan(&dir, decode).unwrap();
        assert_eq!((r.errors.len(), r.errors[0].origin.line), (1, 3), "decode errors point at the document");
        assert_eq!(kinds(&set), ["A", "B"]);

        std::fs::write(dir.join("a.yaml"), "kind: A\n---\nkind: C\n").unwrap();
        let r = set.rescan(&dir, decode).unwrap();
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(kinds(&set), ["A", "B"]);

        std::fs::remove_file(dir.join("b.yml")).unwrap();
        let r = set.rescan(&dir, decode).unwrap();
        assert_eq!(r.changed, [dir.join("b.yml")]);
        assert_eq!(kinds(&set), ["A"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("manifests-{}-{:?}", std::process::id(), std::thread::current().id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
