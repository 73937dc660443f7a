//! The real `stunnerctl` binary against the real CDS server (and, for `status`, a stub serving
//! the statuses body the operator will serve).

mod common;

use common::{Server, config, failed, next_line, ok, stunnerctl, stunnerctl_command};
use std::process::Stdio;
use std::time::Duration;
use stunner_gateway::cds::{ConfigId, LicenseStatus};
use stunner_gateway::config::{NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use tokio::io::{AsyncBufReadExt, BufReader};

const SUMMARY_GW_A: &str = "\
Gateway: ns1/gw-a (loglevel: \"all:INFO\")
Authentication type: static, username/password: user-1/pass-1
Listeners:
  - Name: ns1/gw-a/udp-listener
    Protocol: TURN-UDP
    Relay address:port: <private-pod-ip-addr>:3478
    Public address:port: 1.2.3.4:3478
    Routes: [ns1/media-plane]
    Endpoints: [10.0.0.1, 10.0.0.2]
";

/// A server holding `ns1/gw-a`, `ns1/gw-b` and `ns2/gw-c`.
async fn three_gateways() -> Server {
    let s = Server::start().await;
    for id in ["ns1/gw-a", "ns1/gw-b", "ns2/gw-c"] {
        s.store.upsert(config(id));
    }
    s
}

fn gateway_lines(summary: &str) -> Vec<&str> {
    summary.lines().filter(|l| l.starts_with("Gateway: ")).collect()
}

#[tokio::test]
async fn config_summary_for_all_one_namespace_and_one_gateway() {
    let s = three_gateways().await;
    let all = ok(&stunnerctl(&s.url(), &["config", "-a"]).await);
    assert_eq!(
        gateway_lines(&all),
        [
            "Gateway: ns1/gw-a (loglevel: \"all:INFO\")",
            "Gateway: ns1/gw-b (loglevel: \"all:INFO\")",
            "Gateway: ns2/gw-c (loglevel: \"all:INFO\")"
        ]
    );
    assert!(all.starts_with(SUMMARY_GW_A), "{all}");

    let ns1 = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1"]).await);
    assert_eq!(gateway_lines(&ns1).len(), 2, "{ns1}");
    assert!(!ns1.contains("ns2/"), "{ns1}");

    // The upstream alias, flags after the subcommand, and the default namespace.
    let one = ok(&stunnerctl(&s.url(), &["stunner-config", "gw-a", "--namespace", "ns1"]).await);
    assert_eq!(one, SUMMARY_GW_A);
    assert_eq!(ok(&stunnerctl(&s.url(), &["config"]).await), "", "nothing in namespace default");
}

#[tokio::test]
async fn config_json_and_yaml_print_the_configs() {
    let s = three_gateways().await;
    let json = ok(&stunnerctl(&s.url(), &["config", "-a", "-o", "json"]).await);
    let lines: Vec<&str> = json.lines().collect();
    assert_eq!(lines.len(), 3, "one compact document per line: {json}");
    for (line, id) in lines.iter().zip(["ns1/gw-a", "ns1/gw-b", "ns2/gw-c"]) {
        assert_eq!(*line, config(id).to_json(), "the served bytes, unchanged");
    }

    let one = ok(&stunnerctl(&s.url(), &["config", "-n", "ns2", "gw-c", "-o", "json"]).await);
    assert_eq!(one, format!("{}\n", config("ns2/gw-c").to_json()));

    let yaml = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1", "-o", "yaml"]).await);
    let docs: Vec<StunnerConfig> =
        yaml.split("---\n").map(|d| serde_yaml_ng::from_str(d).expect("each document is YAML")).collect();
    assert_eq!(docs, [config("ns1/gw-a"), config("ns1/gw-b")]);
    assert!(yaml.starts_with("admin:\n"), "keys sorted, as upstream prints them: {yaml}");

    let one = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1", "gw-b", "-o", "yaml"]).await);
    assert_eq!(serde_yaml_ng::from_str::<StunnerConfig>(&one).unwrap(), config("ns1/gw-b"));
    assert!(!one.contains("---"), "a single document has no separator");
}

#[tokio::test]
async fn server_address_forms_and_env() {
    let s = three_gateways().await;
    let port = s.addr.port().to_string();
    for addr in [format!(":{port}"), format!("127.0.0.1:{port}"), format!("ws://127.0.0.1:{port}/")] {
        let out = stunnerctl(&addr, &["config", "-a", "-o", "json"]).await;
        assert_eq!(ok(&out).lines().count(), 3, "{addr}");
    }
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_stunnerctl"));
    cmd.args(["config", "-n", "ns2"]).env("STUNNERCTL_CDS_SERVER_ADDRESS", format!(":{port}"));
    let out = cmd.output().await.unwrap();
    assert_eq!(gateway_lines(&ok(&out)), ["Gateway: ns2/gw-c (loglevel: \"all:INFO\")"]);
}

#[tokio::test]
async fn node_asks_for_the_per_node_config() {
    let s = Server::start().await;
    let mut c = config("ns1/gw-a");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.store.upsert(c);
    let plain = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1", "gw-a"]).await);
    assert!(plain.contains("Relay address:port: <node-ip-addr>:3478"), "{plain}");
    // An unknown node has no external address: the server falls back to $STUNNER_ADDR.
    let patched = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1", "gw-a", "--node", "node-1"]).await);
    assert!(patched.contains("Relay address:port: <private-pod-ip-addr>:3478"), "{patched}");
}

#[tokio::test]
async fn watch_prints_updates_and_deletions() {
    let s = three_gateways().await;
    let mut child =
        stunnerctl_command(&s.url(), &["config", "-n", "ns1", "-w"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The initial snapshot: both configs of the namespace, in full.
    let mut snapshot = String::new();
    for _ in 0..2 * SUMMARY_GW_A.lines().count() {
        snapshot.push_str(&next_line(&mut lines).await);
        snapshot.push('\n');
    }
    assert!(snapshot.starts_with(SUMMARY_GW_A), "{snapshot}");
    assert_eq!(gateway_lines(&snapshot).len(), 2);

    // An update arrives as the whole new config.
    let mut changed = config("ns1/gw-b");
    changed.admin.loglevel = "all:DEBUG".into();
    s.store.upsert(changed);
    assert_eq!(next_line(&mut lines).await, "Gateway: ns1/gw-b (loglevel: \"all:DEBUG\")");
    for _ in 1..SUMMARY_GW_A.lines().count() {
        next_line(&mut lines).await;
    }

    // Other namespaces are not watched; a deletion prints upstream's one-liner.
    s.store.upsert(config("ns2/gw-d"));
    s.store.delete(&ConfigId::new("ns1", "gw-a"));
    assert_eq!(next_line(&mut lines).await, "Gateway: ns1/gw-a <deleted>");

    child.kill().await.unwrap();
}

#[tokio::test]
async fn watch_of_one_gateway_in_json() {
    let s = Server::start().await;
    let mut child = stunnerctl_command(&s.url(), &["config", "-n", "ns1", "gw-a", "-w", "-o", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Silent until the Gateway exists (its watch is open: the server lists it), then its
    // config, normalised as the dataplane would.
    let rest = stunner_gateway_client::cds::CdsClient::new(&s.url()).unwrap();
    let mut watching = false;
    for _ in 0..100 {
        watching = !rest.clients().await.unwrap().clients.is_empty();
        if watching {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(watching, "stunnerctl's watch never opened");
    s.store.upsert(config("ns1/gw-a"));
    let got: StunnerConfig = serde_json::from_str(&next_line(&mut lines).await).unwrap();
    assert_eq!(got, config("ns1/gw-a").normalized().unwrap());
    s.store.delete(&ConfigId::new("ns1", "gw-a"));
    assert_eq!(next_line(&mut lines).await, "Gateway: ns1/gw-a <deleted>");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn watch_ends_cleanly_on_sigterm() {
    let s = three_gateways().await;
    let mut child =
        stunnerctl_command(&s.url(), &["config", "-a", "-w", "-o", "json"]).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    next_line(&mut lines).await;
    let pid = child.id().unwrap().to_string();
    let kill = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[tokio::test]
async fn license_in_every_format() {
    let s = Server::start().await;
    let summary = ok(&stunnerctl(&s.url(), &["license"]).await);
    assert_eq!(summary, "License status:\n\tSubscription type: free\n\tEnabled features: NONE\n\tLast updated: N/A\n");

    let status = LicenseStatus {
        enabled_features: vec!["RelayAddressDiscovery".into(), "DaemonSet".into()],
        subscription_type: "member".into(),
        last_updated: "2025-01-01T00:00:00Z".into(),
        last_error: String::new(),
    };
    s.store.set_license(status.clone());
    let summary = ok(&stunnerctl(&s.url(), &["license-status"]).await);
    assert!(summary.contains("\tEnabled features: RelayAddressDiscovery, DaemonSet\n"), "{summary}");
    let json = ok(&stunnerctl(&s.url(), &["license", "-o", "json"]).await);
    assert_eq!(serde_json::from_str::<LicenseStatus>(&json).unwrap(), status);
    let yaml = ok(&stunnerctl(&s.url(), &["license", "-o", "yaml"]).await);
    assert_eq!(serde_yaml_ng::from_str::<LicenseStatus>(&yaml).unwrap(), status);
}

#[tokio::test]
async fn unreachable_server_is_named() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for args in [&["config", "-a"][..], &["license"], &["gateway-status"]] {
        let err = failed(&stunnerctl(&format!("127.0.0.1:{port}"), args).await);
        assert_eq!(
            err,
            format!("error: cannot reach the config discovery server at http://127.0.0.1:{port}: connection refused\n")
        );
    }
}

#[tokio::test]
async fn missing_gateway_and_bad_usage_fail_with_a_reason() {
    let s = three_gateways().await;
    let err = failed(&stunnerctl(&s.url(), &["config", "-n", "ns1", "nope"]).await);
    assert_eq!(err, format!("error: gateway ns1/nope not found on the config discovery server at {}\n", s.url()));

    let err = failed(&stunnerctl(&s.url(), &["config", "-o", "xml"]).await);
    assert!(err.contains("invalid value 'xml'"), "{err}");
    let err = failed(&stunnerctl(&s.url(), &["license", "-w"]).await);
    assert_eq!(err, "error: --watch applies only to the config command\n");
    let err = failed(&stunnerctl("https://127.0.0.1:1", &["license"]).await);
    assert!(err.starts_with("error: invalid config discovery server address \"https://127.0.0.1:1\""), "{err}");
    // The real server has no statuses endpoint yet: say so rather than "404".
    let err = failed(&stunnerctl(&s.url(), &["gateway-status"]).await);
    assert_eq!(
        err,
        format!("error: the config discovery server at {} does not serve /api/v1/statuses (404 Not Found)\n", s.url())
    );
}

/// `console` prints the console's URL once the server answers it (the overview, or a Gateway's
/// page), and says so when the server has no console or no such Gateway.
#[tokio::test]
async fn console_prints_the_url_the_server_answers() {
    use stunner_gateway_operator::console::Console;
    let s = Server::start_with(Console {
        statuses: Default::default(),
        charts: Default::default(),
        dataplane_metrics: None,
    })
    .await;
    s.store.upsert(config("ns1/gw-a"));
    assert_eq!(ok(&stunnerctl(&s.url(), &["console"]).await), format!("{}/ui/\n", s.url()));
    let page = ok(&stunnerctl(&s.url(), &["console", "-n", "ns1", "gw-a"]).await);
    assert_eq!(page, format!("{}/ui/gateways/ns1/gw-a\n", s.url()));
    let err = failed(&stunnerctl(&s.url(), &["dashboard", "-n", "ns1", "nope"]).await);
    assert_eq!(err, format!("error: gateway ns1/nope not found on the config discovery server at {}\n", s.url()));
    let err = failed(&stunnerctl(&s.url(), &["console", "--transport", "grpc"]).await);
    assert_eq!(err, "error: the console is served over HTTP only: drop --transport\n");

    let without = Server::start().await;
    let err = failed(&stunnerctl(&without.url(), &["console"]).await);
    assert_eq!(
        err,
        format!("error: the config discovery server at {} does not serve /ui/ (404 Not Found)\n", without.url())
    );
}

mod status {
    use super::*;
    use axum::Router;
    use axum::routing::get;

    const BODY: &str = r#"{"items":[
      {"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","namespace":"stunner","name":"udp-gateway",
       "status":{"conditions":[
          {"type":"Accepted","status":"True","reason":"Accepted","message":"gateway accepted by controller stunner.l7mp.io/gateway-operator","lastTransitionTime":"2025-01-01T00:00:00Z","observedGeneration":1},
          {"type":"Programmed","status":"False","reason":"AddressNotAssigned","message":"no public address"}],
        "listeners":[{"name":"udp-listener","attachedRoutes":1,"supportedKinds":[],"conditions":[
          {"type":"Accepted","status":"True","reason":"Accepted","message":"listener accepted"},
          {"type":"ResolvedRefs","status":"True","reason":"ResolvedRefs","message":""}]}]}},
      {"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","namespace":"stunner","name":"tcp-gateway",
       "status":{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"ok"}]}},
      {"apiVersion":"gateway.networking.k8s.io/v1","kind":"Gateway","namespace":"other","name":"udp-gateway","status":{}},
      {"apiVersion":"gateway.networking.k8s.io/v1","kind":"GatewayClass","namespace":"","name":"stunner-gatewayclass",
       "status":{"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"gatewayclass accepted"}]}},
      {"apiVersion":"stunner.l7mp.io/v1","kind":"UDPRoute","namespace":"stunner","name":"media-plane",
       "status":{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"udp-gateway","sectionName":"udp-listener"},
         "controllerName":"stunner.l7mp.io/gateway-operator",
         "conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"parent accepts the route"},
                       {"type":"ResolvedRefs","status":"False","reason":"BackendNotFound","message":"backend not found"}]}]}}
    ]}"#;

    const UDP_GATEWAY: &str = "\
Gateway stunner/udp-gateway
  Accepted=True (Accepted): gateway accepted by controller stunner.l7mp.io/gateway-operator
  Programmed=False (AddressNotAssigned): no public address
  Listener udp-listener:
    Accepted=True (Accepted): listener accepted
    ResolvedRefs=True (ResolvedRefs)
";
    const MEDIA_PLANE: &str = "\
UDPRoute stunner/media-plane
  Parent stunner/udp-gateway (listener udp-listener):
    Accepted=True (Accepted): parent accepts the route
    ResolvedRefs=False (BackendNotFound): backend not found
";

    /// A stand-in for the operator's `GET /api/v1/statuses`, until the server serves it.
    async fn stub() -> String {
        let app =
            Router::new().route("/api/v1/statuses", get(|| async { ([("content-type", "application/json")], BODY) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn summary_by_namespace_gateway_and_all() {
        let server = stub().await;
        let ns = ok(&stunnerctl(&server, &["gateway-status", "-n", "stunner"]).await);
        let tcp = "Gateway stunner/tcp-gateway\n  Accepted=True (Accepted): ok\n";
        assert_eq!(ns, format!("{UDP_GATEWAY}{tcp}{MEDIA_PLANE}"));

        let one = ok(&stunnerctl(&server, &["gateway-status", "-n", "stunner", "udp-gateway"]).await);
        assert_eq!(one, format!("{UDP_GATEWAY}{MEDIA_PLANE}"));

        let all = ok(&stunnerctl(&server, &["gateway-status", "-a"]).await);
        let heads: Vec<&str> = all.lines().filter(|l| !l.starts_with(' ')).collect();
        assert_eq!(
            heads,
            [
                "Gateway stunner/udp-gateway",
                "Gateway stunner/tcp-gateway",
                "Gateway other/udp-gateway",
                "GatewayClass stunner-gatewayclass",
                "UDPRoute stunner/media-plane"
            ]
        );
        assert!(all.contains("GatewayClass stunner-gatewayclass\n  Accepted=True (Accepted): gatewayclass accepted\n"));

        assert_eq!(ok(&stunnerctl(&server, &["gateway-status"]).await), "", "nothing in namespace default");
    }

    #[tokio::test]
    async fn json_and_yaml_keep_the_whole_status() {
        let server = stub().await;
        let json = ok(&stunnerctl(&server, &["gateway-status", "-n", "stunner", "tcp-gateway", "-o", "json"]).await);
        assert_eq!(json.lines().count(), 1);
        let got: serde_json::Value = serde_json::from_str(&json).unwrap();
        let items = got["items"].as_array().unwrap();
        assert_eq!(items.len(), 2, "the Gateway and the namespace's route: {json}");
        assert_eq!(items[0]["name"], "tcp-gateway");
        assert_eq!(items[1]["status"]["parents"][0]["parentRef"]["group"], "gateway.networking.k8s.io");

        let yaml = ok(&stunnerctl(&server, &["gateway-status", "-a", "-o", "yaml"]).await);
        let got: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
        let want: serde_json::Value = serde_json::from_str(BODY).unwrap();
        let names = |v: &serde_json::Value| {
            v["items"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(&got), names(&want));
        assert_eq!(
            got["items"][0]["status"]["conditions"][0]["observedGeneration"], 1,
            "fields the summary ignores are kept"
        );
    }

    /// The daemon's own status board, served beside the CDS API as the operator does.
    #[tokio::test]
    async fn against_the_operator_status_board() {
        use std::sync::Arc;
        use stunner_gateway::index::{Kind, ObjRef, ObjectKey};
        use stunner_gateway::render::SerializedStatus;
        use stunner_gateway_operator::status::StatusBoard;
        let board = Arc::new(StatusBoard::default());
        let gateway = ObjRef::new(Kind::Gateway, ObjectKey::new("stunner", "udp-gateway"));
        board.set(&SerializedStatus::new(
            gateway,
            &serde_json::json!({"conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "ok"}
            ]}),
        ));
        let s = Server::start_with(board.router()).await;
        let out = ok(&stunnerctl(&s.url(), &["gateway-status", "-n", "stunner"]).await);
        assert_eq!(out, "Gateway stunner/udp-gateway\n  Accepted=True (Accepted): ok\n");
    }

    #[tokio::test]
    async fn missing_gateway_fails() {
        let server = stub().await;
        let err = failed(&stunnerctl(&server, &["gateway-status", "-n", "stunner", "nope"]).await);
        assert_eq!(
            err,
            format!("error: gateway stunner/nope has no status on the config discovery server at {server}\n")
        );
        let err = failed(&stunnerctl(&server, &["gateway-status", "--node", "n"]).await);
        assert_eq!(err, "error: --node applies only to the config command\n");
    }
}
