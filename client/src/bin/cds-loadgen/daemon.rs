//! The operator under load: spawned here in standalone mode, or one already running; either
//! way driven by the manifest file this program writes into its directory.

use anyhow::{Context, bail};
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use stunner_gateway_client::cds::ServerAddress;

/// Namespace of every object the load generator writes (so it cannot clash with others').
pub const NAMESPACE: &str = "cds-loadgen";
/// The manifest file the load generator owns in the directory.
const FILE: &str = "cds-loadgen.yaml";

/// The realm that carries update `seq`; watchers read it back with [`seq_of_realm`].
pub fn realm(seq: u64) -> String {
    format!("loadgen-{seq}")
}

pub fn seq_of_realm(realm: &str) -> Option<u64> {
    realm.strip_prefix("loadgen-")?.parse().ok()
}

/// Gateway `i`'s name.
pub fn gateway(i: u64) -> String {
    format!("gw-{i}")
}

/// What the manifests hold besides the shared class, config and Dataplane.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub gateways: u64,
    /// Endpoints per Gateway: with more than 0, each Gateway gets a UDPRoute to a Service of
    /// its own whose EndpointSlice lists this many pod addresses (their cluster in its config).
    pub endpoints: u64,
}

/// The manifests of `shape` at update `seq`: a GatewayClass, its GatewayConfig (whose realm
/// carries `seq`, so one write changes every Gateway's config), a Dataplane and the Gateways,
/// one UDP listener each, with their routes, Services and EndpointSlices.
pub fn manifests(shape: Shape, seq: u64) -> String {
    let mut s = format!(
        "# Written by cds-loadgen; removed when it ends.
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: {NAMESPACE}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef:
    group: stunner.l7mp.io
    kind: GatewayConfig
    name: {NAMESPACE}
    namespace: {NAMESPACE}
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata:
  name: {NAMESPACE}
  namespace: {NAMESPACE}
spec:
  realm: {realm}
  authType: static
  userName: user-1
  password: pass-1
  dataplane: {NAMESPACE}
---
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata:
  name: {NAMESPACE}
spec:
  image: docker.io/l7mp/stunnerd:latest
  command: [stunnerd]
  args: [-w]
",
        realm = realm(seq)
    );
    for i in 0..shape.gateways {
        s.push_str(&format!(
            "---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: {name}
  namespace: {NAMESPACE}
spec:
  gatewayClassName: {NAMESPACE}
  addresses:
    - type: IPAddress
      value: 127.0.0.1
  listeners:
    - name: udp
      port: 3478
      protocol: UDP
",
            name = gateway(i)
        ));
        if shape.endpoints > 0 {
            s.push_str(&backend(i, shape.endpoints));
        }
    }
    s
}

/// Gateway `i`'s UDPRoute, its backend Service and that Service's EndpointSlice with
/// `endpoints` addresses (10.x.y.z, distinct across Gateways).
fn backend(i: u64, endpoints: u64) -> String {
    let addresses: Vec<String> = (0..endpoints)
        .map(|e| {
            let n = i * endpoints + e;
            format!("\"10.{}.{}.{}\"", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff)
        })
        .collect();
    format!(
        "---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata:
  name: route-{i}
  namespace: {NAMESPACE}
spec:
  parentRefs: [{{name: {gw}}}]
  rules: [{{backendRefs: [{{name: svc-{i}}}]}}]
---
apiVersion: v1
kind: Service
metadata:
  name: svc-{i}
  namespace: {NAMESPACE}
spec:
  clusterIP: 172.16.{hi}.{lo}
  ports: [{{name: media, port: 9000, protocol: UDP}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: svc-{i}-slice
  namespace: {NAMESPACE}
  labels: {{kubernetes.io/service-name: svc-{i}}}
addressType: IPv4
endpoints: [{list}]
",
        gw = gateway(i),
        hi = (i >> 8) & 0xff,
        lo = i & 0xff,
        list = addresses.iter().map(|a| format!("{{addresses: [{a}]}}")).collect::<Vec<_>>().join(", "),
    )
}

/// Where the manifests go and who reads them.
pub struct Daemon {
    /// The directory the operator reads.
    dir: PathBuf,
    /// Our temporary directory (spawned mode), removed at the end.
    temp: Option<PathBuf>,
    child: Option<Child>,
    /// The CDS address (host:port).
    pub addr: String,
    shape: Shape,
    /// How the spawned operator was started, to start it again (`restart`).
    spawn: Option<Spawn>,
}

/// The spawned operator's command line.
#[derive(Debug, Clone)]
struct Spawn {
    bin: PathBuf,
    throttle: String,
    max_connections: usize,
}

impl Daemon {
    /// Spawns `bin --standalone <temp dir>` with the initial manifests on an ephemeral loopback
    /// port; returns once it serves (it serves only after its first complete render).
    pub fn spawn(
        bin: &Path,
        shape: Shape,
        throttle: &str,
        max_connections: usize,
        limit: Duration,
    ) -> anyhow::Result<Self> {
        if !bin.exists() {
            bail!(
                "the operator binary {} does not exist: build it (cargo build -p stunner-gateway-operator) or pass --operator-bin",
                bin.display()
            );
        }
        let temp = std::env::temp_dir().join(format!("cds-loadgen-{}", std::process::id()));
        let dir = temp.join("manifests");
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let spawn = Spawn { bin: bin.to_path_buf(), throttle: throttle.to_string(), max_connections };
        let mut daemon = Daemon { dir, temp: Some(temp), child: None, addr: String::new(), shape, spawn: Some(spawn) };
        daemon.write(0)?;
        daemon.start("127.0.0.1:0", limit)?;
        Ok(daemon)
    }

    /// Starts the spawned operator on CDS address `addr` and waits until it serves.
    fn start(&mut self, addr: &str, limit: Duration) -> anyhow::Result<()> {
        let (Some(spawn), Some(temp)) = (&self.spawn, &self.temp) else {
            bail!("only an operator this program spawned can be started");
        };
        let bin = &spawn.bin;
        let log_path = temp.join("operator.log");
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut child = Command::new(bin)
            .arg("--standalone")
            .arg(&self.dir)
            .args(["--config-discovery-address", addr, "--metrics-bind-address", "0"])
            .args(["--health-probe-bind-address", "0", "--throttle-timeout", &spawn.throttle])
            .args(["--cds-max-connections", &spawn.max_connections.to_string()])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        // The log goes to a file; the line announcing the CDS address is passed on.
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("serving config discovery")
                    && let Some(addr) = line.split("address=").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(addr.split_whitespace().next().unwrap_or("").to_string());
                }
                let _ = writeln!(log, "{line}");
            }
        });
        self.child = Some(child);
        match rx.recv_timeout(limit) {
            Ok(addr) => self.addr = addr,
            Err(_) => {
                let status = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
                let why = match status {
                    Some(s) => format!("it exited ({s})"),
                    None => format!("it did not serve within {limit:?}"),
                };
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("the operator did not start: {why}; its log:\n{log}");
            }
        }
        Ok(())
    }

    /// An operator restart: kills the spawned operator (as a crash or an evicted pod would
    /// end it, with no goodbye to its watchers), writes the manifests of update `seq` while
    /// it is down, and starts it again on the same address. Returns when the new one serves.
    pub fn restart(&mut self, seq: u64, limit: Duration) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.write(seq)?;
        let addr = self.addr.clone();
        self.start(&addr, limit)
    }

    /// A running standalone operator reading `dir`, serving at `addr`.
    pub fn external(dir: &Path, addr: String, shape: Shape) -> anyhow::Result<Self> {
        if !dir.is_dir() {
            bail!("--manifests {} is not a directory", dir.display());
        }
        let daemon = Daemon { dir: dir.to_path_buf(), temp: None, child: None, addr, shape, spawn: None };
        daemon.write(0)?;
        Ok(daemon)
    }

    /// Writes the manifests of update `seq`. Written beside and renamed into place, so the
    /// operator never reads half a file.
    pub fn write(&self, seq: u64) -> anyhow::Result<()> {
        let tmp = self.dir.join(format!(".{FILE}.tmp"));
        let path = self.dir.join(FILE);
        std::fs::write(&tmp, manifests(self.shape, seq))
            .and_then(|()| std::fs::rename(&tmp, &path))
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The spawned operator's process id (for its RSS).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops the operator we spawned and removes what we wrote.
    pub fn stop(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(self.dir.join(FILE));
        if let Some(temp) = self.temp.take() {
            let _ = std::fs::remove_dir_all(temp);
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `VmRSS` of a process, in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// `VmHWM` of a process (its largest RSS so far), in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Refuses a server that is not on this host: a load test against someone else's operator
/// is an attack, so it takes an explicit --allow-remote.
pub fn check_loopback(addr: &str, allow_remote: bool) -> anyhow::Result<()> {
    if allow_remote {
        return Ok(());
    }
    let server = ServerAddress::parse(addr)?;
    let with_port = server.authority();
    let ips: Vec<IpAddr> =
        with_port.to_socket_addrs().with_context(|| format!("cannot resolve {addr:?}"))?.map(|a| a.ip()).collect();
    if ips.is_empty() || ips.iter().any(|ip| !ip.is_loopback()) {
        bail!("{addr} is not a loopback address: a load test against another host needs --allow-remote");
    }
    Ok(())
}

/// Waits until `f` holds, polling, for at most `limit`.
pub async fn wait_until<F: AsyncFnMut() -> bool>(limit: Duration, mut f: F) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realms_carry_the_sequence_number() {
        assert_eq!(seq_of_realm(&realm(42)), Some(42));
        assert_eq!(seq_of_realm("stunner.l7mp.io"), None);
        let m = manifests(Shape { gateways: 3, endpoints: 0 }, 7);
        assert_eq!(m.matches("kind: Gateway\n").count(), 3);
        assert!(m.contains("realm: loadgen-7\n"));
        assert!(!m.contains("kind: UDPRoute"));
    }

    #[test]
    fn backends_decode_with_distinct_endpoints() {
        let m = manifests(Shape { gateways: 300, endpoints: 10 }, 0);
        let manifest = stunner_gateway::manifest::load(
            Path::new("loadgen.yaml"),
            &m,
            stunner_gateway::manifest::Admission::Validated,
        )
        .unwrap();
        assert_eq!(manifest.skipped.len(), 0, "{:?}", manifest.skipped);
        let objects = manifest.objects;
        let count = |kind: &str| m.matches(&format!("kind: {kind}\n")).count();
        assert_eq!((count("UDPRoute"), count("Service"), count("EndpointSlice")), (300, 300, 300));
        assert_eq!(objects.len(), 3 + 4 * 300);
        let mut addresses: Vec<&str> = m.split('"').filter(|s| s.starts_with("10.")).collect();
        assert_eq!(addresses.len(), 3000);
        addresses.sort_unstable();
        addresses.dedup();
        assert_eq!(addresses.len(), 3000, "every endpoint address is distinct");
    }

    #[test]
    fn only_loopback_without_allow_remote() {
        for ok in ["127.0.0.1:1", ":13478", "localhost:5", "[::1]:5", "http://127.0.0.1:5", "127.0.0.2"] {
            assert!(check_loopback(ok, false).is_ok(), "{ok}: {:?}", check_loopback(ok, false));
        }
        let err = check_loopback("192.0.2.1:13478", false).unwrap_err().to_string();
        assert!(err.contains("--allow-remote"), "{err}");
        assert!(check_loopback("192.0.2.1:13478", true).is_ok());
    }
}
