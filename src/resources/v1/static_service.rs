//! StaticService `stunner.l7mp.io/v1`: a set of IP prefixes usable as a UDPRoute backend, for
//! peers that are not Kubernetes Services.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The prefixes of a StaticService.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1",
    kind = "StaticService",
    plural = "staticservices",
    namespaced,
    doc = "StaticService is a set of IP address prefixes that UDPRoutes can use as a backend.",
    shortname = "ssvc",
    category = "stunner",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self")]
pub struct StaticServiceSpec {
    /// IP addresses or CIDR prefixes reachable through this service.
    pub prefixes: Vec<String>,
}

crate::resources::optional_spec!(StaticServiceSpec);
