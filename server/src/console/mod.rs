//! The console: a read-only web UI on the CDS port under `/ui/` (docs/console.md). Every page
//! is rendered on the server ([`pages`], with the escaping builder [`html`]) from one reading
//! of the operator's state ([`view`]): the CDS store, the status board and the client table.
//! The embedded script only follows `/ui/events` ([`events`]) and swaps in a fresh `<main>`.
//! In a cluster a Gateway's page also shows its dataplanes' traffic ([`traffic`]), read from
//! their metrics endpoints ([`scrape`], [`exposition`]).
//! Everything is in the binary: no CDN, works offline.
//!
//! Pages hand out what the config lists do (credentials, masked unless `?reveal=1`, by
//! [`mask`]), so they take the same authorization: loopback, the operator's pods, or a
//! reviewed token. Like every request on the CDS port they pass its DNS rebinding guard first
//! (`stunner_gateway_cds::host`); `?reveal=1` and the event stream also refuse a cross-site
//! request (docs/security.md).

pub mod charts;
pub mod events;
pub mod exposition;
pub mod html;
pub mod mask;
pub mod pages;
pub mod scrape;
pub mod traffic;
pub mod view;

use crate::status::StatusBoard;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::query::Query;
use stunner_gateway_cds::api::{self, Caller, CdsState};
use stunner_gateway_cds::host::check_same_origin;
use stunner_gateway_cds::serve::ExtraRoutes;
use stunner_gateway_cds::store::Scope;

/// What the console reads beyond the CDS's own state.
pub struct Console {
    pub statuses: Arc<StatusBoard>,
    /// The histograms `/metrics` serves that the overview charts.
    pub charts: charts::Charts,
    /// Reads the dataplanes' metrics endpoints for the Gateway pages: in a cluster only.
    pub dataplane_metrics: Option<scrape::Scraper>,
}

/// The console's handlers' state: the CDS's and the console's own.
struct Shared {
    cds: Arc<CdsState>,
    console: Console,
    streams: events::Streams,
}

impl ExtraRoutes for Console {
    fn routes(self, cds: &Arc<CdsState>) -> Router {
        let shared = Arc::new(Shared { cds: cds.clone(), console: self, streams: events::Streams::default() });
        Router::new()
            .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
            .route("/ui/", get(overview))
            .route("/ui/clients", get(clients))
            .route("/ui/gateways/{namespace}/{name}", get(gateway))
            .route("/ui/events", get(events::serve))
            .route("/ui/assets/console.css", get(|| async { asset("text/css; charset=utf-8", CSS) }))
            .route("/ui/assets/console.js", get(|| async { asset("text/javascript; charset=utf-8", JS) }))
            .with_state(shared)
    }
}

const CSS: &str = include_str!("console.css");
const JS: &str = include_str!("console.js");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

impl Shared {
    /// Lets in whom the config lists let in; else the CDS's own 403.
    async fn authorize(&self, caller: Caller) -> Result<(), Response> {
        api::authorize(&self.cds, &Scope::All, caller).await.map(drop)
    }

    fn state(&self) -> view::State {
        view::State {
            configs: self.cds.store.list(&Scope::All),
            statuses: self.console.statuses.list(),
            clients: self.cds.clients.list(),
        }
    }
}

async fn overview(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    if let Err(refused) = shared.authorize(Caller::of(&req)).await {
        return refused;
    }
    html(StatusCode::OK, pages::overview(&shared.state(), &shared.console.charts))
}

async fn clients(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    if let Err(refused) = shared.authorize(Caller::of(&req)).await {
        return refused;
    }
    html(StatusCode::OK, pages::clients(&shared.cds.clients.list()))
}

async fn gateway(
    State(shared): State<Arc<Shared>>,
    Path((namespace, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    let reveal = Query::parse(req.uri().query().unwrap_or("")).values("reveal").any(|v| matches!(v, "1" | "true"));
    // Credentials in the clear only to the console's own pages or a typed URL.
    if reveal && let Err(cross_site) = check_same_origin(req.uri(), req.headers()) {
        return cross_site.into_response();
    }
    if let Err(refused) = shared.authorize(Caller::of(&req)).await {
        return refused;
    }
    let id = ConfigId::new(namespace, name);
    let state = shared.state();
    let traffic = traffic::read(shared.console.dataplane_metrics.as_ref(), &state, &id).await;
    match pages::gateway(&state, &id, reveal, &traffic) {
        Some(page) => html(StatusCode::OK, page),
        None => api::text_error(StatusCode::NOT_FOUND, &format!("no Gateway {id}")),
    }
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing but its own assets; no frames, no other origins.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}
