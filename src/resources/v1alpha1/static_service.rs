//! StaticService `stunner.l7mp.io/v1alpha1`, served for old manifests only.

use crate::resources::schema;
use k8s_openapi::api::core::v1::ServicePort;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The prefixes (and unused ports) of a StaticService.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1alpha1",
    kind = "StaticService",
    plural = "staticservices",
    namespaced,
    doc = "StaticService is a set of IP address prefixes that UDPRoutes can use as a backend (legacy version).",
    shortname = "ssvc",
    category = "stunner",
    storage = false,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self")]
pub struct StaticServiceSpec {
    /// Ports of the service (never used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        schema_with = "schema::k8s::<Vec<ServicePort>>",
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["port", "protocol"])
    )]
    pub ports: Vec<ServicePort>,

    /// IP addresses or CIDR prefixes reachable through this service.
    pub prefixes: Vec<String>,
}

crate::resources::optional_spec!(StaticServiceSpec);
