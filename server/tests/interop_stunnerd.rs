//! The real upstream dataplane against our daemon: `stunnerd -w` (github.com/l7mp/stunner
//! v1.2.1, built by tests/interop/build.sh) watches the daemon in standalone mode, reconciles
//! the rendered config, opens its TURN listeners (UDP, TCP, TLS) and relays for a real TURN
//! client (tests/interop/cmd/turnprobe, pion/turn like upstream turncat) to a UDP echo
//! backend; live edits of the manifests reach the running stunnerd, and restarting the
//! daemon does not take its listeners down.
//!
//! Everything is on loopback. stunnerd binds its TURN listeners and its health check on all
//! interfaces (upstream behaviour: `:PORT`, `http://:8086`), and the health check port is
//! fixed, so the tests here run one stunnerd at a time (`STUNNERD` lock).

#[path = "../../tests/support/external.rs"]
mod external;
#[path = "../../tests/support/ports.rs"]
mod ports;

use serde::Deserialize;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::net::UdpSocket;
use tokio::process::{Child, Command};

/// One stunnerd at a time: its health check always binds `:8086` (the zero config it
/// bootstraps with has the default endpoint, and so does every config we render).
static STUNNERD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What stunnerd's health check answers on (the default endpoint, `http://:8086`).
const HEALTH: &str = "127.0.0.1:8086";
const GATEWAY_ID: &str = "stunner/udp-gateway";

fn interop_bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/bin").join(name)
}

/// Whether the upstream programs this suite runs are built; if not, the test is skipped
/// (tests/support/external.rs).
fn interop_built() -> bool {
    let how = "run tests/interop/build.sh (scripts/test does)";
    ["stunnerd", "turnprobe"].into_iter().all(|name| external::built(interop_bin(name), how).is_some())
}

// ---------------------------------------------------------------------------------------
// Processes and their logs

type Log = Arc<Mutex<Vec<String>>>;

fn collect<R: AsyncRead + Unpin + Send + 'static>(r: R, log: Log, mut on_line: impl FnMut(&str) + Send + 'static) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            on_line(&line);
            log.lock().unwrap().push(line);
        }
    });
}

fn count(log: &Log, needle: &str) -> usize {
    log.lock().unwrap().iter().filter(|l| l.contains(needle)).count()
}

fn tail(log: &Log) -> String {
    let log = log.lock().unwrap();
    log[log.len().saturating_sub(60)..].join("\n")
}

/// Our daemon in standalone mode.
struct Daemon {
    child: Child,
    addr: String,
}

impl Daemon {
    /// Starts on `cds` (`127.0.0.1:0` for any port); retried a few times when the port is
    /// still held by a previous instance that is shutting down (a restart on the same port).
    async fn start(dir: &Path, cds: &str) -> Daemon {
        Daemon::start_with(dir, cds, &["--metrics-bind-address", "0"]).await
    }

    /// [`Daemon::start`] with `flags` added (which must say `--metrics-bind-address`).
    async fn start_with(dir: &Path, cds: &str, flags: &[&str]) -> Daemon {
        let mut last_log = String::new();
        for _ in 0..40 {
            let mut child = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
                .args(["--standalone", dir.to_str().unwrap(), "--config-discovery-address", cds])
                .args(["--health-probe-bind-address", "0"])
                .args(flags)
                .args(["--throttle-timeout", "50ms"])
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("the daemon starts");
            let log: Log = Arc::default();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let mut tx = Some(tx);
            collect(child.stderr.take().unwrap(), log.clone(), move |line| {
                if line.contains("serving config discovery")
                    && let Some(addr) = line.split("address=").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.trim().to_string());
                }
            });
            match tokio::time::timeout(Duration::from_secs(30), rx).await {
                Ok(Ok(addr)) => return Daemon { child, addr },
                Ok(Err(_)) => {
                    // stderr closed before the address line: it exited (port still taken?)
                    let _ = child.wait().await;
                    last_log = tail(&log);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(_) => panic!("the daemon did not serve within 30 s:\n{}", tail(&log)),
            }
        }
        panic!("the daemon did not start on {cds}:\n{last_log}");
    }

    async fn kill(mut self) {
        self.child.start_kill().unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// The real dataplane, watching our CDS like a pod does (`stunnerd -w`).
struct Stunnerd {
    child: Child,
    log: Log,
}

impl Stunnerd {
    async fn start(cds: &str) -> Stunnerd {
        Stunnerd::start_with_env(cds, &[]).await
    }

    /// [`Stunnerd::start`] with `env` set as well (a pod's `STUNNER_NODENAME`, say).
    async fn start_with_env(cds: &str, env: &[(&str, &str)]) -> Stunnerd {
        Stunnerd::start_program(&interop_bin("stunnerd"), cds, env).await
    }

    /// [`Stunnerd::start_with_env`] with another build of stunnerd (`stunnerd-git`).
    async fn start_program(program: &Path, cds: &str, env: &[(&str, &str)]) -> Stunnerd {
        Stunnerd::spawn(Command::new(program), cds, env).await
    }

    /// [`Stunnerd::start`] told the CDS at `name:port` (`port` of `cds`), as a pod is told its
    /// CDS Service, with `name` resolving to 127.0.0.1 for stunnerd alone: it runs in a mount
    /// namespace of its own (`unshare -m`, root only) whose /etc/hosts, bind-mounted over the
    /// machine's, says so. stunnerd then sends `Host: name:port` over loopback.
    async fn start_naming(cds: &str, name: &str, dir: &Path) -> Stunnerd {
        let hosts = dir.join("hosts");
        std::fs::write(&hosts, format!("127.0.0.1 localhost\n127.0.0.1 {name}\n")).unwrap();
        let mut command = Command::new("unshare");
        command.args(["-m", "sh", "-c", "mount --bind \"$0\" /etc/hosts && exec \"$@\""]);
        command.arg(&hosts).arg(interop_bin("stunnerd"));
        let port = cds.rsplit_once(':').unwrap().1;
        Stunnerd::spawn(command, &format!("{name}:{port}"), &[]).await
    }

    /// `command` (stunnerd, or what execs it, with its arguments so far) watching `cds`.
    async fn spawn(mut command: Command, cds: &str, env: &[(&str, &str)]) -> Stunnerd {
        wait_until_health_port_is_free().await;
        let mut child = command
            .args(["-w", "--id", GATEWAY_ID, "-c", &format!("http://{cds}")])
            .env("STUNNER_ADDR", "127.0.0.1")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("stunnerd starts");
        let log: Log = Arc::default();
        // upstream stunnerd logs to stdout; stderr for anything else (panics)
        collect(child.stdout.take().unwrap(), log.clone(), |_| {});
        collect(child.stderr.take().unwrap(), log.clone(), |_| {});
        Stunnerd { child, log }
    }

    /// Waits until its `/ready` answers 200: a non-zero config was reconciled.
    async fn wait_ready(&mut self) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            self.assert_running();
            if health("/ready").await.is_some_and(|(code, _)| code == 200) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("stunnerd not ready in 60 s; /ready: {:?}\n{}", health("/ready").await, tail(&self.log));
    }

    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("stunnerd exited ({status}):\n{}", tail(&self.log));
        }
    }

    /// Waits for at least `n` log lines containing `needle`.
    async fn wait_for_log(&self, needle: &str, n: usize) {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if count(&self.log, needle) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("stunnerd logged {needle:?} fewer than {n} times in 60 s:\n{}", tail(&self.log));
    }

    async fn stop(mut self) {
        self.child.start_kill().unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

/// A previous stunnerd (another test, or one still shutting down) may hold the health port.
async fn wait_until_health_port_is_free() {
    for _ in 0..100 {
        if std::net::TcpListener::bind("0.0.0.0:8086").is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("port 8086 (stunnerd's fixed health-check port) stays taken by another process");
}

/// GET on stunnerd's health endpoint: (status code, body).
async fn health(path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = async {
        let mut s = tokio::net::TcpStream::connect(HEALTH).await.ok()?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {HEALTH}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        let code = buf.split(' ').nth(1)?.parse().ok()?;
        Some((code, buf.split_once("\r\n\r\n")?.1.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), io).await.ok().flatten()
}

// ---------------------------------------------------------------------------------------
// Backend, manifests

/// A UDP echo server on loopback: the media backend behind the route.
async fn echo_backend() -> SocketAddr {
    echo_backend_with_peers().await.0
}

/// [`echo_backend`], with the addresses it has heard from so far: one per relay allocation
/// that sent it something.
async fn echo_backend_with_peers() -> (SocketAddr, tokio::sync::watch::Receiver<HashSet<SocketAddr>>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let (peers, heard) = tokio::sync::watch::channel(HashSet::new());
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            peers.send_if_modified(|p| p.insert(from));
            let _ = sock.send_to(&buf[..n], from).await;
        }
    });
    (addr, heard)
}

enum Auth {
    Static { user: &'static str, password: &'static str },
    Ephemeral { secret: &'static str },
}

fn gatewayclass_yaml(auth: &Auth) -> String {
    let auth = match auth {
        Auth::Static { user, password } => {
            format!("  authType: static\n  userName: \"{user}\"\n  password: \"{password}\"\n")
        }
        Auth::Ephemeral { secret } => format!("  authType: ephemeral\n  sharedSecret: \"{secret}\"\n"),
    };
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: stunner-gatewayclass
spec:
  controllerName: \"stunner.l7mp.io/gateway-operator\"
  parametersRef:
    group: \"stunner.l7mp.io\"
    kind: GatewayConfig
    name: stunner-gatewayconfig
    namespace: stunner
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata:
  name: stunner-gatewayconfig
  namespace: stunner
spec:
  realm: stunner.l7mp.io
{auth}---
# no enableMetricsEndpoint: a fixed :8080 would clash with other processes
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata:
  name: default
spec:
  replicas: 1
  image: docker.io/l7mp/stunnerd:latest
  command: [\"stunnerd\"]
  args: [\"-w\"]
"
    )
}

/// A Gateway with the given `(name, protocol, port)` listeners; TLS ones use `tls-secret`.
fn gateway_yaml(listeners: &[(&str, &str, u16)]) -> String {
    let mut s = String::from(
        "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: udp-gateway
  namespace: stunner
  annotations:
    stunner.l7mp.io/enable-mixed-protocol-lb: \"true\"
spec:
  gatewayClassName: stunner-gatewayclass
  addresses:
    - type: IPAddress
      value: 127.0.0.1
  listeners:
",
    );
    for (name, proto, port) in listeners {
        s += &format!("    - name: {name}\n      port: {port}\n      protocol: {proto}\n");
        if *proto == "TLS" {
            s += "      tls:\n        mode: Terminate\n        certificateRefs:\n          - kind: Secret\n            name: tls-secret\n";
        }
    }
    s
}

/// A route (`api`, `kind`) named `name` in `stunner` from the Gateway (its listener `section`,
/// or every listener) to the StaticService `backend`.
fn route_yaml(api: &str, kind: &str, name: &str, section: Option<&str>, backend: &str) -> String {
    let section = section.map(|l| format!("\n      sectionName: {l}")).unwrap_or_default();
    format!(
        "apiVersion: {api}
kind: {kind}
metadata:
  name: {name}
  namespace: stunner
spec:
  parentRefs:
    - name: udp-gateway{section}
  rules:
    - backendRefs:
        - group: stunner.l7mp.io
          kind: StaticService
          name: {backend}
"
    )
}

/// A StaticService named `name` in `stunner` with the one prefix `prefix`.
fn static_service_yaml(name: &str, prefix: &str) -> String {
    format!(
        "apiVersion: stunner.l7mp.io/v1
kind: StaticService
metadata:
  name: {name}
  namespace: stunner
spec:
  prefixes:
    - \"{prefix}\"
"
    )
}

fn indent(pem: &str) -> String {
    pem.lines().map(|l| format!("    {l}\n")).collect()
}

/// A fresh manifest directory; `cert` = (PEM cert, PEM key) writes the TLS Secret.
fn manifests(name: &str, auth: &Auth, listeners: &[(&str, &str, u16)], cert: Option<&(String, String)>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("interop-stunnerd-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), gatewayclass_yaml(auth)).unwrap();
    std::fs::write(dir.join("gateway.yaml"), gateway_yaml(listeners)).unwrap();
    let route = route_yaml("stunner.l7mp.io/v1", "UDPRoute", "media-plane", None, "media-servers");
    std::fs::write(dir.join("route.yaml"), route).unwrap();
    std::fs::write(dir.join("staticservice.yaml"), static_service_yaml("media-servers", "127.0.0.1/32")).unwrap();
    if let Some((crt, key)) = cert {
        let secret = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls-secret\n  namespace: stunner\n\
             type: kubernetes.io/tls\nstringData:\n  tls.crt: |\n{}  tls.key: |\n{}",
            indent(crt),
            indent(key)
        );
        std::fs::write(dir.join("secret.yaml"), secret).unwrap();
    }
    dir
}

/// Replaces a manifest the way many editors save: a temporary file renamed over it.
fn rewrite(dir: &Path, file: &str, content: &str) {
    let tmp = dir.join(format!(".{file}.tmp"));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, dir.join(file)).unwrap();
}

/// A self-signed certificate for 127.0.0.1 (generated per run by turnprobe; test-only key).
async fn self_signed() -> (String, String) {
    let out = Command::new(interop_bin("turnprobe")).arg("selfsigned").output().await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (v["cert"].as_str().unwrap().to_string(), v["key"].as_str().unwrap().to_string())
}

// ---------------------------------------------------------------------------------------
// The TURN probe

#[derive(Debug, Deserialize)]
struct Verdict {
    ok: bool,
    stage: String,
    #[serde(default)]
    error: String,
    #[serde(default)]
    relay: String,
    received: usize,
    /// turntcpprobe's figures, in milliseconds: the Allocate, CreatePermission + Connect +
    /// ConnectionBind, and each message's round trip through the relay.
    #[serde(default)]
    allocate_ms: f64,
    #[serde(default)]
    connect_ms: f64,
    #[serde(default)]
    rtt_ms: Vec<f64>,
}

/// How to reach a listener, and with which credentials.
#[derive(Clone)]
struct Probe {
    /// `turnprobe` (UDP peers) or `turntcpprobe` (RFC 6062 TCP allocations to TCP peers).
    program: &'static str,
    transport: &'static str,
    host: &'static str,
    port: u16,
    creds: Vec<String>,
    extra: Vec<String>,
}

impl Probe {
    fn new(transport: &'static str, port: u16) -> Probe {
        Probe { program: "turnprobe", transport, host: "127.0.0.1", port, creds: vec![], extra: vec![] }
    }
    /// An RFC 6062 TCP allocation through the TURN-TCP listener on `port`, to a TCP peer.
    fn tcp_allocation(port: u16) -> Probe {
        Probe { program: "turntcpprobe", ..Probe::new("tcp", port) }
    }
    fn host(mut self, host: &'static str) -> Probe {
        self.host = host;
        self
    }
    fn user(mut self, user: &str, password: &str) -> Probe {
        self.creds = vec!["--user".into(), user.into(), "--password".into(), password.into()];
        self
    }
    fn secret(mut self, secret: &str) -> Probe {
        self.creds = vec!["--secret".into(), secret.into()];
        self
    }
    fn arg(mut self, a: &str) -> Probe {
        self.extra.push(a.into());
        self
    }

    /// One run of turnprobe against `peer`.
    async fn run(&self, peer: SocketAddr) -> Verdict {
        let out = Command::new(interop_bin(self.program))
            .args(["--server", &format!("{}:{}", self.host, self.port), "--transport", self.transport])
            .args(["--peer", &peer.to_string(), "--count", "5", "--timeout", "20s"])
            .args(&self.creds)
            .args(&self.extra)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(40), out).await.expect("turnprobe ends").unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{} printed no verdict ({e}): {}\n{}",
                self.program,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Runs until `want` holds (bounded: 8 runs or 90 s), for effects that take a moment to
    /// propagate (a live config change) or a lost UDP packet; panics with every verdict.
    async fn until(&self, what: &str, sd: &Stunnerd, peer: SocketAddr, want: impl Fn(&Verdict) -> bool) -> Verdict {
        let start = Instant::now();
        let mut seen = vec![];
        for _ in 0..8 {
            let v = self.run(peer).await;
            if want(&v) {
                return v;
            }
            seen.push(format!("{v:?}"));
            if start.elapsed() > Duration::from_secs(90) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!(
            "{what} ({} on port {}): never got it; verdicts:\n{}\nstunnerd log:\n{}",
            self.transport,
            self.port,
            seen.join("\n"),
            tail(&sd.log)
        );
    }

    async fn relays(&self, what: &str, sd: &Stunnerd, peer: SocketAddr) -> Verdict {
        self.until(what, sd, peer, |v| v.ok && v.received > 0).await
    }

    /// Refused by the server at `stage` (an error response, not a timeout): `ALLOCATE` for
    /// bad credentials, `PERMISSION` for a peer that no route of the listener allows, `PEER`
    /// for a TCP peer that no `protocol: TCP` cluster of the listener allows.
    async fn refused(&self, what: &str, sd: &Stunnerd, peer: SocketAddr, stage: &str) -> Verdict {
        self.until(what, sd, peer, |v| !v.ok && v.stage == stage && v.error.contains("error response")).await
    }
}

/// Where turnprobe stops when stunnerd refuses: bad credentials get an error response to the
/// Allocate (pion/turn answers a wrong password with 400), a peer outside every routed cluster one to the CreatePermission (and stunnerd logs
/// `permission denied on listener ...: no route to endpoint`).
const ALLOCATE: &str = "allocate";
const PERMISSION: &str = "permission";
/// Where turntcpprobe stops when stunnerd refuses the Connect (RFC 6062) to a TCP peer.
const PEER: &str = "peer";

// ---------------------------------------------------------------------------------------
// Tests

#[tokio::test]
async fn stunnerd_runs_udp_tcp_tls_listeners_and_follows_live_changes() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let ports = ports::free_ports(4);
    let (udp, tcp, tls, extra) = (ports[0], ports[1], ports[2], ports[3]);
    let cert = self_signed().await;
    let listeners = [("udp-listener", "UDP", udp), ("tcp-listener", "TCP", tcp), ("tls-listener", "TLS", tls)];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("live", &auth, &listeners, Some(&cert));
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &cert.0).unwrap();
    let backend = echo_backend().await;
    let outsider: SocketAddr = format!("127.0.0.2:{}", backend.port()).parse().unwrap();

    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;
    sd.wait_for_log("connection successfully opened to config discovery server", 1).await;

    // The status page: the three listeners are running what we rendered.
    let (code, status) = health("/status").await.expect("stunnerd /status");
    assert_eq!(code, 200, "{status}");
    for l in ["udp-listener", "tcp-listener", "tls-listener"] {
        assert!(status.contains(&format!("stunner/udp-gateway/{l}")), "{l} in {status}");
    }

    let ok = |t, port| Probe::new(t, port).user("user-1", "pass-1");
    let v = ok("udp", udp).relays("UDP allocation relays", &sd, backend).await;
    assert!(v.relay.starts_with("127.0.0.1:"), "relay address is $STUNNER_ADDR: {v:?}");
    ok("tcp", tcp).relays("TCP allocation relays", &sd, backend).await;
    // TLS verified against our self-signed certificate: stunnerd serves the Secret we gave.
    ok("tls", tls).arg("--ca").arg(ca.to_str().unwrap()).relays("TLS allocation relays", &sd, backend).await;
    ok("udp", udp).refused("peer outside the cluster", &sd, outsider, PERMISSION).await;
    // stunnerd logs the refusal around the time it answers: wait for the line, not race it.
    sd.wait_for_log("permission denied on listener \"stunner/udp-gateway/udp-listener\"", 1).await;
    Probe::new("udp", udp).user("user-1", "wrong").refused("wrong password", &sd, backend, ALLOCATE).await;

    let pid = sd.child.id();

    // Live: a new listener opens its port.
    let mut with_extra = listeners.to_vec();
    with_extra.push(("extra-listener", "UDP", extra));
    rewrite(&dir, "gateway.yaml", &gateway_yaml(&with_extra));
    ok("udp", extra).relays("the new listener relays", &sd, backend).await;

    // Live: a new password; the old one is refused.
    rewrite(&dir, "gatewayclass.yaml", &gatewayclass_yaml(&Auth::Static { user: "user-1", password: "pass-2" }));
    ok("udp", udp).refused("the old password", &sd, backend, ALLOCATE).await;
    let new = |t, port| Probe::new(t, port).user("user-1", "pass-2");
    new("udp", udp).relays("the new password", &sd, backend).await;
    new("tcp", tcp).relays("the new password over TCP", &sd, backend).await;

    // Live: the route is removed; the backend is no longer reachable.
    std::fs::remove_file(dir.join("route.yaml")).unwrap();
    new("udp", udp).refused("relay after the route is gone", &sd, backend, PERMISSION).await;
    new("udp", extra).refused("relay after the route is gone", &sd, backend, PERMISSION).await;

    // All of it without a restart, and without a configuration stunnerd rejected.
    sd.assert_running();
    assert_eq!(sd.child.id(), pid);
    assert_eq!(count(&sd.log, "Could not reconcile"), 0, "{}", tail(&sd.log));
    assert_eq!(count(&sd.log, "Starting stunnerd"), 1);

    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn stunnerd_accepts_ephemeral_turn_rest_credentials() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let ports = ports::free_ports(2);
    let (udp, tcp) = (ports[0], ports[1]);
    let auth = Auth::Ephemeral { secret: "my-shared-secret" };
    let dir = manifests("ephemeral", &auth, &[("udp-listener", "UDP", udp), ("tcp-listener", "TCP", tcp)], None);
    let backend = echo_backend().await;

    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;

    let good = |t, port| Probe::new(t, port).secret("my-shared-secret");
    let v = good("udp", udp).relays("ephemeral credentials over UDP", &sd, backend).await;
    assert!(v.received > 0);
    good("tcp", tcp).relays("ephemeral credentials over TCP", &sd, backend).await;
    Probe::new("udp", udp).secret("another-secret").refused("a wrong secret", &sd, backend, ALLOCATE).await;
    good("udp", udp).arg("--ttl=-1h").refused("an expired username", &sd, backend, ALLOCATE).await;
    sd.wait_for_log("expired time-windowed username", 1).await;

    // Rotating the secret live.
    rewrite(&dir, "gatewayclass.yaml", &gatewayclass_yaml(&Auth::Ephemeral { secret: "rotated" }));
    good("udp", udp).refused("the old secret", &sd, backend, ALLOCATE).await;
    Probe::new("udp", udp).secret("rotated").relays("the rotated secret", &sd, backend).await;

    sd.assert_running();
    assert_eq!(count(&sd.log, "Could not reconcile"), 0, "{}", tail(&sd.log));
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn restarting_the_daemon_keeps_stunnerd_listeners_up() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let ports = ports::free_ports(2);
    let (udp, tcp) = (ports[0], ports[1]);
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("restart", &auth, &[("udp-listener", "UDP", udp), ("tcp-listener", "TCP", tcp)], None);
    let backend = echo_backend().await;
    let probe = Probe::new("udp", udp).user("user-1", "pass-1");
    let tcp_probe = Probe::new("tcp", tcp).user("user-1", "pass-1");

    // A port from outside the ephemeral range, so no socket bound meanwhile takes it from the
    // restarted daemon.
    let cds = format!("127.0.0.1:{}", ports::free_ports(1)[0]);
    let daemon = Daemon::start(&dir, &cds).await;
    assert_eq!(daemon.addr, cds);
    let mut sd = Stunnerd::start(&cds).await;
    sd.wait_ready().await;
    const CONNECTED: &str = "connection successfully opened to config discovery server";
    sd.wait_for_log(CONNECTED, 1).await;
    probe.relays("before the restart", &sd, backend).await;
    const APPLIED: &str = "New configuration available";
    let applied_before = count(&sd.log, APPLIED);

    // The daemon dies (SIGKILL: no goodbye); stunnerd keeps serving while it retries (the
    // upstream client logs every failed attempt, one a second).
    daemon.kill().await;
    sd.wait_for_log("failed to init CDS watcher", 2).await;
    probe.relays("while the CDS is down", &sd, backend).await;
    tcp_probe.relays("while the CDS is down, TCP", &sd, backend).await;
    assert_eq!(health("/ready").await.map(|r| r.0), Some(200), "ready while the CDS is down");

    // Started again on the same CDS port: stunnerd reconnects and its listeners stay.
    let daemon = Daemon::start(&dir, &cds).await;
    assert_eq!(daemon.addr, cds);
    sd.wait_for_log(CONNECTED, 2).await;
    // The restarted daemon serves the config again on the new watch...
    sd.wait_for_log(APPLIED, applied_before + 1).await;
    // ...and a (wrong) empty or partial one after it would come on the same watch before a
    // change made now: once that change is applied, every config it sent is in the log.
    rewrite(&dir, "staticservice.yaml", &static_service_yaml("media-servers", "127.0.0.0/24"));
    sd.wait_for_log("127.0.0.0/24", 1).await;
    probe.relays("after the restart", &sd, backend).await;
    tcp_probe.relays("after the restart, TCP", &sd, backend).await;
    assert_eq!(health("/ready").await.map(|r| r.0), Some(200), "still ready");

    // Whatever the restarted daemon pushed, stunnerd applied only configs with both listeners
    // and never deleted a listener, cluster or anything else.
    let log = sd.log.lock().unwrap().clone();
    let applied: Vec<&String> = log.iter().filter(|l| l.contains(APPLIED)).collect();
    for line in &applied[1..] {
        // [0] is the bootstrap zero config stunnerd applies to itself before any CDS contact
        assert!(
            line.contains("stunner/udp-gateway/udp-listener") && line.contains("stunner/udp-gateway/tcp-listener"),
            "stunnerd applied a config without our listeners: {line}"
        );
    }
    for line in log.iter().filter(|l| l.contains("Reconciliation ready:")) {
        assert!(line.contains("deleted objects: 0"), "{line}");
    }
    assert_eq!(count(&sd.log, "Could not reconcile"), 0, "{}", tail(&sd.log));
    sd.assert_running();
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The DNS rebinding guard lets stunnerd in when it names the CDS Service (as every pod's
/// stunnerd does) even over loopback, and refuses it when it names another host: stunnerd
/// resolves both names to 127.0.0.1 in a mount namespace of its own ([`Stunnerd::start_naming`]).
#[tokio::test]
async fn stunnerd_naming_the_cds_service_over_loopback_is_served() {
    if !interop_built() {
        return;
    }
    if !is_root() {
        external::unavailable("a mount namespace (unshare -m) needs root", "CI");
        return;
    }
    let _one = STUNNERD.lock().await;
    let udp = ports::free_ports(1)[0];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("service-name", &auth, &[("udp-listener", "UDP", udp)], None);
    let backend = echo_backend().await;
    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;

    // The Service's name in the daemon's (default) namespace, as the renderer advertises it.
    let mut sd = Stunnerd::start_naming(&daemon.addr, "stunner-config-discovery.stunner-system.svc", &dir).await;
    sd.wait_ready().await;
    sd.wait_for_log("connection successfully opened to config discovery server", 1).await;
    Probe::new("udp", udp).user("user-1", "pass-1").relays("through a stunnerd naming the Service", &sd, backend).await;
    sd.stop().await;

    // A name the daemon does not answer to: misdirected, never a config.
    let sd = Stunnerd::start_naming(&daemon.addr, "attacker.example", &dir).await;
    sd.wait_for_log("failed to init CDS watcher", 2).await;
    let served = sd.log.lock().unwrap().iter().any(|l| l.contains("stunner/udp-gateway/udp-listener"));
    assert!(!served, "a misdirected stunnerd got the config:\n{}", tail(&sd.log));
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether this process runs as root (`unshare -m` needs it).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
}

/// `GET http://addr{target}`: the status and the body.
async fn http_get(addr: &str, target: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        raw
    };
    let raw = tokio::time::timeout(Duration::from_secs(10), io).await.expect("an answer in time");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), body.to_string())
}

/// A WebRTC application server's view: it asks the operator's credential API (`/ice`) for an
/// ICE configuration, and a TURN client relays through the real stunnerd with it, over every
/// URI it was given, in both auth modes; a credential changed by one character is refused.
#[tokio::test]
async fn turn_clients_relay_with_credentials_from_the_credential_api() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    for auth in [Auth::Static { user: "user-1", password: "pass-1" }, Auth::Ephemeral { secret: "api-secret" }] {
        let ports = ports::free_ports(4);
        let (udp, tcp, api, metrics) = (ports[0], ports[1], ports[2], ports[3]);
        let dir = manifests("auth-api", &auth, &[("udp-listener", "UDP", udp), ("tcp-listener", "TCP", tcp)], None);
        let backend = echo_backend().await;
        let (api, metrics) = (format!("127.0.0.1:{api}"), format!("127.0.0.1:{metrics}"));
        let flags = ["--auth-bind-address", &api, "--metrics-bind-address", &metrics];
        let daemon = Daemon::start_with(&dir, "127.0.0.1:0", &flags).await;
        let mut sd = Stunnerd::start(&daemon.addr).await;
        sd.wait_ready().await;

        let (status, body) = http_get(&api, "/ice?service=turn&username=alice&ttl=3600").await;
        assert_eq!(status, 200, "{body}");
        let ice: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(ice["iceTransportPolicy"], "all");
        let server = &ice["iceServers"][0];
        let (user, credential) = (server["username"].as_str().unwrap(), server["credential"].as_str().unwrap());
        match auth {
            Auth::Static { user: u, password } => assert_eq!((user, credential), (u, password)),
            Auth::Ephemeral { .. } => assert!(user.ends_with(":alice"), "{user}"),
        }
        let urls: Vec<_> = server["urls"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
        let want = [format!("turn:127.0.0.1:{udp}?transport=udp"), format!("turn:127.0.0.1:{tcp}?transport=tcp")];
        assert_eq!(urls, want);
        for url in &urls {
            // turn:127.0.0.1:PORT?transport=T
            let (host_port, transport) = url.trim_start_matches("turn:").split_once("?transport=").unwrap();
            let port: u16 = host_port.rsplit_once(':').unwrap().1.parse().unwrap();
            let transport = if transport == "udp" { "udp" } else { "tcp" };
            let probe = Probe::new(transport, port).user(user, credential);
            probe.relays(&format!("credentials from /ice over {url}"), &sd, backend).await;
        }
        let wrong = format!("{credential}x");
        Probe::new("udp", udp).user(user, &wrong).refused("a changed credential", &sd, backend, ALLOCATE).await;
        // The TURN REST answer carries the same credential for the first Gateway.
        let (status, body) = http_get(&api, "/?service=turn&username=alice&ttl=3600").await;
        let turn: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!((status, turn["ttl"].as_i64(), turn["uris"].as_array().unwrap().len()), (200, Some(3600), 2));
        // Counted beside the operator's own metrics.
        let (_, text) = http_get(&metrics, "/metrics").await;
        let counted = r#"stunner_gateway_operator_auth_requests_total{endpoint="ice",result="success"} 1"#;
        assert!(text.lines().any(|l| l == counted), "{text}");
        assert!(text.contains("stunner_gateway_operator_render_total"), "{text}");

        sd.stop().await;
        daemon.kill().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// An echo server on `[::1]`, the IPv6 peer.
async fn echo_backend_v6() -> SocketAddr {
    let sock = UdpSocket::bind("[::1]:0").await.expect("an IPv6 loopback");
    let addr = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = sock.recv_from(&mut buf).await {
            let _ = sock.send_to(&buf[..n], from).await;
        }
    });
    addr
}

/// A dual-stack Gateway (docs/deploy.md §12): with an address of each family, `/ice` gives a
/// URI of each per transport, IPv4 first, and one stunnerd v1.2.1 (whose listeners bind the
/// dual-stack wildcard) relays for a TURN client over 127.0.0.1 and one over ::1 with those
/// credentials. pion's client asks for a relay of its own family (RFC 6156
/// REQUESTED-ADDRESS-FAMILY), so the IPv6 client relays to an IPv6 peer and is refused an
/// IPv4 one; stunnerd v1.2.1 reports its one relay address (`STUNNER_ADDR`, 127.0.0.1 here)
/// as the IPv6 allocation's relayed address, which the docs say.
#[tokio::test]
async fn one_stunnerd_serves_clients_over_ipv4_and_ipv6_with_credentials_from_the_credential_api() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let ports = ports::free_ports(4);
    let (udp, tcp, api, metrics) = (ports[0], ports[1], ports[2], ports[3]);
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let listeners = [("udp-listener", "UDP", udp), ("tcp-listener", "TCP", tcp)];
    let dir = manifests("dual-stack", &auth, &listeners, None);
    let ipv4 = "    - type: IPAddress\n      value: 127.0.0.1\n";
    let dual = gateway_yaml(&listeners).replace(ipv4, &format!("{ipv4}    - type: IPAddress\n      value: \"::1\"\n"));
    rewrite(&dir, "gateway.yaml", &dual);
    let both = static_service_yaml("media-servers", "127.0.0.1/32") + "    - \"::1/128\"\n";
    rewrite(&dir, "staticservice.yaml", &both);
    let (peer_v4, peer_v6) = (echo_backend().await, echo_backend_v6().await);
    let (api, metrics) = (format!("127.0.0.1:{api}"), format!("127.0.0.1:{metrics}"));
    let flags = ["--auth-bind-address", &api, "--metrics-bind-address", &metrics];
    let daemon = Daemon::start_with(&dir, "127.0.0.1:0", &flags).await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;

    let (status, body) = http_get(&api, "/ice?service=turn&username=alice").await;
    assert_eq!(status, 200, "{body}");
    let ice: serde_json::Value = serde_json::from_str(&body).unwrap();
    let server = &ice["iceServers"][0];
    let (user, credential) = (server["username"].as_str().unwrap(), server["credential"].as_str().unwrap());
    let urls: Vec<_> = server["urls"].as_array().unwrap().iter().map(|u| u.as_str().unwrap()).collect();
    let want = [
        format!("turn:127.0.0.1:{udp}?transport=udp"),
        format!("turn:[::1]:{udp}?transport=udp"),
        format!("turn:127.0.0.1:{tcp}?transport=tcp"),
        format!("turn:[::1]:{tcp}?transport=tcp"),
    ];
    assert_eq!(urls, want);
    for url in &urls {
        let (host_port, transport) = url.trim_start_matches("turn:").split_once("?transport=").unwrap();
        let (host, port) = host_port.rsplit_once(':').unwrap();
        let probe = Probe::new(if transport == "udp" { "udp" } else { "tcp" }, port.parse().unwrap());
        let probe = probe.user(user, credential);
        let v = match host {
            "127.0.0.1" => probe.relays(&format!("IPv4 over {url}"), &sd, peer_v4).await,
            "[::1]" => {
                let probe = probe.host("[::1]").arg("--local").arg("[::1]:0");
                let what = format!("an IPv4 peer over {url}");
                probe.refused(&what, &sd, peer_v4, PERMISSION).await;
                probe.relays(&format!("IPv6 over {url}"), &sd, peer_v6).await
            }
            other => panic!("{other} in {url}"),
        };
        assert!(v.relay.starts_with("127.0.0.1:"), "stunnerd's one relay address, over {host}: {v:?}");
    }
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `gatewayclass_yaml` with `line` added to the GatewayConfig's spec.
fn gatewayclass_with(auth: &Auth, line: &str) -> String {
    let realm = "  realm: stunner.l7mp.io\n";
    gatewayclass_yaml(auth).replace(realm, &format!("{realm}  {line}\n"))
}

/// `userQuota` reaches stunnerd as `admin.user_quota`, which v1.2.1 takes (its admin status
/// says `quota=2`) but does not enforce: the open stunnerd's quota handler is a stub that
/// admits every allocation (stunner `handlers.go`, `newQuotaHandlerStub`; at upstream's head
/// `internal/quota`), so a third simultaneous allocation of one user is relayed too. Should a
/// stunnerd that enforces it come in, this test fails at the third allocation, which it then
/// refuses with 486, and docs/compatibility.md must say so.
#[tokio::test]
async fn stunnerd_takes_the_user_quota_but_the_open_build_does_not_enforce_it() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let udp = ports::free_ports(1)[0];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("quota", &auth, &[("udp-listener", "UDP", udp)], None);
    rewrite(&dir, "gatewayclass.yaml", &gatewayclass_with(&auth, "userQuota: 2"));
    let (backend, mut relays) = echo_backend_with_peers().await;
    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;
    sd.wait_for_log("quota=2", 1).await;

    // Two allocations of user-1 held (each probe relays a datagram every 50 ms for 12 s, and
    // holds its allocation until done), then a third of the same user.
    let probe = Probe::new("udp", udp).user("user-1", "pass-1");
    let holding = probe.clone().arg("--count=240").arg("--timeout=40s");
    let held: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn({
                let p = holding.clone();
                async move { p.run(backend).await }
            })
        })
        .collect();
    // v1.2.1 logs no allocation at INFO: both are allocated once the backend has heard from
    // two relay addresses.
    let both = tokio::time::timeout(Duration::from_secs(20), relays.wait_for(|r| r.len() == 2)).await;
    both.expect("two relayed allocations within 20 s").expect("the backend runs");
    let third = probe.run(backend).await;
    let third_done = Instant::now();
    for h in held {
        let v = h.await.unwrap();
        assert!(v.ok, "a held allocation: {v:?}");
    }
    assert!(third_done.elapsed() > Duration::from_secs(3), "the first two were still held during the third");
    assert_eq!(relays.borrow().len(), 3, "three allocations at the backend");
    assert!(third.ok && third.received > 0, "v1.2.1 relays the third allocation too: {third:?}\n{}", tail(&sd.log));
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A STUN Binding request (RFC 5389: type 0x0001, no attributes) with `tid`.
fn binding_request(tid: [u8; 12]) -> Vec<u8> {
    let mut m = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
    m.extend_from_slice(&tid);
    m
}

/// `stunMode` renders `auth.type: none`: stunnerd then answers STUN binding requests and
/// refuses every TURN allocation with an error response (pion/turn's "STUN only mode": 401
/// without credentials, 400 with them), whatever credentials the client brings.
#[tokio::test]
async fn stun_mode_serves_binding_requests_and_refuses_allocations() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let udp = ports::free_ports(1)[0];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("stun-mode", &auth, &[("udp-listener", "UDP", udp)], None);
    rewrite(&dir, "gatewayclass.yaml", &gatewayclass_with(&auth, "stunMode: true"));
    let backend = echo_backend().await;
    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;

    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let tid = *b"stun-mode-01";
    let mut answer = None;
    for _ in 0..10 {
        sock.send_to(&binding_request(tid), ("127.0.0.1", udp)).await.unwrap();
        let mut buf = [0u8; 512];
        if let Ok(Ok((n, _))) = tokio::time::timeout(Duration::from_millis(500), sock.recv_from(&mut buf)).await {
            answer = Some(buf[..n].to_vec());
            break;
        }
    }
    let answer = answer.unwrap_or_else(|| panic!("no answer to a binding request:\n{}", tail(&sd.log)));
    assert_eq!(&answer[..2], &[0x01, 0x01], "a Binding Success Response");
    assert_eq!(&answer[8..20], &tid, "to our request");
    // XOR-MAPPED-ADDRESS (0x0020) names our port.
    let port = sock.local_addr().unwrap().port() ^ 0x2112;
    assert!(answer[20..].windows(2).any(|w| w == port.to_be_bytes()), "our mapped address in {answer:?}");

    let probe = Probe::new("udp", udp).user("user-1", "pass-1");
    probe.refused("an allocation in STUN mode", &sd, backend, ALLOCATE).await;
    sd.assert_running();
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Relay address discovery in standalone mode: the manifests' Node has an external address
/// (127.0.0.2 here, a loopback address that stands for a public one), the Gateway asks for
/// discovery, and stunnerd, started as on that node (`STUNNER_NODENAME`, which stunnerd sends
/// as `?node=`), gets that address as its listener's relay address: a TURN client reaching it
/// there is relayed from it. The CDS answers `?node=` the same way to anyone (`stunnerctl
/// config --node`), and a node it does not know gets `$STUNNER_ADDR`.
#[tokio::test]
async fn stunnerd_relays_from_its_nodes_address_with_relay_address_discovery() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let udp = ports::free_ports(1)[0];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("relay-discovery", &auth, &[("udp-listener", "UDP", udp)], None);
    let annotations = "  annotations:\n";
    let gateway = gateway_yaml(&[("udp-listener", "UDP", udp)])
        .replace(annotations, &format!("{annotations}    stunner.l7mp.io/enable-relay-address-discovery: \"true\"\n"));
    rewrite(&dir, "gateway.yaml", &gateway);
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: node-1}\n\
                status: {addresses: [{type: InternalIP, address: 10.0.0.1}, {type: ExternalIP, address: 127.0.0.2}]}\n";
    std::fs::write(dir.join("node.yaml"), node).unwrap();
    let backend = echo_backend().await;
    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;

    let config = |node: &'static str| {
        let addr = daemon.addr.clone();
        async move {
            let (code, body) = http_get(&addr, &format!("/api/v1/configs/{GATEWAY_ID}?node={node}")).await;
            assert_eq!(code, 200, "{body}");
            let c: serde_json::Value = serde_json::from_str(&body).unwrap();
            c["listeners"][0]["address"].as_str().unwrap().to_string()
        }
    };
    assert_eq!(config("node-1").await, "127.0.0.2");
    assert_eq!(config("elsewhere").await, "$STUNNER_ADDR");

    let mut sd = Stunnerd::start_with_env(&daemon.addr, &[("STUNNER_NODENAME", "node-1")]).await;
    sd.wait_ready().await;
    let v = Probe::new("udp", udp)
        .host("127.0.0.2")
        .user("user-1", "pass-1")
        .relays("relayed from the node's address", &sd, backend)
        .await;
    assert!(v.relay.starts_with("127.0.0.2:"), "relayed from {}", v.relay);
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------
// TCP clusters (RFC 6062), with stunnerd from the head of l7mp/stunner

/// stunnerd built from the HEAD of `STUNNER_GIT` (a git directory of a clone of
/// github.com/l7mp/stunner) by tests/interop/build.sh, for what the pinned v1.2.1 lacks: TCP
/// clusters (l7mp/stunner#232). With `STUNNER_GIT` unset the test is skipped with a notice (a
/// failure with `STUNNER_REQUIRE_GIT` set); set, the binary must be of that HEAD.
fn stunnerd_git() -> Option<PathBuf> {
    let Some(git) = std::env::var_os("STUNNER_GIT").filter(|v| !v.is_empty()) else {
        external::unavailable(
            "STUNNER_GIT is not set (a git directory of a clone of github.com/l7mp/stunner with TCP clusters; \
             tests/interop/build.sh builds its HEAD into bin/stunnerd-git)",
            "STUNNER_REQUIRE_GIT",
        );
        return None;
    };
    let head = std::process::Command::new("git").arg("--git-dir").arg(&git).args(["rev-parse", "HEAD"]).output();
    let head = head.expect("git runs");
    assert!(head.status.success(), "STUNNER_GIT={git:?} is not a git directory");
    let built = std::fs::read_to_string(interop_bin("stunnerd-git.commit")).unwrap_or_default();
    assert_eq!(
        built.trim(),
        String::from_utf8_lossy(&head.stdout).trim(),
        "bin/stunnerd-git is not of STUNNER_GIT's HEAD: run tests/interop/build.sh with STUNNER_GIT set"
    );
    Some(interop_bin("stunnerd-git"))
}

/// TCP echo servers, one on each of `ips` and all on one port (which is returned): the backend
/// a TCPRoute names, and peers that no route names, listening so that a refusal can only come
/// from stunnerd.
async fn tcp_echo_backends(ips: &[&str]) -> u16 {
    let mut port = 0;
    for ip in ips {
        let listener = tokio::net::TcpListener::bind((*ip, port)).await.unwrap();
        port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut rx, mut tx) = conn.into_split();
                    let _ = tokio::io::copy(&mut rx, &mut tx).await;
                });
            }
        });
    }
    port
}

/// A TCPRoute reaches a real dataplane as a TCP cluster: stunnerd from the head of l7mp/stunner
/// (`STUNNER_GIT`) takes what we render over CDS, makes RFC 6062 TCP allocations on its TURN-TCP
/// listener only while a `protocol: TCP` cluster is routed there, and connects them to the TCP
/// peer the TCPRoute names (an echo comes back), never to a peer no route names (refused at
/// CreatePermission) nor to one only a UDP cluster names (refused at Connect). Prints its
/// figures (allocation time, connect time, echo round trips) with `--nocapture`.
#[tokio::test]
async fn stunnerd_at_stunner_git_head_relays_tcp_allocations_to_tcproute_backends() {
    if !interop_built() || external::built(interop_bin("turntcpprobe"), "run tests/interop/build.sh").is_none() {
        return;
    }
    let Some(stunnerd) = stunnerd_git() else { return };
    let _one = STUNNERD.lock().await;
    let tcp = ports::free_ports(1)[0];
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("tcproute", &auth, &[("tcp-listener", "TCP", tcp)], None);
    // A UDPRoute to 127.0.0.3 (a `protocol: UDP` cluster), and the TCPRoute's backend 127.0.0.1.
    let udp_only = route_yaml("stunner.l7mp.io/v1", "UDPRoute", "udp-only", None, "udp-only");
    std::fs::write(dir.join("route.yaml"), udp_only).unwrap();
    let services =
        [static_service_yaml("udp-only", "127.0.0.3/32"), static_service_yaml("tcp-backends", "127.0.0.1/32")];
    std::fs::write(dir.join("staticservice.yaml"), services.join("---\n")).unwrap();
    let port = tcp_echo_backends(&["127.0.0.1", "127.0.0.2", "127.0.0.3"]).await;
    let peer = |ip: &str| -> SocketAddr { format!("{ip}:{port}").parse().unwrap() };
    let (backend, unnamed, udp_only) = (peer("127.0.0.1"), peer("127.0.0.2"), peer("127.0.0.3"));

    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start_program(&stunnerd, &daemon.addr, &[]).await;
    sd.wait_ready().await;
    let probe = Probe::tcp_allocation(tcp).user("user-1", "pass-1");

    // Only a UDP cluster behind the listener: stunnerd refuses TCP allocations outright.
    let no_tcp_cluster = probe.refused("a TCP allocation with no TCP cluster routed", &sd, backend, ALLOCATE).await;

    // The TCPRoute, live: we render a `protocol: TCP` cluster on the listener's routes.
    let tcp_route =
        route_yaml("gateway.networking.k8s.io/v1", "TCPRoute", "tcp-backends", Some("tcp-listener"), "tcp-backends");
    rewrite(&dir, "tcproute.yaml", &tcp_route);
    let first = probe.relays("a TCP allocation to the TCPRoute's backend", &sd, backend).await;
    let (code, body) = http_get(&daemon.addr, "/api/v1/configs/stunner/udp-gateway").await;
    assert_eq!(code, 200, "{body}");
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    let cluster = config["clusters"].as_array().unwrap().iter().find(|c| c["name"] == "stunner/tcp-backends");
    let cluster = cluster.unwrap_or_else(|| panic!("the TCPRoute's cluster in {config}"));
    assert_eq!(cluster["protocol"], "TCP", "{cluster}");
    assert_eq!(cluster["endpoints"], serde_json::json!(["127.0.0.1/32"]), "{cluster}");
    let listener = &config["listeners"][0];
    assert_eq!(listener["routes"], serde_json::json!(["stunner/udp-only", "stunner/tcp-backends"]), "{listener}");

    let unnamed_refused = probe.refused("a peer no route names", &sd, unnamed, PERMISSION).await;
    sd.wait_for_log("permission denied on listener \"stunner/udp-gateway/tcp-listener\"", 1).await;
    let udp_only_refused = probe.refused("a TCP peer only a UDP cluster names", &sd, udp_only, PEER).await;

    // Figures: a few more allocations, one process each (fresh TURN-TCP connection).
    let mut runs = vec![first];
    for _ in 0..4 {
        runs.push(probe.relays("a TCP allocation to the TCPRoute's backend", &sd, backend).await);
    }
    for v in &runs {
        assert_eq!(v.received, 5, "{v:?}");
        assert!(v.relay.starts_with("127.0.0.1:"), "relay address is $STUNNER_ADDR: {v:?}");
    }
    let rtts: Vec<f64> = runs.iter().flat_map(|v| v.rtt_ms.iter().copied()).collect();
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    println!(
        "stunnerd-git TCP allocations: {} runs; allocate median {:.2} ms (max {:.2}); permission+connect+bind \
         median {:.2} ms (max {:.2}); echo round trip median {:.3} ms (max {:.3}, {} messages)",
        runs.len(),
        median(runs.iter().map(|v| v.allocate_ms).collect()),
        runs.iter().map(|v| v.allocate_ms).fold(0.0, f64::max),
        median(runs.iter().map(|v| v.connect_ms).collect()),
        runs.iter().map(|v| v.connect_ms).fold(0.0, f64::max),
        median(rtts.clone()),
        rtts.iter().copied().fold(0.0, f64::max),
        rtts.len(),
    );
    println!("refused, a TCP allocation with no TCP cluster routed: {}", no_tcp_cluster.error);
    println!("refused, a peer no route names ({unnamed}): {}", unnamed_refused.error);
    println!("refused, a TCP peer only a UDP cluster names ({udp_only}): {}", udp_only_refused.error);

    // The TCPRoute removed, live: no TCP cluster, no TCP allocation.
    std::fs::remove_file(dir.join("tcproute.yaml")).unwrap();
    probe.refused("a TCP allocation after the TCPRoute is gone", &sd, backend, ALLOCATE).await;

    // One stunnerd process throughout, and every config we sent was taken (this stunnerd logs
    // in lower case, where v1.2.1 says "Starting" and "Could not").
    sd.assert_running();
    assert_eq!(count(&sd.log, "starting stunnerd"), 1, "{}", tail(&sd.log));
    assert_eq!(count(&sd.log, "could not reconcile"), 0, "{}", tail(&sd.log));
    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tenant's ListenerSet (issue #58, GEP-1713) adds a TURN-TLS listener with the tenant's own
/// certificate to a shared Gateway that admits ListenerSets (`allowedListeners: All`): stunnerd
/// opens it under its rendered name and a TLS client, verifying the tenant's certificate,
/// relays through it to the backend of the tenant's route, which names the ListenerSet.
#[tokio::test]
async fn stunnerd_serves_a_turn_tls_listener_a_tenants_listener_set_added() {
    if !interop_built() {
        return;
    }
    let _one = STUNNERD.lock().await;
    let ports = ports::free_ports(2);
    let (udp, tls) = (ports[0], ports[1]);
    let (crt, key) = self_signed().await;
    let auth = Auth::Static { user: "user-1", password: "pass-1" };
    let dir = manifests("listenerset", &auth, &[("udp-listener", "UDP", udp)], None);
    let shared =
        gateway_yaml(&[("udp-listener", "UDP", udp)]) + "  allowedListeners:\n    namespaces:\n      from: All\n";
    std::fs::write(dir.join("gateway.yaml"), shared).unwrap();
    let tenant = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tenant-cert\n  namespace: tenant\ntype: kubernetes.io/tls\n\
         stringData:\n  tls.crt: |\n{}  tls.key: |\n{}---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata:\n  name: tls\n  namespace: tenant\n\
         spec:\n  parentRef:\n    name: udp-gateway\n    namespace: stunner\n  listeners:\n    - name: turn-tls\n      \
         port: {tls}\n      protocol: TURN-TLS\n      tls:\n        certificateRefs:\n          - name: tenant-cert\n---\n\
         apiVersion: stunner.l7mp.io/v1\nkind: StaticService\nmetadata:\n  name: media\n  namespace: tenant\n\
         spec:\n  prefixes:\n    - \"127.0.0.1/32\"\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata:\n  name: media\n  namespace: tenant\n\
         spec:\n  parentRefs:\n    - kind: ListenerSet\n      name: tls\n      sectionName: turn-tls\n  rules:\n    \
         - backendRefs:\n        - group: stunner.l7mp.io\n          kind: StaticService\n          name: media\n",
        indent(&crt),
        indent(&key)
    );
    std::fs::write(dir.join("tenant.yaml"), tenant).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &crt).unwrap();
    let backend = echo_backend().await;

    let daemon = Daemon::start(&dir, "127.0.0.1:0").await;
    let mut sd = Stunnerd::start(&daemon.addr).await;
    sd.wait_ready().await;
    let (code, status) = health("/status").await.expect("stunnerd /status");
    assert_eq!(code, 200, "{status}");
    assert!(status.contains("stunner/udp-gateway/turn-tls-"), "the tenant's listener in {status}");

    let ok = |t, port| Probe::new(t, port).user("user-1", "pass-1");
    // Verified against the tenant's certificate: stunnerd serves the tenant's Secret.
    ok("tls", tls)
        .arg("--ca")
        .arg(ca.to_str().unwrap())
        .relays("TLS allocation through the ListenerSet", &sd, backend)
        .await;
    ok("udp", udp).relays("the Gateway's own listener still relays", &sd, backend).await;
    sd.assert_running();
    assert_eq!(count(&sd.log, "Could not reconcile"), 0, "{}", tail(&sd.log));

    sd.stop().await;
    daemon.kill().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
