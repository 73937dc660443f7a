//! Reconnect delays: exponential, bounded, jittered.
//!
//! Upstream clients retry every second in lockstep, so an operator restart brings every
//! dataplane back at the same instant. Doubling spreads load while the server stays down, and
//! jitter keeps clients that lost it together from reconnecting together.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(super) struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max, current: initial }
    }

    /// The delay before the next attempt; each call doubles the base, up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        jitter(base)
    }

    /// Back to the initial delay, after a connection that worked.
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

/// "Equal jitter": half the delay fixed, half random, so the delay never collapses to zero.
fn jitter(base: Duration) -> Duration {
    let half = base / 2;
    // std's per-instance random hasher keys are a good enough random source here.
    let random = RandomState::new().hash_one(());
    let extra = half.as_nanos() as u64;
    half + Duration::from_nanos(if extra == 0 { 0 } else { random % (extra + 1) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_bound_and_resets() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(5000));
        let bases = [100, 200, 400, 800, 1600, 3200, 5000, 5000];
        for base in bases {
            let d = b.next_delay();
            assert!(d >= ms(base) / 2 && d <= ms(base), "{d:?} outside [{}/2, {base}] ms", base);
        }
        b.reset();
        assert!(b.next_delay() <= ms(100));
    }

    #[test]
    fn jitter_varies() {
        let delays: std::collections::HashSet<_> = (0..20).map(|_| jitter(Duration::from_secs(1))).collect();
        assert!(delays.len() > 1);
    }
}
