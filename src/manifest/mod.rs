//! The manifest loader: one file's text (multi-document YAML or JSON) into the objects it
//! holds, each with the file and line it came from. Standalone mode (a directory of manifests)
//! and the golden tests load through here, so both see the same objects.
//!
//! Per document, in order: empty documents are skipped; a `kind: List` (as `kubectl get -o
//! yaml` writes) stands for its items; an object the API server would refuse
//! ([`crate::validate`], unless [`Admission::Unchecked`]) and a kind the operator does not watch
//! are skipped with the reason;
//! every other object is decoded once and given what an API server fills in ([`defaults`]).
//! A file that is not YAML, holds something other than objects, or an object of a watched kind
//! that does not fit its type fails as a whole: a caller keeps that file's last good content.

mod defaults;
mod depth;
mod documents;

pub use defaults::DEFAULT_NAMESPACE;

use crate::index::{DecodeError, Kind, ObjRef, ObjectKey, Resource, decode_value};
use crate::validate::{Invalid, validate};
use serde_json::Value;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a document starts: file and 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    pub path: PathBuf,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)
    }
}

/// Why a document of a good file was left out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkipReason {
    /// The API server would refuse it.
    #[error("rejected: {0}")]
    Rejected(Invalid),
    /// A kind the operator does not watch.
    #[error("skipped: {0}")]
    UnknownKind(DecodeError),
}

/// A document left out, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {reason}")]
pub struct Skipped {
    pub origin: Origin,
    pub reason: SkipReason,
    /// The watched object a rejected document names (kind, namespace as it would be
    /// defaulted, name), if it names one: a caller that served an earlier version of it may
    /// keep that version, as an API server keeps an object whose update it refused.
    pub object: Option<ObjRef>,
}

/// Why a whole file was not loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadErrorKind {
    /// Not YAML, or nested too deep to parse.
    #[error("{0}")]
    Syntax(String),
    /// A document that is not a map.
    #[error("expected a Kubernetes object, found {0}")]
    NotAnObject(&'static str),
    /// An object of a watched kind that does not decode (or is no object at all).
    #[error(transparent)]
    Decode(DecodeError),
    /// An object without a name.
    #[error("{0:?} without metadata.name")]
    NoName(crate::index::Kind),
}

/// A file that could not be loaded, with the position of the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {kind}")]
pub struct LoadError {
    pub origin: Origin,
    pub kind: LoadErrorKind,
}

/// Which objects a load admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// What the API server would admit (standalone mode): others are skipped as rejected.
    Validated,
    /// Every object that decodes: for tests of how the renderer treats what an API server would
    /// refuse (the golden cases ported from upstream's renderer tests have such objects).
    Unchecked,
}

/// What one file holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    /// The objects, in document order.
    pub objects: Vec<(Origin, Resource)>,
    /// The documents left out, in document order.
    pub skipped: Vec<Skipped>,
}

impl Manifest {
    /// The objects without their origins.
    pub fn into_resources(self) -> impl Iterator<Item = Resource> {
        self.objects.into_iter().map(|(_, r)| r)
    }
}

/// Whether `path` looks like a manifest (and not an editor's backup or swap file).
pub fn is_manifest(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !name.starts_with('.')
        && !name.ends_with('~')
        && matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// The documents of a file's text as parsed, before any object is made of them (`None` if it
/// is not YAML): for checks of what the loader says about them (the fuzz target's).
pub fn raw_documents(text: &str) -> Option<Vec<Value>> {
    documents::documents(text).ok().map(|docs| docs.into_iter().map(|(_, v)| v).collect())
}

/// Loads the text of the file at `path` (which is only used to name origins).
pub fn load(path: &Path, text: &str, admission: Admission) -> Result<Manifest, LoadError> {
    let origin = |line: usize| Origin { path: path.to_path_buf(), line };
    let docs = documents::documents(text)
        .map_err(|e| LoadError { origin: origin(e.line), kind: LoadErrorKind::Syntax(e.message) })?;
    let mut manifest = Manifest::default();
    for (line, value) in docs {
        let fail = |kind| LoadError { origin: origin(line), kind };
        let items = match value {
            Value::Null => continue,
            Value::Object(mut o) if o.get("kind").and_then(Value::as_str) == Some("List") => match o.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            },
            v @ Value::Object(_) => vec![v],
            other => return Err(fail(LoadErrorKind::NotAnObject(kind_of(&other)))),
        };
        for item in items {
            let object = named_object(&item);
            match load_object(item, admission).map_err(fail)? {
                Ok(resource) => manifest.objects.push((origin(line), resource)),
                Err(reason) => {
                    let object = matches!(reason, SkipReason::Rejected(_)).then_some(object).flatten();
                    manifest.skipped.push(Skipped { origin: origin(line), reason, object })
                }
            }
        }
    }
    Ok(manifest)
}

/// One object: validated, decoded once, defaulted; or why it is left out.
fn load_object(value: Value, admission: Admission) -> Result<Result<Resource, SkipReason>, LoadErrorKind> {
    // What an API server would refuse is never served; the file's other objects are.
    if admission == Admission::Validated
        && let Err(invalid) = validate(&value)
    {
        return Ok(Err(SkipReason::Rejected(invalid)));
    }
    let mut resource = match decode_value(value) {
        Ok(r) => r,
        Err(e) if e.is_unknown_kind() => return Ok(Err(SkipReason::UnknownKind(e))),
        Err(e) => return Err(LoadErrorKind::Decode(e)),
    };
    if resource.meta().name.as_deref().unwrap_or("").is_empty() {
        return Err(LoadErrorKind::NoName(resource.kind()));
    }
    defaults::apply(&mut resource);
    Ok(Ok(resource))
}

/// The watched object a document names, whatever else is wrong with it: its kind, its
/// namespace as [`defaults`] would fill it in, and its name.
fn named_object(v: &Value) -> Option<ObjRef> {
    let text = |pointer: &str| v.pointer(pointer).and_then(Value::as_str);
    let (group, version) = text("/apiVersion")?.rsplit_once('/').unwrap_or(("", text("/apiVersion")?));
    let kind = Kind::named(group, version, text("/kind")?)?;
    let name = text("/metadata/name").filter(|n| !n.is_empty())?;
    let namespace = match (kind.is_cluster_scoped(), v.pointer("/metadata/namespace")) {
        (true, _) => "",
        (false, None | Some(Value::Null)) => DEFAULT_NAMESPACE,
        (false, Some(ns)) => ns.as_str()?,
    };
    Some(ObjRef::new(kind, ObjectKey::new(namespace, name)))
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

#[cfg(test)]
mod tests;
