//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's leaderelection
//! does it (kube-runtime 4.2 has none): read the lease, take it if it is free, ours, or has
//! not changed for a whole lease duration as seen by *our* clock (so clock skew between
//! replicas does not matter), and write it back with the resourceVersion read, so that of
//! two candidates racing for it only one wins.
//!
//! A leader that cannot renew for `renew_deadline` stops leading; a lease is only taken over
//! after `lease_duration` without change, which is longer, so two replicas never both lead.
//!
//! The election is written against [`LeaseStore`]; [`kube_store`] is the Lease in the API
//! server.

mod kube_store;
mod store;

pub(crate) use kube_store::KubeLeaseStore;
pub(crate) use store::{LEASE_NAME, LeaseError, LeaseStore};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// controller-runtime's defaults.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timings {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
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

/// One replica's view of the election.
pub(crate) struct Candidate {
    identity: String,
    timings: Timings,
    /// The last lease content seen and when we first saw it.
    observed: Option<(LeaseSpec, Instant)>,
    /// When the last successful acquire or renew started, while leading.
    renewed: Option<Instant>,
}

impl Candidate {
    pub(crate) fn new(identity: impl Into<String>, timings: Timings) -> Self {
        Candidate { identity: identity.into(), timings, observed: None, renewed: None }
    }

    pub(crate) fn is_leader(&self) -> bool {
        self.renewed.is_some()
    }

    /// One round at time `now`: tries to acquire or renew; returns whether we lead after it.
    ///
    /// The round is cut off where a leader's renew deadline falls: a request that hangs
    /// (packets to the API server dropped, not refused) must not keep a leader leading past
    /// it, as another replica takes the lease over once it has gone unchanged for a lease
    /// duration.
    pub(crate) async fn tick(&mut self, store: &impl LeaseStore, now: Instant) -> bool {
        let deadline = self.renewed.map_or(now + self.timings.renew_deadline, |t| t + self.timings.renew_deadline);
        match tokio::time::timeout_at(deadline, self.try_acquire_or_renew(store, now)).await {
            Ok(true) => self.renewed = Some(now),
            Ok(false) if now < deadline => {}
            Ok(false) => self.renewed = None,
            Err(_) => {
                tracing::warn!(
                    "the leader election lease was not read or written within the renew deadline: check that this pod reaches the API server"
                );
                self.renewed = None;
            }
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
    pub(crate) async fn release(&mut self, store: &impl LeaseStore) {
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
pub(crate) async fn run(
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
mod tests;
