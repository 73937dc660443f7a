//! Where the render loop's results go. Sources send it [`Input`]s (the core's: changes to
//! the index, the end of the initial sync, objects held back) and it renders and hands the
//! results to its [`Outputs`]: the CDS store (through [`ConfigSink`]), the statuses, and the
//! operator's own objects, which go where the mode says ([`mode`]: to the writer in a
//! cluster, [`cluster`]; into the index standalone, [`standalone`]).
//!
//! [`Input`]: stunner_gateway::index::Input

pub mod cluster;
pub mod mode;
pub(crate) mod owned;
pub(crate) mod service_wait;
pub mod standalone;

use crate::admin::Readiness;
use crate::metrics::OperatorMetrics;
use crate::status::StatusBoard;
use mode::Mode;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway_cds::store::ConfigStore;
use stunner_gateway_cds::version::Version;
use stunner_gateway_k8s::nodes::NodeFeed;

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
    /// Where owned objects and statuses go, and when configs are published: the mode.
    pub mode: Box<dyn Mode>,
    /// Where Node changes go for the CDS's per-node patcher.
    pub nodes: NodeFeed,
}
