//! CPU profiles on `--pprof-bind-address`, for `go tool pprof` and as flame graphs.
//!
//! Off by default. A profile shows the daemon's internals, so a bind address that is not
//! loopback draws a warning at start-up. One profile runs at a time (the sampler is
//! process-wide) and its length is bounded.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use pprof::protos::Message;
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Samples per second, as Go's default.
const FREQUENCY: i32 = 100;
const DEFAULT_SECONDS: u64 = 30;
const MAX_SECONDS: u64 = 300;

#[derive(Deserialize)]
struct Params {
    seconds: Option<u64>,
}

/// `/debug/pprof/profile` (protobuf, what `go tool pprof http://ADDR/debug/pprof/profile`
/// reads) and `/debug/pprof/flamegraph` (SVG).
pub fn router() -> Router {
    let busy = Arc::new(Mutex::new(()));
    Router::new()
        .route("/debug/pprof/profile", get(profile))
        .route("/debug/pprof/flamegraph", get(flamegraph))
        .with_state(busy)
}

/// Warns when profiles would be reachable from other hosts.
pub fn check_exposure(addr: SocketAddr) {
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "--pprof-bind-address is not a loopback address: CPU profiles are reachable from the network");
    }
}

async fn profile(State(busy): State<Arc<Mutex<()>>>, Query(p): Query<Params>) -> Response {
    match record(&busy, p.seconds).await {
        Ok(report) => match report.pprof().map(|profile| profile.write_to_bytes()) {
            Ok(Ok(bytes)) => ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response(),
            Ok(Err(e)) => failure(e.to_string()),
            Err(e) => failure(e.to_string()),
        },
        Err(resp) => resp,
    }
}

async fn flamegraph(State(busy): State<Arc<Mutex<()>>>, Query(p): Query<Params>) -> Response {
    match record(&busy, p.seconds).await {
        Ok(report) => {
            let mut svg = Vec::new();
            match report.flamegraph(&mut svg) {
                Ok(()) => ([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response(),
                Err(e) => failure(e.to_string()),
            }
        }
        Err(resp) => resp,
    }
}

/// Samples the whole process for the requested time.
async fn record(busy: &Mutex<()>, seconds: Option<u64>) -> Result<pprof::Report, Response> {
    let seconds = seconds.unwrap_or(DEFAULT_SECONDS);
    if seconds == 0 || seconds > MAX_SECONDS {
        return Err((StatusCode::BAD_REQUEST, format!("seconds must be 1..={MAX_SECONDS}\n")).into_response());
    }
    let Ok(_running) = busy.try_lock() else {
        return Err((StatusCode::CONFLICT, "a profile is already being recorded\n").into_response());
    };
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
        .build()
        .map_err(|e| failure(e.to_string()))?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    guard.report().build().map_err(|e| failure(e.to_string()))
}

fn failure(message: String) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("{message}\n")).into_response()
}
