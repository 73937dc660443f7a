//! CDS fan-out benchmarks: one update to many watchers, update storms, a stalled watcher.
//!
//! `cargo bench -p stunner-gateway-operator --bench cds_fanout` runs the full set and prints
//! the table kept in BENCHMARKS.md; under `cargo test` it runs a tiny smoke version.
//!
//! The server runs in a child process (this binary with `CDS_BENCH_ROLE=server`, or any
//! program passed in `CDS_BENCH_SERVER` that speaks the same stdin protocol, such as the Go
//! reference harness), so its CPU time and RSS are measured alone. Protocol: the server
//! prints `listening <addr>`, then for each stdin line holding a JSON array of configs it
//! publishes them all and prints `ok`.
//!
//! With `CDS_BENCH_PIN=1` the server runs on core 0 and the watchers on core 1, so the
//! server's figures are not mixed with its clients' work (Linux, `taskset` from util-linux).
//!
//! Each fan-out scenario and each connect storm is followed by its floor, measured in the same
//! run (`cds_fanout/floor.rs`): raw writes of the update's frame to as many loopback sockets,
//! and a raw accept loop answering the same upgrades.
//! A full run also writes its rows as JSON (see `benches/support/report.rs`), labelled with
//! `CDS_BENCH_LABEL` (default `ours`, or the file name of `CDS_BENCH_SERVER`).

#[path = "cds_fanout/floor.rs"]
mod floor;
#[path = "../../benches/support/report.rs"]
mod report;

use report::Report;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stunner_gateway::config::{ListenerConfig, StunnerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn main() {
    raise_fd_limit();
    let pin = pinned();
    match std::env::var("CDS_BENCH_ROLE").as_deref() {
        Ok("server") => return run_server(),
        Ok("raw-server") => return floor::run_raw_server(),
        Ok("floor-readers") => return floor::run_readers(),
        Ok(role) => panic!("unknown CDS_BENCH_ROLE {role}"),
        Err(_) if pin => pin_to_core(1),
        Err(_) => {}
    }
    let full = std::env::args().any(|a| a == "--bench");
    let mut report = Report::new("cds_fanout", json!({ "implementation": implementation(), "pinned": pin }));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let scenarios: Vec<Scenario> = if full {
            vec![
                Scenario::FanOut { watchers: 100, updates: 50 },
                Scenario::FanOut { watchers: 1_000, updates: 50 },
                Scenario::FanOut { watchers: 10_000, updates: 20 },
                Scenario::Storm { configs: 1_000 },
                Scenario::Storm { configs: 10_000 },
                Scenario::Connect { watchers: 1_000, rounds: 5 },
                Scenario::Connect { watchers: 10_000, rounds: 3 },
                Scenario::Stalled { watchers: 1_000, stalled: 0, updates: 60 },
                Scenario::Stalled { watchers: 1_000, stalled: 1, updates: 60 },
            ]
        } else {
            vec![
                Scenario::FanOut { watchers: 10, updates: 3 },
                Scenario::Storm { configs: 20 },
                Scenario::Connect { watchers: 10, rounds: 2 },
            ]
        };
        // CDS_BENCH_ONLY=<text>: only the scenarios whose name contains it.
        let only = std::env::var("CDS_BENCH_ONLY").unwrap_or_default();
        let scenarios: Vec<Scenario> = scenarios.into_iter().filter(|s| s.name().contains(&only)).collect();
        println!("| scenario | last watcher (p50 / p99 / max) | all watchers p99 | server CPU per message | server RSS per idle watcher |");
        println!("|---|---|---|---|---|");
        for s in scenarios {
            s.run(&mut report).await;
        }
    });
}

#[derive(Debug, Clone, Copy)]
enum Scenario {
    /// `updates` changes of one config, each to `watchers` watchers of that config.
    FanOut { watchers: usize, updates: usize },
    /// `configs` configs change at once; one watcher each.
    Storm { configs: usize },
    /// Like FanOut with 64 KiB configs, plus `stalled` watchers that never read.
    Stalled { watchers: usize, stalled: usize, updates: usize },
    /// A reconnect storm: `watchers` watchers of one config connect at once to a server just
    /// started, until each holds the config; `rounds` times, each with a fresh server.
    Connect { watchers: usize, rounds: usize },
}

impl Scenario {
    fn name(&self) -> String {
        match self {
            Scenario::FanOut { watchers, .. } => format!("fan-out {watchers}"),
            Scenario::Storm { configs } => format!("storm {configs}"),
            Scenario::Stalled { watchers, stalled, .. } => format!("{stalled} stalled among {watchers}"),
            Scenario::Connect { watchers, .. } => format!("connect {watchers}"),
        }
    }

    async fn run(self, report: &mut Report) {
        if let Scenario::Connect { watchers, rounds } = self {
            connect_storm(report, &self.name(), Served::Measured, watchers, rounds).await;
            connect_storm(report, &self.name(), Served::Floor, watchers, rounds).await;
            return;
        }
        let mut server = ServerProcess::spawn(Served::Measured);
        let name = self.name();
        let (ids, per_id, updates, padding, stalled) = match self {
            Scenario::FanOut { watchers, updates } => (1, watchers, updates, 0, 0),
            Scenario::Storm { configs } => (configs, 1, 3, 0, 0),
            Scenario::Stalled { watchers, stalled, updates } => (1, watchers, updates, 64 * 1024, stalled),
            Scenario::Connect { .. } => unreachable!("measured by connect_storm"),
        };
        let ids: Vec<String> = (0..ids).map(|i| format!("bench/gw-{i}")).collect();
        server.publish(&ids.iter().map(|id| config(id, "initial", padding)).collect::<Vec<_>>());
        let rss_before = server.rss_kib();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for id in &ids {
            for _ in 0..per_id {
                tasks.push(tokio::spawn(watcher(server.addr, id.clone(), tx.clone())));
            }
        }
        let mut stalled_conns = Vec::new();
        for _ in 0..stalled {
            stalled_conns.push(stalled_watcher(server.addr, &ids[0]).await);
        }
        let total = ids.len() * per_id;
        collect(&mut rx, "initial", total).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let rss_per_watcher = (server.rss_kib().saturating_sub(rss_before)) as f64 / (total + stalled) as f64;

        let cpu_before = server.cpu_time();
        let mut last = Vec::new();
        let mut all = Vec::new();
        for u in 0..updates {
            let tag = format!("u{u}");
            let configs: Vec<_> = ids.iter().map(|id| config(id, &tag, padding)).collect();
            let body = serde_json::to_string(&configs).unwrap();
            let t0 = Instant::now();
            server.publish_raw(&body);
            let arrivals = collect(&mut rx, &tag, total).await;
            let lat: Vec<Duration> = arrivals.iter().map(|t| t.duration_since(t0)).collect();
            last.push(*lat.iter().max().unwrap());
            all.extend(lat);
        }
        let cpu = server.cpu_time() - cpu_before;
        let messages = (updates * total) as f64;
        let frame_bytes = update_frame_len(server.addr, &ids[0]).await;
        last.sort();
        all.sort();
        report.row(json!({
            "scenario": name,
            "of": "server",
            "watchers": total,
            "stalled": stalled,
            "updates": updates,
            "frame_bytes": frame_bytes,
            "last_watcher_ms": quantiles_ms(&last),
            "all_watchers_p99_ms": ms(pct(&all, 99)),
            "cpu_us_per_message": cpu.as_secs_f64() * 1e6 / messages,
            "rss_kib_per_idle_watcher": rss_per_watcher,
        }));
        println!(
            "| {name} | {} | {} | {:.1} µs | {:.1} KiB |",
            quantiles(&last),
            fmt(pct(&all, 99)),
            cpu.as_secs_f64() * 1e6 / messages,
            rss_per_watcher
        );
        for t in tasks {
            t.abort();
        }
        drop(stalled_conns);
        server.stop();
        if let Scenario::FanOut { watchers, updates } = self {
            let floor = tokio::task::spawn_blocking(move || floor::fan_out(watchers, updates, frame_bytes));
            let (mut last, cpu) = floor.await.expect("the floor ran");
            last.sort();
            let cpu_per_message = cpu.as_secs_f64() * 1e6 / messages;
            report.row(json!({
                "scenario": name,
                "of": "floor",
                "watchers": watchers,
                "updates": updates,
                "frame_bytes": frame_bytes,
                "last_watcher_ms": quantiles_ms(&last),
                "cpu_us_per_message": cpu_per_message,
            }));
            println!(
                "| floor: {name} ({frame_bytes} B raw writes) | {} | – | {cpu_per_message:.1} µs | – |",
                quantiles(&last)
            );
        }
    }
}

/// A reconnect storm against the measured server or its floor: `rounds` times, a fresh server
/// holding one config and `watchers` watchers connecting to it at once; each round's time from
/// the first connect until the last watcher holds the config, and the server's CPU time per
/// connection.
async fn connect_storm(report: &mut Report, name: &str, served: Served, watchers: usize, rounds: usize) {
    let id = "bench/gw-0".to_string();
    let mut last = Vec::with_capacity(rounds);
    let mut cpu = Duration::ZERO;
    for _ in 0..rounds {
        let mut server = ServerProcess::spawn(served);
        server.publish(&[config(&id, "initial", 0)]);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (t0, cpu0) = (Instant::now(), server.cpu_time());
        let tasks: Vec<_> = (0..watchers).map(|_| tokio::spawn(watcher(server.addr, id.clone(), tx.clone()))).collect();
        let arrivals = collect(&mut rx, "initial", watchers).await;
        cpu += server.cpu_time() - cpu0;
        last.push(arrivals.iter().max().unwrap().duration_since(t0));
        for t in tasks {
            t.abort();
        }
        server.stop();
    }
    last.sort();
    let of = match served {
        Served::Measured => "server",
        Served::Floor => "floor",
    };
    let cpu_per_connection = cpu.as_secs_f64() * 1e6 / (rounds * watchers) as f64;
    report.row(json!({
        "scenario": name,
        "of": of,
        "watchers": watchers,
        "rounds": rounds,
        "last_watcher_ms": quantiles_ms(&last),
        "cpu_us_per_connection": cpu_per_connection,
    }));
    let label = match served {
        Served::Measured => name.to_string(),
        Served::Floor => format!("floor: {name} (raw accept loop)"),
    };
    println!("| {label} | {} | – | {cpu_per_connection:.1} µs per connection | – |", quantiles(&last));
}

/// What the report calls the server measured.
fn implementation() -> String {
    match (std::env::var("CDS_BENCH_LABEL"), std::env::var("CDS_BENCH_SERVER")) {
        (Ok(label), _) if !label.is_empty() => label,
        (_, Ok(program)) => {
            std::path::Path::new(&program).file_name().map_or(program.clone(), |f| f.to_string_lossy().into_owned())
        }
        _ => "ours".into(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The size on the wire of the update frame the server sends: the first text frame a fresh
/// watcher of `id` receives (the latest update, so of the same size as the others).
async fn update_frame_len(addr: SocketAddr, id: &str) -> usize {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(upgrade_request(addr, id).as_bytes()).await.unwrap();
    let mut buf = Vec::with_capacity(4096);
    let read = async {
        loop {
            assert!(s.read_buf(&mut buf).await.unwrap() > 0, "the server closed before sending a config");
            let Some(end) = find(&buf, b"\r\n\r\n") else { continue };
            let mut at = end + 4;
            while let Some((_, opcode, payload)) = frame(&buf[at..]) {
                if opcode == 1 {
                    return payload.end;
                }
                at += payload.end;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), read).await.expect("a config within 30 s")
}

/// p50, p99 and max of sorted latencies, in ms, for the report.
fn quantiles_ms(sorted: &[Duration]) -> serde_json::Value {
    json!({ "p50": ms(pct(sorted, 50)), "p99": ms(pct(sorted, 99)), "max": ms(*sorted.last().unwrap()) })
}

/// p50 / p99 / max of sorted latencies, for the printed table.
fn quantiles(sorted: &[Duration]) -> String {
    format!("{} / {} / {}", fmt(pct(sorted, 50)), fmt(pct(sorted, 99)), fmt(*sorted.last().unwrap()))
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted[((sorted.len() * p).div_ceil(100)).saturating_sub(1).min(sorted.len() - 1)]
}

fn fmt(d: Duration) -> String {
    if d >= Duration::from_millis(10) {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

fn config(id: &str, tag: &str, padding: usize) -> StunnerConfig {
    let mut c = StunnerConfig::zero(id);
    c.auth.realm = tag.into();
    c.admin.loglevel = "all:INFO".into();
    c.listeners.push(ListenerConfig {
        name: format!("{id}/udp"),
        protocol: "TURN-UDP".into(),
        addr: "$STUNNER_ADDR".into(),
        port: 3478,
        routes: vec!["bench/route".into()],
        ..Default::default()
    });
    if padding > 0 {
        c.auth.credentials.insert("padding".into(), "p".repeat(padding));
    }
    c
}

/// Waits until `count` watchers reported `tag`; returns their arrival times.
async fn collect(rx: &mut mpsc::UnboundedReceiver<(String, Instant)>, tag: &str, count: usize) -> Vec<Instant> {
    let mut got = Vec::with_capacity(count);
    let deadline = tokio::time::sleep(Duration::from_secs(120));
    tokio::pin!(deadline);
    while got.len() < count {
        tokio::select! {
            m = rx.recv() => {
                let (t, at) = m.expect("watchers alive");
                if t == tag {
                    got.push(at);
                }
            }
            _ = &mut deadline => panic!("only {} of {count} watchers got {tag}", got.len()),
        }
    }
    got
}

/// A watcher that reports the realm tag of every config it receives. It reads raw WebSocket
/// frames instead of using a WebSocket library: the clients share this machine with the
/// server, so the less each costs, the more the latencies measure the server and not them.
async fn watcher(addr: SocketAddr, id: String, tx: mpsc::UnboundedSender<(String, Instant)>) {
    let mut s = loop {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => break s,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    s.write_all(upgrade_request(addr, &id).as_bytes()).await.unwrap();
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut message: Vec<u8> = Vec::new();
    let mut upgraded = false;
    loop {
        if s.read_buf(&mut buf).await.map_or(true, |n| n == 0) {
            return;
        }
        if !upgraded {
            let Some(end) = find(&buf, b"\r\n\r\n") else { continue };
            assert!(buf.starts_with(b"HTTP/1.1 101"), "upgrade refused: {}", String::from_utf8_lossy(&buf));
            buf.drain(..end + 4);
            upgraded = true;
        }
        let mut used = 0;
        while let Some((fin, opcode, payload)) = frame(&buf[used..]) {
            let payload = used + payload.start..used + payload.end;
            used = payload.end;
            match opcode {
                0 | 1 => message.extend_from_slice(&buf[payload]),
                8 => return,
                _ => continue, // Pings: the runs are shorter than the server's ping period.
            }
            if fin {
                let at = Instant::now();
                let tag = find(&message, b"\"realm\":\"").and_then(|i| {
                    let rest = &message[i + 9..];
                    rest.iter().position(|&b| b == b'"').map(|e| String::from_utf8_lossy(&rest[..e]).into_owned())
                });
                message.clear();
                if tx.send((tag.unwrap_or_default(), at)).is_err() {
                    return;
                }
            }
        }
        buf.drain(..used);
    }
}

/// One complete server frame at the start of `buf`: FIN, opcode and the payload's range.
fn frame(buf: &[u8]) -> Option<(bool, u8, std::ops::Range<usize>)> {
    let (&b0, &b1) = (buf.first()?, buf.get(1)?);
    let (header, len) = match b1 & 0x7f {
        126 => (4, u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?) as usize),
        127 => (10, u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?) as usize),
        n => (2, n as usize),
    };
    (buf.len() >= header + len).then_some((b0 & 0x80 != 0, b0 & 0x0f, header..header + len))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn upgrade_request(addr: SocketAddr, id: &str) -> String {
    format!(
        "GET /api/v1/configs/{id}?watch=true HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    )
}

/// Completes a WebSocket handshake and then never reads again.
async fn stalled_watcher(addr: SocketAddr, id: &str) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(upgrade_request(addr, id).as_bytes()).await.unwrap();
    s
}

struct ServerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    addr: SocketAddr,
}

/// Which server a scenario runs against.
#[derive(Debug, Clone, Copy)]
enum Served {
    /// Ours, or the program in `CDS_BENCH_SERVER`.
    Measured,
    /// The connect storm's floor (`floor::run_raw_server`).
    Floor,
}

impl ServerProcess {
    fn spawn(served: Served) -> Self {
        let (program, role) = match (served, std::env::var("CDS_BENCH_SERVER")) {
            (Served::Measured, Ok(program)) => (program.into(), "server"),
            (Served::Measured, Err(_)) => (std::env::current_exe().unwrap(), "server"),
            (Served::Floor, _) => (std::env::current_exe().unwrap(), "raw-server"),
        };
        let mut cmd = if pinned() {
            let mut c = Command::new("taskset");
            c.arg("-c").arg("0").arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.env("CDS_BENCH_ROLE", role);
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("server process");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line.trim().strip_prefix("listening ").expect("listening line").parse().unwrap();
        ServerProcess { child, stdin, stdout, addr }
    }

    fn publish(&mut self, configs: &[StunnerConfig]) {
        self.publish_raw(&serde_json::to_string(configs).unwrap());
    }

    fn publish_raw(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        let mut ack = String::new();
        self.stdout.read_line(&mut ack).unwrap();
        assert_eq!(ack.trim(), "ok");
    }

    fn proc_file(&self, name: &str) -> String {
        std::fs::read_to_string(format!("/proc/{}/{name}", self.child.id())).unwrap()
    }

    fn rss_kib(&self) -> u64 {
        let status = self.proc_file("status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// User + system CPU time of the server process.
    #[allow(unsafe_code)] // libc calls without a safe wrapper in std (see the SAFETY comments)
    fn cpu_time(&self) -> Duration {
        let stat = self.proc_file("stat");
        let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_secs_f64(ticks as f64 / hz as f64)
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server role: our CDS on loopback, configs published from stdin.
fn run_server() {
    use stunner_gateway_cds::{CdsMetrics, ConfigStore, ServerSettings, serve, session};
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
        // Bound as the daemon binds its CDS port (its accept backlog).
        let listener = stunner_gateway_operator::admin::bind(([127, 0, 0, 1], 0).into()).unwrap();
        println!("listening {}", listener.local_addr().unwrap());
        let settings = ServerSettings {
            max_connections: 100_000,
            session: session::Settings { write_timeout: Duration::from_secs(1), ..Default::default() },
            ..Default::default()
        };
        tokio::spawn(serve(listener, store.clone(), settings, axum::Router::new(), Default::default()));
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if tx.send(line.unwrap()).is_err() {
                    break;
                }
            }
        });
        let mut out = std::io::stdout();
        while let Some(line) = rx.recv().await {
            let configs: Vec<StunnerConfig> = serde_json::from_str(&line).unwrap();
            for c in configs {
                store.upsert(c);
            }
            writeln!(out, "ok").unwrap();
            out.flush().unwrap();
        }
    });
}

/// `CDS_BENCH_PIN=1`: servers (and the floors' writers) on core 0, clients on core 1.
fn pinned() -> bool {
    std::env::var("CDS_BENCH_PIN").as_deref() == Ok("1")
}

/// Runs the calling thread (and the threads and processes it starts later) on one core only.
#[allow(unsafe_code)] // libc calls without a safe wrapper in std (see the SAFETY comments)
fn pin_to_core(core: usize) {
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[allow(unsafe_code)] // libc calls without a safe wrapper in std (see the SAFETY comments)
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}
