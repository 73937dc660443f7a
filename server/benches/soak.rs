//! The soak: the operator in cluster mode on a real kube-apiserver (tests/apiserver) with N
//! Gateways (`SOAK_GATEWAYS`, default 1,000), each with a UDP and a TLS listener, a UDPRoute, a
//! Service with an EndpointSlice and a TLS Secret, and W CDS watchers (`SOAK_WATCHERS`, 200)
//! that hang up and reconnect at random while `SOAK_CHURN_OPS` (3,600: an hour of one change
//! a second) random edits are made in `SOAK_CHURN_SECONDS` (180): Gateways, routes,
//! EndpointSlices and Secrets created, changed and deleted, from `SOAK_SEED`. Then the cluster
//! is brought to a steady state of the same objects as at the start, with new values, and:
//!
//! - every watcher holds the config the operator serves for its Gateway, every Gateway's
//!   served config carries the final certificate and endpoint, and a fresh operator started on
//!   the final cluster serves the same config for every Gateway (what the churned operator
//!   built step by step is what it should render for the final state);
//! - the operator's RSS (full runs only: a tiny run's is noise), its tables (index objects and
//!   the objects they refer to, the writer's records, the CDS client table, held objects) are
//!   within 10 % of the figures of the steady state before the churn, and its RSS, file
//!   descriptors, threads and tokio tasks have not grown by more than 10 %.
//!
//! `cargo bench -p stunner-gateway-operator --bench soak`; under `cargo test` it runs 6
//! Gateways, 4 watchers and 40 edits in 3 s. Needs tests/apiserver/bin/apiserver (scripts/test
//! builds it) and the Gateway API module in the Go module cache. A full run writes its row as
//! JSON (see `benches/support/report.rs`).

#[path = "../tests/e2e/mod.rs"]
mod e2e;
#[path = "../../benches/support/report.rs"]
mod report;
#[path = "support/rng.rs"]
mod rng;
#[path = "soak/watchers.rs"]
mod watchers;
#[path = "soak/world.rs"]
mod world;

use e2e::*;
use rng::Rng;
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;
use watchers::Watchers;
use world::{Apis, NAMESPACE, Slot};

/// How far a figure may move between the two steady states.
const TOLERANCE: f64 = 0.10;

/// The run's size, from the environment (full runs) or tiny (`cargo test`).
struct Plan {
    full: bool,
    gateways: usize,
    watchers: usize,
    ops: usize,
    churn: Duration,
    seed: u64,
    /// How long the operator must stay idle to count as settled.
    quiet: Duration,
}

impl Plan {
    fn from_env() -> Plan {
        let full = std::env::args().any(|a| a == "--bench");
        let var = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
        let seed = var("SOAK_SEED", 61);
        if !full {
            let (gateways, watchers, ops, churn) = (6, 4, 40, Duration::from_secs(3));
            return Plan { full, gateways, watchers, ops, churn, seed, quiet: Duration::from_secs(2) };
        }
        Plan {
            full,
            gateways: var("SOAK_GATEWAYS", 1000).clamp(1, 5000) as usize,
            watchers: var("SOAK_WATCHERS", 200).clamp(1, 2000) as usize,
            ops: var("SOAK_CHURN_OPS", 3600).clamp(1, 100_000) as usize,
            churn: Duration::from_secs(var("SOAK_CHURN_SECONDS", 180).clamp(1, 3600)),
            seed,
            quiet: Duration::from_secs(5),
        }
    }

    /// How long a watcher stays connected while the churn runs.
    fn lifetime(&self) -> std::ops::Range<Duration> {
        if self.full {
            Duration::from_secs(2)..Duration::from_secs(20)
        } else {
            Duration::from_millis(200)..Duration::from_secs(1)
        }
    }
}

/// What the operator holds at a steady state.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Figures {
    rss_kib: u64,
    fds: u64,
    threads: u64,
    tasks: f64,
    index_objects: f64,
    index_referred_objects: f64,
    writer_records: f64,
    cds_clients: f64,
    held_objects: f64,
}

impl Figures {
    async fn of(op: &Operator, metrics: SocketAddr) -> Figures {
        let pid = op.pid();
        let gauge = |name: &'static str| metric_sum(metrics, name, "");
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the operator runs").count() as u64;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the operator runs");
        let threads = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .expect("Threads in /proc/PID/status");
        Figures {
            rss_kib: op.rss_kib(),
            fds,
            threads,
            tasks: gauge("stunner_gateway_operator_tasks ").await,
            index_objects: gauge("stunner_gateway_operator_index_objects ").await,
            index_referred_objects: gauge("stunner_gateway_operator_index_referred_objects ").await,
            writer_records: gauge("stunner_gateway_operator_writer_records ").await,
            cds_clients: gauge("stunner_gateway_operator_cds_clients{").await,
            held_objects: gauge("stunner_gateway_operator_held_objects ").await,
        }
    }

    /// The figures that moved by more than [`TOLERANCE`] from `begin` (counts that may only
    /// not grow: descriptors, threads, tasks); the RSS only when `rss` is asked for.
    fn drift(&self, begin: &Figures, rss: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut within = |name: &str, begin: f64, end: f64, may_shrink: bool| {
            let limit = begin * TOLERANCE;
            if end - begin > limit || (!may_shrink && begin - end > limit) {
                out.push(format!("{name}: {begin} at the start, {end} at the end"));
            }
        };
        if rss {
            within("RSS (KiB)", begin.rss_kib as f64, self.rss_kib as f64, true);
        }
        within("file descriptors", begin.fds as f64, self.fds as f64, true);
        within("threads", begin.threads as f64, self.threads as f64, true);
        within("tokio tasks", begin.tasks, self.tasks, true);
        within("index objects", begin.index_objects, self.index_objects, false);
        within("index referred objects", begin.index_referred_objects, self.index_referred_objects, false);
        within("writer records", begin.writer_records, self.writer_records, false);
        within("CDS clients", begin.cds_clients, self.cds_clients, false);
        within("held objects", begin.held_objects, self.held_objects, false);
        out
    }
}

/// Waits until the operator has rendered, written and pushed nothing for `quiet`.
async fn settle_operator(metrics: SocketAddr, quiet: Duration) {
    let activity = || async {
        metric_sum(metrics, "stunner_gateway_operator_render_total", "").await
            + write_attempts(metrics).await
            + metric_sum(metrics, "stunner_gateway_operator_cds_pushes_total{", "").await
    };
    let mut last = activity().await;
    let mut still_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(600);
    while still_since.elapsed() < quiet {
        assert!(Instant::now() < deadline, "the operator never settled");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = activity().await;
        if now != last {
            (last, still_since) = (now, Instant::now());
        }
    }
}

/// Every Gateway's config as `cds` serves it, once all `gateways` are served (bounded wait).
async fn served(cds: SocketAddr, gateways: usize) -> Vec<StunnerConfig> {
    let mut configs = Vec::with_capacity(gateways);
    for i in 0..gateways {
        let name = world::gateway_name(i);
        configs.push(wait_for(&format!("a config of {name}"), || cds_config(cds, NAMESPACE, &name)).await);
    }
    configs
}

/// Normalised, as a dataplane compares configs.
fn normal(config: &StunnerConfig) -> StunnerConfig {
    config.normalized().unwrap_or_else(|e| panic!("an invalid config was served: {e}"))
}

/// Whether a served config is the final state's: its TLS listener has the last certificate
/// and its cluster the last endpoint.
fn is_final(config: &StunnerConfig, i: usize) -> bool {
    let (cert, address) = (world::certificate(i, 1), world::endpoint_address(i, 1));
    config.listeners.iter().any(|l| l.cert == cert)
        && config
            .clusters
            .iter()
            .any(|c| c.endpoints.iter().any(|e| *e == address || e.starts_with(&format!("{address}/"))))
}

/// Waits until every watcher holds the config served for its Gateway; panics with the first
/// that does not after [`TIMEOUT`].
async fn wait_watchers(watchers: &mut Watchers, served: &[StunnerConfig]) {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        watchers.assert_running();
        let snapshot = watchers.snapshot();
        let behind: Vec<_> = snapshot
            .iter()
            .filter(|w| w.last.as_ref().map(normal).as_ref() != Some(&normal(&served[w.gateway])))
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} watchers do not hold their Gateway's final config; the first watches {}, holds {:?}, is served {:?}",
            behind.len(),
            snapshot.len(),
            world::gateway_name(behind[0].gateway),
            behind[0].last.as_ref().map(StunnerConfig::to_json),
            served[behind[0].gateway].to_json(),
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The operator as the soak runs it: production's render window, its metrics on `metrics`.
async fn start_operator(cluster: &Cluster, name: &str, metrics: SocketAddr) -> Operator {
    let metrics = metrics.to_string();
    cluster.operator(name, &["--metrics-bind-address", &metrics, "--throttle-timeout", "250ms"]).await
}

fn main() {
    let plan = Plan::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let Some(cluster) = Cluster::start("soak").await else { return };
        let c = &cluster.admin;
        apply_yaml(c, &namespace_yaml("stunner")).await; // the class's GatewayConfig lives there
        apply_yaml(c, &std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap())
            .await;
        apply_yaml(c, &namespace_yaml(NAMESPACE)).await;
        let apis = Apis::new(c).await;
        apis.create_services(plan.gateways).await;
        let absent = vec![Slot::absent(); plan.gateways];
        let start: Vec<Slot> = (0..plan.gateways).map(|i| Slot::steady(i, 0)).collect();
        let started = Instant::now();
        apis.write_changes(&absent, &start).await;

        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let op = start_operator(&cluster, "churned", metrics).await;
        served(op.cds, plan.gateways).await;
        let mut watchers = Watchers::start(op.cds, plan.watchers, plan.gateways, plan.seed, plan.lifetime());
        settle_operator(metrics, plan.quiet).await;
        let setup = started.elapsed();
        let begin = Figures::of(&op, metrics).await;
        println!("soak: {} Gateways set up in {:.0} s; at the start: {begin:?}", plan.gateways, setup.as_secs_f64());

        // The churn: one edit at a time (so the API server ends as the model says), paced.
        let mut rng = Rng::new(plan.seed);
        let mut world = start.clone();
        let mut pace = tokio::time::interval(plan.churn / plan.ops as u32);
        pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let churn_started = Instant::now();
        watchers.churn();
        for _ in 0..plan.ops {
            pace.tick().await;
            let (i, part) = world::churn(&mut rng, &mut world);
            apis.write(i, &world[i], part).await;
        }
        let churned = churn_started.elapsed();

        // The same objects as at the start, with the values of round 1.
        let last: Vec<Slot> = (0..plan.gateways).map(|i| Slot::steady(i, 1)).collect();
        apis.write_changes(&world, &last).await;
        watchers.settle();
        settle_operator(metrics, plan.quiet).await;
        let served_last = served(op.cds, plan.gateways).await;
        let not_final: Vec<_> = (0..plan.gateways).filter(|&i| !is_final(&served_last[i], i)).collect();
        assert!(not_final.is_empty(), "Gateways served without their final certificate or endpoint: {not_final:?}");
        wait_watchers(&mut watchers, &served_last).await;
        let end = Figures::of(&op, metrics).await;
        let snapshot = watchers.snapshot();
        let (configs, connects) =
            snapshot.iter().fold((0, 0), |(configs, connects), w| (configs + w.configs, connects + w.connects));
        println!("soak: at the end: {end:?}");
        println!(
            "soak: {} edits in {:.0} s; the watchers connected {connects} times and received {configs} configs",
            plan.ops,
            churned.as_secs_f64()
        );
        drop(watchers);
        op.stop().await;

        // What a fresh operator renders for the final cluster.
        let fresh = start_operator(&cluster, "fresh", metrics).await;
        let deadline = Instant::now() + TIMEOUT;
        let differing = loop {
            let from_scratch = served(fresh.cds, plan.gateways).await;
            let differing: Vec<usize> =
                (0..plan.gateways).filter(|&i| normal(&from_scratch[i]) != normal(&served_last[i])).collect();
            if differing.is_empty() || Instant::now() > deadline {
                break differing.into_iter().map(|i| (i, from_scratch[i].to_json())).collect::<Vec<_>>();
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        fresh.stop().await;
        if let Some((i, fresh_config)) = differing.first() {
            panic!(
                "{} Gateways' configs after the churn differ from a fresh operator's; {}: churned {}, fresh {fresh_config}",
                differing.len(),
                world::gateway_name(*i),
                served_last[*i].to_json()
            );
        }

        // The figures are written whether they held or not (the table says which), then judged.
        let drift = end.drift(&begin, plan.full);
        let mut report = report::Report::new("soak", json!({ "implementation": "ours", "seed": plan.seed }));
        report.row(json!({
            "of": "soak",
            "gateways": plan.gateways,
            "watchers": plan.watchers,
            "edits": plan.ops,
            "churn_s": churned.as_secs_f64(),
            "watcher_connects": connects,
            "watcher_configs": configs,
            "begin": begin,
            "end": end,
            "drift": drift,
        }));
        assert!(drift.is_empty(), "the operator did not come back to where the same steady state began: {drift:#?}");
    });
}
