//! The election against a lease in memory with the API server's optimistic concurrency.

use super::store::Versioned;
use super::*;
use std::sync::Mutex;

/// A lease in memory with the API server's optimistic concurrency; `down` makes every
/// call fail, as for a replica cut off from the API server.
#[derive(Default)]
struct FakeStore {
    lease: Mutex<Option<(LeaseSpec, u64)>>,
    down: std::sync::atomic::AtomicBool,
}

impl FakeStore {
    fn check(&self) -> Result<(), LeaseError> {
        if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            Err(LeaseError::Other("unreachable".into()))
        } else {
            Ok(())
        }
    }

    fn holder(&self) -> Option<String> {
        self.lease.lock().unwrap().as_ref().and_then(|(s, _)| s.holder_identity.clone())
    }
}

impl LeaseStore for FakeStore {
    async fn get(&self) -> Result<Option<Versioned>, LeaseError> {
        self.check()?;
        let lease = self.lease.lock().unwrap();
        Ok(lease.as_ref().map(|(spec, v)| Versioned { spec: spec.clone(), version: v.to_string() }))
    }

    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        self.check()?;
        let mut lease = self.lease.lock().unwrap();
        if lease.is_some() {
            return Err(LeaseError::Conflict);
        }
        *lease = Some((spec.clone(), 1));
        Ok(())
    }

    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        self.check()?;
        let mut lease = self.lease.lock().unwrap();
        match lease.as_mut() {
            Some((s, v)) if v.to_string() == version => {
                *s = spec.clone();
                *v += 1;
                Ok(())
            }
            _ => Err(LeaseError::Conflict),
        }
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[tokio::test]
async fn acquires_a_free_lease_and_renews_it() {
    let store = FakeStore::default();
    let mut a = Candidate::new("a", Timings::default());
    let t0 = Instant::now();
    assert!(a.tick(&store, t0).await);
    assert_eq!(store.holder().as_deref(), Some("a"));
    assert!(a.tick(&store, t0 + secs(2)).await);
    let lease = store.lease.lock().unwrap().clone().unwrap();
    assert_eq!(lease.0.lease_transitions, Some(0), "renewing is no transition");
    assert_eq!(lease.0.lease_duration_seconds, Some(15));
}

#[tokio::test]
async fn a_held_lease_is_taken_over_only_after_it_expires() {
    let store = FakeStore::default();
    let (mut a, mut b) = (Candidate::new("a", Timings::default()), Candidate::new("b", Timings::default()));
    let t0 = Instant::now();
    assert!(a.tick(&store, t0).await);
    assert!(!b.tick(&store, t0).await, "held by a");
    // a stops renewing (e.g. it died); b waits a whole lease duration from what it saw.
    assert!(!b.tick(&store, t0 + secs(14)).await);
    assert!(b.tick(&store, t0 + secs(15)).await);
    assert_eq!(store.holder().as_deref(), Some("b"));
    assert_eq!(store.lease.lock().unwrap().as_ref().unwrap().0.lease_transitions, Some(1));
    // a comes back: the lease is b's and fresh.
    assert!(!a.tick(&store, t0 + secs(16)).await);
}

#[tokio::test]
async fn a_leader_that_cannot_renew_steps_down_before_anyone_takes_over() {
    let store = FakeStore::default();
    let (mut a, mut b) = (Candidate::new("a", Timings::default()), Candidate::new("b", Timings::default()));
    let t0 = Instant::now();
    assert!(a.tick(&store, t0).await);
    assert!(!b.tick(&store, t0 + secs(1)).await);
    // a is cut off from the API server; b still reaches it. Step both every second.
    let a_store = FakeStore::default();
    a_store.down.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut a_led_until = t0;
    let mut b_leads_from = None;
    for s in 2..40 {
        let now = t0 + secs(s);
        if a.tick(&a_store, now).await {
            a_led_until = now;
        }
        if b.tick(&store, now).await && b_leads_from.is_none() {
            b_leads_from = Some(now);
        }
        assert!(!(a.is_leader() && b.is_leader()), "two leaders at {s}s");
    }
    assert_eq!(a_led_until, t0 + secs(9), "a steps down at the renew deadline");
    assert_eq!(b_leads_from, Some(t0 + secs(16)), "b takes over after a lease duration");
}

/// A store whose every call hangs once `hung` is set, as for a replica whose packets to the
/// API server are dropped.
#[derive(Default)]
struct HangingStore {
    store: FakeStore,
    hung: std::sync::atomic::AtomicBool,
}

impl HangingStore {
    async fn maybe_hang(&self) {
        if self.hung.load(std::sync::atomic::Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
    }
}

impl LeaseStore for HangingStore {
    async fn get(&self) -> Result<Option<Versioned>, LeaseError> {
        self.maybe_hang().await;
        self.store.get().await
    }

    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        self.maybe_hang().await;
        self.store.create(spec).await
    }

    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        self.maybe_hang().await;
        self.store.update(spec, version).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewal_hangs_steps_down_at_its_renew_deadline() {
    let store = HangingStore::default();
    let mut a = Candidate::new("a", Timings::default());
    let renewed = Instant::now();
    assert!(a.tick(&store, renewed).await);
    tokio::time::sleep(secs(2)).await;
    store.hung.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(!a.tick(&store, Instant::now()).await, "a hung renewal ends the leadership");
    assert_eq!(Instant::now(), renewed + Timings::default().renew_deadline, "at the renew deadline, not later");
}

#[tokio::test]
async fn racing_candidates_never_both_win() {
    let store = FakeStore::default();
    let mut candidates: Vec<Candidate> =
        ["a", "b", "c"].into_iter().map(|n| Candidate::new(n, Timings::default())).collect();
    let t0 = Instant::now();
    for s in 0..60 {
        for c in &mut candidates {
            c.tick(&store, t0 + secs(s)).await;
        }
        assert_eq!(candidates.iter().filter(|c| c.is_leader()).count(), 1, "at {s}s");
    }
}

#[tokio::test]
async fn a_stale_read_loses_the_write() {
    let store = FakeStore::default();
    let mut a = Candidate::new("a", Timings::default());
    assert!(a.tick(&store, Instant::now()).await);
    let read = store.get().await.unwrap().unwrap();
    assert!(a.tick(&store, Instant::now()).await);
    assert!(matches!(store.update(&read.spec, &read.version).await, Err(LeaseError::Conflict)));
    assert!(matches!(store.create(&read.spec).await, Err(LeaseError::Conflict)));
}

#[tokio::test]
async fn a_released_lease_is_taken_over_at_once() {
    let store = FakeStore::default();
    let (mut a, mut b) = (Candidate::new("a", Timings::default()), Candidate::new("b", Timings::default()));
    let t0 = Instant::now();
    assert!(a.tick(&store, t0).await);
    assert!(!b.tick(&store, t0).await);
    // b releasing a lease it does not hold changes nothing.
    b.release(&store).await;
    assert_eq!(store.holder().as_deref(), Some("a"));
    a.release(&store).await;
    assert!(!a.is_leader());
    assert_eq!(store.holder(), None);
    assert!(b.tick(&store, t0 + secs(1)).await, "no wait for the lease duration");
    assert_eq!(store.lease.lock().unwrap().as_ref().unwrap().0.lease_transitions, Some(1));
}

#[tokio::test(start_paused = true)]
async fn the_election_stops_leading_and_releases_on_shutdown() {
    let store = std::sync::Arc::new(FakeStore::default());
    let (leader, mut leading) = watch::channel(false);
    let shutdown = CancellationToken::new();
    let candidate = Candidate::new("a", Timings::default());
    let task = tokio::spawn(run(SharedStore(store.clone()), candidate, secs(2), leader, shutdown.clone()));
    leading.wait_for(|l| *l).await.unwrap();
    shutdown.cancel();
    task.await.unwrap();
    assert!(!*leading.borrow());
    assert_eq!(store.holder(), None);
}

/// The fake shared between the election task and the test.
struct SharedStore(std::sync::Arc<FakeStore>);

impl LeaseStore for SharedStore {
    async fn get(&self) -> Result<Option<Versioned>, LeaseError> {
        self.0.get().await
    }
    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        self.0.create(spec).await
    }
    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        self.0.update(spec, version).await
    }
}

#[test]
fn the_identity_is_the_pod_name_else_the_host_name() {
    assert_eq!(identity(Some("op-0"), Some("node-a")), "op-0");
    assert_eq!(identity(Some(""), Some("node-a")), "node-a");
    assert_eq!(identity(None, Some("node-a")), "node-a");
    assert!(!identity(None, Some("")).is_empty());
}
