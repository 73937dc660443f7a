//! The reconnecting watch over both transports against the real server: each change is seen
//! once, across dropped connections and server restarts; gRPC resumes from the versions it
//! holds and acknowledges or rejects what it was sent.

mod common;

use common::{Relay, Server, config};
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway_client::cds::{
    CdsClient, ClientError, ClientInfo, ConfigScope, Transport, WatchEvent, WatchSettings, Watcher,
};
use tokio::net::TcpListener;

const BOTH: [Transport; 2] = [Transport::WebSocket, Transport::Grpc];

fn fast(name: &str) -> WatchSettings {
    WatchSettings {
        ping_period: Duration::from_millis(200),
        pong_wait: Duration::from_secs(2),
        retry_initial: Duration::from_millis(20),
        retry_max: Duration::from_millis(200),
        client_name: name.into(),
        ..Default::default()
    }
}

fn client(url: &str, transport: Transport, name: &str) -> CdsClient {
    CdsClient::new(url).unwrap().with_transport(transport).with_watch_settings(fast(name))
}

/// The next config, skipping disconnections (at most 50 of them, each within 10 s).
async fn next_config(w: &mut Watcher) -> StunnerConfig {
    for _ in 0..50 {
        match tokio::time::timeout(Duration::from_secs(10), w.next()).await.expect("an event in time") {
            WatchEvent::Config(c) => return *c,
            WatchEvent::Disconnected { .. } => continue,
            WatchEvent::Rejected { reason } => panic!("rejected: {reason}"),
        }
    }
    panic!("no config after 50 disconnections");
}

/// The next event that is not a config: a disconnection.
async fn next_disconnection(w: &mut Watcher) -> ClientError {
    match tokio::time::timeout(Duration::from_secs(10), w.next()).await.expect("an event in time") {
        WatchEvent::Disconnected { error, .. } => error,
        other => panic!("expected a disconnection, got {other:?}"),
    }
}

fn with_realm(id: &str, realm: &str) -> StunnerConfig {
    let mut c = config(id);
    c.auth.realm = realm.into();
    c
}

/// Polls the server's client table (at most 100 times) until `done` holds for it.
async fn table_until(s: &Server, done: impl Fn(&[ClientInfo]) -> bool) -> Vec<ClientInfo> {
    let rest = CdsClient::new(&s.url()).unwrap();
    let mut last = Vec::new();
    for _ in 0..100 {
        last = rest.clients().await.unwrap().clients;
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the client table never got there: {last:#?}");
}

#[tokio::test]
async fn a_dropped_connection_redelivers_nothing() {
    for transport in BOTH {
        let s = Server::start().await;
        s.store.upsert(config("ns1/gw-a"));
        s.store.upsert(config("ns1/gw-b"));
        let relay = Relay::start(s.addr).await;
        let mut w = client(&relay.url(), transport, "relayed").watch(&ConfigScope::Namespace("ns1".into()));
        let mut got = vec![next_config(&mut w).await.admin.name, next_config(&mut w).await.admin.name];
        got.sort();
        assert_eq!(got, ["ns1/gw-a", "ns1/gw-b"], "{transport}");

        relay.cut();
        next_disconnection(&mut w).await;
        // Whatever the new connection is sent first, the caller's next config is the change:
        // the two configs it already holds are not shown again.
        s.store.upsert(with_realm("ns1/gw-b", "changed"));
        let next = next_config(&mut w).await;
        assert_eq!((next.admin.name.as_str(), next.auth.realm.as_str()), ("ns1/gw-b", "changed"), "{transport}");
        s.store.upsert(config("ns1/gw-c"));
        assert_eq!(next_config(&mut w).await.admin.name, "ns1/gw-c", "{transport}");
    }
}

#[tokio::test]
async fn a_server_restart_sends_only_what_changed_meanwhile() {
    for transport in BOTH {
        let s = Server::start().await;
        s.store.upsert(config("ns1/gw-a"));
        s.store.upsert(config("ns1/gw-b"));
        let mut w = client(&s.url(), transport, "restarted").watch(&ConfigScope::All);
        next_config(&mut w).await;
        next_config(&mut w).await;

        let (addr, store) = s.stop().await;
        next_disconnection(&mut w).await;
        store.upsert(with_realm("ns1/gw-b", "while-away"));
        let _s = Server::start_on(TcpListener::bind(addr).await.unwrap(), store.clone(), Default::default());
        let next = next_config(&mut w).await;
        assert_eq!((next.admin.name.as_str(), next.auth.realm.as_str()), ("ns1/gw-b", "while-away"), "{transport}");
        store.upsert(config("ns2/gw-c"));
        assert_eq!(next_config(&mut w).await.admin.name, "ns2/gw-c", "{transport}: gw-a was not sent again");
    }
}

#[tokio::test]
async fn grpc_resume_means_the_server_sends_nothing_held() {
    use stunner_gateway_cds::metrics::GRPC;
    use stunner_gateway_cds::{CdsMetrics, ConfigStore};
    let metrics = CdsMetrics::default();
    let store = std::sync::Arc::new(ConfigStore::new(metrics.clone()));
    let s = Server::start_on(TcpListener::bind("127.0.0.1:0").await.unwrap(), store, Default::default());
    s.store.upsert(config("ns1/gw-a"));
    s.store.upsert(config("ns1/gw-b"));
    let relay = Relay::start(s.addr).await;
    let mut w = client(&relay.url(), Transport::Grpc, "resumer").watch(&ConfigScope::All);
    next_config(&mut w).await;
    next_config(&mut w).await;
    let pushes = || metrics.pushes.get_or_create(&GRPC).get();
    assert_eq!(pushes(), 2);

    relay.cut();
    next_disconnection(&mut w).await;
    s.store.upsert(config("ns1/gw-z"));
    assert_eq!(next_config(&mut w).await.admin.name, "ns1/gw-z");
    // The stream sends in order, so anything of the snapshot would have gone out before gw-z:
    // the new stream carried gw-z alone, not the two configs the watch told it it holds.
    assert_eq!(pushes(), 3);
    let table = table_until(&s, |t| t.len() == 1 && t[0].configs.iter().any(|k| k.id.name == "gw-z")).await;
    assert_eq!(table[0].client_name, "resumer");
}

#[tokio::test]
async fn grpc_acks_and_rejections_reach_the_client_table() {
    let s = Server::start().await;
    s.store.upsert(config("ns1/gw-a"));
    let id = ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: Some("node-1".into()) };
    let mut w = client(&s.url(), Transport::Grpc, "acker").watch(&id);
    next_config(&mut w).await;
    let _ = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
    let table = table_until(&s, |t| t.iter().any(|c| c.configs.iter().any(|k| !k.version_acked.is_empty()))).await;
    let row = &table[0];
    assert_eq!((row.transport.as_str(), row.node.as_str(), row.scope.as_str()), ("grpc", "node-1", "ns1/gw-a"));
    assert_eq!(row.configs[0].version_acked, row.configs[0].version_sent);

    // A config the dataplane would refuse: rejected with the validation error.
    let mut bad = config("ns1/gw-a");
    bad.version = "v2".into();
    s.store.upsert(bad);
    match tokio::time::timeout(Duration::from_secs(10), w.next()).await.unwrap() {
        WatchEvent::Rejected { reason } => assert!(reason.contains("unsupported API version"), "{reason}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let table = table_until(&s, |t| t.iter().any(|c| c.configs.iter().any(|k| !k.version_rejected.is_empty()))).await;
    let state = &table[0].configs[0];
    assert_eq!(state.version_rejected, state.version_sent);
    assert!(state.error.contains("unsupported API version"), "{state:?}");
    assert_ne!(state.version_acked, state.version_rejected, "the good version stays acknowledged");

    // A caller that cannot apply a config rejects it itself.
    s.store.upsert(with_realm("ns1/gw-a", "new"));
    assert_eq!(next_config(&mut w).await.auth.realm, "new");
    w.reject("listener port in use");
    let _ = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
    let table =
        table_until(&s, |t| t.iter().any(|c| c.configs.iter().any(|k| k.error == "listener port in use"))).await;
    assert_eq!(table[0].configs[0].version_rejected, table[0].configs[0].version_sent);
}

#[tokio::test]
async fn grpc_one_shot_calls_match_rest() {
    let s = Server::start().await;
    s.store.upsert(config("ns1/gw-a"));
    s.store.upsert(config("ns2/gw-b"));
    let rest = CdsClient::new(&s.url()).unwrap();
    let grpc = CdsClient::new(&s.url()).unwrap().with_transport(Transport::Grpc);
    for scope in [
        ConfigScope::All,
        ConfigScope::Namespace("ns2".into()),
        ConfigScope::Namespace("none".into()),
        ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: Some("n".into()) },
    ] {
        assert_eq!(grpc.configs(&scope).await.unwrap(), rest.configs(&scope).await.unwrap(), "{scope:?}");
    }
    let missing = ConfigScope::Gateway { id: ConfigId::new("ns1", "nope"), node: None };
    let err = grpc.configs(&missing).await.unwrap_err();
    assert_eq!(err.to_string(), rest.configs(&missing).await.unwrap_err().to_string());
    assert_eq!(grpc.license().await.unwrap(), rest.license().await.unwrap());
    assert_eq!(grpc.clients().await.unwrap(), rest.clients().await.unwrap());
}

#[tokio::test]
async fn grpc_unreachable_reads_like_websocket() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("127.0.0.1:{port}");
    for transport in BOTH {
        let err = client(&url, transport, "").configs(&ConfigScope::All).await.unwrap_err();
        assert!(matches!(err, ClientError::Unreachable { .. }), "{transport}: {err}");
        let mut w = client(&url, transport, "").watch(&ConfigScope::All);
        let err = next_disconnection(&mut w).await;
        assert!(matches!(err, ClientError::Unreachable { .. }), "{transport}: {err}");
    }
}
