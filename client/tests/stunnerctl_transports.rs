//! `stunnerctl --transport grpc` prints exactly what the default (HTTP/WebSocket) transport
//! prints, and `stunnerctl clients` shows the server's client table.

mod common;

use common::{Server, config, failed, next_line, ok, stunnerctl, stunnerctl_command};
use std::process::Stdio;
use std::time::Duration;
use stunner_gateway::cds::{ConfigId, LicenseStatus};
use stunner_gateway_client::cds::{CdsClient, ClientList, ConfigScope, Transport, WatchEvent, WatchSettings};
use tokio::io::{AsyncBufReadExt, BufReader};

async fn three_gateways() -> Server {
    let s = Server::start().await;
    for id in ["ns1/gw-a", "ns1/gw-b", "ns2/gw-c"] {
        s.store.upsert(config(id));
    }
    s
}

/// stdout and stderr of `args` over one transport.
async fn run(s: &Server, transport: &str, args: &[&str]) -> (String, String, Option<i32>) {
    let mut all = vec!["--transport", transport];
    all.extend_from_slice(args);
    let out = stunnerctl(&s.url(), &all).await;
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap(), out.status.code())
}

#[tokio::test]
async fn one_shot_output_is_byte_identical() {
    let s = three_gateways().await;
    s.store.set_license(LicenseStatus { subscription_type: "member".into(), ..Default::default() });
    let commands: &[&[&str]] = &[
        &["config", "-a"],
        &["config", "-a", "-o", "json"],
        &["config", "-n", "ns1", "-o", "yaml"],
        &["config", "-n", "ns1", "gw-b"],
        &["config", "-n", "ns1", "gw-b", "--node", "n1", "-o", "json"],
        &["config", "-n", "empty"],
        &["config", "-n", "ns1", "nope"],
        &["license"],
        &["license", "-o", "yaml"],
        &["clients"],
    ];
    for args in commands {
        let ws = run(&s, "ws", args).await;
        let grpc = run(&s, "grpc", args).await;
        assert_eq!(ws, grpc, "{args:?}");
    }
    let (out, _, code) = run(&s, "grpc", &["config", "-a", "-o", "json"]).await;
    assert_eq!((out.lines().count(), code), (3, Some(0)));
    let (_, err, code) = run(&s, "grpc", &["config", "-n", "ns1", "nope"]).await;
    assert_eq!(code, Some(1));
    assert_eq!(err, format!("error: gateway ns1/nope not found on the config discovery server at {}\n", s.url()));
}

#[tokio::test]
async fn watch_output_is_byte_identical() {
    let s = three_gateways().await;
    let mut watches = Vec::new();
    for transport in ["ws", "grpc"] {
        let mut child =
            stunnerctl_command(&s.url(), &["--transport", transport, "config", "-n", "ns1", "-w", "-o", "json"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        watches.push((child, lines));
    }
    let mut read = async |n: usize| {
        let mut outputs = Vec::new();
        for (_, lines) in &mut watches {
            let mut text = Vec::new();
            for _ in 0..n {
                text.push(next_line(lines).await);
            }
            outputs.push(text);
        }
        assert_eq!(outputs[0], outputs[1]);
        outputs.remove(0)
    };
    let snapshot = read(2).await;
    assert!(snapshot[0].contains("\"name\":\"ns1/gw-a\""), "{snapshot:?}");
    let mut changed = config("ns1/gw-b");
    changed.admin.loglevel = "all:DEBUG".into();
    s.store.upsert(changed);
    assert!(read(1).await[0].contains("all:DEBUG"));
    s.store.upsert(config("ns2/gw-d"));
    s.store.delete(&ConfigId::new("ns1", "gw-a"));
    assert_eq!(read(1).await, ["Gateway: ns1/gw-a <deleted>"]);
    for (mut child, _) in watches {
        child.kill().await.unwrap();
    }
}

#[tokio::test]
async fn clients_lists_acks_and_rejections() {
    let s = Server::start().await;
    s.store.upsert(config("ns1/gw-a"));
    assert_eq!(ok(&stunnerctl(&s.url(), &["clients"]).await), "No clients connected.\n");

    let settings = WatchSettings { client_name: "dataplane-1".into(), ..Default::default() };
    let grpc = CdsClient::new(&s.url()).unwrap().with_transport(Transport::Grpc).with_watch_settings(settings);
    let scope = ConfigScope::Gateway { id: ConfigId::new("ns1", "gw-a"), node: Some("node-1".into()) };
    let mut watch = grpc.watch(&scope);
    let mut ws = CdsClient::new(&s.url()).unwrap().watch(&ConfigScope::All);
    assert!(matches!(watch.next().await, WatchEvent::Config(_)));
    assert!(matches!(ws.next().await, WatchEvent::Config(_)));
    // The acknowledgement goes out when the caller asks for the next event.
    let _ = tokio::time::timeout(Duration::from_millis(100), watch.next()).await;

    let table =
        poll_clients(&s, |l| l.clients.iter().any(|c| c.configs.iter().any(|k| !k.version_acked.is_empty()))).await;
    let grpc_row = table.clients.iter().find(|c| c.transport == "grpc").unwrap();
    let version = grpc_row.configs[0].version_sent.clone();
    assert_eq!(version.len(), 16);
    let out = ok(&stunnerctl(&s.url(), &["clients"]).await);
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        lines[0],
        ["TRANSPORT", "REMOTE", "IDENTITY", "NODE", "SCOPE", "NAME", "SINCE", "CONFIG", "SENT", "ACKED/REJECTED"]
    );
    assert_eq!(lines.len(), 3, "{out}");
    assert_eq!(
        [lines[1][0], lines[1][2], lines[1][3], lines[1][4], lines[1][5], lines[1][7], lines[1][8], lines[1][9]],
        ["grpc", "unchecked", "node-1", "ns1/gw-a", "dataplane-1", "ns1/gw-a", &version, &version]
    );
    assert_eq!([lines[2][0], lines[2][4], lines[2][7], lines[2][8]], ["websocket", "*", "ns1/gw-a", &version]);
    assert_eq!(lines[2][9], "<none>", "WebSocket clients never acknowledge");

    // An invalid config: the gRPC client rejects it with the validation error.
    let mut bad = config("ns1/gw-a");
    bad.version = "v0".into();
    s.store.upsert(bad);
    assert!(matches!(watch.next().await, WatchEvent::Rejected { .. }));
    poll_clients(&s, |l| l.clients.iter().any(|c| c.configs.iter().any(|k| !k.version_rejected.is_empty()))).await;
    let out = ok(&stunnerctl(&s.url(), &["clients"]).await);
    let grpc_line = out.lines().find(|l| l.starts_with("grpc")).unwrap();
    assert!(grpc_line.contains(&format!("{version}, rejected ")), "{out}");
    assert!(grpc_line.contains("unsupported API version"), "{out}");

    // JSON and YAML carry the whole table, the same over both transports.
    let json = ok(&stunnerctl(&s.url(), &["clients", "-o", "json"]).await);
    let list: ClientList = serde_json::from_str(&json).unwrap();
    let state = &list.clients.iter().find(|c| c.transport == "grpc").unwrap().configs[0];
    assert_eq!(state.version_acked, version);
    assert!(state.error.contains("unsupported API version"), "{state:?}");
    assert_eq!(ok(&stunnerctl(&s.url(), &["--transport", "grpc", "clients", "-o", "json"]).await), json);
    let yaml = ok(&stunnerctl(&s.url(), &["clients", "-o", "yaml"]).await);
    assert_eq!(serde_yaml_ng::from_str::<ClientList>(&yaml).unwrap(), list);

    let err = failed(&stunnerctl(&s.url(), &["clients", "-w"]).await);
    assert_eq!(err, "error: --watch applies only to the config command\n");
}

async fn poll_clients(s: &Server, done: impl Fn(&ClientList) -> bool) -> ClientList {
    let rest = CdsClient::new(&s.url()).unwrap();
    let mut last = ClientList::default();
    for _ in 0..100 {
        last = rest.clients().await.unwrap();
        if done(&last) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the client table never got there: {last:#?}");
}

#[tokio::test]
async fn grpc_watch_ends_cleanly_on_sigterm() {
    let s = three_gateways().await;
    let mut child = stunnerctl_command(&s.url(), &["--transport", "grpc", "config", "-a", "-w", "-o", "json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    next_line(&mut lines).await;
    let pid = child.id().unwrap().to_string();
    let kill = tokio::process::Command::new("kill").args(["-TERM", &pid]).status().await.unwrap();
    assert!(kill.success());
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
}
