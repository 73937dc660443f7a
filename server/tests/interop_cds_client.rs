//! Our CDS server against the real upstream CDS client (github.com/l7mp/stunner
//! pkg/config/client, driven by tests/interop/cmd/cdswatch): what stunnerd and stunnerctl
//! actually receive, parse, validate and recognise as deleted.

mod common;
#[path = "../../tests/support/external.rs"]
mod external;

use common::{Server, config, start};
use serde::Deserialize;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::{NODE_ADDRESS_PLACEHOLDER, StunnerConfig};
use stunner_gateway_cds::ServerSettings;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// One config as the upstream client delivered it, after its own parsing and validation.
#[derive(Debug, Deserialize)]
struct Delivered {
    deleted: bool,
    config: StunnerConfig,
}

fn cdswatch_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/bin/cdswatch")
}

/// Whether upstream's client is built; if not, the test is skipped (tests/support/external.rs).
fn cdswatch_built() -> bool {
    external::built(cdswatch_binary(), "run tests/interop/build.sh (scripts/test does)").is_some()
}

struct CdsWatch {
    _child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl CdsWatch {
    fn spawn(server: &Server, args: &[&str]) -> Self {
        let mut child = Command::new(cdswatch_binary())
            .arg("--server")
            .arg(format!("http://{}", server.addr))
            .args(args)
            .env("STUNNER_ADDR", "10.76.1.9")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("cdswatch starts");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        CdsWatch { _child: child, lines }
    }

    async fn next(&mut self) -> Delivered {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("the real client delivers a config in time")
            .unwrap()
            .expect("cdswatch still running");
        serde_json::from_str(&line).unwrap()
    }

    async fn assert_quiet(&mut self) {
        if let Ok(Ok(Some(line))) = tokio::time::timeout(Duration::from_millis(500), self.lines.next_line()).await {
            panic!("unexpected delivery {line}");
        }
    }
}

#[tokio::test]
async fn stunnerd_watch_gets_validated_configs_patched_for_its_node_and_recognises_deletes() {
    if !cdswatch_built() {
        return;
    }
    let s = start(ServerSettings::default()).await;
    let mut c = config("stunner/udp-gateway", "r1");
    c.listeners[0].addr = NODE_ADDRESS_PLACEHOLDER.into();
    s.store.upsert(c);
    s.store.nodes().set("node-1", Some("203.0.113.10".parse().unwrap()));
    let mut w = CdsWatch::spawn(&s, &["--id", "stunner/udp-gateway", "--node", "node-1"]);

    let got = w.next().await;
    assert!(!got.deleted);
    assert_eq!(got.config.auth.realm, "r1");
    assert_eq!(got.config.listeners[0].addr, "203.0.113.10", "patched for the node");
    // What the client validated equals our own normalisation of what we served.
    let mut served = config("stunner/udp-gateway", "r1");
    served.listeners[0].addr = "203.0.113.10".into();
    assert_eq!(got.config, served.normalized().unwrap());

    s.store.upsert(config("stunner/udp-gateway", "r2"));
    let got = w.next().await;
    assert_eq!(got.config.auth.realm, "r2");
    assert_eq!(got.config.listeners[0].addr, "10.76.1.9", "$STUNNER_ADDR expanded by the client");

    s.store.delete(&ConfigId::new("stunner", "udp-gateway"));
    let got = w.next().await;
    assert!(got.deleted, "upstream IsConfigDeleted recognises our zero config");
    assert_eq!(got.config.admin.name, "stunner/udp-gateway");
}

#[tokio::test]
async fn suppressed_deletes_keep_the_last_config_like_stunnerd_w() {
    if !cdswatch_built() {
        return;
    }
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/gw", "r1"));
    let mut w = CdsWatch::spawn(&s, &["--id", "ns/gw", "--suppress-delete"]);
    assert_eq!(w.next().await.config.auth.realm, "r1");
    s.store.delete(&ConfigId::new("ns", "gw"));
    w.assert_quiet().await;
    s.store.upsert(config("ns/gw", "r2"));
    let got = w.next().await;
    assert_eq!((got.deleted, got.config.auth.realm.as_str()), (false, "r2"));
}

#[tokio::test]
async fn namespace_and_all_watches_like_stunnerctl() {
    if !cdswatch_built() {
        return;
    }
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns1/a", "r"));
    s.store.upsert(config("ns2/b", "r"));
    let mut ns = CdsWatch::spawn(&s, &["--namespace", "ns1"]);
    let mut all = CdsWatch::spawn(&s, &["--all"]);
    assert_eq!(ns.next().await.config.admin.name, "ns1/a");
    let mut names = vec![all.next().await.config.admin.name, all.next().await.config.admin.name];
    names.sort();
    assert_eq!(names, ["ns1/a", "ns2/b"]);
    s.store.delete(&ConfigId::new("ns1", "a"));
    let (n, a) = (ns.next().await, all.next().await);
    assert!(n.deleted && a.deleted);
    assert_eq!(a.config.admin.name, "ns1/a");
    ns.assert_quiet().await;
}

#[tokio::test]
async fn one_shot_loads_validate_and_missing_ids_fail_like_upstream() {
    if !cdswatch_built() {
        return;
    }
    let s = start(ServerSettings::default()).await;
    s.store.upsert(config("ns/gw", "r"));
    s.store.upsert(config("ns/other", "r"));
    let out = |args: Vec<&'static str>| {
        let bin = cdswatch_binary();
        let server = format!("http://{}", s.addr);
        async move { Command::new(bin).arg("--server").arg(server).args(args).output().await.expect("cdswatch runs") }
    };
    let one = out(vec!["--id", "ns/gw", "--once"]).await;
    assert!(one.status.success());
    let got: Delivered = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(got.config.admin.name, "ns/gw");

    let all = out(vec!["--all", "--once"]).await;
    assert!(all.status.success());
    assert_eq!(String::from_utf8(all.stdout).unwrap().lines().count(), 2);

    let missing = out(vec!["--id", "ns/missing", "--once"]).await;
    assert!(!missing.status.success());
    let err = String::from_utf8(missing.stderr).unwrap();
    assert!(err.contains("Config not found for ID ns/missing"), "{err}");
}
