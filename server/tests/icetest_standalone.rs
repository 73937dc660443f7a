//! `stunnerctl icetest` without a cluster, as the README shows it: the standalone daemon on the
//! quickstart manifests with its credential API on, upstream's real stunnerd running the
//! Gateway's config from the CDS, and the `icetester` as a local process, all on loopback. The
//! test makes a WebRTC data channel through the Gateway's TURN-UDP and TURN-TCP listeners and
//! must report statistics with the relayed and the tester's candidates, with static and with
//! ephemeral credentials from the credential API, asymmetric (the tester answers with a host
//! candidate) and symmetric (the tester, through its `/config`, allocates on the Gateway too
//! and answers with its relay candidate); with the Gateway's credentials changed under it (the
//! dataplane still runs the old ones) it must fail at the allocation, name it, and exit
//! non-zero. The tester's `/config` refuses what it cannot relay with, and a tester that
//! cannot allocate says so in its WHIP answer.
//!
//! Needs the workspace's `stunnerctl` and `icetester` (`cargo test --workspace` builds them next
//! to the daemon) and tests/interop's stunnerd; without the latter it skips with a notice
//! (with `CI` set it fails instead).

#[path = "support/daemon.rs"]
mod daemon;
#[path = "../../tests/support/external.rs"]
mod external;
#[path = "../../tests/support/ports.rs"]
mod ports;

use daemon::{Daemon, eventually, http_get, quickstart_copy};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const LIMIT: Duration = Duration::from_secs(30);

/// A binary of the workspace, built next to the daemon by `cargo test --workspace`.
fn workspace_bin(name: &str) -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_stunner-gateway-operator")).with_file_name(name);
    assert!(bin.exists(), "{} is missing: run the tests with --workspace (scripts/test does)", bin.display());
    bin
}

/// The quickstart with its TURN listeners on `turn_port` and a Dataplane that binds no fixed
/// port (no health check, no metrics endpoint), so that suites running at once do not collide.
fn manifests(turn_port: u16) -> PathBuf {
    let dir = quickstart_copy("icetest-standalone");
    let gateway = std::fs::read_to_string(dir.join("gateway.yaml")).unwrap();
    assert_eq!(gateway.matches("port: 3478").count(), 2, "the quickstart's two listeners");
    std::fs::write(dir.join("gateway.yaml"), gateway.replace("port: 3478", &format!("port: {turn_port}"))).unwrap();
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    let class =
        class.replace("enableMetricsEndpoint: true", "enableMetricsEndpoint: false\n  disableHealthCheck: true");
    assert!(class.contains("disableHealthCheck: true"));
    std::fs::write(dir.join("gatewayclass.yaml"), class).unwrap();
    dir
}

fn stunnerd(stunnerd: &Path, config: &str) -> Child {
    Command::new(stunnerd)
        .args(["--id", "stunner/udp-gateway", "-c", config])
        .args(if config.starts_with("http") { &["-w"][..] } else { &[][..] })
        .env("STUNNER_ADDR", "127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// The icetester on an ephemeral loopback port with `env`, and its WHIP URL from its first line.
async fn icetester(env: &[(&str, &str)]) -> (Child, String) {
    let mut child = Command::new(workspace_bin("icetester"))
        .args(["--addr", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(LIMIT, lines.next_line()).await.expect("the tester starts").unwrap().unwrap();
    let url = line.rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/whip"), "{line}");
    (child, url)
}

async fn icetest(auth: &str, whip: &str, protocols: &[&str]) -> (Output, String) {
    let run = Command::new(workspace_bin("stunnerctl"))
        .args(["-n", "stunner", "icetest", "--auth-server-address", auth, "--whip-server", whip])
        .args(["--gateway", "udp-gateway", "--duration", "2s", "--timeout", "60s"])
        .args(protocols)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), run).await.expect("icetest ends").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// A request to the tester's `/config` (or another path) with `content_type`: the status code
/// and the body.
async fn tester_request(whip: &str, method: &str, path: &str, content_type: &str, body: &str) -> (u16, String) {
    tester_request_as(whip, None, method, path, content_type, body).await
}

/// [`tester_request`] with the tester's bearer token, when given.
async fn tester_request_as(
    whip: &str,
    token: Option<&str>,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let authority = whip.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: {content_type}\r\n\
         {}Content-Length: {}\r\n\r\n{body}",
        token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default(),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    tokio::time::timeout(LIMIT, stream.take(1 << 20).read_to_end(&mut response))
        .await
        .expect("an answer in time")
        .unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0), body.to_string())
}

/// The report's lines from the stage `from` up to the stage `to` (or the end).
fn section<'a>(stdout: &'a str, from: &str, to: Option<&str>) -> &'a str {
    let start = stdout.find(from).unwrap_or_else(|| panic!("{from:?} in {stdout}"));
    let rest = &stdout[start..];
    to.and_then(|to| rest.find(to)).map_or(rest, |end| &rest[..end])
}

/// Both TURN listeners answer: stunnerd runs the config. The TCP one accepting does not mean
/// the UDP one reads yet (an allocation over UDP once went unanswered right after it), so the
/// UDP one must answer a STUN Binding request too. Twice [`LIMIT`]: stunnerd's start, its
/// first CDS watch and its listeners once took over 30 s on a loaded machine.
async fn listening(turn_port: u16) {
    eventually("stunnerd serves the Gateway's TURN-TCP listener", 2 * LIMIT, async || {
        tokio::net::TcpStream::connect(("127.0.0.1", turn_port)).await.is_ok()
    })
    .await;
    eventually("stunnerd answers a STUN Binding request on the Gateway's TURN-UDP listener", 2 * LIMIT, async || {
        binding_answered(turn_port).await
    })
    .await;
}

/// Whether a STUN Binding request (RFC 8489: type 0x0001, no attributes, the magic cookie) to
/// `port` on loopback gets a Binding Success Response within a second.
async fn binding_answered(port: u16) -> bool {
    let Ok(socket) = tokio::net::UdpSocket::bind("127.0.0.1:0").await else { return false };
    let mut request = vec![0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
    request.extend_from_slice(b"icetest-wait");
    if socket.send_to(&request, ("127.0.0.1", port)).await.is_err() {
        return false;
    }
    let mut answer = [0u8; 512];
    let received = tokio::time::timeout(Duration::from_secs(1), socket.recv(&mut answer)).await;
    matches!(received, Ok(Ok(n)) if n >= 20 && answer[..2] == [0x01, 0x01] && answer[8..20] == request[8..20])
}

#[tokio::test]
async fn icetest_relays_over_turn_udp_and_tcp_in_both_auth_modes_and_names_refused_credentials() {
    let how = "run tests/interop/build.sh (scripts/test does)";
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/bin/stunnerd");
    let Some(stunnerd_bin) = external::built(bin, how) else { return };
    let [turn_port, auth_port] = ports::free_ports(2)[..] else { unreachable!() };
    let dir = manifests(turn_port);
    let auth = format!("127.0.0.1:{auth_port}");
    let d = Daemon::start(&dir, 0, &["--auth-bind-address", &auth]).await;
    let mut watching = stunnerd(&stunnerd_bin, &format!("http://{}", d.addr));
    listening(turn_port).await;
    let (_tester, whip) = icetester(&[]).await;

    let (out, stdout) = icetest(&auth, &whip, &["udp", "tcp"]).await;
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    println!("{stdout}");
    for stage in [
        "Initializing... completed",
        "Checking installation... completed",
        "Checking Gateway... completed",
        "Running asymmetric ICE test over TURN-UDP... completed",
        "Running asymmetric ICE test over TURN-TCP... completed",
        "Running symmetric ICE test over TURN-UDP... completed",
        "Running symmetric ICE test over TURN-TCP... completed",
    ] {
        assert!(stdout.contains(stage), "{stage:?} in {stdout}");
    }
    // Upstream's order: asymmetric over both transports, then symmetric over both.
    let asymmetric = section(&stdout, "Running asymmetric ICE test over TURN-UDP", Some("Running symmetric"));
    let symmetric = section(&stdout, "Running symmetric ICE test over TURN-UDP", None);
    assert!(asymmetric.contains("asymmetric ICE test over TURN-TCP"), "{stdout}");
    assert!(symmetric.contains("symmetric ICE test over TURN-TCP"), "{stdout}");
    let stats: Vec<&str> = stdout.lines().filter(|l| l.starts_with("\tStatistics: rate=")).collect();
    assert_eq!(stats.len(), 4, "{stdout}");
    for line in stats {
        // At 50 pps for 2 s about 100 packets go out and come back over loopback.
        let loss = line.split("loss=").nth(1).unwrap().split("pkts").next().unwrap();
        let (lost, sent) = loss.split_once('/').unwrap();
        let (lost, sent): (u64, u64) = (lost.parse().unwrap(), sent.parse().unwrap());
        assert!(sent >= 50 && lost * 10 <= sent, "{line}");
        assert!(line.contains("RTT:mean=") && line.contains("/P99="), "{line}");
    }
    // Asymmetric: ours is the relayed address stunnerd hands out, the tester's the host one it
    // echoes from. Symmetric: both are relayed addresses of stunnerd, selected on both sides.
    assert_eq!(asymmetric.matches("\t  * udp4 relay 127.0.0.1:").count(), 2, "{stdout}");
    assert_eq!(asymmetric.matches("\t  * udp4 host 127.0.0.1:").count(), 2, "{stdout}");
    assert_eq!(symmetric.matches("\t  * udp4 relay 127.0.0.1:").count(), 4, "{stdout}");
    assert!(!symmetric.contains(" host "), "{stdout}");
    for transport in ["TURN-UDP", "TURN-TCP"] {
        let one = section(symmetric, &format!("over {transport}"), Some("Running"));
        let (local, remote) = one.split_once("RemoteICECandidates:").unwrap();
        assert!(local.contains("LocalICECandidates:\n\t  * udp4 relay 127.0.0.1:"), "{one}");
        assert!(remote.starts_with("\n\t  * udp4 relay 127.0.0.1:"), "{one}");
    }

    // The tester keeps the last config it was sent (upstream's field names), and refuses one it
    // cannot relay with, keeping the one in force.
    let (status, config) = tester_request(&whip, "GET", "/config", "application/json", "").await;
    assert_eq!(status, 200, "{config}");
    let config: serde_json::Value = serde_json::from_str(&config).unwrap();
    assert_eq!(config["ICETransportPolicy"], "relay", "{config}");
    assert_eq!(config["ICEServers"][0]["urls"][0], format!("turn:127.0.0.1:{turn_port}?transport=tcp"), "{config}");
    assert_eq!(config["WHIPEndpoint"], "/whip", "{config}");
    let refused = [
        (r#"{"ICETransportPolicy":"relay"}"#, "needs an ICE server with a turn: URI"),
        (
            r#"{"ICEServers":[{"urls":["turns:127.0.0.1:443"],"username":"u","credential":"p"}],"ICETransportPolicy":"relay"}"#,
            "turns:",
        ),
        (r#"{"ICETransportPolicy":"nohost"}"#, "unknown variant `nohost`"),
        ("{", "invalid config"),
    ];
    for (body, reason) in refused {
        let (status, message) = tester_request(&whip, "POST", "/config", "application/json", body).await;
        assert_eq!(status, 400, "{body}: {message}");
        assert!(message.contains(reason), "{body}: {message}");
    }
    let big = format!("{{\"BearerToken\":\"{}\"}}", "x".repeat(100 * 1024));
    assert_eq!(tester_request(&whip, "POST", "/config", "application/json", &big).await.0, 413);
    assert_eq!(tester_request(&whip, "GET", "/config", "text/plain", "").await.0, 400, "upstream's content type only");
    let (_, after) = tester_request(&whip, "GET", "/config", "application/json", "").await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&after).unwrap(), config);
    // A tester told to relay through a TURN server it cannot reach says so in its WHIP answer.
    let closed = ports::free_ports(1)[0];
    let unreachable = format!(
        r#"{{"ICEServers":[{{"urls":["turn:127.0.0.1:{closed}?transport=tcp"],"username":"u","credential":"p"}}],"ICETransportPolicy":"relay"}}"#
    );
    assert_eq!(tester_request(&whip, "POST", "/config", "application/json", &unreachable).await.0, 200);
    let (status, message) = tester_request(&whip, "POST", "/whip", "application/sdp", "v=0\r\n").await;
    assert_eq!(status, 502, "{message}");
    assert!(
        message.contains(&format!("the tester could not allocate a relay on turn:127.0.0.1:{closed}")),
        "{message}"
    );

    // Ephemeral auth: the credential API hands out a time-windowed username and its HMAC,
    // which stunnerd (following the change) checks against the shared secret.
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    let static_auth = "authType: static\n  userName: \"user-1\"\n  password: \"pass-1\"";
    assert!(class.contains(static_auth), "{class}");
    let ephemeral = class.replace(static_auth, "authType: ephemeral\n  sharedSecret: \"icetest-secret\"");
    std::fs::write(dir.join("gatewayclass.yaml"), &ephemeral).unwrap();
    eventually("the operator serves the ephemeral config", LIMIT, async || {
        http_get(&d.addr, "/api/v1/configs/stunner/udp-gateway").await.1.contains("icetest-secret")
    })
    .await;
    // stunnerd applies it a moment after the operator serves it: a bounded few tries.
    let mut tries = Vec::new();
    for _ in 0..5 {
        let (out, stdout) = icetest(&auth, &whip, &["udp"]).await;
        if out.status.success() {
            assert!(stdout.contains("Running asymmetric ICE test over TURN-UDP... completed"), "{stdout}");
            assert!(stdout.contains("Running symmetric ICE test over TURN-UDP... completed"), "{stdout}");
            break;
        }
        tries.push(stdout);
    }
    assert!(tries.len() < 5, "ephemeral credentials never relayed: {tries:#?}");
    std::fs::write(dir.join("gatewayclass.yaml"), &class).unwrap();
    eventually("the operator serves static auth again", LIMIT, async || {
        http_get(&d.addr, "/api/v1/configs/stunner/udp-gateway").await.1.contains("pass-1")
    })
    .await;

    // The credentials change under the test: the operator serves pass-2 while the dataplane
    // still runs pass-1 (a config file that is not followed).
    let (status, config) = http_get(&d.addr, "/api/v1/configs/stunner/udp-gateway").await;
    assert_eq!(status, 200, "{config}");
    // Killed and reaped: its listeners are closed before the pinned one binds them.
    watching.kill().await.unwrap();
    let pinned = dir.with_extension("stunnerd.json");
    std::fs::write(&pinned, &config).unwrap();
    let _pinned = stunnerd(&stunnerd_bin, &format!("file://{}", pinned.display()));
    listening(turn_port).await;
    let class = std::fs::read_to_string(dir.join("gatewayclass.yaml")).unwrap();
    std::fs::write(dir.join("gatewayclass.yaml"), class.replace("pass-1", "pass-2")).unwrap();
    eventually("the credential API hands out the new password", LIMIT, async || {
        http_get(&auth, "/ice?service=turn&namespace=stunner&gateway=udp-gateway").await.1.contains("pass-2")
    })
    .await;
    let (out, stdout) = icetest(&auth, &whip, &["udp"]).await;
    let _ = std::fs::remove_file(&pinned);
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("Running asymmetric ICE test over TURN-UDP... error"), "{stdout}");
    assert!(stdout.contains("Error: \"credentials refused"), "{stdout}");
    assert!(stdout.contains("Diagnostics: check the Gateway's credentials"), "{stdout}");
    assert!(!stdout.contains("Statistics:"), "{stdout}");
}

/// With a bearer token, `/config` wants it too (upstream's is open, and hands the token out);
/// `ICE_SERVERS` and `ICE_TRANSPORT_POLICY` set the config at start, and one that cannot relay
/// stops the tester with the reason. No stunnerd needed: nothing is dialled.
#[tokio::test]
async fn the_testers_config_wants_the_bearer_token_and_its_environment_is_checked() {
    let servers = r#"[{"urls":["turn:127.0.0.1:3478?transport=udp"],"username":"u","credential":"p"}]"#;
    let env = [("BEARER_TOKEN", "t0ken"), ("ICE_SERVERS", servers), ("ICE_TRANSPORT_POLICY", "relay")];
    let (_tester, whip) = icetester(&env).await;
    let (status, _) = tester_request(&whip, "GET", "/config", "application/json", "").await;
    assert_eq!(status, 401);
    let (status, _) = tester_request(&whip, "POST", "/config", "application/json", r#"{"ICEServers":null}"#).await;
    assert_eq!(status, 401, "an unauthorized POST");
    let (status, body) = tester_request_as(&whip, Some("t0ken"), "GET", "/config", "application/json", "").await;
    assert_eq!(status, 200, "{body}");
    let config: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(config["ICETransportPolicy"], "relay", "{config}");
    assert_eq!(config["ICEServers"], serde_json::from_str::<serde_json::Value>(servers).unwrap(), "{config}");
    assert_eq!(config["BearerToken"], "t0ken", "the caller has it already");

    let refused = Command::new(workspace_bin("icetester"))
        .args(["--addr", "127.0.0.1:0"])
        .env("ICE_TRANSPORT_POLICY", "relay")
        .output();
    let out = tokio::time::timeout(LIMIT, refused).await.expect("the tester stops").unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs an ICE server with a turn: URI"), "{stderr}");
}
