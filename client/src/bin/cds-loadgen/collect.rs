//! The collector: what the watchers report, turned into the run's counts and latencies.
//!
//! Updates go one at a time ([`Collector::updates`]): the next file is written once every
//! watcher has the previous one. With `--restart` one more update is written while the
//! operator is down ([`Collector::restart`]).

use crate::cli::Args;
use crate::daemon::{self, Daemon};
use crate::stats::{Restart, Samples, Summary, ms_since};
use indicatif::ProgressBar;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What a watcher tells the collector.
pub enum Report {
    /// A watcher received the config of update `seq`.
    Got {
        seq: u64,
        at: Instant,
    },
    /// A watcher was served the zero config of its id: its Gateway looked deleted.
    Zero,
    ConnectFailure,
    Disconnect,
    Rejected,
}

/// Reads the watchers' reports, writes the updates, and fills the summary.
pub struct Collector<'a> {
    args: &'a Args,
    rx: mpsc::UnboundedReceiver<Report>,
    deadline: Instant,
    bar: ProgressBar,
    ramp_start: Instant,
    /// Per update (0: the ramp-up; the restart's is the last): when it was written, its first
    /// receipt, how many watchers have it.
    written: Vec<Option<Instant>>,
    first: Vec<Option<Instant>>,
    have: Vec<u64>,
    /// Write to receipt, per receipt.
    pub latency: Samples,
    /// First receipt to each receipt of the same update.
    spread: Samples,
}

impl<'a> Collector<'a> {
    /// Starts collecting for watchers that have just been spawned.
    pub fn new(args: &'a Args, rx: mpsc::UnboundedReceiver<Report>, deadline: Instant, bar: ProgressBar) -> Self {
        let updates = args.updates as usize + usize::from(args.restart);
        Collector {
            args,
            rx,
            deadline,
            bar,
            ramp_start: Instant::now(),
            written: vec![None; updates + 1],
            first: vec![None; updates + 1],
            have: vec![0; updates + 1],
            latency: Samples::default(),
            spread: Samples::default(),
        }
    }

    /// Waits for the ramp-up, then writes each update once every watcher has the one before.
    pub async fn updates(&mut self, s: &mut Summary, daemon: &mut Daemon) -> anyhow::Result<()> {
        for seq in 0..=self.args.updates {
            if seq > 0 {
                if seq == 1 {
                    self.ramp_done(s, daemon).await;
                }
                self.written[seq as usize] = Some(Instant::now());
                daemon.write(seq)?;
            }
            if !self.until_everyone_has(s, seq).await {
                break;
            }
        }
        Ok(())
    }

    /// The connection figures and the server's memory once every watcher has its first config.
    async fn ramp_done(&mut self, s: &mut Summary, daemon: &Daemon) {
        let n = self.args.watchers;
        s.connect_seconds = self.ramp_start.elapsed().as_secs_f64();
        s.connect_rate = n as f64 / s.connect_seconds.max(1e-9);
        self.bar.finish_and_clear();
        // Let the server settle before reading its memory.
        tokio::time::sleep(Duration::from_millis(300)).await;
        s.server_rss_kib_after = daemon.pid().and_then(daemon::rss_kib);
        if let (Some(b), Some(a)) = (s.server_rss_kib_before, s.server_rss_kib_after) {
            s.server_rss_kib_per_watcher = Some(((a as f64 - b as f64) / n as f64 * 10.0).round() / 10.0);
        }
        self.bar.reset();
        self.bar.set_length(n * self.args.updates);
        self.bar.set_message("updates");
    }

    /// Counts reports until every watcher has update `seq` (or every watcher is gone); false
    /// once the deadline has passed.
    async fn until_everyone_has(&mut self, s: &mut Summary, seq: u64) -> bool {
        while self.have[seq as usize] < self.args.watchers {
            let Some(report) = self.next(s).await else { return !s.timed_out };
            match report {
                Report::Got { seq: got, at } if got <= self.args.updates => {
                    let g = got as usize;
                    // A watcher reports each update at most once (the library drops resends);
                    // an update it skipped (it was away) is not counted for it.
                    self.have[g] += 1;
                    self.bar.inc(1);
                    if got == 0 {
                        continue;
                    }
                    s.frames_received += 1;
                    if let Some(t0) = self.written[g] {
                        self.latency.push(at.saturating_duration_since(t0));
                    }
                    let f = *self.first[g].get_or_insert(at);
                    self.spread.push(at.saturating_duration_since(f));
                }
                Report::Got { .. } => {}
                other => count_error(s, &other),
            }
        }
        true
    }

    /// Kills the operator, writes one more update while it is down, starts it again, and
    /// times every watcher until it holds that update.
    pub async fn restart(&mut self, s: &mut Summary, daemon: &mut Daemon) -> anyhow::Result<Restart> {
        let seq = self.args.updates + 1;
        let k = seq as usize;
        let restarted = Instant::now();
        let limit = self.deadline.saturating_duration_since(restarted);
        tokio::task::block_in_place(|| daemon.restart(seq, limit))?;
        let mut r = Restart { serving_ms: ms_since(restarted), ..Restart::default() };
        let mut back = Samples::default();
        while self.have[k] < self.args.watchers {
            let Some(report) = self.next(s).await else { break };
            match report {
                Report::Got { seq: got, at } if got == seq => {
                    self.have[k] += 1;
                    back.push(at.saturating_duration_since(restarted));
                }
                Report::Got { .. } => {}
                // Every watcher loses its connection, and fails to connect while the operator
                // is down: the storm itself, not an error.
                Report::ConnectFailure | Report::Disconnect => r.reconnect_failures += 1,
                other => count_error(s, &other),
            }
        }
        r.watchers_back = self.have[k];
        r.last_watcher_ms = ms_since(restarted);
        r.latency_ms = back.summary();
        Ok(r)
    }

    /// The next report, or `None` at the deadline (marked in `s`) or once every watcher is gone.
    async fn next(&mut self, s: &mut Summary) -> Option<Report> {
        tokio::select! {
            r = self.rx.recv() => r,
            _ = tokio::time::sleep_until(self.deadline) => {
                s.timed_out = true;
                None
            }
        }
    }

    /// Closes the run's figures: errors that arrived after the last receipt still count.
    pub fn finish(&mut self, s: &mut Summary) {
        self.bar.finish_and_clear();
        if s.connect_seconds == 0.0 {
            s.connect_seconds = self.ramp_start.elapsed().as_secs_f64();
            s.connect_rate = self.have[0] as f64 / s.connect_seconds.max(1e-9);
        }
        while let Ok(report) = self.rx.try_recv() {
            if !matches!(report, Report::Got { .. }) {
                count_error(s, &report);
            }
        }
        s.errors = s.connect_failures + s.disconnects + s.rejected + s.zero_configs;
        s.latency_ms = self.latency.summary();
        s.spread_ms = self.spread.summary();
    }
}

/// Counts a report that is not a receipt.
fn count_error(s: &mut Summary, report: &Report) {
    match report {
        Report::Zero => s.zero_configs += 1,
        Report::ConnectFailure => s.connect_failures += 1,
        Report::Disconnect => s.disconnects += 1,
        Report::Rejected => s.rejected += 1,
        Report::Got { .. } => {}
    }
}
