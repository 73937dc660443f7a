//! `clusters[]`: the backends a listener's routes may relay to.

use super::endpoint::Endpoint;
use super::error::ConfigError;
use super::go_compat::quote;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// Always emitted, even when empty.
    pub name: String,
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub cluster_type: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
}

pub const CLUSTER_TYPE_STATIC: &str = "STATIC";
pub const CLUSTER_TYPE_STRICT_DNS: &str = "STRICT_DNS";
/// The peer transports of a cluster: UDP (the default) or TCP (RFC 6062 TCP allocations).
pub const CLUSTER_PROTOCOL_UDP: &str = "UDP";
pub const CLUSTER_PROTOCOL_TCP: &str = "TCP";

fn canonical<'a>(raw: &str, known: [&'a str; 2], what: &str) -> Result<&'a str, ConfigError> {
    known
        .into_iter()
        .find(|k| k.eq_ignore_ascii_case(raw))
        .ok_or_else(|| ConfigError(format!("unknown cluster {what}: \"{raw}\"")))
}

impl ClusterConfig {
    /// Applies defaults, checks STATIC endpoints and sorts them, as stunnerd's `ClusterConfig.Validate`.
    pub(crate) fn validate(&mut self) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError(format!("missing name in cluster configuration: {self}")));
        }
        let raw = if self.cluster_type.is_empty() { CLUSTER_TYPE_STATIC } else { &self.cluster_type };
        let cluster_type = canonical(raw, [CLUSTER_TYPE_STATIC, CLUSTER_TYPE_STRICT_DNS], "type")?;
        self.cluster_type = cluster_type.into();
        let raw = if self.protocol.is_empty() { CLUSTER_PROTOCOL_UDP } else { &self.protocol };
        self.protocol = canonical(raw, [CLUSTER_PROTOCOL_UDP, CLUSTER_PROTOCOL_TCP], "protocol")?.into();
        if cluster_type == CLUSTER_TYPE_STATIC {
            for ep in &self.endpoints {
                Endpoint::parse(ep).map_err(ConfigError)?;
            }
        }
        self.endpoints.sort();
        Ok(())
    }
}

impl fmt::Display for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.name.is_empty() { "-" } else { &self.name };
        let mut parts = Vec::new();
        if !self.cluster_type.is_empty() {
            parts.push(format!("type={}", quote(&self.cluster_type)));
        }
        if !self.protocol.is_empty() {
            parts.push(format!("protocol={}", quote(&self.protocol)));
        }
        parts.push(format!("endpoints=[{}]", self.endpoints.join(",")));
        write!(f, "{}:{{{}}}", quote(name), parts.join(","))
    }
}
