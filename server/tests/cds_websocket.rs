//! The CDS server over real sockets on loopback, with real WebSocket clients.

mod common;

use common::{Server, config, start};

use futures_util::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::time::Duration;
use stunner_gateway::cds::{ApiError, ConfigId, ConfigList, LicenseStatus};
use stunner_gateway::config::{NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use stunner_gateway_cds::{Opening, ServerSettings};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

async fn watch(s: &Server, path: &str) -> Ws {
    connect_async(format!("ws://{}{path}", s.addr)).await.unwrap().0
}

/// The next config frame, skipping control frames; panics after 10 s.
async fn recv(ws: &mut Ws) -> StunnerConfig {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.expect("a frame in time");
        match msg.expect("stream open").expect("no error") {
            Message::Text(t) => return serde_json::from_str(&t).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// Asserts that no config frame arrives within a short while.
async fn assert_quiet(ws: &mut Ws) {
    if let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout(Duration::from_millis(200), ws.next()).await {
        panic!("unexpected frame {t}");
    }
}

/// A raw HTTP/1.1 exchange: returns the status line, the headers (lower case) and the body.
/// Reads the body by its Content-Length, or to the end of the stream without one.
async fn raw(addr: SocketAddr, request: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let read = async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().unwrap())
                });
                if n == 0 || len.is_some_and(|len| body.len() >= len) {
                    break;
                }
            } else if n == 0 {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read).await.expect("a response in time");
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_lowercase(), body.to_string())
}

async fn get(s: &Server, path: &str) -> (String, String, String) {
    raw(s.addr, &format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr)).await
}

#[tokio::test]
async fn single_watch_receives_snapshot_updates_and_zero_config() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("stunner/gw", "r1"));
    let mut ws = watch(&s, "/api/v1/configs/stunner/gw?watch=true").await;
    assert_eq!(recv(&mut ws).await.auth.realm, "r1");
    s.store.upsert(config("stunner/other", "x"));
    s.store.upsert(config("stunner/gw", "r2"));
    assert_eq!(recv(&mut ws).await.auth.realm, "r2", "only the watched id is sent");
    s.store.delete(&ConfigId::new("stunner", "gw"));
    let zero = recv(&mut ws).await;
    assert_eq!(zero, StunnerConfig::zero("stunner/gw"));
    assert!(zero.normalized().unwrap().is_deleted(), "stunnerd's own check recognises it");
    s.store.upsert(config("stunner/gw", "r3"));
    assert_eq!(recv(&mut ws).await.auth.realm, "r3", "the stream stays open after a delete");
}

#[tokio::test]
async fn clients_that_arrive_before_the_cds_opens_are_held_then_served_the_first_render() {
    let (open, opened) = tokio::sync::oneshot::channel::<()>();
    let opening = Opening::when(async move {
        let _ = opened.await;
    });
    let s = start(ServerSettings { opening: opening.clone(), ..Default::default() }).await;
    let url = format!("ws://{}/api/v1/configs/stunner/gw?watch=true", s.addr);
    let early_watch = tokio::spawn(connect_async(url));
    let addr = s.addr;
    let request = format!("GET /api/v1/configs/stunner/gw HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let early_get = tokio::spawn(async move { raw(addr, &request).await });
    // Both accepted and waiting for the opening: nothing answers them until it comes.
    for _ in 0..500 {
        if opening.held() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(opening.held(), 2, "both early clients are held by the CDS");
    assert!(!early_watch.is_finished(), "a watch is not answered before the CDS opens");
    assert!(!early_get.is_finished(), "nor is a GET: it would be a 404 from an empty store");

    // The first render publishes, then opens the CDS: the early clients get what it rendered.
    s.store.upsert(config("stunner/gw", "first"));
    open.send(()).unwrap();
    let mut ws = early_watch.await.unwrap().expect("the held upgrade is answered").0;
    assert_eq!(recv(&mut ws).await.auth.realm, "first", "the first frame is the rendered config, not a zero config");
    let (status, _, body) = early_get.await.unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(serde_json::from_str::<StunnerConfig>(&body).unwrap().auth.realm, "first");
}

#[tokio::test]
async fn clients_held_for_an_opening_that_never_comes_are_let_go_at_shutdown() {
    let opening = Opening::when(std::future::pending());
    let s = start(ServerSettings { opening, ..Default::default() }).await;
    let mut held = TcpStream::connect(s.addr).await.unwrap();
    held.write_all(b"GET /api/v1/configs HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
    s.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(10), s.task)
        .await
        .expect("shutdown does not wait for held clients")
        .unwrap();
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(10), held.read_to_end(&mut rest)).await.expect("closed in time");
    assert!(n.is_err() || rest.is_empty(), "closed unanswered: {:?}", String::from_utf8_lossy(&rest));
}

#[tokio::test]
async fn frames_are_text_with_the_exact_bytes() {
    let s = start(ServerSettings::default()).await;
    let mut ws = watch(&s, "/api/v1/configs/stunner/gw?watch=true").await;
    s.store.upsert(config("stunner/gw", "r"));
    recv(&mut ws).await;
    s.store.delete(&ConfigId::new("stunner", "gw"));
    match ws.next().await.unwrap().unwrap() {
        Message::Text(t) => assert_eq!(
            t.as_str(),
            r#"{"version":"v1","admin":{"name":"stunner/gw"},"auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"password":"dummy-password","username":"dummy-username"}}}"#
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn namespace_and_all_watches() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns1/a", "r"));
    s.store.upsert(config("ns2/b", "r"));
    let mut ns = watch(&s, "/api/v1/configs/ns1?watch=true").await;
    let mut all = watch(&s, "/api/v1/configs?watch=true").await;
    assert_eq!(recv(&mut ns).await.admin.name, "ns1/a");
    assert_quiet(&mut ns).await;
    let mut initial = vec![recv(&mut all).await.admin.name, recv(&mut all).await.admin.name];
    initial.sort();
    assert_eq!(initial, ["ns1/a", "ns2/b"]);
    s.store.upsert(config("ns2/c", "r"));
    assert_eq!(recv(&mut all).await.admin.name, "ns2/c");
    assert_quiet(&mut ns).await;
    s.store.delete(&ConfigId::new("ns1", "a"));
    assert_eq!(recv(&mut ns).await, StunnerConfig::zero("ns1/a"));
    assert_eq!(recv(&mut all).await, StunnerConfig::zero("ns1/a"));
}

#[tokio::test]
async fn node_parameter_patches_the_placeholder() {
    let s = start(ServerSettings::default()).await;
    let mut c = config("ns/gw", "r");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.store.upsert(c);
    s.store.nodes().set("node-a", Some("198.51.100.4".parse().unwrap()));
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?node=node-a&watch=true").await;
    assert_eq!(recv(&mut ws).await.listeners[0].addr, "198.51.100.4");
    s.store.nodes().set("node-a", Some("198.51.100.5".parse().unwrap()));
    assert_eq!(recv(&mut ws).await.listeners[0].addr, "198.51.100.5", "node address changes are pushed");
    let (_, _, body) = get(&s, "/api/v1/configs/ns/gw?node=node-b").await;
    let got: StunnerConfig = serde_json::from_str(&body).unwrap();
    assert_eq!(got.listeners[0].addr, "$STUNNER_ADDR", "a node without an address falls back");
    let (_, _, body) = get(&s, "/api/v1/configs/ns").await;
    let list: ConfigList = serde_json::from_str(&body).unwrap();
    assert_eq!(list.items[0].listeners[0].addr, NODE_ADDRESS_PLACEHOLDER, "lists are never patched");
}

#[tokio::test]
async fn reconnect_gets_the_latest_version() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/gw", "r1"));
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    recv(&mut ws).await;
    ws.close(None).await.unwrap();
    s.store.upsert(config("ns/gw", "r2"));
    s.store.upsert(config("ns/gw", "r3"));
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    assert_eq!(recv(&mut ws).await.auth.realm, "r3");
    assert_quiet(&mut ws).await;
}

#[tokio::test]
async fn pings_are_answered() {
    let s = start(ServerSettings::default()).await;
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    ws.send(Message::Ping("keepalive".into())).await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(5), ws.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(msg, Message::Pong("keepalive".into()));
    // Data from the client is read and discarded; the stream goes on.
    ws.send(Message::Text("hello".into())).await.unwrap();
    s.store.upsert(config("ns/gw", "r"));
    assert_eq!(recv(&mut ws).await.auth.realm, "r");
}

#[tokio::test]
async fn stunnerd_origin_header_is_accepted() {
    let s = start(ServerSettings::default()).await;
    let mut req = format!("ws://{}/api/v1/configs/ns/gw?node=n1&watch=true", s.addr).into_client_request().unwrap();
    let origin = format!("http://{}?node=n1&watch=true", s.addr);
    req.headers_mut().insert("origin", origin.parse().unwrap());
    s.store.upsert(config("ns/gw", "r"));
    let (mut ws, _) = connect_async(req).await.expect("upgrade accepted");
    assert_eq!(recv(&mut ws).await.admin.name, "ns/gw");
}

#[tokio::test]
async fn plain_gets_and_error_bodies() {
    let s = start(ServerSettings::default()).await;
    let (status, headers, body) = get(&s, "/api/v1/configs").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers.contains("content-type: application/json"));
    assert_eq!(body, "{\"items\":[],\"version\":\"v1\"}\n");

    s.store.upsert(config("ns/b", "r"));
    s.store.upsert(config("ns/a", "r"));
    s.store.upsert(config("zz/a", "r"));
    let (_, _, body) = get(&s, "/api/v1/configs").await;
    let list: ConfigList = serde_json::from_str(&body).unwrap();
    let names: Vec<_> = list.items.iter().map(|c| c.admin.name.as_str()).collect();
    assert_eq!(names, ["ns/a", "ns/b", "zz/a"], "sorted by id");
    let (_, _, body) = get(&s, "/api/v1/configs/ns").await;
    assert_eq!(serde_json::from_str::<ConfigList>(&body).unwrap().items.len(), 2);
    let (_, _, body) = get(&s, "/api/v1/configs/nope").await;
    assert_eq!(body, "{\"items\":[],\"version\":\"v1\"}\n");

    let (_, _, body) = get(&s, "/api/v1/configs/ns/a").await;
    assert_eq!(serde_json::from_str::<StunnerConfig>(&body).unwrap(), config("ns/a", "r"));
    assert!(body.ends_with("}\n"));

    let (status, headers, body) = get(&s, "/api/v1/configs/ns/missing").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(headers.contains("content-type: application/json"));
    assert!(body.contains("onfig not found"), "stunnerctl.sh greps for this");
    let err: ApiError = serde_json::from_str(&body).unwrap();
    assert_eq!(err, ApiError { code: 404, message: "Config not found for ID ns/missing".into() });

    let (status, headers, body) = get(&s, "/api/v1/configs/ns/a?watch=maybe").await;
    assert_eq!(status, "HTTP/1.1 400 Bad Request");
    assert!(headers.contains("content-type: text/plain"));
    assert!(body.starts_with("Invalid format for parameter watch:"), "{body}");
    let (status, _, _) = get(&s, "/api/v1/configs?watch=true&watch=true").await;
    assert_eq!(status, "HTTP/1.1 400 Bad Request");

    for path in ["/", "/api/v1/configs/", "/api/v1/configs/a/b/c", "/api/v2/configs"] {
        let (status, headers, body) = get(&s, path).await;
        assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
        assert!(headers.contains("content-type: text/plain"));
        assert_eq!(body, "404 page not found\n");
    }
    let (status, _, body) = raw(
        s.addr,
        "POST /api/v1/configs HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    assert_eq!(body, "");

    let (_, _, body) = get(&s, "/api/v1/license").await;
    assert_eq!(serde_json::from_str::<LicenseStatus>(&body).unwrap(), LicenseStatus::default());
}

#[tokio::test]
async fn malformed_upgrades_get_upstream_statuses_and_leave_nothing_behind() {
    let s = start(ServerSettings::default()).await;
    let ok_key = "dGhlIHNhbXBsZSBub25jZQ==";
    let cases = [
        ("Connection: close\r\n", "400 Bad Request", "'upgrade' token not found"),
        ("Connection: Upgrade\r\n", "426 Upgrade Required", "'websocket' token not found"),
        (
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 8\r\n",
            "400 Bad Request",
            "unsupported version",
        ),
        (
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nOrigin: http://elsewhere:1\r\n",
            "403 Forbidden",
            "origin not allowed",
        ),
        (
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n",
            "400 Bad Request",
            "Sec-WebSocket-Key",
        ),
    ];
    for (headers, want_status, want_text) in cases {
        let req = format!("GET /api/v1/configs/ns/gw?watch=true HTTP/1.1\r\nHost: {}\r\n{headers}\r\n", s.addr);
        let (status, resp_headers, body) = raw(s.addr, &req).await;
        assert_eq!(status, format!("HTTP/1.1 {want_status}"), "{headers}");
        assert!(resp_headers.contains("sec-websocket-version: 13"));
        assert!(body.contains(want_text), "{body}");
    }
    // A good handshake without watch=true is a plain GET.
    let req = format!(
        "GET /api/v1/configs/ns/gw HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {ok_key}\r\n\r\n",
        s.addr
    );
    let (status, _, _) = raw(s.addr, &req).await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    // None of the refused requests subscribed: publishing still reaches a real client at once.
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    s.store.upsert(config("ns/gw", "r"));
    recv(&mut ws).await;
    assert_eq!(s.metrics.clients.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get(), 1);
}

#[tokio::test]
async fn a_client_that_never_reads_does_not_stop_100_others() {
    let s = start(with_write_timeout(Duration::from_millis(500))).await;
    // A stalled client: completes the handshake, then never reads a byte.
    let stalled = unread_watch(s.addr).await;
    let mut healthy = Vec::new();
    for _ in 0..100 {
        healthy.push(watch(&s, "/api/v1/configs/ns/gw?watch=true").await);
    }
    // Big configs fill the stalled client's socket buffers within a few versions.
    let big = "x".repeat(128 * 1024);
    for round in 0..20 {
        let mut c = config("ns/gw", &format!("r{round}"));
        c.auth.credentials.insert("padding".into(), big.clone());
        s.store.upsert(c);
        for ws in healthy.iter_mut() {
            // Each healthy client sees every version or a later one, never gets stuck.
            let got = recv(ws).await;
            assert!(got.auth.realm.trim_start_matches('r').parse::<u32>().unwrap() >= round);
        }
    }
    // The stalled client was disconnected for not reading.
    let dropped = &s.metrics.dropped_clients;
    for _ in 0..100 {
        if dropped.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(dropped.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get(), 1);
    drop(stalled);
}

#[tokio::test]
async fn connections_past_the_limit_are_refused_with_a_reason() {
    let s = start(ServerSettings { max_connections: 2, ..Default::default() }).await;
    let _a = watch(&s, "/api/v1/configs?watch=true").await;
    let _b = watch(&s, "/api/v1/configs?watch=true").await;
    let (status, headers, body) = get(&s, "/api/v1/configs").await;
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(headers.contains("content-type: application/json"));
    let err: ApiError = serde_json::from_str(&body).unwrap();
    assert_eq!(err.code, 503);
    assert!(err.message.contains("limit 2"), "{}", err.message);
    assert_eq!(s.metrics.rejected_connections.get(), 1);
    drop(_a);
    // The slot comes back once a client leaves.
    for _ in 0..100 {
        if get(&s, "/api/v1/configs").await.0 == "HTTP/1.1 200 OK" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("slot not released");
}

#[tokio::test]
async fn shutdown_closes_every_stream_with_a_close_frame() {
    let s = start(ServerSettings::default()).await;
    let mut streams = [
        watch(&s, "/api/v1/configs?watch=true").await,
        watch(&s, "/api/v1/configs/ns?watch=true").await,
        watch(&s, "/api/v1/configs/ns/gw?watch=true").await,
    ];
    s.shutdown.cancel();
    for ws in streams.iter_mut() {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap().unwrap().unwrap();
        assert!(matches!(msg, Message::Close(None)), "{msg:?}");
    }
    tokio::time::timeout(Duration::from_secs(10), s.task).await.expect("server returns").unwrap();
    assert!(TcpStream::connect(s.addr).await.is_err(), "the listener is closed");
}

/// Shutdown waits for every watch session, also one still writing to a client that stopped
/// reading (its write timeout ends it): when the server returns, no session is left.
#[tokio::test]
async fn shutdown_waits_for_a_session_stuck_writing() {
    let s = start(with_write_timeout(Duration::from_secs(2))).await;
    let mut c = config("ns/gw", "r");
    // Far more than the server's send buffer and the client's receive buffer hold.
    c.auth.credentials.insert("padding".into(), "x".repeat(2 << 20));
    s.store.upsert(c);
    let stalled = unread_watch(s.addr).await;
    let open = || s.metrics.clients.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get();
    for _ in 0..100 {
        if open() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(open(), 1, "the session started (and is stuck writing its first config)");
    s.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(20), s.task).await.expect("server returns").unwrap();
    assert_eq!(open(), 0, "no watch session outlives the server");
    drop(stalled);
}

/// Asks for a watch of ns/gw on a socket with a small receive buffer and reads nothing back
/// (not even the 101): the server's writes to it block after a few frames.
async fn unread_watch(addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut sock = socket.connect(addr).await.unwrap();
    let req = format!(
        "GET /api/v1/configs/ns/gw?watch=true HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    sock
}

/// Opens a watch by hand, sending `early` in the same write as the request. Returns the socket
/// and what followed the 101 response's headers.
async fn raw_watch(addr: SocketAddr, path: &str, early: &[u8]) -> (TcpStream, Vec<u8>) {
    upgrade(TcpStream::connect(addr).await.unwrap(), addr, path, early).await
}

/// [`raw_watch`] on a connected socket.
async fn upgrade(mut sock: TcpStream, addr: SocketAddr, path: &str, early: &[u8]) -> (TcpStream, Vec<u8>) {
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
    .into_bytes();
    request.extend_from_slice(early);
    sock.write_all(&request).await.unwrap();
    let mut got = Vec::new();
    let end = read_until(&mut sock, &mut got, |b| b.windows(4).position(|w| w == b"\r\n\r\n")).await;
    let head = String::from_utf8_lossy(&got[..end]).to_string();
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.to_lowercase().contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="), "{head}");
    let rest = got.split_off(end + 4);
    (sock, rest)
}

/// Reads into `got` until `done` finds what it looks for; panics if the stream ends or stays
/// silent for 10 s first.
async fn read_until(sock: &mut TcpStream, got: &mut Vec<u8>, done: impl Fn(&[u8]) -> Option<usize>) -> usize {
    loop {
        if let Some(at) = done(got) {
            return at;
        }
        let mut chunk = [0u8; 1024];
        let Ok(n) = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk)).await else {
            panic!("nothing more in time; got {got:?}");
        };
        let n = n.unwrap();
        assert!(n > 0, "stream ended; got {got:?}");
        got.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn frames_sent_with_the_request_are_read_and_a_broken_frame_closes_with_1002() {
    let s = start(ServerSettings::default()).await;
    // A masked Ping in the same packet as the upgrade request: hyper read it with the request.
    let ping = [0x89, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2];
    let (mut sock, mut got) = raw_watch(s.addr, "/api/v1/configs/ns/gw?watch=true", &ping).await;
    let find = |needle: &'static [u8]| move |b: &[u8]| b.windows(needle.len()).position(|w| w == needle);
    read_until(&mut sock, &mut got, find(b"\x8a\x02hi")).await;
    // An unmasked frame from a client breaks RFC 6455: a Close with 1002, then the end.
    sock.write_all(b"\x89\x00").await.unwrap();
    read_until(&mut sock, &mut got, find(b"\x88\x02\x03\xea")).await;
    let mut rest = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut rest)).await.unwrap().unwrap();
    assert_eq!(n, 0, "the server closed the connection");
}

#[tokio::test]
async fn oversized_messages_end_the_session_and_closes_are_echoed() {
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let s = start(ServerSettings::default()).await;
    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    ws.send(Message::Binary(vec![0u8; 5000].into())).await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(&msg, Message::Close(Some(f)) if f.code == CloseCode::Size), "{msg:?}");

    let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    ws.send(Message::Close(Some(CloseFrame { code: CloseCode::Away, reason: "".into() }))).await.unwrap();
    let msg = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap().unwrap().unwrap();
    assert!(matches!(&msg, Message::Close(Some(f)) if f.code == CloseCode::Away), "{msg:?}");
}

/// Server settings whose watch sessions give up on a client that stops reading after `timeout`.
fn with_write_timeout(timeout: Duration) -> ServerSettings {
    ServerSettings {
        session: stunner_gateway_cds::session::Settings { write_timeout: timeout, ..Default::default() },
        ..Default::default()
    }
}

/// The tasks alive on the test's runtime, the server's among them.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current().metrics().num_alive_tasks()
}

/// The tasks alive once they are down to `bound` or 2 s have passed: each connection's own
/// tasks (its HTTP server, its upgrade) end a moment after its hand-over to a shard.
async fn tasks_settled_within(bound: usize) -> usize {
    for _ in 0..100 {
        if alive_tasks() <= bound {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    alive_tasks()
}

/// Watch connections are served by the fan-out's shard loops, not a task each: a hundred
/// more watchers leave the runtime's task count where it was.
#[tokio::test]
async fn watchers_are_served_without_a_task_each() {
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/gw", "r0"));
    let mut first = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    recv(&mut first).await;
    let before = alive_tasks();
    let mut more = Vec::new();
    for _ in 0..100 {
        let mut ws = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
        recv(&mut ws).await;
        more.push(ws);
    }
    let tasks = tasks_settled_within(before + 2).await;
    assert!(tasks <= before + 2, "{tasks} tasks for 101 watchers, {before} for one");
    s.store.upsert(config("ns/gw", "r1"));
    for ws in more.iter_mut().chain([&mut first]) {
        assert_eq!(recv(ws).await.auth.realm, "r1");
    }
}

/// An update storm (every watched config changing at once) is fanned out by the shards
/// themselves: the server holds no task per watched config (one would wake per change, a wake
/// per watcher in a storm over configs with one watcher each, issue #48), however many configs
/// are watched, and every watcher still gets its config's new version.
#[tokio::test]
async fn an_update_storm_over_many_configs_wakes_no_task_per_config() {
    const CONFIGS: usize = 200;
    let s = start(ServerSettings::default()).await;
    let id = |i: usize| format!("ns/gw{i}");
    let mut watchers = Vec::new();
    let mut before = 0;
    for i in 0..CONFIGS {
        s.store.upsert(config(&id(i), "r0"));
        let mut ws = watch(&s, &format!("/api/v1/configs/{}?watch=true", id(i))).await;
        assert_eq!(recv(&mut ws).await.auth.realm, "r0");
        watchers.push(ws);
        if i == 0 {
            // The server's own tasks, and whatever one watched config costs.
            before = alive_tasks();
        }
    }
    let watched = tasks_settled_within(before + 2).await;
    assert!(watched <= before + 2, "{watched} tasks for {CONFIGS} watched configs, {before} for one");
    for i in 0..CONFIGS {
        s.store.upsert(config(&id(i), "r1"));
    }
    for ws in watchers.iter_mut() {
        assert_eq!(recv(ws).await.auth.realm, "r1");
    }
    assert!(alive_tasks() <= before + 2, "{} tasks after the storm, {before} before", alive_tasks());
}

/// A watcher that stops reading is not sent every version it missed: once it reads again it
/// gets the frame that was on its way and then the latest version, never the ones between.
#[tokio::test]
async fn a_watcher_that_falls_behind_catches_up_with_the_latest_version() {
    let s = start(with_write_timeout(Duration::from_secs(30))).await;
    let mut slow = unread_watch(s.addr).await;
    let mut healthy = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    let big = "x".repeat(256 * 1024);
    for round in 0..20 {
        let mut c = config("ns/gw", &format!("r{round}"));
        c.auth.credentials.insert("padding".into(), big.clone());
        s.store.upsert(c);
        assert_eq!(recv(&mut healthy).await.auth.realm, format!("r{round}"));
    }
    // Now it reads: what was on its way, then the latest version, never each one between.
    let mut got = Vec::new();
    let latest = read_until(&mut slow, &mut got, |b| find(b, b"\"realm\":\"r19\"")).await;
    assert_eq!(find(&got[latest + 1..], b"\"realm\":\"r"), None, "the latest version comes last");
    // Every version it was sent, in order: those the socket took before it blocked (r0, r1,
    // ... as they came), then the latest alone.
    let marker = b"\"realm\":\"r";
    let versions: Vec<usize> = (0..got.len())
        .filter(|&at| got[at..].starts_with(marker))
        .map(|at| {
            let digits = got[at + marker.len()..].iter().take_while(|b| b.is_ascii_digit()).count();
            std::str::from_utf8(&got[at + marker.len()..][..digits]).unwrap().parse().unwrap()
        })
        .collect();
    let (&last, before) = versions.split_last().expect("versions sent");
    assert_eq!(last, 19, "{versions:?}");
    assert_eq!(
        before,
        (0..before.len()).collect::<Vec<_>>(),
        "after the socket blocked, only the latest: {versions:?}"
    );
    assert!(before.len() < 19, "the socket never blocked: the test did not test ({versions:?})");
    // And that is all the server sent it: its count of frames that went out whole (counted
    // just after the write), less the healthy watcher's twenty.
    let pushed = || s.metrics.pushes.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get() - 20;
    for _ in 0..200 {
        if pushed() >= versions.len() as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(pushed(), versions.len() as u64, "frames the server pushed to the slow watcher");
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A client that never answers our Pings is dropped after three Ping intervals; one that
/// answers stays.
#[tokio::test]
async fn silent_clients_are_pinged_then_dropped() {
    let s = start(ServerSettings {
        session: stunner_gateway_cds::session::Settings {
            ping_interval: Duration::from_millis(100),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let (mut silent, mut got) = raw_watch(s.addr, "/api/v1/configs/ns/gw?watch=true", b"").await;
    let mut alive = watch(&s, "/api/v1/configs/ns/gw?watch=true").await;
    // tungstenite answers each Ping as it reads: this client reads all along.
    let alive = tokio::spawn(async move { recv(&mut alive).await });
    read_until(&mut silent, &mut got, |b| find(b, b"\x89\x09keepalive")).await;
    // The stream ends (no Close: a silent client is not waited for).
    let mut rest = Vec::new();
    let ended = tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut rest)).await;
    assert!(ended.is_ok(), "the silent client was let go");
    assert_eq!(s.metrics.dropped_clients.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get(), 1);
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.store.upsert(config("ns/gw", "r"));
    assert_eq!(alive.await.unwrap().auth.realm, "r", "the client that answers is still served");
}

/// The process's resident memory, in KiB (for the record: the outbox's own count is what the
/// test holds to).
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue #56: a client that sends Pings without pause and reads a little now and then, enough
/// to take a frame within the write timeout, for several write timeouts. Each read of its
/// Pings asks for a Pong behind the write that blocks; the server keeps only the latest, so
/// what waits for the client stays a frame and a Pong, and the client is served on.
#[tokio::test]
async fn a_client_that_pings_on_and_reads_slowly_holds_a_frame_and_a_pong_at_most() {
    // Long enough for the client to drain half the server's send buffer (256 KiB, doubled by
    // Linux), after which the kernel says the socket is writable again.
    const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
    // The frame on its way and one Pong (125 bytes of payload, the most a Ping carries).
    const BOUND: i64 = 2 * 127;
    let s = start(with_write_timeout(WRITE_TIMEOUT)).await;
    s.store.upsert(config("ns/gw", "r"));
    let (sock, _) = raw_watch_with_receive_buffer(s.addr, 4096).await;
    let (mut rx, mut tx) = sock.into_split();
    let ping = [&[0x89, 0x80 | 125, 0, 0, 0, 0][..], &[b'p'; 125]].concat();
    let pings = ping.repeat(64);
    let pinger = tokio::spawn(async move { while tx.write_all(&pings).await.is_ok() {} });
    let held = || s.metrics.outbox_bytes.get();
    let rss_before = rss_kib();
    let (mut most, mut waited, mut samples, mut read) = (0, 0, 0, 0);
    // At most 800 KiB/s: enough for the write timeout, far less than the Pongs the client asks.
    let mut chunk = [0u8; 8192];
    let started = tokio::time::Instant::now();
    while started.elapsed() < WRITE_TIMEOUT * 3 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let n = tokio::time::timeout(Duration::from_secs(10), rx.read(&mut chunk)).await.expect("a Pong in time");
        let n = n.expect("the connection is open");
        assert!(n > 0, "the server closed the connection after {read} bytes, {:?}", started.elapsed());
        read += n;
        let now = held();
        most = most.max(now);
        waited += usize::from(now > 0);
        samples += 1;
    }
    pinger.abort();
    let rss_after = rss_kib();
    eprintln!(
        "read {read} bytes in {:?}; outbox: at most {most} bytes, waiting at {waited} of {samples} samples; RSS {rss_before} -> {rss_after} KiB",
        started.elapsed()
    );
    assert!(waited > 0, "the server's writes never blocked: the test did not test");
    assert_eq!(s.metrics.dropped_clients.get_or_create(&stunner_gateway_cds::metrics::WEBSOCKET).get(), 0);
    assert!(most <= BOUND, "{most} bytes waited for one client, more than a frame and a Pong");
    drop(rx);
    for _ in 0..100 {
        if held() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(held(), 0, "the connection's outbox went with it");
}

/// [`raw_watch`] of ns/gw on a socket with a receive buffer of `bytes` (the server's writes to
/// it block as soon as the client stops reading for a moment).
async fn raw_watch_with_receive_buffer(addr: SocketAddr, bytes: u32) -> (TcpStream, Vec<u8>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(bytes).unwrap();
    let sock = socket.connect(addr).await.unwrap();
    upgrade(sock, addr, "/api/v1/configs/ns/gw?watch=true", b"").await
}
