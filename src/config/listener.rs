//! `listeners[]`: the TURN listeners a dataplane opens.

use super::error::ConfigError;
use super::go_compat::quote;
use serde::{Deserialize, Serialize};
use std::fmt;

pub const DEFAULT_PORT: i64 = 3478;
/// What the operator renders as the relay address; stunnerd expands it to the pod IP.
pub const STUNNER_ADDR_VAR: &str = "$STUNNER_ADDR";
/// Asks the CDS to substitute the client node's external address (cds-protocol.md §7).
pub const NODE_ADDRESS_PLACEHOLDER: &str = "__node_address_placeholder";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListenerConfig {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(rename = "public_address", skip_serializing_if = "String::is_empty")]
    pub public_addr: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub public_port: i64,
    /// Ours, not stunnerd's (which ignores a field it does not know): every public address of
    /// a listener that has more than one (a dual-stack Gateway's, one of each family),
    /// `public_address` first; empty otherwise. The credential API and `stunnerctl auth` give
    /// a URI for each (docs/deploy.md §12).
    #[serde(rename = "public_addresses", skip_serializing_if = "Vec::is_empty")]
    pub public_addrs: Vec<String>,
    #[serde(rename = "address", skip_serializing_if = "String::is_empty")]
    pub addr: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub port: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cert: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Listener protocols in their canonical spelling. Only the `TURN-*` forms start in stunnerd.
pub const LISTENER_PROTOCOLS: [&str; 8] =
    ["UDP", "TCP", "TLS", "DTLS", "TURN-UDP", "TURN-TCP", "TURN-TLS", "TURN-DTLS"];

/// Matches a listener protocol case-insensitively and returns its canonical spelling.
pub fn listener_protocol(raw: &str) -> Result<&'static str, ConfigError> {
    LISTENER_PROTOCOLS
        .into_iter()
        .find(|p| p.eq_ignore_ascii_case(raw))
        .ok_or_else(|| ConfigError(format!("unknown listener protocol: \"{raw}\"")))
}

/// Whether a canonical protocol carries TLS and so needs a certificate and key.
pub fn is_tls_protocol(canonical: &str) -> bool {
    matches!(canonical, "TLS" | "DTLS" | "TURN-TLS" | "TURN-DTLS")
}

impl ListenerConfig {
    /// Applies defaults and checks the listener, as stunnerd's `ListenerConfig.Validate`.
    pub(crate) fn validate(&mut self) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError(format!("missing name in listener configuration: {self}")));
        }
        let raw = if self.protocol.is_empty() { "TURN-UDP" } else { &self.protocol };
        let proto = listener_protocol(raw)?;
        self.protocol = proto.into();
        if self.addr.is_empty() {
            self.addr = "0.0.0.0".into();
        }
        if self.port == 0 {
            self.port = DEFAULT_PORT;
        }
        if !(1..=65535).contains(&self.port) {
            return Err(ConfigError(format!("invalid port: {}", self.port)));
        }
        if is_tls_protocol(proto) {
            if self.cert.is_empty() {
                return Err(ConfigError(format!("empty TLS cert for {proto} listener")));
            }
            if self.key.is_empty() {
                return Err(ConfigError(format!("empty TLS key for {proto} listener")));
            }
        }
        self.routes.sort();
        Ok(())
    }
}

/// The dataplane's one-line form of a listener; the certificate and key are redacted.
impl fmt::Display for ListenerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_empty() { "-" } else { &self.name };
        let addr = if self.addr.is_empty() || self.addr == STUNNER_ADDR_VAR { "0.0.0.0" } else { &self.addr };
        let host_port =
            if addr.contains(':') { format!("[{addr}]:{}", self.port) } else { format!("{addr}:{}", self.port) };
        let public_addr = if self.public_addr.is_empty() { "-" } else { &self.public_addr };
        let public_port = if self.public_port == 0 { "-".to_string() } else { self.public_port.to_string() };
        let secret = |s: &str| if s.is_empty() { "-" } else { "<SECRET>" };
        write!(
            f,
            "{}:{{turn://{host_port}?transport={},public={public_addr}:{public_port},cert/key={}/{},routes=[{}]}}",
            quote(name),
            self.protocol,
            secret(&self.cert),
            secret(&self.key),
            self.routes.join(",")
        )
    }
}
