//! The index: an in-memory store of every object the operator watches, with the reverse
//! references that let one event mark only the Gateways it affects (design.md §2).
//!
//! Sources (kube watchers, the file watcher) feed it with [`Index::apply`], [`Index::delete`] and
//! [`Index::reset`]; each returns the [`Dirty`] set to re-render. The renderer reads it through
//! the typed accessors and the reverse-reference queries. Everything is keyed and iterated in
//! [`ObjectKey`] order, so nothing here depends on insertion order.

mod convert;
mod decode;
mod dirty;
mod grants;
mod key;
mod refs;

pub use convert::convert_gateway_udp_route;
pub use decode::{DecodeError, decode_value};
pub use dirty::Dirty;
pub use key::{ObjRef, ObjectKey};
pub use refs::{GATEWAY_API_GROUP, backend_target, class_config, node_external_address, parent_gateway};

use crate::resources::{
    Dataplane, Gateway, GatewayClass, GatewayConfig, GatewayUdpRoute, ReferenceGrant, StaticService, UdpRoute,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet};

/// A typed map of one kind, by key.
pub type Store<T> = BTreeMap<ObjectKey, T>;

/// Declares the watched kinds once: the [`Resource`] and [`Kind`] enums, the per-kind stores and
/// their accessors all follow from this list.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident($ty:ty) in $field:ident, cluster = $cluster:literal;)*) => {
        /// One watched object. [`Resource::GatewayUdpRoute`] holds a Gateway API v1alpha2 route
        /// already converted to STUNner's v1 shape (see [`convert_gateway_udp_route`]).
        // Objects are moved once from a source into the store; boxing each variant would only
        // add an allocation per event.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum Resource {
            $($(#[$doc])* $variant($ty),)*
        }

        /// The kinds the index stores.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Kind {
            $($variant,)*
        }

        impl Kind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant,)*];

            /// Whether objects of this kind are cluster-scoped (their keys have no namespace).
            pub fn is_cluster_scoped(self) -> bool {
                match self {
                    $(Kind::$variant => $cluster,)*
                }
            }
        }

        impl Resource {
            pub fn kind(&self) -> Kind {
                match self {
                    $(Resource::$variant(_) => Kind::$variant,)*
                }
            }

            pub fn meta(&self) -> &ObjectMeta {
                match self {
                    $(Resource::$variant(o) => &o.metadata,)*
                }
            }

            pub fn meta_mut(&mut self) -> &mut ObjectMeta {
                match self {
                    $(Resource::$variant(o) => &mut o.metadata,)*
                }
            }
        }

        #[derive(Debug, Clone, Default)]
        struct Stores {
            $($field: Store<$ty>,)*
        }

        impl Stores {
            /// Stores `r`, replacing the object of the same kind and key.
            fn insert(&mut self, key: ObjectKey, r: Resource) {
                match r {
                    $(Resource::$variant(o) => { self.$field.insert(key, o); })*
                }
            }

            fn remove(&mut self, kind: Kind, key: &ObjectKey) -> Option<Resource> {
                match kind {
                    $(Kind::$variant => self.$field.remove(key).map(Resource::$variant),)*
                }
            }

            fn get(&self, r: &ObjRef) -> Option<Resource> {
                match r.kind {
                    $(Kind::$variant => self.$field.get(&r.key).cloned().map(Resource::$variant),)*
                }
            }

            fn contains(&self, r: &ObjRef) -> bool {
                match r.kind {
                    $(Kind::$variant => self.$field.contains_key(&r.key),)*
                }
            }

            fn keys(&self, kind: Kind) -> Vec<ObjectKey> {
                match kind {
                    $(Kind::$variant => self.$field.keys().cloned().collect(),)*
                }
            }
        }

        impl Index {
            $(
                $(#[$doc])*
                pub fn $field(&self) -> &Store<$ty> {
                    &self.stores.$field
                }
            )*
        }
    };
}

kinds! {
    /// Gateway API `GatewayClass` (cluster-scoped).
    GatewayClass(GatewayClass) in gateway_classes, cluster = true;
    /// Gateway API `Gateway`.
    Gateway(Gateway) in gateways, cluster = false;
    /// STUNner `GatewayConfig`.
    GatewayConfig(GatewayConfig) in gateway_configs, cluster = false;
    /// STUNner `Dataplane` (cluster-scoped).
    Dataplane(Dataplane) in dataplanes, cluster = true;
    /// STUNner `UDPRoute` (`stunner.l7mp.io/v1`).
    UdpRoute(UdpRoute) in udp_routes, cluster = false;
    /// Gateway API `UDPRoute` (`gateway.networking.k8s.io/v1alpha2`), in STUNner's v1 shape.
    GatewayUdpRoute(UdpRoute) in gateway_udp_routes, cluster = false;
    /// STUNner `StaticService`.
    StaticService(StaticService) in static_services, cluster = false;
    /// Core `Service`: route backends and the Gateways' own LoadBalancer Services.
    Service(Service) in services, cluster = false;
    /// `discovery.k8s.io/v1` `EndpointSlice` of backend Services.
    EndpointSlice(EndpointSlice) in endpoint_slices, cluster = false;
    /// Core `Endpoints`, used instead of EndpointSlices when those are disabled.
    Endpoints(Endpoints) in endpoints, cluster = false;
    /// Core `Secret`: auth credentials and TLS certificates.
    Secret(Secret) in secrets, cluster = false;
    /// Core `Node` (cluster-scoped): public addresses for NodePort Services.
    Node(Node) in nodes, cluster = true;
    /// Core `Namespace` (cluster-scoped): route attachment by namespace selector.
    Namespace(Namespace) in namespaces, cluster = true;
    /// `apps/v1` `Deployment`: the managed dataplanes.
    Deployment(Deployment) in deployments, cluster = false;
    /// Gateway API `ReferenceGrant`: which cross-namespace backend references are allowed
    /// (read with `--enforce-reference-grants` only).
    ReferenceGrant(ReferenceGrant) in reference_grants, cluster = false;
}

impl Resource {
    /// The object's key; cluster-scoped kinds ignore any namespace the object carries.
    pub fn key(&self) -> ObjectKey {
        let meta = self.meta();
        let name = meta.name.clone().unwrap_or_default();
        if self.kind().is_cluster_scoped() {
            ObjectKey::cluster(name)
        } else {
            ObjectKey::new(meta.namespace.clone().unwrap_or_default(), name)
        }
    }

    pub fn obj_ref(&self) -> ObjRef {
        ObjRef::new(self.kind(), self.key())
    }
}

/// Converts on the way in, so that the index only ever holds v1-shaped routes.
impl From<GatewayUdpRoute> for Resource {
    fn from(route: GatewayUdpRoute) -> Self {
        Resource::GatewayUdpRoute(convert_gateway_udp_route(route))
    }
}

macro_rules! from_typed {
    ($($variant:ident($ty:ty)),*) => {
        $(impl From<$ty> for Resource {
            fn from(o: $ty) -> Self {
                Resource::$variant(o)
            }
        })*
    };
}

from_typed!(
    GatewayClass(GatewayClass),
    Gateway(Gateway),
    GatewayConfig(GatewayConfig),
    Dataplane(Dataplane),
    UdpRoute(UdpRoute),
    StaticService(StaticService),
    Service(Service),
    EndpointSlice(EndpointSlice),
    Endpoints(Endpoints),
    Secret(Secret),
    Node(Node),
    Namespace(Namespace),
    Deployment(Deployment),
    ReferenceGrant(ReferenceGrant)
);

/// Every watched object, with forward and reverse references between them.
#[derive(Debug, Clone, Default)]
pub struct Index {
    stores: Stores,
    /// What each object refers to (see `refs::forward_refs`).
    forward: BTreeMap<ObjRef, Vec<ObjRef>>,
    /// The reverse of `forward`: who refers to an object (which may not exist).
    reverse: BTreeMap<ObjRef, BTreeSet<ObjRef>>,
}

impl Index {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an object; returns what must be re-rendered.
    pub fn apply(&mut self, resource: Resource) -> Dirty {
        let r = resource.obj_ref();
        let node_address = self.first_node_address().map(str::to_owned);
        let mut dirty = self.affected(&r);
        self.unlink(&r);
        self.link(&r, refs::forward_refs(&resource));
        self.stores.insert(r.key.clone(), resource);
        dirty.merge(self.affected(&r));
        self.node_change(node_address, &mut dirty);
        dirty
    }

    /// Removes an object (absent objects are fine); returns what must be re-rendered.
    pub fn delete(&mut self, kind: Kind, namespace: &str, name: &str) -> Dirty {
        let key = if kind.is_cluster_scoped() { ObjectKey::cluster(name) } else { ObjectKey::new(namespace, name) };
        let r = ObjRef::new(kind, key);
        let node_address = self.first_node_address().map(str::to_owned);
        let mut dirty = self.affected(&r);
        self.unlink(&r);
        self.stores.remove(kind, &r.key);
        self.node_change(node_address, &mut dirty);
        dirty
    }

    /// Replaces every object of `kind` by `objects` (a relist); objects of other kinds are
    /// ignored. Returns what must be re-rendered: everything the old or the new objects affect.
    pub fn reset(&mut self, kind: Kind, objects: Vec<Resource>) -> Dirty {
        let node_address = self.first_node_address().map(str::to_owned);
        let mut dirty = Dirty::default();
        for key in self.stores.keys(kind) {
            let r = ObjRef::new(kind, key);
            dirty.merge(self.affected(&r));
            self.unlink(&r);
            self.stores.remove(kind, &r.key);
        }
        let mut added = Vec::new();
        for resource in objects.into_iter().filter(|o| o.kind() == kind) {
            let r = resource.obj_ref();
            self.unlink(&r);
            self.link(&r, refs::forward_refs(&resource));
            self.stores.insert(r.key.clone(), resource);
            added.push(r);
        }
        for r in &added {
            dirty.merge(self.affected(r));
        }
        self.node_change(node_address, &mut dirty);
        dirty
    }

    /// Every Gateway, route and class: what a full re-render covers.
    pub fn everything(&self) -> Dirty {
        let mut dirty = Dirty::default();
        dirty.gateways.extend(self.gateways().keys().cloned());
        dirty.routes.extend(self.udp_routes().keys().map(|k| ObjRef::new(Kind::UdpRoute, k.clone())));
        dirty.routes.extend(self.gateway_udp_routes().keys().map(|k| ObjRef::new(Kind::GatewayUdpRoute, k.clone())));
        dirty.classes.extend(self.gateway_classes().keys().map(|k| k.name.clone()));
        dirty
    }

    /// A copy of the object `r`, if stored.
    pub fn get(&self, r: &ObjRef) -> Option<Resource> {
        self.stores.get(r)
    }

    pub fn contains(&self, r: &ObjRef) -> bool {
        self.stores.contains(r)
    }

    /// The objects of kind `kind` that refer to `target`, in key order.
    pub fn referrers<'a>(&'a self, target: &ObjRef, kind: Kind) -> impl Iterator<Item = &'a ObjectKey> + use<'a> {
        self.reverse.get(target).into_iter().flatten().filter(move |r| r.kind == kind).map(|r| &r.key)
    }

    /// The objects `source` refers to, in the order the object names them.
    pub fn references(&self, source: &ObjRef) -> &[ObjRef] {
        self.forward.get(source).map(Vec::as_slice).unwrap_or_default()
    }

    /// The address of the first Node (by name) that has an ExternalIP, else an ExternalDNS
    /// address: where NodePort Services are reachable from outside.
    pub fn first_node_address(&self) -> Option<&str> {
        self.nodes().values().find_map(refs::node_external_address)
    }

    fn link(&mut self, source: &ObjRef, targets: Vec<ObjRef>) {
        for t in &targets {
            self.reverse.entry(t.clone()).or_default().insert(source.clone());
        }
        self.forward.insert(source.clone(), targets);
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

    /// Node events matter only through the first node's address, which every Gateway may use.
    fn node_change(&self, before: Option<String>, dirty: &mut Dirty) {
        if self.first_node_address() != before.as_deref() {
            dirty.gateways.extend(self.gateways().keys().cloned());
        }
    }
}

#[cfg(test)]
mod tests;
