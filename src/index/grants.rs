//! ReferenceGrants: whether a route may use a backend in another namespace, and which routes a
//! grant's change can affect.
//!
//! A grant lives in the namespace of the objects it opens up. Its routes are found through the
//! references of the routes of its `from` namespaces (route → Service/StaticService), so a
//! grant's change marks only the routes of those namespaces that name a backend of its `to`
//! list, and their Gateways.

use super::{GATEWAY_API_GROUP, Index, Kind, ObjRef, ROUTE_KINDS};
use crate::resources::{GROUP, ReferenceGrantFrom, ReferenceGrantTo};

/// The `(group, kind)` a grant's `from` entry names a route kind by.
fn route_group_kind(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::UdpRoute => Some((GROUP, "UDPRoute")),
        Kind::GatewayUdpRoute => Some((GATEWAY_API_GROUP, "UDPRoute")),
        Kind::GatewayTcpRoute => Some((GATEWAY_API_GROUP, "TCPRoute")),
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
    ROUTE_KINDS.into_iter().filter(|k| route_group_kind(*k) == Some((&from.group, &from.kind)))
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
    pub(crate) fn reference_permitted(&self, route: &ObjRef, backend: &ObjRef) -> bool {
        if route.key.namespace == backend.key.namespace {
            return true;
        }
        let ns = &backend.key.namespace;
        self.reference_grants().in_namespace(ns).any(|(_, grant)| {
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
    /// kind in a `from` namespace (other than the grant's) that name a backend of a `to` entry.
    pub(super) fn granted_routes(&self, grant: &ObjRef) -> Vec<ObjRef> {
        let Some(g) = self.reference_grants().get(&grant.key) else { return Vec::new() };
        let ns = grant.key.namespace.as_str();
        let allowed = |backend: &ObjRef| {
            backend.key.namespace == ns
                && g.spec.to.iter().any(|to| {
                    to_backend_kind(to) == Some(backend.kind) && to_name(to).is_none_or(|n| n == backend.key.name)
                })
        };
        let mut routes = Vec::new();
        for from in g.spec.from.iter().filter(|f| f.namespace != ns) {
            for kind in from_route_kinds(from) {
                for (key, _) in self.route_store(kind).into_iter().flat_map(|s| s.in_namespace(&from.namespace)) {
                    let route = ObjRef::new(kind, key.clone());
                    if self.references(&route).iter().any(allowed) {
                        routes.push(route);
                    }
                }
            }
        }
        routes.sort();
        routes.dedup();
        routes
    }
}
