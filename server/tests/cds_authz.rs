//! `--cds-authorization=pod` over real sockets: clients connect from other loopback addresses
//! (127.0.0.2, ...), which stand for pod IPs in the dataplane index, and the server decides by
//! the source address as it does in a cluster. 127.0.0.1 is loopback (`kubectl port-forward`).

mod common;

mod pb {
    include!(concat!(env!("OUT_DIR"), "/test_client/stunner.cds.v1.rs"));
}

use common::{Server, config, start};
use futures_util::StreamExt;
use pb::config_discovery_client::ConfigDiscoveryClient;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::cds::{ApiError, ClientList, ConfigId};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::proto::{GetRequest, ListClientsRequest, ListRequest, WatchRequest, WatchStart, watch_request};
use stunner_gateway_cds::ServerSettings;
use stunner_gateway_cds::authz::{Authorizer, DataplaneIndex, DataplanePod, Mode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::Message;
use tonic::Code;
use tonic::transport::{Channel, Endpoint};

const POD_A: &str = "127.0.0.2";
const STRANGER: &str = "127.0.0.3";
const FRESH_POD: &str = "127.0.0.4";

fn pod(ns: &str, name: &str, gw: &str, ip: &str) -> DataplanePod {
    DataplanePod {
        namespace: ns.into(),
        name: name.into(),
        gateway: ConfigId::new(ns, gw),
        host_network: false,
        node: "node-1".into(),
        ips: vec![ip.parse().unwrap()],
    }
}

/// A server in `pod` mode with configs team-a/gw-a and team-b/gw-b; pod gw-a-1 of team-a/gw-a
/// runs at [`POD_A`].
async fn server() -> (Server, Arc<DataplaneIndex>) {
    let index = Arc::new(DataplaneIndex::default());
    index.apply(pod("team-a", "gw-a-1", "gw-a", POD_A));
    let authorizer = Arc::new(Authorizer::new(Mode::Pod, index.clone(), Vec::new()));
    let s = start(ServerSettings { authorizer, ..Default::default() }).await;
    s.store.upsert(config("team-a/gw-a", "a"));
    s.store.upsert(config("team-b/gw-b", "b"));
    (s, index)
}

async fn connect_from(source: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source.parse::<IpAddr>().unwrap(), 0))?;
    socket.connect(to).await
}

/// GET from `source` over a fresh HTTP/1.1 connection: (status code, body).
async fn get_from(source: &str, s: &Server, path: &str) -> (u16, String) {
    let mut stream = connect_from(source, s.addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", s.addr);
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

fn forbidden(body: &str) -> String {
    let e: ApiError = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(e.code, 403);
    e.message
}

async fn grpc_from(source: &'static str, s: &Server) -> ConfigDiscoveryClient<Channel> {
    let addr = s.addr;
    let connector = tower::service_fn(move |_: tonic::transport::Uri| async move {
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(connect_from(source, addr).await?))
    });
    // The authority a client names: the server's, as a pod's stunnerd names the CDS it dialled
    // (these sources are loopback addresses, so the DNS rebinding guard looks at it).
    let channel =
        Endpoint::from_shared(format!("http://{addr}")).unwrap().connect_with_connector(connector).await.unwrap();
    ConfigDiscoveryClient::new(channel)
}

fn id(ns: &str, name: &str) -> stunner_gateway::proto::ConfigId {
    stunner_gateway::proto::ConfigId { namespace: ns.into(), name: name.into() }
}

fn config_scope(ns: &str, name: &str) -> Option<stunner_gateway::proto::Scope> {
    use stunner_gateway::proto::scope;
    Some(stunner_gateway::proto::Scope { kind: Some(scope::Kind::Config(id(ns, name))) })
}

async fn rest_clients(s: &Server) -> ClientList {
    let (code, body) = get_from("127.0.0.1", s, "/api/v1/clients").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls `check` until it holds (bounded: 1000 tries, 10 ms apart).
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..1000 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn http_a_pod_gets_its_gateway_only_and_lists_go_to_loopback() {
    let (s, _index) = server().await;
    let (code, body) = get_from(POD_A, &s, "/api/v1/configs/team-a/gw-a").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(serde_json::from_str::<StunnerConfig>(&body).unwrap().auth.realm, "a");

    let (code, body) = get_from(POD_A, &s, "/api/v1/configs/team-b/gw-b").await;
    assert_eq!(code, 403);
    assert_eq!(forbidden(&body), "127.0.0.2 is not a running dataplane pod of Gateway team-b/gw-b");
    assert!(!body.contains("\"realm\""), "nothing of the config in a refusal");
    let (code, body) = get_from(STRANGER, &s, "/api/v1/configs/team-a/gw-a").await;
    assert_eq!(code, 403, "{body}");

    for path in ["/api/v1/configs", "/api/v1/configs/team-a", "/api/v1/clients"] {
        let (code, body) = get_from(POD_A, &s, path).await;
        assert_eq!(code, 403, "{path}: {body}");
        assert!(forbidden(&body).contains("not from 127.0.0.2"), "{body}");
        let (code, body) = get_from("127.0.0.1", &s, path).await;
        assert_eq!(code, 200, "{path} from loopback: {body}");
    }
    // A watch is refused before the upgrade, with the same JSON.
    let (code, body) = get_from(STRANGER, &s, "/api/v1/configs?watch=true").await;
    assert_eq!(code, 403, "{body}");
}

#[tokio::test]
async fn websocket_watch_of_a_pod_shows_its_identity_in_the_client_table() {
    let (s, _index) = server().await;
    let stream = connect_from(POD_A, s.addr).await.unwrap();
    let url = format!("ws://{}/api/v1/configs/team-a/gw-a?watch=true", s.addr);
    let (mut ws, _) = tokio_tungstenite::client_async(url, stream).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap().unwrap().unwrap();
    let Message::Text(text) = first else { panic!("{first:?}") };
    assert_eq!(serde_json::from_str::<StunnerConfig>(&text).unwrap().auth.realm, "a");
    let list = rest_clients(&s).await;
    assert_eq!(list.clients.len(), 1);
    assert_eq!(list.clients[0].identity, "pod:team-a/gw-a-1");

    let stream = connect_from(POD_A, s.addr).await.unwrap();
    let url = format!("ws://{}/api/v1/configs/team-b/gw-b?watch=true", s.addr);
    let refused = tokio_tungstenite::client_async(url, stream).await.unwrap_err();
    let tokio_tungstenite::tungstenite::Error::Http(resp) = refused else { panic!("{refused:?}") };
    assert_eq!(resp.status(), 403);
    forbidden(std::str::from_utf8(resp.body().as_deref().unwrap()).unwrap());
}

/// A stunnerd that starts before the pod watcher has seen its pod's IP is not refused: its
/// request waits for the index and is served as soon as the pod is indexed.
#[tokio::test]
async fn a_fresh_pod_gets_its_config_once_indexed() {
    let (s, index) = server().await;
    let s = Arc::new(s);
    let request = {
        let s = s.clone();
        tokio::spawn(async move { get_from(FRESH_POD, &s, "/api/v1/configs/team-a/gw-a").await })
    };
    eventually("the request waits for the index", async || index.waiting() > 0).await;
    index.apply(pod("team-a", "gw-a-2", "gw-a", FRESH_POD));
    let (code, body) = request.await.unwrap();
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn grpc_same_rules_with_permission_denied() {
    let (s, _index) = server().await;
    let mut pod_a = grpc_from(POD_A, &s).await;
    let got = pod_a.get(GetRequest { id: Some(id("team-a", "gw-a")), node: String::new() }).await.unwrap();
    assert_eq!(got.into_inner().id, Some(id("team-a", "gw-a")));
    let refused = pod_a.get(GetRequest { id: Some(id("team-b", "gw-b")), node: String::new() }).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    assert_eq!(refused.message(), "127.0.0.2 is not a running dataplane pod of Gateway team-b/gw-b");
    let refused = pod_a.list(ListRequest { scope: None }).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let refused = pod_a.list_clients(ListClientsRequest {}).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);

    // A watch of another Gateway is refused; of its own, served, with its identity in the table.
    let start =
        |scope| WatchRequest { msg: Some(watch_request::Msg::Start(WatchStart { scope, ..Default::default() })) };
    let refused = pod_a
        .watch(
            futures_util::stream::iter([start(config_scope("team-b", "gw-b"))]).chain(futures_util::stream::pending()),
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied);
    let mut updates = pod_a
        .watch(
            futures_util::stream::iter([start(config_scope("team-a", "gw-a"))]).chain(futures_util::stream::pending()),
        )
        .await
        .unwrap()
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), updates.message()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.id, Some(id("team-a", "gw-a")));

    let mut local = grpc_from("127.0.0.1", &s).await;
    assert_eq!(local.list(ListRequest { scope: None }).await.unwrap().into_inner().configs.len(), 2);
    let clients = local.list_clients(ListClientsRequest {}).await.unwrap().into_inner();
    assert_eq!(clients.clients.len(), 1);
    assert_eq!(clients.clients[0].identity, "pod:team-a/gw-a-1");
}
