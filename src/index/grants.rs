//! ReferenceGrants: whether a route may use a backend in another namespace, and which routes a
//! grant's change can affect.
//!
//! A grant lives in the namespace of the objects it opens up. Its routes are found through the
//! reverse references of the backends in that namespace (route → Service/StaticService), so a
//! grant's change marks only the routes of its `from` namespaces that name a backend of its
//! `to` list, and their Gateways.

use super::{GATEWAY_API_GROUP, Index, Kind, ObjRef, ObjectKey};
use crate::resources::{GROUP, ReferenceGrantFrom, ReferenceGrantTo};

/// The `(group, kind)` a grant's `from` entry names a route kind by.
fn route_group_kind(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::UdpRoute => Some((GROUP, "UDPRoute")),
        Kind::GatewayUdpRoute => Some((GATEWAY_API_GROUP, "UDPRoute")),
        _ => None,
    }
}

/// The `(group, kind)` a grant's `to` entry names a backend kind by.
fn backend_group_kind(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::Service => Some(("", "Service")),
        Kind::StaticService => Some((GROUP, "StaticService")),
        _ => None,
    }
}

/// The route kinds a `from` entry names.
fn from_route_kinds(from: &ReferenceGrantFrom) -> impl Iterator<Item = Kind> + '_ {
    [Kind::UdpRoute, Kind::GatewayUdpRoute]
        .into_iter()
        .filter(|k| route_group_kind(*k) == Some((&from.group, &from.kind)))
}

/// The backend kind a `to` entry names, if it is one routes can use.
fn to_backend_kind(to: &ReferenceGrantTo) -> Option<Kind> {
    [Kind::Service, Kind::StaticService].into_iter().find(|k| backend_group_kind(*k) == Some((&to.group, &to.kind)))
}

/// The name a `to` entry is restricted to (unset or empty: every object of its kind).
fn to_name(to: &ReferenceGrantTo) -> Option<&str> {
    to.name.as_deref().filter(|n| !n.is_empty())
}

impl Index {
    /// Whether `route` may refer to `backend`: always within a namespace, else only when a
    /// ReferenceGrant in the backend's namespace allows the route's kind from the route's
    /// namespace to the backend's kind (and name, when the grant gives one).
    pub fn reference_permitted(&self, route: &ObjRef, backend: &ObjRef) -> bool {
        if route.key.namespace == backend.key.namespace {
            return true;
        }
        let ns = &backend.key.namespace;
        let in_ns = self.reference_grants().range(ObjectKey::new(ns.as_str(), "")..);
        in_ns.take_while(|(k, _)| k.namespace == *ns).any(|(_, grant)| {
            let from = grant
                .spec
                .from
                .iter()
                .any(|f| f.namespace == route.key.namespace && from_route_kinds(f).any(|kind| kind == route.kind));
            let to =
                grant.spec.to.iter().any(|t| {
                    to_backend_kind(t) == Some(backend.kind) && to_name(t).is_none_or(|n| n == backend.key.name)
                });
            from && to
        })
    }

    /// The stored routes whose backends the stored grant `grant` can allow: routes of a `from`
    /// kind in a `from` namespace (other than the grant's) naming a backend of a `to` entry.
    pub(super) fn granted_routes(&self, grant: &ObjRef) -> Vec<ObjRef> {
        let Some(g) = self.reference_grants().get(&grant.key) else { return Vec::new() };
        let ns = grant.key.namespace.as_str();
        let mut routes = Vec::new();
        for to in &g.spec.to {
            let Some(backend_kind) = to_backend_kind(to) else { continue };
            let backends: Vec<&ObjRef> = match to_name(to) {
                Some(name) => {
                    let target = ObjRef::new(backend_kind, ObjectKey::new(ns, name));
                    self.reverse.get_key_value(&target).map(|(k, _)| k).into_iter().collect()
                }
                None => self
                    .reverse
                    .range(ObjRef::new(backend_kind, ObjectKey::new(ns, ""))..)
                    .map(|(k, _)| k)
                    .take_while(|k| k.kind == backend_kind && k.key.namespace == ns)
                    .collect(),
            };
            for from in g.spec.from.iter().filter(|f| f.namespace != ns) {
                for route_kind in from_route_kinds(from) {
                    for backend in &backends {
                        let referrers =
                            self.referrers(backend.view(), route_kind).filter(|k| k.namespace == from.namespace);
                        routes.extend(referrers.map(|k| ObjRef::new(route_kind, k.clone())));
                    }
                }
            }
        }
        routes.sort();
        routes.dedup();
        routes
    }
}
