//! [`Store`]: the typed map of one kind, by key, each object in a box of its own.
//!
//! A B-tree node holds eleven values inline, and after the sorted inserts of a start-up most
//! nodes are half full: with the object in the node, every empty slot costs a whole object. The
//! Kubernetes types are large inline (every optional field is there, set or not: a `Deployment`
//! is 2.4 KiB, a `Service` 0.8 KiB), so with 1,000 Gateways the stores' nodes took 14 MiB for
//! 6 MiB of objects. Boxed, a slot costs a pointer, and the object is moved into the store as the
//! box [`super::Resource`] already holds, never copied.

use super::key::ObjectKey;
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::collections::btree_map;
use std::ops::RangeBounds;

/// A typed map of one kind, by key, in key order.
#[derive(Debug, Clone, PartialEq)]
pub struct Store<T>(BTreeMap<ObjectKey, Box<T>>);

impl<T> Default for Store<T> {
    fn default() -> Self {
        Store(BTreeMap::new())
    }
}

impl<T> Store<T> {
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&T>
    where
        ObjectKey: Borrow<Q>,
    {
        self.0.get(key).map(Box::as_ref)
    }

    pub fn get_key_value<Q: Ord + ?Sized>(&self, key: &Q) -> Option<(&ObjectKey, &T)>
    where
        ObjectKey: Borrow<Q>,
    {
        self.0.get_key_value(key).map(|(k, v)| (k, v.as_ref()))
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        ObjectKey: Borrow<Q>,
    {
        self.0.contains_key(key)
    }

    pub fn keys(&self) -> btree_map::Keys<'_, ObjectKey, Box<T>> {
        self.0.keys()
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.0.values().map(Box::as_ref)
    }

    pub fn range<R: RangeBounds<ObjectKey>>(&self, range: R) -> impl DoubleEndedIterator<Item = (&ObjectKey, &T)> {
        self.0.range(range).map(|(k, v)| (k, v.as_ref()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn insert(&mut self, key: ObjectKey, object: Box<T>) {
        self.0.insert(key, object);
    }

    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Box<T>> {
        self.0.remove(key)
    }
}

impl<'a, T> IntoIterator for &'a Store<T> {
    type Item = (&'a ObjectKey, &'a T);
    type IntoIter = std::iter::Map<
        btree_map::Iter<'a, ObjectKey, Box<T>>,
        fn((&'a ObjectKey, &'a Box<T>)) -> (&'a ObjectKey, &'a T),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v.as_ref()))
    }
}

impl<T> FromIterator<(ObjectKey, T)> for Store<T> {
    fn from_iter<I: IntoIterator<Item = (ObjectKey, T)>>(iter: I) -> Self {
        Store(iter.into_iter().map(|(k, v)| (k, Box::new(v))).collect())
    }
}
