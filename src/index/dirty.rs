//! What an index change requires to be re-rendered.

use super::{ObjRef, ObjectKey};
use std::collections::BTreeSet;

/// The Gateways to re-render, the routes whose status must be recomputed, and the
/// GatewayClasses whose status must be recomputed. Sorted, so rendering it is deterministic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dirty {
    pub gateways: BTreeSet<ObjectKey>,
    /// `Kind::UdpRoute` or `Kind::GatewayUdpRoute` references.
    pub routes: BTreeSet<ObjRef>,
    /// GatewayClass names.
    pub classes: BTreeSet<String>,
}

impl Dirty {
    pub fn merge(&mut self, other: Dirty) {
        self.gateways.extend(other.gateways);
        self.routes.extend(other.routes);
        self.classes.extend(other.classes);
    }

    pub fn is_empty(&self) -> bool {
        self.gateways.is_empty() && self.routes.is_empty() && self.classes.is_empty()
    }
}
