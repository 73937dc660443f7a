//! The console in a real browser: headless Chromium (Debian's `chromium`) loads every page of
//! a running standalone operator, reads what a person would (Gateway names, a status reason, a
//! dataplane's acknowledged version and how long ago, a masked password), follows a manifest
//! edit live, finds that edit's push and ack in the overview's latency charts, and saves
//! screenshots under `<target>/console-screenshots/`. Without Chromium the test skips with a
//! notice; with `CI` set it fails instead.

#[path = "support/daemon.rs"]
mod daemon;
#[path = "../../tests/support/external.rs"]
mod external;
#[path = "../../tests/support/ports.rs"]
mod ports;

#[path = "console/cdp.rs"]
mod cdp;

use cdp::Browser;
use daemon::{Daemon, acking_dataplane, eventually, http_get, quickstart_copy};
use std::path::PathBuf;
use std::time::Duration;

/// Where the screenshots go (gitignored, beside the build).
fn screenshots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).parent().unwrap().join("console-screenshots")
}

/// A Gateway with no public address: not programmed, with a reason the overview shows.
const UNADDRESSED_GATEWAY: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: unaddressed-gateway
  namespace: stunner
spec:
  gatewayClassName: stunner-gatewayclass
  listeners:
    - name: udp
      port: 3480
      protocol: UDP
";

const LIVE: &str = "document.getElementById('live').dataset.state === 'live'";
const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_shows_a_gateway_and_follows_a_change_live() {
    let Some(chromium) = cdp::chromium() else {
        external::unavailable("Debian's chromium is not installed (scripts/test installs it)", "CI");
        return;
    };
    let dir = quickstart_copy("console-browser");
    std::fs::write(dir.join("unaddressed.yaml"), UNADDRESSED_GATEWAY).unwrap();
    let d = Daemon::start(&dir, ports::free_ports(1)[0], &[]).await;
    let acked = acking_dataplane(&d.addr, "stunner", "udp-gateway", "console-test-dataplane").await;
    let latest = || acked.lock().unwrap().last().cloned().unwrap_or_default();
    eventually("the dataplane acknowledges its first config", LIMIT, async || !latest().is_empty()).await;
    let v1 = latest();
    let mut b = match Browser::launch(&chromium).await {
        Ok(b) => b,
        Err(why) => {
            external::unavailable(&format!("Chromium cannot run here: {why}"), "CI");
            return;
        }
    };
    let base = format!("http://{}", d.addr);
    let shots = screenshots();

    // The overview: both Gateways, one programmed, one with the reason it is not.
    b.open(&format!("{base}/ui/")).await;
    b.wait_for(LIVE, LIMIT).await;
    b.wait_for("document.querySelector('tr[data-gateway=\"stunner/udp-gateway\"] td.holders').textContent === '1 acked, 1 sent of 1'", LIMIT).await;
    let text = b.text().await;
    for expected in ["udp-gateway", "unaddressed-gateway", "AddressNotAssigned", "Programmed", &v1, "Render time"] {
        assert!(text.contains(expected), "overview lacks {expected:?}:\n{text}");
    }
    b.screenshot(&shots.join("overview.png")).await;

    // A Gateway's page: listeners, clusters, statuses, the dataplane's versions, the config.
    let gateway = format!("{base}/ui/gateways/stunner/udp-gateway");
    b.open(&gateway).await;
    b.wait_for(LIVE, LIMIT).await;
    let text = b.text().await;
    for expected in [
        "stunner/udp-gateway/udp-listener",
        "10.0.0.0/8, 127.0.0.1/32",
        "GatewayClass stunner-gatewayclass",
        "UDPRoute stunner/media-plane",
        "ResolvedRefs",
        "console-test-dataplane",
        "stunner.l7mp.io",
    ] {
        assert!(text.contains(expected), "Gateway page lacks {expected:?}:\n{text}");
    }
    let acked_cell = "document.querySelector('table.dataplanes td.acked .version').textContent";
    assert_eq!(b.eval(acked_cell).await, v1.as_str(), "the dataplane's acknowledged version");
    for cell in ["sent", "acked"] {
        let age = b.eval(&format!("document.querySelector('table.dataplanes td.{cell} .age').textContent")).await;
        let age = age.as_str().unwrap_or_default();
        assert!(age.ends_with("s ago") || age.ends_with("m ago"), "how long ago it was {cell}: {age:?}");
    }
    assert!(!text.contains("pass-1"), "the password is masked:\n{text}");
    assert!(text.contains("\"password\": \"<redacted>\""), "{text}");
    b.screenshot(&shots.join("gateway.png")).await;
    // Between updates the script keeps "how long ago" current.
    let acked_age = "document.querySelector('table.dataplanes td.acked time.age')";
    b.eval(&format!("{acked_age}.setAttribute('datetime', new Date(Date.now() - 7200e3).toISOString())")).await;
    b.wait_for(&format!("{acked_age}.textContent === '2h ago'"), LIMIT).await;

    // An edit of the manifests shows without a reload: a third listener, a new version that
    // the dataplane acknowledges.
    b.eval("window.notReloaded = true").await;
    let manifest = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    let edited = manifest.replace(
        "    - name: tcp-listener\n",
        "    - name: extra-listener\n      port: 3479\n      protocol: UDP\n    - name: tcp-listener\n",
    );
    assert_ne!(manifest, edited);
    std::fs::write(dir.join("gateway.yaml"), edited).unwrap();
    eventually("the dataplane acknowledges the new version", LIMIT, async || latest() != v1).await;
    let v2 = latest();
    b.wait_for("document.body.innerText.includes('stunner/udp-gateway/extra-listener')", LIMIT).await;
    b.wait_for(&format!("{acked_cell} === '{v2}'"), LIMIT).await;
    assert_eq!(
        b.eval("window.notReloaded === true && !!document.body.dataset.updated").await,
        true,
        "swapped in place"
    );
    b.screenshot(&shots.join("gateway-updated.png")).await;

    // The change was pushed to and applied by a dataplane that was watching: the overview's
    // push and ack time charts have it.
    b.open(&format!("{base}/ui/")).await;
    for chart in ["Push time (store to send)", "Ack time (store to applied)"] {
        let figure = format!("document.querySelector('figure.chart svg[aria-label=\"{chart}\"]')");
        let bars = format!("[...{figure}.querySelectorAll('rect')].filter(r => r.getAttribute('height') > 0).length");
        let bars = b.eval(&bars).await.as_u64().unwrap_or_default();
        assert!(bars >= 1, "{chart}: no bar with data");
        let caption = b.eval(&format!("{figure}.closest('figure').textContent")).await;
        assert!(
            caption.as_str().is_some_and(|c| c.contains(" observation") && c.contains(", mean ")),
            "{chart}: {caption}"
        );
    }
    b.screenshot(&shots.join("overview-charts.png")).await;

    // Asked for, the credentials show.
    b.open(&format!("{gateway}?reveal=1")).await;
    assert!(b.text().await.contains("pass-1"));

    // The clients table.
    b.open(&format!("{base}/ui/clients")).await;
    let text = b.text().await;
    assert!(text.contains("console-test-dataplane"), "{text}");
    assert!(text.contains(&format!("stunner/udp-gateway: {v2} / {v2}")), "{text}");
    b.screenshot(&shots.join("clients.png")).await;
    eprintln!("console screenshots: {}", shots.display());
}

/// Without a browser: every page is plain HTML that reads in `curl`, unknown pages are 404s,
/// and the event stream says when something changed. In standalone mode the Gateway page
/// says it reads no dataplane's metrics (tests/e2e_console_traffic.rs: a cluster's does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_read_as_plain_html() {
    let dir = quickstart_copy("console-plain");
    let d = Daemon::start(&dir, ports::free_ports(1)[0], &[]).await;
    let (status, overview) = http_get(&d.addr, "/ui/").await;
    assert_eq!(status, 200);
    assert!(overview.starts_with("<!doctype html>") && overview.contains(">udp-gateway</a>"), "{overview}");
    let (status, page) = http_get(&d.addr, "/ui/gateways/stunner/udp-gateway").await;
    assert_eq!(status, 200);
    assert!(page.contains("<td class=\"reason\">Programmed</td>") && !page.contains("pass-1"), "{page}");
    assert!(page.contains("id=\"traffic-note\">Read in cluster mode only: in standalone mode"), "{page}");
    assert_eq!(http_get(&d.addr, "/ui/gateways/stunner/nope").await.0, 404);
    assert_eq!(http_get(&d.addr, "/ui/clients").await.0, 200);
    let (status, js) = http_get(&d.addr, "/ui/assets/console.js").await;
    assert!(status == 200 && js.contains("EventSource"));
}

/// The console in-process behind `--cds-authorization=pod`: it lets in whom the config lists
/// let in (loopback, i.e. `kubectl port-forward`), refuses a dataplane pod and a stranger on
/// every page, the event stream and `?reveal=1`, and bounds its open event streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_take_the_config_lists_authorization_and_bound_event_streams() {
    use std::net::{IpAddr, SocketAddr};
    use std::sync::Arc;
    use stunner_gateway::cds::ConfigId;
    use stunner_gateway_cds::authz::{Authorizer, DataplaneIndex, DataplanePod, Mode};
    use stunner_gateway_cds::{CdsMetrics, ConfigStore, ServerSettings, serve};
    use stunner_gateway_operator::console::{Console, events};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const POD: &str = "127.0.0.2";
    const STRANGER: &str = "127.0.0.3";
    let index = Arc::new(DataplaneIndex::default());
    index.apply(DataplanePod {
        namespace: "ns".into(),
        name: "gw-1".into(),
        gateway: ConfigId::new("ns", "gw"),
        host_network: false,
        node: "node-1".into(),
        ips: vec![POD.parse().unwrap()],
    });
    let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
    let mut config = stunner_gateway::config::StunnerConfig::zero("ns/gw");
    config.auth.credentials.insert("password".into(), "secret-pass".into());
    store.upsert(config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let settings = ServerSettings {
        authorizer: Arc::new(Authorizer::new(Mode::Pod, index, Vec::new())),
        max_connections: 64,
        ..Default::default()
    };
    let console = Console { statuses: Default::default(), charts: Default::default(), dataplane_metrics: None };
    let shutdown = tokio_util::sync::CancellationToken::new();
    tokio::spawn(serve(listener, store, settings, console, shutdown.clone()));

    // The status code of a GET from `source`, read off the first line only (event streams
    // do not end).
    let get_from = async |source: &str, path: &str| -> (u16, tokio::net::TcpStream) {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(source.parse::<IpAddr>().unwrap(), 0)).unwrap();
        let mut stream = socket.connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut head = vec![0u8; 12];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut head)).await.unwrap().unwrap();
        (String::from_utf8_lossy(&head[9..12]).parse().unwrap(), stream)
    };
    let page = "/ui/gateways/ns/gw";
    for path in ["/ui/", "/ui/clients", page, "/ui/gateways/ns/gw?reveal=1", "/ui/events"] {
        assert_eq!(get_from(STRANGER, path).await.0, 403, "a stranger on {path}");
        assert_eq!(get_from(POD, path).await.0, 403, "a dataplane pod on {path}");
    }
    assert_eq!(get_from("127.0.0.1", page).await.0, 200, "loopback: port-forward");
    let (_, body) = http_get(&addr.to_string(), page).await;
    assert!(body.contains("ns/gw") && !body.contains("secret-pass"), "masked: {body}");
    let (_, body) = http_get(&addr.to_string(), "/ui/gateways/ns/gw?reveal=1").await;
    assert!(body.contains("secret-pass"), "revealed when asked for");

    let mut open = Vec::new();
    for _ in 0..events::MAX_STREAMS {
        let (status, stream) = get_from("127.0.0.1", "/ui/events").await;
        assert_eq!(status, 200);
        open.push(stream);
    }
    assert_eq!(get_from("127.0.0.1", "/ui/events").await.0, 503, "one stream over the bound");
    open.pop();
    // The permit is given back once the server notices the closed connection.
    eventually("a stream's permit is given back", LIMIT, async || get_from("127.0.0.1", "/ui/events").await.0 == 200)
        .await;
    shutdown.cancel();
}
