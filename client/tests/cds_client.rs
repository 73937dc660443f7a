//! The client library against the real CDS server: typed GETs, and watches that reconnect and
//! keep themselves alive.

mod common;

use common::{Server, config};
use futures_util::StreamExt;
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway_client::cds::{CdsClient, ClientError, ConfigScope, Timeouts, WatchEvent, WatchSettings};
use tokio::net::TcpListener;

fn fast() -> WatchSettings {
    WatchSettings {
        ping_period: Duration::from_millis(100),
        pong_wait: Duration::from_secs(1),
        retry_initial: Duration::from_millis(20),
        retry_max: Duration::from_millis(200),
        ..Default::default()
    }
}

/// The next event within 10 s.
async fn next(watcher: &mut stunner_gateway_client::cds::Watcher) -> WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), watcher.next()).await.expect("an event in time")
}

/// Skips disconnections until a config arrives.
async fn next_config(watcher: &mut stunner_gateway_client::cds::Watcher) -> stunner_gateway::config::StunnerConfig {
    loop {
        match next(watcher).await {
            WatchEvent::Config(c) => return *c,
            WatchEvent::Disconnected { .. } => continue,
            WatchEvent::Rejected { reason } => panic!("rejected: {reason}"),
        }
    }
}

#[tokio::test]
async fn typed_gets() {
    let s = Server::start().await;
    s.store.upsert(config("ns1/gw-a"));
    s.store.upsert(config("ns2/gw-b"));
    let client = CdsClient::new(&s.url()).unwrap();
    assert_eq!(client.configs(&ConfigScope::All).await.unwrap(), [config("ns1/gw-a"), config("ns2/gw-b")]);
    assert_eq!(client.configs(&ConfigScope::Namespace("ns2".into())).await.unwrap(), [config("ns2/gw-b")]);
    assert!(client.configs(&ConfigScope::Namespace("none".into())).await.unwrap().is_empty());
    let one = ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: Some("n".into()) };
    assert_eq!(client.configs(&one).await.unwrap(), [config("ns1/gw-a")]);
    let missing = ConfigScope::Gateway { id: ConfigId::new("ns1", "nope"), node: None };
    assert!(matches!(client.configs(&missing).await, Err(ClientError::GatewayNotFound { id, .. }) if id == "ns1/nope"));
    assert_eq!(client.license().await.unwrap(), Default::default());
    assert!(matches!(client.statuses().await, Err(ClientError::NotServed { .. })));
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    // Accepts connections (the kernel does, from the backlog) but never reads or writes.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let timeouts = Timeouts { connect: Duration::from_secs(5), request: Duration::from_millis(200) };
    let client = CdsClient::new(&addr.to_string()).unwrap().with_timeouts(timeouts);
    let err = client.license().await.unwrap_err();
    assert_eq!(err.to_string(), format!("the config discovery server at http://{addr} did not answer within 200ms"));
    drop(listener);
}

#[tokio::test]
async fn watch_reconnects_after_a_server_restart() {
    let s = Server::start().await;
    s.store.upsert(config("ns1/gw-a"));
    let client = CdsClient::new(&s.url()).unwrap().with_watch_settings(fast());
    let mut watcher = client.watch(&ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: None });
    assert_eq!(watcher.url().as_str(), format!("ws://{}/api/v1/configs/ns1/gw-a?watch=true", s.addr));
    assert_eq!(next_config(&mut watcher).await, config("ns1/gw-a").normalized().unwrap());

    // The server goes away: the watch says so and keeps trying.
    let (addr, store) = s.stop().await;
    let WatchEvent::Disconnected { error, .. } = next(&mut watcher).await else { panic!("a disconnection") };
    assert!(matches!(error, ClientError::Closed { .. } | ClientError::Protocol { .. }), "{error}");
    let WatchEvent::Disconnected { error, retry_in } = next(&mut watcher).await else { panic!("a failed retry") };
    assert!(matches!(error, ClientError::Unreachable { .. }), "{error}");
    assert!(retry_in <= Duration::from_millis(200), "bounded backoff: {retry_in:?}");

    // Back on the same port with a newer config: the watch picks it up by itself.
    let mut newer = config("ns1/gw-a");
    newer.admin.loglevel = "all:DEBUG".into();
    store.upsert(newer.clone());
    let _s = Server::start_on(TcpListener::bind(addr).await.unwrap(), store, Default::default());
    assert_eq!(next_config(&mut watcher).await, newer.normalized().unwrap());
}

#[tokio::test]
async fn a_config_many_times_the_read_buffer_arrives_whole() {
    let s = Server::start().await;
    let mut big = config("ns1/gw-a");
    // 8,000 endpoints: ~100 KiB of JSON, a dozen of the watch's 8 KiB reads.
    big.clusters[0].endpoints =
        (0..8000).map(|i| format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)).collect();
    s.store.upsert(big.clone());
    let client = CdsClient::new(&s.url()).unwrap().with_watch_settings(fast());
    let mut watcher = client.watch(&ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: None });
    assert_eq!(next_config(&mut watcher).await, big.normalized().unwrap());
    big.auth.realm = "after".into();
    s.store.upsert(big.clone());
    assert_eq!(next_config(&mut watcher).await, big.normalized().unwrap(), "and the next one after it");
}

#[tokio::test]
async fn quiet_watch_stays_up_because_pings_are_answered() {
    let s = Server::start().await;
    let client = CdsClient::new(&s.url()).unwrap().with_watch_settings(fast());
    let mut events = Box::pin(client.watch(&ConfigScope::All).into_stream());
    // Three times the silence limit without a config: only Pongs keep the connection alive.
    let quiet = tokio::time::timeout(Duration::from_secs(3), events.next()).await;
    assert!(quiet.is_err(), "no event on a healthy quiet watch: {quiet:?}");
    s.store.upsert(config("ns1/gw-a"));
    let event = tokio::time::timeout(Duration::from_secs(10), events.next()).await.unwrap().unwrap();
    assert!(matches!(event, WatchEvent::Config(c) if c.admin.name == "ns1/gw-a"));
}

#[tokio::test]
async fn a_server_that_stops_answering_is_dropped() {
    // Completes the handshake, then never reads again: our Pings go unanswered.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            held.push(tokio_tungstenite::accept_async(tcp).await.unwrap());
        }
    });
    let client = CdsClient::new(&addr.to_string()).unwrap().with_watch_settings(fast());
    let mut watcher = client.watch(&ConfigScope::Namespace("ns1".into()));
    let WatchEvent::Disconnected { error, .. } = next(&mut watcher).await else { panic!("a disconnection") };
    assert!(matches!(error, ClientError::Silent { .. }), "{error}");
    assert!(error.to_string().contains(&format!("at http://{addr} stopped answering")), "{error}");
}

#[tokio::test]
async fn watch_of_a_missing_route_reports_the_refusal() {
    let s = Server::start().await;
    let client = CdsClient::new(&format!("{}/prefix", s.url())).unwrap().with_watch_settings(fast());
    let mut watcher = client.watch(&ConfigScope::All);
    let WatchEvent::Disconnected { error, .. } = next(&mut watcher).await else { panic!("a refusal") };
    assert_eq!(
        error.to_string(),
        format!("GET ws://{}/prefix/api/v1/configs?watch=true failed: 404 Not Found: 404 page not found", s.addr)
    );
}
