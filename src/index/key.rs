//! Object identity: the `namespace/name` key of an object, owned ([`ObjectKey`]) and borrowed
//! ([`KeyView`], ordered exactly as the owned one; with its kind: [`super::ObjRef`], and the
//! lookups by borrowed keys in [`super::lookup`]).

use compact_str::CompactString;
use std::fmt;

/// The `namespace/name` of an object; cluster-scoped objects have an empty namespace.
///
/// Ordered by namespace, then name: every store and every output iterates in this order, which
/// is what makes rendering deterministic. Each part is held inline up to 24 bytes (most
/// Kubernetes names): a clone allocates nothing, and the index's maps hash and compare a key
/// without following a pointer to the heap. Hashed as its [`KeyView`] (`super::lookup`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: CompactString,
    pub name: CompactString,
}

impl ObjectKey {
    pub fn new(namespace: impl Into<CompactString>, name: impl Into<CompactString>) -> Self {
        ObjectKey { namespace: namespace.into(), name: name.into() }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<CompactString>) -> Self {
        ObjectKey::new("", name)
    }

    /// Parses `namespace/name`; a string without a slash is a cluster-scoped name.
    pub(crate) fn parse(s: &str) -> Self {
        match s.split_once('/') {
            Some((namespace, name)) => ObjectKey::new(namespace, name),
            None => ObjectKey::cluster(s),
        }
    }

    /// The key, borrowed.
    pub(crate) fn view(&self) -> KeyView<'_> {
        KeyView { namespace: &self.namespace, name: &self.name }
    }
}

/// `namespace/name`, the form used in config ids, listener routes and annotations (a
/// cluster-scoped object shows as `/name`, as upstream prints it).
impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.view().fmt(f)
    }
}

/// A borrowed [`ObjectKey`]: the same fields in the same order, so the same ordering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyView<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
}

impl<'a> KeyView<'a> {
    pub(crate) fn new(namespace: &'a str, name: &'a str) -> Self {
        KeyView { namespace, name }
    }

    /// The key of a cluster-scoped object.
    pub(crate) fn cluster(name: &'a str) -> Self {
        KeyView::new("", name)
    }

    pub(crate) fn to_owned(self) -> ObjectKey {
        ObjectKey::new(self.namespace, self.name)
    }
}

impl fmt::Display for KeyView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl<'a> From<&'a ObjectKey> for KeyView<'a> {
    fn from(k: &'a ObjectKey) -> Self {
        k.view()
    }
}
