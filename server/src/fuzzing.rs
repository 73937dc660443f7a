//! Narrow entry points for the fuzz targets (`fuzz/`, see README "Test"): each runs one parser
//! the way the daemon runs it, so a target names only this module and a change of the module
//! layout behind it is a one-line fix here. Not an API: nothing else may depend on it.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use stunner_gateway::config::{ListenerConfig, NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use stunner_gateway_cds::api::{self, CdsState};
use stunner_gateway_cds::authz::Authorizer;
use stunner_gateway_cds::clients::ClientTable;
use stunner_gateway_cds::{CdsMetrics, ConfigStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use stunner_gateway_cds::handshake::{Refusal, check as check_handshake, switching_protocols};
pub use stunner_gateway_cds::websocket::{Event, FrameReader, ProtocolError};

/// Largest body [`CdsServer`] reads back: far above any answer of its small store.
const MAX_RESPONSE_BYTES: usize = 1 << 20;

/// The CDS API (HTTP, WebSocket handshake and gRPC) of a store with [`CdsServer::CONFIGS`],
/// on a single-threaded runtime, with no socket: requests go straight into the same router
/// and services the listener serves.
pub struct CdsServer {
    runtime: tokio::runtime::Runtime,
    router: axum::Router,
    grpc: tonic::service::Routes,
    /// The store's configs, as served (with the store's version), by id.
    pub configs: Vec<StunnerConfig>,
}

/// An answer: status, headers (with gRPC's trailers merged in) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl CdsServer {
    /// The ids in the store: two in one namespace, one in another, one with a node-address
    /// placeholder (its GET with `node=` is patched per node).
    pub const CONFIGS: [&'static str; 4] = ["ns1/gw-a", "ns1/gw-b", "ns2/gw-a", "ns2/node-gw"];

    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
        let metrics = CdsMetrics::default();
        let store = Arc::new(ConfigStore::new(metrics.clone()));
        let configs: Vec<StunnerConfig> = Self::CONFIGS.iter().map(|id| config(id)).collect();
        for c in &configs {
            store.upsert(c.clone()).expect("a new config");
        }
        let shutdown = CancellationToken::new();
        let clients = Arc::new(ClientTable::new(metrics.clone()));
        let authorizer = Arc::new(Authorizer::unchecked());
        // Tasks the router spawns (upgraded sessions) are tracked, as under the listener.
        let tasks = tokio_util::task::TaskTracker::new();
        let state = Arc::new(CdsState {
            store: store.clone(),
            session: Default::default(),
            // Requests here are answered without a connection: nothing is ever upgraded.
            fanout: None,
            shutdown: shutdown.clone(),
            clients: clients.clone(),
            authorizer: authorizer.clone(),
            tasks: tasks.clone(),
        });
        let router = api::router(state);
        let grpc = runtime.block_on(stunner_gateway_cds::grpc::routes(
            store.clone(),
            metrics,
            clients,
            authorizer,
            Default::default(),
            shutdown,
            tasks,
        ));
        CdsServer { runtime, router, grpc, configs }
    }

    /// One HTTP request through the CDS router.
    pub fn http(&self, request: Request<Body>) -> Answer {
        self.runtime.block_on(async {
            let response = self.router.clone().oneshot(request).await.expect("the router is infallible");
            collect(response.map(Body::new)).await
        })
    }

    /// One gRPC call (`path` such as `/stunner.cds.v1.ConfigDiscovery/Get`) with `message` as
    /// its only request message; for unary calls.
    pub fn grpc(&self, path: &str, message: &[u8]) -> Answer {
        let mut body = Vec::with_capacity(message.len() + 5);
        body.push(0);
        body.extend_from_slice(&(message.len() as u32).to_be_bytes());
        body.extend_from_slice(message);
        let request = Request::post(path)
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Body::from(body))
            .expect("a valid gRPC request");
        self.runtime.block_on(async {
            let response = self.grpc.clone().oneshot(request).await.expect("gRPC routes are infallible");
            collect(response.map(Body::new)).await
        })
    }

    /// `raw` as the bytes a client sends on a fresh HTTP/1.1 connection, parsed by hyper with
    /// the CDS listener's settings (16 KiB buffer, upgrades on) and served by the CDS router;
    /// returns every byte the server wrote back. The client half-closes after its bytes, so
    /// the connection ends once what was sent has been answered.
    pub fn http1_connection(&self, raw: &[u8]) -> Vec<u8> {
        self.runtime.block_on(async {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let router = self.router.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                router.clone().oneshot(req.map(Body::new))
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).max_buf_size(16 * 1024).half_close(true);
            let connection = http.serve_connection(TokioIo::new(server), service).with_upgrades();
            let exchange = async {
                // A write error means the server closed early (it refused what it read).
                let _ = client.write_all(raw).await;
                let _ = client.shutdown().await;
                let mut out = Vec::new();
                let _ = (&mut client).take(MAX_RESPONSE_BYTES as u64).read_to_end(&mut out).await;
                out
            };
            let (_, out) = tokio::join!(connection, exchange);
            out
        })
    }
}

impl Default for CdsServer {
    fn default() -> Self {
        Self::new()
    }
}

fn config(id: &str) -> StunnerConfig {
    let mut c = StunnerConfig::zero(id);
    c.auth.realm = "fuzz.example".into();
    let addr = if id.ends_with("node-gw") { NODE_ADDRESS_PLACEHOLDER } else { "$STUNNER_ADDR" };
    c.listeners.push(ListenerConfig {
        name: format!("{id}/udp"),
        protocol: "TURN-UDP".into(),
        addr: addr.into(),
        port: 3478,
        ..Default::default()
    });
    c
}

async fn collect(response: axum::response::Response) -> Answer {
    let (parts, body) = response.into_parts();
    let mut headers = parts.headers;
    let mut data = Vec::new();
    let mut body = http_body_util::Limited::new(body, MAX_RESPONSE_BYTES);
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else { break };
        match frame.into_data() {
            Ok(bytes) => data.extend_from_slice(&bytes),
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    headers.extend(trailers);
                }
            }
        }
    }
    Answer { status: parts.status, headers, body: Bytes::from(data) }
}

/// The facade serves as the daemon does (so a fuzz target that stops reaching the real code
/// fails here, in the normal suite).
#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use stunner_gateway::proto;

    #[test]
    fn http_serves_the_store() {
        let server = CdsServer::new();
        let answer = server.http(Request::get("/api/v1/configs/ns1/gw-a").body(Body::empty()).unwrap());
        assert_eq!(answer.status, StatusCode::OK);
        let served: StunnerConfig = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(served.admin.name, "ns1/gw-a");
        let answer = server.http(Request::get("/api/v1/configs?watch=yes").body(Body::empty()).unwrap());
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn an_http1_connection_upgrades_a_watch_and_answers_pipelined_requests() {
        let server = CdsServer::new();
        let watch = "GET /api/v1/configs/ns1/gw-a?watch=true HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n\
                     Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
        let out = String::from_utf8(server.http1_connection(watch.as_bytes())).unwrap();
        assert!(out.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{out}");
        assert!(out.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), "{out}");
        let two = "GET /api/v1/license HTTP/1.1\r\nHost: h\r\n\r\nGET /nope HTTP/1.1\r\nHost: h\r\n\r\n";
        let out = String::from_utf8(server.http1_connection(two.as_bytes())).unwrap();
        assert_eq!(out.matches("HTTP/1.1 ").count(), 2, "{out}");
        assert!(out.contains("HTTP/1.1 404 Not Found\r\n"), "{out}");
    }

    #[test]
    fn grpc_calls_reach_the_service() {
        let server = CdsServer::new();
        let id = proto::ConfigId { namespace: "ns2".into(), name: "gw-a".into() };
        let request = proto::GetRequest { id: Some(id), node: String::new() };
        let answer = server.grpc("/stunner.cds.v1.ConfigDiscovery/Get", &request.encode_to_vec());
        assert_eq!(answer.headers["grpc-status"], "0");
        let update = proto::ConfigUpdate::decode(&answer.body[5..]).unwrap();
        assert_eq!(update.id.unwrap().name, "gw-a");
        let answer = server.grpc("/stunner.cds.v1.ConfigDiscovery/Get", b"\xff");
        assert_ne!(answer.headers["grpc-status"], "0", "a message that does not decode");
    }
}
