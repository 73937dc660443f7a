//! The credential API over HTTP: `GET /` and `GET /ice` answered from the CDS store, routed
//! as upstream's service routes them (another path: 404 `404 page not found`; another
//! method: 405 with no body). What a client controls is bounded: the query's length here, the
//! request head's size, its read time and the number of connections where it is served
//! (`admin::serve_router_with_limit`).

use super::answer::{self, Answer, Body, Context};
use super::metrics::{self, AuthMetrics};
use super::params::{self, Endpoint};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::SystemTime;
use stunner_gateway_cds::{ConfigStore, Scope};

/// The longest query answered (a 414 past it): every parameter of a real request fits many
/// times over.
pub const MAX_QUERY_BYTES: usize = 4096;

/// Most connections open at once: application servers ask on every session setup, and
/// keep their connections alive.
pub const MAX_CONNECTIONS: usize = 1024;

/// What the API answers from.
pub struct AuthApi {
    pub store: Arc<ConfigStore>,
    pub metrics: AuthMetrics,
    /// The service's public-address override (`STUNNER_PUBLIC_ADDR`), for requests without
    /// `public-addr`.
    pub public_addr: Option<String>,
}

pub fn router(api: Arc<AuthApi>) -> Router {
    Router::new().fallback(handle).with_state(api)
}

async fn handle(State(api): State<Arc<AuthApi>>, method: Method, uri: Uri) -> Response {
    let (label, endpoint) = match uri.path() {
        "/" => (metrics::Endpoint::turn, Some(Endpoint::Turn)),
        "/ice" => (metrics::Endpoint::ice, Some(Endpoint::Ice)),
        _ => (metrics::Endpoint::other, None),
    };
    let answer = match endpoint {
        None => text(404, "404 page not found"),
        Some(_) if method != Method::GET => Answer { status: 405, body: Body::Text(String::new()) },
        Some(_) if uri.query().is_some_and(|q| q.len() > MAX_QUERY_BYTES) => {
            text(414, format!("query longer than {MAX_QUERY_BYTES} bytes"))
        }
        Some(endpoint) => api.answer(endpoint, uri.query().unwrap_or_default()),
    };
    api.metrics.count(label, answer.status);
    tracing::debug!(path = uri.path(), status = answer.status, "credential API request");
    response(answer)
}

impl AuthApi {
    fn answer(&self, endpoint: Endpoint, query: &str) -> Answer {
        let params = match params::bind(endpoint, query) {
            Ok(params) => params,
            Err(refused) => return text(400, refused.to_string()),
        };
        let snapshots = self.store.list(&Scope::All);
        let configs: Vec<_> = snapshots.iter().map(|s| &s.config).collect();
        let cx = Context { public_addr: self.public_addr.as_deref(), now: SystemTime::now() };
        answer::answer(endpoint, &params, &configs, cx)
    }
}

fn text(status: u16, text: impl Into<String>) -> Answer {
    Answer { status, body: Body::Text(text.into()) }
}

/// The answer with Go's headers: `http.Error`'s for text (a 405 has no body at all), the
/// service's for JSON.
fn response(answer: Answer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match answer.body {
        Body::Json(bytes) => {
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=UTF-8"))], bytes)
                .into_response()
        }
        Body::Text(t) if t.is_empty() => status.into_response(),
        Body::Text(t) => (
            status,
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8")),
                (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            ],
            t + "\n",
        )
            .into_response(),
    }
}
