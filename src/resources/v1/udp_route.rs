//! UDPRoute `stunner.l7mp.io/v1`: STUNner's own UDP route. Gateway API's `v1alpha2` UDPRoute
//! cannot express port ranges (`endPort`), requires backend ports and is not always installed;
//! this one mirrors it otherwise (the spec's parent fields are Gateway API's `CommonRouteSpec`,
//! the status is Gateway API's `RouteStatus`).

use crate::resources::gateway::{
    GROUP_PATTERN, GatewayDefaultScope, KIND_PATTERN, NAMESPACE_PATTERN, ParentReference, RouteParentStatus,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a UDPRoute attaches and where it lets traffic go.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1",
    kind = "UDPRoute",
    root = "UdpRoute",
    plural = "udproutes",
    namespaced,
    doc = "UDPRoute routes UDP traffic from Gateway listeners to Services and StaticServices.",
    category = "stunner",
    status = "UdpRouteStatus",
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct UdpRouteSpec {
    /// The Gateways (listeners) the route attaches to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic"))]
    pub parent_refs: Vec<ParentReference>,

    /// Which default Gateways the route attaches to (Gateway API experimental; unused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<GatewayDefaultScope>,

    /// Routing rules; only the first is used.
    #[schemars(length(min = 1, max = 16))]
    pub rules: Vec<UdpRouteRule>,
}

/// One routing rule: where the route's traffic may go.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UdpRouteRule {
    /// The backends (Services or StaticServices) peers may reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 16))]
    pub backend_refs: Vec<BackendRef>,
}

/// A backend of a rule. Unlike Gateway API's it has no `weight` and takes a port range.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendRef {
    /// API group of the backend: `""` (core, the default) or `stunner.l7mp.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), pattern(GROUP_PATTERN), extend("default" = ""))]
    pub group: Option<String>,

    /// Kind of the backend: `Service` (the default) or `StaticService`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(KIND_PATTERN), extend("default" = "Service"))]
    pub kind: Option<String>,

    /// Name of the backend.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,

    /// Namespace of the backend; unset means the route's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(NAMESPACE_PATTERN))]
    pub namespace: Option<String>,

    /// First port peers may reach; unset means every port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,

    /// Last port of the range that starts at `port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_port: Option<i32>,
}

/// The route's status: one entry per parent, written by the controllers of the parents.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UdpRouteStatus {
    /// The route's status with respect to each parent that accepted or rejected it.
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic"))]
    pub parents: Vec<RouteParentStatus>,
}
