//! The gRPC transport (`stunner.cds.v1.ConfigDiscovery`, proto/stunner/cds/v1/cds.proto):
//! one-shot calls and one watch stream. The server serves it on the CDS port itself (HTTP/2
//! with prior knowledge beside HTTP/1.1), so the same address works for both transports.
//!
//! Keepalive is HTTP/2's own: PINGs every `ping_period`, also while the stream is idle, and a
//! connection whose PING goes unanswered for `pong_wait` is closed, which ends the stream with
//! an error, so the watch reconnects just as a silent WebSocket makes it.

use super::scope::ConfigScope;
use super::wire::{Ack, Frame, WatchSettings};
use super::{ClientError, ClientList, ServerAddress, Timeouts};
use std::time::Duration;
use stunner_gateway::cds::{ConfigId, LicenseStatus};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::proto;
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;
use tonic::transport::{Channel, Endpoint};

#[allow(clippy::all, clippy::pedantic)]
mod stub {
    include!(concat!(env!("OUT_DIR"), "/stunner.cds.v1.rs"));
}

use stub::config_discovery_client::ConfigDiscoveryClient;

/// An open watch stream, and the sender of its acknowledgements.
pub(super) struct Connection {
    requests: Option<mpsc::UnboundedSender<proto::WatchRequest>>,
    stream: tonic::Streaming<proto::ConfigUpdate>,
    /// Fires when the request stream has ended and everything queued on it was taken by the
    /// HTTP/2 connection.
    drained: oneshot::Receiver<()>,
}

impl Connection {
    /// Connects and starts a watch of `scope`, telling the server what we `resume` from.
    pub async fn open(
        server: &ServerAddress,
        scope: &ConfigScope,
        settings: &WatchSettings,
        resume: Vec<(ConfigId, String)>,
    ) -> Result<Self, ClientError> {
        let node = match scope {
            ConfigScope::Gateway { node: Some(node), .. } => node.clone(),
            _ => String::new(),
        };
        let start = proto::WatchStart {
            scope: Some(proto_scope(scope)),
            node,
            resume: resume.into_iter().map(|(id, version)| proto::Held { id: Some(proto_id(&id)), version }).collect(),
            client_name: settings.client_name.clone(),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(proto::WatchRequest { msg: Some(proto::watch_request::Msg::Start(start)) })
            .expect("the receiver is alive");
        let (drained_tx, drained) = oneshot::channel();
        let requests = futures_util::stream::unfold((rx, Some(drained_tx)), |(mut rx, mut drained)| async move {
            match rx.recv().await {
                Some(m) => Some((m, (rx, drained))),
                None => {
                    if let Some(d) = drained.take() {
                        let _ = d.send(());
                    }
                    None
                }
            }
        });
        let call = async {
            let channel = channel(server, settings.connect_timeout, Some(settings)).await?;
            ConfigDiscoveryClient::new(channel).watch(requests).await.map_err(|s| status_error(server, s))
        };
        let response = timeout(settings.connect_timeout, call)
            .await
            .map_err(|_| ClientError::Timeout { server: server.to_string(), after: settings.connect_timeout })??;
        Ok(Connection { requests: Some(tx), stream: response.into_inner(), drained })
    }

    /// The next config update. Cancel-safe: the stream buffers what it decoded.
    pub async fn next_frame(&mut self, server: &ServerAddress) -> Result<Frame, ClientError> {
        match self.stream.message().await {
            Ok(Some(u)) => Ok(Frame {
                id: u.id.map(|id| ConfigId::new(id.namespace, id.name)),
                version: Some(u.version),
                deleted: u.deleted,
                json: u.config_json,
            }),
            Ok(None) => Err(ClientError::Closed { server: server.to_string() }),
            Err(status) => Err(status_error(server, status)),
        }
    }

    /// Queues an acknowledgement (never blocks: acks are tiny and one per config version).
    pub fn ack(&self, ack: Ack) {
        if let Some(tx) = &self.requests {
            let ack = proto::Ack { id: Some(proto_id(&ack.id)), version: ack.version, error: ack.error };
            let _ = tx.send(proto::WatchRequest { msg: Some(proto::watch_request::Msg::Ack(ack)) });
        }
    }

    /// Ends the request stream and waits (at most `write_wait`) until the queued acks went
    /// out on it, so the last acknowledgement is not lost with the connection. The server
    /// keeps its side open (a watch outlives the client's half-close), so that is not waited for.
    pub async fn close(mut self, settings: &WatchSettings) {
        self.requests = None;
        let _ = timeout(settings.write_wait, &mut self.drained).await;
        drop(self.stream);
    }
}

/// The configs in `scope`, as the server stores them (`List`, or `Get` for one Gateway).
pub(super) async fn configs(
    server: &ServerAddress,
    scope: &ConfigScope,
    timeouts: Timeouts,
) -> Result<Vec<StunnerConfig>, ClientError> {
    let mut client = ConfigDiscoveryClient::new(channel(server, timeouts.connect, None).await?);
    let updates = match scope {
        ConfigScope::Gateway { id, node } => {
            let request = proto::GetRequest { id: Some(proto_id(id)), node: node.clone().unwrap_or_default() };
            match call(server, timeouts, client.get(request)).await {
                Ok(update) => vec![update],
                Err(status) if status.code() == tonic::Code::NotFound => {
                    return Err(ClientError::GatewayNotFound { id: id.to_string(), server: server.to_string() });
                }
                Err(status) => return Err(status_error(server, status)),
            }
        }
        _ => {
            let request = proto::ListRequest { scope: Some(proto_scope(scope)) };
            call(server, timeouts, client.list(request)).await.map_err(|s| status_error(server, s))?.configs
        }
    };
    updates
        .into_iter()
        .map(|u| {
            serde_json::from_str(&u.config_json).map_err(|e| ClientError::Decode {
                url: format!("{server} (gRPC)"),
                reason: format!(
                    "config {}: {e}",
                    u.id.map(|i| format!("{}/{}", i.namespace, i.name)).unwrap_or_default()
                ),
            })
        })
        .collect()
}

/// `GetLicense`.
pub(super) async fn license(server: &ServerAddress, timeouts: Timeouts) -> Result<LicenseStatus, ClientError> {
    let mut client = ConfigDiscoveryClient::new(channel(server, timeouts.connect, None).await?);
    let status = call(server, timeouts, client.get_license(proto::GetLicenseRequest {}))
        .await
        .map_err(|s| status_error(server, s))?;
    serde_json::from_str(&status.status_json)
        .map_err(|e| ClientError::Decode { url: format!("{server} (gRPC GetLicense)"), reason: e.to_string() })
}

/// `ListClients`, in the shape of the REST body.
pub(super) async fn clients(server: &ServerAddress, timeouts: Timeouts) -> Result<ClientList, ClientError> {
    let mut client = ConfigDiscoveryClient::new(channel(server, timeouts.connect, None).await?);
    let list = call(server, timeouts, client.list_clients(proto::ListClientsRequest {}))
        .await
        .map_err(|s| status_error(server, s))?;
    Ok(ClientList::from(list))
}

/// A unary call within the request timeout; a timeout reads as DEADLINE_EXCEEDED.
async fn call<T>(
    server: &ServerAddress,
    timeouts: Timeouts,
    f: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Result<T, tonic::Status> {
    match timeout(timeouts.request, f).await {
        Ok(r) => r.map(tonic::Response::into_inner),
        Err(_) => Err(tonic::Status::deadline_exceeded(format!(
            "the config discovery server at {server} did not answer within {:?}",
            timeouts.request
        ))),
    }
}

/// A fresh HTTP/2 connection (one per watch, like one WebSocket per watch), with keepalive
/// PINGs for watches.
async fn channel(
    server: &ServerAddress,
    connect: Duration,
    keepalive: Option<&WatchSettings>,
) -> Result<Channel, ClientError> {
    let uri = format!("http://{}", server.authority());
    let mut endpoint = Endpoint::from_shared(uri.clone())
        .map_err(|e| ClientError::InvalidAddress { address: uri, reason: e.to_string() })?
        .connect_timeout(connect)
        .tcp_nodelay(true)
        .user_agent(concat!("stunner-gateway-client/", env!("CARGO_PKG_VERSION")))
        .expect("a valid user agent");
    if let Some(s) = keepalive {
        endpoint = endpoint
            .http2_keep_alive_interval(s.ping_period)
            .keep_alive_timeout(s.pong_wait)
            .keep_alive_while_idle(true);
    }
    endpoint.connect().await.map_err(|e| transport_error(server, connect, &e))
}

/// A connection failure, worded like the WebSocket transport's: the OS error when there is one.
fn transport_error(server: &ServerAddress, connect: Duration, e: &tonic::transport::Error) -> ClientError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            let copy = match io.raw_os_error() {
                Some(code) => std::io::Error::from_raw_os_error(code),
                None if io.kind() == std::io::ErrorKind::TimedOut => {
                    return ClientError::Timeout { server: server.to_string(), after: connect };
                }
                None => std::io::Error::new(io.kind(), io.to_string()),
            };
            return ClientError::Unreachable { server: server.to_string(), source: copy };
        }
        source = err.source();
    }
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(err) = source {
        reason = format!("{reason}: {err}");
        source = err.source();
    }
    ClientError::Protocol { server: server.to_string(), reason }
}

fn status_error(server: &ServerAddress, status: tonic::Status) -> ClientError {
    if let Some(e) = std::error::Error::source(&status).and_then(|s| s.downcast_ref::<tonic::transport::Error>()) {
        return transport_error(server, Duration::ZERO, e);
    }
    let reason = if status.message().is_empty() {
        format!("gRPC status {:?}", status.code())
    } else {
        format!("gRPC status {:?}: {}", status.code(), status.message())
    };
    ClientError::Protocol { server: server.to_string(), reason }
}

fn proto_id(id: &ConfigId) -> proto::ConfigId {
    proto::ConfigId { namespace: id.namespace.clone(), name: id.name.clone() }
}

fn proto_scope(scope: &ConfigScope) -> proto::Scope {
    use proto::scope::Kind;
    let kind = match scope {
        ConfigScope::All => Kind::All(proto::scope::All {}),
        ConfigScope::Namespace(ns) => Kind::Namespace(ns.clone()),
        ConfigScope::Gateway { id, .. } => Kind::Config(proto_id(id)),
    };
    proto::Scope { kind: Some(kind) }
}
