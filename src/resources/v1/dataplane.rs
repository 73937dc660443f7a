//! Dataplane `stunner.l7mp.io/v1` (cluster-scoped): the pod template of the managed `stunnerd`
//! Deployments that GatewayConfigs refer to by name.

use crate::resources::schema;
use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, LocalObjectReference, PodSecurityContext, ResourceRequirements, SecurityContext,
    Toleration, TopologySpreadConstraint,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The offload engine used when `offloadEngine` is unset.
pub const DEFAULT_OFFLOAD_ENGINE: &str = "None";
/// Upstream's pattern for `offloadEngine`: an unanchored alternation, kept as written.
pub const OFFLOAD_ENGINE_PATTERN: &str = r"^None|XDP|TC|Auto$";

/// The desired dataplane pods. `envFrom` is accepted for compatibility only.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1",
    kind = "Dataplane",
    plural = "dataplanes",
    doc = "Dataplane is the template of the stunnerd pods the operator runs for each Gateway.",
    shortname = "dps",
    category = "stunner",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct DataplaneSpec {
    /// Container image of the dataplane daemon.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,

    /// Image pull policy: `Always`, `Never` or `IfNotPresent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,

    /// Secrets for pulling the image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<LocalObjectReference>>")]
    pub image_pull_secrets: Vec<LocalObjectReference>,

    /// Kind of workload to run the dataplane in: a Deployment, or a DaemonSet (one pod per node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Deployment"))]
    pub dataplane_resource: Option<DataplaneResourceType>,

    /// Labels for the dataplane pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,

    /// Annotations for the dataplane pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,

    /// Entrypoint of the dataplane container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,

    /// Arguments of the entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,

    /// Environment variable sources of the dataplane container (accepted, unused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<EnvFromSource>>")]
    pub env_from: Vec<EnvFromSource>,

    /// Extra environment variables of the dataplane container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<EnvVar>>")]
    pub env: Vec<EnvVar>,

    /// Security context of the dataplane container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::k8s::<SecurityContext>")]
    pub container_security_context: Option<SecurityContext>,

    /// Number of dataplane pods per Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Compute resources of the dataplane container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::k8s::<ResourceRequirements>")]
    pub resources: Option<ResourceRequirements>,

    /// Grace period for dataplane pods to drain allocations before they are killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,

    /// Run the dataplane pods in the host network namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_network: bool,

    /// Scheduling constraints of the dataplane pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::k8s::<Affinity>")]
    pub affinity: Option<Affinity>,

    /// Pod-level security context of the dataplane pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::k8s::<PodSecurityContext>")]
    pub security_context: Option<PodSecurityContext>,

    /// Tolerations of the dataplane pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<Toleration>>")]
    pub tolerations: Vec<Toleration>,

    /// How dataplane pods spread across topology domains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<TopologySpreadConstraint>>")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,

    /// Disable the dataplane's health-check endpoint and the pods' probes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_health_check: bool,

    /// Expose the dataplane's Prometheus metrics endpoint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_metrics_endpoint: bool,

    /// Offload engine of the dataplane: `None`, `XDP`, `TC` or `Auto` (premium).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(pattern(OFFLOAD_ENGINE_PATTERN), extend("default" = DEFAULT_OFFLOAD_ENGINE))]
    pub offload_engine: String,

    /// Network interfaces to offload on; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offload_interfaces: Vec<String>,
}

crate::resources::optional_spec!(DataplaneSpec);

/// The kind of workload a Dataplane asks for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum DataplaneResourceType {
    #[default]
    Deployment,
    DaemonSet,
}
