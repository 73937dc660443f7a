//! The daemon's log lines in each `--zap-encoder`, as a log pipeline reads them: the real
//! binary serving the quickstart manifests is asked for a config and for TURN credentials,
//! stopped, and every line it wrote is parsed. No line carries the quickstart's TURN password.

#[path = "../../tests/support/ports.rs"]
mod ports;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the quickstart's GatewayConfig holds as its password: never in a log line.
const SECRET: &str = "pass-1";

fn quickstart() -> String {
    format!("{}/../deploy/examples/quickstart", env!("CARGO_MANIFEST_DIR"))
}

/// `GET path` on `addr`: the whole answer.
fn get(addr: &str, path: &str) -> String {
    let mut http = std::net::TcpStream::connect(addr).unwrap();
    http.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    answer
}

/// Every line the daemon writes to stderr with `flags`, from start to exit: it is started, asked
/// for the quickstart config and for credentials over HTTP once it serves (`address_of` reads
/// the CDS address from a line; the credential API listens on `auth`), then stopped with SIGTERM.
fn run_daemon(flags: &[&str], address_of: fn(&str) -> Option<String>) -> Vec<String> {
    let auth = format!("127.0.0.1:{}", ports::free_ports(1)[0]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
        .args(["--standalone", &quickstart(), "--config-discovery-address", "127.0.0.1:0"])
        .args(["--auth-bind-address", &auth])
        .args(["--metrics-bind-address", "0", "--health-probe-bind-address", "0"])
        .args(flags)
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = address_of(&line) {
                let _ = tx.send(addr);
            }
            lines.push(line);
        }
        lines
    });
    let addr = rx.recv_timeout(Duration::from_secs(60)).expect("the daemon serves in time");
    let answer = get(&addr, "/api/v1/configs/stunner/udp-gateway");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(SECRET), "the config is served: {answer}");
    let answer = get(&auth, "/ice?service=turn&username=u1");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains(SECRET), "credentials are handed out: {answer}");
    // SIGTERM: the daemon logs its shutdown and exits.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    #[allow(unsafe_code)] // kill(2) on the child this test started
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the daemon did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}");
    let lines = reader.join().unwrap();
    assert!(lines.len() > 5, "{lines:?}");
    for line in &lines {
        assert!(!line.contains(SECRET), "a secret in the log: {line}");
    }
    lines
}

fn json_address(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v["msg"] == "serving config discovery").then(|| v["address"].as_str().map(String::from))?
}

/// Every line is one JSON object with zap's keys first, in zap's order.
fn assert_zap_json(lines: &[String], ts_is_number: bool) {
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let at: Vec<_> = ["{\"level\":", ",\"ts\":", ",\"logger\":", ",\"msg\":"].map(|k| line.find(k)).into();
        assert!(at[0] == Some(0) && at.iter().all(Option::is_some) && at.is_sorted(), "zap's keys: {line}");
        assert!(["debug", "info", "warn", "error"].contains(&v["level"].as_str().unwrap()), "{line}");
        assert_eq!(v["ts"].is_number(), ts_is_number, "{line}");
        assert!(v["logger"].is_string() && v["msg"].is_string(), "{line}");
    }
}

#[test]
fn json_lines_at_trace_level_with_epoch_times() {
    let lines = run_daemon(&["--zap-encoder=json", "--zap-log-level=2", "--zap-time-encoding=epoch"], json_address);
    assert_zap_json(&lines, true);
    assert!(lines.iter().any(|l| l.contains("\"level\":\"debug\"")), "trace and debug lines are written");
    assert!(lines.iter().any(|l| l.contains("\"msg\":\"shutting down\"")));
}

#[test]
fn json_lines_with_rfc3339_times_and_stack_traces() {
    let flags = ["--zap-devel=false", "--zap-stacktrace-level=info"];
    let lines = run_daemon(&flags, json_address);
    assert_zap_json(&lines, false);
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // --zap-devel=false: JSON at info; the default time encoding is RFC 3339 with nanoseconds.
        assert_ne!(v["level"], "debug", "{line}");
        let ts = v["ts"].as_str().unwrap();
        assert!(ts.len() >= 20 && &ts[10..11] == "T" && ts.ends_with('Z'), "{line}");
        assert!(v["stacktrace"].as_str().is_some_and(|s| !s.is_empty()), "info and above carry a stack: {line}");
    }
}

#[test]
fn console_lines_start_with_the_time_and_the_level() {
    let address = |line: &str| {
        line.contains("serving config discovery")
            .then(|| line.split("address=").nth(1).map(|a| a.trim().to_string()))?
    };
    let lines = run_daemon(&["--zap-encoder=console", "--zap-time-encoding=iso8601"], address);
    for line in &lines {
        // 2006-01-02T15:04:05.000Z, a space, the level.
        let (ts, rest) = line.split_at_checked(24).unwrap_or_else(|| panic!("short line: {line}"));
        assert!(ts.as_bytes()[10] == b'T' && ts.ends_with('Z') && ts[20..23].bytes().all(|b| b.is_ascii_digit()));
        let level = rest.split_whitespace().next().unwrap_or_default();
        assert!(["INFO", "WARN", "ERROR"].contains(&level), "{line}");
    }
}

#[test]
fn an_unknown_zap_value_stops_the_start() {
    for (flag, value) in [("--zap-encoder", "text"), ("--zap-log-level", "warn"), ("--zap-time-encoding", "unix")] {
        let out = Command::new(env!("CARGO_BIN_EXE_stunner-gateway-operator"))
            .args(["--standalone", &quickstart(), &format!("{flag}={value}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(flag) && err.contains(&format!("\"{value}\"")), "{err}");
    }
}
