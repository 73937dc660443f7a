//! Publication of a render's results: configs to the CDS store when the mode's
//! [`PublicationGate`] lets them (in a cluster, once their Service is in place), owned objects
//! and statuses where the [`Mode`] puts them, statuses to the board.
//!
//! A [`Publisher`] borrows only the outputs, apart from the index the render reads: as the
//! render's sink, it publishes each result while the render goes on.
//!
//! [`Mode`]: crate::pipeline::mode::Mode
//! [`PublicationGate`]: crate::pipeline::mode::PublicationGate

use super::Reconciler;
use crate::pipeline::{ConfigSink, Outputs};
use k8s_openapi::api::core::v1::ConfigMap;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, Kind, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, InvalidConfig, Owned, RenderSink, SerializedStatus};
use stunner_gateway::resources::{GatewayClassStatus, UdpRouteStatus};

/// Where a render's results go.
pub(super) struct Publisher<'a> {
    pub outputs: &'a mut Outputs,
    /// What the watchers saw: the writer skips writes already in place.
    pub index: &'a Index,
}

impl Reconciler {
    /// Publishes the configs whose wait for their Service ran out, and writes the statuses
    /// held with them.
    pub(super) fn publish_expired(&mut self) {
        for (key, config, status) in self.outputs.mode.publication().expired() {
            upsert(&*self.outputs.store, &key, config);
            if let Some(status) = status {
                self.outputs.mode.write_status(status, &self.index);
            }
        }
    }
}

impl RenderSink for Publisher<'_> {
    fn gateway(&mut self, key: ObjectKey, mut gw: GatewayOutput) {
        let object = ObjRef::new(Kind::Gateway, key.clone());
        let mut status = gw.status.take().map(|status| SerializedStatus::new(object, &status));
        if let Some(status) = &status {
            let changed = self.show_status(status);
            // Said once per change, like the status line, but at WARN with what to fix.
            if let Some(invalid) = gw.invalid_config.as_ref().filter(|_| changed) {
                let InvalidConfig { config, field, message } = invalid;
                tracing::warn!(gateway = %key, gateway_config = %config, field, "invalid GatewayConfig {config}: {field}: {message}; the Gateway is withdrawn");
            }
        }
        // The writer never reads configs: taken here, the rest goes to it below.
        match std::mem::replace(&mut gw.config, Owned::Keep) {
            Owned::Apply(config) => {
                // A held config's status waits with it, not to be written twice (see
                // `ServiceWait`).
                match self.outputs.mode.publication().admit(&key, config, &gw.service, &mut status, self.index) {
                    Some(config) => upsert(&*self.outputs.store, &key, config),
                    None => tracing::debug!(gateway = %key, "config waits for the Gateway's Service"),
                }
            }
            Owned::Delete => {
                self.outputs.mode.publication().forget(&key);
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
        // The ListenerSets' statuses are written as they come: no config waits for them.
        for status in gw.listener_set_statuses() {
            self.status(status);
        }
        self.outputs.mode.write_gateway(&key, &gw, status, self.index);
    }

    fn route(&mut self, r: ObjRef, status: UdpRouteStatus) {
        self.status(SerializedStatus::new(r, &status));
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        self.status(SerializedStatus::new(ObjRef::new(Kind::GatewayClass, ObjectKey::cluster(name)), &status));
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        self.outputs.mode.write_config_map(&key, &config_map, self.index);
    }
}

impl Publisher<'_> {
    /// A route's or a class's status: shown, and written where the mode writes statuses.
    fn status(&mut self, status: SerializedStatus) {
        self.show_status(&status);
        self.outputs.mode.write_status(status, self.index);
    }
}

fn upsert(store: &dyn ConfigSink, key: &ObjectKey, config: StunnerConfig) {
    if let Some(version) = store.upsert(config) {
        tracing::info!(gateway = %key, %version, "config updated");
    }
}
