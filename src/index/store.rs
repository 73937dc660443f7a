//! [`Store`]: the typed map of one kind, by key, each object in a box of its own.
//!
//! A render looks up several objects per Gateway (its routes, their Services and
//! EndpointSlices, the class and its config). In a B-tree each lookup walked log N nodes, and
//! compared the key at each step: with thousands of objects those nodes no longer fit the
//! caches, so the cost of a lookup grew with the size of the index. The objects are therefore
//! found through a hash map (one probe, whatever the size), and the keys are kept in order
//! beside it for whatever iterates: a namespace's objects, every Gateway, the first Node by
//! name. Everything that iterates a store still sees key order.
//!
//! Each object is boxed: the Kubernetes types are large inline (every optional field is there,
//! set or not: a `Deployment` is 2.4 KiB, a `Service` 0.8 KiB), and the object is moved into the
//! store as the box [`super::Resource`] already holds, never copied.

use super::key::{KeyView, ObjectKey};
use hashbrown::{Equivalent, HashMap};
use std::collections::BTreeSet;
use std::collections::btree_set;

/// A typed map of one kind, by key, iterated in key order.
#[derive(Debug, Clone)]
pub struct Store<T> {
    /// Each object by key: what lookups read.
    objects: HashMap<ObjectKey, Box<T>>,
    /// The same keys, in order: what iteration reads.
    order: BTreeSet<ObjectKey>,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Store { objects: HashMap::new(), order: BTreeSet::new() }
    }
}

impl<T: PartialEq> PartialEq for Store<T> {
    fn eq(&self, other: &Self) -> bool {
        self.objects == other.objects
    }
}

impl<T> Store<T> {
    /// The object of `key`, owned or borrowed ([`KeyView`]).
    pub fn get<Q: std::hash::Hash + Equivalent<ObjectKey> + ?Sized>(&self, key: &Q) -> Option<&T> {
        self.objects.get(key).map(Box::as_ref)
    }

    pub fn contains_key<Q: std::hash::Hash + Equivalent<ObjectKey> + ?Sized>(&self, key: &Q) -> bool {
        self.objects.contains_key(key)
    }

    /// The object of a borrowed key.
    pub(crate) fn lookup(&self, key: KeyView<'_>) -> Option<&T> {
        self.get(&key)
    }

    pub(crate) fn lookup_key_value(&self, key: KeyView<'_>) -> Option<(&ObjectKey, &T)> {
        self.objects.get_key_value(&key).map(|(k, v)| (k, v.as_ref()))
    }

    pub(crate) fn contains(&self, key: KeyView<'_>) -> bool {
        self.contains_key(&key)
    }

    pub fn keys(&self) -> btree_set::Iter<'_, ObjectKey> {
        self.order.iter()
    }

    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &T> + ExactSizeIterator {
        self.order.iter().map(|k| self.stored(k))
    }

    /// The objects of namespace `ns`, in key order.
    pub(crate) fn in_namespace<'a>(&'a self, ns: &'a str) -> impl Iterator<Item = (&'a ObjectKey, &'a T)> {
        let from = ObjectKey::new(ns, "");
        self.order.range(from..).take_while(move |k| k.namespace == ns).map(|k| (k, self.stored(k)))
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The objects stored.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub(super) fn insert(&mut self, key: ObjectKey, object: Box<T>) {
        if let Some(old) = self.objects.get_mut(&key) {
            *old = object;
        } else {
            self.order.insert(key.clone());
            self.objects.insert(key, object);
        }
    }

    pub(super) fn remove(&mut self, key: &ObjectKey) -> Option<Box<T>> {
        let removed = self.objects.remove(key)?;
        self.order.remove(key);
        Some(removed)
    }

    /// The object of a key taken from `order`, which always has one.
    fn stored(&self, key: &ObjectKey) -> &T {
        self.objects.get(key).expect("every ordered key has its object")
    }
}

impl<T> FromIterator<(ObjectKey, T)> for Store<T> {
    fn from_iter<I: IntoIterator<Item = (ObjectKey, T)>>(iter: I) -> Self {
        let mut store = Store::default();
        for (k, v) in iter {
            store.insert(k, Box::new(v));
        }
        store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new(ns, name)
    }

    #[test]
    fn a_replaced_object_keeps_one_key_and_a_removed_one_leaves_none() {
        let mut store = Store::default();
        store.insert(key("b", "x"), Box::new(1));
        store.insert(key("a", "y"), Box::new(2));
        store.insert(key("b", "x"), Box::new(3));
        assert_eq!(store.get(&key("b", "x")), Some(&3));
        assert_eq!(store.lookup_key_value(KeyView::new("a", "y")), Some((&key("a", "y"), &2)));
        assert!(store.keys().eq([key("a", "y"), key("b", "x")].iter()));
        assert!(store.values().eq([2, 3].iter()));

        assert_eq!(store.remove(&key("b", "x")).as_deref(), Some(&3));
        assert!(store.remove(&key("b", "x")).is_none(), "removed once");
        assert!(!store.contains(KeyView::new("b", "x")));
        assert!(store.keys().eq([key("a", "y")].iter()));
        assert!(store.remove(&key("a", "y")).is_some());
        assert!(store.is_empty() && store.keys().next().is_none());
    }

    #[test]
    fn stores_are_equal_by_content_whatever_the_order_they_were_filled_in() {
        let keys = (0..100).map(|i| key(&format!("ns{}", i % 7), &format!("o{i}")));
        let forward: Store<usize> = keys.clone().zip(0..).collect();
        let backward: Store<usize> = keys.zip(0..).collect::<Vec<_>>().into_iter().rev().collect();
        assert_eq!(forward, backward);
        assert!(forward.in_namespace("ns3").all(|(k, _)| k.namespace == "ns3"));
        assert_eq!(forward.in_namespace("ns3").count(), 14);
        let mut changed = backward.clone();
        changed.insert(key("ns0", "o0"), Box::new(1000));
        assert_ne!(forward, changed);
        changed.remove(&key("ns0", "o0"));
        assert_ne!(forward, changed, "one object fewer");
    }
}
