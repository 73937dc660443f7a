//! The CDS listener: accepts connections within a limit, serves HTTP/1.1 on each, and shuts
//! down gracefully (watch streams get a Close frame, so clients reconnect elsewhere at once).

use super::api::{self, CdsState};
use super::session::ConnectionPermit;
use super::store::ConfigStore;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Kernel send buffer per connection: many configs' worth, far below Linux's autotuning limit.
const SEND_BUFFER_BYTES: usize = 256 * 1024;

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
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            max_connections: 16384,
            header_read_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            session: Default::default(),
        }
    }
}

/// Serves the CDS API from `store` on `listener` until `shutdown` is cancelled, then closes
/// every stream and returns once they are gone (or the grace period is over). `extra` adds
/// the daemon's own routes on the same port (its status endpoint).
pub async fn serve(
    listener: TcpListener,
    store: Arc<ConfigStore>,
    settings: ServerSettings,
    extra: axum::Router,
    shutdown: CancellationToken,
) {
    let state =
        Arc::new(CdsState { store: store.clone(), session: settings.session.clone(), shutdown: shutdown.clone() });
    let router = api::router(state).merge(extra);
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let tracker = TaskTracker::new();
    loop {
        let (stream, _peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    tracing::warn!(error = %e, "CDS accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        // Bounds the kernel memory a client that stops reading can pin (Linux would otherwise
        // let the send buffer grow to tcp_wmem's maximum, megabytes per connection).
        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER_BYTES);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            store.metrics.rejected_connections.inc();
            tracker.spawn(refuse(stream, settings.max_connections));
            continue;
        };
        let permit = ConnectionPermit::new(slot);
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(permit.clone());
            router.clone().oneshot(req.map(axum::body::Body::new))
        });
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new()).header_read_timeout(settings.header_read_timeout).max_buf_size(16 * 1024);
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let conn = http.serve_connection(TokioIo::new(stream), service).with_upgrades();
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    tracker.close();
    // Upgraded sessions are not tracked by hyper; they end on the same token. Give them time.
    if tokio::time::timeout(settings.shutdown_grace, wait_for_sessions(&store)).await.is_err() {
        tracing::warn!("CDS shutdown grace period over with watch streams still open");
    }
    let _ = tokio::time::timeout(settings.shutdown_grace, tracker.wait()).await;
}

async fn wait_for_sessions(store: &ConfigStore) {
    while store.metrics.clients.get_or_create(&super::metrics::WEBSOCKET).get() > 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Tells a client past the connection limit why, then closes.
async fn refuse(mut stream: TcpStream, limit: usize) {
    let body = format!("{{\"code\":503,\"message\":\"too many config discovery connections (limit {limit})\"}}\n");
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(resp.as_bytes())).await;
    let _ = stream.shutdown().await;
}
