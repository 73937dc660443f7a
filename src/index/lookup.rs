//! Lookups by borrowed keys.
//!
//! The stores and the reverse references are hash maps keyed by owned [`ObjectKey`]s and
//! [`ObjRef`]s; the renderer looks them up many times per Gateway with names it only borrows
//! (a route's parentRef, a class's `parametersRef`). [`KeyView`] and [`ObjRefView`] are the
//! borrowed forms: each hashes exactly as its owned form and is [`Equivalent`] to it, so those
//! lookups build no owned key just to throw it away.

use super::key::{KeyView, ObjectKey};
use super::kinds::{Kind, ObjRef};
use hashbrown::Equivalent;
use std::hash::{Hash, Hasher};

impl ObjRef {
    pub fn view(&self) -> ObjRefView<'_> {
        ObjRefView { kind: self.kind, key: self.key.view() }
    }
}

/// A borrowed [`ObjRef`], ordered as the owned one (kind, then key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRefView<'a> {
    pub kind: Kind,
    pub key: KeyView<'a>,
}

impl<'a> ObjRefView<'a> {
    pub fn new(kind: Kind, key: impl Into<KeyView<'a>>) -> Self {
        ObjRefView { kind, key: key.into() }
    }

    pub(crate) fn to_owned(self) -> ObjRef {
        ObjRef::new(self.kind, self.key.to_owned())
    }
}

impl<'a> From<&'a ObjRef> for ObjRefView<'a> {
    fn from(r: &'a ObjRef) -> Self {
        r.view()
    }
}

/// An owned key hashes as its view: a map keyed by `ObjectKey` finds it by a [`KeyView`].
impl Hash for ObjectKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state);
    }
}

impl Equivalent<ObjectKey> for KeyView<'_> {
    fn equivalent(&self, key: &ObjectKey) -> bool {
        *self == key.view()
    }
}

/// An owned reference hashes as its view: a map keyed by `ObjRef` finds it by an [`ObjRefView`].
impl Hash for ObjRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state);
    }
}

impl Equivalent<ObjRef> for ObjRefView<'_> {
    fn equivalent(&self, r: &ObjRef) -> bool {
        *self == r.view()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Store;
    use std::hash::BuildHasher;

    /// The borrowed forms order and hash as the owned ones: the B-tree sets of keys and the
    /// hash maps' lookups by view rely on it.
    #[test]
    fn views_order_and_hash_as_owned_keys() {
        let hasher = hashbrown::DefaultHashBuilder::default();
        let keys = [("", "z"), ("a", "b"), ("a", "c"), ("ab", ""), ("b", "a")].map(|(ns, n)| ObjectKey::new(ns, n));
        for a in &keys {
            assert_eq!(hasher.hash_one(a), hasher.hash_one(a.view()), "{a}");
            let r = ObjRef::new(Kind::Service, a.clone());
            assert_eq!(hasher.hash_one(&r), hasher.hash_one(r.view()), "{a}");
            for b in &keys {
                assert_eq!(a.view().cmp(&b.view()), a.cmp(b), "{a} vs {b}");
                let (ra, rb) = (ObjRef::new(Kind::Service, a.clone()), ObjRef::new(Kind::Gateway, b.clone()));
                assert_eq!(ra.view().cmp(&rb.view()), ra.cmp(&rb));
            }
        }
        let store: Store<usize> = keys.iter().cloned().zip(0..).collect();
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(store.lookup(k.view()), Some(&i));
        }
        assert_eq!(store.lookup(KeyView::new("a", "d")), None);
        assert!(store.keys().eq(keys.iter()), "iterated in key order");
    }
}
