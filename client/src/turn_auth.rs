//! TURN credentials and WebRTC ICE server configs computed from a Gateway's served config:
//! what upstream gets from its separate authentication service (stunner-auth-service), here
//! from the config itself, for `stunnerctl auth`.
//!
//! Static auth hands out the configured username and password. Ephemeral (time-windowed) auth
//! follows the "REST API For Access To TURN Services" draft (draft-uberti-behave-turn-rest-00)
//! as stunnerd checks it: the username is `<expiry unix time>:<user id>`, the password the
//! base64 of HMAC-SHA1(shared secret, username).

use base64::Engine;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha1::Sha1;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stunner_gateway::config::{AuthType, ListenerConfig, NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR, StunnerConfig};

/// The auth service's default credential lifetime: one day.
pub const DEFAULT_TTL: Duration = Duration::from_secs(86_400);

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("gateway {gateway} has authentication type {auth_type:?}: no TURN credentials to hand out")]
    NoCredentials { gateway: String, auth_type: String },

    #[error("gateway {gateway}: {reason}")]
    Invalid { gateway: String, reason: String },
}

/// One TURN credential, good for every listener of a Gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
    /// How long the credential is valid: the TTL for ephemeral auth, the auth service's
    /// default for static (static credentials do not expire, and clients only cache them).
    pub ttl: Duration,
}

/// The credential of a (normalised) Gateway config. `user_id` and `ttl` matter for ephemeral
/// auth only; `now` is when the validity window starts.
pub fn credential(
    config: &StunnerConfig,
    user_id: &str,
    ttl: Duration,
    now: SystemTime,
) -> Result<Credential, AuthError> {
    let gateway = config.admin.name.clone();
    let cred = |key: &str| config.auth.credentials.get(key).cloned().unwrap_or_default();
    let raw_type = if config.auth.auth_type.is_empty() { "static" } else { config.auth.auth_type.as_str() };
    let auth_type = AuthType::parse(raw_type)
        .map_err(|e| AuthError::Invalid { gateway: gateway.clone(), reason: e.to_string() })?;
    match auth_type {
        AuthType::Static => Ok(Credential { username: cred("username"), password: cred("password"), ttl: DEFAULT_TTL }),
        AuthType::Ephemeral => {
            let secret = cred("secret");
            if secret.is_empty() {
                return Err(AuthError::Invalid { gateway, reason: "ephemeral auth without a shared secret".into() });
            }
            let expiry = now.checked_add(ttl).and_then(|t| t.duration_since(UNIX_EPOCH).ok()).unwrap_or_default();
            let username = format!("{}:{user_id}", expiry.as_secs());
            let password = timewindowed_password(&username, &secret);
            Ok(Credential { username, password, ttl })
        }
        AuthType::None => Err(AuthError::NoCredentials { gateway, auth_type: raw_type.into() }),
    }
}

/// base64(HMAC-SHA1(secret, username)): stunnerd's `GetLongTermCredential`.
pub fn timewindowed_password(username: &str, secret: &str) -> String {
    let mut mac = Hmac::<Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(username.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// The RFC 7065 URI a client reaches a listener at: `turn:` (UDP, TCP) or `turns:` (TLS,
/// DTLS), the public address and port, else the listener's own, as upstream's
/// `GetListenerURI(true)`; the two addresses only the dataplane can fill in (`$STUNNER_ADDR`,
/// the node address placeholder) become `0.0.0.0` as upstream's last resort, where upstream
/// would print `$STUNNER_ADDR` itself. `None` for listeners that are not TURN listeners.
pub fn listener_uri(l: &ListenerConfig) -> Option<String> {
    let (scheme, transport) = match l.protocol.to_ascii_uppercase().as_str() {
        "TURN-UDP" => ("turn", "udp"),
        "TURN-TCP" => ("turn", "tcp"),
        "TURN-DTLS" => ("turns", "udp"),
        "TURN-TLS" => ("turns", "tcp"),
        _ => return None,
    };
    let addr = [l.public_addr.as_str(), l.addr.as_str()]
        .into_iter()
        .find(|a| !a.is_empty())
        .filter(|a| *a != NODE_ADDRESS_PLACEHOLDER && *a != STUNNER_ADDR_VAR)
        .unwrap_or("0.0.0.0");
    let port = if l.public_port != 0 { l.public_port } else { l.port };
    let host = if addr.contains(':') && !addr.starts_with('[') { format!("[{addr}]") } else { addr.to_string() };
    Some(format!("{scheme}:{host}:{port}?transport={transport}"))
}

/// A WebRTC `RTCConfiguration` with one `RTCIceServer` per Gateway: the auth service's `/ice`
/// answer. Keys are in the order that answer has them (Go's sorted map keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IceConfig {
    #[serde(rename = "iceServers")]
    pub ice_servers: Vec<IceServer>,
    #[serde(rename = "iceTransportPolicy")]
    pub ice_transport_policy: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IceServer {
    pub credential: String,
    pub urls: Vec<String>,
    pub username: String,
}

/// The auth service's plain TURN credential (`--auth-turn-credential`): the REST API draft's
/// response body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TurnCredential {
    pub password: String,
    pub ttl: u64,
    pub uris: Vec<String>,
    pub username: String,
}

/// The URIs of every TURN listener of a config.
pub fn uris(config: &StunnerConfig) -> Vec<String> {
    config.listeners.iter().filter_map(listener_uri).collect()
}

impl IceServer {
    pub fn new(config: &StunnerConfig, cred: &Credential) -> Self {
        IceServer { credential: cred.password.clone(), urls: uris(config), username: cred.username.clone() }
    }
}

impl TurnCredential {
    pub fn new(config: &StunnerConfig, cred: &Credential) -> Self {
        TurnCredential {
            password: cred.password.clone(),
            ttl: cred.ttl.as_secs(),
            uris: uris(config),
            username: cred.username.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_sha1_matches_rfc_2202() {
        // RFC 2202 test case 2: key "Jefe", data "what do ya want for nothing?".
        let want = base64::engine::general_purpose::STANDARD.encode(hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"));
        assert_eq!(timewindowed_password("what do ya want for nothing?", "Jefe"), want);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn ephemeral_usernames_carry_the_expiry() {
        let mut c = StunnerConfig::zero("ns/gw");
        c.auth.auth_type = "ephemeral".into();
        c.auth.credentials.clear();
        c.auth.credentials.insert("secret".into(), "my-secret".into());
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let cred = credential(&c, "alice", Duration::from_secs(3600), now).unwrap();
        assert_eq!(cred.username, "1700003600:alice");
        assert_eq!(cred.password, timewindowed_password("1700003600:alice", "my-secret"));
        assert_eq!(cred.ttl, Duration::from_secs(3600));
        c.auth.auth_type = "none".into();
        assert!(matches!(credential(&c, "", DEFAULT_TTL, now), Err(AuthError::NoCredentials { .. })));
    }

    #[test]
    fn uris_follow_rfc_7065() {
        let l = |protocol: &str, public: &str, addr: &str| ListenerConfig {
            protocol: protocol.into(),
            public_addr: public.into(),
            public_port: if public.is_empty() { 0 } else { 30478 },
            addr: addr.into(),
            port: 3478,
            ..Default::default()
        };
        assert_eq!(
            listener_uri(&l("TURN-UDP", "1.2.3.4", "$STUNNER_ADDR")).unwrap(),
            "turn:1.2.3.4:30478?transport=udp"
        );
        assert_eq!(listener_uri(&l("TURN-TCP", "", "10.0.0.1")).unwrap(), "turn:10.0.0.1:3478?transport=tcp");
        assert_eq!(listener_uri(&l("TURN-TLS", "::1", "")).unwrap(), "turns:[::1]:30478?transport=tcp");
        assert_eq!(listener_uri(&l("TURN-DTLS", "", "")).unwrap(), "turns:0.0.0.0:3478?transport=udp");
        assert_eq!(listener_uri(&l("TURN-UDP", "", STUNNER_ADDR_VAR)).unwrap(), "turn:0.0.0.0:3478?transport=udp");
        assert_eq!(
            listener_uri(&l("TURN-UDP", "", NODE_ADDRESS_PLACEHOLDER)).unwrap(),
            "turn:0.0.0.0:3478?transport=udp"
        );
        assert_eq!(listener_uri(&l("UDP", "", "")), None);
    }
}
