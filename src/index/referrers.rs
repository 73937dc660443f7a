//! [`Referrers`]: the objects that refer to one object, in order.
//!
//! Most objects are referred to by one or two others (a Gateway by its route, a Service by its
//! route and its EndpointSlice). A sorted vector holds those in one small allocation, where a
//! B-tree set allocated a whole node of eleven slots (632 bytes) for each: with 4,096 Gateways
//! that was 5 MiB, a fifth of the index, read cold by every render. An object many refer to (a
//! GatewayClass, a namespace) moves to a B-tree set past [`FEW`], so that adding and removing
//! a referrer stays logarithmic however many there are. The vector grows one slot at a time:
//! doubling would give a Gateway's single route four 56-byte slots.

use std::collections::{BTreeSet, btree_set};

/// The most referrers kept in a vector: inserting shifts at most this many.
const FEW: usize = 32;

/// The referrers of one object (in the index, [`super::ObjRef`]s), in order, each once.
#[derive(Debug, Clone)]
pub(crate) enum Referrers<T> {
    Few(Vec<T>),
    Many(BTreeSet<T>),
}

impl<T> Default for Referrers<T> {
    fn default() -> Self {
        Referrers::Few(Vec::new())
    }
}

impl<T: Ord> Referrers<T> {
    pub(crate) fn insert(&mut self, r: T) {
        match self {
            Referrers::Few(v) => {
                if let Err(at) = v.binary_search(&r) {
                    v.reserve_exact(1);
                    v.insert(at, r);
                }
                if v.len() > FEW {
                    *self = Referrers::Many(std::mem::take(v).into_iter().collect());
                }
            }
            Referrers::Many(set) => {
                set.insert(r);
            }
        }
    }

    pub(crate) fn remove(&mut self, r: &T) {
        match self {
            Referrers::Few(v) => {
                if let Ok(at) = v.binary_search(r) {
                    v.remove(at);
                }
            }
            Referrers::Many(set) => {
                set.remove(r);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Referrers::Few(v) => v.is_empty(),
            Referrers::Many(set) => set.is_empty(),
        }
    }

    pub(crate) fn iter(&self) -> Iter<'_, T> {
        match self {
            Referrers::Few(v) => Iter::Few(v.iter()),
            Referrers::Many(set) => Iter::Many(set.iter()),
        }
    }
}

impl<'a, T: Ord> IntoIterator for &'a Referrers<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// The referrers in order.
pub(crate) enum Iter<'a, T> {
    Few(std::slice::Iter<'a, T>),
    Many(btree_set::Iter<'a, T>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Few(it) => it.next(),
            Iter::Many(it) => it.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Kind, ObjRef, ObjectKey};

    /// Whatever the order of inserts and removals, and on either side of [`FEW`], the
    /// referrers come out as a B-tree set would give them.
    #[test]
    fn referrers_stay_ordered_and_unique_as_they_grow_and_shrink() {
        let r = |i: usize| ObjRef::new(Kind::UdpRoute, ObjectKey::new("ns", format!("route-{}", (i * 37) % 101)));
        let mut referrers = Referrers::default();
        let mut expected = BTreeSet::new();
        for i in 0..3 * FEW {
            referrers.insert(r(i));
            referrers.insert(r(i)); // a second insert changes nothing
            expected.insert(r(i));
            assert!(referrers.iter().eq(expected.iter()), "after inserting {i}");
        }
        assert!(matches!(referrers, Referrers::Many(_)), "past FEW, a set");
        for i in (0..3 * FEW).rev() {
            referrers.remove(&r(i));
            expected.remove(&r(i));
            assert!(referrers.iter().eq(expected.iter()), "after removing {i}");
        }
        assert!(referrers.is_empty());
        let mut few = Referrers::default();
        few.insert(r(1));
        few.remove(&r(2)); // absent: nothing happens
        assert!(matches!(&few, Referrers::Few(v) if v.len() == 1));
    }

    #[test]
    fn a_few_referrers_take_a_slot_each() {
        let mut referrers = Referrers::default();
        for i in 1..=FEW {
            referrers.insert(i);
            assert!(matches!(&referrers, Referrers::Few(v) if v.capacity() == i), "after {i} referrers");
        }
    }
}
