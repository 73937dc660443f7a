//! Gateway listeners: protocols, port conflicts and TLS certificates (spec §3.8).

use super::error::{Reason, RenderError};
use crate::config::listener_protocol;
use crate::index::{GATEWAY_API_GROUP, Index, Kind, ObjRef, ObjectKey, group_kind};
use base64::Engine;
use gateway_api::gateways::{GatewayListeners, GatewayListenersTlsMode};

/// The STUNner protocol of a Gateway listener protocol: first upstream's exact, case-sensitive
/// aliases, then the dataplane's case-insensitive names (so `udp` stays plain `UDP`).
pub(crate) fn protocol(raw: &str) -> Result<&'static str, RenderError> {
    let aliased = match raw {
        "UDP" => "TURN-UDP",
        "TCP" => "TURN-TCP",
        "TLS" => "TURN-TLS",
        "DTLS" => "TURN-DTLS",
        other => other,
    };
    listener_protocol(aliased).map_err(|_| RenderError::new(Reason::InvalidProtocol))
}

/// The Service port protocol (`UDP` or `TCP`) of a listener protocol, if it maps at all.
pub(crate) fn service_protocol(raw: &str) -> Option<&'static str> {
    match protocol(raw).ok()? {
        "UDP" | "DTLS" | "TURN-UDP" | "TURN-DTLS" => Some("UDP"),
        _ => Some("TCP"),
    }
}

/// Which listeners are conflicted: every listener on a port that another listener of the same
/// port space (UDP-like or TCP-like) uses too, whatever their protocol names' case. TURN
/// tells sessions apart by nothing but the port, so none of them is served (GEP-2644/2645:
/// both are marked, no traffic is routed through either). Listeners of unknown protocols
/// take no port and conflict with none.
pub(crate) fn conflicts(listeners: &[GatewayListeners]) -> Vec<bool> {
    let mut users = std::collections::BTreeMap::new();
    for key in listeners.iter().filter_map(port_space) {
        *users.entry(key).or_insert(0usize) += 1;
    }
    listeners.iter().map(|l| port_space(l).is_some_and(|k| users[&k] > 1)).collect()
}

/// The port a listener takes in its port space (`UDP` or `TCP`); none for an unknown protocol.
pub(crate) fn port_space(l: &GatewayListeners) -> Option<(&'static str, i32)> {
    Some((service_protocol(&l.protocol)?, l.port))
}

/// The route kinds a listener of a valid protocol can take, in `supportedKinds` order: UDPRoutes
/// everywhere (TURN relays UDP over every client transport), TCPRoutes on TCP-like listeners
/// only (RFC 6062 makes TCP allocations only over a TCP or TLS client connection).
fn protocol_kinds(l: &GatewayListeners) -> &'static [Kind] {
    const TCP_LIKE: [Kind; 3] = [Kind::GatewayTcpRoute, Kind::GatewayUdpRoute, Kind::UdpRoute];
    match service_protocol(&l.protocol) {
        Some("TCP") => &TCP_LIKE,
        Some(_) => &TCP_LIKE[1..],
        None => &[],
    }
}

/// A listener's `allowedRoutes.kinds` (the group defaults to the Gateway API's).
fn listed_kinds(l: &GatewayListeners) -> impl Iterator<Item = (&str, &str)> {
    let listed = l.allowed_routes.as_ref().and_then(|a| a.kinds.as_deref()).unwrap_or_default();
    listed.iter().map(|k| (k.group.as_deref().unwrap_or(GATEWAY_API_GROUP), k.kind.as_str()))
}

/// Whether listener `l` takes routes of `kind`: its protocol's kinds, narrowed to those it
/// lists in `allowedRoutes.kinds` when it lists any.
pub(crate) fn takes(l: &GatewayListeners, kind: Kind) -> bool {
    let listed = |gk| listed_kinds(l).any(|k| Some(k) == gk);
    protocol_kinds(l).contains(&kind) && (listed_kinds(l).next().is_none() || listed(group_kind(kind)))
}

/// The route kinds of a listener, as its status shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteKinds {
    /// The kinds it takes, as [`takes`] says (`supportedKinds`): none for an unknown protocol.
    pub(crate) supported: Vec<Kind>,
    /// The `allowedRoutes.kinds` it cannot take, as `group/kind` (`ResolvedRefs=False`,
    /// `InvalidRouteKinds`).
    pub(crate) invalid: Vec<String>,
}

pub(crate) fn route_kinds(l: &GatewayListeners) -> RouteKinds {
    let supported = protocol_kinds(l).iter().copied().filter(|k| takes(l, *k)).collect();
    let supports = |gk: (&str, &str)| protocol_kinds(l).iter().any(|k| group_kind(*k) == Some(gk));
    let invalid = listed_kinds(l).filter(|gk| !supports(*gk)).map(|(g, k)| format!("{g}/{k}")).collect();
    RouteKinds { supported, invalid }
}

/// The base64 certificate and key of a TURN-TLS/TURN-DTLS listener: `None` when the listener
/// takes no certificate (other protocols, no `tls`, Passthrough, no certificateRefs), else the
/// first usable reference. Only Secrets the operator would have loaded count: core group and
/// the exact upper-case TLS protocol names (spec §2.2, §3.8). A reference to a Secret in
/// another namespace than the listener's object (`holder`: its Gateway or ListenerSet) that no
/// ReferenceGrant there opens to that object refuses the listener (`RefNotPermitted`, naming
/// the reference), whatever the other references: the Gateway API requires it, and the
/// Secret's key never reaches the config.
pub(crate) fn certificate(
    index: &Index,
    holder: &ObjRef,
    l: &GatewayListeners,
    proto: &str,
) -> Result<Option<(String, String)>, RenderError> {
    let Some(tls) = l.tls.as_ref() else { return Ok(None) };
    let terminate = tls.mode.as_ref().is_none_or(|m| *m == GatewayListenersTlsMode::Terminate);
    let refs = tls.certificate_refs.as_deref().unwrap_or_default();
    if !matches!(proto, "TURN-TLS" | "TURN-DTLS") || !terminate || refs.is_empty() {
        return Ok(None);
    }
    let loaded = matches!(l.protocol.as_str(), "TLS" | "DTLS" | "TURN-TLS" | "TURN-DTLS");
    let holder_ns = holder.key.namespace.as_str();
    let secrets: Vec<ObjRef> = refs
        .iter()
        .filter(|r| loaded && r.group.as_deref().is_none_or(str::is_empty))
        .filter(|r| r.kind.as_deref().is_none_or(|k| k == "Secret"))
        .map(|r| ObjRef::new(Kind::Secret, ObjectKey::new(r.namespace.as_deref().unwrap_or(holder_ns), &r.name)))
        .collect();
    if let Some(refused) = secrets.iter().find(|s| !index.reference_permitted(holder, s)) {
        let referrers = if holder.kind == Kind::ListenerSet { "ListenerSets" } else { "Gateways" };
        return Err(RenderError::certificate_not_permitted(&refused.key, referrers, holder_ns));
    }
    let usable = secrets.iter().find_map(|secret| {
        let data = index.secrets().get(&secret.key)?.data.as_ref()?;
        let first = |keys: &[&str]| keys.iter().find_map(|k| data.get(*k));
        let cert = first(&["tls.crt", "crt", "cert"])?;
        let key = first(&["tls.key", "key"])?;
        let b64 = |v: &k8s_openapi::ByteString| base64::engine::general_purpose::STANDARD.encode(&v.0);
        Some((b64(cert), b64(key)))
    });
    usable.map(Some).ok_or(RenderError::new(Reason::InvalidCertificateRef))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_mapping_is_two_step() {
        assert_eq!(protocol("UDP").unwrap(), "TURN-UDP");
        assert_eq!(protocol("TURN-UDP").unwrap(), "TURN-UDP");
        assert_eq!(protocol("turn-udp").unwrap(), "TURN-UDP");
        assert_eq!(protocol("udp").unwrap(), "UDP");
        assert_eq!(protocol("dtls").unwrap(), "DTLS");
        assert_eq!(protocol("HTTP").unwrap_err().reason, Reason::InvalidProtocol);
        assert_eq!(service_protocol("DTLS"), Some("UDP"));
        assert_eq!(service_protocol("tls"), Some("TCP"));
        assert_eq!(service_protocol("dummy"), None);
    }

    #[test]
    fn every_listener_sharing_a_port_of_its_port_space_conflicts() {
        let l = |p: &str, port| GatewayListeners { name: p.into(), protocol: p.into(), port, ..Default::default() };
        let ls =
            [l("UDP", 1), l("TURN-UDP", 1), l("TCP", 1), l("udp", 3), l("TURN-DTLS", 2), l("HTTP", 2), l("dtls", 3)];
        assert_eq!(conflicts(&ls), [true, true, false, true, false, false, true]);
    }

    #[test]
    fn route_kinds_follow_the_protocol_and_the_listed_kinds() {
        use gateway_api::gateways::{GatewayListenersAllowedRoutes, GatewayListenersAllowedRoutesKinds};
        let l = |p: &str, kinds: &[(Option<&str>, &str)]| GatewayListeners {
            protocol: p.into(),
            allowed_routes: (!kinds.is_empty()).then(|| GatewayListenersAllowedRoutes {
                kinds: Some(
                    kinds
                        .iter()
                        .map(|(g, k)| GatewayListenersAllowedRoutesKinds {
                            group: g.map(Into::into),
                            kind: (*k).into(),
                        })
                        .collect(),
                ),
                namespaces: None,
            }),
            ..Default::default()
        };
        let udp = [Kind::GatewayUdpRoute, Kind::UdpRoute];
        assert_eq!(route_kinds(&l("TURN-UDP", &[])), RouteKinds { supported: udp.into(), invalid: vec![] });
        let tcp = route_kinds(&l("TURN-TLS", &[]));
        assert_eq!(tcp.supported, [Kind::GatewayTcpRoute, Kind::GatewayUdpRoute, Kind::UdpRoute]);
        let listed = route_kinds(&l("TURN-UDP", &[(None, "TCPRoute"), (Some("stunner.l7mp.io"), "UDPRoute")]));
        assert_eq!(listed.supported, [Kind::UdpRoute]);
        assert_eq!(listed.invalid, ["gateway.networking.k8s.io/TCPRoute"]);
        let http = route_kinds(&l("HTTP", &[(None, "HTTPRoute")]));
        assert_eq!((http.supported.len(), http.invalid.len()), (0, 1));
        assert!(!takes(&l("HTTP", &[]), Kind::UdpRoute));
    }
}
