//! `cds-loadgen`: fan-out load generator for the config discovery service.
//!
//! It runs the real operator in standalone mode (or uses one already running), writes a
//! manifest file with G Gateways whose shared GatewayConfig realm carries a sequence number,
//! opens N watchers (the client library's reconnecting watch, over WebSocket or gRPC) spread
//! over the G configs, then rewrites the file K times. Each watcher reads the sequence number
//! back from the realm of every config it receives, so each receipt is matched to the write
//! that caused it: latency is measured from that write (publish) to the receipt. Updates go
//! one at a time: the next file is written once every watcher has the previous one, so no
//! update is conflated with the next. With `--restart` it then kills the operator, writes one
//! more update while it is down and starts it again on the same address: the reconnect storm
//! of every watcher at once, timed until each holds that update. A watcher that is ever served
//! a zero config (what a deleted config looks like) makes the run fail.
//!
//! Bounded on every axis: watchers, updates and Gateways are capped, `--duration` ends the
//! run whatever its state, and every wait is inside it. Exit status: 0 for a clean run (every
//! frame received, no error), 1 otherwise.

mod cli;
mod daemon;
mod plot;
mod stats;

use anyhow::{Context, bail};
use clap::Parser;
use cli::Args;
use daemon::{Daemon, Shape};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stats::{Restart, Samples, Summary};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use stunner_gateway::cds::ConfigId;
use stunner_gateway_client::cds::{CdsClient, ConfigScope, Transport, WatchEvent, WatchSettings};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

/// At most this many receipts are kept for percentiles (watchers × updates).
const MAX_FRAMES: u64 = 10_000_000;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.watchers * args.updates > MAX_FRAMES {
        return fail(&format!("--watchers × --updates is at most {MAX_FRAMES}"));
    }
    raise_fd_limit(args.watchers);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(run(&args));
    // Drops every watcher still running (their tasks hold the connections).
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(summary) => {
            let out = if args.json { serde_json::to_string(&summary).unwrap() + "\n" } else { summary.text() };
            let _ = std::io::stdout().write_all(out.as_bytes());
            if summary.clean() {
                ExitCode::SUCCESS
            } else {
                let _ = writeln!(
                    std::io::stderr(),
                    "cds-loadgen: the run was not clean (missing frames, errors or timed out)"
                );
                ExitCode::FAILURE
            }
        }
        // The whole chain, `context: cause`.
        Err(e) => fail(&format!("{e:#}")),
    }
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::FAILURE
}

/// What a watcher tells the collector.
enum Report {
    /// A watcher received the config of update `seq`.
    Got {
        seq: u64,
        at: Instant,
    },
    /// A watcher was served the zero config of its id: its Gateway looked deleted.
    Zero,
    ConnectFailure,
    Disconnect,
    Rejected,
}

async fn run(args: &Args) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let deadline = started + args.duration;
    let transport = args.transport;
    let shape = Shape { gateways: args.gateways, endpoints: args.endpoints };

    // The operator.
    let mut daemon = match &args.manifests {
        Some(dir) => {
            let server = args.server.clone().expect("clap requires --server with --manifests");
            daemon::check_loopback(&server, args.allow_remote)?;
            Daemon::external(dir, server, shape)?
        }
        None => {
            if let Some(server) = &args.server {
                bail!("--server {server} needs --manifests: the spawned operator picks its own port");
            }
            let bin = match &args.operator_bin {
                Some(bin) => bin.clone(),
                None => std::env::current_exe()
                    .context("cannot find this program's path")?
                    .with_file_name("stunner-gateway-operator"),
            };
            let max_connections = args.watchers as usize + 64;
            let limit = deadline.saturating_duration_since(Instant::now());
            tokio::task::block_in_place(|| Daemon::spawn(&bin, shape, &args.operator_throttle, max_connections, limit))?
        }
    };
    let result = drive(args, transport, &mut daemon, started, deadline).await;
    tokio::task::block_in_place(|| daemon.stop());
    result
}

async fn drive(
    args: &Args,
    transport: Transport,
    daemon: &mut Daemon,
    started: Instant,
    deadline: Instant,
) -> anyhow::Result<Summary> {
    let client = CdsClient::new(&daemon.addr)?
        .with_transport(transport)
        .with_watch_settings(WatchSettings { client_name: "cds-loadgen".into(), ..Default::default() });
    // Ready when every Gateway's initial config is served.
    let rest = CdsClient::new(&daemon.addr)?;
    let scope = ConfigScope::Namespace(daemon::NAMESPACE.into());
    let ready = daemon::wait_until(deadline.saturating_duration_since(Instant::now()), async || {
        rest.configs(&scope).await.is_ok_and(|configs| {
            configs.len() as u64 == args.gateways
                && configs.iter().all(|c| daemon::seq_of_realm(&c.auth.realm) == Some(0))
        })
    })
    .await;
    if !ready {
        bail!(
            "the server at {} did not serve the {} initial configs of namespace {} in time",
            daemon.addr,
            args.gateways,
            daemon::NAMESPACE
        );
    }
    let rss = |pid: Option<u32>| pid.and_then(daemon::rss_kib);
    let rss_before = rss(daemon.pid());

    let n = args.watchers;
    let bar = progress(n, "connecting");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(args.connect_concurrency as usize));
    let mut tasks = tokio::task::JoinSet::new();
    let ramp_start = Instant::now();
    for idx in 0..n {
        let id = ConfigId::new(daemon::NAMESPACE, daemon::gateway(idx % args.gateways));
        let scope = ConfigScope::Gateway { id, node: None };
        tasks.spawn(watcher(client.clone(), scope, tx.clone(), gate.clone()));
    }
    drop(tx);

    let mut s = Summary {
        transport: transport.to_string(),
        server: daemon.addr.clone(),
        watchers: n,
        gateways: args.gateways,
        endpoints: args.endpoints,
        updates: args.updates,
        connect_seconds: 0.0,
        connect_rate: 0.0,
        latency_ms: None,
        spread_ms: None,
        frames_received: 0,
        frames_expected: n * args.updates,
        connect_failures: 0,
        disconnects: 0,
        rejected: 0,
        errors: 0,
        zero_configs: 0,
        server_rss_kib_before: rss_before,
        server_rss_kib_after: None,
        server_rss_kib_per_watcher: None,
        server_rss_kib_peak: None,
        restart: None,
        timed_out: false,
        elapsed_seconds: 0.0,
    };
    // Per update: when it was written, its first receipt, how many watchers have it. The
    // restart writes one update more.
    let last = args.updates + u64::from(args.restart);
    let k = last as usize;
    let mut written: Vec<Option<Instant>> = vec![None; k + 1];
    let mut first: Vec<Option<Instant>> = vec![None; k + 1];
    let mut have: Vec<u64> = vec![0; k + 1];
    let mut latency = Samples::default();
    let mut spread = Samples::default();

    // One step: wait until every watcher has update `seq` (0: the ramp-up).
    for seq in 0..=args.updates {
        if seq > 0 {
            if seq == 1 {
                s.connect_seconds = ramp_start.elapsed().as_secs_f64();
                s.connect_rate = n as f64 / s.connect_seconds.max(1e-9);
                bar.finish_and_clear();
                // Let the server settle before reading its memory.
                tokio::time::sleep(Duration::from_millis(300)).await;
                s.server_rss_kib_after = rss(daemon.pid());
                if let (Some(b), Some(a)) = (s.server_rss_kib_before, s.server_rss_kib_after) {
                    s.server_rss_kib_per_watcher = Some(((a as f64 - b as f64) / n as f64 * 10.0).round() / 10.0);
                }
                bar.reset();
                bar.set_length(n * args.updates);
                bar.set_message("updates");
            }
            written[seq as usize] = Some(Instant::now());
            daemon.write(seq)?;
        }
        while have[seq as usize] < n {
            let report = tokio::select! {
                r = rx.recv() => r,
                _ = tokio::time::sleep_until(deadline) => {
                    s.timed_out = true;
                    break;
                }
            };
            let Some(report) = report else { break };
            match report {
                Report::Got { seq: got, at } if got <= args.updates => {
                    let g = got as usize;
                    // A watcher reports each update at most once (the library drops resends);
                    // an update it skipped (it was away) is not counted for it.
                    have[g] += 1;
                    if got == 0 {
                        bar.inc(1);
                        continue;
                    }
                    s.frames_received += 1;
                    bar.inc(1);
                    if let Some(t0) = written[g] {
                        latency.push(at.saturating_duration_since(t0));
                    }
                    let f = *first[g].get_or_insert(at);
                    spread.push(at.saturating_duration_since(f));
                }
                Report::Got { .. } => {}
                Report::Zero => s.zero_configs += 1,
                Report::ConnectFailure => s.connect_failures += 1,
                Report::Disconnect => s.disconnects += 1,
                Report::Rejected => s.rejected += 1,
            }
        }
        if s.timed_out {
            break;
        }
    }
    s.server_rss_kib_peak = daemon.pid().and_then(daemon::peak_rss_kib);
    if args.restart && !s.timed_out {
        let seq = last;
        let restarted = Instant::now();
        let limit = deadline.saturating_duration_since(restarted);
        tokio::task::block_in_place(|| daemon.restart(seq, limit))?;
        let mut r = Restart { serving_ms: ms_since(restarted), ..Restart::default() };
        let mut back = Samples::default();
        while have[k] < n {
            let report = tokio::select! {
                r = rx.recv() => r,
                _ = tokio::time::sleep_until(deadline) => {
                    s.timed_out = true;
                    break;
                }
            };
            match report {
                Some(Report::Got { seq: got, at }) if got == seq => {
                    have[k] += 1;
                    back.push(at.saturating_duration_since(restarted));
                }
                Some(Report::Got { .. }) => {}
                Some(Report::Zero) => s.zero_configs += 1,
                // Every watcher loses its connection, and fails to connect while the operator
                // is down: the storm itself, not an error.
                Some(Report::ConnectFailure | Report::Disconnect) => r.reconnect_failures += 1,
                Some(Report::Rejected) => s.rejected += 1,
                None => break,
            }
        }
        r.watchers_back = have[k];
        r.last_watcher_ms = ms_since(restarted);
        r.latency_ms = back.summary();
        s.restart = Some(r);
    }
    bar.finish_and_clear();
    if s.connect_seconds == 0.0 {
        s.connect_seconds = ramp_start.elapsed().as_secs_f64();
        s.connect_rate = have[0] as f64 / s.connect_seconds.max(1e-9);
    }
    // Errors that arrived after the last receipt still count.
    while let Ok(report) = rx.try_recv() {
        match report {
            Report::Zero => s.zero_configs += 1,
            Report::ConnectFailure => s.connect_failures += 1,
            Report::Disconnect => s.disconnects += 1,
            Report::Rejected => s.rejected += 1,
            Report::Got { .. } => {}
        }
    }
    tasks.abort_all();
    s.errors = s.connect_failures + s.disconnects + s.rejected + s.zero_configs;
    s.latency_ms = latency.summary();
    s.spread_ms = spread.summary();
    s.elapsed_seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    if let Some(path) = &args.plot {
        let title = format!(
            "CDS fan-out: {} {} watchers, {} gateway(s), {} updates ({} receipts)",
            n,
            transport,
            args.gateways,
            args.updates,
            latency.len()
        );
        std::fs::write(path, plot::svg(latency.sorted(), &title))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(s)
}

/// One watcher: the library's reconnecting watch of one config, reporting each config's
/// sequence number. It holds a connection slot from `gate` until its first config arrives,
/// which paces the ramp-up.
async fn watcher(client: CdsClient, scope: ConfigScope, tx: mpsc::UnboundedSender<Report>, gate: Arc<Semaphore>) {
    let mut slot = gate.acquire_owned().await.ok();
    let mut watch = client.watch(&scope);
    let mut connected = false;
    loop {
        let report = match watch.next().await {
            WatchEvent::Config(config) => {
                let at = Instant::now();
                connected = true;
                slot = None;
                match daemon::seq_of_realm(&config.auth.realm) {
                    Some(seq) => Report::Got { seq, at },
                    None if config.is_deleted() => Report::Zero,
                    None => continue,
                }
            }
            WatchEvent::Rejected { .. } => Report::Rejected,
            WatchEvent::Disconnected { .. } if connected => Report::Disconnect,
            WatchEvent::Disconnected { .. } => Report::ConnectFailure,
        };
        if tx.send(report).is_err() {
            drop(slot);
            return;
        }
    }
}

/// Milliseconds since `t0`, to 0.1 ms.
fn ms_since(t0: Instant) -> f64 {
    (t0.elapsed().as_secs_f64() * 1e4).round() / 10.0
}

/// A progress bar on stderr, only when stderr is a terminal.
fn progress(len: u64, message: &'static str) -> ProgressBar {
    let target =
        if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let bar = ProgressBar::with_draw_target(Some(len), target);
    bar.set_style(
        ProgressStyle::with_template("{msg:>10} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})")
            .expect("a valid template"),
    );
    bar.set_message(message);
    bar
}

/// Each watcher is a socket here and one in a spawned operator (which inherits the limit):
/// raise the soft limit of open files to the hard limit when that is needed.
#[allow(unsafe_code)] // setrlimit(2): std cannot raise the limit of open files
fn raise_fd_limit(watchers: u64) {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        let want = (watchers + 256).min(lim.rlim_max);
        if lim.rlim_cur < want {
            lim.rlim_cur = want;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
