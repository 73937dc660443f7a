//! The daemon's own HTTP endpoints: Prometheus metrics and the health probes.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway_cds::host::{LocalNames, check_host};
use stunner_gateway_cds::listener::{Acceptor, until_shutdown};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

/// Where the daemon is in its life, as `/readyz` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Until every source has delivered its first complete state the CDS serves nothing and
    /// `/readyz` fails, so no dataplane sees a half-built config.
    Starting,
    Ready,
    /// Shutting down: `/readyz` fails first, so the Service stops sending clients here
    /// while the CDS still closes its streams in order.
    Stopping,
}

#[derive(Clone)]
pub struct Readiness {
    phase: watch::Sender<Phase>,
    /// Why a source cannot follow its input, while it cannot (standalone: the manifest
    /// directory is gone): `/readyz` fails and says so, while the last configs stay served.
    source_problem: Arc<Mutex<Option<String>>>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness { phase: watch::Sender::new(Phase::Starting), source_problem: Arc::default() }
    }
}

impl Readiness {
    /// Marks the first complete render; no effect once stopping.
    pub fn set_ready(&self) {
        self.phase.send_if_modified(|p| *p == Phase::Starting && std::mem::replace(p, Phase::Ready) != Phase::Ready);
    }

    pub fn set_stopping(&self) {
        self.phase.send_replace(Phase::Stopping);
    }

    /// Records (`Some`) or clears (`None`) a source's problem.
    pub fn set_source_problem(&self, problem: Option<String>) {
        *self.source_problem.lock().expect("readiness lock") = problem;
    }

    pub fn is_ready(&self) -> bool {
        *self.phase.borrow() == Phase::Ready && self.source_problem.lock().expect("readiness lock").is_none()
    }

    /// Waits for the first complete render.
    pub async fn wait(&self) {
        let mut rx = self.phase.subscribe();
        let _ = rx.wait_for(|p| *p != Phase::Starting).await;
    }

    fn explain(&self) -> String {
        let phase = *self.phase.borrow();
        match (phase, self.source_problem.lock().expect("readiness lock").as_ref()) {
            (Phase::Starting, _) => "waiting for the first complete sync".into(),
            (Phase::Ready, Some(problem)) => problem.clone(),
            (Phase::Ready, None) => "ok".into(),
            (Phase::Stopping, _) => "shutting down".into(),
        }
    }
}

pub fn metrics_router(registry: Arc<Registry>) -> Router {
    Router::new().route("/metrics", get(metrics)).with_state(registry)
}

async fn metrics(State(registry): State<Arc<Registry>>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

pub fn health_router(readiness: Readiness) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(r): State<Readiness>| async move {
                let status = if r.is_ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                (status, r.explain())
            }),
        )
        .with_state(readiness)
}

/// Connections the kernel queues for `accept` per listener (capped by `net.core.somaxconn`).
/// A fleet of dataplanes reconnecting at once, after an operator restart, must fit: a
/// connection that overflows the queue waits for the kernel's 1 s SYN retransmit. The
/// standard library's 128 did overflow with a few hundred watchers connecting together.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` (falling back from `[::]` to `0.0.0.0` on hosts without IPv6).
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    match listen(addr) {
        Err(e) if addr.ip().is_unspecified() && addr.is_ipv6() => {
            let v4 = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port());
            listen(v4).map_err(|_| e)
        }
        other => other,
    }
}

fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv6() { TcpSocket::new_v6()? } else { TcpSocket::new_v4()? };
    // As the standard library does: a restarted daemon can bind while old connections linger.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Most connections open at once on each admin port: Prometheus, the kubelet's probes and a
/// profiler need a handful. The admin ports share the process's file descriptors with the CDS,
/// so what they can hold must be small.
pub const MAX_CONNECTIONS: usize = 64;

/// How long shutdown waits for admin requests in flight (a CPU profile runs for its length).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How a port is served: what it is called in messages, its header read timeout, and the
/// names a request over loopback may carry in `Host` besides loopback and `localhost`.
#[derive(Debug, Clone)]
pub struct Serving {
    /// What the port serves, in messages.
    pub name: &'static str,
    /// A client that does not send its request headers in this time is disconnected.
    pub header_read_timeout: Duration,
    /// The DNS rebinding guard's names ([`stunner_gateway_cds::host`]).
    pub local_names: LocalNames,
}

/// Serves a small router on HTTP/1.1 until `shutdown`, with the CDS's accept rules
/// ([`stunner_gateway_cds::listener`]: at most [`MAX_CONNECTIONS`], a 503 past them or out of file
/// descriptors), its header read timeout, and its DNS rebinding guard: a request over
/// loopback naming a foreign `Host` is answered 421 before the router sees it. Every admin
/// port takes the guard: pprof, documented to stay on loopback, is what a rebinding page
/// would reach, and metrics name the Gateways; the probes and Prometheus never come over
/// loopback, so it costs them nothing.
pub async fn serve_router(listener: TcpListener, router: Router, serving: Serving, shutdown: CancellationToken) {
    serve_router_with_limit(listener, router, serving, MAX_CONNECTIONS, shutdown).await
}

/// [`serve_router`] with at most `max_connections` open at once.
pub async fn serve_router_with_limit(
    listener: TcpListener,
    router: Router,
    serving: Serving,
    max_connections: usize,
    shutdown: CancellationToken,
) {
    let Serving { name, header_read_timeout, local_names } = serving;
    let mut acceptor = match Acceptor::new(listener, name, max_connections, None) {
        Ok(acceptor) => acceptor,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve the {name} endpoint");
            return;
        }
    };
    let tracker = TaskTracker::new();
    loop {
        let (stream, peer, slot) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = acceptor.accept() => accepted,
        };
        let (router, local_names) = (router.clone(), local_names.clone());
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let misdirected = check_host(Some(peer), req.uri(), req.headers(), &local_names).err();
                let router = router.clone();
                async move {
                    match misdirected {
                        Some(misdirected) => {
                            tracing::info!(%peer, reason = %misdirected, "{name} request refused");
                            Ok(misdirected.into_response())
                        }
                        None => router.oneshot(req.map(axum::body::Body::new)).await,
                    }
                }
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            // Header names as Go's servers write them (`Content-Type`): clients that compare them
            // byte for byte see no change from upstream's endpoints.
            http.timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout)
                .max_buf_size(16 * 1024)
                .title_case_headers(true);
            let conn = http.serve_connection(TokioIo::new(stream), service);
            until_shutdown(conn, &shutdown, |c| c.graceful_shutdown()).await;
        });
    }
    drop(acceptor);
    tracker.close();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    /// More connections than the standard library's backlog, none accepted yet: every
    /// handshake completes, none waits for a SYN retransmit (loopback handshakes complete in
    /// the kernel; one that overflowed the queue would take at least a second).
    #[tokio::test]
    async fn a_reconnecting_fleet_fits_the_accept_queue() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut conns = Vec::new();
        for i in 0..600 {
            let conn = tokio::time::timeout(Duration::from_millis(900), tokio::net::TcpStream::connect(addr)).await;
            conns.push(conn.unwrap_or_else(|_| panic!("connection {i} overflowed the accept queue")).unwrap());
        }
    }

    /// The health router on an ephemeral loopback port with `header_read_timeout`.
    async fn serve_health(header_read_timeout: Duration) -> (SocketAddr, CancellationToken) {
        let listener = bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = health_router(Readiness::default());
        let serving = Serving { name: "health probe", header_read_timeout, local_names: LocalNames::default() };
        tokio::spawn(serve_router(listener, router, serving, shutdown.clone()));
        (addr, shutdown)
    }

    /// What the server sends on `stream` until it closes (bounded: panics after 10 s).
    async fn read_until_closed(stream: &mut TcpStream) -> String {
        let mut buf = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf))
            .await
            .expect("the server closed the connection")
            .unwrap();
        String::from_utf8_lossy(&buf).into_owned()
    }

    #[tokio::test]
    async fn a_half_sent_request_is_disconnected_after_the_header_timeout() {
        let (addr, _shutdown) = serve_health(Duration::from_millis(200)).await;
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n").await.unwrap();
        assert!(!read_until_closed(&mut stream).await.contains("200 OK"));
    }

    #[tokio::test]
    async fn connections_past_the_cap_get_a_503_with_the_limit() {
        let (addr, _shutdown) = serve_health(Duration::from_secs(60)).await;
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let get = async || {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await.unwrap();
            read_until_closed(&mut stream).await
        };
        let refused = get().await;
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(refused.contains(&format!("too many health probe connections (limit {MAX_CONNECTIONS})")), "{refused}");
        // A slot comes back when a connection closes.
        idle.pop();
        for _ in 0..100 {
            if get().await.starts_with("HTTP/1.1 200") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the slot of a closed connection never came back");
    }
}
