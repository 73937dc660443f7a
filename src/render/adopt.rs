//! Adopting dataplanes started against another config discovery address, without restarting
//! them (Deployments and DaemonSets alike).
//!
//! The Go operator tells dataplanes its own pod IP (`STUNNER_CONFIG_ORIGIN`); this operator
//! tells them a stable Service name. Rewriting the origin changes the pod template, and that
//! rolls every dataplane pod and drops its TURN sessions. So a Deployment found pointing
//! elsewhere keeps its origin as long as its pods cannot notice the difference: while the
//! config is the one it had when adopted (its digest is kept in an annotation on the
//! Deployment, not in the pod template, so neither writing nor removing it rolls pods) and
//! every pod is available. When the config changes, the pods must get it from us, and the
//! origin is rewritten (one roll, to the stable address, once); an unavailable pod (one
//! rescheduled against the old address and unable to get a config) ends the adoption too.
//! The state lives in the cluster, so every replica and every restart decides the same.

use crate::config::StunnerConfig;
use crate::index::{DeploymentRecord, config_origin};
use crate::keys::{ADOPTED_CONFIG, CONFIG_ORIGIN_ENV};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{EnvVar, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What adoption reads of the dataplane object in place, of either kind.
pub(crate) struct InPlace<'a> {
    metadata: &'a ObjectMeta,
    config_origin: Option<&'a str>,
    /// Whether none of its pods is unavailable.
    all_available: bool,
}

impl<'a> From<&'a DeploymentRecord> for InPlace<'a> {
    fn from(d: &'a DeploymentRecord) -> Self {
        InPlace {
            metadata: &d.metadata,
            config_origin: d.config_origin.as_deref(),
            all_available: d.unavailable_replicas.unwrap_or(0) == 0,
        }
    }
}

impl<'a> From<&'a DaemonSet> for InPlace<'a> {
    fn from(d: &'a DaemonSet) -> Self {
        InPlace {
            metadata: &d.metadata,
            config_origin: config_origin(d.spec.as_ref().and_then(|s| s.template.spec.as_ref())),
            all_available: d.status.as_ref().and_then(|s| s.number_unavailable).unwrap_or(0) == 0,
        }
    }
}

/// Keeps `live`'s foreign origin in the rendered object (its `metadata` and pod `template`)
/// while the adoption rules above allow it.
pub(crate) fn keep_foreign_origin(
    metadata: &mut ObjectMeta,
    template: Option<&mut PodTemplateSpec>,
    live: Option<InPlace<'_>>,
    config: &StunnerConfig,
) {
    let Some(live) = live else { return };
    let Some(theirs) = live.config_origin else { return };
    let Some(ours) = template.and_then(origin_mut) else { return };
    if ours.value.as_deref() == Some(theirs) {
        return;
    }
    let digest = format!("{:016x}", config.digest());
    let adopted = live.metadata.annotations.as_ref().and_then(|a| a.get(ADOPTED_CONFIG));
    if adopted.is_none_or(|a| *a == digest) && live.all_available {
        ours.value = Some(theirs.to_owned());
        metadata.annotations.get_or_insert_default().insert(ADOPTED_CONFIG.into(), digest);
    }
}

fn origin_mut(template: &mut PodTemplateSpec) -> Option<&mut EnvVar> {
    let containers = &mut template.spec.as_mut()?.containers;
    containers.iter_mut().flat_map(|c| c.env.iter_mut().flatten()).find(|e| e.name == CONFIG_ORIGIN_ENV)
}
