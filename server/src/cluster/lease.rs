//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's leaderelection
//! does it (kube-runtime 4.2 has none): read the lease, take it if it is free, ours, or has
//! not changed for a whole lease duration as seen by *our* clock (so clock skew between
//! replicas does not matter), and write it back with the resourceVersion read, so that of
//! two candidates racing for it only one wins.
//!
//! A leader that cannot renew for `renew_deadline` stops leading; a lease is only taken over
//! after `lease_duration` without change, which is longer, so two replicas never both lead.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The Lease the Go operator elects on.
pub const LEASE_NAME: &str = "92062b70.l7mp.io";

/// controller-runtime's defaults.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why a lease read or write failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Someone else wrote first (create of an existing lease, or a stale resourceVersion).
    #[error("conflict")]
    Conflict,
    #[error("{0}")]
    Other(String),
}

/// A lease and the resourceVersion it was read at.
#[derive(Debug, Clone, PartialEq)]
pub struct Versioned {
    pub spec: LeaseSpec,
    pub version: String,
}

/// Where the lease lives: the API server, or a fake in tests.
pub trait LeaseStore {
    fn get(&self) -> impl Future<Output = Result<Option<Versioned>, LeaseError>> + Send;
    /// Creates the lease; `Conflict` if it exists.
    fn create(&self, spec: &LeaseSpec) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// Replaces the lease read at `version`; `Conflict` if it changed since.
    fn update(&self, spec: &LeaseSpec, version: &str) -> impl Future<Output = Result<(), LeaseError>> + Send;
}

/// One replica's view of the election.
pub struct Candidate {
    identity: String,
    timings: Timings,
    /// The last lease content seen and when we first saw it.
    observed: Option<(LeaseSpec, Instant)>,
    /// When the last successful acquire or renew started, while leading.
    renewed: Option<Instant>,
}

impl Candidate {
    pub fn new(identity: impl Into<String>, timings: Timings) -> Self {
        Candidate { identity: identity.into(), timings, observed: None, renewed: None }
    }

    pub fn is_leader(&self) -> bool {
        self.renewed.is_some()
    }

    /// One round at time `now`: tries to acquire or renew; returns whether we lead after it.
    pub async fn tick(&mut self, store: &impl LeaseStore, now: Instant) -> bool {
        if self.try_acquire_or_renew(store, now).await {
            self.renewed = Some(now);
        } else if self.renewed.is_some_and(|t| now.duration_since(t) >= self.timings.renew_deadline) {
            self.renewed = None;
        }
        self.is_leader()
    }

    async fn try_acquire_or_renew(&mut self, store: &impl LeaseStore, now: Instant) -> bool {
        let wall = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let mine = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timings.lease_duration.as_secs().try_into().unwrap_or(i32::MAX)),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: Some(0),
            ..Default::default()
        };
        let current = match store.get().await {
            Ok(Some(current)) => current,
            Ok(None) => return self.record(store.create(&mine).await, mine, now),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the leader election lease");
                return false;
            }
        };
        if self.observed.as_ref().is_none_or(|(spec, _)| spec != &current.spec) {
            self.observed = Some((current.spec.clone(), now));
        }
        let holder = current.spec.holder_identity.as_deref().unwrap_or("");
        let ours = holder == self.identity;
        if !holder.is_empty() && !ours && !self.expired(&current.spec, now) {
            return false;
        }
        let transitions = current.spec.lease_transitions.unwrap_or(0);
        let next = if ours {
            LeaseSpec { acquire_time: current.spec.acquire_time.clone(), lease_transitions: Some(transitions), ..mine }
        } else {
            LeaseSpec { lease_transitions: Some(transitions + 1), ..mine }
        };
        self.record(store.update(&next, &current.version).await, next, now)
    }

    /// Gives the lease up if we hold it, as client-go's `ReleaseOnCancel`: no holder and a
    /// one-second duration, so another replica takes over at once rather than after a whole
    /// lease duration. Best effort: on failure the lease simply expires.
    pub async fn release(&mut self, store: &impl LeaseStore) {
        if self.renewed.take().is_none() {
            return;
        }
        let current = match store.get().await {
            Ok(Some(current)) if current.spec.holder_identity.as_deref() == Some(&self.identity) => current,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot release the leader election lease");
                return;
            }
        };
        let wall = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let released = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(wall.clone()),
            renew_time: Some(wall),
            lease_transitions: current.spec.lease_transitions,
            ..Default::default()
        };
        match store.update(&released, &current.version).await {
            Ok(()) => tracing::info!(identity = %self.identity, "released the leader election lease"),
            Err(e) => tracing::warn!(error = %e, "cannot release the leader election lease"),
        }
    }

    /// Whether the lease went unchanged for its whole duration since we first saw it.
    fn expired(&self, spec: &LeaseSpec, now: Instant) -> bool {
        let duration = spec
            .lease_duration_seconds
            .map_or(self.timings.lease_duration, |s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
        self.observed.as_ref().is_some_and(|(_, seen)| now.duration_since(*seen) >= duration)
    }

    fn record(&mut self, result: Result<(), LeaseError>, spec: LeaseSpec, now: Instant) -> bool {
        match result {
            Ok(()) => {
                self.observed = Some((spec, now));
                true
            }
            Err(LeaseError::Conflict) => false,
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the leader election lease");
                false
            }
        }
    }
}

/// Runs the election until `shutdown`, publishing whether we lead on `leader`; then gives
/// the lease up if held. Cancel `shutdown` only once this replica's last writes are done.
pub async fn run(
    store: impl LeaseStore,
    mut candidate: Candidate,
    retry_period: Duration,
    leader: watch::Sender<bool>,
    shutdown: CancellationToken,
) {
    loop {
        let leading = candidate.tick(&store, Instant::now()).await;
        if leader.send_if_modified(|l| std::mem::replace(l, leading) != leading) {
            if leading {
                tracing::info!(identity = %candidate.identity, "became the leader: writing to the API server");
            } else {
                tracing::warn!(identity = %candidate.identity, "lost the leadership: no more writes");
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(retry_period) => {}
        }
    }
    leader.send_replace(false);
    candidate.release(&store).await;
}

/// The lease in the API server.
pub struct KubeLeaseStore {
    api: Api<Lease>,
}

impl KubeLeaseStore {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        KubeLeaseStore { api: Api::namespaced(client, namespace) }
    }
}

fn lease_error(e: kube::Error) -> LeaseError {
    match e {
        kube::Error::Api(s) if s.code == 409 => LeaseError::Conflict,
        e => LeaseError::Other(e.to_string()),
    }
}

impl LeaseStore for KubeLeaseStore {
    async fn get(&self) -> Result<Option<Versioned>, LeaseError> {
        let lease = self.api.get_opt(LEASE_NAME).await.map_err(lease_error)?;
        Ok(lease.map(|l| Versioned {
            spec: l.spec.unwrap_or_default(),
            version: l.metadata.resource_version.unwrap_or_default(),
        }))
    }

    async fn create(&self, spec: &LeaseSpec) -> Result<(), LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(LEASE_NAME.into()), ..Default::default() },
            spec: Some(spec.clone()),
        };
        self.api.create(&PostParams::default(), &lease).await.map(drop).map_err(lease_error)
    }

    async fn update(&self, spec: &LeaseSpec, version: &str) -> Result<(), LeaseError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(LEASE_NAME.into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            spec: Some(spec.clone()),
        };
        self.api.replace(LEASE_NAME, &PostParams::default(), &lease).await.map(drop).map_err(lease_error)
    }
}

/// Who this replica is in the election: the pod name (`POD_NAME`), else the host name
/// (`HOSTNAME`, else /etc/hostname), else one made of the process id.
pub fn identity(pod_name: Option<&str>, hostname: Option<&str>) -> String {
    let given = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(String::from);
    given(pod_name)
        .or_else(|| given(hostname))
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("stunner-gateway-operator-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
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
}
