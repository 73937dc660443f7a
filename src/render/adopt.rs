//! Adopting dataplanes started against another config discovery address, without restarting
//! them.
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
use crate::index::DeploymentRecord;
use crate::keys::{ADOPTED_CONFIG, CONFIG_ORIGIN_ENV};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::EnvVar;

/// Keeps `live`'s foreign origin in `rendered` while the adoption rules above allow it.
pub fn keep_foreign_origin(rendered: &mut Deployment, live: Option<&DeploymentRecord>, config: &StunnerConfig) {
    let Some(live) = live else { return };
    let Some(theirs) = &live.config_origin else { return };
    let Some(ours) = origin_mut(rendered) else { return };
    if ours.value.as_ref() == Some(theirs) {
        return;
    }
    let digest = format!("{:016x}", config.digest());
    let adopted = live.metadata.annotations.as_ref().and_then(|a| a.get(ADOPTED_CONFIG));
    let available = live.unavailable_replicas.unwrap_or(0) == 0;
    if adopted.is_none_or(|a| *a == digest) && available {
        ours.value = Some(theirs.clone());
        rendered.metadata.annotations.get_or_insert_default().insert(ADOPTED_CONFIG.into(), digest);
    }
}

fn origin_mut(d: &mut Deployment) -> Option<&mut EnvVar> {
    let containers = &mut d.spec.as_mut()?.template.spec.as_mut()?.containers;
    containers.iter_mut().flat_map(|c| c.env.iter_mut().flatten()).find(|e| e.name == CONFIG_ORIGIN_ENV)
}
