//! The gRPC config discovery API over loopback, with real tonic clients against the real
//! server (the same port as the WebSocket API).

mod common;

mod pb {
    include!(concat!(env!("OUT_DIR"), "/test_client/stunner.cds.v1.rs"));
}

use common::{Server, config, start};
use futures_util::{SinkExt, StreamExt};
use pb::config_discovery_client::ConfigDiscoveryClient;
use std::time::Duration;
use stunner_gateway::cds::{ClientList, ConfigId};
use stunner_gateway::config::{NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use stunner_gateway::proto::{
    Ack, ConfigUpdate, GetLicenseRequest, GetRequest, Held, ListClientsRequest, ListRequest, Scope, WatchRequest,
    WatchStart, scope, watch_request,
};
use stunner_gateway_cds::{ServerSettings, Version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream_shim::ReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Streaming};

/// A minimal `Stream` over an mpsc receiver (the request side of a watch).
mod tokio_stream_shim {
    use std::pin::Pin;
    use std::task::{Context, Poll};
    use tokio::sync::mpsc;

    pub struct ReceiverStream<T>(pub mpsc::Receiver<T>);

    impl<T> futures_util::Stream for ReceiverStream<T> {
        type Item = T;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
}

type Client = ConfigDiscoveryClient<Channel>;

async fn channel(s: &Server) -> Channel {
    Endpoint::from_shared(format!("http://{}", s.addr)).unwrap().connect().await.unwrap()
}

async fn client(s: &Server) -> Client {
    ConfigDiscoveryClient::new(channel(s).await)
}

fn id(ns: &str, name: &str) -> stunner_gateway::proto::ConfigId {
    stunner_gateway::proto::ConfigId { namespace: ns.into(), name: name.into() }
}

fn all() -> Option<Scope> {
    Some(Scope { kind: Some(scope::Kind::All(scope::All {})) })
}

fn namespace(ns: &str) -> Option<Scope> {
    Some(Scope { kind: Some(scope::Kind::Namespace(ns.into())) })
}

fn single(ns: &str, name: &str) -> Option<Scope> {
    Some(Scope { kind: Some(scope::Kind::Config(id(ns, name))) })
}

fn start_msg(start: WatchStart) -> WatchRequest {
    WatchRequest { msg: Some(watch_request::Msg::Start(start)) }
}

fn ack_msg(ns: &str, name: &str, version: &str, error: &str) -> WatchRequest {
    WatchRequest {
        msg: Some(watch_request::Msg::Ack(Ack {
            id: Some(id(ns, name)),
            version: version.into(),
            error: error.into(),
        })),
    }
}

/// An open watch: the sender for acks and the update stream.
struct Watching {
    tx: mpsc::Sender<WatchRequest>,
    rx: Streaming<ConfigUpdate>,
}

/// Opens a watch with `first` as its first message.
async fn open(c: &mut Client, first: WatchRequest) -> Result<Watching, tonic::Status> {
    let (tx, rx) = mpsc::channel(16);
    tx.send(first).await.unwrap();
    let rx = c.watch(ReceiverStream(rx)).await?.into_inner();
    Ok(Watching { tx, rx })
}

async fn watch(c: &mut Client, start: WatchStart) -> Watching {
    open(c, start_msg(start)).await.expect("watch accepted")
}

/// The next update; panics after 10 s.
async fn recv(w: &mut Watching) -> ConfigUpdate {
    tokio::time::timeout(Duration::from_secs(10), w.rx.message())
        .await
        .expect("an update in time")
        .expect("no error")
        .expect("stream open")
}

/// Asserts that no update arrives within a short while.
async fn assert_quiet(w: &mut Watching) {
    if let Ok(m) = tokio::time::timeout(Duration::from_millis(200), w.rx.message()).await {
        panic!("unexpected message {m:?}");
    }
}

fn parse(u: &ConfigUpdate) -> StunnerConfig {
    serde_json::from_str(&u.config_json).unwrap()
}

fn version_of(s: &Server, ns: &str, name: &str) -> String {
    s.store.get(&ConfigId::new(ns, name)).unwrap().version.to_string()
}

/// Polls `check` until it holds (bounded: 1000 tries, 10 ms apart).
async fn eventually<F: AsyncFnMut() -> bool>(what: &str, mut check: F) {
    for _ in 0..1000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// GET over a fresh HTTP/1.1 connection: (status line, body).
async fn http_get(s: &Server, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(s.addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

async fn rest_clients(s: &Server) -> ClientList {
    let (status, body) = http_get(s, "/api/v1/clients").await;
    assert!(status.contains("200"), "{status}");
    serde_json::from_str(&body).unwrap()
}

fn metrics_text(s: &Server) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    s.metrics.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

#[tokio::test]
async fn list_get_not_found_and_license() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/b", "rb"));
    s.store.upsert(config("ns/a", "ra"));
    s.store.upsert(config("other/c", "rc"));
    let mut c = client(&s).await;

    let ids = |l: &stunner_gateway::proto::ListResponse| -> Vec<String> {
        l.configs
            .iter()
            .map(|u| format!("{}/{}", u.id.as_ref().unwrap().namespace, u.id.as_ref().unwrap().name))
            .collect()
    };
    let everything = c.list(ListRequest { scope: None }).await.unwrap().into_inner();
    assert_eq!(ids(&everything), ["ns/a", "ns/b", "other/c"], "no scope means all, sorted by id");
    assert_eq!(ids(&c.list(ListRequest { scope: all() }).await.unwrap().into_inner()), ["ns/a", "ns/b", "other/c"]);
    assert_eq!(ids(&c.list(ListRequest { scope: namespace("ns") }).await.unwrap().into_inner()), ["ns/a", "ns/b"]);
    assert_eq!(ids(&c.list(ListRequest { scope: single("other", "c") }).await.unwrap().into_inner()), ["other/c"]);
    assert!(c.list(ListRequest { scope: namespace("none") }).await.unwrap().into_inner().configs.is_empty());

    let a = &everything.configs[0];
    let stored = s.store.get(&ConfigId::new("ns", "a")).unwrap();
    assert_eq!(a.version, stored.version.to_string());
    assert!(Version::parse(&a.version).is_some(), "16 hex digits");
    assert_eq!(a.config_json.as_bytes(), &stored.json[..], "the exact bytes the WebSocket API sends");
    assert!(!a.deleted);

    let got = c.get(GetRequest { id: Some(id("ns", "a")), node: String::new() }).await.unwrap().into_inner();
    assert_eq!(&got, a);
    let missing = c.get(GetRequest { id: Some(id("ns", "zzz")), node: String::new() }).await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    assert_eq!(missing.message(), "Config not found for ID ns/zzz");
    let bad = c.get(GetRequest { id: Some(id("", "a")), node: String::new() }).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);

    let license = c.get_license(GetLicenseRequest {}).await.unwrap().into_inner();
    let license: serde_json::Value = serde_json::from_str(&license.status_json).unwrap();
    assert_eq!(license["subscriptionType"], "free");
}

#[tokio::test]
async fn watch_sends_snapshot_then_each_change_then_deletions() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    s.store.upsert(config("ns/b", "b1"));
    s.store.upsert(config("other/c", "c1"));
    let mut c = client(&s).await;
    let mut w = watch(&mut c, WatchStart { scope: namespace("ns"), ..Default::default() }).await;
    let first = recv(&mut w).await;
    let second = recv(&mut w).await;
    assert_eq!((parse(&first).auth.realm.as_str(), parse(&second).auth.realm.as_str()), ("a1", "b1"));
    assert_eq!(first.version, version_of(&s, "ns", "a"));
    assert_quiet(&mut w).await;

    s.store.upsert(config("ns/a", "a2"));
    let update = recv(&mut w).await;
    assert_eq!(parse(&update).auth.realm, "a2");
    assert_eq!(update.version, version_of(&s, "ns", "a"));
    s.store.upsert(config("other/c", "c2"));
    s.store.upsert(config("ns/a", "a2")); // unchanged: nothing
    assert_quiet(&mut w).await;

    s.store.delete(&ConfigId::new("ns", "b"));
    let gone = recv(&mut w).await;
    assert!(gone.deleted);
    assert_eq!(gone.id, Some(id("ns", "b")));
    assert_eq!(gone.config_json, StunnerConfig::zero("ns/b").to_json(), "the zero config's exact bytes");
    assert_eq!(gone.version, Version::of(&StunnerConfig::zero("ns/b")).to_string());
    assert_quiet(&mut w).await;

    // A single-id watch gets the deletion too, and the stream stays open for a re-create.
    let mut one = watch(&mut c, WatchStart { scope: single("ns", "a"), ..Default::default() }).await;
    assert_eq!(parse(&recv(&mut one).await).auth.realm, "a2");
    s.store.delete(&ConfigId::new("ns", "a"));
    assert!(recv(&mut one).await.deleted);
    s.store.upsert(config("ns/a", "a3"));
    assert_eq!(parse(&recv(&mut one).await).auth.realm, "a3");
}

#[tokio::test]
async fn resume_skips_what_the_client_holds() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    s.store.upsert(config("ns/b", "b1"));
    let held_a = version_of(&s, "ns", "a");
    let stale_b = Version::of(&config("ns/b", "b0")).to_string();
    let gone_c = Version::of(&config("ns/c", "c0")).to_string();
    let mut c = client(&s).await;
    let resume = vec![
        Held { id: Some(id("ns", "a")), version: held_a.clone() },
        Held { id: Some(id("ns", "b")), version: stale_b },
        Held { id: Some(id("ns", "c")), version: gone_c },
        Held { id: Some(id("elsewhere", "d")), version: held_a.clone() },
    ];
    let mut w = watch(&mut c, WatchStart { scope: namespace("ns"), resume, ..Default::default() }).await;
    let b = recv(&mut w).await;
    assert_eq!(parse(&b).auth.realm, "b1", "the changed config is sent");
    let c_gone = recv(&mut w).await;
    assert_eq!((c_gone.id.clone(), c_gone.deleted), (Some(id("ns", "c")), true), "a held config that is gone");
    assert_quiet(&mut w).await;
    s.store.upsert(config("ns/a", "a2"));
    assert_eq!(parse(&recv(&mut w).await).auth.realm, "a2", "changes after resume are sent");

    // Single id, held at the current version: silent until it changes.
    let current = version_of(&s, "ns", "a");
    let resume = vec![Held { id: Some(id("ns", "a")), version: current }];
    let mut one = watch(&mut c, WatchStart { scope: single("ns", "a"), resume, ..Default::default() }).await;
    assert_quiet(&mut one).await;
    s.store.upsert(config("ns/a", "a3"));
    assert_eq!(parse(&recv(&mut one).await).auth.realm, "a3");
}

#[tokio::test]
async fn node_patching_on_get_and_watch() {
    let s = start(ServerSettings::default()).await;
    let mut cfg = config("ns/gw", "r");
    cfg.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.store.upsert(cfg);
    s.store.nodes().set("node-a", Some("198.51.100.4".parse().unwrap()));
    let mut c = client(&s).await;
    let got = c.get(GetRequest { id: Some(id("ns", "gw")), node: "node-a".into() }).await.unwrap().into_inner();
    assert_eq!(parse(&got).listeners[0].addr, "198.51.100.4");
    let got = c.get(GetRequest { id: Some(id("ns", "gw")), node: "node-b".into() }).await.unwrap().into_inner();
    assert_eq!(parse(&got).listeners[0].addr, "$STUNNER_ADDR", "a node without an address falls back");
    let got = c.get(GetRequest { id: Some(id("ns", "gw")), node: String::new() }).await.unwrap().into_inner();
    assert_eq!(parse(&got).listeners[0].addr, NODE_ADDRESS_PLACEHOLDER);

    let mut w =
        watch(&mut c, WatchStart { scope: single("ns", "gw"), node: "node-a".into(), ..Default::default() }).await;
    let first = recv(&mut w).await;
    assert_eq!(parse(&first).listeners[0].addr, "198.51.100.4");
    assert_eq!(first.version, version_of(&s, "ns", "gw"), "the version is the published config's");
    s.store.nodes().set("node-a", Some("198.51.100.5".parse().unwrap()));
    assert_eq!(parse(&recv(&mut w).await).listeners[0].addr, "198.51.100.5", "node address changes are pushed");

    let list = c.list(ListRequest { scope: namespace("ns") }).await.unwrap().into_inner();
    assert_eq!(parse(&list.configs[0]).listeners[0].addr, NODE_ADDRESS_PLACEHOLDER, "lists are never patched");
    let refused =
        open(&mut c, start_msg(WatchStart { scope: namespace("ns"), node: "node-a".into(), ..Default::default() }))
            .await
            .err()
            .expect("node needs a single-id scope");
    assert_eq!(refused.code(), Code::InvalidArgument);
}

#[tokio::test]
async fn acks_and_nacks_show_in_list_clients_rest_and_metrics() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    let mut c = client(&s).await;
    let start = WatchStart {
        scope: single("ns", "a"),
        client_name: "pod-1".into(),
        node: "node-x".into(),
        ..Default::default()
    };
    let mut w = watch(&mut c, start).await;
    let v1 = recv(&mut w).await.version;
    w.tx.send(ack_msg("ns", "a", &v1, "")).await.unwrap();
    let mut lc = client(&s).await;
    eventually("the ack is recorded", async || {
        let list = lc.list_clients(ListClientsRequest {}).await.unwrap().into_inner();
        list.clients.len() == 1 && list.clients[0].configs.first().is_some_and(|cc| cc.version_acked == v1)
    })
    .await;

    s.store.upsert(config("ns/a", "a2"));
    let v2 = recv(&mut w).await.version;
    w.tx.send(ack_msg("ns", "a", &v2, "listener udp: port in use")).await.unwrap();
    eventually("the rejection is recorded", async || {
        let list = lc.list_clients(ListClientsRequest {}).await.unwrap().into_inner();
        list.clients[0].configs[0].version_rejected == v2
    })
    .await;

    let list = lc.list_clients(ListClientsRequest {}).await.unwrap().into_inner();
    let row = &list.clients[0];
    assert_eq!(
        (row.transport.as_str(), row.scope.as_str(), row.node.as_str(), row.client_name.as_str()),
        ("grpc", "ns/a", "node-x", "pod-1")
    );
    assert!(row.remote_address.starts_with("127.0.0.1:"));
    assert!(row.connected_since.ends_with('Z') && row.connected_since.contains('T'), "{}", row.connected_since);
    let cc = &row.configs[0];
    assert_eq!(cc.id, Some(id("ns", "a")));
    assert_eq!(
        (cc.version_sent.as_str(), cc.version_acked.as_str(), cc.version_rejected.as_str(), cc.error.as_str()),
        (v2.as_str(), v1.as_str(), v2.as_str(), "listener udp: port in use")
    );
    for at in [&cc.sent_at, &cc.acked_at, &cc.rejected_at] {
        assert!(at.ends_with('Z') && at.contains('T') && *at >= row.connected_since, "{at}");
    }

    // The same row on REST, in the proto JSON mapping.
    let (_, body) = http_get(&s, "/api/v1/clients").await;
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let r = &json["clients"][0];
    assert_eq!(r["transport"], "grpc");
    assert_eq!(r["remoteAddress"], row.remote_address.as_str());
    assert_eq!(r["clientName"], "pod-1");
    assert_eq!(r["connectedSince"], row.connected_since.as_str());
    assert_eq!(r["configs"][0]["id"], serde_json::json!({"namespace": "ns", "name": "a"}));
    assert_eq!(r["configs"][0]["versionSent"], v2.as_str());
    assert_eq!(r["configs"][0]["versionAcked"], v1.as_str());
    assert_eq!(r["configs"][0]["versionRejected"], v2.as_str());
    assert_eq!(r["configs"][0]["error"], "listener udp: port in use");
    assert_eq!(r["configs"][0]["ackedAt"], cc.acked_at.as_str());
    assert_eq!(r["configs"][0]["rejectedAt"], cc.rejected_at.as_str());

    let text = metrics_text(&s);
    for line in [
        "stunner_gateway_operator_cds_client_acks_total{result=\"applied\"} 1",
        "stunner_gateway_operator_cds_client_acks_total{result=\"rejected\"} 1",
        "stunner_gateway_operator_cds_clients{transport=\"grpc\"} 1",
        "stunner_gateway_operator_cds_pushes_total{transport=\"grpc\"} 2",
        // Timed: only a2, stored while the client watched; it was rejected, not applied.
        "stunner_gateway_operator_cds_push_time_seconds_count 1",
        "stunner_gateway_operator_cds_ack_time_seconds_count 0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }

    // An ack for a config never sent is ignored; the client leaves the table when it goes.
    w.tx.send(ack_msg("ns", "zzz", &v1, "")).await.unwrap();
    drop(w);
    eventually("the client leaves the table", async || {
        lc.list_clients(ListClientsRequest {}).await.unwrap().into_inner().clients.is_empty()
    })
    .await;
    assert!(metrics_text(&s).lines().any(|l| l == "stunner_gateway_operator_cds_clients{transport=\"grpc\"} 0"));
}

#[tokio::test]
async fn websocket_clients_appear_in_the_table_and_leave_on_close() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    let url = format!("ws://{}/api/v1/configs/ns/a?node=n1&watch=true", s.addr);
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url).unwrap();
    req.headers_mut().insert("user-agent", "Go-http-client/1.1".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let frame = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap().unwrap().unwrap();
    assert!(frame.is_text());
    let v = version_of(&s, "ns", "a");
    let mut seen = ClientList::default();
    eventually("the WebSocket client is listed with the version sent", async || {
        seen = rest_clients(&s).await;
        seen.clients.first().is_some_and(|c| c.configs.first().is_some_and(|cc| cc.version_sent == v))
    })
    .await;
    let row = &seen.clients[0];
    assert_eq!(
        (row.transport.as_str(), row.scope.as_str(), row.node.as_str(), row.client_name.as_str()),
        ("websocket", "ns/a", "n1", "Go-http-client/1.1")
    );
    assert_eq!(row.configs[0].version_acked, "", "WebSocket clients never ack");
    let mut c = client(&s).await;
    let grpc_view = c.list_clients(ListClientsRequest {}).await.unwrap().into_inner();
    assert_eq!(grpc_view.clients.len(), 1, "gRPC ListClients shows the WebSocket client too");
    assert_eq!(grpc_view.clients[0].transport, "websocket");

    ws.send(tokio_tungstenite::tungstenite::Message::Close(None)).await.unwrap();
    drop(ws);
    eventually("the WebSocket client leaves the table", async || rest_clients(&s).await.clients.is_empty()).await;
}

#[tokio::test]
async fn a_slow_watcher_gets_the_latest_version_not_a_queue() {
    let s = start(ServerSettings::default()).await;
    // Big configs and a small HTTP/2 receive window: the client can hold only a few unread.
    let padded = |n: usize| {
        let mut c = config("ns/a", &format!("realm-{n}-{}", "x".repeat(4000)));
        c.auth.realm.truncate(4100);
        c
    };
    s.store.upsert(padded(0));
    let channel = Endpoint::from_shared(format!("http://{}", s.addr))
        .unwrap()
        .initial_stream_window_size(Some(8 * 1024))
        .initial_connection_window_size(Some(64 * 1024))
        .connect()
        .await
        .unwrap();
    let mut c = ConfigDiscoveryClient::new(channel);
    let mut w = watch(&mut c, WatchStart { scope: single("ns", "a"), ..Default::default() }).await;
    assert!(parse(&recv(&mut w).await).auth.realm.starts_with("realm-0-"));
    for n in 1..=100 {
        s.store.upsert(padded(n));
        // Let the server push what the client's window takes (the test runtime is one thread).
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let latest = version_of(&s, "ns", "a");
    let mut received = 0;
    // Bounded: a queue would deliver 100 updates; stop at the latest.
    for _ in 0..100 {
        let u = recv(&mut w).await;
        received += 1;
        if u.version == latest {
            break;
        }
    }
    assert!(received < 20, "conflated: got {received} updates for 100 versions");
    assert_quiet(&mut w).await;
}

#[tokio::test]
async fn malformed_watches_are_refused() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    let mut c = client(&s).await;

    let no_start = open(&mut c, ack_msg("ns", "a", "0000000000000000", "")).await.err().expect("refused");
    assert_eq!(no_start.code(), Code::InvalidArgument);

    let unknown_scope = open(&mut c, start_msg(WatchStart { scope: Some(Scope { kind: None }), ..Default::default() }))
        .await
        .err()
        .expect("refused");
    assert_eq!(unknown_scope.code(), Code::InvalidArgument);

    let bad_resume = WatchStart {
        scope: all(),
        resume: vec![Held { id: Some(id("ns", "a")), version: "not-a-version".into() }],
        ..Default::default()
    };
    assert_eq!(open(&mut c, start_msg(bad_resume)).await.err().expect("refused").code(), Code::InvalidArgument);

    // A second start ends the stream with INVALID_ARGUMENT.
    let mut w = watch(&mut c, WatchStart { scope: all(), ..Default::default() }).await;
    recv(&mut w).await;
    w.tx.send(start_msg(WatchStart { scope: all(), ..Default::default() })).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), w.rx.message()).await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    // Requests over the size limit (64 KiB) are refused as tonic reports it: OUT_OF_RANGE.
    let huge = WatchStart { scope: all(), client_name: "x".repeat(100 * 1024), ..Default::default() };
    let err = open(&mut c, start_msg(huge)).await.err().expect("refused");
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    let err = c.get(GetRequest { id: Some(id("ns", "a")), node: "n".repeat(100 * 1024) }).await.unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    // The connection is still good afterwards.
    assert!(c.get(GetRequest { id: Some(id("ns", "a")), node: String::new() }).await.is_ok());
}

#[tokio::test]
async fn health_is_serving_and_reflection_lists_the_service() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

    let s = start(ServerSettings::default()).await;
    let ch = channel(&s).await;
    let mut health = HealthClient::new(ch.clone());
    for service in ["", "stunner.cds.v1.ConfigDiscovery"] {
        let r = health.check(HealthCheckRequest { service: service.into() }).await.unwrap().into_inner();
        assert_eq!(r.status, ServingStatus::Serving as i32, "{service:?}");
    }

    let mut reflection = ServerReflectionClient::new(ch);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses =
        reflection.server_reflection_info(futures_util::stream::iter([request])).await.unwrap().into_inner();
    let response: ServerReflectionResponse = responses.message().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected {response:?}")
    };
    let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"stunner.cds.v1.ConfigDiscovery"), "{names:?}");
    assert!(names.contains(&"grpc.health.v1.Health"), "{names:?}");
}

#[tokio::test]
async fn grpc_connections_count_against_the_connection_limit() {
    let s = start(ServerSettings { max_connections: 1, ..Default::default() }).await;
    s.store.upsert(config("ns/a", "a1"));
    let mut c = client(&s).await;
    c.get(GetRequest { id: Some(id("ns", "a")), node: String::new() }).await.unwrap();
    let (status, body) = http_get(&s, "/api/v1/configs").await;
    assert!(status.contains("503"), "{status} {body}");
    // HTTP/1.1 on the same port works once the gRPC connection is gone.
    drop(c);
    eventually("the slot is free again", async || http_get(&s, "/api/v1/configs").await.0.contains("200")).await;
}

#[tokio::test]
async fn shutdown_ends_watches_with_unavailable() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/a", "a1"));
    let mut c = client(&s).await;
    let mut w = watch(&mut c, WatchStart { scope: all(), ..Default::default() }).await;
    recv(&mut w).await;
    s.shutdown.cancel();
    let err = tokio::time::timeout(Duration::from_secs(10), w.rx.message()).await.unwrap().unwrap_err();
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    tokio::time::timeout(Duration::from_secs(10), s.task).await.unwrap().unwrap();
}

#[tokio::test]
async fn watches_past_the_limits_are_resource_exhausted_with_the_limit() {
    let mut settings = ServerSettings::default();
    settings.grpc.max_watches_per_connection = 2;
    settings.grpc.max_watches = 3;
    let s = start(settings).await;
    s.store.upsert(config("ns/a", "a1"));
    let every = || start_msg(WatchStart { scope: all(), ..Default::default() });

    let mut c = client(&s).await;
    let mut held = vec![watch(&mut c, WatchStart { scope: all(), ..Default::default() }).await];
    held.push(watch(&mut c, WatchStart { scope: all(), ..Default::default() }).await);
    let err = open(&mut c, every()).await.err().expect("refused");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("on this connection (limit 2 per connection"), "{err:?}");
    // One-shot calls on that connection still go through.
    c.get(GetRequest { id: Some(id("ns", "a")), node: String::new() }).await.unwrap();

    // Another connection takes the server's last watch, then meets the server's limit.
    let mut d = client(&s).await;
    held.push(watch(&mut d, WatchStart { scope: all(), ..Default::default() }).await);
    let err = open(&mut d, every()).await.err().expect("refused");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("on this server (limit 3, --cds-max-grpc-watches)"), "{err:?}");

    // A watch that ends gives its slots back.
    held.remove(0);
    eventually("a slot is free again", async || open(&mut d, every()).await.is_ok()).await;
}
