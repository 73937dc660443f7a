//! Bodies and identifiers of the config discovery service's HTTP API (cds-protocol.md §2),
//! plus our `/api/v1/statuses` ([`StatusList`]) and `/api/v1/clients` ([`ClientList`]).

mod clients;
mod status;

pub use clients::{ClientConfigState, ClientInfo, ClientList};
pub use status::{Condition, ListenerConditions, ObjectStatus, ParentConditions, ParentRef, StatusList};

use crate::config::StunnerConfig;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A config's id: the owning Gateway's `namespace/name`, also the config's `admin.name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigId {
    pub namespace: String,
    pub name: String,
}

impl ConfigId {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ConfigId { namespace: namespace.into(), name: name.into() }
    }

    /// Splits on the first `/`; ids without one are not config ids (upstream drops them).
    pub fn parse(id: &str) -> Option<Self> {
        let (ns, name) = id.split_once('/')?;
        Some(Self::new(ns, name))
    }
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// `GET /api/v1/configs[/{namespace}]`: `items` first, never `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigList {
    #[serde(default)]
    pub items: Vec<StunnerConfig>,
    #[serde(default)]
    pub version: String,
}

/// The JSON error body; the Go client decodes every non-200 JSON response as this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: i32,
    pub message: String,
}

/// `GET /api/v1/license`; all four keys are always present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LicenseStatus {
    pub enabled_features: Vec<String>,
    pub subscription_type: String,
    pub last_updated: String,
    pub last_error: String,
}

impl Default for LicenseStatus {
    /// The open-source status, served until the operator reports another.
    fn default() -> Self {
        LicenseStatus {
            enabled_features: Vec::new(),
            subscription_type: "free".into(),
            last_updated: "N/A".into(),
            last_error: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::json;

    #[test]
    fn default_license_status_bytes() {
        assert_eq!(
            json::to_vec(&LicenseStatus::default()),
            br#"{"enabledFeatures":[],"subscriptionType":"free","lastUpdated":"N/A","lastError":""}"#
        );
    }

    #[test]
    fn empty_list_has_items_first_and_never_null() {
        let l = ConfigList { items: vec![], version: "v1".into() };
        assert_eq!(json::to_vec(&l), br#"{"items":[],"version":"v1"}"#);
    }

    #[test]
    fn ids_split_on_the_first_slash() {
        assert_eq!(ConfigId::parse("a/b/c"), Some(ConfigId::new("a", "b/c")));
        assert_eq!(ConfigId::parse("nope"), None);
        assert_eq!(ConfigId::new("ns", "gw").to_string(), "ns/gw");
    }
}
