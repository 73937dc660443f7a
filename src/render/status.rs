//! Gateway, listener and route statuses with upstream's condition types, reasons and messages
//! (spec §4.2–§4.4).

use super::address::{PublicAddress, unsupported_address, unusable_address};
use super::attach::{Holder, Route, accepts};
use super::class;
use super::conditions::{build, keep_times, prune, set};
use super::error::{Reason, RenderError};
use super::listener_set;
use super::settings::RenderSettings;
use crate::index::{Index, KeyView, Kind, listener_set_gateway, parent_gateway, parent_listener_set};
use crate::resources::{ListenerSet, ParentReference, RouteParentStatus, UdpRouteStatus};
use gateway_api::gateways::{Gateway, GatewayListeners, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::borrow::Cow;

/// What a render made of a Gateway that was not invalidated.
pub(crate) struct Programming<'a> {
    /// One entry per listener, `None` where no public address was found.
    pub(crate) addresses: &'a [Option<PublicAddress>],
    /// Why a listener was left out of the config for a certificate reference no
    /// ReferenceGrant permits (the first such listener), if one was: the Gateway is then not
    /// programmed as its spec asks, whatever its addresses.
    pub(crate) refused: Option<String>,
}

/// A Gateway's status: `Ok` after a render, `Err` when the Gateway was invalidated.
pub(crate) fn gateway(
    gw: &Gateway,
    outcome: Result<Programming<'_>, &RenderError>,
    listeners: Vec<GatewayStatusListeners>,
    settings: &RenderSettings,
    now: &Time,
) -> GatewayStatus {
    let g = gw.metadata.generation;
    let ctrl = &settings.controller_name;
    let mut conditions: Vec<Condition> = gw.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let mut addresses = Vec::new();
    match outcome {
        Ok(Programming { addresses: addrs, refused }) => {
            let unsupported = unsupported_address(gw);
            let none_valid = unsupported.is_none() && !listeners.is_empty() && !listeners.iter().any(is_accepted);
            let accepted = match unsupported {
                Some(message) => build("Accepted", "False", "UnsupportedAddress", message, g, now),
                None => accepted(&listeners, ctrl, g, now),
            };
            set(&mut conditions, accepted);
            // Every listener conflicted (or left out otherwise): nothing of the Gateway is
            // served. Still Accepted, as its listeners are (GEP-2644 marks them Conflicted).
            let none_programmed = !listeners.is_empty() && !listeners.iter().any(is_programmed);
            let programmed = if none_valid {
                build("Programmed", "False", "Invalid", "no listener is valid", g, now)
            } else if let Some(refused) = refused {
                build("Programmed", "False", "Invalid", refused, g, now)
            } else if none_programmed {
                build(
                    "Programmed",
                    "False",
                    "Invalid",
                    "no listener is programmed: each is conflicted or left out",
                    g,
                    now,
                )
            } else if let Some(message) = unusable_address(gw) {
                build("Programmed", "False", "AddressNotUsable", message, g, now)
            } else if addrs.iter().all(Option::is_some) {
                build("Programmed", "True", "Programmed", "dataplane configuration successfully rendered", g, now)
            } else {
                build(
                    "Programmed",
                    "False",
                    "AddressNotAssigned",
                    "no public address found for at least one listener",
                    g,
                    now,
                )
            };
            set(&mut conditions, programmed);
            // Each address once, in listener order: a dual-stack Service has one of each
            // family, listeners split over two Services (`service-per-protocol`) each theirs.
            for a in addrs.iter().flatten().flat_map(|a| &a.addresses) {
                let entry = GatewayStatusAddresses { r#type: Some(a.address_type.clone()), value: a.value.clone() };
                if !addresses.contains(&entry) {
                    addresses.push(entry);
                }
            }
        }
        Err(e) => {
            let reason = if e.reason == Reason::InvalidGatewayParameters { "InvalidParameters" } else { "Pending" };
            set(&mut conditions, build("Accepted", "False", reason, e.to_string(), g, now));
            let message = format!("error processing gateway by controller {ctrl}: {e}");
            set(&mut conditions, build("Programmed", "False", "Invalid", message, g, now));
        }
    }
    prune(&mut conditions);
    GatewayStatus {
        addresses: Some(addresses),
        conditions: Some(conditions),
        listeners: Some(listeners),
        ..Default::default()
    }
}

/// Whether a listener's status says it is in the dataplane configuration.
fn is_programmed(l: &GatewayStatusListeners) -> bool {
    l.conditions.iter().any(|c| c.type_ == "Programmed" && c.status == "True")
}

/// Whether a listener's status says it is accepted.
fn is_accepted(l: &GatewayStatusListeners) -> bool {
    l.conditions.iter().any(|c| c.type_ == "Accepted" && c.status == "True")
}

/// A rendered Gateway's `Accepted`: `True` when every listener is accepted, `True` with reason
/// `ListenersNotValid` when some are not, `False` with it when none is (the Gateway API's
/// reading since v1.6; upstream says `Accepted` whatever its listeners).
fn accepted(listeners: &[GatewayStatusListeners], ctrl: &str, g: Option<i64>, now: &Time) -> Condition {
    let invalid: Vec<&str> = listeners.iter().filter(|l| !is_accepted(l)).map(|l| l.name.as_str()).collect();
    if invalid.is_empty() {
        return build("Accepted", "True", "Accepted", format!("gateway accepted by controller {ctrl}"), g, now);
    }
    let status = if invalid.len() == listeners.len() { "False" } else { "True" };
    let message = format!("listeners not valid: {}", invalid.join(", "));
    build("Accepted", status, "ListenersNotValid", message, g, now)
}

/// The `Accepted` message of a route hidden by a route of an earlier kind with its name:
/// upstream's for a Gateway API UDPRoute masked by a STUNner one.
fn masked_message(kind: Kind) -> &'static str {
    match kind {
        Kind::GatewayTcpRoute => "TCPRoute masked by a UDPRoute of the same name",
        _ => "GwAPI.v1 UDPRoute masked by a STUNnerV1 UDPRoute",
    }
}

/// The `ResolvedRefs` message of a route with a backend that failed to resolve (upstream's).
const UNRESOLVED: &str = "at least one backend reference failed to be successfully resolved";
/// The `ResolvedRefs` message of a route with a backend refused for want of a ReferenceGrant.
const NOT_PERMITTED: &str = "at least one backend reference to another namespace is not permitted by a ReferenceGrant";

/// A parentRef's group and kind as a route status shows them: defaults left out.
fn status_group_kind(p: &ParentReference) -> (Option<&str>, Option<&str>) {
    let group = p.group.as_deref().filter(|g| *g != crate::index::GATEWAY_API_GROUP);
    (group, p.kind.as_deref().filter(|k| *k != "Gateway"))
}

/// The copy of a parentRef that goes into a route status: defaults and `port` left out.
fn status_parent_ref(p: &ParentReference) -> ParentReference {
    let (group, kind) = status_group_kind(p);
    ParentReference {
        group: group.map(str::to_owned),
        kind: kind.map(str::to_owned),
        namespace: p.namespace.clone(),
        name: p.name.clone(),
        section_name: p.section_name.clone(),
        port: None,
    }
}

/// Whether two parentRefs are the same status entry's: equal once `status_parent_ref` applied
/// (compared in place, without the copies).
fn same_status_parent(a: &ParentReference, b: &ParentReference) -> bool {
    status_group_kind(a) == status_group_kind(b)
        && a.namespace == b.namespace
        && a.name == b.name
        && a.section_name == b.section_name
}

/// A route's status. Each parentRef naming a stored Gateway of one of our classes, or a stored
/// ListenerSet of one, gets an entry from this controller (in spec order); a Gateway of a class
/// not ours (another controller's, or a missing class) is the other controller's to report,
/// and a parentRef naming nothing stored (or of another group or kind) is nobody's known: the
/// Gateway API leaves unresolvable parents out (upstream says they "do not exist"). Entries of
/// other controllers are kept in front (upstream drops them: quirk 8, fixed). `cluster_error`
/// is the route's backend error; `masked` the kind of route that hides this one, if any. A
/// `sectionName` or `port` no listener of the parent has gets `NoMatchingParent` (see
/// docs/compatibility.md).
pub(crate) fn route(
    index: &Index,
    r: &Route<'_>,
    cluster_error: Option<&RenderError>,
    masked: Option<Kind>,
    settings: &RenderSettings,
    now: &Time,
) -> UdpRouteStatus {
    let g = r.route.metadata.generation;
    let ns = r.namespace();
    let old = r.route.status.as_ref().map(|s| s.parents.as_slice()).unwrap_or_default();
    let mut parents: Vec<RouteParentStatus> =
        old.iter().filter(|p| p.controller_name != settings.controller_name).cloned().collect();
    for p in &r.route.spec.parent_refs {
        let id = KeyView::new(p.namespace.as_deref().unwrap_or(ns), &p.name);
        // A parentRef naming no stored Gateway (or ListenerSet of one) cannot be resolved: no
        // controller is known to be responsible for it, and the Gateway API leaves such
        // references out of the route's status. So does one of another group or kind.
        let Some(parent) = route_parent(index, ns, p) else { continue };
        // Another controller's Gateway (or one of no class yet) is that controller's to report.
        if !class::is_ours(index, &parent.gateway.spec.gateway_class_name, settings) {
            continue;
        }
        // A sectionName or port no listener of the parent has (both: no one listener has both).
        let matches = |(name, l): &(&str, Cow<'_, GatewayListeners>)| {
            p.section_name.as_ref().is_none_or(|s| s == name) && p.port.is_none_or(|port| port == l.port)
        };
        let unmatched = (p.section_name.is_some() || p.port.is_some()) && !parent.listeners().any(|l| matches(&l));
        let accepted = match unmatched.then(|| no_listener_message(p)) {
            _ if masked.is_some() => build("Accepted", "False", "Pending", masked_message(r.kind), g, now),
            Some(what) => build("Accepted", "False", "NoMatchingParent", format!("parent {id} has no {what}"), g, now),
            None if !parent.admitted => {
                let message = format!("parent {id} is a ListenerSet its Gateway does not admit");
                build("Accepted", "False", "NotAllowedByListeners", message, g, now)
            }
            None if parent.listeners().any(|(name, l)| accepts(index, parent.holder, name, &l, r.kind, ns, p)) => {
                build("Accepted", "True", "Accepted", format!("parent {id} accepted the route"), g, now)
            }
            None => {
                build("Accepted", "False", "NotAllowedByListeners", format!("parent {id} rejects the route"), g, now)
            }
        };
        parents.push(parent_entry(old, p, accepted, cluster_error, masked, settings, g, now));
    }
    UdpRouteStatus { parents }
}

/// What a parentRef asks for that its parent lacks: a listener of its `sectionName`, on its
/// `port`, or both.
fn no_listener_message(p: &ParentReference) -> String {
    match (&p.section_name, p.port) {
        (Some(section), Some(port)) => format!("listener {section} on port {port}"),
        (Some(section), None) => format!("listener {section}"),
        (None, Some(port)) => format!("listener on port {port}"),
        (None, None) => "listener".into(),
    }
}

/// A stored parent of a route: the Gateway it names, or a ListenerSet and its stored Gateway.
pub(crate) struct RouteParent<'a> {
    pub(crate) gateway: &'a Gateway,
    /// The object whose listeners the parentRef can take.
    pub(crate) holder: Holder<'a>,
    /// The ListenerSet, when the parentRef names one.
    set: Option<&'a ListenerSet>,
    /// Whether the Gateway takes the object's listeners (a Gateway its own always does).
    pub(crate) admitted: bool,
}

impl<'a> RouteParent<'a> {
    /// The listeners of the object the parentRef names, each with its name there.
    pub(crate) fn listeners(&self) -> impl Iterator<Item = (&'a str, Cow<'a, GatewayListeners>)> + use<'a> {
        let own = self.set.is_none().then_some(&self.gateway.spec.listeners).into_iter().flatten();
        let set = self.set.into_iter().flat_map(|ls| &ls.spec.listeners);
        let own = own.map(|l| (l.name.as_str(), Cow::Borrowed(l)));
        own.chain(set.map(|l| (l.name.as_str(), Cow::Owned(listener_set::as_gateway_listener(l)))))
    }
}

/// The stored parent parentRef `p` of a route in `route_ns` names, if any.
pub(crate) fn route_parent<'a>(index: &'a Index, route_ns: &str, p: &ParentReference) -> Option<RouteParent<'a>> {
    if let Some(gw) = parent_gateway(route_ns, p).and_then(|k| index.gateways().lookup(k)) {
        return Some(RouteParent { gateway: gw, holder: Holder::gateway(gw), set: None, admitted: true });
    }
    let (key, ls) = index.listener_sets().lookup_key_value(parent_listener_set(route_ns, p)?)?;
    let gateway = index.gateways().lookup(listener_set_gateway(ls)?)?;
    Some(RouteParent {
        gateway,
        holder: Holder { kind: Kind::ListenerSet, key: key.view() },
        set: Some(ls),
        admitted: listener_set::allowed(index, gateway, &key.namespace),
    })
}

/// A route's status entry for parentRef `p`: `accepted`, and `ResolvedRefs` from its backends.
#[allow(clippy::too_many_arguments)]
fn parent_entry(
    old: &[RouteParentStatus],
    p: &ParentReference,
    accepted: Condition,
    cluster_error: Option<&RenderError>,
    masked: Option<Kind>,
    settings: &RenderSettings,
    g: Option<i64>,
    now: &Time,
) -> RouteParentStatus {
    let resolved = match cluster_error.filter(|_| masked.is_none()) {
        None => build("ResolvedRefs", "True", "ResolvedRefs", "all backend references successfully resolved", g, now),
        Some(e) => {
            let (reason, message) = match e.reason {
                Reason::InvalidBackendGroup | Reason::InvalidBackendKind => ("InvalidKind", UNRESOLVED),
                Reason::RefNotPermitted => ("RefNotPermitted", NOT_PERMITTED),
                _ => ("BackendNotFound", UNRESOLVED),
            };
            build("ResolvedRefs", "False", reason, message, g, now)
        }
    };
    let mut conditions = vec![accepted, resolved];
    // The API server stores parentRefs with group and kind defaulted: compare the same way.
    let previous =
        old.iter().find(|o| o.controller_name == settings.controller_name && same_status_parent(&o.parent_ref, p));
    keep_times(previous.map(|o| o.conditions.as_slice()).unwrap_or_default(), &mut conditions);
    RouteParentStatus {
        parent_ref: status_parent_ref(p),
        controller_name: settings.controller_name.clone(),
        conditions,
    }
}
