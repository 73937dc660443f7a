//! The HTTP API of cds-protocol.md §2: plain GETs and, with `watch=true`, WebSocket watches.

use super::authz::{Authorizer, Identity, Refusal, bearer};
use super::clients::{ClientInfo, ClientTable};
use super::connection::{ConnectionPermit, PeerAddr, Rewind};
use super::fanout::{Fanout, Joining};
use super::handshake;
use super::metrics::Transport;
use super::session::{self, Session};
use super::store::{ConfigStore, Frame, Scope};
use super::watch::{Held, Watch};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::{BufMut, Bytes, BytesMut};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::Arc;
use stunner_gateway::cds::{ApiError, ClientList, ConfigId};
use stunner_gateway::config::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What the handlers share.
pub struct CdsState {
    pub store: Arc<ConfigStore>,
    pub session: session::Settings,
    /// Where upgraded TCP watch connections are served (without it, or for any other byte
    /// stream, each watch is a session task of its own).
    pub fanout: Option<Arc<Fanout>>,
    /// Cancelled when the server shuts down: watch sessions then close with a Close frame.
    pub shutdown: CancellationToken,
    /// Every connected watch client, of either transport.
    pub clients: Arc<ClientTable>,
    pub authorizer: Arc<Authorizer>,
    /// The listener's tasks: watch sessions run on it, so shutdown waits for them.
    pub tasks: TaskTracker,
}

pub fn router(state: Arc<CdsState>) -> Router {
    Router::new()
        .route("/api/v1/configs", get(list_all))
        .route("/api/v1/configs/{namespace}", get(list_namespace))
        .route("/api/v1/configs/{namespace}/{name}", get(get_one))
        .route("/api/v1/license", get(license))
        .route("/api/v1/clients", get(clients))
        .fallback(|| async { text_error(StatusCode::NOT_FOUND, "404 page not found") })
        .with_state(state)
}

async fn list_all(State(state): State<Arc<CdsState>>, req: Request) -> Response {
    serve_scope(state, Scope::All, req).await
}

async fn list_namespace(State(state): State<Arc<CdsState>>, Path(ns): Path<String>, req: Request) -> Response {
    serve_scope(state, Scope::Namespace(ns), req).await
}

async fn get_one(
    State(state): State<Arc<CdsState>>,
    Path((ns, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    serve_scope(state, Scope::Config(ConfigId::new(ns, name)), req).await
}

async fn license(State(state): State<Arc<CdsState>>) -> Response {
    json_response(StatusCode::OK, Bytes::from(json::to_vec_line(&state.store.license())))
}

/// The client table (not in upstream): the proto JSON mapping of `ListClientsResponse`.
async fn clients(State(state): State<Arc<CdsState>>, req: Request) -> Response {
    if let Err(refused) = authorize(&state, &Scope::All, Caller::of(&req)).await {
        return refused;
    }
    json_response(StatusCode::OK, Bytes::from(json::to_vec_line(&ClientList::from(state.clients.list()))))
}

async fn serve_scope(state: Arc<CdsState>, scope: Scope, req: Request) -> Response {
    // The node parameter exists on the single-config route only; list routes ignore it.
    let with_node = matches!(scope, Scope::Config(_));
    let Query { watch, node } = match Query::parse(req.uri().query().unwrap_or(""), with_node) {
        Ok(q) => q,
        Err(message) => return text_error(StatusCode::BAD_REQUEST, &message),
    };
    let identity = match authorize(&state, &scope, Caller::of(&req)).await {
        Ok(identity) => identity,
        Err(refused) => return refused,
    };
    if watch {
        return upgrade(state, scope, node, identity, req).await;
    }
    let store = &state.store;
    match &scope {
        Scope::Config(id) => match store.get(id) {
            Some(s) => json_response(StatusCode::OK, with_newline(&s.frame_for(node.as_deref(), store.nodes()))),
            None => not_found(id),
        },
        scope => json_response(StatusCode::OK, config_list(store.list(scope).iter().map(|s| &s.json))),
    }
}

/// Who sent a request: its connection's remote address and its bearer token, if any. Taken
/// out of the request before any await: a request (its body) is not `Sync`, so no reference
/// to it may live across one.
pub struct Caller {
    peer: Option<SocketAddr>,
    token: Option<String>,
}

impl Caller {
    pub fn of(req: &Request) -> Self {
        let token = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(bearer);
        Caller { peer: req.extensions().get::<PeerAddr>().map(|p| p.0), token: token.map(str::to_owned) }
    }
}

/// Who the client is, or the refusal it gets, with an [`ApiError`] saying why: 401 and
/// `WWW-Authenticate: Bearer` for an invalid token, 403 for a client that may not read the
/// scope, 503 and `Retry-After` when its token could not be reviewed in time.
pub async fn authorize(state: &CdsState, scope: &Scope, caller: Caller) -> Result<Identity, Response> {
    let Caller { peer, token } = caller;
    state.authorizer.authorize(peer, token.as_deref(), scope).await.map_err(|refusal| {
        state.store.metrics.refused(super::metrics::Api::http, refusal.reason());
        tracing::info!(peer = ?peer, scope = %super::clients::scope_string(scope), reason = %refusal, "CDS request refused");
        refusal_response(&refusal)
    })
}

/// How long a client told 503 waits before it asks again: the token review's own time limit.
const RETRY_AFTER_SECONDS: u64 = 5;

/// The HTTP answer to a refusal (the console's too).
fn refusal_response(refusal: &Refusal) -> Response {
    let status = match refusal {
        Refusal::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
        Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
        Refusal::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = ApiError { code: i32::from(status.as_u16()), message: refusal.to_string() };
    let mut resp = json_response(status, Bytes::from(json::to_vec_line(&body)));
    let extra = match refusal {
        Refusal::Unauthenticated(_) => Some((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))),
        Refusal::Unavailable(_) => Some((header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS))),
        Refusal::Forbidden(_) => None,
    };
    if let Some((name, value)) = extra {
        resp.headers_mut().insert(name, value);
    }
    resp
}

async fn upgrade(
    state: Arc<CdsState>,
    scope: Scope,
    node: Option<String>,
    identity: Identity,
    req: Request,
) -> Response {
    let (mut parts, _) = req.into_parts();
    if let Err(refusal) = handshake::check(&parts.headers) {
        let mut resp = text_error(
            refusal.status,
            &format!("{}\n{}", refusal.status.canonical_reason().unwrap_or(""), refusal.message),
        );
        if refusal.status == StatusCode::UPGRADE_REQUIRED {
            resp.headers_mut().insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        }
        resp.headers_mut().insert("sec-websocket-version", HeaderValue::from_static("13"));
        return resp;
    }
    // Present on HTTP/1.1 connections only (hyper's upgrade machinery).
    let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return text_error(StatusCode::UPGRADE_REQUIRED, "WebSocket watches need an HTTP/1.1 connection");
    };
    let permit = parts.extensions.get::<ConnectionPermit>().cloned();
    let settings = state.session.clone();
    let shutdown = state.shutdown.clone();
    let info = ClientInfo {
        transport: Transport::Websocket,
        remote_address: parts.extensions.get::<PeerAddr>().map(|p| p.0),
        node: node.clone().unwrap_or_default().into(),
        scope: scope.clone(),
        client_name: parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().into(),
        identity: identity.to_string().into(),
    };
    // Subscribe only once the handshake is good: a refused upgrade leaves nothing behind.
    let (watch, initial) = Watch::resume(state.store.clone(), scope, node, &Held::new());
    let clients = state.clients.clone();
    let metrics = state.store.metrics.clone();
    let fanout = state.fanout.clone();
    state.tasks.spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => return tracing::debug!(error = %e, "CDS WebSocket upgrade failed"),
        };
        // In the client table from the completed upgrade to the end of the session.
        let client = clients.register(info);
        let upgraded = match fanout {
            Some(fanout) => match upgraded.downcast::<TokioIo<Rewind>>() {
                Ok(parts) => {
                    let (mut early, stream) = parts.io.into_inner().into_parts();
                    early.extend_from_slice(&parts.read_buf);
                    match stream.into_std() {
                        Ok(stream) => fanout.join(Joining { stream, early, watch, initial, client, permit }),
                        Err(e) => tracing::debug!(error = %e, "CDS watch connection lost at its hand-over"),
                    }
                    return;
                }
                Err(upgraded) => upgraded,
            },
            None => upgraded,
        };
        let stream = TokioIo::new(upgraded);
        Session { stream, watch, settings, metrics, shutdown, client, _permit: permit }.run(initial).await
    });
    handshake::switching_protocols(&parts.headers)
}

/// The parameters upstream binds, with its rules: each key at most once, `watch` a Go bool.
#[derive(Debug)]
struct Query {
    watch: bool,
    node: Option<String>,
}

impl Query {
    fn parse(raw: &str, with_node: bool) -> Result<Self, String> {
        // Decoded as `r.URL.Query()` does: undecodable pairs dropped, the error discarded.
        let query = stunner_gateway::query::Query::parse(raw);
        let single = |name: &str| {
            let mut values = query.values(name);
            match (values.next(), values.next()) {
                (value, None) => Ok(value.map(str::to_owned)),
                (_, Some(_)) => Err(format!(
                    "Invalid format for parameter {name}: multiple values for single value parameter '{name}'"
                )),
            }
        };
        let watch = match single("watch")?.as_deref() {
            None => false,
            Some(v) => parse_go_bool(v).ok_or_else(|| {
                format!("Invalid format for parameter watch: strconv.ParseBool: parsing \"{v}\": invalid syntax")
            })?,
        };
        let node = if with_node { single("node")? } else { None };
        Ok(Query { watch, node })
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `{"items":[...],"version":"v1"}` assembled from already-encoded configs.
fn config_list<'a>(items: impl Iterator<Item = &'a Frame>) -> Bytes {
    let mut body = BytesMut::with_capacity(64);
    body.put_slice(b"{\"items\":[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            body.put_u8(b',');
        }
        body.put_slice(item);
    }
    body.put_slice(b"],\"version\":\"v1\"}\n");
    body.freeze()
}

fn with_newline(frame: &Frame) -> Bytes {
    let mut body = BytesMut::with_capacity(frame.len() + 1);
    body.put_slice(frame);
    body.put_u8(b'\n');
    body.freeze()
}

fn not_found(id: &ConfigId) -> Response {
    let body = ApiError { code: 404, message: format!("Config not found for ID {id}") };
    json_response(StatusCode::NOT_FOUND, Bytes::from(json::to_vec_line(&body)))
}

fn json_response(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], Body::from(body)).into_response()
}

/// Go's `http.Error`: a plain-text line.
pub fn text_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
        format!("{message}\n"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_follows_the_upstream_binder() {
        assert!(Query::parse("watch=true", true).unwrap().watch);
        assert!(Query::parse("watch=1&node=n", true).unwrap().watch);
        assert!(!Query::parse("watch=False", true).unwrap().watch);
        assert_eq!(Query::parse("node=", true).unwrap().node.as_deref(), Some(""));
        assert_eq!(Query::parse("node=a%2Db&x=y", true).unwrap().node.as_deref(), Some("a-b"));
        assert!(Query::parse("watch=", true).unwrap_err().starts_with("Invalid format for parameter watch:"));
        assert!(Query::parse("watch=yes", true).unwrap_err().starts_with("Invalid format for parameter watch:"));
        assert_eq!(
            Query::parse("watch=true&watch=true", true).unwrap_err(),
            "Invalid format for parameter watch: multiple values for single value parameter 'watch'"
        );
        assert!(Query::parse("node=a&node=b", true).unwrap_err().starts_with("Invalid format for parameter node:"));
        assert_eq!(Query::parse("node=a&node=b", false).unwrap().node, None, "list routes ignore node");
        // Pairs Go cannot decode are absent, not values (form decoding kept "%zz" as text).
        assert!(!Query::parse("watch=%zz&watch=1;x", true).unwrap().watch);
        assert_eq!(Query::parse("node=%zz&node=b", true).unwrap().node.as_deref(), Some("b"));
    }
}
