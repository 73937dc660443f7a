//! Standalone mode's outputs: no API server stores the operator's objects, so they go straight
//! into the index, merged as a server-side apply would ([`OwnedObjects`]); no apply body is
//! ever built, and each config is published as it is rendered (the render loop publishes a
//! Gateway only once its own objects are in the index: `reconcile/settle.rs`).

use super::mode::{Mode, PublicationGate};
use super::owned::OwnedObjects;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Change, Index, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderOutput, SerializedStatus};
use tokio::time::Instant;

/// Into the index, as if applied and watched back.
#[derive(Default)]
pub struct Standalone {
    owned: OwnedObjects,
    at_once: AtOnce,
}

impl Mode for Standalone {
    /// Nothing to tell: there is no writer.
    fn observe(&self, _: &[Change]) {}

    /// What the operator applied to the object is kept until others change it.
    fn before_change(&mut self, index: &Index, change: &Change) {
        self.owned.before_outside_change(index, change);
    }

    fn owned_changes(&mut self, index: &Index, key: &ObjectKey, gw: &GatewayOutput, changes: &mut Vec<Change>) {
        changes.extend(self.owned.changes(index, key, gw));
    }

    /// Nothing to write: the objects went into the index ([`Self::owned_changes`]), statuses
    /// are shown on the status board only.
    fn write_gateway(&self, _: &ObjectKey, _: &GatewayOutput, _: Option<SerializedStatus>, _: &Index) {}

    fn write_config_map(&self, _: &ObjectKey, _: &Owned<ConfigMap>, _: &Index) {}

    fn write_status(&self, _: SerializedStatus, _: &Index) {}

    fn flush(&self) {}

    /// No dataplane of ours to remove, no status to invalidate: nothing is rendered.
    fn finalize(&self, _: &Index, _: &dyn Fn() -> RenderOutput) {}

    fn publication(&mut self) -> &mut dyn PublicationGate {
        &mut self.at_once
    }
}

/// Every config published as it is rendered.
#[derive(Default)]
struct AtOnce;

impl PublicationGate for AtOnce {
    fn admit(
        &mut self,
        _: &ObjectKey,
        config: StunnerConfig,
        _: &Owned<Service>,
        _: &mut Option<SerializedStatus>,
        _: &Index,
    ) -> Option<StunnerConfig> {
        Some(config)
    }

    fn forget(&mut self, _: &ObjectKey) {}

    fn next_deadline(&self) -> Option<Instant> {
        None
    }

    fn expired(&mut self) -> Vec<(ObjectKey, StunnerConfig, Option<SerializedStatus>)> {
        Vec::new()
    }
}
