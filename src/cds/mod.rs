//! Bodies and identifiers of the config discovery service's HTTP API (cds-protocol.md §2),
//! plus our `/api/v1/statuses` ([`StatusList`]) and `/api/v1/clients` ([`ClientList`]).

mod clients;
mod id;
mod status;

pub use clients::{ClientConfigState, ClientInfo, ClientList};
pub use id::ConfigId;
pub use status::{Condition, ListenerConditions, ObjectStatus, ParentConditions, ParentRef, StatusList};

use crate::config::StunnerConfig;
use serde::{Deserialize, Serialize};

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
}
