//! What the client test suites share: the real CDS server on loopback, sample configs, and a
//! way to run the real `stunnerctl` binary.

#![allow(dead_code)] // each test crate uses its own subset

use axum::Router;
use std::net::SocketAddr;
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::config::{ClusterConfig, ListenerConfig, StunnerConfig};
use stunner_gateway_cds::serve::ExtraRoutes;
use stunner_gateway_cds::{CdsMetrics, ConfigStore, ServerSettings, serve};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub struct Server {
    pub addr: SocketAddr,
    pub store: Arc<ConfigStore>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<()>,
}

impl Server {
    /// Serves a fresh store on an ephemeral loopback port.
    pub async fn start() -> Server {
        Self::start_with(Router::new()).await
    }

    /// Like [`Server::start`], with the daemon's `extra` routes (its statuses, its console)
    /// beside the CDS API.
    pub async fn start_with(extra: impl ExtraRoutes + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, Arc::new(ConfigStore::new(CdsMetrics::default())), extra)
    }

    pub fn start_on(listener: TcpListener, store: Arc<ConfigStore>, extra: Router) -> Server {
        Self::serve(listener, store, extra)
    }

    fn serve(listener: TcpListener, store: Arc<ConfigStore>, extra: impl ExtraRoutes + Send + 'static) -> Server {
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(listener, store.clone(), ServerSettings::default(), extra, shutdown.clone()));
        Server { addr, store, shutdown, task }
    }

    /// Stops serving and waits until the port is free again.
    pub async fn stop(self) -> (SocketAddr, Arc<ConfigStore>) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        (self.addr, self.store)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// A config like the operator renders: one UDP listener routed to one cluster.
pub fn config(id: &str) -> StunnerConfig {
    let mut c = StunnerConfig::zero(id);
    c.admin.loglevel = "all:INFO".into();
    c.admin.healthcheck_endpoint = Some("http://:8086".into());
    c.admin.offload_engine = "None".into();
    c.auth.credentials.insert("username".into(), "user-1".into());
    c.auth.credentials.insert("password".into(), "pass-1".into());
    let ns = id.split('/').next().unwrap();
    c.listeners.push(ListenerConfig {
        name: format!("{id}/udp-listener"),
        protocol: "TURN-UDP".into(),
        public_addr: "1.2.3.4".into(),
        public_port: 3478,
        addr: "$STUNNER_ADDR".into(),
        port: 3478,
        routes: vec![format!("{ns}/media-plane")],
        ..Default::default()
    });
    c.clusters.push(ClusterConfig {
        name: format!("{ns}/media-plane"),
        cluster_type: "STATIC".into(),
        protocol: "UDP".into(),
        endpoints: vec!["10.0.0.1".into(), "10.0.0.2".into()],
    });
    c
}

/// Runs `stunnerctl --cds-server-address <server> <args>` to completion (at most 20 s).
pub async fn stunnerctl(server: &str, args: &[&str]) -> Output {
    let run = stunnerctl_command(server, args).output();
    tokio::time::timeout(Duration::from_secs(20), run).await.expect("stunnerctl finishes").unwrap()
}

pub fn stunnerctl_command(server: &str, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_stunnerctl"));
    cmd.arg("--cds-server-address").arg(server).args(args).env_remove("STUNNERCTL_CDS_SERVER_ADDRESS");
    cmd.kill_on_drop(true);
    cmd
}

/// Stdout of a run that must have succeeded.
pub fn ok(out: &Output) -> String {
    assert!(out.status.success(), "exit {:?}, stderr: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Stderr of a run that must have failed with exit status 1, and printed nothing on stdout.
pub fn failed(out: &Output) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&out.stdout));
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{stderr}");
    stderr
}

/// A TCP relay on loopback in front of `target` whose connections can all be cut at once:
/// a network failure without restarting the server.
pub struct Relay {
    pub addr: SocketAddr,
    cut: tokio::sync::watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl Relay {
    pub async fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let cuts = cut.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Relay { addr, cut, task }
    }

    /// Drops every connection relayed so far (new ones are relayed again).
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// The next stdout line of a running stunnerctl; fails the test after 10 s.
pub async fn next_line(lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .expect("stunnerctl still running")
}
