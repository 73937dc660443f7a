//! A typed client of the config discovery service (spec: cds-protocol.md): one-shot GETs of
//! configs, the license status, the operator's statuses and the client table, and
//! reconnecting watches, over either transport ([`Transport`]): the upstream HTTP/WebSocket
//! API or the gRPC API.
//!
//! `address` parses what people type; `scope` says which configs; `http` does one-shot GETs;
//! `watch` is the reconnecting watch both transports share (with `backoff` between attempts),
//! `ws` and `grpc` the two wires under it, `wire` what the watch and the wires share.

mod address;
mod backoff;
mod error;
mod grpc;
pub(crate) mod http;
mod scope;
mod watch;
mod wire;
mod ws;

pub use address::{DEFAULT_PORT, ServerAddress};
pub use error::ClientError;
pub(crate) use error::io_reason;
pub use http::Timeouts;
pub use scope::ConfigScope;
pub use stunner_gateway::cds::{
    ClientConfigState, ClientInfo, ClientList, Condition, ListenerConditions, ObjectStatus, ParentConditions,
    ParentRef, StatusList,
};
pub use watch::{Transport, WatchEvent, Watcher};
pub use wire::WatchSettings;

use hyper::StatusCode;
use serde::de::DeserializeOwned;
use stunner_gateway::cds::{ApiError, ConfigId, ConfigList, LicenseStatus};
use stunner_gateway::config::StunnerConfig;

/// A client of one config discovery server. Cheap to clone; holds no connection.
#[derive(Debug, Clone)]
pub struct CdsClient {
    server: ServerAddress,
    transport: Transport,
    timeouts: Timeouts,
    watch: WatchSettings,
}

impl CdsClient {
    /// A client of the server at `address` (see [`ServerAddress::parse`] for the forms).
    pub fn new(address: &str) -> Result<Self, ClientError> {
        Ok(Self::from_address(ServerAddress::parse(address)?))
    }

    /// A client of the server at an address parsed already.
    pub fn from_address(server: ServerAddress) -> Self {
        CdsClient {
            server,
            transport: Transport::default(),
            timeouts: Timeouts::default(),
            watch: WatchSettings::default(),
        }
    }

    /// Use `transport` for configs, the license, the client table and watches (statuses are
    /// REST only).
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    pub fn with_watch_settings(mut self, settings: WatchSettings) -> Self {
        self.watch = settings;
        self
    }

    pub fn server(&self) -> &ServerAddress {
        &self.server
    }

    /// The configs in `scope`, as the server stores them (not normalised). A Gateway that has
    /// no config is [`ClientError::GatewayNotFound`].
    pub async fn configs(&self, scope: &ConfigScope) -> Result<Vec<StunnerConfig>, ClientError> {
        if self.transport == Transport::Grpc {
            return grpc::configs(&self.server, scope, self.timeouts).await;
        }
        match scope {
            ConfigScope::Gateway { id, .. } => {
                let not_found = || ClientError::GatewayNotFound { id: id.to_string(), server: self.server.to_string() };
                Ok(vec![self.get(&scope.segments(), &scope.query(), not_found).await?])
            }
            _ => Ok(self.get::<ConfigList>(&scope.segments(), &[], || self.not_served(scope.segments())).await?.items),
        }
    }

    /// `GET /api/v1/license`.
    pub async fn license(&self) -> Result<LicenseStatus, ClientError> {
        if self.transport == Transport::Grpc {
            return grpc::license(&self.server, self.timeouts).await;
        }
        let path = ["api", "v1", "license"];
        self.get(&path, &[], || self.not_served(path.to_vec())).await
    }

    /// `GET /api/v1/statuses`: the operator's statuses of GatewayClasses, Gateways and routes.
    pub async fn statuses(&self) -> Result<StatusList, ClientError> {
        let path = ["api", "v1", "statuses"];
        self.get(&path, &[], || self.not_served(path.to_vec())).await
    }

    /// The server's client table: every watch client connected to it, over either transport
    /// (`GET /api/v1/clients`, or gRPC `ListClients`).
    pub async fn clients(&self) -> Result<ClientList, ClientError> {
        if self.transport == Transport::Grpc {
            return grpc::clients(&self.server, self.timeouts).await;
        }
        let path = ["api", "v1", "clients"];
        self.get(&path, &[], || self.not_served(path.to_vec())).await
    }

    /// A watch of `scope`; it connects on the first [`Watcher::next`].
    pub fn watch(&self, scope: &ConfigScope) -> Watcher {
        match self.transport {
            Transport::WebSocket => {
                let mut query = scope.query();
                query.push(("watch", "true"));
                let url = self.server.ws_url(&scope.segments(), &query);
                Watcher::websocket(self.server.clone(), url, self.watch.clone())
            }
            Transport::Grpc => Watcher::grpc(self.server.clone(), scope.clone(), self.watch.clone()),
        }
    }

    /// The URL of the operator's web console (`/ui/`), or of one Gateway's page on it, once the
    /// server has answered it: a server without the console (upstream's operator) is
    /// [`ClientError::NotServed`], a Gateway the console does not know
    /// [`ClientError::GatewayNotFound`].
    pub async fn console_url(&self, gateway: Option<&ConfigId>) -> Result<url::Url, ClientError> {
        let overview = ["ui", ""];
        let url = self.page(&overview, || self.not_served(overview.to_vec())).await?;
        let Some(id) = gateway else { return Ok(url) };
        let not_found = || ClientError::GatewayNotFound { id: id.to_string(), server: self.server.to_string() };
        self.page(&["ui", "gateways", &id.namespace, &id.name], not_found).await
    }

    /// GETs an HTML page: its URL, when it is answered.
    async fn page(&self, segments: &[&str], not_found: impl FnOnce() -> ClientError) -> Result<url::Url, ClientError> {
        let url = self.server.http_url(segments, &[]);
        let resp = http::get(&self.server, &url, self.timeouts).await?;
        match resp.status {
            StatusCode::OK => Ok(url),
            StatusCode::NOT_FOUND => Err(not_found()),
            status => Err(ClientError::Status {
                url: url.to_string(),
                status: status.to_string(),
                message: error_message(&resp),
            }),
        }
    }

    /// GETs a JSON body. A JSON 404 is the API's own "no such object" (`not_found`); any other
    /// 404 means the route itself is missing.
    async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, &str)],
        not_found: impl FnOnce() -> ClientError,
    ) -> Result<T, ClientError> {
        let url = self.server.http_url(segments, query);
        let resp = http::get(&self.server, &url, self.timeouts).await?;
        match resp.status {
            StatusCode::OK => serde_json::from_slice(&resp.body)
                .map_err(|e| ClientError::Decode { url: url.to_string(), reason: e.to_string() }),
            StatusCode::NOT_FOUND if resp.json => Err(not_found()),
            StatusCode::NOT_FOUND => Err(self.not_served(segments.to_vec())),
            status => Err(ClientError::Status {
                url: url.to_string(),
                status: status.to_string(),
                message: error_message(&resp),
            }),
        }
    }

    fn not_served(&self, segments: Vec<&str>) -> ClientError {
        ClientError::NotServed { server: self.server.to_string(), path: format!("/{}", segments.join("/")) }
    }
}

/// The message of an error body: the API's JSON `Error`, else the text itself.
fn error_message(resp: &http::Response) -> String {
    if resp.json
        && let Ok(e) = serde_json::from_slice::<ApiError>(&resp.body)
    {
        return e.message;
    }
    let text = String::from_utf8_lossy(&resp.body).trim().to_string();
    if text.is_empty() { resp.status.canonical_reason().unwrap_or("error").to_string() } else { text }
}
