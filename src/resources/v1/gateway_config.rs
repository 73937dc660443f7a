//! GatewayConfig `stunner.l7mp.io/v1`: the STUNner settings (realm, auth, dataplane) a
//! GatewayClass points to through its `parametersRef`.

use crate::resources::gateway::{DNS_SUBDOMAIN_PATTERN, SecretObjectReference};
use crate::resources::schema;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The Dataplane used when `dataplane` is unset.
pub const DEFAULT_DATAPLANE: &str = "default";
/// The realm used when `realm` is unset.
pub const DEFAULT_REALM: &str = "stunner.l7mp.io";
/// The auth type used when `authType` is unset.
pub const DEFAULT_AUTH_TYPE: &str = "plaintext";
/// The auth types upstream accepts. Written as an unanchored alternation upstream, so it
/// effectively only requires a prefix or suffix match; kept as written for compatibility.
pub const AUTH_TYPE_PATTERN: &str = r"^plaintext|static|longterm|ephemeral|timewindowed$";
/// Characters allowed in inline credentials (the RFC 7230 `token` alphabet).
pub const CREDENTIAL_PATTERN: &str = r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$";

/// The desired STUNner settings. Schema defaults are applied by the API server only: a field
/// unset in a manifest read without one stays `None` (consumers apply the `DEFAULT_*` values).
#[derive(CustomResource, Serialize, Deserialize, Clone, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1",
    kind = "GatewayConfig",
    plural = "gatewayconfigs",
    namespaced,
    doc = "GatewayConfig holds the STUNner settings (realm, auth, dataplane) of a GatewayClass.",
    shortname = "gwconf",
    category = "stunner",
    printcolumn = r#"{"name": "Realm", "type": "string", "jsonPath": ".spec.realm"}"#,
    printcolumn = r#"{"name": "Dataplane", "type": "string", "jsonPath": ".spec.dataplane"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct GatewayConfigSpec {
    /// Name of the cluster-scoped Dataplane that runs the gateways of this config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_DATAPLANE))]
    pub dataplane: Option<String>,

    /// STUN/TURN authentication realm: lower-case DNS-subdomain syntax.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DNS_SUBDOMAIN_PATTERN), extend("default" = DEFAULT_REALM))]
    pub realm: Option<String>,

    /// STUN/TURN authentication mechanism: `plaintext` (alias `static`), or `longterm` (alias
    /// `ephemeral`, `timewindowed`).
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

    /// Lifetime of `longterm` credentials in seconds (accepted, never rendered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_lifetime: Option<i32>,

    /// A Secret that holds the credentials (`type`, then `username`/`password` or `secret`); when
    /// set, it overrides every inline credential field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretObjectReference>,

    /// Annotations for the LoadBalancer Services the operator creates for Gateways. Removing
    /// one here does not remove it from existing Services.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub load_balancer_service_annotations: BTreeMap<String, String>,

    /// Default log level of the dataplane daemon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,

    /// Limit of simultaneous allocations per TURN username (`admin.user_quota`); 0 means none.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(schema_with = "schema::integer")]
    pub user_quota: i64,

    /// STUN-only mode: authentication off (`auth.type: none`), so the dataplane answers STUN
    /// binding requests and refuses every TURN allocation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stun_mode: bool,

    /// The `ipFamilyPolicy` of the Gateways' Services; unset: `RequireDualStack` with two
    /// `ipFamilies`, `SingleStack` with one, the cluster's default with none. The Gateway
    /// annotation `stunner.l7mp.io/ip-family-policy` wins. Not in the Go operator's CRD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_family_policy: Option<IpFamilyPolicy>,

    /// The `ipFamilies` of the Gateways' Services, the primary first: each listener's public
    /// address in the dataplane config is of the primary family. The Gateway annotation
    /// `stunner.l7mp.io/ip-families` (`IPv6,IPv4`) wins. Not in the Go operator's CRD.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2), extend("x-kubernetes-list-type" = "atomic"))]
    pub ip_families: Vec<IpFamily>,
}

/// A Service's IP family policy, as Kubernetes names it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum IpFamilyPolicy {
    SingleStack,
    PreferDualStack,
    RequireDualStack,
}

impl IpFamilyPolicy {
    const ALL: [IpFamilyPolicy; 3] =
        [IpFamilyPolicy::SingleStack, IpFamilyPolicy::PreferDualStack, IpFamilyPolicy::RequireDualStack];

    /// The name, as in the manifests.
    pub fn name(self) -> &'static str {
        match self {
            IpFamilyPolicy::SingleStack => "SingleStack",
            IpFamilyPolicy::PreferDualStack => "PreferDualStack",
            IpFamilyPolicy::RequireDualStack => "RequireDualStack",
        }
    }

    /// The policy of this name, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// An IP family, as Kubernetes names it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum IpFamily {
    IPv4,
    IPv6,
}

impl IpFamily {
    /// The name, as in the manifests.
    pub fn name(self) -> &'static str {
        match self {
            IpFamily::IPv4 => "IPv4",
            IpFamily::IPv6 => "IPv6",
        }
    }

    /// The family of this name, if any.
    pub fn parse(name: &str) -> Option<Self> {
        [IpFamily::IPv4, IpFamily::IPv6].into_iter().find(|f| f.name() == name)
    }

    /// The family of an address.
    pub fn of(ip: std::net::IpAddr) -> Self {
        if ip.is_ipv4() { IpFamily::IPv4 } else { IpFamily::IPv6 }
    }
}

crate::resources::optional_spec!(GatewayConfigSpec);

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Credentials are redacted: specs end up in logs, secrets must not.
impl fmt::Debug for GatewayConfigSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayConfigSpec")
            .field("dataplane", &self.dataplane)
            .field("realm", &self.realm)
            .field("auth_type", &self.auth_type)
            .field("username", &crate::resources::redacted(&self.username))
            .field("password", &crate::resources::redacted(&self.password))
            .field("shared_secret", &crate::resources::redacted(&self.shared_secret))
            .field("auth_lifetime", &self.auth_lifetime)
            .field("auth_ref", &self.auth_ref)
            .field("load_balancer_service_annotations", &self.load_balancer_service_annotations)
            .field("log_level", &self.log_level)
            .field("user_quota", &self.user_quota)
            .field("stun_mode", &self.stun_mode)
            .field("ip_family_policy", &self.ip_family_policy)
            .field("ip_families", &self.ip_families)
            .finish()
    }
}
