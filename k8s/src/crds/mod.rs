//! STUNner's own CustomResourceDefinitions, applied by the operator at start when asked
//! (`--install-crds`), before any watcher starts: Helm installs a chart's `crds/` once and
//! never upgrades them, so without this a `helm upgrade` leaves the old schemas in place.
//!
//! Every replica applies them (server-side apply, forced, as the operator's field manager):
//! the apply is idempotent, each replica must know the CRDs are Established before it
//! watches, and tying it to the leader would make a non-leader wait for an election it may
//! never win. An older schema is never applied over a newer one ([`decide`]): during a rolling
//! upgrade an old replica that restarts leaves the new CRDs alone. The apply carries the
//! resourceVersion read for the decision, so a CRD that changed in between is read and decided
//! again, not overwritten.

mod decide;
pub mod files;

pub use decide::{Decision, bundle_version, decide};

use super::ops::FIELD_MANAGER;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use semver::Version;
use std::time::Duration;
use stunner_gateway::keys::CRD_BUNDLE_VERSION;
use tokio::time::Instant;

/// How long the CRDs may take to become Established before start-up fails.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a CRD that changed between our read and our apply is read and decided again.
const MAX_ATTEMPTS: usize = 5;
/// Between two looks at a CRD's conditions.
const POLL: Duration = Duration::from_millis(250);

/// Why the CRDs could not be installed; start-up fails with it.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(
        "CRD {name} has no {annotation} annotation with a version: cannot tell whether it is older or newer than the cluster's"
    )]
    Unversioned { name: String, annotation: &'static str },
    #[error("cannot read CRD {0}")]
    Read(String, #[source] kube::Error),
    #[error("cannot apply CRD {0}")]
    Apply(String, #[source] kube::Error),
    #[error("CRD {name} kept changing while we applied it ({attempts} attempts)")]
    Contended { name: String, attempts: usize },
    #[error("CRD {name} is not Established after {}s: {why}", .waited.as_secs())]
    NotEstablished { name: String, waited: Duration, why: String },
}

/// Applies each of `crds` unless the cluster has a newer one (logging which and why), then
/// waits until all of them are Established, for up to `timeout`.
pub async fn install(
    client: &Client,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<(), InstallError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let version = bundle_version(crd)
            .and_then(|v| Version::parse(v).ok())
            .ok_or_else(|| InstallError::Unversioned { name: name.clone(), annotation: CRD_BUNDLE_VERSION })?;
        match apply_one(&api, &name, crd, &version).await? {
            Decision::Newer { why } => {
                tracing::warn!(crd = %name, ours = %version, "leaving the cluster's CRD alone: {why}")
            }
            Decision::Create => tracing::info!(crd = %name, version = %version, "created CRD"),
            Decision::Upgrade { from } => tracing::info!(
                crd = %name, from = %from.as_deref().unwrap_or("unversioned"), to = %version, "upgraded CRD"
            ),
            Decision::Same => tracing::info!(crd = %name, version = %version, "CRD is current"),
        }
    }
    let deadline = Instant::now() + timeout;
    for crd in crds {
        wait_established(&api, crd.metadata.name.as_deref().unwrap_or_default(), deadline, timeout).await?;
    }
    Ok(())
}

/// Decides against the live CRD and applies ours if it should; returns the decision carried out.
async fn apply_one(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    crd: &CustomResourceDefinition,
    version: &Version,
) -> Result<Decision, InstallError> {
    for _ in 0..MAX_ATTEMPTS {
        let live = api.get_opt(name).await.map_err(|e| InstallError::Read(name.into(), e))?;
        let decision = decide(live.as_ref(), crd, version);
        if matches!(decision, Decision::Newer { .. }) {
            return Ok(decision);
        }
        let mut body = crd.clone();
        body.status = None;
        // A precondition: the apply fails with a conflict if the CRD changed since we read it.
        body.metadata.resource_version = live.and_then(|l| l.metadata.resource_version);
        match api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await {
            Ok(_) => return Ok(decision),
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(InstallError::Apply(name.into(), e)),
        }
    }
    Err(InstallError::Contended { name: name.into(), attempts: MAX_ATTEMPTS })
}

/// Polls the CRD until its `Established` condition is True, or `deadline`.
async fn wait_established(
    api: &Api<CustomResourceDefinition>,
    name: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<(), InstallError> {
    loop {
        let crd = api.get_opt(name).await.map_err(|e| InstallError::Read(name.into(), e))?;
        let conditions = crd.as_ref().and_then(|c| c.status.as_ref()).and_then(|s| s.conditions.as_ref());
        let established = conditions.and_then(|cs| cs.iter().find(|c| c.type_ == "Established"));
        if established.is_some_and(|c| c.status == "True") {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let why = match (crd.is_some(), established) {
                (false, _) => "it does not exist".to_string(),
                (true, None) => "it has no Established condition yet".to_string(),
                (true, Some(c)) => format!(
                    "Established={} ({}: {})",
                    c.status,
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                ),
            };
            return Err(InstallError::NotEstablished { name: name.into(), waited: timeout, why });
        }
        tokio::time::sleep(POLL).await;
    }
}
