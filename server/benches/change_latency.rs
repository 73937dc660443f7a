//! Change latency: an isolated change to one Gateway (a new password in its GatewayConfig)
//! until a CDS watcher holds the config with it; p50/p90/p99 over CHANGE_LATENCY_CHANGES
//! changes (default 100) spaced 300 ms apart, more than any render window, so each is isolated.
//!
//! - standalone: the quickstart in a directory, measured from the file write;
//! - cluster: the quickstart on a real kube-apiserver (tests/apiserver), measured from the API
//!   server's acknowledgement of the write (and from the request, which adds the write itself);
//! - Go: the same cluster run with upstream's operator, built from the clone named by
//!   `STUNNER_OPERATOR_GIT` (a git dir of github.com/l7mp/stunner-gateway-operator; skipped
//!   with a notice when unset);
//! - burst: 1,000 file writes in 1 s in standalone mode, counting renders and pushed configs.
//!
//! `cargo bench -p stunner-gateway-operator --bench change_latency`; under `cargo test` it runs
//! 3 changes per mode. `CHANGE_LATENCY_OPERATOR` names another build of our operator (e.g. the
//! previous commit's) to measure instead of this one. Needs tests/apiserver/bin/apiserver
//! (scripts/test builds it), the Gateway API module in the Go module cache, and `go` for the
//! upstream operator. A full run also writes its rows as JSON (see `benches/support/report.rs`).

#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[path = "../../benches/support/report.rs"]
mod report;
#[path = "support/standalone.rs"]
mod standalone;
#[path = "support/upstream.rs"]
mod upstream;

use e2e::*;
use futures_util::StreamExt;
use report::Report;
use serde_json::json;
use standalone::{Standalone, quickstart_dir};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Longer than the Go operator's fixed 250 ms window: every change meets a quiet loop.
const SPACING: Duration = Duration::from_millis(300);
const CONFIG_PATH: &str = "/api/v1/configs/stunner/udp-gateway?watch=true";

/// The configs a watch receives, each with the time it arrived.
type Arrivals = mpsc::UnboundedReceiver<(Instant, StunnerConfig)>;

async fn watch_arrivals(cds: SocketAddr) -> Arrivals {
    let url = format!("ws://{cds}{CONFIG_PATH}");
    let mut ws = wait_for("the CDS to accept a watch", || async {
        tokio_tungstenite::connect_async(url.as_str()).await.ok().map(|(ws, _)| ws)
    })
    .await;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(msg)) = ws.next().await {
            if let Message::Text(t) = msg {
                let Ok(config) = serde_json::from_str::<StunnerConfig>(&t) else { continue };
                if tx.send((Instant::now(), config)).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

fn password(c: &StunnerConfig) -> Option<&str> {
    c.auth.credentials.get("password").map(String::as_str)
}

/// When the first config with `want` as its password arrived.
async fn arrival_of(arrivals: &mut Arrivals, want: &str) -> Instant {
    let wait = async {
        loop {
            let (at, config) = arrivals.recv().await.expect("the watch stays open");
            if password(&config) == Some(want) {
                return at;
            }
        }
    };
    tokio::time::timeout(TIMEOUT, wait).await.unwrap_or_else(|_| panic!("no config with password {want}"))
}

/// Drops what arrived so far; returns what that was.
fn drain(arrivals: &mut Arrivals) -> Pushed {
    let mut pushed = Pushed::default();
    std::iter::from_fn(|| arrivals.try_recv().ok()).for_each(|(_, c)| pushed.add(&c));
    pushed
}

/// Configs pushed to a watcher.
#[derive(Debug, Default)]
struct Pushed {
    configs: usize,
    /// Of them, the zero configs of a deleted config: the Gateway withdrawn.
    withdrawn: usize,
}

impl Pushed {
    fn add(&mut self, config: &StunnerConfig) {
        self.configs += 1;
        self.withdrawn += usize::from(config.is_deleted());
    }
}

/// The configs that arrive until one has `want` as its password (included).
async fn count_until(arrivals: &mut Arrivals, want: &str) -> Pushed {
    let wait = async {
        let mut pushed = Pushed::default();
        loop {
            let (_, config) = arrivals.recv().await.expect("the watch stays open");
            pushed.add(&config);
            if password(&config) == Some(want) {
                return pushed;
            }
        }
    };
    tokio::time::timeout(TIMEOUT, wait).await.unwrap_or_else(|_| panic!("no config with password {want}"))
}

/// Latencies of one run, printed as a table row.
struct Sample {
    latencies: Vec<Duration>,
}

impl Sample {
    /// `of`: "isolated change", or the floor's "no-op apply".
    fn row(&mut self, report: &mut Report, of: &str, operator: &str, mode: &str, from: &str) {
        self.latencies.sort();
        let n = self.latencies.len();
        // Nearest rank.
        let p = |q: f64| self.latencies[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        report.row(json!({
            "of": of,
            "operator": operator,
            "mode": mode,
            "measured_from": from,
            "ms": { "p50": ms(p(0.5)), "p90": ms(p(0.9)), "p99": ms(p(0.99)), "max": ms(self.latencies[n - 1]) },
            "changes": n,
        }));
        println!(
            "| {operator} | {mode} | {from} | {:.1} | {:.1} | {:.1} | {:.1} | {n} |",
            ms(p(0.5)),
            ms(p(0.9)),
            ms(p(0.99)),
            ms(self.latencies[n - 1])
        );
    }
}

fn write_password(dir: &Path, password: &str) {
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("\"pass-1\"", &format!("\"{password}\""))).unwrap();
}

async fn standalone(report: &mut Report, bin: &Path, label: &str, changes: usize) {
    let dir = quickstart_dir("change-latency-standalone");
    let op = Standalone::start(bin, &dir).await;
    let mut arrivals = watch_arrivals(op.cds).await;
    arrival_of(&mut arrivals, "pass-1").await;
    let mut sample = Sample { latencies: Vec::with_capacity(changes) };
    for i in 0..changes {
        tokio::time::sleep(SPACING).await;
        let want = format!("change-{i}");
        let written = Instant::now();
        write_password(&dir, &want);
        sample.latencies.push(arrival_of(&mut arrivals, &want).await - written);
    }
    sample.row(report, "isolated change", label, "standalone", "file write");
    drop(op);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 1,000 writes of the password in 1 s: the renders and pushed configs they cost.
async fn burst(report: &mut Report, bin: &Path, label: &str, writes: usize) {
    let dir = quickstart_dir("change-latency-burst");
    let op = Standalone::start(bin, &dir).await;
    let mut arrivals = watch_arrivals(op.cds).await;
    arrival_of(&mut arrivals, "pass-1").await;
    tokio::time::sleep(SPACING).await;
    drain(&mut arrivals);
    let before = op.renders().await;
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1) / writes as u32);
    for i in 0..writes {
        tick.tick().await;
        write_password(&dir, &format!("burst-{i}"));
    }
    let took = started.elapsed();
    let until_last = count_until(&mut arrivals, &format!("burst-{}", writes - 1)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = drain(&mut arrivals);
    let (pushed, withdrawn) = (until_last.configs + after.configs, until_last.withdrawn + after.withdrawn);
    let renders = op.renders().await - before;
    report.row(json!({
        "of": "burst",
        "operator": label,
        "mode": "standalone",
        "writes": writes,
        "seconds": took.as_secs_f64(),
        "renders": renders,
        "configs_pushed": pushed,
        "withdrawing": withdrawn,
    }));
    println!(
        "Burst, {label}, standalone: {writes} file writes in {:.2} s → {renders} renders, {pushed} configs pushed to the watcher, {withdrawn} of them withdrawing the Gateway",
        took.as_secs_f64()
    );
    drop(op);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The quickstart's GatewayConfig with `password`, as one object to apply.
fn gateway_config(password: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "stunner.l7mp.io/v1",
        "kind": "GatewayConfig",
        "metadata": {"name": "stunner-gatewayconfig", "namespace": "stunner"},
        "spec": {"realm": "stunner.l7mp.io", "authType": "static", "userName": "user-1", "password": password},
    })
}

/// A cluster with the quickstart applied; None (after a notice) without the apiserver harness.
async fn quickstart_cluster(name: &str) -> Option<Cluster> {
    let cluster = Cluster::start(name).await?;
    apply_yaml(&cluster.admin, &namespace_yaml("stunner")).await;
    apply_yaml(&cluster.admin, &quickstart_yaml()).await;
    Some(cluster)
}

/// Password changes through the API server, against the operator serving the CDS at `cds`.
async fn cluster_changes(report: &mut Report, cluster: &Cluster, cds: SocketAddr, label: &str, changes: usize) {
    let mut arrivals = watch_arrivals(cds).await;
    arrival_of(&mut arrivals, "pass-1").await;
    // The operator's own first writes (Service, Deployment, statuses) come back meanwhile.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut from_ack = Sample { latencies: Vec::with_capacity(changes) };
    let mut from_request = Sample { latencies: Vec::with_capacity(changes) };
    for i in 0..changes {
        tokio::time::sleep(SPACING).await;
        drain(&mut arrivals);
        let want = format!("change-{i}");
        let requested = Instant::now();
        apply(&cluster.admin, gateway_config(&want)).await.expect("apply the GatewayConfig");
        let acked = Instant::now();
        let arrived = arrival_of(&mut arrivals, &want).await;
        from_ack.latencies.push(arrived.saturating_duration_since(acked));
        from_request.latencies.push(arrived - requested);
    }
    from_ack.row(report, "isolated change", label, "cluster", "API write acknowledged");
    from_request.row(report, "isolated change", label, "cluster", "API write requested");
}

async fn cluster_ours(report: &mut Report, bin: &Path, label: &str, changes: usize) {
    let Some(cluster) = quickstart_cluster("change-latency").await else { return };
    // The production default window, not the harness's short one.
    let args = ["--throttle-timeout", "250ms"];
    let op = Operator::start_binary(bin, &cluster.operator_kubeconfig, &cluster.dir.0, "op", &args).await;
    cluster_changes(report, &cluster, op.cds, label, changes).await;
    noop_applies(report, &cluster, &format!("change-{}", changes - 1), changes).await;
    op.stop().await;
}

/// The cluster mode's floor, in the same cluster: the request of a change applied as the
/// changes are (same client, same object), but changing nothing, from the request until the
/// API server's answer. No operator can see a change sooner than its writer hears back.
async fn noop_applies(report: &mut Report, cluster: &Cluster, password: &str, applies: usize) {
    let mut sample = Sample { latencies: Vec::with_capacity(applies) };
    for _ in 0..applies {
        tokio::time::sleep(SPACING / 10).await;
        let requested = Instant::now();
        apply(&cluster.admin, gateway_config(password)).await.expect("apply the GatewayConfig");
        sample.latencies.push(requested.elapsed());
    }
    sample.row(report, "no-op apply", "floor: no-op server-side apply", "cluster", "API write requested");
}

async fn cluster_go(report: &mut Report, git_dir: &str, changes: usize) {
    let Some(cluster) = quickstart_cluster("change-latency-go").await else { return };
    let (bin, note) = upstream::build(git_dir, &cluster.dir.0.join("upstream"));
    let cds: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut child = upstream::start(&bin, &cluster.api.admin_kubeconfig(), cds, &cluster.dir.0.join("upstream.log"));
    let version = upstream::version(git_dir);
    cluster_changes(report, &cluster, cds, &format!("Go operator ({version}{note})"), changes).await;
    let _ = child.kill().await;
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let changes: usize = std::env::var("CHANGE_LATENCY_CHANGES").ok().and_then(|n| n.parse().ok()).unwrap_or(100);
    let changes = if full { changes.clamp(1, 1000) } else { 3 };
    let (ours, label) = match std::env::var_os("CHANGE_LATENCY_OPERATOR").filter(|v| !v.is_empty()) {
        Some(bin) => (PathBuf::from(bin), "ours (CHANGE_LATENCY_OPERATOR)"),
        None => (PathBuf::from(env!("CARGO_BIN_EXE_stunner-gateway-operator")), "ours"),
    };
    let mut report = Report::new("change_latency", json!({ "implementation": "ours", "operator": label }));
    let report = &mut report;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        println!("| operator | mode | measured from | p50 ms | p90 ms | p99 ms | max ms | changes |");
        println!("|---|---|---|---|---|---|---|---|");
        standalone(report, &ours, label, changes).await;
        cluster_ours(report, &ours, label, changes).await;
        if let Some(git_dir) = upstream::git_dir("change_latency", "the Go operator's figures are") {
            cluster_go(report, &git_dir, changes).await;
        }
        println!();
        burst(report, &ours, label, if full { 1000 } else { 50 }).await;
    });
}
