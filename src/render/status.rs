//! Gateway, listener and route statuses with upstream's condition types, reasons and messages
//! (spec §4.2–§4.4).

use super::address::{PublicAddress, unsupported_address, unusable_address};
use super::attach::{Route, accepts};
use super::class;
use super::conditions::{build, keep_times, prune, set};
use super::error::{Reason, RenderError};
use super::settings::RenderSettings;
use crate::index::{Index, KeyView, Kind, parent_gateway};
use crate::resources::{ParentReference, RouteParentStatus, UdpRouteStatus};
use gateway_api::gateways::{Gateway, GatewayStatus, GatewayStatusAddresses, GatewayStatusListeners};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

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
            let programmed = if none_valid {
                build("Programmed", "False", "Invalid", "no listener is valid", g, now)
            } else if let Some(refused) = refused {
                build("Programmed", "False", "Invalid", refused, g, now)
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

/// A route's status. Each parentRef gets an entry from this controller (in spec order) unless it
/// names a Gateway of a class not ours (another controller's, or a missing class): that parent
/// is the other controller's to report (upstream says it "does not exist"). Entries of other
/// controllers are kept in front (upstream drops them: quirk 8, fixed). `cluster_error` is the
/// route's backend error; `masked` the kind of route that hides this one, if any. A parentRef
/// naming no stored Gateway, or a `sectionName` no listener of it has, gets `NoMatchingParent`;
/// a parentRef of another group or kind does not name a Gateway at all, whatever its name (see
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
        let gw = parent_gateway(ns, p).and_then(|k| index.gateways().lookup(k));
        // Another controller's Gateway (or one of no class yet) is that controller's to report.
        if gw.is_some_and(|gw| !class::is_ours(index, &gw.spec.gateway_class_name, settings)) {
            continue;
        }
        let no_listener =
            |gw: &Gateway| p.section_name.as_ref().filter(|s| gw.spec.listeners.iter().all(|l| l.name != **s));
        let accepted = match (gw, gw.and_then(no_listener)) {
            _ if masked.is_some() => build("Accepted", "False", "Pending", masked_message(r.kind), g, now),
            (None, _) => build("Accepted", "False", "NoMatchingParent", format!("parent {id} does not exist"), g, now),
            (Some(_), Some(section)) => {
                let message = format!("parent {id} has no listener {section}");
                build("Accepted", "False", "NoMatchingParent", message, g, now)
            }
            (Some(gw), None) if gw.spec.listeners.iter().any(|l| accepts(index, gw, l, r.kind, ns, p)) => {
                build("Accepted", "True", "Accepted", format!("parent {id} accepted the route"), g, now)
            }
            (Some(_), None) => {
                build("Accepted", "False", "NotAllowedByListeners", format!("parent {id} rejects the route"), g, now)
            }
        };
        let resolved = match cluster_error.filter(|_| masked.is_none()) {
            None => {
                build("ResolvedRefs", "True", "ResolvedRefs", "all backend references successfully resolved", g, now)
            }
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
        parents.push(RouteParentStatus {
            parent_ref: status_parent_ref(p),
            controller_name: settings.controller_name.clone(),
            conditions,
        });
    }
    UdpRouteStatus { parents }
}
