//! Which routes attach to which Gateway listeners (spec §3.7).
//!
//! A listener takes the route kinds of its protocol, narrowed to its `allowedRoutes.kinds`
//! when it lists any (`listener::takes`): a TCPRoute asks for relaying to TCP peers, which
//! RFC 6062 allows only over a TCP or TLS client connection, so it attaches to TCP-like
//! listeners only; a listener of an unknown protocol takes none (docs/compatibility.md).

use super::listener::takes;
use crate::index::{Index, KeyView, Kind, ObjRef, ObjRefView, ObjectKey, ROUTE_KINDS, parent_gateway};
use crate::resources::{ParentReference, UdpRoute};
use gateway_api::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom as From,
    GatewayListenersAllowedRoutesNamespacesSelector as Selector,
};
use std::collections::BTreeMap;

/// A route the renderer considers: a STUNner v1 route, or a Gateway API route not masked by a
/// route of an earlier kind (see [`ROUTE_KINDS`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route<'a> {
    /// One of [`ROUTE_KINDS`].
    pub kind: Kind,
    pub key: &'a ObjectKey,
    pub route: &'a UdpRoute,
}

impl<'a> Route<'a> {
    pub(crate) fn namespace(&self) -> &str {
        &self.key.namespace
    }

    pub(crate) fn obj_ref(&self) -> ObjRef {
        ObjRef::new(self.kind, self.key.clone())
    }

    pub(crate) fn view(&self) -> ObjRefView<'a> {
        ObjRefView::new(self.kind, self.key)
    }
}

/// The kind of route that hides `r`: a stored route of an earlier kind with the same key.
pub(crate) fn masked_by(index: &Index, r: ObjRefView<'_>) -> Option<Kind> {
    let earlier = ROUTE_KINDS.into_iter().take_while(|k| *k != r.kind);
    earlier.filter(|_| is_route(r.kind)).find(|k| index.route_store(*k).is_some_and(|s| s.contains(r.key)))
}

/// A route by reference, if stored (masked routes included).
pub(crate) fn route<'a>(index: &'a Index, r: ObjRefView<'_>) -> Option<Route<'a>> {
    let store = index.route_store(r.kind)?;
    store.lookup_key_value(r.key).map(|(key, route)| Route { kind: r.kind, key, route })
}

/// Whether objects of `kind` are routes.
pub(crate) fn is_route(kind: Kind) -> bool {
    ROUTE_KINDS.contains(&kind)
}

/// The unmasked routes naming a Gateway as parent, kind by kind in [`ROUTE_KINDS`] order, each
/// in key order (upstream uses store order, which is unspecified). Referrers come by kind, in
/// declaration order, which is that order.
pub(crate) fn gateway_routes<'a>(index: &'a Index, gw: &ObjectKey) -> Vec<Route<'a>> {
    let referrers = index.all_referrers(ObjRefView::new(Kind::Gateway, gw));
    let route = |r: &'a ObjRef| {
        let stored = index.route_store(r.kind)?.get(&r.key).filter(|_| masked_by(index, r.view()).is_none())?;
        Some(Route { kind: r.kind, key: &r.key, route: stored })
    };
    referrers.filter_map(route).collect()
}

/// Whether parentRef `p` of a route of `kind` in `route_ns` attaches to listener `l` of
/// Gateway `gw`.
pub(crate) fn accepts(
    index: &Index,
    gw: &Gateway,
    l: &GatewayListeners,
    kind: Kind,
    route_ns: &str,
    p: &ParentReference,
) -> bool {
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let names_gw = parent_gateway(route_ns, p)
        .is_some_and(|k| k.namespace == gw_ns && Some(k.name) == gw.metadata.name.as_deref());
    names_gw
        && p.section_name.as_ref().is_none_or(|s| *s == l.name)
        && takes(l, kind)
        && namespace_allowed(index, gw_ns, l, route_ns)
}

fn namespace_allowed(index: &Index, gw_ns: &str, l: &GatewayListeners, route_ns: &str) -> bool {
    let namespaces = l.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_ref()) {
        Some(From::All) => true,
        Some(From::Selector) => {
            let Some(selector) = namespaces.and_then(|n| n.selector.as_ref()) else { return false };
            let labels = index.namespaces().lookup(KeyView::cluster(route_ns)).map(|n| n.metadata.labels.as_ref());
            match labels {
                Some(labels) => selector_matches(selector, labels.unwrap_or(&BTreeMap::new())),
                None => false,
            }
        }
        Some(From::Same) | None => gw_ns == route_ns,
    }
}

/// A Kubernetes label selector; an unknown operator matches nothing (apimachinery rejects it).
fn selector_matches(s: &Selector, labels: &BTreeMap<String, String>) -> bool {
    let match_labels = s.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let expressions = s.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    match_labels && expressions
}

/// The keys of the routes attached to listener `l`, once per matching parentRef (so a route
/// may appear twice, as upstream).
pub(crate) fn listener_routes(index: &Index, gw: &Gateway, l: &GatewayListeners, routes: &[Route<'_>]) -> Vec<String> {
    routes
        .iter()
        .flat_map(|r| {
            let n = r.route.spec.parent_refs.iter().filter(|p| accepts(index, gw, l, r.kind, r.namespace(), p)).count();
            std::iter::repeat_n(r.key.to_string(), n)
        })
        .collect()
}
