//! The credential API over real sockets: the spec's requests (docs/auth-api.md) answered with
//! upstream's statuses, headers and bodies, the routes upstream's router has, the bounds on
//! what a client sends, and the requests counted in the metrics.

use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway_cds::host::LocalNames;
use stunner_gateway_cds::{CdsMetrics, ConfigStore};
use stunner_gateway_operator::admin;
use stunner_gateway_operator::auth::{self, AuthApi, AuthMetrics};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// The quickstart's Gateway as the operator serves it over the CDS (deploy/examples/quickstart).
fn quickstart() -> StunnerConfig {
    serde_json::from_str(
        r#"{"version":"v1","admin":{"name":"stunner/udp-gateway","loglevel":"all:INFO"},
        "auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"password":"pass-1","username":"user-1"}},
        "listeners":[
          {"name":"stunner/udp-gateway/udp-listener","protocol":"TURN-UDP","public_address":"127.0.0.1",
           "public_port":3478,"address":"$STUNNER_ADDR","port":3478,"routes":["stunner/media-plane"]},
          {"name":"stunner/udp-gateway/tcp-listener","protocol":"TURN-TCP","public_address":"127.0.0.1",
           "public_port":3478,"address":"$STUNNER_ADDR","port":3478,"routes":["stunner/media-plane"]}],
        "clusters":[{"name":"stunner/media-plane","type":"STATIC","protocol":"UDP","endpoints":["10.0.0.0/8"]}]}"#,
    )
    .unwrap()
}

struct Api {
    addr: SocketAddr,
    store: Arc<ConfigStore>,
    metrics: AuthMetrics,
    _stop: tokio_util::sync::DropGuard,
}

async fn serve() -> Api {
    let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
    let metrics = AuthMetrics::default();
    let api = AuthApi { store: store.clone(), metrics: metrics.clone(), public_addr: None };
    let listener = admin::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let router = auth::router(Arc::new(api));
    let timeout = Duration::from_secs(2);
    let serving =
        admin::Serving { name: "credential API", header_read_timeout: timeout, local_names: LocalNames::default() };
    tokio::spawn(admin::serve_router_with_limit(listener, router, serving, 4, stop.clone()));
    Api { addr, store, metrics, _stop: stop.drop_guard() }
}

/// A response: status, headers (lower-case names), body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

async fn request(addr: SocketAddr, method: &str, target: &str) -> Response {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        raw
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), io).await.expect("an answer in time");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers =
        lines.filter_map(|l| l.split_once(": ")).map(|(n, v)| (n.to_ascii_lowercase(), v.to_string())).collect();
    Response { status, headers, body: body.to_string() }
}

const JSON: &str = "application/json; charset=UTF-8";
const TEXT: &str = "text/plain; charset=utf-8";
const BOTH: &str = r#"["turn:127.0.0.1:3478?transport=udp","turn:127.0.0.1:3478?transport=tcp"]"#;

#[tokio::test]
async fn the_specs_requests_get_upstreams_answers() {
    let api = serve().await;
    // Before any config: upstream's 500.
    let r = request(api.addr, "GET", "/ice?service=turn").await;
    assert_eq!((r.status, r.body.as_str()), (500, "no STUNner configuration available\n"));
    api.store.upsert(quickstart());

    let ice = format!(
        r#"{{"iceServers":[{{"credential":"pass-1","urls":{BOTH},"username":"user-1"}}],"iceTransportPolicy":"all"}}"#
    ) + "\n";
    let turn = format!(r#"{{"password":"pass-1","ttl":3600,"uris":{BOTH},"username":"user-1"}}"#) + "\n";
    let service = r#""\"service\" must be \"turn\"""#;
    for (target, status, content_type, body) in [
        ("/ice?service=turn&username=u1&ttl=3600", 200, JSON, ice.clone()),
        ("/?service=turn&username=u1&ttl=3600", 200, JSON, turn),
        ("/?service=nope", 400, TEXT, format!("could not generate TURN auth token: {service}\n")),
        ("/ice", 400, TEXT, format!("could not generate ICE auth token: {service}\n")),
        (
            "/?service=turn&namespace=nope",
            404,
            TEXT,
            "could not generate TURN auth token: no valid listener found\n".into(),
        ),
        ("/ice?service=turn&listener=tcp-listener", 200, JSON, ice),
        ("/", 400, TEXT, "Query argument service is required, but not found\n".into()),
        ("/nope", 404, TEXT, "404 page not found\n".into()),
        ("/ice/", 404, TEXT, "404 page not found\n".into()),
    ] {
        let r = request(api.addr, "GET", target).await;
        assert_eq!(
            (r.status, r.header("content-type"), r.body.as_str()),
            (status, Some(content_type), body.as_str()),
            "{target}"
        );
        if content_type == TEXT {
            assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{target}");
        }
    }
    let r =
        request(api.addr, "GET", "/ice?service=turn&namespace=stunner&gateway=udp-gateway&listener=tcp-listener").await;
    assert!(r.body.contains(r#""urls":["turn:127.0.0.1:3478?transport=tcp"]"#), "{}", r.body);
    let r = request(api.addr, "GET", "/ice?service=turn&iceTransportPolicy=relay").await;
    assert!(r.body.contains(r#""iceTransportPolicy":"relay""#), "{}", r.body);
    // Another method on a route: 405 and no body, as gorilla/mux answers.
    for method in ["POST", "PUT", "HEAD"] {
        let r = request(api.addr, method, "/ice?service=turn").await;
        assert_eq!((r.status, r.body.as_str()), (405, ""), "{method}");
    }
}

#[tokio::test]
async fn what_a_client_sends_is_bounded_and_every_request_is_counted() {
    let api = serve().await;
    api.store.upsert(quickstart());
    let long = format!("/ice?service=turn&username={}", "u".repeat(auth::http::MAX_QUERY_BYTES));
    let r = request(api.addr, "GET", &long).await;
    assert_eq!(r.status, 414, "{r:?}");
    // A head past the server's buffer is refused before any handler runs.
    let huge = format!("/ice?service=turn&username={}", "u".repeat(64 * 1024));
    let r = request(api.addr, "GET", &huge).await;
    assert!(r.status == 431 || r.status == 414 || r.status == 400, "{r:?}");
    // The fifth connection of four is refused with a 503.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(tokio::net::TcpStream::connect(api.addr).await.unwrap());
    }
    let r = request(api.addr, "GET", "/ice?service=turn").await;
    assert_eq!(r.status, 503, "{r:?}");
    drop(idle);
    // The slots come back as the server sees the idle connections close: a refusal meanwhile
    // is answered before any handler runs, so it counts in no metric below.
    let mut status = 503;
    for _ in 0..200 {
        status = request(api.addr, "GET", "/?service=turn").await.status;
        if status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, 200, "a slot is free again");
    assert_eq!(request(api.addr, "GET", "/ice?service=x").await.status, 400);
    assert_eq!(request(api.addr, "DELETE", "/").await.status, 405);

    let mut registry = Registry::default();
    api.metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"stunner_gateway_operator_auth_requests_total{endpoint="turn",result="success"} 1"#,
        r#"stunner_gateway_operator_auth_requests_total{endpoint="ice",result="bad_request"} 2"#,
        r#"stunner_gateway_operator_auth_requests_total{endpoint="turn",result="method_not_allowed"} 1"#,
        r#"stunner_gateway_operator_auth_requests_total{endpoint="ice",result="not_found"} 0"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing `{line}` in\n{text}");
    }
}
