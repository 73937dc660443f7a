//! How long a config version takes to reach the dataplanes: from the moment the store took it
//! to each watch client's send (`push_time`), and to a gRPC client's acknowledgement that it
//! applied it (`ack_time`).
//!
//! Observed on every push of every watcher, so the histogram is lock-free: one atomic counter
//! per bucket and one for the sum, where prometheus-client's own histogram takes a lock that
//! all watchers would share. Its memory is fixed by its buckets.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds: a push is normally well under a millisecond after the store on a
/// quiet server, so the buckets start finer than the render buckets do.
pub(crate) const BUCKETS: [f64; 16] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// A Prometheus histogram of durations with [`BUCKETS`] (and `+Inf`). Clones share counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct LatencyHistogram {
    inner: Arc<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Observations per bucket, not cumulative; the last is `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    /// The sum of the observations, in nanoseconds (584 years of them fit).
    sum_nanos: AtomicU64,
}

impl LatencyHistogram {
    pub(crate) fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&le| seconds <= le).unwrap_or(BUCKETS.len());
        self.inner.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.inner.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    #[cfg(test)]
    pub(crate) fn count(&self) -> u64 {
        self.read().1
    }

    /// `(upper bound, observations in that bucket)`, `+Inf` as `f64::MAX` (as the encoder
    /// wants it), and the count: the buckets' sum, so the two always agree.
    fn read(&self) -> (Vec<(f64, u64)>, u64) {
        let bounds = BUCKETS.iter().copied().chain([f64::MAX]);
        let buckets: Vec<(f64, u64)> =
            bounds.zip(self.inner.buckets.iter().map(|b| b.load(Ordering::Relaxed))).collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        (buckets, count)
    }
}

impl TypedMetric for LatencyHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for LatencyHistogram {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (buckets, count) = self.read();
        let sum = Duration::from_nanos(self.inner.sum_nanos.load(Ordering::Relaxed)).as_secs_f64();
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;

    #[test]
    fn encodes_as_a_prometheus_histogram() {
        let h = LatencyHistogram::default();
        for ms in [0, 1, 3, 3, 120_000] {
            h.observe(Duration::from_millis(ms));
        }
        let mut registry = Registry::default();
        registry.register("push_time_seconds", "t", h.clone());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
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
}
