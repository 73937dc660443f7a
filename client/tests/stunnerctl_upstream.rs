//! `stunnerctl` as upstream users type it, against the real CDS server in-process: upstream's
//! `--cds-server-address IP --cds-server-port N`, output byte-identical to upstream's own
//! stunnerctl (tests/interop/bin/stunnerctl, v1.2.1) for summary, JSON, YAML and JSONPath,
//! the notes of a command that finds nothing, `auth` credentials, and `status` of a real
//! stunnerd whose TURN listener then accepts those credentials (tests/interop/bin).

mod common;
#[path = "../../tests/support/external.rs"]
mod external;
#[path = "../../tests/support/ports.rs"]
mod ports;

use common::{Server, config, ok, stunnerctl};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::turn_auth::timewindowed_password;
use tokio::process::Command;

fn interop_bin(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/bin").join(name)
}

/// Whether the upstream programs this suite runs are built; if not, the test is skipped
/// (tests/support/external.rs).
fn interop_built() -> bool {
    let how = "run tests/interop/build.sh (scripts/test does)";
    ["stunnerctl", "stunnerd", "turnprobe"].into_iter().all(|name| external::built(interop_bin(name), how).is_some())
}

/// `bin` with upstream's flag spelling of the server address.
async fn run(bin: &std::path::Path, server: &Server, args: &[&str]) -> Output {
    let port = server.addr.port().to_string();
    let mut cmd = Command::new(bin);
    cmd.args(args).args(["--cds-server-address", "127.0.0.1", "--cds-server-port", &port]);
    cmd.env_remove("STUNNERCTL_CDS_SERVER_ADDRESS").kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(30), cmd.output()).await.expect("finishes").unwrap()
}

async fn three_gateways() -> Server {
    let s = Server::start().await;
    for id in ["ns1/gw-a", "ns1/gw-b", "ns2/gw-c"] {
        s.store.upsert(config(id));
    }
    s
}

#[tokio::test]
async fn output_is_byte_identical_to_upstream_stunnerctl() {
    if !interop_built() {
        return;
    }
    let s = three_gateways().await;
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_stunnerctl"));
    let upstream = interop_bin("stunnerctl");
    let commands: &[&[&str]] = &[
        &["-n", "ns1", "config", "gw-a"],
        &["-n", "ns1", "config", "gw-a", "-o", "yaml"],
        &["-n", "ns1", "config", "gw-a", "-o", "json"],
        &["-a", "config", "-o", "json"],
        &["-a", "config", "-o", "jsonpath={.admin.name}"],
        &["-n", "ns1", "config", "-o", "jsonpath=name: {.admin.name}, auth: {.auth.type}"],
        &["-n", "ns2", "config", "gw-c", "-o", "jsonpath={.listeners[0].public_port}"],
        &["-n", "ns1", "config"],
        &["license"],
        &["license", "-o", "yaml"],
        &["license", "-o", "json"],
    ];
    for args in commands {
        let want = run(&upstream, &s, args).await;
        assert!(want.status.success(), "upstream {args:?}: {want:?}");
        let got = run(&ours, &s, args).await;
        assert_eq!(String::from_utf8_lossy(&got.stdout), String::from_utf8_lossy(&want.stdout), "{args:?}");
        assert!(got.status.success(), "{args:?}");
    }
}

#[tokio::test]
async fn jsonpath_with_ranges_and_watch() {
    if !interop_built() {
        return;
    }
    let s = three_gateways().await;
    let out = ok(&stunnerctl(&s.url(), &["config", "-A", "-o", "jsonpath={.admin.name}"]).await);
    assert_eq!(out, "ns1/gw-a\nns1/gw-b\nns2/gw-c\n");
    let template = r#"jsonpath={range .listeners[*]}{.name} {.protocol}{"\n"}{end}"#;
    let out = ok(&stunnerctl(&s.url(), &["config", "-n", "ns1", "gw-b", "-o", template]).await);
    assert_eq!(out, "ns1/gw-b/udp-listener TURN-UDP\n\n");
    let out = ok(&stunnerctl(&s.url(), &["config", "-n", "ns2", "-o", "jsonpath={.clusters[*].endpoints[*]}"]).await);
    assert_eq!(out, "10.0.0.1 10.0.0.2\n");
    let out = ok(&stunnerctl(&s.url(), &["license", "-o", "jsonpath={.subscriptionType}"]).await);
    assert_eq!(out, "free\n");
    let out = ok(&stunnerctl(&s.url(), &["clients", "-o", "jsonpath={.clients}"]).await);
    assert_eq!(out, "[]\n");

    // The issue's `stunnerctl config -A -o jsonpath='{.admin.name}' -w`.
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = common::stunnerctl_command(&s.url(), &["config", "-A", "-o", "jsonpath={.admin.name}", "-w"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(common::next_line(&mut lines).await);
    }
    first.sort();
    assert_eq!(first, ["ns1/gw-a", "ns1/gw-b", "ns2/gw-c"]);
    s.store.upsert(config("ns3/gw-d"));
    assert_eq!(common::next_line(&mut lines).await, "ns3/gw-d");
    child.kill().await.unwrap();

    let err = common::failed(&stunnerctl(&s.url(), &["config", "-o", "jsonpath={.a"]).await);
    assert!(err.contains("invalid jsonpath template"), "{err}");
}

#[tokio::test]
async fn a_command_that_finds_nothing_says_where_it_looked() {
    if !interop_built() {
        return;
    }
    let s = Server::start().await;
    let note = "stunnerctl: No Gateway configs found in namespace default; \
                use -A (--all-namespaces) to look in every namespace.\n";
    for args in [&["config"][..], &["auth"], &["config", "-o", "json"]] {
        let out = stunnerctl(&s.url(), args).await;
        assert_eq!((ok(&out).as_str(), String::from_utf8_lossy(&out.stderr).as_ref()), ("", note), "{args:?}");
    }
    let out = stunnerctl(&s.url(), &["config", "-A"]).await;
    assert_eq!(String::from_utf8_lossy(&out.stderr), "stunnerctl: No Gateway configs found in any namespace.\n");
    assert_eq!(ok(&out), "");
    // With something to show there is no note.
    s.store.upsert(config("default/gw"));
    let out = stunnerctl(&s.url(), &["config"]).await;
    assert!(out.stderr.is_empty() && !ok(&out).is_empty(), "{out:?}");
}

#[tokio::test]
async fn upstream_address_flags_on_both_transports() {
    if !interop_built() {
        return;
    }
    let s = three_gateways().await;
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_stunnerctl"));
    for transport in ["ws", "grpc"] {
        let out = run(&ours, &s, &["--transport", transport, "config", "-a", "-o", "jsonpath={.admin.name}"]).await;
        assert_eq!(ok(&out), "ns1/gw-a\nns1/gw-b\nns2/gw-c\n", "{transport}");
    }
    let err = common::failed(&stunnerctl(&s.url(), &["config", "--cds-server-port", "1"]).await);
    assert!(err.contains("it has a port already: give the port once"), "{err}");
}

fn ephemeral(id: &str, secret: &str) -> StunnerConfig {
    let mut c = config(id);
    c.auth.auth_type = "ephemeral".into();
    c.auth.credentials.clear();
    c.auth.credentials.insert("secret".into(), secret.into());
    c
}

#[derive(Debug, Deserialize, PartialEq)]
struct TurnCredential {
    password: String,
    ttl: u64,
    uris: Vec<String>,
    username: String,
}

#[tokio::test]
async fn auth_static_and_ephemeral() {
    if !interop_built() {
        return;
    }
    let s = three_gateways().await;
    let out = ok(&stunnerctl(&s.url(), &["-n", "ns1", "auth", "gw-a"]).await);
    assert_eq!(
        out,
        "{\"iceServers\":[{\"credential\":\"pass-1\",\"urls\":[\"turn:1.2.3.4:3478?transport=udp\"],\
         \"username\":\"user-1\"}],\"iceTransportPolicy\":\"all\"}\n"
    );
    let all = ok(&stunnerctl(&s.url(), &["get-credential", "-n", "ns1"]).await);
    let v: serde_json::Value = serde_json::from_str(&all).unwrap();
    assert_eq!(v["iceServers"].as_array().unwrap().len(), 2, "one ICE server per Gateway: {all}");

    s.store.upsert(ephemeral("ns1/gw-e", "my-secret"));
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let args = ["-n", "ns1", "auth", "gw-e", "--auth-turn-credential", "--username", "alice", "--ttl", "1h"];
    let cred: TurnCredential = serde_json::from_str(&ok(&stunnerctl(&s.url(), &args).await)).unwrap();
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let (expiry, user) = cred.username.split_once(':').unwrap();
    let expiry: u64 = expiry.parse().unwrap();
    assert!((before + 3600..=after + 3600).contains(&expiry), "{cred:?}");
    assert_eq!((user, cred.ttl), ("alice", 3600));
    assert_eq!(cred.password, timewindowed_password(&cred.username, "my-secret"));
    assert_eq!(cred.uris, ["turn:1.2.3.4:3478?transport=udp"]);

    let yaml = ok(&stunnerctl(&s.url(), &["-n", "ns1", "auth", "gw-a", "-o", "yaml"]).await);
    assert!(yaml.starts_with("iceServers:\n- credential: pass-1\n"), "{yaml}");
    let user =
        ok(&stunnerctl(&s.url(), &["-n", "ns1", "auth", "gw-e", "-o", "jsonpath={.iceServers[0].username}"]).await);
    assert!(user.trim_end().ends_with(':'), "no user id: {user}");

    // A dual-stack Gateway's listener (docs/deploy.md §12): a URI per address family.
    let mut dual = config("ns1/gw-d");
    dual.listeners[0].public_addrs = vec!["1.2.3.4".into(), "2001:db8::4".into()];
    s.store.upsert(dual);
    let cred: TurnCredential =
        serde_json::from_str(
            &ok(&stunnerctl(&s.url(), &["-n", "ns1", "auth", "gw-d", "--auth-turn-credential"]).await),
        )
        .unwrap();
    assert_eq!(cred.uris, ["turn:1.2.3.4:3478?transport=udp", "turn:[2001:db8::4]:3478?transport=udp"]);

    let mut none = config("ns1/gw-n");
    none.auth.auth_type = "none".into();
    s.store.upsert(none);
    let err = common::failed(&stunnerctl(&s.url(), &["-n", "ns1", "auth", "gw-n"]).await);
    assert_eq!(err, "error: gateway ns1/gw-n has authentication type \"none\": no TURN credentials to hand out\n");
}

// ---------------------------------------------------------------------------------------
// A real stunnerd

/// What turnprobe prints (tests/interop/cmd/turnprobe).
#[derive(Debug, Deserialize)]
struct Verdict {
    ok: bool,
    stage: String,
    #[serde(default)]
    error: String,
    received: usize,
}

async fn turnprobe(port: u16, peer: SocketAddr, user: &str, password: &str) -> Verdict {
    let out = Command::new(interop_bin("turnprobe"))
        .args(["--server", &format!("127.0.0.1:{port}"), "--transport", "udp", "--peer", &peer.to_string()])
        .args(["--count", "5", "--timeout", "20s", "--user", user, "--password", password])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(40), out).await.expect("turnprobe ends").unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("turnprobe printed no verdict ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

#[tokio::test]
async fn status_of_a_real_stunnerd_and_auth_credentials_it_accepts() {
    if !interop_built() {
        return;
    }
    // stunnerd's health check always binds :8086 first: wait for any other one to go.
    for _ in 0..100 {
        if std::net::TcpListener::bind("0.0.0.0:8086").is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let echo = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let peer = echo.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = echo.recv_from(&mut buf).await {
            let _ = echo.send_to(&buf[..n], from).await;
        }
    });
    let turn_port = ports::free_ports(1)[0];
    let mut c = ephemeral("stunner/udp-gateway", "shared-secret");
    c.listeners[0].port = turn_port as i64;
    c.listeners[0].public_addr = "127.0.0.1".into();
    c.listeners[0].public_port = turn_port as i64;
    c.clusters[0].endpoints = vec!["127.0.0.1".into()];
    c.clusters[0].name = "stunner/media-plane".into();
    c.listeners[0].routes = vec!["stunner/media-plane".into()];
    let s = Server::start().await;
    s.store.upsert(c);

    let mut stunnerd = Command::new(interop_bin("stunnerd"))
        .args(["-w", "--id", "stunner/udp-gateway", "-c", &s.url()])
        .env("STUNNER_ADDR", "127.0.0.1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("stunnerd starts");

    // `status --pod-address`: upstream's layout once stunnerd runs our config.
    let mut summary = String::new();
    for _ in 0..100 {
        let out = stunnerctl(&s.url(), &["status", "--pod-address", "127.0.0.1"]).await;
        summary = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() && summary.contains(&format!("127.0.0.1:{turn_port}")) && summary.contains("READY") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(summary.starts_with("127.0.0.1:8086:\n\tadmin:{id=\"stunner/udp-gateway\""), "{summary}");
    assert!(summary.contains("\n\tephemeral-auth:{realm=\"stunner.l7mp.io\",secret=\"<SECRET>\"}\n"), "{summary}");
    assert!(summary.contains("/status=READY\n"), "{summary}");
    let json = ok(&stunnerctl(&s.url(), &["status", "--pod-address", "127.0.0.1:8086", "-o", "json"]).await);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["admin"]["name"], "stunner/udp-gateway");
    let state = ok(&stunnerctl(&s.url(), &["status", "--pod-address", "127.0.0.1", "-o", "jsonpath={.status}"]).await);
    assert_eq!(state, "READY\n");
    // Byte-identical to upstream's stunnerctl, while nothing changes the counters.
    for args in [&["status", "--pod-address", "127.0.0.1"][..], &["status", "--pod-address", "127.0.0.1", "-o", "yaml"]]
    {
        let want = Command::new(interop_bin("stunnerctl")).args(args).output().await.unwrap();
        let got = Command::new(env!("CARGO_BIN_EXE_stunnerctl")).args(args).output().await.unwrap();
        assert!(want.status.success() && got.status.success(), "{want:?} {got:?}");
        assert_eq!(String::from_utf8_lossy(&got.stdout), String::from_utf8_lossy(&want.stdout), "{args:?}");
    }

    // `auth`: the credential our command computes is one stunnerd accepts.
    let args = ["-n", "stunner", "auth", "udp-gateway", "--auth-turn-credential", "-u", "alice"];
    let cred: TurnCredential = serde_json::from_str(&ok(&stunnerctl(&s.url(), &args).await)).unwrap();
    assert_eq!(cred.uris, [format!("turn:127.0.0.1:{turn_port}?transport=udp")]);
    let mut verdicts = Vec::new();
    for _ in 0..5 {
        let v = turnprobe(turn_port, peer, &cred.username, &cred.password).await;
        if v.ok && v.received > 0 {
            break;
        }
        verdicts.push(v);
    }
    assert!(verdicts.len() < 5, "stunnerd never relayed with our credential: {verdicts:?}");
    let wrong = turnprobe(turn_port, peer, &cred.username, "not-the-password").await;
    assert!(!wrong.ok && wrong.stage == "allocate", "a wrong password is refused: {wrong:?} {}", wrong.error);

    stunnerd.kill().await.unwrap();
    let err = common::failed(&stunnerctl(&s.url(), &["status", "--pod-address", "127.0.0.1"]).await);
    assert!(err.starts_with("error: cannot reach stunnerd at 127.0.0.1:8086: "), "{err}");
}
