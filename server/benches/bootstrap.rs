//! Bootstrap against a real kube-apiserver (tests/apiserver): N combos (Namespace, Gateway,
//! StaticService, UDPRoute) created one after another, each waited for (on watches, as
//! upstream's benchmark does with its informers) until its Gateway is Programmed and its route
//! Accepted; then the operator is restarted with nothing changed.
//! Reports ms per combo, API writes per combo and the writes of the no-op restart.
//!
//! `cargo bench -p stunner-gateway-operator --bench bootstrap` (BOOTSTRAP_COMBOS, default 50;
//! BOOTSTRAP_THROTTLE, the operator's `--throttle-timeout`);
//! under `cargo test` it runs 3 combos. Needs tests/apiserver/bin/apiserver (scripts/test
//! builds it) and the Gateway API module in the Go module cache.

#[path = "../tests/e2e/mod.rs"]
mod e2e;

use e2e::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const GW: &str = "gateway.networking.k8s.io/v1";

/// The shared class, config and Dataplane of the quickstart.
fn class_yaml() -> String {
    std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap()
}

fn combo_yaml(ns: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: {ns}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: stunner-gatewayclass
  addresses: [{{type: IPAddress, value: 127.0.0.1}}]
  listeners: [{{name: udp, port: 3478, protocol: UDP}}]
---
apiVersion: stunner.l7mp.io/v1
kind: StaticService
metadata: {{name: media, namespace: {ns}}}
spec: {{prefixes: ["10.0.0.0/8"]}}
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {{name: route, namespace: {ns}}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{group: stunner.l7mp.io, kind: StaticService, name: media}}]}}]
"#
    )
}

/// Write attempts per written kind, e.g. `Gateway 3, Service 3`.
async fn writes_by_kind(metrics: SocketAddr) -> String {
    let mut parts = Vec::new();
    for kind in ["GatewayClass", "Gateway", "UDPRoute", "Service", "Deployment", "DaemonSet", "ConfigMap"] {
        let filter = format!("kind=\"{kind}\",operation=\"attempt\"");
        let n = metric_sum(metrics, "stunner_gateway_operator_resource_operations_total{", &filter).await;
        if n > 0.0 {
            parts.push(format!("{kind} {n}"));
        }
    }
    parts.join(", ")
}

/// The operator with its metrics at `metrics`, and the render throttle of `BOOTSTRAP_THROTTLE`
/// when set (scripts/bench-go sets upstream's benchmark's 10 ms; else the harness's default).
async fn start_operator(cluster: &Cluster, name: &str, metrics: &str) -> Operator {
    let throttle = std::env::var("BOOTSTRAP_THROTTLE").ok();
    let mut args = vec!["--metrics-bind-address", metrics];
    if let Some(t) = &throttle {
        args.extend(["--throttle-timeout", t.as_str()]);
    }
    cluster.operator(name, &args).await
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let combos: usize = std::env::var("BOOTSTRAP_COMBOS").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    let combos = if full { combos.min(500) } else { 3 };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let Some(cluster) = Cluster::start("bootstrap").await else { return };
        let c = &cluster.admin;
        apply_yaml(c, &namespace_yaml("stunner")).await; // the GatewayConfig lives there
        apply_yaml(c, &class_yaml()).await;
        let metrics = format!("127.0.0.1:{}", free_port());
        let op = start_operator(&cluster, "op", &metrics).await;
        let metrics_addr: SocketAddr = metrics.parse().unwrap();
        let base = write_attempts(metrics_addr).await;

        let mut per_combo = Vec::with_capacity(combos);
        let started = Instant::now();
        for i in 0..combos {
            let ns = format!("combo-{i}");
            let t0 = Instant::now();
            apply_yaml(c, &combo_yaml(&ns)).await;
            watch_object(c, GW, "Gateway", Some(&ns), "gw", "Programmed", |o| {
                has_condition(&o.data["status"], "Programmed", "True", "Programmed")
            })
            .await;
            watch_object(c, "stunner.l7mp.io/v1", "UDPRoute", Some(&ns), "route", "Accepted", |o| {
                has_condition(&o.data["status"]["parents"][0], "Accepted", "True", "Accepted")
            })
            .await;
            per_combo.push(t0.elapsed());
        }
        let total = started.elapsed();
        // Let trailing writes (Deployments, the class status) land before counting.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let bootstrap_writes = write_attempts(metrics_addr).await - base;

        let by_kind = writes_by_kind(metrics_addr).await;
        op.stop().await;
        let restarted = start_operator(&cluster, "op-restarted", &metrics).await;
        wait_for("the restarted operator's first sync", || async {
            restarted.config(&format!("combo-{}", combos - 1), "gw").await.map(|_| ())
        })
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        // (A counter nobody incremented reads as -0 when summed.)
        let resync_writes = write_attempts(metrics_addr).await.abs();
        restarted.stop().await;

        per_combo.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let p50 = per_combo[per_combo.len() / 2];
        println!("| combos | total | per combo p50 / max | API writes per combo | writes on a no-op restart |");
        println!("|---|---|---|---|---|");
        println!(
            "| {combos} | {:.1} s | {:.0} / {:.0} ms | {:.1} | {resync_writes} |",
            total.as_secs_f64(),
            ms(p50),
            ms(*per_combo.last().unwrap()),
            bootstrap_writes / combos as f64,
        );
        println!();
        println!("Bootstrap writes by kind: {by_kind}");
    });
}
