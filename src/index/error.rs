//! Why a document did not become a watched object: a leaf, named by the kind table that
//! decodes each kind and by the decoder that picks the kind.

/// Why a document did not become a [`Resource`](super::Resource).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A kind the operator does not watch: callers skip it (with a warning).
    #[error("unknown kind {kind:?} in apiVersion {api_version:?}")]
    UnknownKind { api_version: String, kind: String },
    /// A known kind whose content does not fit its type.
    #[error("malformed {kind} {name:?}: {reason}")]
    Malformed { kind: String, name: String, reason: String },
    /// Not a Kubernetes object at all (not a map, no apiVersion/kind, invalid YAML).
    #[error("not a Kubernetes object: {0}")]
    NotAnObject(String),
}

impl DecodeError {
    pub(crate) fn is_unknown_kind(&self) -> bool {
        matches!(self, DecodeError::UnknownKind { .. })
    }
}
