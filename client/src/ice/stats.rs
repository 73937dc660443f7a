//! The probe's figures: packets sent and echoed back, their round-trip times, and the line
//! upstream's `stunnerctl icetest` prints of them (`Statistics: rate=…, loss=…, RTT:…`).

use std::time::Duration;

/// What a probe measured.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub sent: u64,
    /// Round-trip times of the packets that came back, in the order they came.
    pub rtts: Vec<Duration>,
    /// How long the probe sent for.
    pub elapsed: Duration,
}

impl Stats {
    pub fn received(&self) -> u64 {
        self.rtts.len() as u64
    }

    /// Packets sent per second.
    pub fn rate(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 { self.sent as f64 / secs } else { 0.0 }
    }

    pub fn loss_percent(&self) -> f64 {
        if self.sent == 0 { 0.0 } else { 100.0 * self.sent.saturating_sub(self.received()) as f64 / self.sent as f64 }
    }

    /// The `q` quantile (0..=1) of the RTTs in milliseconds, nearest-rank; 0 without any.
    pub fn rtt_quantile_ms(&self, q: f64) -> f64 {
        let mut sorted: Vec<Duration> = self.rtts.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return 0.0;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        ms(sorted[rank - 1])
    }

    pub fn rtt_mean_ms(&self) -> f64 {
        if self.rtts.is_empty() {
            return 0.0;
        }
        self.rtts.iter().map(|d| ms(*d)).sum::<f64>() / self.rtts.len() as f64
    }

    /// Upstream's line, without its leading tab.
    pub fn line(&self) -> String {
        format!(
            "Statistics: rate={:.2}pps, loss={}/{}pkts={:.2}%, RTT:mean={:.2}ms/median={:.2}ms/P95={:.2}ms/P99={:.2}ms",
            self.rate(),
            self.sent.saturating_sub(self.received()),
            self.sent,
            self.loss_percent(),
            self.rtt_mean_ms(),
            self.rtt_quantile_ms(0.5),
            self.rtt_quantile_ms(0.95),
            self.rtt_quantile_ms(0.99),
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_has_upstreams_shape() {
        let stats =
            Stats { sent: 100, rtts: (1..=98).map(Duration::from_millis).collect(), elapsed: Duration::from_secs(2) };
        assert_eq!(
            stats.line(),
            "Statistics: rate=50.00pps, loss=2/100pkts=2.00%, RTT:mean=49.50ms/median=49.00ms/P95=94.00ms/P99=98.00ms"
        );
        assert_eq!(
            Stats::default().line(),
            "Statistics: rate=0.00pps, loss=0/0pkts=0.00%, RTT:mean=0.00ms/median=0.00ms/P95=0.00ms/P99=0.00ms"
        );
    }
}
