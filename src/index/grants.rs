//! ReferenceGrants: whether an object may refer to one in another namespace (a route to its
//! backend, a Gateway or a ListenerSet to the Secret of a listener's certificate), and which objects a grant's
//! change can affect.
//!
//! A grant lives in the namespace of the objects it opens up. Its referrers are found through
//! the references of the objects of its `from` kinds in its `from` namespaces (route →
//! Service/StaticService, Gateway → Secret), so a grant's change marks only the routes and
//! Gateways of those namespaces that name an object of its `to` list.

use super::{GATEWAY_API_GROUP, Index, Kind, ObjRef, ObjectKey};
use crate::resources::{GROUP, ReferenceGrantFrom, ReferenceGrantTo};

/// The kinds a grant's `from` entry can name: those that refer across namespaces.
const FROM_KINDS: [Kind; 5] =
    [Kind::UdpRoute, Kind::GatewayUdpRoute, Kind::GatewayTcpRoute, Kind::Gateway, Kind::ListenerSet];
/// The kinds a grant's `to` entry can name: those referred to across namespaces.
const TO_KINDS: [Kind; 3] = [Kind::Service, Kind::StaticService, Kind::Secret];

/// The `(group, kind)` a grant names a kind by: in `from`, a route or a Gateway; in `to`, a
/// backend or a Secret. Listeners name route kinds so too (`supportedKinds`, `allowedRoutes`).
pub(crate) fn group_kind(kind: Kind) -> Option<(&'static str, &'static str)> {
    match kind {
        Kind::UdpRoute => Some((GROUP, "UDPRoute")),
        Kind::GatewayUdpRoute => Some((GATEWAY_API_GROUP, "UDPRoute")),
        Kind::GatewayTcpRoute => Some((GATEWAY_API_GROUP, "TCPRoute")),
        Kind::Gateway => Some((GATEWAY_API_GROUP, "Gateway")),
        Kind::ListenerSet => Some((GATEWAY_API_GROUP, "ListenerSet")),
        Kind::Service => Some(("", "Service")),
        Kind::StaticService => Some((GROUP, "StaticService")),
        Kind::Secret => Some(("", "Secret")),
        _ => None,
    }
}

/// Whether a `from` entry names objects of `kind`.
fn from_names(from: &ReferenceGrantFrom, kind: Kind) -> bool {
    FROM_KINDS.contains(&kind) && group_kind(kind) == Some((&from.group, &from.kind))
}

/// Whether a `to` entry names `target` (no name, or an empty one: every object of its kind).
fn to_names(to: &ReferenceGrantTo, target: &ObjRef) -> bool {
    let name = to.name.as_deref().filter(|n| !n.is_empty());
    TO_KINDS.contains(&target.kind)
        && group_kind(target.kind) == Some((&to.group, &to.kind))
        && name.is_none_or(|n| n == target.key.name)
}

impl Index {
    /// Whether `source` (a route or a Gateway) may refer to `target` (a backend or a Secret):
    /// always within a namespace, else only when a ReferenceGrant in the target's namespace
    /// allows the source's kind from the source's namespace to the target's kind (and name,
    /// when the grant gives one).
    pub(crate) fn reference_permitted(&self, source: &ObjRef, target: &ObjRef) -> bool {
        if source.key.namespace == target.key.namespace {
            return true;
        }
        self.reference_grants().in_namespace(&target.key.namespace).any(|(_, grant)| {
            let from =
                grant.spec.from.iter().any(|f| f.namespace == source.key.namespace && from_names(f, source.kind));
            from && grant.spec.to.iter().any(|t| to_names(t, target))
        })
    }

    /// The stored routes and Gateways whose references the stored grant `grant` can allow:
    /// objects of a `from` kind in a `from` namespace (other than the grant's) that name an
    /// object of a `to` entry in the grant's namespace.
    pub(super) fn granted_referrers(&self, grant: &ObjRef) -> Vec<ObjRef> {
        let Some(g) = self.reference_grants().get(&grant.key) else { return Vec::new() };
        let ns = grant.key.namespace.as_str();
        let allowed = |target: &ObjRef| target.key.namespace == ns && g.spec.to.iter().any(|to| to_names(to, target));
        let mut referrers = Vec::new();
        for from in g.spec.from.iter().filter(|f| f.namespace != ns) {
            for kind in FROM_KINDS.into_iter().filter(|k| from_names(from, *k)) {
                for key in self.keys_in_namespace(kind, &from.namespace) {
                    let source = ObjRef::new(kind, key);
                    if self.references(&source).iter().any(allowed) {
                        referrers.push(source);
                    }
                }
            }
        }
        referrers.sort();
        referrers.dedup();
        referrers
    }

    /// The keys of the stored objects of a `from` kind in namespace `ns`.
    fn keys_in_namespace(&self, kind: Kind, ns: &str) -> Vec<ObjectKey> {
        match self.route_store(kind) {
            Some(routes) => routes.in_namespace(ns).map(|(k, _)| k.clone()).collect(),
            None if kind == Kind::Gateway => self.gateways().in_namespace(ns).map(|(k, _)| k.clone()).collect(),
            None if kind == Kind::ListenerSet => {
                self.listener_sets().in_namespace(ns).map(|(k, _)| k.clone()).collect()
            }
            None => Vec::new(),
        }
    }
}
