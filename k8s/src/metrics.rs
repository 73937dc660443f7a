//! The writer's Prometheus metrics, with the Go operator's names, types and labels
//! (operator-behavior.md §7): updates, resource operations, the updater's heartbeat and the
//! leader election's status; and one of our own, the size of the writer's records. Registered
//! in both modes, so a standalone operator shows them at zero as upstream's does before its
//! first write.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use stunner_gateway_cds::latency::LatencyHistogram;

/// Upstream's buckets for render and update durations, in seconds (the daemon's render
/// histogram takes them too).
pub const DURATION_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

/// A gauge of seconds (heartbeats: Unix times).
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// Unix time now, for the loop heartbeat gauges.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are upstream's lower-case words
pub(crate) enum UpdateResult {
    success,
    error,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct UpdateLabels {
    pub(crate) result: UpdateResult,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ResourceOperationLabels {
    /// `spec` or `status`.
    pub(crate) scope: String,
    /// The Kubernetes kind, e.g. `Service`.
    pub(crate) kind: String,
    /// `attempt`, `created`, `updated`, `updatedStatus`, `none`, `suppressed`, `error`, ...
    pub(crate) operation: String,
}

/// The `name` label of controller-runtime's `leader_election_master_status`: the lease.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct LeaderLabels {
    pub(crate) name: &'static str,
}

#[derive(Clone)]
pub struct WriterMetrics {
    pub(crate) update: Family<UpdateLabels, Counter>,
    pub(crate) update_errors: Counter,
    /// Read by the console's chart too.
    pub update_time: LatencyHistogram,
    pub(crate) resource_operations: Family<ResourceOperationLabels, Counter>,
    pub(crate) updater_loop_last_active: FloatGauge,
    /// 1 while this replica leads (it is the one that writes), 0 while it waits; absent in
    /// standalone mode, which writes nothing.
    pub(crate) leader: Family<LeaderLabels, Gauge>,
    /// The objects and statuses the writer keeps a record of (not upstream's: see
    /// docs/compatibility.md).
    pub(crate) records: Gauge,
}

impl Default for WriterMetrics {
    fn default() -> Self {
        WriterMetrics {
            update: Family::default(),
            update_errors: Counter::default(),
            update_time: LatencyHistogram::new(&DURATION_BUCKETS),
            resource_operations: Family::default(),
            updater_loop_last_active: FloatGauge::default(),
            leader: Family::default(),
            records: Gauge::default(),
        }
    }
}

impl WriterMetrics {
    /// Whether this replica leads now, in the election for `lease`.
    pub(crate) fn set_leader(&self, lease: &'static str, leading: bool) {
        self.leader.get_or_create(&LeaderLabels { name: lease }).set(i64::from(leading));
    }

    pub fn register(&self, registry: &mut Registry) {
        // prometheus-client appends `_total` to counters itself.
        let op = registry.sub_registry_with_prefix("stunner_gateway_operator");
        op.register("update", "Number of updates by result", self.update.clone());
        op.register("update_errors", "Number of failed updates", self.update_errors.clone());
        op.register("update_time_seconds", "Time spent processing updates", self.update_time.clone());
        op.register(
            "resource_operations",
            "Kubernetes resource operations by scope, kind and operation",
            self.resource_operations.clone(),
        );
        op.register(
            "updater_loop_last_active_timestamp_seconds",
            "Unix time the updater last ran",
            self.updater_loop_last_active.clone(),
        );
        op.register(
            "writer_records",
            "Objects and statuses the writer keeps a record of (its last write, or the fields it owns as last seen), \
             to skip writes that would change nothing; none of an object that is gone",
            self.records.clone(),
        );
        let election = registry.sub_registry_with_prefix("leader_election");
        election.register("master_status", "Whether this replica leads (1) or not (0)", self.leader.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn names_match_the_go_operator() {
        let m = WriterMetrics::default();
        m.update.get_or_create(&UpdateLabels { result: UpdateResult::success }).inc();
        let operation =
            ResourceOperationLabels { scope: "spec".into(), kind: "Service".into(), operation: "created".into() };
        m.resource_operations.get_or_create(&operation).inc();
        m.set_leader("92062b70.l7mp.io", true);
        let mut registry = Registry::default();
        m.register(&mut registry);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "stunner_gateway_operator_update_total{result=\"success\"} 1",
            "stunner_gateway_operator_update_errors_total 0",
            "stunner_gateway_operator_resource_operations_total{scope=\"spec\",kind=\"Service\",operation=\"created\"} 1",
            "# TYPE stunner_gateway_operator_updater_loop_last_active_timestamp_seconds gauge",
            "stunner_gateway_operator_writer_records 0",
            "leader_election_master_status{name=\"92062b70.l7mp.io\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing `{line}` in\n{text}");
        }
    }
}
