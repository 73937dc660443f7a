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
//! Each fan-out scenario is followed by its floor, measured in the same run: the same number of
//! frames of the update's size written without blocking to as many loopback TCP sockets from
//! one thread (on core 0 when pinned), no WebSocket and no server: what the kernel alone costs.
//! A full run also writes its rows as JSON (see `benches/support/report.rs`), labelled with
//! `CDS_BENCH_LABEL` (default `ours`, or the file name of `CDS_BENCH_SERVER`).

#[path = "../../benches/support/report.rs"]
mod report;

use report::Report;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stunner_gateway::config::{ListenerConfig, StunnerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

fn main() {
    raise_fd_limit();
    let pin = std::env::var("CDS_BENCH_PIN").as_deref() == Ok("1");
    if pin && std::env::var("CDS_BENCH_ROLE").is_err() {
        pin_to_core(1);
    }
    if std::env::var("CDS_BENCH_ROLE").as_deref() == Ok("server") {
        return run_server();
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
                Scenario::Stalled { watchers: 1_000, stalled: 0, updates: 60 },
                Scenario::Stalled { watchers: 1_000, stalled: 1, updates: 60 },
            ]
        } else {
            vec![Scenario::FanOut { watchers: 10, updates: 3 }, Scenario::Storm { configs: 20 }]
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
}

impl Scenario {
    fn name(&self) -> String {
        match self {
            Scenario::FanOut { watchers, .. } => format!("fan-out {watchers}"),
            Scenario::Storm { configs } => format!("storm {configs}"),
            Scenario::Stalled { watchers, stalled, .. } => format!("{stalled} stalled among {watchers}"),
        }
    }

    async fn run(self, report: &mut Report) {
        let mut server = ServerProcess::spawn();
        let name = self.name();
        let (ids, per_id, updates, padding, stalled) = match self {
            Scenario::FanOut { watchers, updates } => (1, watchers, updates, 0, 0),
            Scenario::Storm { configs } => (configs, 1, 3, 0, 0),
            Scenario::Stalled { watchers, stalled, updates } => (1, watchers, updates, 64 * 1024, stalled),
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
            "last_watcher_ms": { "p50": ms(pct(&last, 50)), "p99": ms(pct(&last, 99)), "max": ms(*last.last().unwrap()) },
            "all_watchers_p99_ms": ms(pct(&all, 99)),
            "cpu_us_per_message": cpu.as_secs_f64() * 1e6 / messages,
            "rss_kib_per_idle_watcher": rss_per_watcher,
        }));
        println!(
            "| {name} | {} / {} / {} | {} | {:.1} µs | {:.1} KiB |",
            fmt(pct(&last, 50)),
            fmt(pct(&last, 99)),
            fmt(*last.last().unwrap()),
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
            let (mut last, cpu) = floor(watchers, updates, frame_bytes).await;
            last.sort();
            let cpu_per_message = cpu.as_secs_f64() * 1e6 / messages;
            report.row(json!({
                "scenario": name,
                "of": "floor",
                "watchers": watchers,
                "updates": updates,
                "frame_bytes": frame_bytes,
                "last_watcher_ms": { "p50": ms(pct(&last, 50)), "p99": ms(pct(&last, 99)), "max": ms(*last.last().unwrap()) },
                "cpu_us_per_message": cpu_per_message,
            }));
            println!(
                "| floor: {name} ({frame_bytes} B raw writes) | {} / {} / {} | – | {cpu_per_message:.1} µs | – |",
                fmt(pct(&last, 50)),
                fmt(pct(&last, 99)),
                fmt(*last.last().unwrap()),
            );
        }
    }
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

/// The fan-out's floor: `updates` rounds of one `frame_len` byte frame written without blocking
/// to `watchers` loopback TCP sockets from one thread (on core 0 with `CDS_BENCH_PIN=1`, where
/// the server runs), readers on the other end (this runtime) taking every byte before the next
/// round, as the watchers do. Returns each round's time until the last socket was written and
/// the writing thread's CPU time over all rounds.
async fn floor(watchers: usize, updates: usize, frame_len: usize) -> (Vec<Duration>, Duration) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::with_capacity(watchers);
    let mut readers = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (server_side, _) = listener.accept().unwrap();
        server_side.set_nonblocking(true).unwrap();
        server_side.set_nodelay(true).unwrap();
        writers.push(server_side);
        let received = received.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = client.read(&mut buf).await {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
    }
    let (done, result) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        if std::env::var("CDS_BENCH_PIN").as_deref() == Ok("1") {
            pin_to_core(0);
        }
        let frame = vec![b'x'; frame_len];
        let mut rounds = Vec::with_capacity(updates);
        let mut cpu = Duration::ZERO;
        for round in 1..=updates {
            let (t0, cpu0) = (Instant::now(), thread_cpu_time());
            let mut pending: Vec<(usize, usize)> = (0..writers.len()).map(|i| (i, 0)).collect();
            while !pending.is_empty() {
                assert!(t0.elapsed() < Duration::from_secs(120), "the floor's writes stalled");
                pending.retain_mut(|(i, written)| {
                    while *written < frame_len {
                        match std::io::Write::write(&mut writers[*i], &frame[*written..]) {
                            Ok(n) => *written += n,
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
                            Err(e) => panic!("floor write: {e}"),
                        }
                    }
                    false
                });
            }
            rounds.push(t0.elapsed());
            cpu += thread_cpu_time() - cpu0;
            let expected = (round * writers.len() * frame_len) as u64;
            let deadline = Instant::now() + Duration::from_secs(120);
            while received.load(Ordering::Relaxed) < expected {
                assert!(Instant::now() < deadline, "the floor's readers stalled");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let _ = done.send((rounds, cpu));
    });
    let result = result.await.expect("the floor's writer finished");
    for r in readers {
        r.abort();
    }
    result
}

/// CPU time of the calling thread.
#[allow(unsafe_code)] // libc calls without a safe wrapper in std (see the SAFETY comments)
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the duration of the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
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

impl ServerProcess {
    fn spawn() -> Self {
        let program = match std::env::var("CDS_BENCH_SERVER") {
            Ok(program) => program.into(),
            Err(_) => std::env::current_exe().unwrap(),
        };
        let mut cmd = if std::env::var("CDS_BENCH_PIN").as_deref() == Ok("1") {
            let mut c = Command::new("taskset");
            c.arg("-c").arg("0").arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.env("CDS_BENCH_ROLE", "server");
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
    use stunner_gateway_operator::cds::{CdsMetrics, ConfigStore, ServerSettings, serve, session};
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Arc::new(ConfigStore::new(CdsMetrics::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
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

/// Runs this process on one core only.
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
