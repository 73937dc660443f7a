//! The dashboards and alerts against real metrics: Debian's `prometheus` scrapes a running
//! standalone operator (with a WebSocket and an acknowledging gRPC dataplane, and a credential
//! API request), and every dashboard query and alert expression is evaluated through its HTTP
//! API. A query fails the test when Prometheus refuses it, when it names a metric the operator
//! does not export, or when it returns no series although the operator has them (only the
//! writer's and the leader election's metrics, which standalone mode never sets, may be empty).
//! Then an alert is seen pending for a real condition (a dataplane that never applies its
//! config). The alerts' own firing and not firing is `promtool test rules` on
//! tests/monitoring/alerts.test.yaml. The dataplanes' dashboard and alerts are evaluated the
//! same way against a real stunnerd relaying a TURN allocation. Without Prometheus (or the
//! tests/interop programs) the suite skips with a notice; with `CI` set it fails instead.

#[path = "support/daemon.rs"]
mod daemon;
#[path = "../../tests/support/external.rs"]
mod external;
#[path = "../../tests/support/ports.rs"]
mod ports;

use daemon::{Daemon, acking_dataplane, eventually, http_get, quickstart_copy};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Metrics only a cluster sets (the writer's, the leader election's): not exported at all in
/// standalone mode (their families have no series yet); their names are pinned by the unit
/// test `metrics::tests::names_match_the_go_operator`.
const CLUSTER_ONLY: [&str; 3] = [
    "stunner_gateway_operator_update_total",
    "stunner_gateway_operator_resource_operations_total",
    "leader_election_master_status",
];

const LIMIT: Duration = Duration::from_secs(60);

fn monitoring() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/stunner-gateway-operator/monitoring")
}

fn installed(program: &str) -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin").join(program);
    if path.exists() {
        return Some(path);
    }
    external::unavailable(&format!("Debian's {program} is not installed (scripts/test installs it)"), "CI");
    None
}

/// Every query of the operator's dashboard's panels, with Grafana's `$__rate_interval` as 1m.
fn dashboard_queries() -> Vec<(String, String)> {
    let queries = queries_of("dashboard.json");
    assert!(queries.len() >= 20, "the dashboard's queries were read: {}", queries.len());
    queries
}

/// Every query of the panels of the chart's dashboard `file`: the panel's title and the query,
/// with Grafana's `$__rate_interval` as 1m.
fn queries_of(file: &str) -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(monitoring().join(file)).unwrap()).unwrap();
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap().replace("$__rate_interval", "1m");
            queries.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    queries
}

/// Every alert of the chart's rule file `file`: its name and expression.
fn rules_of(file: &str) -> Vec<(String, String)> {
    let rules: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(monitoring().join(file)).unwrap()).unwrap();
    rules["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| (r["alert"].as_str().unwrap().to_string(), r["expr"].as_str().unwrap().trim().to_string()))
        .collect()
}

/// The names of the alerts of the chart's rule file `file`.
fn rule_names(file: &str) -> Vec<String> {
    rules_of(file).into_iter().map(|(alert, _)| alert).collect()
}

/// Every alert of the operator (alerts.yaml): its name and expression. The dataplanes'
/// (dataplane-alerts.yaml) need a stunnerd's metrics, which this suite does not scrape.
fn alerts() -> Vec<(String, String)> {
    let alerts = rules_of("alerts.yaml");
    assert_eq!(alerts.len(), 7);
    alerts
}

/// The metric names an expression reads.
fn metric_names(expr: &str) -> Vec<&str> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| {
            ["stunner_gateway_operator_", "controller_runtime_", "leader_election_"].iter().any(|p| w.starts_with(p))
        })
        .collect()
}

/// Whether the exposition declares `name` (a sample name: `_total`, `_bucket`, ... belong to
/// the family of the name without them), or it is one of [`CLUSTER_ONLY`].
fn exported(exposition: &str, name: &str) -> bool {
    if CLUSTER_ONLY.contains(&name) {
        return true;
    }
    let family = ["_total", "_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
    exposition.lines().any(|l| l.starts_with(&format!("# TYPE {family} ")) || l.starts_with(&format!("# TYPE {name} ")))
}

struct Prometheus {
    child: tokio::process::Child,
    addr: String,
    dir: PathBuf,
}

impl Prometheus {
    /// Prometheus scraping the operator at `target` every second, with its alerts loaded.
    async fn start(binary: &Path, target: &str, port: u16) -> Prometheus {
        let scrape =
            format!("  - job_name: stunner-gateway-operator\n    static_configs:\n      - targets: ['{target}']\n");
        Prometheus::start_with(binary, &scrape, "alerts.yaml", port).await
    }

    /// Prometheus with the chart's rule file `rules` loaded and `scrape` (YAML items of
    /// `scrape_configs`), scraping and evaluating every second.
    async fn start_with(binary: &Path, scrape: &str, rules: &str, port: u16) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("monitoring-prometheus-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n{scrape}",
            monitoring().join(rules).display()
        );
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let addr = format!("127.0.0.1:{port}");
        let child = tokio::process::Command::new(binary)
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let p = Prometheus { child, addr, dir };
        eventually("Prometheus is ready", LIMIT, async || {
            tokio::net::TcpStream::connect(&p.addr).await.is_ok() && http_get(&p.addr, "/-/ready").await.0 == 200
        })
        .await;
        p
    }

    /// An API GET's `data`; panics on an error status.
    async fn api(&self, path: &str) -> Value {
        let (status, body) = http_get(&self.addr, path).await;
        let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!((status, &reply["status"]), (200, &Value::from("success")), "{path}: {body}");
        reply["data"].clone()
    }

    /// The series an instant query returns now.
    async fn query(&self, expr: &str) -> Vec<Value> {
        let encoded: String = form_urlencoded::byte_serialize(expr.as_bytes()).collect();
        let data = self.api(&format!("/api/v1/query?query={encoded}")).await;
        data["result"].as_array().unwrap_or_else(|| panic!("{expr}: a vector: {data}")).clone()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn promtool_unit_tests_every_alert() {
    let Some(promtool) = installed("promtool") else { return };
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let check = std::process::Command::new(&promtool)
        .args(["check", "rules"])
        .arg(monitoring().join("alerts.yaml"))
        .arg(monitoring().join("dataplane-alerts.yaml"))
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
    let test = std::process::Command::new(&promtool)
        .args(["test", "rules", "tests/monitoring/alerts.test.yaml"])
        .current_dir(&repo)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&test.stdout);
    assert!(test.status.success() && out.contains("SUCCESS"), "{out}{}", String::from_utf8_lossy(&test.stderr));
    // Every alert has a unit test.
    let tests = std::fs::read_to_string(repo.join("tests/monitoring/alerts.test.yaml")).unwrap();
    let dataplane = rule_names("dataplane-alerts.yaml");
    assert_eq!(dataplane.len(), 4);
    for alert in alerts().into_iter().map(|(alert, _)| alert).chain(dataplane) {
        assert!(tests.contains(&format!("alertname: {alert}")), "no promtool test of {alert}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_evaluates_every_dashboard_query_and_alert_against_the_operator() {
    let Some(prometheus) = installed("prometheus") else { return };
    let [metrics_port, auth_port, prometheus_port] = ports::free_ports(3)[..] else { unreachable!() };
    let dir = quickstart_copy("monitoring");
    let auth = format!("127.0.0.1:{auth_port}");
    let d = Daemon::start(&dir, metrics_port, &["--auth-bind-address", &auth]).await;
    // Dataplanes of both transports, and a credential request.
    let acked = acking_dataplane(&d.addr, "stunner", "udp-gateway", "monitoring-acking").await;
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/api/v1/configs/stunner/udp-gateway?watch=true", d.addr))
            .await
            .unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(10), futures_util::StreamExt::next(&mut ws)).await;
    assert_eq!(http_get(&auth, "/ice?service=turn").await.0, 200);
    eventually("the gRPC dataplane acknowledges", LIMIT, async || !acked.lock().unwrap().is_empty()).await;
    let (_, exposition) = http_get(&d.metrics, "/metrics").await;

    let p = Prometheus::start(&prometheus, &d.metrics, prometheus_port).await;
    // rate() needs two samples in its window: wait for a few scrapes.
    eventually("Prometheus has scraped the operator a few times", LIMIT, async || {
        p.query("count_over_time(stunner_gateway_operator_render_total[1m]) >= 3").await.len() == 1
    })
    .await;

    let mut checked = 0;
    for (title, expr) in dashboard_queries() {
        for name in metric_names(&expr) {
            assert!(exported(&exposition, name), "panel {title:?}: {name} is not exported");
        }
        let series = p.query(&expr).await;
        if !CLUSTER_ONLY.iter().any(|m| expr.contains(m)) {
            assert!(!series.is_empty(), "panel {title:?}: no series for {expr}");
            checked += 1;
        }
    }
    assert!(checked >= 15, "most panels have data in standalone mode: {checked}");

    // Each alert: valid, reading exported metrics, with series on the side that measures, and
    // (the operator being healthy) not firing.
    for (alert, expr) in alerts() {
        for name in metric_names(&expr) {
            assert!(exported(&exposition, name), "alert {alert}: {name} is not exported");
        }
        let (measure, _) = split_comparison(&expr).unwrap_or_else(|| panic!("alert {alert} compares: {expr}"));
        if !CLUSTER_ONLY.iter().any(|m| expr.contains(m)) {
            assert!(!p.query(measure).await.is_empty(), "alert {alert}: no series for {measure}");
        }
        assert!(p.query(&expr).await.is_empty(), "alert {alert} holds on a healthy operator: {expr}");
    }
    // Prometheus evaluates the rules itself: all healthy, none pending or firing.
    eventually("Prometheus has evaluated every rule", LIMIT, async || {
        let groups = p.api("/api/v1/rules").await;
        let rules: Vec<Value> =
            groups["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect();
        rules.len() == 7 && rules.iter().all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
    })
    .await;
    assert_eq!(p.api("/api/v1/alerts").await["alerts"], Value::Array(vec![]));

    // A dataplane that never applies its config (a gRPC watch that does not acknowledge): the
    // stale-config alert's condition holds, and Prometheus has the alert pending.
    let _silent = silent_dataplane(&d.addr).await;
    eventually("StunnerDataplanesOnStaleConfig is pending", LIMIT, async || {
        let alerts = p.api("/api/v1/alerts").await;
        alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["labels"]["alertname"] == "StunnerDataplanesOnStaleConfig" && a["state"] == "pending")
    })
    .await;
}

/// `expr` split at its comparison: what it measures, and the threshold.
fn split_comparison(expr: &str) -> Option<(&str, &str)> {
    [" > ", " < "].iter().find_map(|op| expr.rsplit_once(op)).map(|(l, r)| (l.trim(), r.trim()))
}

/// A gRPC watcher of stunner/udp-gateway that never acknowledges what it is sent.
async fn silent_dataplane(addr: &str) -> impl Sized {
    use daemon::pb::config_discovery_client::ConfigDiscoveryClient;
    use stunner_gateway::proto::{ConfigId, Scope, WatchRequest, WatchStart, scope, watch_request};
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let id = ConfigId { namespace: "stunner".into(), name: "udp-gateway".into() };
    let start = WatchStart {
        scope: Some(Scope { kind: Some(scope::Kind::Config(id)) }),
        client_name: "monitoring-silent".into(),
        ..Default::default()
    };
    let first = WatchRequest { msg: Some(watch_request::Msg::Start(start)) };
    let requests = futures_util::StreamExt::chain(futures_util::stream::iter([first]), futures_util::stream::pending());
    let mut client = ConfigDiscoveryClient::new(channel);
    client.watch(requests).await.expect("watch accepted").into_inner()
}

fn interop_bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/bin").join(name)
}

/// The Gateway the dataplane test's stunnerd stands for: its listener and cluster are named as
/// the operator names them, and Prometheus labels its series as the chart's PodMonitor does.
const GATEWAY: &str = "monitoring/udp-gateway";

/// The dataplanes' dashboard and alerts against a real dataplane: upstream's stunnerd
/// (tests/interop, the release the default Dataplane runs) relays a TURN allocation held by
/// turnprobe to a UDP echo peer, all on loopback, with its metrics endpoint on, and Prometheus
/// scrapes it with the labels the chart's PodMonitor sets (job `stunner-dataplane`, `gateway`;
/// tests/deploy.rs checks the PodMonitor sets them). While the allocation relays, every panel's
/// query (with `$gateway` this Gateway) must read metrics stunnerd exports and return series,
/// the Gateway variable must list it, and of the alerts (all evaluated healthy) none may hold,
/// although the allocation and the scrape they watch are seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_evaluates_the_dataplane_dashboard_against_a_relaying_stunnerd() {
    let Some(prometheus) = installed("prometheus") else { return };
    let how = "run tests/interop/build.sh (scripts/test does)";
    let (Some(stunnerd), Some(turnprobe)) =
        (external::built(interop_bin("stunnerd"), how), external::built(interop_bin("turnprobe"), how))
    else {
        return;
    };
    let [metrics_port, turn_port, prometheus_port] = ports::free_ports(3)[..] else { unreachable!() };
    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let peer_addr = peer.local_addr().unwrap();
    let echo = tokio::spawn(async move {
        let mut buf = vec![0; 2048];
        while let Ok((n, from)) = peer.recv_from(&mut buf).await {
            let _ = peer.send_to(&buf[..n], from).await;
        }
    });

    // stunnerd from a config file as the operator would render it for GATEWAY (no health
    // check: it would bind the fixed :8086 other suites use).
    let dir = std::env::temp_dir().join(format!("monitoring-stunnerd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("stunnerd.yaml");
    std::fs::write(
        &config,
        format!(
            "version: v1\nadmin:\n  name: {GATEWAY}\n  loglevel: all:WARN\n  metrics_endpoint: \
             http://127.0.0.1:{metrics_port}/metrics\n  healthcheck_endpoint: \"\"\nauth:\n  type: static\n  realm: \
             stunner.l7mp.io\n  credentials: {{username: user, password: pass}}\nlisteners:\n  - name: \
             {GATEWAY}/udp-listener\n    protocol: TURN-UDP\n    address: 127.0.0.1\n    port: {turn_port}\n    \
             routes: [monitoring/echo]\nclusters:\n  - name: monitoring/echo\n    type: STATIC\n    endpoints: \
             [\"127.0.0.1\"]\n"
        ),
    )
    .unwrap();
    let _stunnerd = tokio::process::Command::new(&stunnerd)
        .arg("-c")
        .arg(format!("file://{}", config.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let metrics = format!("127.0.0.1:{metrics_port}");
    eventually("stunnerd serves its metrics", LIMIT, async || {
        tokio::net::TcpStream::connect(&metrics).await.is_ok() && http_get(&metrics, "/metrics").await.0 == 200
    })
    .await;

    // An allocation that relays a datagram every 50 ms until its stdin closes.
    let mut probe = tokio::process::Command::new(&turnprobe)
        .args(["-hold", "-user", "user", "-password", "pass", "-timeout", "120s"])
        .arg(format!("-server=127.0.0.1:{turn_port}"))
        .arg(format!("-peer={peer_addr}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = probe.stdin.take().unwrap();

    let scrape = format!(
        "  - job_name: stunner-dataplane\n    static_configs:\n      - targets: ['{metrics}']\n        labels: \
         {{gateway: '{GATEWAY}', namespace: monitoring, pod: udp-gateway-0}}\n"
    );
    let p = Prometheus::start_with(&prometheus, &scrape, "dataplane-alerts.yaml", prometheus_port).await;
    let on_gateway = format!("{{gateway=\"{GATEWAY}\"}}");
    eventually("Prometheus sees the allocation relay", LIMIT, async || {
        !p.query(&format!("stunner_allocations_active{on_gateway} > 0")).await.is_empty()
            && !p.query(&format!("rate(stunner_cluster_bytes_total{on_gateway}[1m]) > 0")).await.is_empty()
            && p.query("count_over_time(up{job=\"stunner-dataplane\"}[1m]) >= 3").await.len() == 1
    })
    .await;

    let (_, exposition) = http_get(&metrics, "/metrics").await;
    let queries = queries_of("dataplane-dashboard.json");
    assert!(queries.len() >= 8, "the dataplane dashboard's queries were read: {}", queries.len());
    for (title, expr) in queries {
        let expr = expr.replace("$gateway", GATEWAY);
        let names: Vec<&str> = expr
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("stunner_"))
            .collect();
        for name in names {
            assert!(exported(&exposition, name), "panel {title:?}: stunnerd does not export {name}");
        }
        assert!(!p.query(&expr).await.is_empty(), "panel {title:?}: no series for {expr}");
    }
    let encoded: String = form_urlencoded::byte_serialize(b"up{job=\"stunner-dataplane\"}").collect();
    assert_eq!(
        p.api(&format!("/api/v1/label/gateway/values?match[]={encoded}")).await,
        Value::from(vec![GATEWAY]),
        "the dashboard's Gateway variable"
    );

    // The alerts: the allocation and the scrape are seen, and nothing holds.
    let alerts = rules_of("dataplane-alerts.yaml");
    for (alert, expr) in &alerts {
        assert!(p.query(expr).await.is_empty(), "alert {alert} holds on a relaying dataplane: {expr}");
    }
    for seen in [
        "sum by (gateway) (stunner_allocations_active{job=\"stunner-dataplane\"}) > 0",
        "up{job=\"stunner-dataplane\"} == 1",
    ] {
        assert!(!p.query(seen).await.is_empty(), "{seen}");
    }
    eventually("Prometheus has evaluated every dataplane rule", LIMIT, async || {
        let groups = p.api("/api/v1/rules").await;
        let rules: Vec<Value> =
            groups["groups"].as_array().unwrap().iter().flat_map(|g| g["rules"].as_array().unwrap().clone()).collect();
        rules.len() == alerts.len()
            && rules.iter().all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
    })
    .await;
    assert_eq!(p.api("/api/v1/alerts").await["alerts"], Value::Array(vec![]));

    // The allocation ends cleanly: turnprobe reports that it relayed.
    drop(stdin);
    let out = tokio::time::timeout(LIMIT, probe.wait_with_output()).await.expect("turnprobe ends").unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let last: Value = serde_json::from_str(report.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("turnprobe's report: {e}: {report}{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(last["ok"], true, "{report}");
    echo.abort();
    let _ = std::fs::remove_dir_all(&dir);
}
