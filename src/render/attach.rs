//! Which routes attach to which Gateway listeners (spec §3.7).

use crate::index::{Index, KeyView, Kind, ObjRef, ObjRefView, ObjectKey, parent_gateway};
use crate::resources::{ParentReference, UdpRoute};
use gateway_api::gateways::{
    Gateway, GatewayListeners, GatewayListenersAllowedRoutesNamespacesFrom as From,
    GatewayListenersAllowedRoutesNamespacesSelector as Selector,
};
use std::collections::BTreeMap;

/// A route the renderer considers: a STUNner v1 route, or a v1alpha2 route not masked by one.
#[derive(Debug, Clone, Copy)]
pub struct Route<'a> {
    /// `Kind::UdpRoute` or `Kind::GatewayUdpRoute`.
    pub kind: Kind,
    pub key: &'a ObjectKey,
    pub route: &'a UdpRoute,
}

impl<'a> Route<'a> {
    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }

    pub fn obj_ref(&self) -> ObjRef {
        ObjRef::new(self.kind, self.key.clone())
    }

    pub fn view(&self) -> ObjRefView<'a> {
        ObjRefView::new(self.kind, self.key)
    }
}

/// Whether a v1alpha2 route is hidden by the v1 route of the same name.
pub fn is_masked(index: &Index, r: ObjRefView<'_>) -> bool {
    r.kind == Kind::GatewayUdpRoute && index.udp_routes().contains(r.key)
}

/// A route by reference, if stored (masked v1alpha2 routes included).
pub fn route<'a>(index: &'a Index, r: ObjRefView<'_>) -> Option<Route<'a>> {
    let store = match r.kind {
        Kind::UdpRoute => index.udp_routes(),
        Kind::GatewayUdpRoute => index.gateway_udp_routes(),
        _ => return None,
    };
    store.lookup_key_value(r.key).map(|(key, route)| Route { kind: r.kind, key, route })
}

/// Whether objects of `kind` are routes.
pub fn is_route(kind: Kind) -> bool {
    matches!(kind, Kind::UdpRoute | Kind::GatewayUdpRoute)
}

/// The routes naming a Gateway as parent: v1 routes, then unmasked v1alpha2 routes, each in
/// key order (upstream uses store order, which is unspecified). Referrers come by kind, and
/// `Kind::UdpRoute` is declared before `Kind::GatewayUdpRoute`.
pub fn gateway_routes<'a>(index: &'a Index, gw: &ObjectKey) -> Vec<Route<'a>> {
    let referrers = index.all_referrers(ObjRefView::new(Kind::Gateway, gw));
    let route = |r: &'a ObjRef| {
        let stored = match r.kind {
            Kind::UdpRoute => index.udp_routes().get(&r.key),
            Kind::GatewayUdpRoute if !index.udp_routes().contains_key(&r.key) => index.gateway_udp_routes().get(&r.key),
            _ => None,
        };
        stored.map(|route| Route { kind: r.kind, key: &r.key, route })
    };
    referrers.filter_map(route).collect()
}

/// Whether parentRef `p` of a route in `route_ns` attaches to listener `l` of Gateway `gw`.
pub fn accepts(index: &Index, gw: &Gateway, l: &GatewayListeners, route_ns: &str, p: &ParentReference) -> bool {
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let names_gw = parent_gateway(route_ns, p)
        .is_some_and(|k| k.namespace == gw_ns && Some(k.name) == gw.metadata.name.as_deref());
    names_gw && p.section_name.as_ref().is_none_or(|s| *s == l.name) && namespace_allowed(index, gw_ns, l, route_ns)
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
pub fn listener_routes(index: &Index, gw: &Gateway, l: &GatewayListeners, routes: &[Route<'_>]) -> Vec<String> {
    routes
        .iter()
        .flat_map(|r| {
            let n = r.route.spec.parent_refs.iter().filter(|p| accepts(index, gw, l, r.namespace(), p)).count();
            std::iter::repeat_n(r.key.to_string(), n)
        })
        .collect()
}
