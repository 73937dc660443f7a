//! The render pass. In cluster mode each Gateway's results are published as soon as it is
//! rendered (the operator's own objects come back through the watchers, as later changes). In
//! standalone mode the render runs again while the operator's own objects, applied to the index,
//! make more of it dirty, and only a Gateway's settled result is published ([`super::settle`]).
//! One loop does both: the mode decides whether a pass changes the index.

use super::Reconciler;
use super::publish::Publisher;
use super::settle::{Held, Settling};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Duration;
use stunner_gateway::index::{Dirty, ObjRef, ObjectKey};
use stunner_gateway::render::{GatewayOutput, Owned, RenderSink, render_each};
use stunner_gateway::resources::{GatewayClassStatus, UdpRouteStatus};
use stunner_gateway_k8s::metrics::unix_now;

/// Renders caused by the operator's own objects coming back, per window: they settle in one
/// pass; the bound only guards against a render that never reaches a fixed point.
const MAX_PASSES: usize = 3;

/// A render pass under way: when it started, and the `now` of its condition timestamps.
struct Pass {
    started: std::time::Instant,
    now: Time,
}

impl Reconciler {
    pub(super) fn render_dirty(&mut self) {
        if !self.synced {
            return;
        }
        self.render_settled();
        self.publish_expired();
        self.outputs.mode.flush();
        self.outputs.readiness.set_ready();
    }

    /// Passes until the operator's own objects stop making anything dirty. Each Gateway is
    /// published once its own objects are in the index as rendered; see [`Settling`]. In a
    /// cluster no pass changes the index (the objects come back through the watchers), so
    /// this is one pass that publishes each result as it is rendered: a large render never
    /// holds every Gateway's output at once.
    fn render_settled(&mut self) {
        let mut held = Held::new();
        for _ in 0..MAX_PASSES {
            if self.dirty.is_empty() {
                break;
            }
            let dirty = std::mem::take(&mut self.dirty);
            let pass = self.begin_pass();
            // Built field by field: the render borrows the index beside it.
            let mut publisher = Publisher { outputs: &mut self.outputs, index: &self.index };
            let mut settling = Settling { publisher: &mut publisher, held: &mut held, changes: Vec::new() };
            let mut timed = Timed { inner: &mut settling, spent: Duration::ZERO };
            render_each(&self.index, &dirty, &self.settings, &pass.now, &mut timed);
            let publishing = timed.spent;
            let changes = settling.changes;
            self.end_pass(pass, &dirty, publishing);
            for change in changes {
                self.dirty.merge(change.apply_to(&mut self.index));
            }
        }
        // Held and not rendered again (the changes made nothing dirty, or the passes ran out):
        // rendered once more on the index the last pass left, and published as they are.
        if !held.is_empty() {
            self.render_and_publish(Dirty { gateways: held, ..Dirty::default() });
        }
    }

    /// One pass over `dirty`, each result published as it is rendered (standalone: the held
    /// Gateways that no later pass reached).
    fn render_and_publish(&mut self, dirty: Dirty) {
        let pass = self.begin_pass();
        // Built field by field: the render borrows the index beside it.
        let mut publisher = Publisher { outputs: &mut self.outputs, index: &self.index };
        let mut timed = Timed { inner: &mut publisher, spent: Duration::ZERO };
        render_each(&self.index, &dirty, &self.settings, &pass.now, &mut timed);
        let publishing = timed.spent;
        self.end_pass(pass, &dirty, publishing);
    }

    fn begin_pass(&mut self) -> Pass {
        let metrics = &self.outputs.metrics;
        self.generation += 1;
        metrics.generation.set(self.generation);
        metrics.renderer_loop_last_active.set(unix_now());
        Pass { started: std::time::Instant::now(), now: Time(k8s_openapi::jiff::Timestamp::now()) }
    }

    /// `publishing`: the part of the pass spent handing results to the outputs (cluster mode
    /// interleaves the two), which the render time leaves out: it measures rendering alone.
    fn end_pass(&self, pass: Pass, dirty: &Dirty, publishing: Duration) {
        let metrics = &self.outputs.metrics;
        metrics.render.inc();
        metrics.render_time.observe(pass.started.elapsed().saturating_sub(publishing));
        metrics.generation_last_acked.set(self.generation);
        tracing::debug!(
            generation = self.generation,
            gateways = dirty.gateways.len(),
            elapsed = ?pass.started.elapsed(),
            "rendered"
        );
    }
}

/// A sink that counts the time spent in another.
struct Timed<'s> {
    inner: &'s mut dyn RenderSink,
    spent: Duration,
}

impl Timed<'_> {
    fn time(&mut self, hand_on: impl FnOnce(&mut dyn RenderSink)) {
        let started = std::time::Instant::now();
        hand_on(&mut *self.inner);
        self.spent += started.elapsed();
    }
}

impl RenderSink for Timed<'_> {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        self.time(|sink| sink.gateway(key, output));
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        self.time(|sink| sink.route(route, status));
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        self.time(|sink| sink.class(name, status));
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        self.time(|sink| sink.config_map(key, config_map));
    }
}
