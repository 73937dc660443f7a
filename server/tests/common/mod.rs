//! What the CDS test suites share: a server on loopback and sample configs.

#![allow(dead_code)] // each test crate uses its own subset

use std::net::SocketAddr;
use std::sync::Arc;
use stunner_gateway::config::{ListenerConfig, StunnerConfig};
use stunner_gateway_cds::{CdsMetrics, ConfigStore, ServerSettings, serve};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub addr: SocketAddr,
    pub store: Arc<ConfigStore>,
    pub metrics: CdsMetrics,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<()>,
}

/// Serves a fresh store on an ephemeral loopback port.
pub async fn start(settings: ServerSettings) -> Server {
    let metrics = CdsMetrics::default();
    let store = Arc::new(ConfigStore::new(metrics.clone()));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve(listener, store.clone(), settings, axum::Router::new(), shutdown.clone()));
    Server { addr, store, metrics, shutdown, task }
}

/// A config with one UDP listener; `realm` makes versions tell apart.
pub fn config(id: &str, realm: &str) -> StunnerConfig {
    let mut c = StunnerConfig::zero(id);
    c.auth.realm = realm.into();
    c.listeners.push(ListenerConfig {
        name: format!("{id}/udp"),
        protocol: "TURN-UDP".into(),
        addr: "$STUNNER_ADDR".into(),
        port: 3478,
        ..Default::default()
    });
    c
}
