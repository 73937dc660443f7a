//! The lease in the API server: reads and writes with its optimistic concurrency, a
//! conflict (409) told apart from other failures.

use super::store::{LEASE_NAME, LeaseError, LeaseStore, Versioned};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

/// The lease in the API server.
pub(crate) struct KubeLeaseStore {
    api: Api<Lease>,
}

impl KubeLeaseStore {
    pub(crate) fn new(client: kube::Client, namespace: &str) -> Self {
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
