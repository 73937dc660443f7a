//! The daemon's own HTTP endpoints: Prometheus metrics and the health probes.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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

/// Serves a small router until `shutdown`.
pub async fn serve_router(listener: TcpListener, router: Router, shutdown: CancellationToken) {
    let result = axum::serve(listener, router).with_graceful_shutdown(async move { shutdown.cancelled().await }).await;
    if let Err(e) = result {
        tracing::error!(error = %e, "admin endpoint failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
}
