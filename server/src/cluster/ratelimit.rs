//! The writer's client-side rate limit: a token bucket with client-go's defaults (20 requests
//! a second, bursts of 30), so that a render touching thousands of objects (a new GatewayConfig,
//! a restart against a changed cluster) does not flood the API server, which would slow every
//! other client of it too.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

pub const QPS: f64 = 20.0;
pub const BURST: f64 = 30.0;

pub struct RateLimit {
    per_second: f64,
    burst: f64,
    /// Tokens left (negative: reserved by waiters) and when they were counted.
    bucket: Mutex<(f64, Instant)>,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit::new(QPS, BURST)
    }
}

impl RateLimit {
    pub fn new(per_second: f64, burst: f64) -> Self {
        RateLimit { per_second, burst, bucket: Mutex::new((burst, Instant::now())) }
    }

    /// Takes a token, waiting until one is due.
    pub async fn acquire(&self) {
        let wait = {
            let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let (tokens, counted) = *bucket;
            let refilled = (tokens + now.duration_since(counted).as_secs_f64() * self.per_second).min(self.burst);
            *bucket = (refilled - 1.0, now);
            (refilled < 1.0).then(|| Duration::from_secs_f64((1.0 - refilled) / self.per_second))
        };
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_steady_rate() {
        let limit = Arc::new(RateLimit::new(20.0, 30.0));
        let done = Arc::new(AtomicUsize::new(0));
        let task = {
            let (limit, done) = (limit.clone(), done.clone());
            tokio::spawn(async move {
                for _ in 0..100 {
                    limit.acquire().await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(done.load(Ordering::Relaxed), 30, "the burst at once");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(done.load(Ordering::Relaxed), 50, "then 20 a second");
        task.await.unwrap();
        // After a quiet while the bucket is full again, but no fuller than the burst.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let start = Instant::now();
        for _ in 0..31 {
            limit.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::from_millis(50));
    }
}
