//! A seeded random generator for the benchmarks that make random load (the soak's churn and
//! watchers): no random crate, and a run reproduces from its seed.

#![allow(dead_code)] // each benchmark uses its own subset

/// xorshift64*: small, seedable, good enough to pick among a few options.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; 0 is mapped to another, xorshift's one fixed point).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
