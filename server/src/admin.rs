//! The daemon's own HTTP endpoints: Prometheus metrics and the health probes.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
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
pub struct Readiness(watch::Sender<Phase>);

impl Default for Readiness {
    fn default() -> Self {
        Readiness(watch::Sender::new(Phase::Starting))
    }
}

impl Readiness {
    /// Marks the first complete render; no effect once stopping.
    pub fn set_ready(&self) {
        self.0.send_if_modified(|p| *p == Phase::Starting && std::mem::replace(p, Phase::Ready) != Phase::Ready);
    }

    pub fn set_stopping(&self) {
        self.0.send_replace(Phase::Stopping);
    }

    pub fn is_ready(&self) -> bool {
        *self.0.borrow() == Phase::Ready
    }

    /// Waits for the first complete render.
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|p| *p != Phase::Starting).await;
    }

    fn explain(&self) -> &'static str {
        match *self.0.borrow() {
            Phase::Starting => "waiting for the first complete sync",
            Phase::Ready => "ok",
            Phase::Stopping => "shutting down",
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

/// Binds `addr` (falling back from `[::]` to `0.0.0.0` on hosts without IPv6).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    match TcpListener::bind(addr).await {
        Err(e) if addr.ip().is_unspecified() && addr.is_ipv6() => {
            let v4 = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), addr.port());
            TcpListener::bind(v4).await.map_err(|_| e)
        }
        other => other,
    }
}

/// Serves a small router until `shutdown`.
pub async fn serve_router(listener: TcpListener, router: Router, shutdown: CancellationToken) {
    let result = axum::serve(listener, router).with_graceful_shutdown(async move { shutdown.cancelled().await }).await;
    if let Err(e) = result {
        tracing::error!(error = %e, "admin endpoint failed");
    }
}
