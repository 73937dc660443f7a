//! Publication of a render's results: configs to the CDS store (or to wait for their
//! Service), owned objects and statuses to the writer, statuses to the board.

use super::Reconciler;
use super::service_wait::SERVICE_WAIT;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Kind, ObjectKey};
use stunner_gateway::render::{GatewayOutput, InvalidConfig, Owned, RenderOutput};

impl Reconciler {
    pub(super) fn publish(&mut self, mut output: RenderOutput) {
        for (key, gw) in &mut output.gateways {
            if let Some(status) = &gw.status {
                let changed = self.show_status(Kind::Gateway, &key.namespace, &key.name, status);
                // Said once per change, like the status line, but at WARN with what to fix.
                if let Some(invalid) = output.invalid_configs.get(key).filter(|_| changed) {
                    let InvalidConfig { config, field, message } = invalid;
                    tracing::warn!(gateway = %key, gateway_config = %config, field, "invalid GatewayConfig {config}: {field}: {message}; the Gateway is withdrawn");
                }
            }
            // The writer never reads configs: taken here, the rest goes to it below.
            match std::mem::replace(&mut gw.config, Owned::Keep) {
                Owned::Apply(config) => {
                    let admitted = match &mut self.service_wait {
                        Some(wait) => wait.admit(key, config, &gw.service, &self.index),
                        None => Some(config),
                    };
                    match admitted {
                        Some(config) => self.upsert(key, config),
                        None => {
                            tracing::debug!(gateway = %key, "config waits for the Gateway's Service");
                            // And so does its status, not to be written twice (see service_wait).
                            if let (Some(wait), Some(status)) = (&mut self.service_wait, gw.status.take()) {
                                gw.status = wait.hold_status(key, status);
                            }
                        }
                    }
                }
                Owned::Delete => {
                    if let Some(wait) = &mut self.service_wait {
                        wait.forget(key);
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
        }
        if let Some(writer) = &self.outputs.writer {
            writer.submit(&output, &self.index);
        }
        for (r, status) in output.routes {
            self.show_status(r.kind, &r.key.namespace, &r.key.name, &status);
        }
        for (name, status) in output.classes {
            self.show_status(Kind::GatewayClass, "", &name, &status);
        }
    }

    fn upsert(&self, key: &ObjectKey, config: StunnerConfig) {
        if let Some(version) = self.outputs.store.upsert(config) {
            tracing::info!(gateway = %key, %version, "config updated");
        }
    }

    /// Publishes the configs whose wait for their Service ran out, and writes the statuses
    /// held with them.
    pub(super) fn publish_expired(&mut self) {
        let Some(wait) = &mut self.service_wait else { return };
        let mut held = RenderOutput::default();
        for (key, config, status) in wait.expired() {
            tracing::info!(gateway = %key, bound = ?SERVICE_WAIT, "the Gateway's Service did not come back in time");
            self.upsert(&key, config);
            let status_only = GatewayOutput {
                config: Owned::Keep,
                status,
                service: Owned::Keep,
                deployment: Owned::Keep,
                delete_daemon_set: false,
            };
            held.gateways.insert(key, status_only);
        }
        if let Some(writer) = &self.outputs.writer
            && !held.gateways.is_empty()
        {
            writer.submit(&held, &self.index);
        }
    }
}
