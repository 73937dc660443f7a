//! Bootstrap against a real kube-apiserver (tests/apiserver): N combos (Namespace, Gateway,
//! StaticService, UDPRoute) created one after another, each waited for until its Gateway is
//! Accepted and Programmed and its route Accepted with ResolvedRefs; then the operator is
//! restarted with nothing changed. As upstream's benchmark does, objects are created with a
//! plain create (their kinds resolved once) and the waits read two watches opened before the
//! first combo (its informers), so the figures time the operator, not the harness.
//! Reports ms per combo, API writes per combo and the writes of the no-op restart.
//!
//! `cargo bench -p stunner-gateway-operator --bench bootstrap` (BOOTSTRAP_COMBOS, default 50;
//! BOOTSTRAP_THROTTLE, the operator's `--throttle-timeout`);
//! under `cargo test` it runs 3 combos. Needs tests/apiserver/bin/apiserver (scripts/test
//! builds it) and the Gateway API module in the Go module cache. A full run also writes its row
//! as JSON (see `benches/support/report.rs`).

#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[path = "../../benches/support/report.rs"]
mod report;

use e2e::*;
use futures_util::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::{ApiResource, Scope};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const GW: &str = "gateway.networking.k8s.io/v1";

/// A Gateway no operator renders (its class is nobody's).
const WARM_UP_GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\n\
    metadata: {name: warm-up, namespace: stunner}\n\
    spec: {gatewayClassName: nobodys-class, listeners: [{name: udp, port: 3478, protocol: UDP}]}\n";

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

/// The kinds of the combos' objects, each resolved once by discovery.
#[derive(Default)]
struct Kinds(HashMap<(String, String), (ApiResource, Scope)>);

impl Kinds {
    /// Creates every object of `text` (a plain create, as upstream's benchmark does).
    async fn create_all(&mut self, client: &Client, text: &str) {
        for doc in serde_yaml_ng::Deserializer::from_str(text) {
            let obj: DynamicObject = serde::Deserialize::deserialize(doc).unwrap();
            let types = obj.types.clone().expect("apiVersion and kind");
            let (resource, scope) = self.resolve(client, &types.api_version, &types.kind).await;
            let api: Api<DynamicObject> = match (scope, obj.namespace()) {
                (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), &ns, &resource),
                _ => Api::all_with(client.clone(), &resource),
            };
            api.create(&PostParams::default(), &obj).await.unwrap_or_else(|e| panic!("create {}: {e}", types.kind));
        }
    }

    async fn resolve(&mut self, client: &Client, api_version: &str, kind: &str) -> (ApiResource, Scope) {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(known) = self.0.get(&key) {
            return known.clone();
        }
        let found = discover(client, api_version, kind).await;
        self.0.insert(key, found.clone());
        found
    }
}

/// The namespaces whose object `name` of a kind satisfies a predicate, as one watch over all
/// namespaces sees them.
fn follow(
    client: &Client,
    resource: &ApiResource,
    name: &'static str,
    ready: fn(&DynamicObject) -> bool,
) -> watch::Receiver<BTreeSet<String>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let (tx, rx) = watch::channel(BTreeSet::new());
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff().applied_objects());
        while let Some(event) = events.next().await {
            let Ok(obj) = event else { continue }; // retried by the watcher, with backoff
            if obj.name_any() == name && ready(&obj) {
                tx.send_modify(|set| {
                    set.insert(obj.namespace().unwrap_or_default());
                });
            }
        }
    });
    rx
}

/// Waits until `ns` is in `ready`.
async fn wait_ready(ready: &mut watch::Receiver<BTreeSet<String>>, ns: &str, what: &str) {
    match tokio::time::timeout(Duration::from_secs(60), ready.wait_for(|set| set.contains(ns))).await {
        Ok(Ok(_)) => {}
        _ => panic!("{ns}: {what} never seen"),
    }
}

fn gateway_ready(o: &DynamicObject) -> bool {
    let s = &o.data["status"];
    has_condition(s, "Accepted", "True", "Accepted") && has_condition(s, "Programmed", "True", "Programmed")
}

fn route_ready(o: &DynamicObject) -> bool {
    let p = &o.data["status"]["parents"][0];
    has_condition(p, "Accepted", "True", "Accepted") && has_condition(p, "ResolvedRefs", "True", "ResolvedRefs")
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
        // The API server's first create of a Gateway takes it ~2 s, once (Gateway API v1.4.0's
        // CRD, measured here: later creates take ~4 ms, a server-side apply never that long);
        // upstream's benchmark runs on the v1.0.0 CRDs and does not pay it. A Gateway of a
        // class no operator controls pays it before the operator starts and the clock runs.
        let mut kinds = Kinds::default();
        kinds.create_all(c, WARM_UP_GATEWAY).await;
        let metrics = format!("127.0.0.1:{}", free_port());
        let op = start_operator(&cluster, "op", &metrics).await;
        let metrics_addr: SocketAddr = metrics.parse().unwrap();
        let base = write_attempts(metrics_addr).await;

        let (gateways, _) = kinds.resolve(c, GW, "Gateway").await;
        let (routes, _) = kinds.resolve(c, "stunner.l7mp.io/v1", "UDPRoute").await;
        let (mut gateways_ready, mut routes_ready) =
            (follow(c, &gateways, "gw", gateway_ready), follow(c, &routes, "route", route_ready));
        let mut per_combo = Vec::with_capacity(combos);
        let started = Instant::now();
        for i in 0..combos {
            let ns = format!("combo-{i}");
            let t0 = Instant::now();
            kinds.create_all(c, &combo_yaml(&ns)).await;
            wait_ready(&mut gateways_ready, &ns, "the Gateway Accepted and Programmed").await;
            wait_ready(&mut routes_ready, &ns, "the route Accepted with ResolvedRefs").await;
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
        let mut report = report::Report::new("bootstrap", serde_json::json!({ "implementation": "ours" }));
        report.row(serde_json::json!({
            "of": "bootstrap",
            "combos": combos,
            "total_s": total.as_secs_f64(),
            "per_combo_ms": { "p50": ms(p50), "max": ms(*per_combo.last().unwrap()) },
            "api_writes_per_combo": bootstrap_writes / combos as f64,
            "writes_on_noop_restart": resync_writes,
        }));
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
