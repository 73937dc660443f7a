//! A real single-node Kubernetes cluster for end-to-end tests (issue #14): `apiserver node`
//! from `tests/apiserver` runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
//! kubelet, kube-proxy, containerd with runc and the CNI bridge, and CoreDNS, with the images of
//! `tests/images/out` imported (see tests/apiserver/README.md, "Node mode"). Needs root.
//!
//! A test crate uses it with `mod e2e; mod node;` (this module uses the e2e helpers).
//! [`Node::start`] returns once the node is Ready and CoreDNS answers; dropping the [`Node`]
//! tears it all down and leaves the machine as it was. One node runs on a machine at a time:
//! a second `start` waits for the first node to go. On a failed test, the tail of every
//! component's log is printed and the logs stay in [`Node::dir`]. A test breaks one part of
//! the node at a time with the calls of [`faults`] (issue #61).

#![allow(dead_code)] // each test crate uses its own subset

use crate::e2e::{client_from, external, repo_root, wait_for};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub mod faults;

/// The images the node imports (tests/images/build.sh writes them).
pub const UDP_ECHO_IMAGE: &str = "localhost/stunner-test/udp-echo:latest";
pub const STUNNERD_IMAGE: &str = "docker.io/l7mp/stunnerd:1.2.1";
pub const OPERATOR_IMAGE: &str = "ghcr.io/l7mp/stunner-gateway-operator-rs:latest";

/// How long a start waits for the node another test runs (one at a time machine-wide): longer
/// than the longest real-node test, the fault test at about 12 minutes.
const LOCK_WAIT: Duration = Duration::from_secs(40 * 60);
/// This test process's nodes, one at a time for the whole life of each. The node program's
/// machine-wide lock is released the moment a node exits, so the next test's node could start
/// (and make its bridge) before the test that stopped the first has checked the machine clean
/// ([`assert_machine_clean`]): a node holds this until it is dropped.
static NODES_OF_THIS_PROCESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// Bring-up takes 1-3 minutes on a busy machine, after the wait for another test's node.
const START_TIMEOUT: Duration = LOCK_WAIT.saturating_add(Duration::from_secs(5 * 60));
/// Teardown kills what is left after this, so a hung component cannot hang the test run.
const STOP_TIMEOUT: Duration = Duration::from_secs(180);

/// The node's side of its commands (see [`faults`]).
struct Control {
    stdin: Option<ChildStdin>,
    answers: Receiver<String>,
}

/// `node.json`, written by the node before READY. The node is dual-stack, IPv4 its primary
/// family: the unsuffixed addresses and ranges are IPv4, the `_v6` ones its IPv6 side.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFacts {
    pub node_name: String,
    #[serde(rename = "nodeIP")]
    pub node_ip: Ipv4Addr,
    #[serde(rename = "podCIDR")]
    pub pod_cidr: String,
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: String,
    #[serde(rename = "nodeIPv6")]
    pub node_ip_v6: Ipv6Addr,
    #[serde(rename = "podCIDRv6")]
    pub pod_cidr_v6: String,
    #[serde(rename = "serviceCIDRv6")]
    pub service_cidr_v6: String,
    #[serde(rename = "clusterDNS")]
    pub cluster_dns: Ipv4Addr,
    pub cluster_domain: String,
    pub api_server: String,
    pub images: Vec<String>,
    pub logs: BTreeMap<String, PathBuf>,
}

/// A running node. Drop tears it down (about 10-30 s) and waits for that.
pub struct Node {
    child: Option<Child>,
    /// The node's stdin (closing it tears the node down) and its answers to commands.
    control: Mutex<Control>,
    /// The node's output directory: kubeconfigs, ca.crt, node.json, logs/.
    pub dir: PathBuf,
    /// `system:masters`.
    pub kubeconfig: PathBuf,
    pub node_ip: Ipv4Addr,
    pub facts: NodeFacts,
    /// Every component's log (the node's own is `node.log`), by component name.
    pub logs: BTreeMap<String, PathBuf>,
    pub admin: Client,
    /// Held until after drop has stopped the node ([`NODES_OF_THIS_PROCESS`]).
    _one_at_a_time: tokio::sync::MutexGuard<'static, ()>,
}

/// The multi-call binary that runs the node, if built (else the test is skipped).
pub fn node_bin() -> Option<PathBuf> {
    external::built(repo_root().join("tests/apiserver/bin/apiserver"), "run tests/apiserver/build.sh (or scripts/test)")
}

/// Where the image archives are (`STUNNER_TEST_IMAGES`, default tests/images/out).
pub fn images_dir() -> PathBuf {
    std::env::var_os("STUNNER_TEST_IMAGES").map(PathBuf::from).unwrap_or_else(|| repo_root().join("tests/images/out"))
}

impl Node {
    /// Brings a node up for `test`, with its files in a fresh directory under the temp dir;
    /// `None` when the node's program or images are not built (the test is skipped).
    pub async fn start(test: &str) -> Option<Node> {
        let bin = node_bin()?;
        let images = external::built(images_dir(), "run tests/images/build.sh (or scripts/test)")?;
        // SAFETY: geteuid has no preconditions.
        #[allow(unsafe_code)] // geteuid(2): std has no safe wrapper
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "the real-node tests need root (they create a bridge, iptables rules and mounts)");
        let one_at_a_time = tokio::time::timeout(LOCK_WAIT, NODES_OF_THIS_PROCESS.lock())
            .await
            .unwrap_or_else(|_| panic!("another test's node still runs in this process after {LOCK_WAIT:?}"));
        let dir = std::env::temp_dir().join(format!("stunner-node-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let node_log = dir.join("node.log");
        let mut child = Command::new(bin)
            .args(["node", "--dir", dir.to_str().unwrap(), "--images", images.to_str().unwrap()])
            .arg(format!("--lock-wait={}s", LOCK_WAIT.as_secs()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&node_log).unwrap())
            .spawn()
            .expect("start tests/apiserver/bin/apiserver node");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        // Every line the node prints: READY, then one answer per command.
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let ready = tokio::task::spawn_blocking(move || {
            let deadline = Instant::now() + START_TIMEOUT;
            let outcome = loop {
                match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(l) if l.starts_with("READY ") => break Ok(()),
                    Ok(_) => continue,
                    Err(RecvTimeoutError::Timeout) => break Err(format!("not READY after {START_TIMEOUT:?}")),
                    Err(RecvTimeoutError::Disconnected) => break Err("the node exited before READY".to_string()),
                }
            };
            (outcome, lines)
        });
        let (outcome, lines) = ready.await.expect("the READY reader");
        let outcome = outcome.and_then(|()| {
            std::fs::read(dir.join("node.json"))
                .map_err(|e| e.to_string())
                .and_then(|json| serde_json::from_slice::<NodeFacts>(&json).map_err(|e| e.to_string()))
                .map_err(|e| format!("node.json: {e}"))
        });
        let mut logs = component_logs(&dir);
        logs.insert("node".into(), node_log);
        let facts = match outcome {
            Ok(facts) => facts,
            Err(e) => {
                drop(stdin);
                let _ = wait_bounded(&mut child, STOP_TIMEOUT);
                panic!("the node did not come up ({e})\n{}", log_tails(&logs));
            }
        };
        let kubeconfig = dir.join("admin.kubeconfig");
        let admin = client_from(&kubeconfig).await;
        let control = Mutex::new(Control { stdin, answers: lines });
        Some(Node {
            child: Some(child),
            control,
            node_ip: facts.node_ip,
            kubeconfig,
            facts,
            logs,
            admin,
            dir,
            _one_at_a_time: one_at_a_time,
        })
    }

    /// The last lines of every component's log, for a failure message.
    pub fn log_tails(&self) -> String {
        log_tails(&self.logs)
    }

    /// The network namespace of the pod whose address is `pod_ip`: containerd keeps the pods'
    /// namespaces under its state dir (`netns_mounts_under_state_dir`), inside the node's work
    /// dir, `$TMPDIR/stunner-test-node` (tests/apiserver/node.go; the node inherits our
    /// TMPDIR). A test runs a host binary inside it (`nsenter --net=<path>`) to speak from that
    /// pod's address, as a process in the pod would. Panics if no namespace has the address.
    pub fn pod_netns(&self, pod_ip: Ipv4Addr) -> PathBuf {
        let wanted = format!("inet {pod_ip}/");
        let work = std::env::temp_dir().join("stunner-test-node");
        let mut dirs = vec![work.clone()];
        // Bounded: the node's state tree is a few hundred entries deep at most.
        for _ in 0..10_000 {
            let Some(dir) = dirs.pop() else { break };
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let (path, Ok(kind)) = (entry.path(), entry.file_type()) else { continue };
                if kind.is_dir() {
                    // Not into containers' filesystems: no namespace lives there.
                    if !path.file_name().is_some_and(|n| n == "rootfs" || n == "snapshots") {
                        dirs.push(path);
                    }
                } else if dir.file_name().is_some_and(|n| n == "netns") {
                    let out = Command::new("nsenter")
                        .arg(format!("--net={}", path.display()))
                        .args(["ip", "-o", "-4", "addr", "show"])
                        .output();
                    if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&wanted)) {
                        return path;
                    }
                }
            }
        }
        panic!("no pod network namespace under {} has {pod_ip}", work.display())
    }

    /// Tears the node down and waits until it has (also what drop does); returns whether
    /// the node exited cleanly.
    pub fn stop(&mut self) -> bool {
        drop(self.control.get_mut().unwrap_or_else(|e| e.into_inner()).stdin.take());
        match self.child.take() {
            Some(mut child) => wait_bounded(&mut child, STOP_TIMEOUT),
            None => true,
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if failed {
            eprintln!("{}", self.log_tails());
        }
        let clean = self.stop();
        if failed || !clean {
            eprintln!("node: logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Waits for the child to exit, up to `timeout`; kills it after that. True if it exited
/// by itself with status 0.
fn wait_bounded(child: &mut Child, timeout: Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status.success();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

fn component_logs(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut logs = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("logs")) {
        for e in entries.flatten() {
            let path = e.path();
            if let Some(name) = path.file_stem().and_then(|s| s.to_str()) {
                logs.insert(name.to_string(), path.clone());
            }
        }
    }
    logs
}

/// The last 40 lines (at most 16 KiB) of each log.
fn log_tails(logs: &BTreeMap<String, PathBuf>) -> String {
    const MAX: u64 = 16 << 10;
    let mut out = String::new();
    for (name, path) in logs {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(path) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(MAX)));
            let mut bytes = Vec::new();
            let _ = f.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        out.push_str(&format!("---- {name} ({}) ----\n{}\n", path.display(), tail.join("\n")));
    }
    out
}

/// Asks the DNS server at `server` for the A records of `name` over UDP (one query, bounded
/// wait), as a pod's resolver would ask the cluster DNS.
pub async fn resolve_a(server: Ipv4Addr, name: &str) -> std::io::Result<Vec<Ipv4Addr>> {
    use std::io::{Error, ErrorKind};
    let id: u16 = 0x5354;
    let mut q = Vec::with_capacity(512);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD, one question
    for label in name.trim_end_matches('.').split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, type A, class IN
    let sock = tokio::net::UdpSocket::bind("0.0.0.0:0").await?;
    sock.send_to(&q, (server, 53)).await?;
    let mut buf = [0u8; 1500];
    let n = tokio::time::timeout(Duration::from_secs(5), sock.recv(&mut buf))
        .await
        .map_err(|_| Error::new(ErrorKind::TimedOut, "no DNS answer in 5 s"))??;
    parse_a_records(&buf[..n], id).ok_or_else(|| Error::new(ErrorKind::InvalidData, "malformed DNS answer"))
}

/// The A records in a DNS response to query `id` (None if it is not a well-formed one).
fn parse_a_records(msg: &[u8], id: u16) -> Option<Vec<Ipv4Addr>> {
    if msg.len() < 12 || u16::from_be_bytes([msg[0], msg[1]]) != id || msg[2] & 0x80 == 0 {
        return None;
    }
    let qd = u16::from_be_bytes([msg[4], msg[5]]);
    let an = u16::from_be_bytes([msg[6], msg[7]]);
    let mut at = 12;
    let skip_name = |mut at: usize| -> Option<usize> {
        loop {
            let len = *msg.get(at)? as usize;
            if len & 0xc0 == 0xc0 {
                return Some(at + 2);
            }
            at += 1 + len;
            if len == 0 {
                return Some(at);
            }
        }
    };
    for _ in 0..qd {
        at = skip_name(at)? + 4;
    }
    let mut out = Vec::new();
    for _ in 0..an {
        at = skip_name(at)?;
        let rr = msg.get(at..at + 10)?;
        let (rtype, rdlen) = (u16::from_be_bytes([rr[0], rr[1]]), u16::from_be_bytes([rr[8], rr[9]]) as usize);
        at += 10;
        let data = msg.get(at..at + rdlen)?;
        if rtype == 1 && rdlen == 4 {
            out.push(Ipv4Addr::new(data[0], data[1], data[2], data[3]));
        }
        at += rdlen;
    }
    Some(out)
}

/// The node's work dir (tests/apiserver/node.go: `$TMPDIR/stunner-test-node`).
fn state_dir() -> String {
    std::env::temp_dir().join("stunner-test-node").to_str().unwrap().to_string()
}

/// Every process whose command line names the node's state dir (its components, containerd
/// and the shims), with that command line.
fn node_processes() -> Vec<(String, String)> {
    let state = state_dir();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&state) {
                out.push((entry.file_name().to_string_lossy().into_owned(), cmdline));
            }
        }
    }
    out
}

/// Nothing of the node is left after it stopped: no bridge, no KUBE-/CNI-/STUNNER-TEST
/// chain in iptables or ip6tables, no mount or process under its state directory.
pub fn assert_machine_clean() {
    assert!(!std::path::Path::new("/sys/class/net/stnr-test0").exists(), "the node's bridge is gone");
    for (iptables, table) in
        ["iptables", "ip6tables"].into_iter().flat_map(|i| ["filter", "nat", "mangle"].map(|t| (i, t)))
    {
        let out = std::process::Command::new(iptables).args(["-w", "-t", table, "-S"]).output().unwrap();
        assert!(out.status.success(), "{iptables} -t {table} -S: {}", String::from_utf8_lossy(&out.stderr));
        let rules = String::from_utf8_lossy(&out.stdout);
        let left: Vec<&str> =
            rules.lines().filter(|l| l.contains("KUBE-") || l.contains("CNI-") || l.contains("STUNNER-TEST")).collect();
        assert!(left.is_empty(), "{iptables} -t {table}: rules left: {left:#?}");
    }
    let state = state_dir();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let left: Vec<&str> = mounts.lines().filter(|l| l.contains(&state)).collect();
    assert!(left.is_empty(), "mounts left: {left:#?}");
    assert!(!std::path::Path::new(&state).exists(), "{state} removed");
    let procs = node_processes();
    assert!(procs.is_empty(), "processes left: {procs:#?}");
}

/// The Ready pods matching a label selector, by name.
pub async fn ready_pods(client: &Client, ns: &str, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = api.list(&ListParams::default().labels(selector)).await.map(|l| l.items).unwrap_or_default();
    pods.into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect()
}

/// The pod's IPv4 address once it is Ready.
pub async fn ready_pod_ip(client: &Client, ns: &str, selector: &str) -> Ipv4Addr {
    wait_for(&format!("a Ready pod {selector} in {ns}"), || {
        let client = client.clone();
        async move {
            let pods = ready_pods(&client, ns, selector).await;
            pods.first()?.status.as_ref()?.pod_ip.as_ref()?.parse().ok()
        }
    })
    .await
}

/// The pod's addresses (`status.podIPs`: on this dual-stack node its IPv4 one, then its IPv6
/// one) once it is Ready.
pub async fn ready_pod_ips(client: &Client, ns: &str, selector: &str) -> (Ipv4Addr, Ipv6Addr) {
    wait_for(&format!("a Ready pod {selector} in {ns} with an address of each family"), || {
        let client = client.clone();
        async move {
            let pods = ready_pods(&client, ns, selector).await;
            let ips = pods.first()?.status.as_ref()?.pod_ips.as_ref()?;
            let ips: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.ip.parse().ok()).collect();
            match ips.as_slice() {
                [IpAddr::V4(v4), IpAddr::V6(v6)] => Some((*v4, *v6)),
                _ => None,
            }
        }
    })
    .await
}
