//! The real daemon binary in standalone mode: manifests in a directory, edited while it
//! runs, observed through a WebSocket watch like a dataplane's.

#[path = "../../tests/support/ports.rs"]
mod ports;

use futures_util::{SinkExt, StreamExt};
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
    /// Where `/healthz` and `/readyz` are served, if asked for.
    health: Option<String>,
    /// Where `/metrics` is served, if asked for.
    metrics: Option<String>,
    log: Arc<Mutex<Vec<String>>>,
}

/// How the daemon is started beyond the defaults.
#[derive(Default)]
struct Options {
    /// Serve the health probes.
    health: bool,
    /// Serve the metrics.
    metrics: bool,
    /// Run as this user (and its group): tests run as root here, and permission bits only
    /// make a file unreadable for others.
    uid: Option<u32>,
    /// Lower the limit of open files to this (see [`limit_open_files`]).
    open_files: Option<libc::rlim_t>,
    /// `RUST_LOG`, `info` if unset.
    log: Option<&'static str>,
    /// More flags.
    args: Vec<String>,
}

/// A copy of the daemon binary that another user may run: the checkout (a clone in a
/// `mktemp -d` directory, mode 0700) may be closed to them.
fn binary_for_others() -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("standalone-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.join("stunner-gateway-operator");
    std::fs::copy(env!("CARGO_BIN_EXE_stunner-gateway-operator"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

fn quickstart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/examples/quickstart")
}

fn temp_copy_of_quickstart(name: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("standalone-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(quickstart()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    TempDir(dir)
}

/// A test's manifest directory: removed when the test is done, whichever way it returns
/// (kept if it failed, for a look).
struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The CDS address of a "serving config discovery" line, console (`address=A`) or zap's JSON
/// (`"address":"A"`, `--zap-encoder json`).
fn served_address(line: &str) -> Option<String> {
    if !line.contains("serving config discovery") {
        return None;
    }
    if let Some(rest) = line.split("\"address\":\"").nth(1) {
        return rest.split('"').next().map(str::to_string);
    }
    line.split("address=").nth(1).map(|a| a.trim().to_string())
}

impl Daemon {
    async fn start(dir: &Path) -> Daemon {
        Daemon::start_with(dir, Options::default()).await
    }

    async fn start_with(dir: &Path, options: Options) -> Daemon {
        let free_address = || format!("127.0.0.1:{}", ports::free_ports(1)[0]);
        let health = options.health.then(free_address);
        let metrics = options.metrics.then(free_address);
        let bin = match options.uid {
            Some(_) => binary_for_others(),
            None => PathBuf::from(env!("CARGO_BIN_EXE_stunner-gateway-operator")),
        };
        let mut cmd = Command::new(&bin);
        cmd.args(["--standalone", dir.to_str().unwrap()])
            .args(["--config-discovery-address", "127.0.0.1:0"])
            .args(["--metrics-bind-address", metrics.as_deref().unwrap_or("0")])
            .args(["--health-probe-bind-address", health.as_deref().unwrap_or("0"), "--throttle-timeout", "50ms"])
            .args(&options.args)
            .env("RUST_LOG", options.log.unwrap_or("info"))
            .env("NO_COLOR", "1")
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(uid) = options.uid {
            cmd.uid(uid).gid(uid);
        }
        if let Some(n) = options.open_files {
            limit_open_files(&mut cmd, n);
        }
        let mut child = cmd.spawn().unwrap();
        if options.uid.is_some() {
            // The copy has been exec'd (spawn returns after exec): the running daemon keeps
            // its inode, and the 300 MB copy does not outlive the test.
            let _ = std::fs::remove_dir_all(bin.parent().unwrap());
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(addr) = served_address(&line)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr);
                }
                sink.lock().unwrap().push(line);
            }
        });
        let addr = tokio::time::timeout(Duration::from_secs(30), rx).await.expect("daemon serves in time").unwrap();
        Daemon { child, addr, health, metrics, log }
    }

    fn log_contains(&self, needle: &str) -> bool {
        self.log_count(needle) > 0
    }

    fn log_count(&self, needle: &str) -> usize {
        self.log.lock().unwrap().iter().filter(|l| l.contains(needle)).count()
    }

    async fn wait_for_log(&self, needle: &str) {
        for _ in 0..200 {
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

/// The next config; pings do not extend the wait.
async fn next_config(ws: &mut Ws) -> StunnerConfig {
    let next = async {
        loop {
            if let Message::Text(t) = ws.next().await.unwrap().unwrap() {
                return serde_json::from_str(&t).unwrap();
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), next).await.expect("a config in time")
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
    // The render passes that take the operator's own Service back settle before the config
    // is published: one version at start-up.
    assert_eq!(d.log_count("config updated"), 1);
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
}

/// The sample of `name` with exactly `labels` in a Prometheus text exposition.
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let series = format!("{name}{labels} ");
    text.lines().find_map(|l| l.strip_prefix(&series)).and_then(|v| v.trim().parse().ok())
}

/// The controller-runtime metrics and the operator loop's heartbeat count what they name
/// after a real reconcile (issue #19 item 7: they used to read 0).
#[tokio::test]
async fn controller_runtime_metrics_count_the_reconciles_of_each_controller() {
    let dir = temp_copy_of_quickstart("metrics");
    let d = Daemon::start_with(&dir, Options { metrics: true, ..Options::default() }).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    next_config(&mut ws).await;
    let url = format!("http://{}/metrics", d.metrics.as_deref().unwrap());
    let text = http_get(&url).await;
    let reconciles = |controller: &str| {
        let labels = format!("{{controller=\"{controller}\",result=\"success\"}}");
        sample(&text, "controller_runtime_reconcile_total", &labels).unwrap_or_else(|| panic!("{labels} in\n{text}"))
    };
    // The quickstart: a GatewayClass and a Gateway, a GatewayConfig, a UDPRoute and a
    // StaticService, a Dataplane; the operator's own Service comes back as a `udproute` event.
    assert!(reconciles("gateway") >= 2.0, "{text}");
    assert!(reconciles("gatewayconfig") >= 1.0, "{text}");
    assert!(reconciles("udproute") >= 2.0, "{text}");
    assert!(reconciles("dataplane") >= 1.0, "{text}");
    assert_eq!(reconciles("node"), 0.0, "no Nodes in the manifests");
    let gateway = "{controller=\"gateway\"}";
    assert_eq!(sample(&text, "controller_runtime_reconcile_time_seconds_count", gateway), Some(reconciles("gateway")));
    assert_eq!(sample(&text, "controller_runtime_reconcile_errors_total", gateway), Some(0.0));
    assert_eq!(sample(&text, "controller_runtime_active_workers", gateway), Some(0.0));
    let heartbeat = sample(&text, "stunner_gateway_operator_operator_loop_last_active_timestamp_seconds", "");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert!(heartbeat.is_some_and(|t| t > now - 600.0 && t <= now + 1.0), "{heartbeat:?}, now {now}");

    // An edit of the GatewayConfig is one more `gatewayconfig` reconcile.
    let before = reconciles("gatewayconfig");
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("pass-1", "pass-2")).unwrap();
    next_config(&mut ws).await;
    let text = http_get(&url).await;
    let labels = "{controller=\"gatewayconfig\",result=\"success\"}";
    let after = sample(&text, "controller_runtime_reconcile_total", labels).unwrap();
    assert!(after > before, "{before} -> {after}");
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
}

/// An invalid GatewayConfig is a warning naming the field, with file and line, whether an API
/// server would refuse it (`statik` fails the CRD's pattern) or only the operator's own rules
/// do (`plaintextt` passes the unanchored pattern; the render would refuse it): in standalone
/// mode both are refused at load, and the served config stays (issue #43; before, the
/// second withdrew every Gateway of the class, as upstream does at render).
#[tokio::test]
async fn an_invalid_gateway_config_is_a_warning_naming_the_field() {
    let dir = temp_copy_of_quickstart("invalid-config");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(next_config(&mut ws).await.auth.auth_type, "static");
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    // The document starts at its `apiVersion`, the line before its `kind`.
    let line = class.lines().position(|l| l == "kind: GatewayConfig").unwrap();
    let rejected = format!("{}:{line}: rejected: GatewayConfig", dir.join("gatewayclass.yaml").display());
    for (typo, message) in [
        ("plaintextt", r#"spec.authType: Unsupported value: "plaintextt""#),
        ("statik", r#"spec.authType: Invalid value: "statik""#),
    ] {
        std::fs::write(dir.join("gatewayclass.yaml"), class.replace("authType: static", &format!("authType: {typo}")))
            .unwrap();
        d.wait_for_log(message).await;
        let log = d.log.lock().unwrap().clone();
        let entry = log.iter().find(|l| l.contains(message)).unwrap();
        assert!(entry.contains(" WARN ") && entry.contains(&rejected), "{entry}");
        assert_no_config(&mut ws).await;
    }
    // Fixed (with a new password, so that the config changes): applied.
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("pass-1", "pass-9")).unwrap();
    assert_eq!(next_config(&mut ws).await.auth.credentials["password"], "pass-9");
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

    let out = run(&["gateway-status", "-n", "stunner", "udp-gateway"]).output().await.unwrap();
    let status = String::from_utf8(out.stdout).unwrap();
    assert!(status.contains("Programmed=True"), "{status}");
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
    http_get_status(url).await.1
}

/// A plain HTTP GET: the status code and the body. A generous bound on the wait: an answer
/// is what matters, not how fast it comes.
async fn http_get_status(url: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
        let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        s.write_all(request.as_bytes()).await.unwrap();
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.unwrap();
        buf
    };
    let buf = tokio::time::timeout(Duration::from_secs(20), exchange).await.unwrap_or_else(|_| panic!("{url} answers"));
    let (head, body) = buf.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_string())
}

/// SIGTERM: every watch gets a Close frame (its client reconnects at once, elsewhere), and
/// the daemon exits cleanly after its stages.
#[tokio::test]
#[allow(unsafe_code)] // libc calls std has no safe wrapper for (see the SAFETY comments)
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
#[allow(unsafe_code)] // libc calls std has no safe wrapper for (see the SAFETY comments)
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
    let d = Daemon::start_with(&dir, Options { open_files: Some(48), ..Options::default() }).await;
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
}

/// The quickstart with its Gateway published by a LoadBalancer Service that the manifests
/// hold with an address, as a cloud would give it: the Gateway has no `spec.addresses`, so its
/// listeners' public address comes from `status.loadBalancer`.
fn quickstart_behind_a_load_balancer(name: &str) -> TempDir {
    let dir = quickstart_without_addresses(name);
    write_load_balancer_service(&dir);
    dir
}

const GATEWAY_UID: &str = "0b6a3a52-5c5e-4d43-9d1e-3c1f6a1b2c3d";

/// The quickstart with a Gateway that has no `spec.addresses` (and a uid, for the Service's
/// owner reference).
fn quickstart_without_addresses(name: &str) -> TempDir {
    let dir = temp_copy_of_quickstart(name);
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    let gateway = gateway.replace("  addresses:\n    - type: IPAddress\n      value: 127.0.0.1\n", "").replacen(
        "  namespace: stunner\n",
        &format!("  namespace: stunner\n  uid: {GATEWAY_UID}\n"),
        1,
    );
    std::fs::write(dir.join("gateway.yaml"), gateway).unwrap();
    dir
}

/// The Gateway's LoadBalancer Service with the address 192.0.2.7, as `service.yaml`.
fn write_load_balancer_service(dir: &Path) {
    let service = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: udp-gateway\n  namespace: stunner\n  \
         labels: {{team: media}}\n  \
         annotations: {{stunner.l7mp.io/related-gateway-name: stunner/udp-gateway}}\n  ownerReferences:\n  \
         - {{apiVersion: gateway.networking.k8s.io/v1, kind: Gateway, name: udp-gateway, uid: {GATEWAY_UID}}}\n\
         spec:\n  type: LoadBalancer\n  clusterIP: 10.96.0.10\n  ports:\n  \
         - {{name: udp-listener, port: 3478, protocol: UDP}}\n  - {{name: tcp-listener, port: 3478, protocol: TCP}}\n\
         status:\n  loadBalancer:\n    ingress:\n    - ip: 192.0.2.7\n"
    );
    std::fs::write(dir.join("service.yaml"), service).unwrap();
}

/// The public address of each listener of `c`.
fn public_addresses(c: &StunnerConfig) -> Vec<&str> {
    c.listeners.iter().map(|l| l.public_addr.as_str()).collect()
}

#[tokio::test]
async fn the_load_balancer_address_of_the_manifests_survives_the_operators_own_service() {
    let dir = quickstart_behind_a_load_balancer("lb");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    let c = next_config(&mut ws).await;
    let addresses: Vec<_> = c.listeners.iter().map(|l| (l.public_addr.as_str(), l.public_port)).collect();
    assert_eq!(addresses, [("192.0.2.7", 3478), ("192.0.2.7", 3478)]);
    assert_eq!(d.log_count("config updated"), 1);
    // The operator's own Service, merged into the stored one, keeps the address: no second
    // config with the address gone.
    assert_no_config(&mut ws).await;

    // An edit renders again, still with the address, and the Gateway stays Programmed.
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    std::fs::write(dir.join("gateway.yaml"), gateway.replace("tcp-listener", "tcp-2")).unwrap();
    let c = next_config(&mut ws).await;
    assert_eq!(public_addresses(&c), ["192.0.2.7", "192.0.2.7"]);
    assert_no_config(&mut ws).await;
    let body = http_get(&format!("http://{}/api/v1/statuses", d.addr)).await;
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let gw = list["items"].as_array().unwrap().iter().find(|i| i["kind"] == "Gateway").unwrap();
    let programmed = gw["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Programmed");
    assert_eq!(programmed.unwrap()["status"], "True", "{gw}");
}

/// The same Service written to the manifests only after the operator applied its own: what
/// the operator applied is kept apart from what the manifests add, so the next render merges
/// into the Service and keeps its address (had the record been the stored object, the address
/// would have counted as the operator's and been dropped).
#[tokio::test]
async fn a_load_balancer_address_the_manifests_add_later_survives_the_next_render() {
    let dir = quickstart_without_addresses("lb-later");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(public_addresses(&next_config(&mut ws).await), ["", ""], "no address yet");
    write_load_balancer_service(&dir);
    assert_eq!(public_addresses(&next_config(&mut ws).await), ["192.0.2.7", "192.0.2.7"]);
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    std::fs::write(dir.join("gateway.yaml"), gateway.replace("tcp-listener", "tcp-2")).unwrap();
    let c = next_config(&mut ws).await;
    assert_eq!(public_addresses(&c), ["192.0.2.7", "192.0.2.7"]);
    assert_no_config(&mut ws).await;
}

impl Daemon {
    async fn readyz(&self) -> (u16, String) {
        http_get_status(&format!("http://{}/readyz", self.health.as_ref().expect("started with health"))).await
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id().unwrap()).unwrap()
    }
}

/// The quickstart's Gateway with a third listener: an edit whose config is easy to recognise.
fn add_a_listener(dir: &Path) {
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    let with_third = gateway.replace(
        "    - name: tcp-listener\n",
        "    - name: extra-listener\n      port: 3479\n      protocol: UDP\n    - name: tcp-listener\n",
    );
    std::fs::write(dir.join("gateway.yaml"), with_third).unwrap();
}

#[allow(unsafe_code)] // libc calls std has no safe wrapper for (see the SAFETY comments)
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A FIFO named like a manifest (a read would block forever), links that make the tree
/// infinite, and a file nested 60,000 levels deep: the daemon keeps answering, keeps
/// following edits, and names each hostile file.
#[tokio::test]
async fn hostile_files_neither_block_the_daemon_nor_stop_other_edits() {
    let dir = temp_copy_of_quickstart("hostile");
    let d = Daemon::start_with(&dir, Options { health: true, ..Options::default() }).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(next_config(&mut ws).await.listeners.len(), 2);

    mkfifo(&dir.join("x.yaml"));
    std::os::unix::fs::symlink(".", dir.join("loop-1")).unwrap();
    std::os::unix::fs::symlink(".", dir.join("loop-2")).unwrap();
    let deep = format!("a: {}{}\n", "[".repeat(60_000), "]".repeat(60_000));
    std::fs::write(dir.join("deep.yaml"), deep).unwrap();
    // While the FIFO is there: health, WebSocket pings and edits are all answered.
    assert_eq!(d.readyz().await, (200, "ok".to_string()));
    ws.send(Message::Ping(b"hi".to_vec().into())).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a pong in time");
    assert!(matches!(pong, Some(Ok(Message::Pong(ref p))) if &p[..] == b"hi"), "{pong:?}");
    add_a_listener(&dir);
    assert_eq!(next_config(&mut ws).await.listeners.len(), 3);
    d.wait_for_log("x.yaml: not a regular file").await;
    d.wait_for_log("deep.yaml:1: nested deeper than 100 levels").await;
}

/// The daemon's uid for the permission tests: as root, another user (permission bits do not
/// stop root); otherwise our own (they stop the owner).
#[allow(unsafe_code)] // libc calls std has no safe wrapper for (see the SAFETY comments)
fn unprivileged() -> Option<u32> {
    // SAFETY: geteuid(2) has no preconditions.
    (unsafe { libc::geteuid() } == 0).then_some(65534)
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// An unreadable subdirectory and unreadable or non-UTF-8 files are skipped with a warning
/// naming each; files keep their last good content, and every other edit still applies.
#[tokio::test]
async fn unreadable_entries_are_skipped_by_name_and_the_rest_applies() {
    let dir = temp_copy_of_quickstart("unreadable");
    chmod(&dir, 0o755);
    let d = Daemon::start_with(&dir, Options { uid: unprivileged(), ..Options::default() }).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    let c = next_config(&mut ws).await;
    assert_eq!((c.listeners.len(), c.clusters.len()), (2, 1));

    std::fs::create_dir(dir.join("private")).unwrap();
    std::fs::write(dir.join("private/more.yaml"), "kind: ConfigMap\n").unwrap();
    chmod(&dir.join("private"), 0o000);
    chmod(&dir.join("route.yaml"), 0o000);
    let class = std::fs::read(dir.join("gatewayclass.yaml")).unwrap();
    let mut latin1 = String::from_utf8(class).unwrap().replace("pass-1", "pass-\u{1}").into_bytes();
    let at = latin1.iter().position(|b| *b == 1).unwrap();
    latin1[at] = 0xe9;
    std::fs::write(dir.join("gatewayclass.yaml"), latin1).unwrap();
    add_a_listener(&dir);
    let c = next_config(&mut ws).await;
    assert_eq!(c.listeners.len(), 3, "the edit applies");
    assert_eq!(c.clusters.len(), 1, "the unreadable route keeps its last good content");
    assert_eq!(c.auth.credentials["password"], "pass-1", "so does the non-UTF-8 class");
    d.wait_for_log(&format!("{}: cannot list", dir.join("private").display())).await;
    d.wait_for_log(&format!("{}: cannot read", dir.join("route.yaml").display())).await;
    d.wait_for_log(&format!("{}: not UTF-8 text", dir.join("gatewayclass.yaml").display())).await;
    chmod(&dir.join("private"), 0o755);
}

/// Out of file descriptors when a file changes: the rescan fails, and is retried once
/// descriptors are free again, with no other file event to ask for it.
#[tokio::test]
#[allow(unsafe_code)] // libc calls std has no safe wrapper for (see the SAFETY comments)
async fn a_failed_rescan_is_retried() {
    let dir = temp_copy_of_quickstart("retry");
    let d = Daemon::start(&dir).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(next_config(&mut ws).await.listeners.len(), 2);

    let open_fds = || std::fs::read_dir(format!("/proc/{}/fd", d.pid())).unwrap().count() as u64;
    let set_limit = |soft: u64| {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: prlimit(2) on our own child, with valid pointers.
        assert_eq!(unsafe { libc::prlimit(d.pid(), libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit) }, 0);
        let old = limit.rlim_cur;
        limit.rlim_cur = soft;
        // SAFETY: as above.
        assert_eq!(unsafe { libc::prlimit(d.pid(), libc::RLIMIT_NOFILE, &limit, std::ptr::null_mut()) }, 0);
        old
    };
    // Leave the daemon a few descriptors, then take them with idle connections, until it
    // cannot accept any more.
    let original = set_limit(open_fds() + 4);
    let mut hogs = Vec::new();
    for _ in 0..200 {
        if d.log_contains("accept failed") {
            break;
        }
        // A full accept queue drops the handshake: the daemon has stopped accepting.
        match tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(&d.addr)).await {
            Ok(conn) => hogs.push(conn.unwrap()),
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.wait_for_log("accept failed").await;
    add_a_listener(&dir);
    d.wait_for_log("cannot read the manifest directory").await;

    drop(hogs);
    set_limit(original);
    assert_eq!(next_config(&mut ws).await.listeners.len(), 3);
}

/// The directory removed: the last configs stay served, `/readyz` and the log say it is gone;
/// created again, it is followed again.
#[tokio::test]
async fn a_removed_and_recreated_directory_is_followed_again() {
    let dir = temp_copy_of_quickstart("recreated");
    let d = Daemon::start_with(&dir, Options { health: true, ..Options::default() }).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    assert_eq!(next_config(&mut ws).await.listeners.len(), 2);
    let saved: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().into(), std::fs::read(&p).unwrap()))
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();

    d.wait_for_log("the manifest directory is gone").await;
    let (code, why) = d.readyz().await;
    assert_eq!(code, 503);
    assert!(why.contains("is gone"), "{why}");
    assert_no_config(&mut ws).await;

    // Put back whole (an empty directory would mean no objects at all).
    let staging = dir.with_extension("staging");
    std::fs::create_dir(&staging).unwrap();
    for (name, content) in &saved {
        std::fs::write(staging.join(name), content).unwrap();
    }
    std::fs::rename(&staging, &dir).unwrap();
    d.wait_for_log("the manifest directory is back").await;
    add_a_listener(&dir);
    assert_eq!(next_config(&mut ws).await.listeners.len(), 3);
    assert_eq!(d.readyz().await, (200, "ok".to_string()));
}

/// The config served for `path`, as the bytes the CDS sends.
async fn served(d: &Daemon, path: &str) -> String {
    http_get(&format!("http://{}/api/v1/configs/{path}", d.addr)).await
}

/// Issue #43: an object that was valid and is edited into one an API server (or the
/// operator's own rules) would refuse keeps serving from its last valid version. Each edit
/// leaves the served config byte-identical, sends no watcher anything (no delete), keeps
/// `/readyz` ready, counts the object as held and shows "held: invalid edit at FILE:LINE" in
/// the statuses and `stunnerctl gateway-status`. Putting the file back releases it; a real
/// fix is applied; removing the file deletes the object; one never valid stays absent.
#[tokio::test]
async fn an_invalid_edit_holds_the_last_valid_version() {
    let dir = temp_copy_of_quickstart("held");
    let d = Daemon::start_with(&dir, Options { health: true, metrics: true, ..Options::default() }).await;
    let mut all = watch(&d, "/api/v1/configs?watch=true").await;
    assert_eq!(next_config(&mut all).await.auth.credentials["password"], "pass-1");
    let before = served(&d, "stunner/udp-gateway").await;
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let (class, gateway, route) = (read("gatewayclass.yaml"), read("gateway.yaml"), read("route.yaml"));
    let line_of = |text: &str, needle: &str| 1 + text.lines().position(|l| l == needle).unwrap();
    let config_line = line_of(&class, "kind: GatewayConfig") - 1;
    // Half-written: the GatewayConfig's document cut before its password (the documents
    // after it stay: a file cut short loses them, as a deliberate removal would).
    let cut = class.find("  password:").unwrap();
    let truncated = format!(
        "{}{}",
        &class[..cut],
        &class[class.find("---\napiVersion: stunner.l7mp.io/v1\nkind: Dataplane").unwrap()..]
    );
    let duplicate = gateway.replace("    - name: tcp-listener\n", "    - name: udp-listener\n");
    let no_rules = &route[..route.find("  rules:").unwrap()];
    let route_rest = &route[route.find("---").unwrap()..];
    let edits = [
        (
            "gatewayclass.yaml",
            class.replace("realm: stunner.l7mp.io", "realm: stunner_l7mp"),
            "GatewayConfig",
            config_line,
        ),
        ("gatewayclass.yaml", truncated, "GatewayConfig", config_line),
        ("gateway.yaml", duplicate, "Gateway", line_of(&gateway, "apiVersion: gateway.networking.k8s.io/v1")),
        (
            "route.yaml",
            format!("{no_rules}{route_rest}"),
            "UDPRoute",
            line_of(&route, "apiVersion: stunner.l7mp.io/v1"),
        ),
    ];
    let url = |d: &Daemon, what: &str| match what {
        "metrics" => format!("http://{}/metrics", d.metrics.as_deref().unwrap()),
        "readyz" => format!("http://{}/readyz", d.health.as_deref().unwrap()),
        _ => format!("http://{}/api/v1/statuses", d.addr),
    };
    let held_gauge =
        async |d: &Daemon| sample(&http_get(&url(d, "metrics")).await, "stunner_gateway_operator_held_objects", "");
    for (file, text, kind, line) in edits {
        let path = dir.join(file);
        let original = std::fs::read_to_string(&path).unwrap();
        let at = format!("invalid edit at {}:{line}", path.display());
        std::fs::write(&path, &text).unwrap();
        d.wait_for_log(&format!("held at its last valid version: {at}")).await;
        assert_no_config(&mut all).await;
        assert_eq!(served(&d, "stunner/udp-gateway").await, before, "{kind}: the served config is unchanged");
        assert_eq!(http_get_status(&url(&d, "readyz")).await.0, 200, "{kind}: still ready");
        assert_eq!(held_gauge(&d).await, Some(1.0), "{kind}");
        let statuses: serde_json::Value = serde_json::from_str(&http_get(&url(&d, "statuses")).await).unwrap();
        let item = statuses["items"].as_array().unwrap().iter().find(|i| i["kind"] == kind).unwrap();
        assert_eq!(item["status"]["held"], at.as_str(), "{statuses}");
        let out = Command::new(stunnerctl())
            .args(["--cds-server-address", &d.addr, "gateway-status", "-n", "stunner"])
            .output()
            .await
            .unwrap();
        let shown = String::from_utf8(out.stdout).unwrap();
        assert!(shown.contains(&format!("  held: {at}")), "{shown}");

        // Put back: released, and still nothing sent.
        std::fs::write(&path, &original).unwrap();
        for _ in 0..100 {
            if held_gauge(&d).await == Some(0.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(held_gauge(&d).await, Some(0.0), "{kind}: released");
        assert_no_config(&mut all).await;
        assert_eq!(served(&d, "stunner/udp-gateway").await, before);
    }
    // A valid edit applies.
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("pass-1", "pass-2")).unwrap();
    assert_eq!(next_config(&mut all).await.auth.credentials["password"], "pass-2");
    // Removing the held object's file deletes it.
    std::fs::write(dir.join("gateway.yaml"), gateway.replace("3478", "70000")).unwrap();
    d.wait_for_log("held at its last valid version: invalid edit at").await;
    assert_no_config(&mut all).await;
    std::fs::remove_file(dir.join("gateway.yaml")).unwrap();
    let c = next_config(&mut all).await;
    assert!(c.normalized().unwrap().is_deleted(), "{c:?}");
    // One never valid stays absent.
    std::fs::write(dir.join("other.yaml"), gateway.replace("3478", "70000")).unwrap();
    d.wait_for_log("other.yaml:").await;
    assert_no_config(&mut all).await;
}

/// Issue #43: an invalid value of every secret field (a GatewayConfig's inline credentials,
/// a Secret's data and stringData: `authRef` credentials, a TLS key) appears in no log line
/// (at debug level, console lines), no status, no endpoint: messages name the field and why
/// it failed.
#[tokio::test]
async fn no_secret_value_appears_in_any_log_status_or_endpoint() {
    no_secret_value_appears_with("secrets", "debug", &[]).await;
}

/// The same at trace level in zap's JSON lines (`--zap-encoder json`): every level, the other
/// encoding.
#[tokio::test]
async fn no_secret_value_appears_in_json_lines_at_trace_level() {
    no_secret_value_appears_with("secrets-json", "trace", &["--zap-encoder", "json"]).await;
}

async fn no_secret_value_appears_with(name: &str, log: &'static str, args: &[&str]) {
    let dir = temp_copy_of_quickstart(name);
    let options = Options {
        health: true,
        metrics: true,
        log: Some(log),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..Options::default()
    };
    let d = Daemon::start_with(&dir, options).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    next_config(&mut ws).await;
    let config = |name: &str, spec: &str| {
        format!(
            "apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {{name: {name}, namespace: stunner}}\nspec: {spec}\n"
        )
    };
    let secret = |name: &str, data: &str| {
        format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: stunner}}\n{data}\n")
    };
    let secrets = [
        "Hunter2 Secret",
        "987654321012",
        "user name 77",
        "123456789123",
        "4k1%3y5",
        "tls-key-value!!",
        "918273645546",
    ];
    let files = [
        ("c1.yaml", config("c1", r#"{userName: u, password: "Hunter2 Secret"}"#)),
        ("c2.yaml", config("c2", "{userName: u, password: 987654321012}")),
        ("c3.yaml", config("c3", r#"{userName: "user name 77", password: p}"#)),
        ("c4.yaml", config("c4", "{authType: longterm, sharedSecret: 123456789123}")),
        ("s1.yaml", secret("auth", "data: {password: \"4k1%3y5\"}")),
        ("s2.yaml", secret("tls", "type: kubernetes.io/tls\ndata: {tls.key: \"tls-key-value!!\"}")),
        ("s3.yaml", secret("auth2", "stringData: {password: 918273645546}")),
    ];
    for (file, text) in &files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    // And the served GatewayConfig edited into an invalid password: held, and said so.
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("\"pass-1\"", "\"Hunter2 Secret\"")).unwrap();
    for (file, _) in &files {
        d.wait_for_log(&format!("{file}:")).await;
    }
    d.wait_for_log("held at its last valid version").await;
    let log = d.log.lock().unwrap().join("\n");
    if args.contains(&"json") {
        assert!(log.lines().all(|l| l.starts_with('{')), "JSON lines only:\n{log}");
    }
    for field in [
        "spec.password: Invalid value: <redacted>",
        "spec.userName: Invalid value: <redacted>",
        "spec.sharedSecret: Invalid value: <redacted>",
        "data.password: <redacted>",
        "data.tls.key: <redacted>",
        "stringData.password: <redacted>",
    ] {
        assert!(log.contains(field), "{field} in\n{log}");
    }
    let mut seen = vec![("the log".to_string(), log)];
    for url in [
        format!("http://{}/api/v1/statuses", d.addr),
        format!("http://{}/api/v1/configs", d.addr),
        format!("http://{}/metrics", d.metrics.as_deref().unwrap()),
        format!("http://{}/readyz", d.health.as_deref().unwrap()),
    ] {
        seen.push((url.clone(), http_get(&url).await));
    }
    let out = Command::new(stunnerctl())
        .args(["--cds-server-address", &d.addr, "gateway-status", "-a"])
        .output()
        .await
        .unwrap();
    seen.push(("stunnerctl gateway-status".into(), String::from_utf8_lossy(&out.stdout).into_owned()));
    for (place, text) in &seen {
        for value in secrets {
            assert!(!text.contains(value), "{value} in {place}:\n{text}");
        }
    }
}

/// Issue #43: a directory past the budget is refused as a whole, with its totals, and what
/// is served does not change; back within it, the scan applies.
#[tokio::test]
async fn a_directory_past_the_budget_is_refused_as_a_whole() {
    let dir = temp_copy_of_quickstart("budget");
    let size: u64 = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    let max_bytes = size + 2 * gateway.len() as u64 + 100;
    let flags = ["--standalone-max-bytes", &max_bytes.to_string(), "--standalone-max-objects", "7"];
    let d = Daemon::start_with(&dir, Options { args: flags.map(String::from).to_vec(), ..Options::default() }).await;
    let mut ws = watch(&d, "/api/v1/configs/stunner/udp-gateway?watch=true").await;
    next_config(&mut ws).await;
    let before = served(&d, "stunner/udp-gateway").await;
    // Past the bytes: a large comment in a new file, beside an edit that would change the config.
    std::fs::write(dir.join("big.yaml"), format!("# {}\n", "x".repeat(3 * gateway.len()))).unwrap();
    std::fs::write(dir.join("gateway.yaml"), gateway.replace("3478", "3479")).unwrap();
    let refused = format!("bytes in 4 files, more than the limit of {max_bytes} bytes (--standalone-max-bytes)");
    d.wait_for_log(&refused).await;
    assert_no_config(&mut ws).await;
    assert_eq!(served(&d, "stunner/udp-gateway").await, before);
    // Past the objects: the quickstart's 6 and two more.
    std::fs::remove_file(dir.join("big.yaml")).unwrap();
    let more = format!("{}---\n{}", gateway.replace("udp-gateway", "gw-2"), gateway.replace("udp-gateway", "gw-3"));
    std::fs::write(dir.join("more.yaml"), more).unwrap();
    d.wait_for_log("8 objects in 4 files, more than the limit of 7 objects (--standalone-max-objects)").await;
    assert_no_config(&mut ws).await;
    // Within it again: the edit applies.
    std::fs::remove_file(dir.join("more.yaml")).unwrap();
    assert_eq!(next_config(&mut ws).await.listeners[0].port, 3479);
}

/// The daemon's resident memory, in KiB.
fn rss_kib(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id().unwrap())).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue #43: memory returns after large deletions. 3,000 Gateways in 30 files are loaded and
/// deleted three times: each load comes to within 1.5x the first one's resident memory, and
/// each deletion to within 1.5x that of a fresh start with the objects left (the class only).
#[tokio::test]
async fn memory_returns_after_a_large_directory_is_deleted_three_times() {
    // Enough that keeping them would be past the bound: each adds ~20 KiB (debug build).
    const GATEWAYS: usize = 3000;
    let dir = temp_copy_of_quickstart("memory-cycle");
    for f in ["gateway.yaml", "route.yaml"] {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let gateway = |i: usize| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw-{i}\n  namespace: stunner\n\
             spec:\n  gatewayClassName: stunner-gatewayclass\n  addresses:\n  - type: IPAddress\n    value: 10.1.{}.{}\n\
             \x20 listeners:\n  - name: udp\n    port: 3478\n    protocol: UDP\n",
            i / 250,
            i % 250 + 1
        )
    };
    let files: Vec<String> =
        (0..30).map(|f| (f * 100..(f + 1) * 100).map(gateway).collect::<Vec<_>>().join("---\n")).collect();
    let d = Daemon::start(&dir).await;
    d.wait_for_log("GatewayClass stunner-gatewayclass: Accepted=True").await;
    let fresh = rss_kib(&d);
    let wait_count = async |needle: &str, n: usize| {
        for _ in 0..600 {
            if d.log_count(needle) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{} of {n} {needle:?}", d.log_count(needle));
    };
    let mut loaded = Vec::new();
    for round in 1..=3 {
        for (f, text) in files.iter().enumerate() {
            std::fs::write(dir.join(format!("gw-{f}.yaml")), text).unwrap();
        }
        wait_count("config updated", round * GATEWAYS).await;
        loaded.push(rss_kib(&d));
        for f in 0..files.len() {
            std::fs::remove_file(dir.join(format!("gw-{f}.yaml"))).unwrap();
        }
        wait_count("config deleted", round * GATEWAYS).await;
        // The allocator hands pages back as it goes: polled (at most 10 s) until it has.
        let mut deleted = rss_kib(&d);
        for _ in 0..100 {
            if deleted * 2 <= fresh * 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            deleted = rss_kib(&d);
        }
        assert!(
            deleted * 2 <= fresh * 3,
            "round {round}: {deleted} KiB after the deletion, {fresh} KiB at a fresh start"
        );
        assert!(loaded[round - 1] * 2 <= loaded[0] * 3, "round {round}: loads at {loaded:?} KiB");
        assert!(loaded[0] * 2 > fresh * 3, "the load is large enough to matter: {loaded:?} KiB, {fresh} KiB fresh");
    }
}
