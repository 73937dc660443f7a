//! Lookups by borrowed keys.
//!
//! The stores and the reverse references are B-trees keyed by owned [`ObjectKey`]s and
//! [`ObjRef`]s; the renderer looks them up many times per Gateway with names it only borrows
//! (a route's parentRef, a class's `parametersRef`). [`KeyView`] and [`ObjRefView`] are the
//! borrowed forms, ordered exactly as the owned ones, so those lookups build no owned key (two
//! heap allocations each) just to throw it away: see [`Lookup`].

use super::key::{KeyView, ObjectKey};
use super::kinds::{Kind, ObjRef};
use super::store::Store;
use std::borrow::Borrow;
use std::cmp::Ordering;

/// Store lookups by a borrowed key.
pub trait Lookup<T> {
    fn lookup(&self, key: KeyView<'_>) -> Option<&T>;
    fn lookup_key_value(&self, key: KeyView<'_>) -> Option<(&ObjectKey, &T)>;
    fn contains(&self, key: KeyView<'_>) -> bool {
        self.lookup(key).is_some()
    }
}

impl<T> Lookup<T> for Store<T> {
    fn lookup(&self, key: KeyView<'_>) -> Option<&T> {
        self.get(&key as &dyn AsKeyView)
    }

    fn lookup_key_value(&self, key: KeyView<'_>) -> Option<(&ObjectKey, &T)> {
        self.get_key_value(&key as &dyn AsKeyView)
    }
}

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

    pub fn to_owned(self) -> ObjRef {
        ObjRef::new(self.kind, self.key.to_owned())
    }
}

impl<'a> From<&'a ObjRef> for ObjRefView<'a> {
    fn from(r: &'a ObjRef) -> Self {
        r.view()
    }
}

/// What a B-tree keyed by [`ObjectKey`] can be searched with: an owned or a borrowed key. The
/// tree compares the borrowed forms, through this trait (`Borrow` below), and `KeyView`'s
/// derived order is `ObjectKey`'s, as `Borrow` requires.
pub trait AsKeyView {
    fn key_view(&self) -> KeyView<'_>;
}

impl AsKeyView for ObjectKey {
    fn key_view(&self) -> KeyView<'_> {
        self.view()
    }
}

impl AsKeyView for KeyView<'_> {
    fn key_view(&self) -> KeyView<'_> {
        *self
    }
}

impl<'a> Borrow<dyn AsKeyView + 'a> for ObjectKey {
    fn borrow(&self) -> &(dyn AsKeyView + 'a) {
        self
    }
}

impl PartialEq for dyn AsKeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.key_view() == other.key_view()
    }
}

impl Eq for dyn AsKeyView + '_ {}

impl PartialOrd for dyn AsKeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn AsKeyView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key_view().cmp(&other.key_view())
    }
}

/// [`AsKeyView`] for B-trees keyed by [`ObjRef`].
pub trait AsObjRefView {
    fn obj_ref_view(&self) -> ObjRefView<'_>;
}

impl AsObjRefView for ObjRef {
    fn obj_ref_view(&self) -> ObjRefView<'_> {
        self.view()
    }
}

impl AsObjRefView for ObjRefView<'_> {
    fn obj_ref_view(&self) -> ObjRefView<'_> {
        *self
    }
}

impl<'a> Borrow<dyn AsObjRefView + 'a> for ObjRef {
    fn borrow(&self) -> &(dyn AsObjRefView + 'a) {
        self
    }
}

impl PartialEq for dyn AsObjRefView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.obj_ref_view() == other.obj_ref_view()
    }
}

impl Eq for dyn AsObjRefView + '_ {}

impl PartialOrd for dyn AsObjRefView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn AsObjRefView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.obj_ref_view().cmp(&other.obj_ref_view())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Borrow` requires the borrowed forms to order as the owned ones; the lookups rely on it.
    #[test]
    fn views_order_as_owned_keys() {
        let keys = [("", "z"), ("a", "b"), ("a", "c"), ("ab", ""), ("b", "a")].map(|(ns, n)| ObjectKey::new(ns, n));
        for a in &keys {
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
    }
}
