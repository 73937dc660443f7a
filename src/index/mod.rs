//! The index: an in-memory store of every object the operator watches, with the reverse
//! references that let one event mark only the Gateways it affects (design.md §2).
//!
//! Sources (kube watchers, the file watcher) feed it with [`Index::apply`] and [`Index::delete`];
//! each returns the [`Dirty`] set to re-render. The renderer reads it through
//! the typed accessors and the reverse-reference queries. Everything is keyed and iterated in
//! [`ObjectKey`] order, so nothing here depends on insertion order.

mod change;
mod controller;
mod convert;
mod decode;
mod deployment_record;
mod dirty;
mod endpoint_addresses;
mod error;
mod grants;
mod key;
mod kinds;
mod lookup;
mod referrers;
mod refs;
mod scheduling;
mod store;

pub use change::{Change, Held, Input};
pub use controller::Controller;
pub use convert::convert_gateway_udp_route;
pub use decode::decode_value;
pub use deployment_record::{DeploymentRecord, config_origin};
pub use dirty::Dirty;
pub use endpoint_addresses::EndpointAddresses;
pub use error::DecodeError;
pub(crate) use grants::group_kind;
pub use key::{KeyView, ObjectKey};
pub use kinds::{Index, Kind, KindVisitor, ObjRef, ROUTE_KINDS, Resource, Wire, content_digest};
pub use lookup::ObjRefView;
pub use refs::{
    GATEWAY_API_GROUP, backend_target, class_config, effective_config, gateway_config, listener_set_gateway,
    node_external_address, parent_gateway, parent_listener_set, relay_discovery_enabled,
};
pub use scheduling::{Unschedulable, schedulable};
pub use store::Store;

use k8s_openapi::api::core::v1::Node;

/// What [`Index::sizes`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSizes {
    /// Objects stored, of every kind.
    pub objects: usize,
    /// Objects some stored object refers to (the reverse references' keys).
    pub referred: usize,
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    /// The store of a route kind, if `kind` is one.
    pub(crate) fn route_store(&self, kind: Kind) -> Option<&Store<crate::resources::UdpRoute>> {
        match kind {
            Kind::UdpRoute => Some(self.udp_routes()),
            Kind::GatewayUdpRoute => Some(self.gateway_udp_routes()),
            Kind::GatewayTcpRoute => Some(self.gateway_tcp_routes()),
            _ => None,
        }
    }

    /// Adds or replaces an object; returns what must be re-rendered.
    pub fn apply(&mut self, resource: Resource) -> Dirty {
        let r = resource.obj_ref();
        let node_address = self.first_node_addresses().into_iter().map(str::to_owned).collect();
        let node = self.node_before(&r);
        let mut dirty = self.affected(&r);
        self.unlink(&r);
        self.link(&r, refs::forward_refs(&resource));
        self.stores.insert(r.key.clone(), resource);
        dirty.merge(self.affected(&r));
        self.node_change(node_address, &mut dirty);
        self.relay_node_change(&r, node, &mut dirty);
        dirty
    }

    /// Removes an object (absent objects are fine); returns what must be re-rendered.
    pub fn delete(&mut self, kind: Kind, namespace: &str, name: &str) -> Dirty {
        let key = if kind.is_cluster_scoped() { ObjectKey::cluster(name) } else { ObjectKey::new(namespace, name) };
        let r = ObjRef::new(kind, key);
        let node_address = self.first_node_addresses().into_iter().map(str::to_owned).collect();
        let node = self.node_before(&r);
        let mut dirty = self.affected(&r);
        self.unlink(&r);
        self.stores.remove(kind, &r.key);
        self.node_change(node_address, &mut dirty);
        self.relay_node_change(&r, node, &mut dirty);
        dirty
    }

    /// Every Gateway, route and class: what a full re-render covers. Collected, not
    /// inserted one by one: the keys come sorted, and a set built from a sorted sequence needs
    /// no search per key.
    pub fn everything(&self) -> Dirty {
        fn routes<T>(kind: Kind, store: &Store<T>) -> impl Iterator<Item = ObjRef> + '_ {
            store.keys().map(move |k| ObjRef::new(kind, k.clone()))
        }
        Dirty {
            gateways: self.gateways().keys().cloned().collect(),
            routes: ROUTE_KINDS
                .into_iter()
                .filter_map(|kind| Some(routes(kind, self.route_store(kind)?)))
                .flatten()
                .collect(),
            classes: self.gateway_classes().keys().map(|k| k.name.to_string()).collect(),
        }
    }

    /// A copy of the object `r`, if stored.
    pub fn get(&self, r: &ObjRef) -> Option<Resource> {
        self.stores.get(r)
    }

    pub fn contains(&self, r: &ObjRef) -> bool {
        self.stores.contains(r)
    }

    /// The objects stored, of every kind, and the objects referred to (some of which may not
    /// exist): what the index holds, which a long-running daemon shows so that its growth can
    /// be told from the cluster's (`stunner_gateway_operator_index_objects`).
    pub fn sizes(&self) -> IndexSizes {
        IndexSizes { objects: self.stores.len(), referred: self.reverse.len() }
    }

    /// The objects of kind `kind` that refer to `target`, in key order.
    pub fn referrers<'a>(
        &'a self,
        target: ObjRefView<'_>,
        kind: Kind,
    ) -> impl Iterator<Item = &'a ObjectKey> + use<'a> {
        self.all_referrers(target).filter(move |r| r.kind == kind).map(|r| &r.key)
    }

    /// Every object that refers to `target`, by kind (in declaration order), then key: one
    /// search for several kinds.
    pub(crate) fn all_referrers<'a>(&'a self, target: ObjRefView<'_>) -> impl Iterator<Item = &'a ObjRef> + use<'a> {
        self.reverse.get(&target).into_iter().flatten()
    }

    /// The objects `source` refers to, in the order the object names them.
    pub(crate) fn references(&self, source: &ObjRef) -> &[ObjRef] {
        self.forward.get(source).map(Vec::as_slice).unwrap_or_default()
    }

    /// The addresses of the first Node (by name) that has an ExternalIP (each of them), else
    /// an ExternalDNS address: where NodePort Services are reachable from outside.
    pub(crate) fn first_node_addresses(&self) -> Vec<&str> {
        self.nodes().values().map(refs::node_external_addresses).find(|a| !a.is_empty()).unwrap_or_default()
    }

    /// Records what `source` refers to. Most objects refer to nothing (backend Services,
    /// Secrets, Nodes, Namespaces): they get no entry, not an 80-byte slot for an empty list.
    /// The list is kept at its length: collected from chained iterators, a Gateway's one
    /// reference to its class came with room for four.
    fn link(&mut self, source: &ObjRef, mut targets: Vec<ObjRef>) {
        for t in &targets {
            self.reverse.entry(t.clone()).or_default().insert(source.clone());
        }
        if !targets.is_empty() {
            targets.shrink_to_fit();
            self.forward.insert(source.clone(), targets);
        }
    }

    fn unlink(&mut self, source: &ObjRef) {
        for t in self.forward.remove(source).unwrap_or_default() {
            if let Some(set) = self.reverse.get_mut(&t) {
                set.remove(source);
                if set.is_empty() {
                    self.reverse.remove(&t);
                }
            }
        }
    }

    /// For a change of a Node, a copy of it as it is before (`Some(None)`: absent).
    fn node_before(&self, r: &ObjRef) -> Option<Option<Node>> {
        (r.kind == Kind::Node).then(|| self.nodes().get(&r.key).cloned())
    }

    /// A Node's change matters to the `RelayAddressDiscovered` condition of a Gateway with
    /// relay address discovery only through what the condition reads of it: whether the
    /// Gateway's dataplane pods can be scheduled there and whether it has an external address;
    /// why they cannot only while they can be scheduled on no Node (the condition then says
    /// why for each). Only the Gateways for which that changed are re-rendered: not for a label
    /// or taint that changes none of it, nor for a Node their pods cannot run on while they can
    /// run on another.
    fn relay_node_change(&self, r: &ObjRef, before: Option<Option<Node>>, dirty: &mut Dirty) {
        let Some(before) = before else { return };
        let after = self.nodes().get(&r.key);
        let gateways = self.gateways();
        for key in gateways.keys() {
            let Some(gw) = gateways.get(key).filter(|gw| refs::relay_discovery_enabled(gw)) else { continue };
            let dataplane = self.gateway_dataplane(gw);
            let view = |n: &Node| (schedulable(n, dataplane), refs::node_external_address(n).is_some());
            let (was, is) = (before.as_ref().map(view), after.map(view));
            if was == is {
                continue;
            }
            let eligible = |v: &Option<(Result<(), Unschedulable>, bool)>| v.as_ref().is_some_and(|(s, _)| s.is_ok());
            // Between absent and refused: it matters only where no Node takes the pods.
            let counts =
                eligible(&was) || eligible(&is) || !self.nodes().values().any(|n| schedulable(n, dataplane).is_ok());
            if counts {
                dirty.gateways.insert(key.clone());
            }
        }
    }

    /// Node events matter only through the first node's addresses, which every Gateway may use.
    fn node_change(&self, before: Vec<String>, dirty: &mut Dirty) {
        if self.first_node_addresses() != before {
            dirty.gateways.extend(self.gateways().keys().cloned());
        }
    }
}

#[cfg(test)]
mod tests;
