//! Where the render loop's results go. Sources send it [`Input`]s (the core's: changes to
//! the index, the end of the initial sync, objects held back) and it renders and hands the
//! results to its [`Outputs`]: the CDS store (through [`ConfigSink`]), the statuses, and in
//! cluster mode the writer, which learns what the watchers saw only from the render loop.
//!
//! [`Input`]: stunner_gateway::index::Input

use crate::admin::Readiness;
use crate::metrics::OperatorMetrics;
use crate::status::StatusBoard;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway_cds::store::ConfigStore;
use stunner_gateway_cds::version::Version;
use stunner_gateway_k8s::nodes::NodeFeed;
use stunner_gateway_k8s::writer::Writer;

/// Where configs are published: the CDS store (a test wraps it to see every version).
pub trait ConfigSink: Send + Sync {
    /// See [`ConfigStore::upsert`].
    fn upsert(&self, config: StunnerConfig) -> Option<Version>;
    /// See [`ConfigStore::delete`].
    fn delete(&self, id: &ConfigId) -> bool;
}

impl ConfigSink for ConfigStore {
    fn upsert(&self, config: StunnerConfig) -> Option<Version> {
        ConfigStore::upsert(self, config)
    }

    fn delete(&self, id: &ConfigId) -> bool {
        ConfigStore::delete(self, id)
    }
}

/// Where rendered results go.
pub struct Outputs {
    pub store: Arc<dyn ConfigSink>,
    pub statuses: Arc<StatusBoard>,
    pub metrics: OperatorMetrics,
    pub readiness: Readiness,
    /// Standalone mode: no API server stores the objects the operator owns, so the index
    /// takes them directly, merged into the stored ones as if applied and watched back (the
    /// renderer reads the Gateway's Service for its public address).
    pub apply_owned_to_index: bool,
    /// Cluster mode: where owned objects and statuses are queued for the API server; the
    /// render loop also tells it every change before applying it to the index.
    pub writer: Option<Writer>,
    /// Where Node changes go for the CDS's per-node patcher.
    pub nodes: NodeFeed,
}
