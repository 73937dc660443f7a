//! Publication of a render's results: configs to the CDS store (or to wait for their
//! Service), owned objects and statuses to the writer, statuses to the board.
//!
//! A [`Publisher`] borrows only the outputs and the service wait, apart from the index the
//! render reads: as the render's sink, it publishes each result while the render goes on.

use super::Reconciler;
use super::service_wait::{SERVICE_WAIT, ServiceWait};
use crate::pipeline::Outputs;
use k8s_openapi::api::core::v1::ConfigMap;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, Kind, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, InvalidConfig, Owned, RenderSink};
use stunner_gateway::resources::{GatewayClassStatus, UdpRouteStatus};
use stunner_gateway_k8s::ops;

/// Where a render's results go.
pub(super) struct Publisher<'a> {
    pub outputs: &'a Outputs,
    /// Cluster mode: configs waiting for their Gateway's Service.
    pub service_wait: Option<&'a mut ServiceWait>,
    /// What the watchers saw: the writer skips writes already in place.
    pub index: &'a Index,
}

impl Reconciler {
    /// Publishes the configs whose wait for their Service ran out, and writes the statuses
    /// held with them.
    pub(super) fn publish_expired(&mut self) {
        let Some(wait) = &mut self.service_wait else { return };
        for (key, config, status) in wait.expired() {
            tracing::info!(gateway = %key, bound = ?SERVICE_WAIT, "the Gateway's Service did not come back in time");
            upsert(&self.outputs, &key, config);
            if let Some(writer) = &self.outputs.writer {
                let status_only = GatewayOutput { status, ..GatewayOutput::default() };
                writer.stage(ops::gateway_ops(&key, &status_only), &self.index);
            }
        }
    }
}

impl Reconciler {
    /// Hands what the last render or expired wait staged to the writer, all together: the
    /// writer then writes its statuses before its objects (see `stunner_gateway_k8s`'s `queue.rs`).
    pub(super) fn flush_writes(&self) {
        if let Some(writer) = &self.outputs.writer {
            writer.flush();
        }
    }
}

impl Publisher<'_> {
    fn submit(&self, ops: impl IntoIterator<Item = (ops::Target, ops::Op)>) {
        if let Some(writer) = &self.outputs.writer {
            writer.stage(ops, self.index);
        }
    }
}

impl RenderSink for Publisher<'_> {
    fn gateway(&mut self, key: ObjectKey, mut gw: GatewayOutput) {
        if let Some(status) = &gw.status {
            let changed = self.show_status(Kind::Gateway, &key.namespace, &key.name, status);
            // Said once per change, like the status line, but at WARN with what to fix.
            if let Some(invalid) = gw.invalid_config.as_ref().filter(|_| changed) {
                let InvalidConfig { config, field, message } = invalid;
                tracing::warn!(gateway = %key, gateway_config = %config, field, "invalid GatewayConfig {config}: {field}: {message}; the Gateway is withdrawn");
            }
        }
        // The writer never reads configs: taken here, the rest goes to it below.
        match std::mem::replace(&mut gw.config, Owned::Keep) {
            Owned::Apply(config) => {
                let admitted = match &mut self.service_wait {
                    Some(wait) => wait.admit(&key, config, &gw.service, self.index),
                    None => Some(config),
                };
                match admitted {
                    Some(config) => upsert(self.outputs, &key, config),
                    None => {
                        tracing::debug!(gateway = %key, "config waits for the Gateway's Service");
                        // And so does its status, not to be written twice (see service_wait).
                        if let (Some(wait), Some(status)) = (&mut self.service_wait, gw.status.take()) {
                            gw.status = wait.hold_status(&key, status);
                        }
                    }
                }
            }
            Owned::Delete => {
                if let Some(wait) = &mut self.service_wait {
                    wait.forget(&key);
                }
                // The id the store filed the config under: parsed from its `admin.name`,
                // the key as text. Built from the key's parts instead, a namespace holding
                // a `/` (no API server allows one) named an id that was never stored, and
                // the config was never withdrawn.
                let id = ConfigId::parse(&key.to_string());
                if id.is_some_and(|id| self.outputs.store.delete(&id)) {
                    tracing::info!(gateway = %key, "config deleted");
                }
            }
            Owned::Keep => {}
        }
        self.submit(ops::gateway_ops(&key, &gw));
    }

    fn route(&mut self, r: ObjRef, status: UdpRouteStatus) {
        self.submit([ops::route_op(&r, &status)]);
        self.show_status(r.kind, &r.key.namespace, &r.key.name, &status);
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        self.submit([ops::class_op(&name, &status)]);
        self.show_status(Kind::GatewayClass, "", &name, &status);
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        self.submit(ops::config_map_op(&key, &config_map));
    }
}

fn upsert(outputs: &Outputs, key: &ObjectKey, config: StunnerConfig) {
    if let Some(version) = outputs.store.upsert(config) {
        tracing::info!(gateway = %key, %version, "config updated");
    }
}
