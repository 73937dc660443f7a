//! References between objects, and what an object's change affects.
//!
//! Each object names the objects it depends on ([`forward_refs`]); the index keeps the reverse.
//! [`Index::affected`] walks from a changed object to the Gateways whose rendering reads it,
//! the routes whose status may change and the GatewayClasses whose status may change.

use super::{Dirty, Index, KeyView, Kind, ObjRef, ObjRefView, ObjectKey, ROUTE_KINDS, Resource};
use crate::keys::{ENABLE_RELAY_ADDRESS_DISCOVERY, RELATED_GATEWAY_NAME};
use crate::resources::{BackendRef, GROUP, Gateway, GatewayClass, ListenerSet, ParentReference, UdpRoute};
use k8s_openapi::api::core::v1::Node;

/// The Gateway API group, the default group of a parentRef.
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

/// The Gateway a route's parentRef names, if it names a Gateway at all.
pub fn parent_gateway<'a>(route_namespace: &'a str, p: &'a ParentReference) -> Option<KeyView<'a>> {
    let group_ok = p.group.as_deref().is_none_or(|g| g == GATEWAY_API_GROUP);
    let kind_ok = p.kind.as_deref().is_none_or(|k| k == "Gateway");
    (group_ok && kind_ok).then(|| KeyView::new(p.namespace.as_deref().unwrap_or(route_namespace), &p.name))
}

/// The ListenerSet a route's parentRef names, if it names one (kind `ListenerSet`, the
/// Gateway API group).
pub fn parent_listener_set<'a>(route_namespace: &'a str, p: &'a ParentReference) -> Option<KeyView<'a>> {
    let group_ok = p.group.as_deref().is_none_or(|g| g == GATEWAY_API_GROUP);
    (group_ok && p.kind.as_deref() == Some("ListenerSet"))
        .then(|| KeyView::new(p.namespace.as_deref().unwrap_or(route_namespace), &p.name))
}

/// The Gateway a ListenerSet's `parentRef` names, if it names a Gateway (the one kind of
/// parent the Gateway API defines for it).
pub fn listener_set_gateway(ls: &ListenerSet) -> Option<KeyView<'_>> {
    let p = &ls.spec.parent_ref;
    let group_ok = p.group.as_deref().is_none_or(|g| g == GATEWAY_API_GROUP);
    let kind_ok = p.kind.as_deref().is_none_or(|k| k == "Gateway");
    let namespace = p.namespace.as_deref().or(ls.metadata.namespace.as_deref()).unwrap_or_default();
    (group_ok && kind_ok).then(|| KeyView::new(namespace, &p.name))
}

/// The Service or StaticService a backendRef names, if it is one of those.
pub fn backend_target(route_namespace: &str, b: &BackendRef) -> Option<ObjRef> {
    let key = ObjectKey::new(b.namespace.as_deref().unwrap_or(route_namespace), &b.name);
    match (b.group.as_deref().unwrap_or(""), b.kind.as_deref().unwrap_or("Service")) {
        ("", "Service") => Some(ObjRef::new(Kind::Service, key)),
        (GROUP, "StaticService") => Some(ObjRef::new(Kind::StaticService, key)),
        _ => None,
    }
}

/// The GatewayConfig a GatewayClass's `parametersRef` names, when it has the shape STUNner
/// requires (group `stunner.l7mp.io`, kind `GatewayConfig`, a namespace and a name).
pub fn class_config(class: &GatewayClass) -> Option<KeyView<'_>> {
    let p = class.spec.parameters_ref.as_ref()?;
    let namespace = p.namespace.as_deref().filter(|ns| !ns.is_empty())?;
    (p.group == GROUP && p.kind == "GatewayConfig" && !p.name.is_empty()).then(|| KeyView::new(namespace, &p.name))
}

/// What a Gateway's `spec.infrastructure.parametersRef` names: nothing (`None`), or a
/// GatewayConfig of its own namespace (`Some(Ok)`), or something else (`Some(Err)`, which the
/// Gateway cannot be rendered with).
pub fn gateway_config(gw: &Gateway) -> Option<Result<KeyView<'_>, ()>> {
    let p = gw.spec.infrastructure.as_ref()?.parameters_ref.as_ref()?;
    let namespace = gw.metadata.namespace.as_deref().unwrap_or_default();
    let names_config = p.group == GROUP && p.kind == "GatewayConfig" && !p.name.is_empty();
    Some(if names_config { Ok(KeyView::new(namespace, &p.name)) } else { Err(()) })
}

/// The GatewayConfig a Gateway of `class` is rendered with: the one its own
/// `spec.infrastructure.parametersRef` names, else its class's (`None` when the one that
/// counts is unusable).
pub fn effective_config<'a>(gw: &'a Gateway, class: &'a GatewayClass) -> Option<KeyView<'a>> {
    match gateway_config(gw) {
        Some(named) => named.ok(),
        None => class_config(class),
    }
}

/// A Node's external address: its first ExternalIP, else its first ExternalDNS name.
pub fn node_external_address(node: &Node) -> Option<&str> {
    let addresses = node.status.as_ref()?.addresses.as_deref()?;
    let of_type = |t: &str| addresses.iter().find(|a| a.type_ == t && !a.address.is_empty());
    of_type("ExternalIP").or_else(|| of_type("ExternalDNS")).map(|a| a.address.as_str())
}

/// A Node's external addresses as NodePort Services publish them: its ExternalIPs (one of each
/// family on a dual-stack node), else its first ExternalDNS name.
pub(crate) fn node_external_addresses(node: &Node) -> Vec<&str> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_deref()).unwrap_or_default();
    let ips: Vec<&str> = addresses
        .iter()
        .filter(|a| a.type_ == "ExternalIP" && !a.address.is_empty())
        .map(|a| a.address.as_str())
        .collect();
    if !ips.is_empty() {
        return ips;
    }
    node_external_address(node).into_iter().collect()
}

/// Whether a Gateway asks for relay address discovery (`render::relay`), for which the
/// external addresses of the Nodes its dataplane pods can be scheduled on matter.
pub fn relay_discovery_enabled(gw: &Gateway) -> bool {
    let annotations = gw.metadata.annotations.as_ref();
    annotations.and_then(|a| a.get(ENABLE_RELAY_ADDRESS_DISCOVERY)).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn namespace_of(r: &Resource) -> &str {
    r.meta().namespace.as_deref().unwrap_or("")
}

fn annotated_gateway(r: &Resource) -> Option<ObjRef> {
    let value = r.meta().annotations.as_ref()?.get(RELATED_GATEWAY_NAME)?;
    value.contains('/').then(|| ObjRef::new(Kind::Gateway, ObjectKey::parse(value)))
}

fn route_refs(ns: &str, route: &UdpRoute) -> Vec<ObjRef> {
    let parents = route.spec.parent_refs.iter().filter_map(|p| {
        let gateway = parent_gateway(ns, p).map(|k| ObjRef::new(Kind::Gateway, k.to_owned()));
        gateway.or_else(|| Some(ObjRef::new(Kind::ListenerSet, parent_listener_set(ns, p)?.to_owned())))
    });
    let backends = route.spec.rules.iter().flat_map(|r| &r.backend_refs).filter_map(|b| backend_target(ns, b));
    parents.chain(backends).chain([ObjRef::new(Kind::Namespace, ObjectKey::cluster(ns))]).collect()
}

/// What an object depends on (its edges in the reference graph).
pub(super) fn forward_refs(r: &Resource) -> Vec<ObjRef> {
    let ns = namespace_of(r);
    match r {
        Resource::GatewayClass(c) => {
            class_config(c).map(|k| ObjRef::new(Kind::GatewayConfig, k.to_owned())).into_iter().collect()
        }
        Resource::Gateway(gw) => {
            let class = ObjRef::new(Kind::GatewayClass, ObjectKey::cluster(&gw.spec.gateway_class_name));
            let config =
                gateway_config(gw).and_then(Result::ok).map(|k| ObjRef::new(Kind::GatewayConfig, k.to_owned()));
            let certs = gw.spec.listeners.iter().filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref()).flatten();
            let secrets =
                certs.map(|c| ObjRef::new(Kind::Secret, ObjectKey::new(c.namespace.as_deref().unwrap_or(ns), &c.name)));
            std::iter::once(class).chain(config).chain(secrets).collect()
        }
        Resource::GatewayConfig(gc) => {
            let dataplane = gc.spec.dataplane.as_deref().unwrap_or(crate::resources::DEFAULT_DATAPLANE);
            let secret = gc
                .spec
                .auth_ref
                .as_ref()
                .map(|a| ObjRef::new(Kind::Secret, ObjectKey::new(a.namespace.as_deref().unwrap_or(ns), &a.name)));
            std::iter::once(ObjRef::new(Kind::Dataplane, ObjectKey::cluster(dataplane))).chain(secret).collect()
        }
        Resource::UdpRoute(route) | Resource::GatewayUdpRoute(route) | Resource::GatewayTcpRoute(route) => {
            route_refs(ns, route)
        }
        // Its Gateway, its certificates' Secrets, and its Namespace (whose labels the Gateway's
        // `allowedListeners` selector reads).
        Resource::ListenerSet(ls) => {
            let gateway = listener_set_gateway(ls).map(|k| ObjRef::new(Kind::Gateway, k.to_owned()));
            let certs = ls.spec.listeners.iter().filter_map(|l| l.tls.as_ref()?.certificate_refs.as_ref()).flatten();
            let secrets =
                certs.map(|c| ObjRef::new(Kind::Secret, ObjectKey::new(c.namespace.as_deref().unwrap_or(ns), &c.name)));
            let namespace = ObjRef::new(Kind::Namespace, ObjectKey::cluster(ns));
            gateway.into_iter().chain(secrets).chain([namespace]).collect()
        }
        Resource::Service(_) | Resource::Deployment(_) => annotated_gateway(r).into_iter().collect(),
        Resource::EndpointSlice(s) => {
            s.service.iter().map(|name| ObjRef::new(Kind::Service, ObjectKey::new(ns, name))).collect()
        }
        Resource::Endpoints(_) => vec![ObjRef::new(Kind::Service, r.key())],
        // A lingering DaemonSet matters to the Gateway it names, else to the Gateway of its name
        // (the Go operator's carry no annotation; a long Gateway name is shortened in ours).
        Resource::DaemonSet(_) => vec![annotated_gateway(r).unwrap_or_else(|| ObjRef::new(Kind::Gateway, r.key()))],
        // Dataplanes, StaticServices, Secrets, Nodes, Namespaces and ReferenceGrants are
        // referred to, and refer to nothing; so does a kind that only needs to be stored.
        _ => Vec::new(),
    }
}

impl Index {
    /// What a change of `r` affects, judged on the current contents (the index calls this both
    /// before and after a change, so references that were removed count too).
    pub(super) fn affected(&self, r: &ObjRef) -> Dirty {
        let mut dirty = Dirty::default();
        self.walk(r, &mut dirty);
        dirty
    }

    fn walk(&self, r: &ObjRef, dirty: &mut Dirty) {
        let referrers = |kind| self.referrers(r.view(), kind).cloned().collect::<Vec<_>>();
        match r.kind {
            Kind::GatewayClass => {
                dirty.classes.insert(r.key.name.to_string());
                referrers(Kind::Gateway).into_iter().for_each(|gw| self.mark_gateway(&gw, dirty));
            }
            Kind::GatewayConfig => {
                for c in referrers(Kind::GatewayClass) {
                    self.walk(&ObjRef::new(Kind::GatewayClass, c), dirty);
                }
                // The Gateways that name it in `spec.infrastructure.parametersRef`.
                referrers(Kind::Gateway).into_iter().for_each(|gw| self.mark_gateway(&gw, dirty));
            }
            Kind::Dataplane => referrers(Kind::GatewayConfig)
                .into_iter()
                .for_each(|c| self.walk(&ObjRef::new(Kind::GatewayConfig, c), dirty)),
            Kind::Secret => {
                for c in referrers(Kind::GatewayConfig) {
                    self.walk(&ObjRef::new(Kind::GatewayConfig, c), dirty);
                }
                referrers(Kind::Gateway).into_iter().for_each(|gw| self.mark_gateway(&gw, dirty));
                self.walk_listener_sets(referrers(Kind::ListenerSet), dirty);
            }
            Kind::Gateway => self.mark_gateway(&r.key, dirty),
            // Its Gateway renders its listeners; the routes naming it get their status there.
            Kind::ListenerSet => {
                self.references(r)
                    .iter()
                    .filter(|p| p.kind == Kind::Gateway)
                    .for_each(|gw| self.mark_gateway(&gw.key, dirty));
                for kind in ROUTE_KINDS {
                    referrers(kind).into_iter().for_each(|k| self.mark_route(&ObjRef::new(kind, k), dirty));
                }
            }
            // A route masks (or stops masking) the routes of later kinds of the same name.
            Kind::UdpRoute | Kind::GatewayUdpRoute | Kind::GatewayTcpRoute => {
                for kind in ROUTE_KINDS.into_iter().skip_while(|k| *k != r.kind) {
                    self.mark_route(&ObjRef::new(kind, r.key.clone()), dirty);
                }
            }
            Kind::Service | Kind::StaticService | Kind::Namespace => {
                for kind in ROUTE_KINDS {
                    referrers(kind).into_iter().for_each(|k| self.mark_route(&ObjRef::new(kind, k), dirty));
                }
                self.references(r).iter().for_each(|gw| self.mark_gateway(&gw.key, dirty));
                self.walk_listener_sets(referrers(Kind::ListenerSet), dirty);
            }
            Kind::EndpointSlice | Kind::Endpoints => {
                self.references(r).to_vec().iter().for_each(|s| self.walk(s, dirty))
            }
            Kind::Deployment | Kind::DaemonSet => {
                self.references(r).iter().for_each(|gw| self.mark_gateway(&gw.key, dirty))
            }
            Kind::ReferenceGrant => {
                for referrer in self.granted_referrers(r) {
                    match referrer.kind {
                        Kind::Gateway => self.mark_gateway(&referrer.key, dirty),
                        Kind::ListenerSet => self.walk(&referrer, dirty),
                        _ => self.mark_route(&referrer, dirty),
                    }
                }
            }
            // Nodes: see `Index::node_change`. A kind no other refers to affects nothing.
            _ => {}
        }
    }

    /// What a change of each of these ListenerSets affects.
    fn walk_listener_sets(&self, listener_sets: Vec<ObjectKey>, dirty: &mut Dirty) {
        listener_sets.into_iter().for_each(|ls| self.walk(&ObjRef::new(Kind::ListenerSet, ls), dirty));
    }

    /// A stored Gateway, its class and the routes that name it or one of its ListenerSets
    /// (their parent status depends on it). The class counts because a deleted Gateway is no longer in the index when it is
    /// rendered: legacy mode renders per class, and must drop the Gateway's listeners.
    fn mark_gateway(&self, gw: &ObjectKey, dirty: &mut Dirty) {
        let Some(stored) = self.gateways().get(gw) else { return };
        dirty.classes.insert(stored.spec.gateway_class_name.clone());
        dirty.gateways.insert(gw.clone());
        for kind in ROUTE_KINDS {
            let referrers = self.referrers(ObjRefView::new(Kind::Gateway, gw), kind);
            dirty.routes.extend(referrers.map(|k| ObjRef::new(kind, k.clone())));
        }
        for ls in self.referrers(ObjRefView::new(Kind::Gateway, gw), Kind::ListenerSet) {
            for kind in ROUTE_KINDS {
                let referrers = self.referrers(ObjRefView::new(Kind::ListenerSet, ls), kind);
                dirty.routes.extend(referrers.map(|k| ObjRef::new(kind, k.clone())));
            }
        }
    }

    /// A stored route and the stored Gateways it names, directly or through a ListenerSet.
    fn mark_route(&self, route: &ObjRef, dirty: &mut Dirty) {
        if !self.contains(route) {
            return;
        }
        dirty.routes.insert(route.clone());
        let through_sets = self.references(route).iter().filter(|p| p.kind == Kind::ListenerSet);
        let of_sets = through_sets.flat_map(|ls| self.references(ls)).filter(|p| p.kind == Kind::Gateway);
        for parent in self.references(route).iter().filter(|p| p.kind == Kind::Gateway).chain(of_sets) {
            if self.contains(parent) {
                dirty.gateways.insert(parent.key.clone());
            }
        }
    }
}
