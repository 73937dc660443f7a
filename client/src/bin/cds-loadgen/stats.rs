//! The figures of a run: percentiles over every receipt, and the summary printed at the end.

use crate::cli::Args;
use serde::Serialize;
use std::time::Duration;
use stunner_gateway_client::cds::Transport;
use tokio::time::Instant;

/// Latencies in microseconds (4 bytes each: a capped run holds at most 10 million).
#[derive(Debug, Default, Clone)]
pub struct Samples {
    micros: Vec<u32>,
    sorted: bool,
}

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.micros.push(d.as_micros().min(u32::MAX as u128) as u32);
        self.sorted = false;
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Sorted microseconds, for percentiles and plots.
    pub fn sorted(&mut self) -> &[u32] {
        if !self.sorted {
            self.micros.sort_unstable();
            self.sorted = true;
        }
        &self.micros
    }

    /// p50, p99 and max in milliseconds (nearest-rank); `None` without samples.
    pub fn summary(&mut self) -> Option<Percentiles> {
        let s = self.sorted();
        if s.is_empty() {
            return None;
        }
        let mean = s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64;
        Some(Percentiles {
            p50: ms(nearest_rank(s, 50.0)),
            p99: ms(nearest_rank(s, 99.0)),
            max: ms(*s.last().unwrap()),
            mean: (mean / 10.0).round() / 100.0,
        })
    }
}

fn ms(micros: u32) -> f64 {
    (micros as f64 / 10.0).round() / 100.0
}

/// The smallest sample with at least `p` percent of samples at or below it.
pub fn nearest_rank(sorted: &[u32], p: f64) -> u32 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// Everything a run found, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub transport: String,
    pub server: String,
    pub watchers: u64,
    pub gateways: u64,
    /// Endpoints per Gateway (0: Gateways without routes).
    pub endpoints: u64,
    pub updates: u64,
    /// Seconds from the first connection attempt until every watcher had its first config.
    pub connect_seconds: f64,
    /// Watchers connected (and served their first config) per second during ramp-up.
    pub connect_rate: f64,
    /// File write to receipt, in ms.
    pub latency_ms: Option<Percentiles>,
    /// First watcher's receipt of an update to each watcher's receipt, in ms: the fan-out
    /// alone, without the operator's file watch and render.
    pub spread_ms: Option<Percentiles>,
    pub frames_received: u64,
    pub frames_expected: u64,
    pub connect_failures: u64,
    pub disconnects: u64,
    pub rejected: u64,
    pub errors: u64,
    /// Zero configs served to watchers (counted in `errors`): a Gateway that looked deleted.
    pub zero_configs: u64,
    /// The spawned operator's VmRSS before the watchers connected and after, in KiB.
    pub server_rss_kib_before: Option<u64>,
    pub server_rss_kib_after: Option<u64>,
    pub server_rss_kib_per_watcher: Option<f64>,
    /// Its VmHWM after the updates (before a restart), in KiB.
    pub server_rss_kib_peak: Option<u64>,
    /// The reconnect storm after the operator restart (`--restart`).
    pub restart: Option<Restart>,
    pub timed_out: bool,
    pub elapsed_seconds: f64,
}

/// The reconnect storm after an operator restart, timed from the moment the old operator was
/// killed.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restart {
    /// Until the new operator served (its first complete render done).
    pub serving_ms: f64,
    /// Until the last watcher held the update written while the operator was down.
    pub last_watcher_ms: f64,
    /// Per watcher, until it held that update.
    pub latency_ms: Option<Percentiles>,
    /// Watchers that held it by the end.
    pub watchers_back: u64,
    /// Lost connections and failed reconnects on the way (expected: the storm itself).
    pub reconnect_failures: u64,
}

impl Summary {
    /// A run's summary before anything was measured but the server's memory.
    pub fn new(args: &Args, transport: Transport, server: &str, server_rss_kib_before: Option<u64>) -> Self {
        Summary {
            transport: transport.to_string(),
            server: server.to_string(),
            watchers: args.watchers,
            gateways: args.gateways,
            endpoints: args.endpoints,
            updates: args.updates,
            connect_seconds: 0.0,
            connect_rate: 0.0,
            latency_ms: None,
            spread_ms: None,
            frames_received: 0,
            frames_expected: args.watchers * args.updates,
            connect_failures: 0,
            disconnects: 0,
            rejected: 0,
            errors: 0,
            zero_configs: 0,
            server_rss_kib_before,
            server_rss_kib_after: None,
            server_rss_kib_per_watcher: None,
            server_rss_kib_peak: None,
            restart: None,
            timed_out: false,
            elapsed_seconds: 0.0,
        }
    }

    /// Whether every frame arrived, nothing failed and the run did not time out; after a
    /// restart, every watcher is back.
    pub fn clean(&self) -> bool {
        let restarted = self.restart.as_ref().is_none_or(|r| r.watchers_back == self.watchers);
        !self.timed_out && self.errors == 0 && self.frames_received == self.frames_expected && restarted
    }

    pub fn text(&self) -> String {
        let p = |p: &Option<Percentiles>| match p {
            Some(p) => format!("p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (mean {:.2} ms)", p.p50, p.p99, p.max, p.mean),
            None => "no samples".into(),
        };
        let mut s = format!(
            "cds-loadgen: {} watchers over {} ({} gateway{}, {} endpoints each), {} updates, server {}\n",
            self.watchers,
            self.transport,
            self.gateways,
            if self.gateways == 1 { "" } else { "s" },
            self.endpoints,
            self.updates,
            self.server
        );
        s += &format!("  connect:   {:.2} s, {:.0} watchers/s\n", self.connect_seconds, self.connect_rate);
        s += &format!("  latency:   {} (file write to receipt)\n", p(&self.latency_ms));
        s += &format!("  fan-out:   {} (first receipt to receipt)\n", p(&self.spread_ms));
        s += &format!("  frames:    {} received of {} expected\n", self.frames_received, self.frames_expected);
        s += &format!(
            "  errors:    {} ({} connect failures, {} disconnects, {} rejected configs, {} zero configs)\n",
            self.errors, self.connect_failures, self.disconnects, self.rejected, self.zero_configs
        );
        if let (Some(before), Some(after)) = (self.server_rss_kib_before, self.server_rss_kib_after) {
            s += &format!(
                "  server:    RSS {before} KiB before, {after} KiB with the watchers ({:.1} KiB per watcher)\n",
                self.server_rss_kib_per_watcher.unwrap_or(0.0)
            );
        }
        if let Some(peak) = self.server_rss_kib_peak {
            s += &format!("  peak:      RSS {peak} KiB (VmHWM after the updates)\n");
        }
        if let Some(r) = &self.restart {
            s += &format!(
                "  restart:   serving after {:.1} ms, {} of {} watchers back after {:.1} ms, {} ({} reconnect failures)\n",
                r.serving_ms,
                r.watchers_back,
                self.watchers,
                r.last_watcher_ms,
                p(&r.latency_ms),
                r.reconnect_failures
            );
        }
        s += &format!(
            "  elapsed:   {:.1} s{}\n",
            self.elapsed_seconds,
            if self.timed_out { " (timed out: --duration)" } else { "" }
        );
        s
    }
}

/// Milliseconds since `t0`, to 0.1 ms.
pub fn ms_since(t0: Instant) -> f64 {
    (t0.elapsed().as_secs_f64() * 1e4).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<u32> = (1..=100).collect();
        assert_eq!(nearest_rank(&s, 50.0), 50);
        assert_eq!(nearest_rank(&s, 99.0), 99);
        assert_eq!(nearest_rank(&s, 100.0), 100);
        assert_eq!(nearest_rank(&[7], 99.0), 7);
        let mut samples = Samples::default();
        for ms in [3, 1, 2] {
            samples.push(Duration::from_millis(ms));
        }
        let p = samples.summary().unwrap();
        assert_eq!((p.p50, p.max, p.mean), (2.0, 3.0, 2.0));
        assert!(Samples::default().summary().is_none());
    }
}
