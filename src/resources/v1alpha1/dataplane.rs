//! Dataplane `stunner.l7mp.io/v1alpha1`, served for old manifests only.

use crate::resources::schema;
use k8s_openapi::api::core::v1::{Affinity, EnvVar, PodSecurityContext, ResourceRequirements, Toleration};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The desired dataplane pods (legacy version).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "stunner.l7mp.io",
    version = "v1alpha1",
    kind = "Dataplane",
    plural = "dataplanes",
    doc = "Dataplane is the template of the stunnerd pods the operator runs for each Gateway (legacy version).",
    shortname = "dps",
    category = "stunner",
    storage = false,
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct DataplaneSpec {
    /// Number of dataplane pods per Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Container image of the dataplane daemon.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,

    /// Image pull policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,

    /// Entrypoint of the dataplane container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,

    /// Arguments of the entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,

    /// Extra environment variables of the dataplane container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::k8s::<Vec<EnvVar>>")]
    pub env: Vec<EnvVar>,

    /// Compute resources of the dataplane container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::k8s::<ResourceRequirements>")]
    pub resources: Option<ResourceRequirements>,

    /// Grace period of the dataplane pods.
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

    /// Port of the dataplane's health-check endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::integer")]
    pub health_check_port: Option<i64>,
}

crate::resources::optional_spec!(DataplaneSpec);
