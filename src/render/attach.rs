//! Which routes attach to which Gateway listeners (spec §3.7).
//!
//! A listener takes the route kinds of its protocol, narrowed to its `allowedRoutes.kinds`
//! when it lists any (`listener::takes`): a TCPRoute asks for relaying to TCP peers, which
//! RFC 6062 allows only over a TCP or TLS client connection, so it attaches to TCP-like
//! listeners only; a listener of an unknown protocol takes none (docs/compatibility.md).

use super::listener::takes;
use crate::index::{
    Index, KeyView, Kind, ObjRef, ObjRefView, ObjectKey, ROUTE_KINDS, parent_gateway, parent_listener_set,
};
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

/// The unmasked routes naming a Gateway (or, with `kind` [`Kind::ListenerSet`], a
/// ListenerSet) as parent, kind by kind in [`ROUTE_KINDS`] order, each in key order (upstream
/// uses store order, which is unspecified). Referrers come by kind, in declaration order,
/// which is that order.
pub(crate) fn parent_routes<'a>(index: &'a Index, kind: Kind, parent: &ObjectKey) -> Vec<Route<'a>> {
    let referrers = index.all_referrers(ObjRefView::new(kind, parent));
    let route = |r: &'a ObjRef| {
        let stored = index.route_store(r.kind)?.get(&r.key).filter(|_| masked_by(index, r.view()).is_none())?;
        Some(Route { kind: r.kind, key: &r.key, route: stored })
    };
    referrers.filter_map(route).collect()
}

/// The object a listener is declared in, as a route's parentRef names it: a Gateway, or a
/// ListenerSet (whose listeners only routes naming it take, GEP-1713).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Holder<'a> {
    /// [`Kind::Gateway`] or [`Kind::ListenerSet`].
    pub(crate) kind: Kind,
    pub(crate) key: KeyView<'a>,
}

impl<'a> Holder<'a> {
    pub(crate) fn gateway(gw: &'a Gateway) -> Self {
        let key = KeyView::new(
            gw.metadata.namespace.as_deref().unwrap_or_default(),
            gw.metadata.name.as_deref().unwrap_or_default(),
        );
        Holder { kind: Kind::Gateway, key }
    }

    /// Whether parentRef `p` of a route in `route_ns` names this object.
    pub(crate) fn named_by(&self, route_ns: &str, p: &ParentReference) -> bool {
        let named = match self.kind {
            Kind::ListenerSet => parent_listener_set(route_ns, p),
            _ => parent_gateway(route_ns, p),
        };
        named == Some(self.key)
    }
}

/// Whether parentRef `p` of a route of `kind` in `route_ns` attaches to listener `l` (named
/// `section` in its object) of `holder`: it names the object, and the listener by its name
/// and its port if it gives them, and the listener takes the route's kind from its namespace.
pub(crate) fn accepts(
    index: &Index,
    holder: Holder<'_>,
    section: &str,
    l: &GatewayListeners,
    kind: Kind,
    route_ns: &str,
    p: &ParentReference,
) -> bool {
    holder.named_by(route_ns, p)
        && p.section_name.as_ref().is_none_or(|s| s == section)
        && p.port.is_none_or(|port| port == l.port)
        && takes(l, kind)
        && namespace_allowed(index, holder.key.namespace, l, route_ns)
}

/// Whether listener `l` of an object in `holder_ns` takes routes of `route_ns`.
fn namespace_allowed(index: &Index, holder_ns: &str, l: &GatewayListeners, route_ns: &str) -> bool {
    let namespaces = l.allowed_routes.as_ref().and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_ref()) {
        Some(From::All) => true,
        Some(From::Selector) => {
            namespaces.and_then(|n| n.selector.as_ref()).is_some_and(|s| namespace_selected(index, s, route_ns))
        }
        Some(From::Same) | None => holder_ns == route_ns,
    }
}

/// Whether the stored Namespace `ns` has labels `selector` selects (a Namespace not stored has
/// none to match).
pub(crate) fn namespace_selected(index: &Index, selector: &Selector, ns: &str) -> bool {
    let labels = index.namespaces().lookup(KeyView::cluster(ns)).map(|n| n.metadata.labels.as_ref());
    match labels {
        Some(labels) => selector_matches(selector, labels.unwrap_or(&BTreeMap::new())),
        None => false,
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

/// The keys of the routes attached to listener `l` (named `section` in `holder`), once per
/// matching parentRef (so a route may appear twice, as upstream).
pub(crate) fn listener_routes(
    index: &Index,
    holder: Holder<'_>,
    section: &str,
    l: &GatewayListeners,
    routes: &[Route<'_>],
) -> Vec<String> {
    routes
        .iter()
        .flat_map(|r| {
            let accepting = |p: &&ParentReference| accepts(index, holder, section, l, r.kind, r.namespace(), p);
            let n = r.route.spec.parent_refs.iter().filter(accepting).count();
            std::iter::repeat_n(r.key.to_string(), n)
        })
        .collect()
}
