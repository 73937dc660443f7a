//! The mode, as the render loop sees it: where the operator's own objects (a Gateway's Service
//! and dataplane, legacy mode's ConfigMaps) and its statuses go, and when a Gateway's config
//! is published. Two implementations, one per mode, chosen once by the daemon from its source:
//! [`Cluster`] and [`Standalone`]. The render loop calls them through [`Mode`] without knowing
//! which it holds, and neither asks which mode it is.
//!
//! [`Cluster`]: super::cluster::Cluster
//! [`Standalone`]: super::standalone::Standalone

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Change, Index, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderOutput, SerializedStatus};
use tokio::time::Instant;

/// Where owned objects and statuses go.
pub trait Mode: Send {
    /// What the watchers saw, told before `changes` reach the index.
    fn observe(&self, changes: &[Change]);

    /// Just before a source's `change` reaches `index`.
    fn before_change(&mut self, index: &Index, change: &Change);

    /// Appends to `changes` the index changes Gateway `key`'s owned objects amount to, where
    /// no watcher brings them back.
    fn owned_changes(&mut self, index: &Index, key: &ObjectKey, gw: &GatewayOutput, changes: &mut Vec<Change>);

    /// Stages Gateway `key`'s owned objects and its `status` for writing, unless `index`
    /// shows them in place already.
    fn write_gateway(&self, key: &ObjectKey, gw: &GatewayOutput, status: Option<SerializedStatus>, index: &Index);

    /// Stages legacy mode's ConfigMap of `key` for writing.
    fn write_config_map(&self, key: &ObjectKey, config_map: &Owned<ConfigMap>, index: &Index);

    /// Stages a route's, a class's or a held Gateway's status for writing.
    fn write_status(&self, status: SerializedStatus, index: &Index);

    /// Hands what the last render or expired wait staged on, all together.
    fn flush(&self);

    /// `--enable-finalizer` at exit: writes what `finalize` renders (every class of ours
    /// invalidated, their dataplanes removed).
    fn finalize(&self, index: &Index, finalize: &dyn Fn() -> RenderOutput);

    /// When a Gateway's rendered config is published.
    fn publication(&mut self) -> &mut dyn PublicationGate;
}

/// When a Gateway's rendered config is published: at once, or held until what it needs is in
/// the index (at most until a deadline).
pub trait PublicationGate {
    /// Gateway `key`'s new `config`, rendered with the Service `service` asks for: `Some` to
    /// publish now, `None` held. A held config's `status` (taken) is held with it: written
    /// without what the config waits for, it would be written twice.
    fn admit(
        &mut self,
        key: &ObjectKey,
        config: StunnerConfig,
        service: &Owned<Service>,
        status: &mut Option<SerializedStatus>,
        index: &Index,
    ) -> Option<StunnerConfig>;

    /// Gateway `key` has no config any more.
    fn forget(&mut self, key: &ObjectKey);

    /// When the first held config is due.
    fn next_deadline(&self) -> Option<Instant>;

    /// The held configs that are due, to be published as they are, each with the status held
    /// with it.
    fn expired(&mut self) -> Vec<(ObjectKey, StunnerConfig, Option<SerializedStatus>)>;
}
