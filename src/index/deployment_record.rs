//! Deployments as the index keeps them: their metadata, the few things the render reads of the
//! rest, and the rest as JSON text.
//!
//! Every managed Gateway has a Deployment, and a Kubernetes `Deployment` is the largest object
//! the index holds: 2.4 KiB inline and ~8.5 KiB more in ~74 allocations (a `Container` alone is
//! 2.1 KiB inline), beside which a Gateway, its route and its Services are small. The render
//! reads three things of it: its metadata (whose it is, the adopted config's digest), its
//! containers' `STUNNER_CONFIG_ORIGIN` and its unavailable replicas (see `render::adopt`). As
//! JSON text the rest is one allocation of ~1.5 KiB, which a render never touches. With one
//! typed Deployment per Gateway, the Deployments were the largest part of the index a render
//! walks through, and a render of 4,096 Gateways ~20% slower per Gateway (BENCHMARKS.md's
//! history in git, "Render cost per Gateway"). Whoever needs the whole object (the writer's check of what is in
//! place, standalone mode's merge) gets it back with [`DeploymentRecord::to_deployment`], and
//! it serializes as the whole object.

use crate::keys::CONFIG_ORIGIN_ENV;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Serialize, Serializer};

/// A Deployment in the index (see the kind table and the module comment).
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentRecord {
    pub metadata: ObjectMeta,
    /// The value of the first `STUNNER_CONFIG_ORIGIN` among its pod template's containers.
    pub config_origin: Option<String>,
    /// `status.unavailableReplicas`.
    pub unavailable_replicas: Option<i32>,
    /// `status.availableReplicas`: whether it serves yet, when a DaemonSet is replaced by it.
    pub available_replicas: Option<i32>,
    /// The object without its metadata, as JSON.
    rest: Box<str>,
}

impl DeploymentRecord {
    /// The whole object again.
    pub fn to_deployment(&self) -> Deployment {
        let mut deployment: Deployment =
            serde_json::from_str(&self.rest).expect("a Deployment's own JSON reads back as one");
        deployment.metadata = self.metadata.clone();
        deployment
    }
}

impl From<Deployment> for DeploymentRecord {
    fn from(mut deployment: Deployment) -> Self {
        let metadata = std::mem::take(&mut deployment.metadata);
        let origin = config_origin(deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()));
        let status = deployment.status.as_ref();
        DeploymentRecord {
            metadata,
            config_origin: origin.map(str::to_owned),
            unavailable_replicas: status.and_then(|s| s.unavailable_replicas),
            available_replicas: status.and_then(|s| s.available_replicas),
            rest: serde_json::to_string(&deployment).expect("a Deployment serializes").into_boxed_str(),
        }
    }
}

/// The value of the first `STUNNER_CONFIG_ORIGIN` among a pod template's containers.
pub fn config_origin(pod: Option<&PodSpec>) -> Option<&str> {
    let containers = pod.into_iter().flat_map(|p| &p.containers);
    containers.flat_map(|c| c.env.iter().flatten()).find(|e| e.name == CONFIG_ORIGIN_ENV)?.value.as_deref()
}

/// As the whole object: what the API server would show.
impl Serialize for DeploymentRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_deployment().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "gw", "namespace": "ns", "annotations": {"a": "1"}, "resourceVersion": "7"},
            "spec": {
                "selector": {"matchLabels": {"app": "stunner"}},
                "template": {"spec": {"containers": [
                    {"name": "sidecar", "image": "s", "env": [{"name": "OTHER", "value": "x"}]},
                    {"name": "stunnerd", "image": "d", "env": [
                        {"name": "STUNNER_CONFIG_ORIGIN", "value": "http://10.0.0.1:13478"},
                        {"name": "STUNNER_CONFIG_ORIGIN", "value": "http://second"}
                    ]}
                ]}}
            },
            "status": {"replicas": 2, "unavailableReplicas": 1, "availableReplicas": 1}
        }))
        .unwrap()
    }

    #[test]
    fn keeps_what_the_render_reads_and_gives_back_the_whole_object() {
        let record = DeploymentRecord::from(deployment());
        assert_eq!(record.config_origin.as_deref(), Some("http://10.0.0.1:13478"), "the first one found");
        assert_eq!((record.unavailable_replicas, record.available_replicas), (Some(1), Some(1)));
        assert_eq!(record.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(record.to_deployment(), deployment());
        assert_eq!(serde_json::to_value(&record).unwrap(), serde_json::to_value(deployment()).unwrap());
    }

    #[test]
    fn a_deployment_without_template_or_status_has_neither() {
        let record = DeploymentRecord::from(Deployment::default());
        assert_eq!((record.config_origin, record.unavailable_replicas, record.available_replicas), (None, None, None));
    }
}
