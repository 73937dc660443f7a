//! GatewayConfig `stunner.l7mp.io/v1alpha1`, served for old manifests only.

use crate::resources::gateway::{DNS_SUBDOMAIN_PATTERN, SecretObjectReference};
use crate::resources::v1::{
    AUTH_TYPE_PATTERN, CREDENTIAL_PATTERN, DEFAULT_AUTH_TYPE, DEFAULT_DATAPLANE, DEFAULT_REALM,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Pattern of the legacy `stunnerConfig` ConfigMap name.
const CONFIG_MAP_NAME_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";

/// The desired STUNner settings (legacy version).
#[derive(CustomResource, Serialize, Deserialize, Clone, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1alpha1",
    kind = "GatewayConfig",
    plural = "gatewayconfigs",
    namespaced,
    doc = "GatewayConfig holds the STUNner settings of a GatewayClass (legacy version).",
    shortname = "gwconf",
    category = "stunner",
    storage = false,
    printcolumn = r#"{"name": "Realm", "type": "string", "jsonPath": ".spec.realm"}"#,
    printcolumn = r#"{"name": "Auth", "type": "string", "jsonPath": ".spec.authType"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct GatewayConfigSpec {
    /// Name of the ConfigMap the legacy dataplane read its config from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), pattern(CONFIG_MAP_NAME_PATTERN), extend("default" = "stunnerd-config"))]
    pub stunner_config: Option<String>,

    /// STUN/TURN authentication realm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DNS_SUBDOMAIN_PATTERN), extend("default" = DEFAULT_REALM))]
    pub realm: Option<String>,

    /// Metrics endpoint URL of the dataplane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_endpoint: Option<String>,

    /// Health-check endpoint URL of the dataplane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_endpoint: Option<String>,

    /// STUN/TURN authentication mechanism.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(AUTH_TYPE_PATTERN), extend("default" = DEFAULT_AUTH_TYPE))]
    pub auth_type: Option<String>,

    /// Username for `plaintext` authentication.
    #[serde(default, rename = "userName", skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(CREDENTIAL_PATTERN))]
    pub username: Option<String>,

    /// Password for `plaintext` authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(CREDENTIAL_PATTERN))]
    pub password: Option<String>,

    /// Shared secret for `longterm` authentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_secret: Option<String>,

    /// Lifetime of `longterm` credentials in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_lifetime: Option<i32>,

    /// A Secret that holds the credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretObjectReference>,

    /// Annotations for the LoadBalancer Services of Gateways.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub load_balancer_service_annotations: BTreeMap<String, String>,

    /// Default log level of the dataplane daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,

    /// Lowest relay port (no effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_port: Option<i32>,

    /// Highest relay port (no effect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_port: Option<i32>,

    /// Name of the Dataplane that runs the gateways of this config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_DATAPLANE))]
    pub dataplane: Option<String>,
}

crate::resources::optional_spec!(GatewayConfigSpec);

/// Credentials are redacted: specs end up in logs, secrets must not.
impl fmt::Debug for GatewayConfigSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayConfigSpec")
            .field("stunner_config", &self.stunner_config)
            .field("realm", &self.realm)
            .field("metrics_endpoint", &self.metrics_endpoint)
            .field("health_check_endpoint", &self.health_check_endpoint)
            .field("auth_type", &self.auth_type)
            .field("username", &crate::resources::redacted(&self.username))
            .field("password", &crate::resources::redacted(&self.password))
            .field("shared_secret", &crate::resources::redacted(&self.shared_secret))
            .field("auth_lifetime", &self.auth_lifetime)
            .field("auth_ref", &self.auth_ref)
            .field("load_balancer_service_annotations", &self.load_balancer_service_annotations)
            .field("log_level", &self.log_level)
            .field("min_port", &self.min_port)
            .field("max_port", &self.max_port)
            .field("dataplane", &self.dataplane)
            .finish()
    }
}
