//! The CDS listener: accepts connections within a limit ([`crate::listener`]), serves each
//! with HTTP/1.1 or, when it opens with the HTTP/2 preface (h2c, prior knowledge), HTTP/2, and
//! shuts down gracefully (watch streams get a Close frame or an UNAVAILABLE status, so clients
//! reconnect elsewhere at once). gRPC requests (`content-type: application/grpc*`) go to
//! [`super::grpc`], all others to the HTTP/WebSocket API: one port, one connection limit for
//! both (docs/grpc.md).
//!
//! The listener owns every task of the CDS: connections, the HTTP/2 streams in them, the
//! WebSocket sessions they were upgraded to and the gRPC API's own all run on one
//! [`TaskTracker`], and shutdown waits for that.

use super::api::{self, CdsState};
use super::clients::ClientTable;
use super::connection::{ConnectionPermit, PeerAddr, Rewind};
use super::fanout::Fanout;
use super::grpc::{self, ConnectionWatches};
use super::host::{LocalNames, check_host};
use super::opening::Opening;
use super::store::ConfigStore;
use crate::listener::{Acceptor, until_shutdown};
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Kernel send buffer per connection: many configs' worth, far below Linux's autotuning limit.
const SEND_BUFFER_BYTES: usize = 256 * 1024;

/// How often the `stale_clients` gauge is brought up to date.
const STALE_SAMPLE: Duration = Duration::from_secs(5);

/// Settings of the CDS listener.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// Most connections open at once (plain requests and watch streams together).
    pub max_connections: usize,
    /// A client must send its request headers within this time.
    pub header_read_timeout: Duration,
    /// How long shutdown waits for sessions to close before giving up on them.
    pub shutdown_grace: Duration,
    pub session: super::session::Settings,
    /// The gRPC API's limits (HTTP/2 streams, keepalive, request size).
    pub grpc: grpc::Settings,
    /// Who may read which configs, on every transport (`--cds-authorization`).
    pub authorizer: Arc<super::authz::Authorizer>,
    /// From when connections are answered; those accepted before wait, unread.
    pub opening: Opening,
    /// The names besides loopback and `localhost` a request over loopback may name in its
    /// `Host` ([`super::host`]: the DNS rebinding guard).
    pub local_names: LocalNames,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            max_connections: 16384,
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            session: Default::default(),
            grpc: Default::default(),
            authorizer: Arc::new(super::authz::Authorizer::unchecked()),
            opening: Opening::now(),
            local_names: LocalNames::default(),
        }
    }
}

/// Routes the daemon adds on the CDS port (its status endpoint, the console), built over the
/// listener's own state: its client table and authorizer.
pub trait ExtraRoutes {
    fn routes(self, cds: &Arc<CdsState>) -> axum::Router;
}

impl ExtraRoutes for axum::Router {
    fn routes(self, _: &Arc<CdsState>) -> axum::Router {
        self
    }
}

impl<A: ExtraRoutes, B: ExtraRoutes> ExtraRoutes for (A, B) {
    fn routes(self, cds: &Arc<CdsState>) -> axum::Router {
        self.0.routes(cds).merge(self.1.routes(cds))
    }
}

/// Serves the CDS API from `store` on `listener` until `shutdown` is cancelled, then closes
/// every stream and returns once they are gone (or the grace period is over). `extra` adds
/// the daemon's own routes on the same port (its status endpoint, the console). Connections are accepted
/// from the start and answered from `settings.opening` on.
pub async fn serve(
    listener: TcpListener,
    store: Arc<ConfigStore>,
    settings: ServerSettings,
    extra: impl ExtraRoutes,
    shutdown: CancellationToken,
) {
    let tracker = TaskTracker::new();
    let (router, grpc) = routes(&store, &settings, extra, &shutdown, &tracker).await;
    let rejected = Some(store.metrics.rejected_connections.clone());
    let mut acceptor = match Acceptor::new(listener, "config discovery", settings.max_connections, rejected) {
        Ok(acceptor) => acceptor,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve config discovery");
            return;
        }
    };
    loop {
        let (stream, peer, slot) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = acceptor.accept() => accepted,
        };
        let _ = stream.set_nodelay(true);
        // Bounds the kernel memory a client that stops reading can pin (Linux would otherwise
        // let the send buffer grow to tcp_wmem's maximum, megabytes per connection).
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER_BYTES);
        let connection = Connection {
            permit: ConnectionPermit::new(slot),
            peer: PeerAddr(peer),
            watches: ConnectionWatches::new(settings.grpc.max_watches_per_connection),
        };
        let service = dispatch(connection, router.clone(), grpc.clone(), settings.local_names.clone());
        let (settings, shutdown, streams) = (settings.clone(), shutdown.clone(), TrackedExecutor(tracker.clone()));
        tracker.spawn(async move {
            // Held, not read: the header read timeout starts once the CDS is open.
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                open = settings.opening.wait() => if !open { return },
            }
            serve_connection(stream, service, settings, shutdown, streams).await
        });
    }
    drop(acceptor);
    tracker.close();
    // Every stream ends on the same token (a Close frame, an UNAVAILABLE status): give them time.
    if tokio::time::timeout(settings.shutdown_grace, tracker.wait()).await.is_err() {
        tracing::warn!("CDS shutdown grace period over with watch streams still open");
    }
}

/// The HTTP/WebSocket router (with `extra` merged in) and the gRPC routes over one store and
/// one client table, their tasks on `tracker`.
async fn routes(
    store: &Arc<ConfigStore>,
    settings: &ServerSettings,
    extra: impl ExtraRoutes,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> (axum::Router, tonic::service::Routes) {
    let clients = Arc::new(ClientTable::new(store.metrics.clone()));
    tracker.spawn(clients.clone().sample_stale(store.clone(), STALE_SAMPLE, shutdown.clone()));
    let fanout = match Fanout::start(store, settings.session.clone(), shutdown.clone(), tracker) {
        Ok(fanout) => Some(Arc::new(fanout)),
        Err(error) => {
            tracing::warn!(%error, "CDS fan-out unavailable: each WebSocket watch runs as a task of its own");
            None
        }
    };
    let state = Arc::new(CdsState {
        store: store.clone(),
        session: settings.session.clone(),
        fanout,
        shutdown: shutdown.clone(),
        clients: clients.clone(),
        authorizer: settings.authorizer.clone(),
        tasks: tracker.clone(),
    });
    let router = api::router(state.clone()).merge(extra.routes(&state));
    let grpc = grpc::routes(
        store.clone(),
        store.metrics.clone(),
        clients,
        settings.authorizer.clone(),
        settings.grpc.clone(),
        shutdown.clone(),
        tracker.clone(),
    )
    .await;
    (router, grpc)
}

/// What every request on one connection carries, for the handlers' extractors.
struct Connection {
    permit: ConnectionPermit,
    peer: PeerAddr,
    watches: ConnectionWatches,
}

/// The service of one connection: gRPC requests (`content-type: application/grpc*`) to the
/// gRPC API, all others to the HTTP/WebSocket router, each with the connection's extensions;
/// a request over loopback that names a foreign host to neither ([`super::host::check_host`]).
fn dispatch(
    connection: Connection,
    router: axum::Router,
    grpc: tonic::service::Routes,
    local_names: LocalNames,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    let connection = Arc::new(connection);
    hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(connection.permit.clone());
        req.extensions_mut().insert(connection.peer);
        req.extensions_mut().insert(connection.watches.clone());
        let is_grpc = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        let peer = connection.peer.0;
        let misdirected = check_host(Some(peer), req.uri(), req.headers(), &local_names).err();
        let router = router.clone();
        let grpc = grpc.clone();
        async move {
            if let Some(misdirected) = misdirected {
                tracing::info!(%peer, reason = %misdirected, "CDS request refused");
                return Ok(if is_grpc { misdirected.into_grpc_response() } else { misdirected.into_response() });
            }
            if is_grpc {
                grpc.oneshot(req).await.map(|resp| resp.map(axum::body::Body::new))
            } else {
                router.oneshot(req.map(axum::body::Body::new)).await
            }
        }
    })
}

/// Serves one accepted connection with HTTP/2 when it opens with the preface, else HTTP/1.1
/// (upgrades allowed), until it ends or `shutdown` asks it to close gracefully.
async fn serve_connection<S>(
    mut stream: TcpStream,
    service: S,
    settings: ServerSettings,
    shutdown: CancellationToken,
    streams: TrackedExecutor,
) where
    S: hyper::service::Service<
            Request<Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    // The first bytes tell HTTP/2 (gRPC) from HTTP/1.1; they must come in time.
    let prefix = match tokio::time::timeout(settings.header_read_timeout, sniff(&mut stream)).await {
        Ok(Ok(prefix)) => prefix,
        Ok(Err(_)) | Err(_) => return,
    };
    let is_h2 = prefix == H2_PREFACE;
    let io = TokioIo::new(Rewind::new(prefix, stream));
    if is_h2 {
        let grpc = &settings.grpc;
        let mut http = hyper::server::conn::http2::Builder::new(streams);
        http.timer(TokioTimer::new())
            .max_concurrent_streams(grpc.max_concurrent_streams)
            .keep_alive_interval(grpc.keepalive_interval)
            .keep_alive_timeout(grpc.keepalive_timeout)
            .max_header_list_size(16 * 1024)
            .initial_stream_window_size(H2_RECEIVE_WINDOW)
            .initial_connection_window_size(4 * H2_RECEIVE_WINDOW);
        until_shutdown(http.serve_connection(io, service), &shutdown, |c| c.graceful_shutdown()).await;
    } else {
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(settings.header_read_timeout).max_buf_size(16 * 1024);
        until_shutdown(http.serve_connection(io, service).with_upgrades(), &shutdown, |c| c.graceful_shutdown()).await;
    }
}

/// hyper's executor for the tasks of an HTTP/2 connection (one per stream): they run on the
/// listener's tracker, so shutdown waits for each gRPC call to end.
#[derive(Clone)]
struct TrackedExecutor(TaskTracker);

impl<F> hyper::rt::Executor<F> for TrackedExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, task: F) {
        self.0.spawn(task);
    }
}

/// What an HTTP/2 connection with prior knowledge (h2c, how gRPC clients connect) opens with.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/2 flow-control window for what clients send: requests are small (acks, one start).
const H2_RECEIVE_WINDOW: u32 = 64 * 1024;

/// Reads the connection's first bytes: the whole HTTP/2 preface, or as much of it as
/// matches plus the first byte that does not (or less at end of stream).
async fn sniff(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut prefix = Vec::with_capacity(H2_PREFACE.len());
    let mut chunk = [0u8; H2_PREFACE.len()];
    // At most one pass per preface byte: each read returns at least one byte or ends.
    while prefix.len() < H2_PREFACE.len() {
        let n = stream.read(&mut chunk[..H2_PREFACE.len() - prefix.len()]).await?;
        prefix.extend_from_slice(&chunk[..n]);
        if n == 0 || !H2_PREFACE.starts_with(&prefix) {
            break;
        }
    }
    Ok(prefix)
}
