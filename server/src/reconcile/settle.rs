//! A render pass's sink. Standalone, the operator's own objects of a Gateway (its Service, and a
//! Deployment where the manifests hold one) go straight into the index, and a Gateway whose
//! objects change the index is rendered again with them in the next pass: only that later
//! result of it may be published (its first config would lack the public address the Service
//! brings). Every other Gateway's result is final once rendered, so it is published at once,
//! as in cluster mode. In the steady state (a route, an endpoint or a config changed, the
//! Service already in place) nothing is held, and a large render never holds every Gateway's
//! output at once. In a cluster no Gateway's objects change the index: nothing is held.
//!
//! Route, class and ConfigMap results are published at once too. A later pass renders a route
//! again only with a Gateway it attaches to, and publishes it again; its status depends on the
//! operator's own objects only where the route names a Gateway's Service as a backend.

use super::publish::Publisher;
use k8s_openapi::api::core::v1::ConfigMap;
use std::collections::BTreeSet;
use stunner_gateway::index::{Change, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderSink};
use stunner_gateway::resources::{GatewayClassStatus, UdpRouteStatus};

/// Gateways whose own objects changed the index: the next pass renders them again (their
/// objects made them dirty), and those it does not reach are rendered once more when the
/// passes end. Only the keys: a first load holds every Gateway, and their whole outputs (a
/// `GatewayOutput` is ~6 KiB before its heap, a Deployment and a DaemonSet inline) were most of
/// the load's peak memory (BENCHMARKS.md, "Standalone mode's memory").
pub(super) type Held = BTreeSet<ObjectKey>;

/// One pass's sink: publishes what is final, holds back the rest and collects the index changes
/// its owned objects amount to, applied after the pass (the render reads the index meanwhile:
/// the publisher's).
pub(super) struct Settling<'a, 'p> {
    pub publisher: &'a mut Publisher<'p>,
    pub held: &'a mut Held,
    pub changes: Vec<Change>,
}

impl RenderSink for Settling<'_, '_> {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        let before = self.changes.len();
        let publisher = &mut *self.publisher;
        publisher.outputs.mode.owned_changes(publisher.index, &key, &output, &mut self.changes);
        if self.changes.len() == before {
            // An earlier pass's result of it, if held, is superseded.
            self.held.remove(&key);
            self.publisher.gateway(key, output);
        } else {
            self.held.insert(key);
        }
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        self.publisher.route(route, status);
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        self.publisher.class(name, status);
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        self.publisher.config_map(key, config_map);
    }
}
