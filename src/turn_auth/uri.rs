//! The RFC 7065 URI a client reaches a listener at, as stunner's
//! `ListenerConfig.GetListenerURI(true)` builds it: `turn:` (TURN-UDP, TURN-TCP) or `turns:`
//! (TURN-DTLS, TURN-TLS), the public address and port, else the listener's own, else
//! `0.0.0.0`. `$STUNNER_ADDR`, which only stunnerd fills in, is `0.0.0.0` too, as upstream's
//! service reads it (its CDS client expands the variable from an environment without it). One
//! difference, where upstream's URI cannot be used anyway (docs/compatibility.md): an IPv6
//! address is bracketed. A listener with several public addresses (a dual-stack Gateway's)
//! has a URI for each, in the config's order (the primary family first).

use crate::config::{ListenerConfig, NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR, StunnerConfig};

/// The URI of listener `l`, with its public address replaced by `public_addr` when given (the
/// service's `public-addr` parameter or its environment's override; an empty one falls back
/// to the listener address). `None` for listeners that are not TURN listeners.
fn listener_uri(l: &ListenerConfig, public_addr: Option<&str>) -> Option<String> {
    let (scheme, transport) = match l.protocol.to_ascii_uppercase().as_str() {
        "TURN-UDP" => ("turn", "udp"),
        "TURN-TCP" => ("turn", "tcp"),
        "TURN-DTLS" => ("turns", "udp"),
        "TURN-TLS" => ("turns", "tcp"),
        _ => return None,
    };
    let public = public_addr.unwrap_or(&l.public_addr);
    let addr = [public, l.addr.as_str()]
        .into_iter()
        .find(|a| !a.is_empty())
        .filter(|a| *a != NODE_ADDRESS_PLACEHOLDER && *a != STUNNER_ADDR_VAR)
        .unwrap_or("0.0.0.0");
    let port = if l.public_port != 0 { l.public_port } else { l.port };
    let host = if addr.contains(':') && !addr.starts_with('[') { format!("[{addr}]") } else { addr.to_string() };
    Some(format!("{scheme}:{host}:{port}?transport={transport}"))
}

/// The URIs of listener `l`: one per public address (`public_addresses`, else the one
/// `public_address`), or the one with `public_addr` in place of them when given. Empty for
/// listeners that are not TURN listeners.
pub fn listener_uris(l: &ListenerConfig, public_addr: Option<&str>) -> Vec<String> {
    match public_addr {
        None if !l.public_addrs.is_empty() => l.public_addrs.iter().filter_map(|a| listener_uri(l, Some(a))).collect(),
        _ => listener_uri(l, public_addr).into_iter().collect(),
    }
}

/// The URIs of every TURN listener of a config, in the config's order.
pub fn uris(config: &StunnerConfig) -> Vec<String> {
    config.listeners.iter().flat_map(|l| listener_uris(l, None)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(protocol: &str, public: &str, addr: &str) -> ListenerConfig {
        ListenerConfig {
            protocol: protocol.into(),
            public_addr: public.into(),
            public_port: if public.is_empty() { 0 } else { 30478 },
            addr: addr.into(),
            port: 3478,
            ..Default::default()
        }
    }

    #[test]
    fn uris_follow_rfc_7065_and_upstreams_fallbacks() {
        let uri = |l: &ListenerConfig| listener_uri(l, None).unwrap();
        assert_eq!(uri(&l("TURN-UDP", "1.2.3.4", "$STUNNER_ADDR")), "turn:1.2.3.4:30478?transport=udp");
        assert_eq!(uri(&l("turn-tcp", "", "10.0.0.1")), "turn:10.0.0.1:3478?transport=tcp");
        assert_eq!(uri(&l("TURN-TLS", "::1", "")), "turns:[::1]:30478?transport=tcp");
        assert_eq!(uri(&l("TURN-DTLS", "", "")), "turns:0.0.0.0:3478?transport=udp");
        assert_eq!(uri(&l("TURN-UDP", "", STUNNER_ADDR_VAR)), "turn:0.0.0.0:3478?transport=udp");
        assert_eq!(uri(&l("TURN-UDP", "", NODE_ADDRESS_PLACEHOLDER)), "turn:0.0.0.0:3478?transport=udp");
        // The placeholder as the public address does not fall back to the listener's.
        assert_eq!(uri(&l("TURN-UDP", NODE_ADDRESS_PLACEHOLDER, "10.0.0.1")), "turn:0.0.0.0:30478?transport=udp");
        assert_eq!(listener_uri(&l("UDP", "", ""), None), None);
    }

    #[test]
    fn a_dual_stack_listener_has_a_uri_per_address_in_the_configs_order() {
        let mut l = l("TURN-TLS", "192.0.2.1", "$STUNNER_ADDR");
        l.public_addrs = vec!["192.0.2.1".into(), "2001:db8::1".into()];
        assert_eq!(
            listener_uris(&l, None),
            ["turns:192.0.2.1:30478?transport=tcp", "turns:[2001:db8::1]:30478?transport=tcp"]
        );
        assert_eq!(listener_uris(&l, Some("5.6.7.8")), ["turns:5.6.7.8:30478?transport=tcp"], "an override is one");
        l.public_addrs.clear();
        assert_eq!(listener_uris(&l, None), ["turns:192.0.2.1:30478?transport=tcp"]);
    }

    #[test]
    fn an_override_replaces_the_public_address_only() {
        let l = l("TURN-UDP", "1.2.3.4", "10.0.0.1");
        assert_eq!(listener_uri(&l, Some("5.6.7.8")).unwrap(), "turn:5.6.7.8:30478?transport=udp");
        assert_eq!(listener_uri(&l, Some("")).unwrap(), "turn:10.0.0.1:30478?transport=udp");
    }
}
