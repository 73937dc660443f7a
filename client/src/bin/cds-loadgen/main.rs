//! `cds-loadgen`: fan-out load generator for the config discovery service.
//!
//! It runs the real operator in standalone mode (or uses one already running), writes a
//! manifest file with G Gateways whose shared GatewayConfig realm carries a sequence number,
//! opens N watchers (the client library's reconnecting watch, over WebSocket or gRPC, with
//! stunnerd's timers: a fixed second between attempts, no jitter) spread over the G configs,
//! then rewrites the file K times. Each watcher reads the sequence number
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
mod collect;
mod daemon;
mod plot;
mod stats;

use anyhow::{Context, bail};
use clap::Parser;
use cli::Args;
use collect::{Collector, Report};
use daemon::{Daemon, Shape};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stats::Summary;
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
    // The watchers reconnect as stunnerd does (a fixed second, in lockstep): a restart brings
    // the server the storm real dataplanes bring.
    let settings = WatchSettings { client_name: "cds-loadgen".into(), ..WatchSettings::stunnerd() };
    let client = CdsClient::new(&daemon.addr)?.with_transport(transport).with_watch_settings(settings);
    wait_until_served(args, daemon, deadline).await?;
    let mut s = Summary::new(args, transport, &daemon.addr, daemon.pid().and_then(daemon::rss_kib));

    let bar = progress(args.watchers, "connecting");
    let (tx, rx) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(args.connect_concurrency as usize));
    let mut tasks = tokio::task::JoinSet::new();
    let mut collector = Collector::new(args, rx, deadline, bar);
    for idx in 0..args.watchers {
        let id = ConfigId::new(daemon::NAMESPACE, daemon::gateway(idx % args.gateways));
        let scope = ConfigScope::Gateway { id, node: None };
        tasks.spawn(watcher(client.clone(), scope, tx.clone(), gate.clone()));
    }
    drop(tx);

    collector.updates(&mut s, daemon).await?;
    s.server_rss_kib_peak = daemon.pid().and_then(daemon::peak_rss_kib);
    if args.restart && !s.timed_out {
        s.restart = Some(collector.restart(&mut s, daemon).await?);
    }
    collector.finish(&mut s);
    tasks.abort_all();
    s.elapsed_seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    if let Some(path) = &args.plot {
        let title = format!(
            "CDS fan-out: {} {} watchers, {} gateway(s), {} updates ({} receipts)",
            args.watchers,
            transport,
            args.gateways,
            args.updates,
            collector.latency.len()
        );
        std::fs::write(path, plot::svg(collector.latency.sorted(), &title))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(s)
}

/// Ready when every Gateway's initial config is served.
async fn wait_until_served(args: &Args, daemon: &Daemon, deadline: Instant) -> anyhow::Result<()> {
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
    Ok(())
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
