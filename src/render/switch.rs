//! Which dataplane object a Gateway gets (its Dataplane's `dataplaneResource`: a Deployment or
//! a DaemonSet, both named after the Gateway), and when the object of the other kind, left from
//! before the Dataplane was switched, goes.
//!
//! The new object is applied at once; the old one is deleted only once the new one has an
//! available pod (make before break), so the Gateway's Service, which selects the pods of
//! both (same labels), always has one to send to. The status change that makes the new one
//! available re-renders the Gateway, which then deletes the old one. Host-network dataplanes
//! are the exception: the old pods hold the listeners' ports on their nodes, so the new ones
//! could not start beside them on those nodes, and the old one goes first (break before make).

use super::Owned;
use super::adopt::{self, InPlace};
use super::deployment;
use super::infrastructure::owned_key;
use super::settings::RenderSettings;
use crate::config::StunnerConfig;
use crate::index::{Index, ObjectKey};
use crate::resources::{Dataplane, DataplaneResourceType};
use gateway_api::gateways::Gateway;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};

/// What to do with each of a Gateway's two possible dataplane objects.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct DataplaneObjects {
    pub deployment: Owned<Deployment>,
    pub daemon_set: Owned<DaemonSet>,
}

/// The objects for a Gateway that runs `dp`'s dataplane with `config`.
pub(crate) fn render(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    dp: &Dataplane,
    settings: &RenderSettings,
    config: &StunnerConfig,
) -> DataplaneObjects {
    let owned = owned_key(key);
    let held_deployment = index.deployments().get(&owned);
    let held_daemon_set = index.daemon_sets().get(&owned);
    match dp.spec.dataplane_resource.unwrap_or_default() {
        DataplaneResourceType::Deployment => {
            if settings.held_deployments_only && held_deployment.is_none() {
                return DataplaneObjects::default();
            }
            let mut d = deployment::render(key, gw, dp, settings);
            let template = d.spec.as_mut().map(|s| &mut s.template);
            adopt::keep_foreign_origin(&mut d.metadata, template, held_deployment.map(InPlace::from), config);
            let serves = held_deployment.and_then(|h| h.available_replicas).unwrap_or(0) > 0;
            DataplaneObjects {
                deployment: Owned::Apply(d),
                daemon_set: retire(held_daemon_set.is_some(), serves, dp.spec.host_network),
            }
        }
        DataplaneResourceType::DaemonSet => {
            if settings.held_deployments_only && held_daemon_set.is_none() {
                return DataplaneObjects::default();
            }
            let mut d = deployment::render_daemon_set(key, gw, dp, settings);
            let template = d.spec.as_mut().map(|s| &mut s.template);
            adopt::keep_foreign_origin(&mut d.metadata, template, held_daemon_set.map(InPlace::from), config);
            let serves =
                held_daemon_set.and_then(|h| h.status.as_ref()).map_or(0, |s| s.number_available.unwrap_or(0)) > 0;
            DataplaneObjects {
                deployment: retire(held_deployment.is_some(), serves, dp.spec.host_network),
                daemon_set: Owned::Apply(d),
            }
        }
    }
}

/// The object of the other kind: deleted unless it is there and still the only one that can
/// serve (the writer sends the delete only for one its watchers show).
fn retire<T>(held: bool, wanted_serves: bool, host_network: bool) -> Owned<T> {
    if held && !wanted_serves && !host_network { Owned::Keep } else { Owned::Delete }
}
