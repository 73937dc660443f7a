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
        Daemon::start_with(dir, |_| {}).await
    }

    /// [`Daemon::start`], with `adjust` applied to the command first.
    async fn start_with(dir: &Path, adjust: impl FnOnce(&mut Command)) -> Daemon {
        let mut command = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"));
        adjust(&mut command);
        let mut child = command
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

/// Lowers the child's limit of open files to `n` (the daemon needs about 15 to start).
fn limit_open_files(command: &mut Command, n: libc::rlim_t) {
    // SAFETY: setrlimit(2) is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: n, rlim_max: n };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// A watch on the daemon: the open stream, or the body of the HTTP 503 it was refused with.
/// Panics when the daemon does not answer within 10 s.
async fn try_watch(d: &Daemon) -> Result<Ws, String> {
    use tokio_tungstenite::tungstenite::Error;
    let url = format!("ws://{}/api/v1/configs?watch=true", d.addr);
    match tokio::time::timeout(Duration::from_secs(10), tokio_tungstenite::connect_async(url)).await {
        Err(_) => panic!("no answer in 10 s: the client waits in the accept queue"),
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(Error::Http(resp))) if resp.status() == 503 => {
            Err(String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).into_owned())
        }
        Ok(Err(e)) => panic!("unexpected failure: {e}"),
    }
}

/// Out of file descriptors, a new CDS client is told 503 at once (it used to wait in the accept
/// queue forever), every time, and the accept errors take a few log lines, not one per retry.
#[tokio::test]
async fn out_of_file_descriptors_new_clients_get_a_503_and_the_log_stays_short() {
    let dir = temp_copy_of_quickstart("nofile");
    let d = Daemon::start_with(&dir, |c| limit_open_files(c, 48)).await;
    let mut held = Vec::new();
    let refusal = loop {
        assert!(held.len() < 100, "100 watches open on 48 file descriptors?");
        match try_watch(&d).await {
            Ok(ws) => held.push(ws),
            Err(body) => break body,
        }
    };
    assert!(refusal.contains("the config discovery server is out of file descriptors"), "{refusal}");
    let started = std::time::Instant::now();
    const ATTEMPTS: usize = 30;
    for i in 0..ATTEMPTS {
        assert!(try_watch(&d).await.is_err(), "attempt {i} was served while out of file descriptors");
    }
    // The refusals are written before the log lines are: wait for at least one.
    d.wait_for_log("accept failed").await;
    let lines = d.log.lock().unwrap().iter().filter(|l| l.contains("accept failed")).count();
    // One line per 10 s of the daemon's: the bound grows with how long the attempts took.
    let allowed = 2 + started.elapsed().as_secs() as usize / 10;
    assert!(lines <= allowed, "{lines} accept-error lines for {} refusals (allowed {allowed})", ATTEMPTS + 1);
    // Once clients leave, new ones are served again.
    held.clear();
    let mut served = false;
    for _ in 0..100 {
        if try_watch(&d).await.is_ok() {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "never served again after the watches closed");
    std::fs::remove_dir_all(&dir).unwrap();
}
