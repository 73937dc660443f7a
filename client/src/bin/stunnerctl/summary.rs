//! The human-readable summaries: what a person needs to see at a glance, in upstream
//! stunnerctl's layout for configs and the license so that muscle memory and scripts carry over.

use std::fmt::Write;
use stunner_gateway::cds::LicenseStatus;
use stunner_gateway::config::go_compat::quote;
use stunner_gateway::config::{AuthType, NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR, StunnerConfig};
use stunner_gateway_client::cds::{Condition, ObjectStatus, StatusList};

/// A Gateway's config: name and log level, authentication, then each listener with where it
/// relays from, where clients reach it, its routes and the endpoints those routes lead to.
pub fn config(c: &StunnerConfig) -> String {
    let mut s = format!("Gateway: {} (loglevel: {})\n", c.admin.name, quote(&c.admin.loglevel));
    let cred = |key: &str| c.auth.credentials.get(key).map_or("", String::as_str);
    let auth_type = if c.auth.auth_type.is_empty() { "static" } else { &c.auth.auth_type };
    match AuthType::parse(auth_type) {
        Ok(AuthType::Static) => {
            let _ = writeln!(
                s,
                "Authentication type: static, username/password: {}/{}",
                cred("username"),
                cred("password")
            );
        }
        Ok(AuthType::Ephemeral) => {
            let _ = writeln!(s, "Authentication type: ephemeral, shared-secret: {}", cred("secret"));
        }
        Ok(AuthType::None) => s.push_str("Authentication type: none\n"),
        Err(_) => {}
    }
    s.push_str("Listeners:\n");
    for l in &c.listeners {
        // The two addresses only the dataplane can fill in, named for what they will become.
        let relay = match l.addr.as_str() {
            STUNNER_ADDR_VAR => "<private-pod-ip-addr>",
            NODE_ADDRESS_PLACEHOLDER => "<node-ip-addr>",
            addr => addr,
        };
        let endpoints: Vec<&str> = l
            .routes
            .iter()
            .filter_map(|r| c.clusters.iter().find(|cl| cl.name == *r))
            .flat_map(|cl| cl.endpoints.iter().map(String::as_str))
            .collect();
        let _ = writeln!(s, "  - Name: {}", l.name);
        let _ = writeln!(s, "    Protocol: {}", l.protocol);
        let _ = writeln!(s, "    Relay address:port: {}:{}", or_none(relay), port_or_none(l.port));
        let _ = writeln!(s, "    Public address:port: {}:{}", or_none(&l.public_addr), port_or_none(l.public_port));
        let _ = writeln!(s, "    Routes: [{}]", l.routes.join(", "));
        let _ = writeln!(s, "    Endpoints: [{}]", endpoints.join(", "));
    }
    s
}

/// The license tier and unlocked features, or the license server's error.
pub fn license(l: &LicenseStatus) -> String {
    if !l.last_error.is_empty() {
        return format!("License server error: {} (last updated: {})\n", l.last_error, l.last_updated);
    }
    let features = if l.enabled_features.is_empty() { "NONE".to_string() } else { l.enabled_features.join(", ") };
    format!(
        "License status:\n\tSubscription type: {}\n\tEnabled features: {features}\n\tLast updated: {}\n",
        l.subscription_type, l.last_updated
    )
}

/// Each object as `Kind namespace/name`, then its conditions; a Gateway's listeners and a
/// route's parents follow with their own conditions, one level deeper.
pub fn statuses(list: &StatusList) -> String {
    let mut s = String::new();
    for o in &list.items {
        let _ = writeln!(s, "{} {}", o.kind, o.key());
        if let Some(why) = o.held() {
            let _ = writeln!(s, "  held: {why}");
        }
        conditions(&mut s, "  ", &o.conditions());
        match o.kind.as_str() {
            "Gateway" => {
                for l in o.listeners() {
                    let _ = writeln!(s, "  Listener {}:", l.name);
                    conditions(&mut s, "    ", &l.conditions);
                }
            }
            "UDPRoute" => parents(&mut s, o),
            _ => {}
        }
    }
    s
}

fn parents(s: &mut String, route: &ObjectStatus) {
    for p in route.parents() {
        let ns = p.parent_ref.namespace.as_deref().unwrap_or(&route.namespace);
        let _ = write!(s, "  Parent {ns}/{}", p.parent_ref.name);
        if let Some(section) = &p.parent_ref.section_name {
            let _ = write!(s, " (listener {section})");
        }
        s.push_str(":\n");
        conditions(s, "    ", &p.conditions);
    }
}

fn conditions(s: &mut String, indent: &str, conditions: &[Condition]) {
    for c in conditions {
        let _ = write!(s, "{indent}{}={} ({})", c.condition_type, c.status, c.reason);
        if !c.message.is_empty() {
            let _ = write!(s, ": {}", c.message);
        }
        s.push('\n');
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

fn port_or_none(port: i64) -> String {
    if port == 0 { "<none>".into() } else { port.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stunner_gateway::config::{ClusterConfig, ListenerConfig};

    #[test]
    fn config_summary_names_addresses_routes_and_endpoints() {
        let mut c = StunnerConfig::zero("stunner/udp-gateway");
        c.admin.loglevel = "all:INFO".into();
        c.listeners.push(ListenerConfig {
            name: "stunner/udp-gateway/udp".into(),
            protocol: "TURN-UDP".into(),
            addr: STUNNER_ADDR_VAR.into(),
            port: 3478,
            public_addr: "1.2.3.4".into(),
            public_port: 30478,
            routes: vec!["stunner/media".into(), "stunner/missing".into()],
            ..Default::default()
        });
        c.clusters.push(ClusterConfig {
            name: "stunner/media".into(),
            endpoints: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            ..Default::default()
        });
        assert_eq!(
            config(&c),
            "Gateway: stunner/udp-gateway (loglevel: \"all:INFO\")\n\
             Authentication type: static, username/password: dummy-username/dummy-password\n\
             Listeners:\n  \
               - Name: stunner/udp-gateway/udp\n    \
                 Protocol: TURN-UDP\n    \
                 Relay address:port: <private-pod-ip-addr>:3478\n    \
                 Public address:port: 1.2.3.4:30478\n    \
                 Routes: [stunner/media, stunner/missing]\n    \
                 Endpoints: [10.0.0.1, 10.0.0.2]\n"
        );
        c.auth.auth_type = "none".into();
        c.listeners[0].public_addr.clear();
        c.listeners[0].public_port = 0;
        let s = config(&c);
        assert!(s.contains("Authentication type: none\n"), "{s}");
        assert!(s.contains("Public address:port: <none>:<none>\n"), "{s}");
    }

    #[test]
    fn license_summary() {
        assert_eq!(
            license(&LicenseStatus::default()),
            "License status:\n\tSubscription type: free\n\tEnabled features: NONE\n\tLast updated: N/A\n"
        );
        let l = LicenseStatus { last_error: "boom".into(), ..Default::default() };
        assert_eq!(license(&l), "License server error: boom (last updated: N/A)\n");
    }
}
