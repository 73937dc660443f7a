//! The real daemon binary in standalone mode on loopback, for the suites that look at it from
//! outside (the console in a browser, the metrics through Prometheus), and a gRPC dataplane
//! that watches one config and acknowledges every version, as stunnerd over gRPC would.

#![allow(dead_code)] // each suite uses its own subset

use super::ports;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::proto::{Ack, ConfigId, Scope, WatchRequest, WatchStart, scope, watch_request};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/test_client/stunner.cds.v1.rs"));
}

pub struct Daemon {
    _child: Child,
    /// The CDS (and console) address, `127.0.0.1:<port>`.
    pub addr: String,
    /// The metrics address.
    pub metrics: String,
    /// The manifests, removed with the log once the test is done (kept if it failed).
    dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = std::fs::remove_file(self.dir.with_extension("log"));
        }
    }
}

impl Daemon {
    /// Starts the daemon on the manifests in `dir`, with `extra` flags; returns once the CDS
    /// answers (after the first complete render). Its log goes to `DIR.log` beside `dir`;
    /// both are removed when it is dropped, unless the test failed.
    pub async fn start(dir: &Path, metrics_port: u16, extra: &[&str]) -> Daemon {
        let [cds_port] = ports::free_ports(1)[..] else { unreachable!() };
        let (addr, metrics) = (format!("127.0.0.1:{cds_port}"), format!("127.0.0.1:{metrics_port}"));
        let log = std::fs::File::create(dir.with_extension("log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
            .args(["--standalone", dir.to_str().unwrap(), "--config-discovery-address", &addr])
            .args(["--metrics-bind-address", &metrics, "--health-probe-bind-address", "0"])
            .args(["--throttle-timeout", "50ms"])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let d = Daemon { _child: child, addr, metrics, dir: dir.to_path_buf() };
        eventually("the daemon serves its configs", Duration::from_secs(30), async || {
            tokio::net::TcpStream::connect(&d.addr).await.is_ok() && http_get(&d.addr, "/api/v1/configs").await.0 == 200
        })
        .await;
        d
    }
}

/// A copy of the quickstart manifests in a fresh directory named for `test`.
pub fn quickstart_copy(test: &str) -> PathBuf {
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/quickstart");
    let dir = std::env::temp_dir().join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

/// A gRPC watcher of one config that acknowledges each version it is sent as applied.
/// Returns the versions it acknowledged, latest last; it runs until the test ends.
pub async fn acking_dataplane(addr: &str, namespace: &str, name: &str, client_name: &str) -> Arc<Mutex<Vec<String>>> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut client = pb::config_discovery_client::ConfigDiscoveryClient::new(channel);
    let id = ConfigId { namespace: namespace.into(), name: name.into() };
    let (tx, rx) = mpsc::channel(16);
    let start = WatchStart {
        scope: Some(Scope { kind: Some(scope::Kind::Config(id.clone())) }),
        client_name: client_name.into(),
        ..Default::default()
    };
    tx.send(WatchRequest { msg: Some(watch_request::Msg::Start(start)) }).await.unwrap();
    let requests = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) });
    let mut updates = client.watch(requests).await.expect("watch accepted").into_inner();
    let acked = Arc::new(Mutex::new(Vec::new()));
    let record = acked.clone();
    tokio::spawn(async move {
        while let Ok(Some(update)) = updates.message().await {
            let ack = Ack { id: Some(id.clone()), version: update.version.clone(), error: String::new() };
            if tx.send(WatchRequest { msg: Some(watch_request::Msg::Ack(ack)) }).await.is_err() {
                return;
            }
            record.lock().unwrap().push(update.version);
        }
    });
    acked
}

/// Polls `check` until it holds: every 100 ms, for at most `limit`.
pub async fn eventually<F: AsyncFnMut() -> bool>(what: &str, limit: Duration, mut check: F) {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened within {limit:?}: {what}");
}

/// A plain HTTP/1.1 GET on loopback: the status code and the body.
pub async fn http_get(addr: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.take(64 << 20).read_to_end(&mut response))
        .await
        .expect("an answer in time")
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.into() };
    (status, body)
}

/// The body of a chunked transfer.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}
