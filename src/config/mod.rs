//! The StunnerConfig document: what the operator renders for one Gateway and the CDS serves to
//! every `stunnerd` (spec: stunner-config.md).
//!
//! The types mirror the dataplane's JSON exactly, including what is omitted when empty, and
//! `validate` reproduces the dataplane's normalisation in its normative order, with its error
//! texts. Equality is structural on these types; compare [`StunnerConfig::normalized`] values
//! to get the dataplane's notion of "the same config".

mod admin;
mod auth;
mod cluster;
mod endpoint;
mod error;
pub mod go_compat;
pub mod json;
mod listener;

pub use admin::{
    AdminConfig, DEFAULT_HEALTH_CHECK_ENDPOINT, DEFAULT_LOG_LEVEL, DEFAULT_METRICS_ENDPOINT, DEFAULT_STUNNER_NAME,
    LicenseConfig, offload_engine,
};
pub use auth::{AuthConfig, AuthType, DEFAULT_REALM};
pub use cluster::{
    CLUSTER_PROTOCOL_TCP, CLUSTER_PROTOCOL_UDP, CLUSTER_TYPE_STATIC, CLUSTER_TYPE_STRICT_DNS, ClusterConfig,
};
pub use endpoint::Endpoint;
pub use error::ConfigError;
pub use listener::{
    DEFAULT_PORT, LISTENER_PROTOCOLS, ListenerConfig, NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR, is_tls_protocol,
    listener_protocol,
};

use serde::{Deserialize, Serialize};
use std::fmt;

pub(crate) const API_VERSION: &str = "v1";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StunnerConfig {
    pub version: String,
    pub admin: AdminConfig,
    pub auth: AuthConfig,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerConfig>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterConfig>,
}

impl StunnerConfig {
    /// The placeholder config: static auth with dummy credentials, nothing else.
    pub(crate) fn empty() -> Self {
        let credentials = [("username", "dummy-username"), ("password", "dummy-password")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        StunnerConfig {
            version: API_VERSION.into(),
            admin: AdminConfig::default(),
            auth: AuthConfig { auth_type: "static".into(), realm: DEFAULT_REALM.into(), credentials },
            listeners: Vec::new(),
            clusters: Vec::new(),
        }
    }

    /// What the CDS sends when the config `id` is deleted, and what stunnerd runs before its
    /// first config. stunnerd recognises it as a deletion (see [`Self::is_deleted`]).
    pub fn zero(id: &str) -> Self {
        let mut c = Self::empty();
        c.admin.name = id.into();
        c
    }

    /// Validates and normalises in place, in the dataplane's order (stunner-config.md §7).
    pub fn validate(&mut self) -> Result<(), ConfigError> {
        if self.version != API_VERSION {
            return Err(ConfigError(format!("unsupported API version: {}", go_compat::quote(&self.version))));
        }
        self.admin.validate()?;
        self.auth.validate()?;
        self.listeners.iter_mut().try_for_each(ListenerConfig::validate)?;
        self.clusters.iter_mut().try_for_each(ClusterConfig::validate)
    }

    /// A validated copy.
    pub fn normalized(&self) -> Result<Self, ConfigError> {
        let mut c = self.clone();
        c.validate()?;
        Ok(c)
    }

    /// stunnerd's `IsConfigDeleted`: whether this (validated) config is the zero config of its name.
    pub fn is_deleted(&self) -> bool {
        Self::zero(&self.admin.name).normalized().is_ok_and(|z| &z == self)
    }

    /// A digest of what the dataplane runs: the first 64 bits of the SHA-256 of the normalised
    /// wire form (of the config as is when it does not validate). Configs the dataplane treats
    /// as equal share it, on every replica, in every process, in every release that keeps
    /// the wire form.
    pub fn digest(&self) -> u64 {
        use sha2::{Digest, Sha256};
        let json = self.normalized().map_or_else(|_| self.to_json(), |n| n.to_json());
        let sum = Sha256::digest(json.as_bytes());
        u64::from_be_bytes(sum[..8].try_into().expect("SHA-256 has 32 bytes"))
    }

    /// The compact wire form: one JSON document, Go byte order, YAML-safe.
    pub fn to_json(&self) -> String {
        json::to_string(self)
    }

    /// Whether any listener asks the CDS for per-node address patching.
    pub fn has_node_placeholder(&self) -> bool {
        self.listeners.iter().any(|l| l.addr == NODE_ADDRESS_PLACEHOLDER)
    }
}

/// A one-line description safe for logs: credentials, certificates and keys are redacted.
impl fmt::Display for StunnerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let join = |items: Vec<String>| items.join(",");
        write!(
            f,
            "{{version={:?},admin:{{name={:?},logLevel={:?}}},{},listeners=[{}],clusters=[{}]}}",
            self.version,
            self.admin.name,
            self.admin.loglevel,
            self.auth,
            join(self.listeners.iter().map(ToString::to_string).collect()),
            join(self.clusters.iter().map(ToString::to_string).collect()),
        )
    }
}

#[cfg(test)]
mod tests;
