//! The render loop's Prometheus metrics, with the Go operator's names, types and labels
//! (operator-behavior.md §7). The writer's are the adapters' ([`stunner_gateway_k8s::metrics`]),
//! the CDS's its own ([`stunner_gateway_cds::CdsMetrics`]); the daemon registers all three.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;
/// The `controller` label of the `controller_runtime_*` metrics, which count here what those
/// controllers did upstream: one reconcile per object event applied to the index.
pub use stunner_gateway::index::Controller;
use stunner_gateway_cds::latency::LatencyHistogram;
use stunner_gateway_k8s::metrics::{DURATION_BUCKETS, FloatGauge};

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are upstream's lower-case words
pub enum ReconcileResult {
    passed,
    throttled,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub result: ReconcileResult,
}

/// controller-runtime's `result` label of `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum ReconcileOutcome {
    success,
    error,
    requeue,
    requeue_after,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// [`Controller::name`].
    pub controller: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerResultLabels {
    /// [`Controller::name`].
    pub controller: &'static str,
    pub result: ReconcileOutcome,
}

#[derive(Clone)]
pub struct OperatorMetrics {
    pub render: Counter,
    pub render_time: LatencyHistogram,
    pub reconcile_events: Family<ReconcileLabels, Counter>,
    pub generation: Gauge,
    pub generation_last_acked: Gauge,
    pub operator_loop_last_active: FloatGauge,
    pub renderer_loop_last_active: FloatGauge,
    pub reconcile_total: Family<ControllerResultLabels, Counter>,
    pub reconcile_time: Family<ControllerLabels, Histogram>,
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    pub active_workers: Family<ControllerLabels, Gauge>,
    /// Objects of the standalone manifests held at their last valid version (not upstream's:
    /// upstream has no standalone mode).
    pub held_objects: Gauge,
    /// Objects in the index, of every kind (not upstream's: upstream's are controller-runtime's
    /// caches, which it does not count).
    pub index_objects: Gauge,
    /// Objects the index's objects refer to, whether they exist or not (not upstream's).
    pub index_referred_objects: Gauge,
    /// The daemon's live tokio tasks, sampled by the render loop (not upstream's: Go's
    /// `go_goroutines` is the closest).
    pub tasks: Gauge,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

impl Default for OperatorMetrics {
    fn default() -> Self {
        let generation_last_acked = Gauge::default();
        generation_last_acked.set(-1); // nothing acknowledged yet, as upstream
        OperatorMetrics {
            render: Counter::default(),
            render_time: LatencyHistogram::new(&DURATION_BUCKETS),
            reconcile_events: Family::default(),
            generation: Gauge::default(),
            generation_last_acked,
            operator_loop_last_active: FloatGauge::default(),
            renderer_loop_last_active: FloatGauge::default(),
            reconcile_total: Family::default(),
            reconcile_time: Family::new_with_constructor(duration_histogram),
            reconcile_errors: Family::default(),
            active_workers: Family::default(),
            held_objects: Gauge::default(),
            index_objects: Gauge::default(),
            index_referred_objects: Gauge::default(),
            tasks: Gauge::default(),
        }
    }
}

impl OperatorMetrics {
    /// Shows every controller's series from the start, at zero, as controller-runtime does
    /// when a controller starts: a dashboard sees `0`, not a missing series.
    pub fn init_controllers(&self) {
        for controller in Controller::ALL.iter().map(|c| c.name()) {
            for result in [
                ReconcileOutcome::success,
                ReconcileOutcome::error,
                ReconcileOutcome::requeue,
                ReconcileOutcome::requeue_after,
            ] {
                let _ = self.reconcile_total.get_or_create(&ControllerResultLabels { controller, result });
            }
            let labels = ControllerLabels { controller };
            let _ = self.reconcile_errors.get_or_create(&labels);
            let _ = self.reconcile_time.get_or_create(&labels);
            let _ = self.active_workers.get_or_create(&labels);
        }
    }

    /// One object event of `controller`'s kinds applied to the index, which took `took`.
    /// Applying cannot fail (a bad object becomes a status condition at render), so every
    /// reconcile is a `success`; the error series stay at zero.
    pub fn reconciled(&self, controller: Controller, took: Duration) {
        let controller = controller.name();
        let result = ReconcileOutcome::success;
        self.reconcile_total.get_or_create(&ControllerResultLabels { controller, result }).inc();
        self.reconcile_time.get_or_create(&ControllerLabels { controller }).observe(took.as_secs_f64());
    }

    /// Marks the render loop, the one worker of every controller, busy on (or done with)
    /// `controller`'s objects.
    pub fn set_active(&self, controller: Controller, active: bool) {
        self.active_workers.get_or_create(&ControllerLabels { controller: controller.name() }).set(i64::from(active));
    }

    pub fn register(&self, registry: &mut Registry) {
        // prometheus-client appends `_total` to counters itself.
        let op = registry.sub_registry_with_prefix("stunner_gateway_operator");
        op.register("render", "Number of renders", self.render.clone());
        op.register("render_time_seconds", "Time spent rendering", self.render_time.clone());
        op.register("reconcile_events", "Reconcile events by throttling result", self.reconcile_events.clone());
        op.register("generation", "Current render generation", self.generation.clone());
        op.register("generation_last_acked", "Last acknowledged generation", self.generation_last_acked.clone());
        op.register(
            "operator_loop_last_active_timestamp_seconds",
            "Unix time the operator loop last ran",
            self.operator_loop_last_active.clone(),
        );
        op.register(
            "renderer_loop_last_active_timestamp_seconds",
            "Unix time the renderer last ran",
            self.renderer_loop_last_active.clone(),
        );
        op.register(
            "held_objects",
            "Objects of the standalone manifests held at their last valid version after an invalid edit",
            self.held_objects.clone(),
        );
        op.register(
            "index_objects",
            "Objects the operator holds in its index, of every kind it watches",
            self.index_objects.clone(),
        );
        op.register(
            "index_referred_objects",
            "Objects the index's objects refer to (existing or not), each counted once",
            self.index_referred_objects.clone(),
        );
        op.register(
            "tasks",
            "Live tasks of the operator's async runtime, sampled when the render loop runs (at least every 5 s)",
            self.tasks.clone(),
        );
        let cr = registry.sub_registry_with_prefix("controller_runtime");
        cr.register("reconcile", "Total number of reconciliations per controller", self.reconcile_total.clone());
        cr.register(
            "reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            self.reconcile_time.clone(),
        );
        cr.register(
            "reconcile_errors",
            "Total number of reconciliation errors per controller",
            self.reconcile_errors.clone(),
        );
        cr.register("active_workers", "Number of currently used workers per controller", self.active_workers.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_match_the_go_operator() {
        let m = OperatorMetrics::default();
        m.reconcile_events.get_or_create(&ReconcileLabels { result: ReconcileResult::throttled }).inc();
        m.reconcile_total
            .get_or_create(&ControllerResultLabels {
                controller: Controller::gateway.name(),
                result: ReconcileOutcome::success,
            })
            .inc();
        let mut registry = Registry::default();
        m.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE stunner_gateway_operator_render counter",
            "stunner_gateway_operator_render_total 0",
            "# TYPE stunner_gateway_operator_render_time_seconds histogram",
            "stunner_gateway_operator_render_time_seconds_bucket{le=\"0.005\"} 0",
            "stunner_gateway_operator_reconcile_events_total{result=\"throttled\"} 1",
            "stunner_gateway_operator_generation 0",
            "stunner_gateway_operator_generation_last_acked -1",
            "stunner_gateway_operator_held_objects 0",
            "stunner_gateway_operator_index_objects 0",
            "stunner_gateway_operator_index_referred_objects 0",
            "stunner_gateway_operator_tasks 0",
            "# TYPE stunner_gateway_operator_operator_loop_last_active_timestamp_seconds gauge",
            "controller_runtime_reconcile_total{controller=\"gateway\",result=\"success\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing `{line}` in\n{text}");
        }
    }
}
