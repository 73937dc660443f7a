//! `cds-loadgen` end to end: it spawns the real operator binary (built next to it by
//! `cargo test --workspace`), drives updates through manifest files and counts receipts.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn loadgen() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_cds-loadgen"));
    cmd.kill_on_drop(true);
    cmd
}

/// The daemon binary, next to ours in the target directory.
fn operator() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_cds-loadgen")).with_file_name("stunner-gateway-operator");
    assert!(
        bin.exists(),
        "{} is missing: run the tests with --workspace (scripts/test does), or build it first",
        bin.display()
    );
    bin
}

async fn run(cmd: &mut tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(120), cmd.output()).await.expect("cds-loadgen finishes").unwrap()
}

#[tokio::test]
async fn smoke_run_over_each_transport() {
    for transport in ["ws", "grpc"] {
        let plot = std::env::temp_dir().join(format!("cds-loadgen-test-{transport}-{}.svg", std::process::id()));
        let out = run(loadgen()
            .args(["--watchers", "20", "--updates", "3", "--gateways", "2", "--transport", transport, "--json"])
            .args(["--duration", "90", "--plot"])
            .arg(&plot)
            .arg("--operator-bin")
            .arg(operator()))
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{transport}: exit {:?}: {stderr}", out.status);
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["transport"], if transport == "ws" { "websocket" } else { "grpc" });
        assert_eq!(summary["framesReceived"], 60, "{summary}");
        assert_eq!(summary["framesExpected"], 60, "{summary}");
        assert_eq!(summary["errors"], 0, "{summary}");
        assert_eq!(summary["timedOut"], false);
        for key in ["p50", "p99", "max"] {
            assert!(summary["latencyMs"][key].as_f64().unwrap() > 0.0, "{summary}");
        }
        assert!(summary["connectRate"].as_f64().unwrap() > 0.0);

        let svg = std::fs::read_to_string(&plot).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the plot is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let count = |tag: &str| doc.descendants().filter(|n| n.tag_name().name() == tag).count();
        assert!(count("rect") >= 2, "background and at least one bar");
        assert!(count("path") >= 1);
        std::fs::remove_file(&plot).unwrap();
    }
}

#[tokio::test]
async fn text_summary_and_against_a_running_daemon() {
    // A daemon the load generator did not start: its directory and address are given.
    let dir = std::env::temp_dir().join(format!("cds-loadgen-test-external-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut daemon = tokio::process::Command::new(operator())
        .arg("--standalone")
        .arg(&dir)
        .args(["--config-discovery-address", "127.0.0.1:0", "--metrics-bind-address", "0"])
        .args(["--health-probe-bind-address", "0", "--throttle-timeout", "10ms"])
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // An empty directory renders nothing, but it is a complete first sync: the daemon serves.
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(daemon.stderr.take().unwrap()).lines();
    let addr = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("serving config discovery") {
                return line.split("address=").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
            }
        }
        panic!("the daemon exited");
    })
    .await
    .expect("the daemon serves");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let out =
        run(loadgen().args(["-n", "5", "-k", "2", "--duration", "60", "--server", &addr, "--manifests"]).arg(&dir))
            .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("  frames:    10 received of 10 expected\n"), "{stdout}");
    assert!(stdout.contains("  errors:    0 "), "{stdout}");
    assert!(!stdout.contains("RSS"), "no process to measure: {stdout}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "its manifest file is removed");
    daemon.kill().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn refuses_remote_servers_and_unbounded_runs() {
    let out = run(loadgen().args(["--manifests", "/nonexistent", "--server", "192.0.2.1:13478"])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("not a loopback address") && stderr.contains("--allow-remote"), "{stderr}");

    let out = run(loadgen().args(["--watchers", "20001"])).await;
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("20001"));

    let out = run(loadgen().args(["--operator-bin", "/nonexistent/operator"])).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[tokio::test]
async fn restart_storm_over_gateways_with_backends() {
    let out = run(loadgen()
        .args(["--watchers", "30", "--updates", "2", "--gateways", "3", "--endpoints", "4", "--restart", "--json"])
        .args(["--duration", "90", "--operator-bin"])
        .arg(operator()))
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["endpoints"], 4, "{summary}");
    assert_eq!(summary["framesReceived"], 60, "{summary}");
    assert_eq!(summary["zeroConfigs"], 0, "{summary}");
    let restart = &summary["restart"];
    assert_eq!(restart["watchersBack"], 30, "every watcher holds the update written while it was down: {summary}");
    assert!(restart["servingMs"].as_f64().unwrap() > 0.0, "{summary}");
    assert!(restart["lastWatcherMs"].as_f64().unwrap() >= restart["servingMs"].as_f64().unwrap(), "{summary}");
    assert!(restart["reconnectFailures"].as_u64().unwrap() >= 30, "every watcher lost its connection: {summary}");
    assert!(summary["serverRssKibPeak"].as_u64().unwrap() > 0, "{summary}");
}
