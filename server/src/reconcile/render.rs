//! The render pass. In cluster mode each Gateway's results are published as soon as it is
//! rendered (the operator's own objects come back through the watchers, as later changes). In
//! standalone mode the render runs again while the operator's own objects, applied to the index,
//! make more of it dirty, and only the settled result is published.

use super::Reconciler;
use super::publish::Publisher;
use crate::metrics::unix_now;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stunner_gateway::index::Dirty;
use stunner_gateway::render::{RenderOutput, render, render_each};

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
        if self.outputs.apply_owned_to_index {
            self.render_settled()
        } else {
            self.render_streamed()
        }
        self.publish_expired();
        self.outputs.readiness.set_ready();
    }

    /// One pass, publishing each result as it is rendered: a large render never holds every
    /// Gateway's output at once.
    fn render_streamed(&mut self) {
        if self.dirty.is_empty() {
            return;
        }
        let dirty = std::mem::take(&mut self.dirty);
        let pass = self.begin_pass();
        let mut publisher =
            Publisher { outputs: &self.outputs, service_wait: self.service_wait.as_mut(), index: &self.index };
        render_each(&self.index, &dirty, &self.settings, &pass.now, &mut publisher);
        self.end_pass(pass, &dirty);
    }

    /// Passes until the operator's own objects stop making anything dirty; publishes the last
    /// result of each object.
    fn render_settled(&mut self) {
        // Only the last pass's result counts for what it rendered again: earlier ones are
        // never published (standalone mode's own objects settle in the later passes).
        let mut settled = RenderOutput::default();
        for _ in 0..MAX_PASSES {
            if self.dirty.is_empty() {
                break;
            }
            let dirty = std::mem::take(&mut self.dirty);
            // This pass renders each of them again (every dirty Gateway has an output): what an
            // earlier pass made of them goes first, so that two renders of every Gateway are
            // never held at once (at start-up, the operator's heap peak).
            for key in &dirty.gateways {
                settled.gateways.remove(key);
            }
            let pass = self.begin_pass();
            let output = render(&self.index, &dirty, &self.settings, &pass.now);
            self.end_pass(pass, &dirty);
            let dirty = self.owned.apply(&mut self.index, &output);
            self.dirty.merge(dirty);
            supersede(&mut settled, output);
        }
        self.publisher().all(settled);
    }

    fn begin_pass(&mut self) -> Pass {
        let metrics = &self.outputs.metrics;
        self.generation += 1;
        metrics.generation.set(self.generation);
        metrics.renderer_loop_last_active.set(unix_now());
        Pass { started: std::time::Instant::now(), now: Time(k8s_openapi::jiff::Timestamp::now()) }
    }

    fn end_pass(&self, pass: Pass, dirty: &Dirty) {
        let metrics = &self.outputs.metrics;
        metrics.render.inc();
        metrics.render_time.observe(pass.started.elapsed().as_secs_f64());
        metrics.generation_last_acked.set(self.generation);
        tracing::debug!(
            generation = self.generation,
            gateways = dirty.gateways.len(),
            elapsed = ?pass.started.elapsed(),
            "rendered"
        );
    }
}

/// Lets a later pass's results replace an earlier pass's for the same objects.
fn supersede(settled: &mut RenderOutput, later: RenderOutput) {
    settled.gateways.extend(later.gateways);
    settled.config_maps.extend(later.config_maps);
    settled.routes.extend(later.routes);
    settled.classes.extend(later.classes);
}
