//! What the election reads and writes: a Lease and its resourceVersion, in a [`LeaseStore`].

use k8s_openapi::api::coordination::v1::LeaseSpec;
use std::future::Future;

/// The Lease the Go operator elects on.
pub(crate) const LEASE_NAME: &str = "92062b70.l7mp.io";

/// Why a lease read or write failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseError {
    /// Someone else wrote first (create of an existing lease, or a stale resourceVersion).
    #[error("conflict")]
    Conflict,
    #[error("{0}")]
    Other(String),
}

/// A lease and the resourceVersion it was read at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Versioned {
    pub(crate) spec: LeaseSpec,
    pub(crate) version: String,
}

/// Where the lease lives: the API server, or a fake in tests.
pub(crate) trait LeaseStore {
    fn get(&self) -> impl Future<Output = Result<Option<Versioned>, LeaseError>> + Send;
    /// Creates the lease; `Conflict` if it exists.
    fn create(&self, spec: &LeaseSpec) -> impl Future<Output = Result<(), LeaseError>> + Send;
    /// Replaces the lease read at `version`; `Conflict` if it changed since.
    fn update(&self, spec: &LeaseSpec, version: &str) -> impl Future<Output = Result<(), LeaseError>> + Send;
}
