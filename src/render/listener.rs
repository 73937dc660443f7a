//! Gateway listeners: protocols, port conflicts and TLS certificates (spec §3.8).

use super::error::{Reason, RenderError};
use crate::config::listener_protocol;
use crate::index::{Index, Kind, ObjRef, ObjectKey};
use base64::Engine;
use gateway_api::gateways::{Gateway, GatewayListeners, GatewayListenersTlsMode};

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

/// Which listeners lose a port conflict: a later listener on a port already used in the same
/// port space (UDP-like or TCP-like). As upstream, only the exact upper-case protocol names are
/// tracked, so lowercase and unknown protocols never conflict.
pub(crate) fn conflicts(listeners: &[GatewayListeners]) -> Vec<bool> {
    let mut used = std::collections::BTreeSet::new();
    listeners
        .iter()
        .map(|l| {
            let space = match l.protocol.as_str() {
                "UDP" | "DTLS" | "TURN-UDP" | "TURN-DTLS" => "udp",
                "TCP" | "TLS" | "TURN-TCP" | "TURN-TLS" => "tcp",
                _ => return false,
            };
            !used.insert((space, l.port))
        })
        .collect()
}

/// The base64 certificate and key of a TURN-TLS/TURN-DTLS listener: `None` when the listener
/// takes no certificate (other protocols, no `tls`, Passthrough, no certificateRefs), else the
/// first usable reference. Only Secrets the operator would have loaded count: core group and
/// the exact upper-case TLS protocol names (spec §2.2, §3.8). A reference to a Secret in
/// another namespace that no ReferenceGrant there opens to the Gateway refuses the listener
/// (`RefNotPermitted`, naming the reference), whatever the other references: the Gateway API
/// requires it, and the Secret's key never reaches the config.
pub(crate) fn certificate(
    index: &Index,
    gw: &Gateway,
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
    let gw_ns = gw.metadata.namespace.as_deref().unwrap_or_default();
    let gateway = ObjRef::new(Kind::Gateway, ObjectKey::new(gw_ns, gw.metadata.name.as_deref().unwrap_or_default()));
    let secrets: Vec<ObjRef> = refs
        .iter()
        .filter(|r| loaded && r.group.as_deref().is_none_or(str::is_empty))
        .filter(|r| r.kind.as_deref().is_none_or(|k| k == "Secret"))
        .map(|r| ObjRef::new(Kind::Secret, ObjectKey::new(r.namespace.as_deref().unwrap_or(gw_ns), &r.name)))
        .collect();
    if let Some(refused) = secrets.iter().find(|s| !index.reference_permitted(&gateway, s)) {
        return Err(RenderError::certificate_not_permitted(&refused.key, gw_ns));
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
    fn conflicts_only_on_exact_names_per_port_space() {
        let l = |p: &str, port| GatewayListeners { name: p.into(), protocol: p.into(), port, ..Default::default() };
        let ls = [l("UDP", 1), l("TURN-UDP", 1), l("TCP", 1), l("udp", 1), l("TURN-DTLS", 1), l("TLS", 2)];
        assert_eq!(conflicts(&ls), [false, true, false, false, true, false]);
    }
}
