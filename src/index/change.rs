//! What sources ask of the index, in the one direction data flows: a source (the cluster's
//! watchers, the manifest directory) turns what it saw into [`Change`]s and sends them, with
//! the end of its initial sync and the objects it holds back, as [`Input`]s to the render
//! loop, which applies them here.

use super::{Dirty, Index, Kind, ObjRef, Resource};

/// One change a source asks of the index.
#[derive(Debug, Clone)]
pub enum Change {
    Apply(Resource),
    Delete(ObjRef),
}

impl Change {
    /// The kind of the object changed.
    pub fn kind(&self) -> Kind {
        match self {
            Change::Apply(r) => r.kind(),
            Change::Delete(r) => r.kind,
        }
    }

    /// The object changed, and what it is now (`None`: deleted).
    pub fn seen(&self) -> (ObjRef, Option<&Resource>) {
        match self {
            Change::Apply(r) => (ObjRef::new(r.kind(), r.key()), Some(r)),
            Change::Delete(r) => (r.clone(), None),
        }
    }

    /// Makes the change in `index`; returns what it made dirty. The index keeps no
    /// `managedFields`: only the writer reads them, from [`Self::seen`], before this.
    pub fn apply_to(self, index: &mut Index) -> Dirty {
        match self {
            Change::Apply(mut resource) => {
                resource.meta_mut().managed_fields = None;
                index.apply(resource)
            }
            Change::Delete(r) => index.delete(r.kind, &r.key.namespace, &r.key.name),
        }
    }
}

/// What sources tell the render loop.
#[derive(Debug)]
pub enum Input {
    Changes(Vec<Change>),
    /// Every source has delivered its complete initial state.
    Synced,
    /// The objects the source holds at an older version than its input gives (standalone
    /// mode: after an invalid edit), replacing the last such list: shown to people, never
    /// rendered.
    Held(Vec<Held>),
}

/// An object held at its last valid version, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub object: ObjRef,
    /// `invalid edit at FILE:LINE`.
    pub why: String,
}
