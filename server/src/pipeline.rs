//! The messages between the daemon's stages, in the one direction they flow: sources send
//! [`Change`]s and [`Input::Synced`] to the render loop ([`crate::reconcile`]), which renders
//! and hands the results to its [`Outputs`]: the CDS store (through [`ConfigSink`]), the
//! statuses, and in cluster mode the writer, which learns what the watchers saw only from the
//! render loop.

use crate::admin::Readiness;
use crate::cds::store::ConfigStore;
use crate::cds::version::Version;
use crate::cluster::nodes::NodeFeed;
use crate::cluster::writer::Writer;
use crate::metrics::OperatorMetrics;
use crate::status::StatusBoard;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Dirty, Index, Kind, ObjRef, Resource};

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

/// Where configs are published: the CDS store (a test wraps it to see every version).
pub trait ConfigSink: Send + Sync {
    /// See [`ConfigStore::upsert`].
    fn upsert(&self, config: StunnerConfig) -> Option<Version>;
    /// See [`ConfigStore::delete`].
    fn delete(&self, id: &ConfigId) -> bool;
}

impl ConfigSink for ConfigStore {
    fn upsert(&self, config: StunnerConfig) -> Option<Version> {
        ConfigStore::upsert(self, config)
    }

    fn delete(&self, id: &ConfigId) -> bool {
        ConfigStore::delete(self, id)
    }
}

/// Where rendered results go.
pub struct Outputs {
    pub store: Arc<dyn ConfigSink>,
    pub statuses: Arc<StatusBoard>,
    pub metrics: OperatorMetrics,
    pub readiness: Readiness,
    /// Standalone mode: no API server stores the objects the operator owns, so the index
    /// takes them directly, merged into the stored ones as if applied and watched back (the
    /// renderer reads the Gateway's Service for its public address).
    pub apply_owned_to_index: bool,
    /// Cluster mode: where owned objects and statuses are queued for the API server; the
    /// render loop also tells it every change before applying it to the index.
    pub writer: Option<Writer>,
    /// Where Node changes go for the CDS's per-node patcher.
    pub nodes: NodeFeed,
}
