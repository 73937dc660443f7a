//! Cluster mode's outputs: the writer applies owned objects and statuses to the API server, and
//! the watchers bring the objects back as later changes; a Gateway's config waits for the
//! Service it asked for ([`ServiceWait`]).

use super::mode::{Mode, PublicationGate};
use super::service_wait::{SERVICE_WAIT, ServiceWait};
use k8s_openapi::api::core::v1::ConfigMap;
use stunner_gateway::index::{Change, Index, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderOutput, SerializedStatus};
use stunner_gateway_k8s::ops;
use stunner_gateway_k8s::writer::Writer;

/// To the API server, through the writer's queue; configs wait for their Service.
pub struct Cluster {
    writer: Writer,
    service_wait: ServiceWait,
}

impl Cluster {
    /// `writer` writes what the render loop queues.
    pub fn new(writer: Writer) -> Self {
        Cluster { writer, service_wait: ServiceWait::new(SERVICE_WAIT) }
    }
}

impl Mode for Cluster {
    /// The writer skips writes already in place (`Writer::observe`).
    fn observe(&self, changes: &[Change]) {
        self.writer.observe(changes.iter().map(Change::seen));
    }

    /// Nothing to keep: the API server keeps what the operator applied.
    fn before_change(&mut self, _: &Index, _: &Change) {}

    /// None: the watchers bring the written objects back.
    fn owned_changes(&mut self, _: &Index, _: &ObjectKey, _: &GatewayOutput, _: &mut Vec<Change>) {}

    fn write_gateway(&self, key: &ObjectKey, gw: &GatewayOutput, status: Option<SerializedStatus>, index: &Index) {
        self.writer.stage(status.and_then(ops::status_op).into_iter().chain(ops::owned_ops(key, gw)), index);
    }

    fn write_config_map(&self, key: &ObjectKey, config_map: &Owned<ConfigMap>, index: &Index) {
        self.writer.stage(ops::config_map_op(key, config_map), index);
    }

    fn write_status(&self, status: SerializedStatus, index: &Index) {
        self.writer.stage(ops::status_op(status), index);
    }

    /// The writer then writes the statuses before the objects (see `stunner_gateway_k8s`'s
    /// `queue.rs`).
    fn flush(&self) {
        self.writer.flush();
    }

    fn finalize(&self, index: &Index, finalize: &dyn Fn() -> RenderOutput) {
        let output = finalize();
        tracing::info!(gateways = output.gateways.len(), "finalizer: invalidating Gateways and removing dataplanes");
        self.writer.submit(&output, index);
    }

    fn publication(&mut self) -> &mut dyn PublicationGate {
        &mut self.service_wait
    }
}
