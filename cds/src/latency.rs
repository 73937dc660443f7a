//! A lock-free Prometheus histogram of durations, with bucket bounds of its caller's choosing,
//! that can also be read back as values ([`LatencyHistogram::snapshot`]): the console charts
//! its histograms from those, not from the text exposition. It times how long a config
//! version takes to reach the dataplanes: from the moment the store took it to each watch
//! client's send (`push_time`, [`PUSH_BUCKETS`]), and to a gRPC client's acknowledgement that it
//! applied it (`ack_time`); the daemon times its renders and the writer its updates with it.
//!
//! Observed on every push of every watcher, so the histogram is lock-free: one atomic counter
//! per bucket and one for the sum, where prometheus-client's own histogram takes a lock that
//! all watchers would share (and gives no access to its values). Its memory is fixed by its
//! buckets.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the push and ack times: a push is normally well under a
/// millisecond after the store on a quiet server, so the buckets start finer than the render
/// buckets do.
pub const PUSH_BUCKETS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// A Prometheus histogram of durations with the given upper bounds (and `+Inf`). Clones share
/// counts.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    inner: Arc<Counts>,
}

#[derive(Debug)]
struct Counts {
    /// Upper bounds in seconds, ascending, without `+Inf`.
    bounds: &'static [f64],
    /// Observations per bucket, not cumulative: one per bound, and the last for `+Inf`.
    buckets: Box<[AtomicU64]>,
    /// The sum of the observations, in nanoseconds (584 years of them fit).
    sum_nanos: AtomicU64,
}

/// A histogram's values at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations in this bucket)`, not cumulative, the last
    /// bound `f64::INFINITY`.
    pub buckets: Vec<(f64, u64)>,
    /// Observations: the buckets' sum, so the two always agree.
    pub count: u64,
    /// The sum of the observations, in seconds.
    pub sum: f64,
}

impl LatencyHistogram {
    /// An empty histogram with buckets up to each of `bounds` (ascending seconds) and `+Inf`.
    pub fn new(bounds: &'static [f64]) -> Self {
        let buckets = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        LatencyHistogram { inner: Arc::new(Counts { bounds, buckets, sum_nanos: AtomicU64::new(0) }) }
    }

    pub fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bounds = self.inner.bounds;
        let bucket = bounds.iter().position(|&le| seconds <= le).unwrap_or(bounds.len());
        self.inner.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts now. Each counter is read once, unsynchronized with observations in flight:
    /// the sum may be one observation ahead of or behind the buckets.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let bounds = self.inner.bounds.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> =
            bounds.zip(self.inner.buckets.iter().map(|b| b.load(Ordering::Relaxed))).collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = Duration::from_nanos(self.inner.sum_nanos.load(Ordering::Relaxed)).as_secs_f64();
        HistogramSnapshot { buckets, count, sum }
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let HistogramSnapshot { mut buckets, count, sum } = self.snapshot();
        // The encoder writes `+Inf` for `f64::MAX`, as prometheus-client's own histogram has it.
        if let Some((le, _)) = buckets.last_mut() {
            *le = f64::MAX;
        }
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::histogram::Histogram;
    use prometheus_client::registry::Registry;

    fn exposition(
        name: &str,
        metric: impl EncodeMetric + TypedMetric + std::fmt::Debug + Send + Sync + 'static,
    ) -> String {
        let mut registry = Registry::default();
        registry.register(name, "t", metric);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn encodes_as_a_prometheus_histogram() {
        let h = LatencyHistogram::new(&PUSH_BUCKETS);
        for ms in [0, 1, 3, 3, 120_000] {
            h.observe(Duration::from_millis(ms));
        }
        let text = exposition("push_time_seconds", h.clone());
        for line in [
            "# TYPE push_time_seconds histogram",
            "push_time_seconds_count 5",
            "push_time_seconds_sum 120.007",
            "push_time_seconds_bucket{le=\"0.0005\"} 1",
            "push_time_seconds_bucket{le=\"0.001\"} 2",
            "push_time_seconds_bucket{le=\"0.005\"} 4",
            "push_time_seconds_bucket{le=\"60.0\"} 4",
            "push_time_seconds_bucket{le=\"+Inf\"} 5",
        ] {
            assert!(text.lines().any(|l| l == line), "missing `{line}` in\n{text}");
        }
    }

    /// What prometheus-client's histogram writes for the same observations, this one writes:
    /// a metric moved from one to the other changes nothing a scraper sees.
    #[test]
    fn writes_what_prometheus_clients_histogram_writes() {
        const BOUNDS: [f64; 3] = [0.25, 0.5, 1.0];
        let ours = LatencyHistogram::new(&BOUNDS);
        let theirs = Histogram::new(BOUNDS);
        for ms in [0, 250, 500, 750, 1000, 4000] {
            ours.observe(Duration::from_millis(ms));
            theirs.observe(Duration::from_millis(ms).as_secs_f64());
        }
        assert_eq!(exposition("t_seconds", ours), exposition("t_seconds", theirs));
    }

    #[test]
    fn a_snapshot_holds_the_counts_per_bucket() {
        let h = LatencyHistogram::new(&[0.01, 0.1, 1.0]);
        for ms in [5, 50, 60, 5000] {
            h.observe(Duration::from_millis(ms));
        }
        let snapshot = h.snapshot();
        assert_eq!(snapshot.buckets, [(0.01, 1), (0.1, 2), (1.0, 0), (f64::INFINITY, 1)]);
        assert_eq!(snapshot.count, 4);
        assert!((snapshot.sum - 5.115).abs() < 1e-9, "{}", snapshot.sum);
    }
}
