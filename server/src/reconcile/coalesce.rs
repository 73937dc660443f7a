//! When the render loop renders after a change: at once when the loop has been quiet, later
//! when changes keep coming.
//!
//! Upstream waits a fixed `--throttle-timeout` (250 ms) after the first change of every burst,
//! so a lone password change waits as long as a relist. Here a change that finds no render in
//! the current window is rendered at once; a change that arrives while a render runs or within
//! the window after one is held until the window ends, and each change within
//! `--throttle-timeout` of the last render makes the next window longer (up to
//! `--throttle-timeout`), so a sustained burst is rendered about once per `--throttle-timeout`.
//! A quiet `--throttle-timeout` brings the window back to its shortest. A render is never postponed by later
//! changes: its time is fixed by the change that asked for it, at most one window after it.

use std::time::Duration;
use tokio::time::Instant;

/// The shortest window: long enough to take in the watch events of one `kubectl apply` and the
/// operator's own writes coming back, short enough not to be noticed.
pub const MIN_WINDOW: Duration = Duration::from_millis(20);
/// How much the window grows with each change that falls into it.
const GROWTH: u32 = 4;

#[derive(Debug)]
pub struct Coalescer {
    min: Duration,
    max: Duration,
    window: Duration,
    last_render: Option<Instant>,
}

impl Coalescer {
    /// `max` is `--throttle-timeout`: the longest a change waits for its render.
    pub fn new(max: Duration) -> Coalescer {
        let min = MIN_WINDOW.min(max);
        Coalescer { min, max, window: min, last_render: None }
    }

    /// When to render a change that arrives at `now` while no render is pending: the end of
    /// the window after the last render while it lasts, else `now` itself. A change within
    /// `max` of the last render belongs to a sustained stream and grows the window (changes
    /// 100 ms apart are rendered once per `max`, not ten times a second); only a quiet `max`
    /// brings it back to its shortest.
    pub fn schedule(&mut self, now: Instant) -> Instant {
        let since = self.last_render.map(|last| now.saturating_duration_since(last));
        match since {
            Some(since) if since < self.max => {
                let at = if since < self.window { now + (self.window - since) } else { now };
                self.window = (self.window * GROWTH).min(self.max);
                at
            }
            _ => {
                self.window = self.min;
                now
            }
        }
    }

    /// A render finished at `at`: the window counts from there.
    pub fn rendered(&mut self, at: Instant) {
        self.last_render = Some(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: Duration = Duration::from_millis(250);

    /// The render loop's use of the policy, with renders that take no time: the times
    /// (from the first change) at which changes made at `changes` are rendered.
    fn renders(changes: impl IntoIterator<Item = Duration>) -> Vec<Duration> {
        let start = Instant::now();
        let mut policy = Coalescer::new(MAX);
        let mut pending: Option<Instant> = None;
        let mut renders = Vec::new();
        let mut render = |policy: &mut Coalescer, at: Instant| {
            renders.push(at - start);
            policy.rendered(at);
        };
        for offset in changes {
            let now = start + offset;
            if let Some(at) = pending.filter(|at| *at <= now) {
                render(&mut policy, at);
                pending = None;
            }
            if pending.is_none() {
                let at = policy.schedule(now);
                if at <= now { render(&mut policy, now) } else { pending = Some(at) }
            }
        }
        if let Some(at) = pending {
            render(&mut policy, at);
        }
        renders
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn an_isolated_change_is_rendered_at_once() {
        assert_eq!(renders([ms(0)]), [ms(0)]);
        // Changes further apart than the bound each render at once.
        assert_eq!(renders([ms(0), ms(300), ms(600)]), [ms(0), ms(300), ms(600)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_right_after_a_render_waits_for_the_window() {
        assert_eq!(renders([ms(0), ms(5), ms(8)]), [ms(0), MIN_WINDOW]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_1000_changes_in_a_second_renders_about_once_per_throttle_timeout() {
        let renders = renders((0..1000).map(ms));
        // The window reaches the bound after log4(250 / 20) = 2 windows that grew.
        let ramp = 2;
        let bound = (1000 / MAX.as_millis()) as usize + ramp + 1;
        assert!(renders.len() <= bound, "{} renders: {renders:?}", renders.len());
        assert_eq!(renders[0], ms(0), "the first change renders at once");
        let gaps: Vec<Duration> = renders.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[ramp..].iter().all(|g| *g == MAX), "the window grows to the bound: {renders:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_slower_than_the_window_still_grows_it() {
        let renders = renders((0..20).map(|i| ms(100 * i)));
        let ramp = 2;
        assert!(renders.len() <= (2000 / MAX.as_millis()) as usize + ramp + 1, "{renders:?}");
        let gaps: Vec<Duration> = renders.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[ramp..].iter().all(|g| *g == MAX), "once per bound after the ramp: {renders:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_renders_every_change_within_the_bound() {
        let changes: Vec<Duration> = (0..3000).step_by(7).map(ms).collect();
        let renders = renders(changes.iter().copied());
        for change in changes {
            let rendered = renders.iter().find(|r| **r >= change).expect("every change is rendered");
            assert!(*rendered - change <= MAX, "a change at {change:?} waited until {rendered:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_window_brings_the_window_back_to_its_shortest() {
        let burst = (0..200).map(ms);
        let later = [ms(2000), ms(2005)];
        let renders = renders(burst.chain(later));
        assert_eq!(renders[renders.len() - 2..], [ms(2000), ms(2000) + MIN_WINDOW]);
    }

    #[test]
    fn a_throttle_timeout_below_the_shortest_window_is_the_window() {
        let mut policy = Coalescer::new(ms(5));
        let now = Instant::now();
        policy.rendered(now);
        assert_eq!(policy.schedule(now + ms(1)), now + ms(5));
    }
}
