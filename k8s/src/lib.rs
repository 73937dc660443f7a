//! Cluster mode: the operator against a Kubernetes API server. Watchers feed the index
//! ([`source`], translating events with [`translate`]); the [`writer`] applies the rendered
//! [`ops`], coalesced by the [`queue`], when this replica leads ([`lease`]), through the route
//! versions the API server serves ([`served`]), skipping what the
//! watchers show in place already ([`live`], with the fields our manager owns there:
//! [`owned_fields`]). [`pods`] indexes the dataplane pods' IPs for CDS
//! authorization, [`review`] checks CDS clients' bearer tokens, [`nodes`] keeps the CDS's node
//! address table in step with the Nodes. [`crds`] applies STUNner's own CRDs at start
//! (`--install-crds`), never over newer ones, and waits until they are Established.

pub mod crds;
pub mod lease;
pub mod live;
pub mod metrics;
pub mod nodes;
pub mod ops;
pub mod owned_fields;
mod pods;
mod queue;
pub mod review;
mod served;
mod source;
mod translate;
pub mod writer;

/// The API client the daemon holds in cluster mode, to hand back to these adapters.
pub use kube::Client;
use stunner_gateway::index::Input;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How to run against the cluster.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Watch Endpoints instead of EndpointSlices.
    pub endpoints: bool,
    /// Elect a leader; without, this replica always writes.
    pub leader_elect: bool,
    /// Where the leader election Lease lives: the operator's namespace.
    pub namespace: String,
    /// This replica's name in the leader election ([`lease::identity`]).
    pub identity: String,
    /// With `--cds-authorization=pod`: the index the dataplane pod watcher feeds.
    pub dataplane_pods: Option<std::sync::Arc<stunner_gateway_cds::authz::DataplaneIndex>>,
}

/// Why cluster mode could not start; each keeps the API client's error as its source.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot configure the Kubernetes client")]
    Configure(#[source] kube::Error),
    #[error("cannot reach the Kubernetes API server")]
    Unreachable(#[source] kube::Error),
    #[error("cannot discover the served versions of gateway.networking.k8s.io")]
    Discovery(#[source] kube::Error),
}

/// Connects to the API server (KUBECONFIG, else the in-cluster service account) and checks
/// that it answers, so that a wrong configuration fails at start and not in a retry loop.
pub async fn connect() -> Result<Client, StartError> {
    let client = Client::try_default().await.map_err(StartError::Configure)?;
    let version = client.apiserver_version().await.map_err(StartError::Unreachable)?;
    tracing::info!(version = %version.git_version, "connected to the Kubernetes API server");
    Ok(client)
}

/// Starts the watchers feeding `tx` (until `shutdown`), the leader election if asked for,
/// and `writer`'s task (until `stop_writing`). The lease is held until the writer has
/// finished its last writes, then released, so a successor never writes alongside us.
pub async fn start(
    client: Client,
    settings: Settings,
    tx: mpsc::Sender<Input>,
    writer: writer::Writer,
    shutdown: CancellationToken,
    stop_writing: CancellationToken,
) -> Result<JoinSet<()>, StartError> {
    let served = served::discover(&client).await.map_err(StartError::Discovery)?;
    tracing::info!(routes = ?served, "served Gateway API route versions");
    let (served_tx, served_rx) = watch::channel(served);
    writer.follow_served(served_rx.clone());
    let recheck = served::Recheck::default();
    let options =
        source::SourceOptions { endpoints: settings.endpoints, served: served_rx.clone(), recheck: recheck.clone() };
    let mut tasks = source::spawn(&client, options, tx, shutdown.clone());
    tasks.spawn(served::follow(client.clone(), served_tx, recheck, shutdown.clone()));
    if let Some(index) = settings.dataplane_pods {
        tasks.spawn(pods::follow(client.clone(), index, shutdown));
    }
    let (leader, leading) = watch::channel(!settings.leader_elect);
    let writes_done = CancellationToken::new();
    if settings.leader_elect {
        let identity = settings.identity;
        tracing::info!(%identity, namespace = %settings.namespace, lease = lease::LEASE_NAME, "leader election");
        let timings = lease::Timings::default();
        let store = lease::KubeLeaseStore::new(client.clone(), &settings.namespace);
        let candidate = lease::Candidate::new(identity, timings);
        tasks.spawn(lease::run(store, candidate, timings.retry_period, leader, writes_done.clone()));
    }
    tasks.spawn(async move {
        writer.run(writer::KubeSink::new(client, served_rx), leading, stop_writing).await;
        writes_done.cancel();
    });
    Ok(tasks)
}
