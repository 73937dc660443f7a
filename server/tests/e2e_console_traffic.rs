//! The console's "Dataplane traffic" in cluster mode (issue #59): the operator binary against
//! a real kube-apiserver, upstream's stunnerd (tests/interop, v1.2.1) watching its CDS with
//! the Dataplane's `enableMetricsEndpoint` on, and a real TURN allocation (turnprobe) relaying
//! to a UDP echo peer, all on loopback. The Gateway's page must show what stunnerd counts:
//! the allocation, the bytes and packets at the listener and the cluster, the connection;
//! and once the allocation ends, none active. stunnerd serves its metrics at the fixed
//! `:8080` and its health check at `:8086` (upstream's defaults), so the test waits for both
//! ports to be free first.

mod e2e;

use e2e::*;
use std::process::Stdio;
use std::time::Duration;

const NS: &str = "stunner";
const LISTENER: &str = "stunner/udp-gateway/udp-listener";
const CLUSTER: &str = "stunner/media-plane";
const PAGE: &str = "/ui/gateways/stunner/udp-gateway";

fn interop_bin(name: &str) -> std::path::PathBuf {
    repo_root().join("tests/interop/bin").join(name)
}

/// The quickstart with static credentials, a Dataplane serving metrics, a Gateway on
/// `turn_port` and a route to loopback.
fn manifests(turn_port: u16) -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: stunner-gatewayclass}}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef: {{group: stunner.l7mp.io, kind: GatewayConfig, name: stunner-gatewayconfig, namespace: {NS}}}
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata: {{name: stunner-gatewayconfig, namespace: {NS}}}
spec: {{realm: stunner.l7mp.io, authType: static, userName: user-1, password: pass-1}}
---
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata: {{name: default}}
spec:
  replicas: 1
  image: docker.io/l7mp/stunnerd:1.2.1
  command: [stunnerd]
  args: [-w]
  enableMetricsEndpoint: true
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: udp-gateway, namespace: {NS}}}
spec:
  gatewayClassName: stunner-gatewayclass
  addresses: [{{type: IPAddress, value: 127.0.0.1}}]
  listeners: [{{name: udp-listener, port: {turn_port}, protocol: UDP}}]
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {{name: media-plane, namespace: {NS}}}
spec:
  parentRefs: [{{name: udp-gateway}}]
  rules: [{{backendRefs: [{{group: stunner.l7mp.io, kind: StaticService, name: media-servers}}]}}]
---
apiVersion: stunner.l7mp.io/v1
kind: StaticService
metadata: {{name: media-servers, namespace: {NS}}}
spec: {{prefixes: ["127.0.0.1/32"]}}
"#
    )
}

/// Waits (bounded) until `port` can be bound on every interface: stunnerd binds it there.
async fn wait_port_free(port: u16) {
    for _ in 0..300 {
        if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("port {port} (a fixed port of stunnerd's) stays taken by another process");
}

/// The number in the cell `data-figure="{figure}"` of the table row `<tr {row}>` of `page`.
fn figure(page: &str, row: &str, figure: &str) -> Option<u64> {
    let start = page.find(&format!("<tr {row}>"))?;
    let row = &page[start..start + page[start..].find("</tr>")?];
    let cell = format!("data-figure=\"{figure}\">");
    let value = &row[row.find(&cell)? + cell.len()..];
    value[..value.find('<')?].parse().ok()
}

/// The page's "Allocations active" count.
fn allocations(page: &str) -> Option<u64> {
    let tag = "<span class=\"allocations\">";
    let value = &page[page.find(tag)? + tag.len()..];
    value[..value.find('<')?].parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_page_shows_a_relaying_stunnerds_metrics() {
    let how = "run tests/interop/build.sh (scripts/test does)";
    let (Some(stunnerd), Some(turnprobe)) =
        (external::built(interop_bin("stunnerd"), how), external::built(interop_bin("turnprobe"), how))
    else {
        return;
    };
    let Some(cluster) = Cluster::start("console-traffic").await else { return };
    let turn_port = free_port();
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &manifests(turn_port)).await;
    let op = cluster.operator("console-traffic", &[]).await;
    let config = wait_for("the Gateway's config with its listener and route", async || {
        op.config(NS, "udp-gateway")
            .await
            .filter(|c| c.listeners.iter().any(|l| l.name == LISTENER) && c.clusters.iter().any(|c| c.name == CLUSTER))
    })
    .await;
    assert_eq!(config.admin.metrics_endpoint, "http://:8080/metrics", "the Dataplane's enableMetricsEndpoint");

    // Before any dataplane: the page says none watches.
    let (status, page) = http_get(op.cds, PAGE).await.unwrap();
    assert_eq!(status, 200, "{page}");
    let none = "<p class=\"empty\" id=\"traffic-note\">No dataplane watches this config.</p>";
    assert!(page.contains(none), "{page}");

    let peer = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let peer_addr = peer.local_addr().unwrap();
    let echo = tokio::spawn(async move {
        let mut buf = vec![0; 2048];
        while let Ok((n, from)) = peer.recv_from(&mut buf).await {
            let _ = peer.send_to(&buf[..n], from).await;
        }
    });
    wait_port_free(8086).await;
    wait_port_free(8080).await;
    let _stunnerd = tokio::process::Command::new(&stunnerd)
        .args(["-w", "--id", "stunner/udp-gateway", "-c", &format!("http://{}", op.cds)])
        .env("STUNNER_ADDR", "127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let metrics: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    wait_for("stunnerd serves its metrics with the Gateway's listener", async || {
        let (status, body) = http_get(metrics, "/metrics").await?;
        (status == 200 && body.contains(LISTENER)).then_some(())
    })
    .await;

    // An allocation that relays a datagram every 50 ms until its stdin closes.
    let mut probe = tokio::process::Command::new(&turnprobe)
        .args(["-hold", "-user", "user-1", "-password", "pass-1", "-timeout", "120s"])
        .arg(format!("-server=127.0.0.1:{turn_port}"))
        .arg(format!("-peer={peer_addr}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = probe.stdin.take().unwrap();

    // The page reads stunnerd's endpoint at the address it watches from (127.0.0.1 here, its
    // pod IP in a cluster) and shows the relay: the allocation, bytes and packets both ways
    // at the listener, to and from the backend at the cluster, the connection seen.
    let listener = format!("data-listener=\"{LISTENER}\"");
    let cluster_row = format!("data-cluster=\"{CLUSTER}\"");
    let page = wait_for("the Gateway page shows the allocation relaying", async || {
        let (_, page) = http_get(op.cds, PAGE).await?;
        let relaying = allocations(&page) == Some(1)
            && ["bytes-rx", "bytes-tx", "packets-rx", "packets-tx"]
                .iter()
                .all(|f| figure(&page, &listener, f).is_some_and(|v| v > 0))
            && ["bytes-rx", "bytes-tx", "packets-rx", "packets-tx"]
                .iter()
                .all(|f| figure(&page, &cluster_row, f).is_some_and(|v| v > 0));
        relaying.then_some(page)
    })
    .await;
    assert!(page.contains("http://127.0.0.1:8080/metrics"), "the endpoint read is named: {page}");
    assert!(page.contains("at most 8 at a time, 2s each, a reading shown for 5s"), "its bounds: {page}");
    assert_eq!(figure(&page, &listener, "connections-total"), Some(1), "one TURN client: {page}");
    // stunnerd's own counters, read after the page, are at least the page's.
    let (_, exposition) = http_get(metrics, "/metrics").await.unwrap();
    let own = exposition
        .lines()
        .find(|l| {
            l.starts_with("stunner_listener_bytes_total{") && l.contains("direction=\"rx\"") && l.contains(LISTENER)
        })
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .expect("stunnerd counts the listener's bytes");
    assert!(own >= figure(&page, &listener, "bytes-rx").unwrap() as f64, "{own}: {page}");

    // The allocation ends cleanly; the page follows (after its reading's 5 s).
    drop(stdin);
    let out = tokio::time::timeout(TIMEOUT, probe.wait_with_output()).await.expect("turnprobe ends").unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(report.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("turnprobe's report: {e}: {report}"));
    assert_eq!(last["ok"], true, "{report}");
    wait_for("the Gateway page shows no allocation", async || {
        let (_, page) = http_get(op.cds, PAGE).await?;
        (allocations(&page) == Some(0)).then_some(())
    })
    .await;
    echo.abort();
}
