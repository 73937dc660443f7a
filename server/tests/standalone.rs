//! The real daemon binary in standalone mode: manifests in a directory, edited while it
//! runs, observed through a WebSocket watch like a dataplane's.

use futures_util::StreamExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio_tungstenite::tungstenite::Message;

struct Daemon {
    child: Child,
    addr: String,
    log: Arc<Mutex<Vec<String>>>,
}

fn quickstart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/quickstart")
}

fn temp_copy_of_quickstart(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("standalone-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(quickstart()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

impl Daemon {
    async fn start(dir: &Path) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
            .args(["--standalone", dir.to_str().unwrap()])
            .args(["--config-discovery-address", "127.0.0.1:0", "--metrics-bind-address", "0"])
            .args(["--health-probe-bind-address", "0", "--throttle-timeout", "50ms"])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                let served = line.split("address=").nth(1).filter(|_| line.contains("serving config discovery"));
                if let Some(addr) = served
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.trim().to_string());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(30), rx).await.expect("daemon serves in time").unwrap();
        Daemon { child, addr, log }
    }

    fn log_contains(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }

    async fn wait_for_log(&self, needle: &str) {
        for _ in 0..100 {
            if self.log_contains(needle) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no log line with {needle:?} in:\n{}", self.log.lock().unwrap().join("\n"));
    }
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn watch(d: &Daemon, path: &str) -> Ws {
    tokio_tungstenite::connect_async(format!("ws://{}{path}", d.addr)).await.unwrap().0
}

async fn next_config(ws: &mut Ws) -> StunnerConfig {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a config in time");
        if let Message::Text(t) = msg.unwrap().unwrap() {
            return serde_json::from_str(&t).unwrap();
        }
    }
}

async fn assert_no_config(ws: &mut Ws) {
    if let Ok(Some(Ok(Message::Text(t)))) = tokio::time::timeout(Duration::from_millis(800), ws.next()).await {
        panic!("unexpected config {t}");
    }
}

#[tokio::test]
async fn quickstart_is_served_and_follows_edits() {
    let dir = temp_copy_of_quickstart("edits");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    let c = next_config(&mut ws).await;
    assert_eq!(c.admin.name, "stunner/udp-gateway");
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(c.auth.credentials["password"], "pass-1");
    assert_eq!(c.clusters[0].endpoints, ["10.0.0.0/8", "127.0.0.1/32"]);

    // A new listener, written in place.
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    let with_third = gateway.replace(
        "    - name: tcp-listener\n",
        "    - name: extra-listener\n      port: 3479\n      protocol: UDP\n    - name: tcp-listener\n",
    );
    std::fs::write(dir.join("gateway.yaml"), &with_third).unwrap();
    let c = next_config(&mut ws).await;
    assert_eq!(c.listeners.len(), 3);

    // A new password, saved the way many editors do: write a temporary file, rename it over.
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join(".gatewayclass.yaml.tmp"), class.replace("pass-1", "pass-2")).unwrap();
    std::fs::rename(dir.join(".gatewayclass.yaml.tmp"), dir.join("gatewayclass.yaml")).unwrap();
    let c = next_config(&mut ws).await;
    assert_eq!(c.auth.credentials["password"], "pass-2");

    // A broken edit is reported with its file and line, and the last good content stays.
    std::fs::write(dir.join("route.yaml"), "apiVersion: stunner.l7mp.io/v1\nkind: UDPRoute\nmetadata: [oops\n")
        .unwrap();
    d.wait_for_log("route.yaml:").await;
    assert_no_config(&mut ws).await;
    // Unknown kinds are skipped with a warning.
    std::fs::write(dir.join("other.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n").unwrap();
    d.wait_for_log("ConfigMap").await;
    assert_no_config(&mut ws).await;

    // Removing the route's file removes the cluster.
    std::fs::remove_file(dir.join("route.yaml")).unwrap();
    let c = next_config(&mut ws).await;
    assert!(c.clusters.is_empty());

    // Removing the Gateway pushes the zero config, which stunnerd recognises as a delete.
    std::fs::remove_file(dir.join("gateway.yaml")).unwrap();
    let c = next_config(&mut ws).await;
    assert!(c.normalized().unwrap().is_deleted(), "{c:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn statuses_are_logged_and_served() {
    let dir = temp_copy_of_quickstart("status");
    let d = Daemon::start(&dir).await;
    d.wait_for_log("GatewayClass stunner-gatewayclass: Accepted=True").await;
    let body = http_get(&format!("http://{}/api/v1/statuses", d.addr)).await;
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let kinds: Vec<&str> = list["items"].as_array().unwrap().iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Gateway", "GatewayClass", "UDPRoute"]);
    let gw = &list["items"][0];
    assert_eq!(gw["name"], "udp-gateway");
    assert_eq!(gw["status"]["conditions"][0]["type"], "Accepted");
    assert_eq!(gw["status"]["conditions"][0]["status"], "True");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What an API server would refuse (issue #15: ports out of range, huge or path-like names,
/// a namespace with a `/`) is reported at WARN with its file and line and never served; the
/// valid objects beside it are.
#[tokio::test]
async fn objects_an_api_server_would_refuse_are_reported_and_never_served() {
    let dir = temp_copy_of_quickstart("invalid");
    let gateway = |name: &str, namespace: &str, listener: &str, port: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: {name}\n  namespace: {namespace}\n\
             spec:\n  gatewayClassName: stunner-gatewayclass\n  listeners:\n  - name: {listener}\n    port: {port}\n    protocol: UDP\n"
        )
    };
    let huge = "l".repeat(64 * 1024);
    let docs = [
        gateway("high-port", "stunner", "udp", "70000"),
        gateway("negative-port", "stunner", "udp", "-1"),
        gateway("huge-listener", "stunner", &huge, "3478"),
        gateway("a/b", "stunner", "udp", "3478"),
        gateway("../x", "stunner", "udp", "3478"),
        gateway("slashed", "a/b", "udp", "3478"),
        gateway("good", "stunner", "udp", "3479"),
    ];
    std::fs::write(dir.join("invalid.yaml"), docs.join("---\n")).unwrap();
    let d = Daemon::start(&dir).await;
    let mut all = watch(&d, "/api/v1/configs?watch=true").await;
    let mut names = std::collections::BTreeSet::new();
    while names.len() < 2 {
        names.insert(next_config(&mut all).await.admin.name);
    }
    assert_eq!(names.into_iter().collect::<Vec<_>>(), ["stunner/good", "stunner/udp-gateway"]);
    let file = dir.join("invalid.yaml");
    for (doc, field) in [
        (0, "spec.listeners[0].port"),
        (1, "spec.listeners[0].port"),
        (2, "spec.listeners[0].name"),
        (3, "metadata.name"),
        (4, "metadata.name"),
        (5, "metadata.namespace"),
    ] {
        let line = 1 + doc * 12;
        d.wait_for_log(&format!("{}:{line}: rejected: Gateway", file.display())).await;
        let log = d.log.lock().unwrap();
        let entry = log.iter().find(|l| l.contains(&format!("invalid.yaml:{line}:"))).unwrap();
        assert!(entry.contains(" WARN ") && entry.contains(field), "{entry}");
        assert!(entry.len() < 1000, "values are cut short in the log: {} bytes", entry.len());
    }
    // The slashed namespace was never served, so its file going away withdraws nothing else.
    std::fs::remove_file(&file).unwrap();
    let c = next_config(&mut all).await;
    assert_eq!(c.admin.name, "stunner/good");
    assert!(c.normalized().unwrap().is_deleted(), "{c:?}");
    assert_no_config(&mut all).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An invalid GatewayConfig withdraws its class's Gateways (as upstream) and says so at WARN,
/// naming the field: from the render when an API server would have let it in (`plaintextt`
/// passes the CRD's pattern), from the loader with file and line when it would not (`statik`).
#[tokio::test]
async fn an_invalid_gateway_config_is_a_warning_naming_the_field() {
    let dir = temp_copy_of_quickstart("invalid-config");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(next_config(&mut ws).await.auth.auth_type, "static");
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();

    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("authType: static", "authType: plaintextt")).unwrap();
    let c = next_config(&mut ws).await;
    assert!(c.normalized().unwrap().is_deleted(), "withdrawn: {c:?}");
    let warning = "invalid GatewayConfig stunner/stunner-gatewayconfig: spec.authType: invalid authentication type";
    d.wait_for_log(warning).await;
    assert!(d.log.lock().unwrap().iter().any(|l| l.contains(warning) && l.contains(" WARN ")));

    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("authType: static", "authType: statik")).unwrap();
    // The document starts at its `apiVersion`, the line before its `kind`.
    let line = class.lines().position(|l| l == "kind: GatewayConfig").unwrap();
    let rejected = format!("{}:{line}: rejected: GatewayConfig", dir.join("gatewayclass.yaml").display());
    d.wait_for_log(&rejected).await;
    let log = d.log.lock().unwrap().clone();
    let line = log.iter().find(|l| l.contains(&rejected)).unwrap();
    assert!(line.contains(" WARN ") && line.contains(r#"spec.authType: Invalid value: "statik""#), "{line}");
    assert_no_config(&mut ws).await;

    std::fs::write(dir.join("gatewayclass.yaml"), &class).unwrap();
    assert_eq!(next_config(&mut ws).await.auth.auth_type, "static");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The workspace's `stunnerctl`, built next to the daemon by `cargo test --workspace`.
fn stunnerctl() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_stunner-gateway-operator")).with_file_name("stunnerctl");
    assert!(bin.exists(), "{} is missing: run the tests with --workspace (scripts/test does)", bin.display());
    bin
}

#[tokio::test]
async fn stunnerctl_shows_the_rendered_config_and_follows_edits() {
    let dir = temp_copy_of_quickstart("stunnerctl");
    let d = Daemon::start(&dir).await;
    let run = |args: &[&str]| {
        let mut cmd = Command::new(stunnerctl());
        cmd.args(["--cds-server-address", &d.addr]).args(args);
        cmd
    };
    let out = run(&["config", "-a"]).output().await.unwrap();
    assert!(out.status.success());
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(summary.contains("Gateway: stunner/udp-gateway"), "{summary}");
    assert!(summary.contains("username/password: user-1/pass-1"), "{summary}");
    assert!(summary.contains("Public address:port: 127.0.0.1:3478"), "{summary}");

    // A watch sees an edit of the manifests.
    let mut watch = run(&["config", "-n", "stunner", "udp-gateway", "-w", "-o", "json"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut next = async || {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.unwrap().unwrap().unwrap();
        serde_json::from_str::<StunnerConfig>(&line).unwrap()
    };
    assert_eq!(next().await.auth.credentials["password"], "pass-1");
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("pass-1", "pass-3")).unwrap();
    assert_eq!(next().await.auth.credentials["password"], "pass-3");

    let out = run(&["status", "-n", "stunner", "udp-gateway"]).output().await.unwrap();
    let status = String::from_utf8(out.stdout).unwrap();
    assert!(status.contains("Programmed=True"), "{status}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_missing_directory_is_a_clear_start_up_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
        .args(["--standalone", "/nonexistent/manifests", "--config-discovery-address", "127.0.0.1:0"])
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read --standalone directory /nonexistent/manifests"), "{err}");
}

/// A plain HTTP GET over a raw socket (the daemon speaks HTTP/1.1).
async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
    s.write_all(format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    buf.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// SIGTERM: every watch gets a Close frame (its client reconnects at once, elsewhere), and
/// the daemon exits cleanly after its stages.
#[tokio::test]
async fn sigterm_closes_every_watch_and_exits_cleanly() {
    let dir = temp_copy_of_quickstart("sigterm");
    let mut d = Daemon::start(&dir).await;
    let mut one = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    let mut all = watch(&d, "/api/v1/configs?watch=true").await;
    next_config(&mut one).await;
    next_config(&mut all).await;
    let pid = i32::try_from(d.child.id().unwrap()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    for ws in [&mut one, &mut all] {
        let msg = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a frame in time");
        assert!(matches!(msg, Some(Ok(Message::Close(_)))), "{msg:?}");
    }
    let status = tokio::time::timeout(Duration::from_secs(30), d.child.wait()).await.expect("exits in time").unwrap();
    assert!(status.success(), "{status}");
    d.wait_for_log("shutting down").await;
}
