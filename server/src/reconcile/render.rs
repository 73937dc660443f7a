//! The render pass: renders what is dirty, again while the operator's own objects coming back
//! make more of it dirty (standalone mode), and publishes only the settled result.

use super::Reconciler;
use crate::metrics::unix_now;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use stunner_gateway::index::Dirty;
use stunner_gateway::render::{RenderOutput, render};

/// Renders caused by the operator's own objects coming back, per window: they settle in one
/// pass; the bound only guards against a render that never reaches a fixed point.
const MAX_PASSES: usize = 3;

impl Reconciler {
    pub(super) fn render_dirty(&mut self) {
        if !self.synced {
            return;
        }
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
            let output = self.render_pass(&dirty);
            if self.outputs.apply_owned_to_index {
                let dirty = self.owned.apply(&mut self.index, &output);
                self.dirty.merge(dirty);
            }
            supersede(&mut settled, output);
        }
        self.publish(settled);
        self.publish_expired();
        self.outputs.readiness.set_ready();
    }

    fn render_pass(&mut self, dirty: &Dirty) -> RenderOutput {
        let metrics = &self.outputs.metrics;
        self.generation += 1;
        metrics.generation.set(self.generation);
        metrics.renderer_loop_last_active.set(unix_now());
        let started = std::time::Instant::now();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let output = render(&self.index, dirty, &self.settings, &now);
        metrics.render.inc();
        metrics.render_time.observe(started.elapsed().as_secs_f64());
        metrics.generation_last_acked.set(self.generation);
        tracing::debug!(
            generation = self.generation,
            gateways = dirty.gateways.len(),
            elapsed = ?started.elapsed(),
            "rendered"
        );
        output
    }
}

/// Lets a later pass's results replace an earlier pass's for the same objects.
fn supersede(settled: &mut RenderOutput, later: RenderOutput) {
    settled.gateways.extend(later.gateways);
    settled.config_maps.extend(later.config_maps);
    settled.routes.extend(later.routes);
    settled.classes.extend(later.classes);
    settled.invalid_configs.extend(later.invalid_configs);
}
