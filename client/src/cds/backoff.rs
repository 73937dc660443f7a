//! Reconnect delays: exponential, bounded, jittered; or, to behave as stunnerd does, fixed.
//!
//! Upstream clients retry every second in lockstep, so an operator restart brings every
//! dataplane back at the same instant. Doubling spreads load while the server stays down, and
//! jitter keeps clients that lost it together from reconnecting together. A load generator
//! that stands in for stunnerd turns both off (initial = maximum, no jitter): it must bring the
//! server the storm real dataplanes bring, not a gentler one.
//!
//! The random source is a small seeded generator (SplitMix64) rather than a crate: a delay
//! needs no cryptographic quality, and a seed makes the sequence reproducible in tests. Each
//! [`Backoff`] is seeded from std's per-process random hasher keys, so two watchers (or two
//! processes) started together do not draw the same delays.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(super) struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
    /// Whether a delay is drawn from `[base/2, base]` rather than being `base`.
    jitter: bool,
    rng: SplitMix64,
}

impl Backoff {
    /// A backoff with a random seed.
    pub fn new(initial: Duration, max: Duration, jitter: bool) -> Self {
        Self::with_seed(initial, max, RandomState::new().hash_one(0u8)).jittered(jitter)
    }

    /// A jittered backoff whose jitter is the same sequence for the same seed.
    pub fn with_seed(initial: Duration, max: Duration, seed: u64) -> Self {
        Backoff { initial, max: max.max(initial), current: initial, jitter: true, rng: SplitMix64(seed) }
    }

    fn jittered(self, jitter: bool) -> Self {
        Backoff { jitter, ..self }
    }

    /// The delay before the next attempt: the base, or with jitter a delay in `[base/2,
    /// base]`; each call doubles the base, up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let base = self.current;
        self.current = (self.current * 2).min(self.max);
        if self.jitter { equal_jitter(base, self.rng.next()) } else { base }
    }

    /// Back to the initial delay, after a connection that worked.
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

/// "Equal jitter": half the delay fixed, half random, so the delay never collapses to zero
/// (a server that just came back is not hit by every client within the same millisecond).
fn equal_jitter(base: Duration, random: u64) -> Duration {
    let half = base / 2;
    let span = (base - half).as_nanos() as u64;
    half + Duration::from_nanos(if span == 0 { 0 } else { random % (span + 1) })
}

/// SplitMix64 (Steele, Lea, Flood 2014): one add and three xor-shift-multiplies per number.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn doubles_up_to_the_bound_and_resets() {
        let mut b = Backoff::new(MS(100), MS(5000), true);
        let bases = [100, 200, 400, 800, 1600, 3200, 5000, 5000];
        for base in bases {
            let d = b.next_delay();
            assert!(d >= MS(base) / 2 && d <= MS(base), "{d:?} outside [{}/2, {base}] ms", base);
        }
        b.reset();
        assert!(b.next_delay() <= MS(100));
    }

    #[test]
    fn without_jitter_and_with_initial_equal_to_max_every_delay_is_the_same() {
        // stunnerd's RetryPeriod: 1 s after every failure, however many, also after a reset.
        let mut b = Backoff::new(MS(1000), MS(1000), false);
        let mut delays: Vec<Duration> = (0..5).map(|_| b.next_delay()).collect();
        b.reset();
        delays.push(b.next_delay());
        assert_eq!(delays, [MS(1000); 6]);
        let mut b = Backoff::new(MS(100), MS(400), false);
        assert_eq!((0..4).map(|_| b.next_delay()).collect::<Vec<_>>(), [MS(100), MS(200), MS(400), MS(400)]);
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let run = |seed| {
            let mut b = Backoff::with_seed(MS(100), MS(5000), seed);
            (0..10).map(|_| b.next_delay()).collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn jitter_spreads_clients_over_the_upper_half() {
        // 1,000 clients that failed together: their first delays cover [base/2, base] and
        // do not bunch up (each tenth of the range gets some).
        let base = MS(1000);
        let mut buckets = [0usize; 10];
        for seed in 0..1000 {
            let d = Backoff::with_seed(base, base, seed).next_delay();
            assert!(d >= base / 2 && d <= base, "{d:?}");
            let tenth = ((d - base / 2).as_nanos() * 10 / (base / 2).as_nanos()).min(9) as usize;
            buckets[tenth] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 50), "{buckets:?}");
    }

    #[test]
    fn tiny_and_zero_delays_are_fine() {
        assert_eq!(equal_jitter(Duration::ZERO, u64::MAX), Duration::ZERO);
        assert!(equal_jitter(Duration::from_nanos(1), u64::MAX) <= Duration::from_nanos(1));
        let mut b = Backoff::with_seed(MS(10), MS(1), 1);
        assert!(b.next_delay() <= MS(10), "a max below the initial delay is raised to it");
    }
}
