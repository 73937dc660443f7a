//! Gateway API shapes embedded in STUNner's CRDs, with the validation that Gateway API's Go types
//! carry (the `gateway-api` crate's generated types have none, so their schemas would be looser).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// An API group (`Group`): empty for the core group, else a DNS subdomain.
pub(crate) const GROUP_PATTERN: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A kind (`Kind`).
pub(crate) const KIND_PATTERN: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
/// A namespace (`Namespace`): a DNS label.
pub(crate) const NAMESPACE_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// A DNS subdomain (`SectionName`, STUNner's realm).
pub(crate) const DNS_SUBDOMAIN_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A controller name (`GatewayController`): a domain-prefixed path.
pub(crate) const CONTROLLER_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$";

/// A condition type: an optionally domain-prefixed CamelCase name.
const CONDITION_TYPE_PATTERN: &str = concat!(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?",
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
);

/// A reference to a Secret (Gateway API `SecretObjectReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretObjectReference {
    /// API group of the referent; empty (the default) is the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = ""))]
    pub group: Option<String>,
    /// Kind of the referent, `Secret` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Secret"))]
    pub kind: Option<String>,
    /// Name of the referent.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the referent; unset means the namespace of the referring object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(NAMESPACE_PATTERN))]
    pub namespace: Option<String>,
}

/// A route's reference to its parent, usually a Gateway (Gateway API `ParentReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// API group of the parent, `gateway.networking.k8s.io` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = "gateway.networking.k8s.io"))]
    pub group: Option<String>,
    /// Kind of the parent, `Gateway` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Gateway"))]
    pub kind: Option<String>,
    /// Namespace of the parent; unset means the route's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(NAMESPACE_PATTERN))]
    pub namespace: Option<String>,
    /// Name of the parent.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// A section of the parent to attach to: for a Gateway, a listener name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN_PATTERN))]
    pub section_name: Option<String>,
    /// A port of the parent to attach to (accepted, but STUNner ignores it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// Which default Gateways a route wants to attach to (Gateway API `GatewayDefaultScope`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum GatewayDefaultScope {
    /// Attach to every default Gateway.
    All,
    /// Attach to no default Gateway (the same as unset).
    None,
}

/// The status of a route with respect to one of its parents (Gateway API `RouteParentStatus`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The parent this status is about.
    pub parent_ref: ParentReference,
    /// The controller that wrote this status.
    #[schemars(length(min = 1, max = 253), pattern(CONTROLLER_NAME_PATTERN))]
    pub controller_name: String,
    /// The route's conditions with respect to the parent (`Accepted`, `ResolvedRefs`, ...).
    #[schemars(schema_with = "conditions")]
    pub conditions: Vec<Condition>,
}

/// Schema of a Gateway API condition list: 1 to 8 `metav1.Condition`s, a map keyed by `type`.
fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = schemars::json_schema!({
        "type": "array",
        "minItems": 1,
        "maxItems": 8,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    });
    schema.insert("items".into(), condition(generator).to_value());
    schema
}

/// Schema of `metav1.Condition` with its kubebuilder validation (k8s-openapi's has none).
pub(crate) fn condition(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "Condition contains details for one aspect of the current state of this API Resource.",
        "properties": {
            "lastTransitionTime": {
                "description": "The last time the condition transitioned from one status to another.",
                "type": "string",
                "format": "date-time",
            },
            "message": {
                "description": "A human readable message indicating details about the transition.",
                "type": "string",
                "maxLength": 32768,
            },
            "observedGeneration": {
                "description": "The .metadata.generation that the condition was set based upon.",
                "type": "integer",
                "format": "int64",
                "minimum": 0,
            },
            "reason": {
                "description": "A programmatic identifier indicating the reason for the condition's last transition.",
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "status": {
                "description": "Status of the condition, one of True, False, Unknown.",
                "type": "string",
                "enum": ["True", "False", "Unknown"],
            },
            "type": {
                "description": "Type of condition in CamelCase or in foo.example.com/CamelCase.",
                "type": "string",
                "maxLength": 316,
                "pattern": CONDITION_TYPE_PATTERN,
            },
        },
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
    })
}
