//! The ConfigDiscovery service: one-shot calls here, the watch stream in [`super::stream`].

// tonic's `Status` is the natural error of every helper here, large as it is.
#![allow(clippy::result_large_err)]

use super::convert::{config_id, held, scope};
use super::encoded::{Encoded, GrpcUpdate, encode_list};
use super::limits::{ConnectionWatches, WatchLimits};
use super::settings::Settings;
use super::stream::{AckReader, Outbound};
use super::stubs::config_discovery_server;
use crate::authz::{Authorizer, Identity, Refusal, bearer};
use crate::clients::{ClientInfo, ClientTable, scope_string};
use crate::connection::PeerAddr;
use crate::metrics::{Api, CdsMetrics, Transport};
use crate::store::{ConfigStore, Scope};
use crate::watch::Watch;
use futures_util::Stream;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use stunner_gateway::proto::{self, watch_request};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status, Streaming};

/// The service, cheap to clone.
#[derive(Clone)]
pub(crate) struct ConfigDiscovery {
    store: Arc<ConfigStore>,
    metrics: CdsMetrics,
    clients: Arc<ClientTable>,
    authorizer: Arc<Authorizer>,
    settings: Settings,
    watches: WatchLimits,
    shutdown: CancellationToken,
    /// The listener's tasks: each watch's ack reader runs on it.
    tasks: TaskTracker,
}

impl ConfigDiscovery {
    pub(crate) fn new(
        store: Arc<ConfigStore>,
        metrics: CdsMetrics,
        clients: Arc<ClientTable>,
        authorizer: Arc<Authorizer>,
        settings: Settings,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> Self {
        let watches = WatchLimits::new(settings.max_watches, settings.max_watches_per_connection);
        ConfigDiscovery { store, metrics, clients, authorizer, settings, watches, shutdown, tasks }
    }

    /// Who the caller is, or the status saying why not (the decision of the HTTP API too):
    /// UNAUTHENTICATED for an invalid token, PERMISSION_DENIED for a caller that may not read
    /// the scope, UNAVAILABLE when its token could not be reviewed in time.
    async fn authorize(&self, caller: &Caller, scope: &Scope) -> Result<Identity, Status> {
        let Caller { peer, token } = caller;
        self.authorizer.authorize(*peer, token.as_deref(), scope).await.map_err(|refusal| {
            self.metrics.refused(Api::grpc, refusal.reason());
            tracing::info!(peer = ?peer, scope = %scope_string(scope), reason = %refusal, "gRPC CDS request refused");
            match refusal {
                Refusal::Unauthenticated(message) => Status::unauthenticated(message),
                Refusal::Forbidden(message) => Status::permission_denied(message),
                Refusal::Unavailable(message) => Status::unavailable(message),
            }
        })
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<Encoded, Status>> + Send>>;

#[tonic::async_trait]
impl config_discovery_server::ConfigDiscovery for ConfigDiscovery {
    async fn list(&self, request: Request<proto::ListRequest>) -> Result<Response<Encoded>, Status> {
        let scope = scope(request.get_ref().scope.clone())?;
        self.authorize(&Caller::of(&request), &scope).await?;
        let updates: Vec<_> = self.store.list(&scope).iter().map(|s| s.encoded::<GrpcUpdate>(&s.plain())).collect();
        Ok(Response::new(Encoded(encode_list(&updates))))
    }

    async fn get(&self, request: Request<proto::GetRequest>) -> Result<Response<Encoded>, Status> {
        let id = config_id(request.get_ref().id.clone(), "id")?;
        self.authorize(&Caller::of(&request), &Scope::Config(id.clone())).await?;
        let request = request.into_inner();
        let Some(snapshot) = self.store.get(&id) else {
            return Err(Status::not_found(format!("Config not found for ID {id}")));
        };
        let node = (!request.node.is_empty()).then_some(request.node.as_str());
        let variant = snapshot.variant_for(node, self.store.nodes());
        Ok(Response::new(Encoded(snapshot.encoded::<GrpcUpdate>(&variant))))
    }

    type WatchStream = WatchStream;

    async fn watch(&self, request: Request<Streaming<proto::WatchRequest>>) -> Result<Response<WatchStream>, Status> {
        let slots = self.watches.admit(request.extensions().get::<ConnectionWatches>())?;
        let caller = Caller::of(&request);
        let mut inbound = request.into_inner();
        let first = tokio::time::timeout(self.settings.start_timeout, inbound.message())
            .await
            .map_err(|_| Status::deadline_exceeded("no `start` message in time"))??;
        let Some(proto::WatchRequest { msg: Some(watch_request::Msg::Start(start)) }) = first else {
            return Err(Status::invalid_argument("the first message of a watch must be `start`"));
        };
        let scope = scope(start.scope)?;
        let node = match (start.node.is_empty(), &scope) {
            (true, _) => None,
            (false, Scope::Config(_)) => Some(start.node),
            (false, _) => return Err(Status::invalid_argument("`node` needs a single-config scope")),
        };
        let identity = self.authorize(&caller, &scope).await?;
        let held = held(start.resume)?;
        let (watch, initial) = Watch::resume(self.store.clone(), scope.clone(), node.clone(), &held);
        let client = self.clients.register(ClientInfo {
            transport: Transport::Grpc,
            remote_address: caller.peer,
            node: node.unwrap_or_default().into(),
            scope,
            client_name: start.client_name.into(),
            identity: identity.to_string().into(),
        });
        let acks = AckReader::spawn(&self.tasks, inbound, client.client());
        let outbound = Outbound::new(watch, initial, client, acks, slots, self.shutdown.clone(), self.metrics.clone());
        Ok(Response::new(Box::pin(outbound.into_stream())))
    }

    async fn get_license(
        &self,
        _request: Request<proto::GetLicenseRequest>,
    ) -> Result<Response<proto::LicenseStatus>, Status> {
        let status_json = serde_json::to_string(&self.store.license()).map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(proto::LicenseStatus { status_json }))
    }

    async fn list_clients(
        &self,
        request: Request<proto::ListClientsRequest>,
    ) -> Result<Response<proto::ListClientsResponse>, Status> {
        self.authorize(&Caller::of(&request), &Scope::All).await?;
        Ok(Response::new(self.clients.list()))
    }
}

/// Who is calling: the remote address of the connection the call came on, and the bearer
/// token of its `authorization` metadata, if any.
struct Caller {
    peer: Option<SocketAddr>,
    token: Option<String>,
}

impl Caller {
    fn of<T>(request: &Request<T>) -> Self {
        let token = request.metadata().get("authorization").and_then(|v| v.to_str().ok()).and_then(bearer);
        Caller { peer: request.extensions().get::<PeerAddr>().map(|p| p.0), token: token.map(str::to_owned) }
    }
}
