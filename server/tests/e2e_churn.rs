//! The operator binary against a real kube-apiserver: Gateways created and deleted in bulk,
//! round after round (issue #56). The writer keeps a record of what it last wrote to each
//! object; a Gateway that is gone, with its Service and dataplane, must leave none behind, so
//! the writer's records (`stunner_gateway_operator_writer_records`) come back to where they
//! began after each round. The operator's resident memory is reported beside them.
//!
//! Gateways per round: 300, or `STUNNER_E2E_CHURN_GATEWAYS`. The 2,000 take about
//! 4.5 minutes a round on a 2-core machine (the writer sends one request at a time, about
//! 6,000 to create and 4,000 to delete them, some 30 ms each in a debug build), too long for
//! CI; a leak shows at any count, as one record per Gateway and round.

mod e2e;

use e2e::*;
use futures_util::{StreamExt, TryStreamExt};
use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::json;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const NS: &str = "churn";
/// Gateways per round, unless `STUNNER_E2E_CHURN_GATEWAYS` says otherwise (see the module doc).
const GATEWAYS: usize = 300;
const ROUNDS: usize = 3;
/// Requests the test has in flight at once while it creates or deletes Gateways.
const CLIENTS: usize = 8;
/// What the writer records of each Gateway while it is there: its status, its Service and
/// its Deployment (the DaemonSet it asks gone, which never was, is not recorded).
const RECORDS_PER_GATEWAY: usize = 3;
/// A round's writes take their time on a busy machine: the writer sends one request at a time.
const ROUND_LIMIT: Duration = Duration::from_secs(600);

/// The writer's records, from the operator's metrics.
async fn records(metrics: SocketAddr) -> usize {
    metric_sum(metrics, "stunner_gateway_operator_writer_records", "").await as usize
}

/// Polls the writer's records until `done` holds for them; returns them.
async fn records_until(metrics: SocketAddr, what: &str, done: impl Fn(usize) -> bool) -> usize {
    let deadline = Instant::now() + ROUND_LIMIT;
    loop {
        let now = records(metrics).await;
        if done(now) {
            return now;
        }
        assert!(Instant::now() < deadline, "timed out waiting for the writer's records {what}: {now}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn gateway(i: usize) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        // A ClusterIP Service: thousands of LoadBalancer Services would want more node ports
        // than the API server has.
        "metadata": {"name": format!("gw-{i}"), "namespace": NS,
            "annotations": {"stunner.l7mp.io/service-type": "ClusterIP"}},
        "spec": {
            "gatewayClassName": "stunner-gatewayclass",
            "listeners": [{"name": "udp", "port": 3478, "protocol": "UDP"}],
        },
    }))
    .unwrap()
}

/// Gateways created and deleted three times: after each deletion the writer's records are
/// back to the one it had before the first (the GatewayClass's status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_created_and_deleted_in_rounds_leave_no_writer_records() {
    let count = std::env::var("STUNNER_E2E_CHURN_GATEWAYS").map_or(GATEWAYS, |n| n.parse().expect("a count"));
    let Some(cluster) = Cluster::start("churn").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml("stunner")).await;
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    apply_yaml(c, &class).await;
    apply_yaml(c, &namespace_yaml(NS)).await;
    let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let op = cluster.operator("op", &["--metrics-bind-address", &metrics.to_string()]).await;
    let began = records_until(metrics, "to hold the GatewayClass's status", |n| n == 1).await;
    let fresh = op.rss_kib();
    let gateways = api_for(c, "gateway.networking.k8s.io/v1", "Gateway", Some(NS)).await;
    let started = Instant::now();
    let mut figures = Vec::new();
    for round in 1..=ROUNDS {
        let round_started = Instant::now();
        futures_util::stream::iter(0..count)
            .map(|i| {
                let gateways = gateways.clone();
                async move { gateways.create(&PostParams::default(), &gateway(i)).await.map(|_| ()) }
            })
            .buffer_unordered(CLIENTS)
            .try_collect::<()>()
            .await
            .unwrap_or_else(|e| panic!("round {round}: create: {e}"));
        let created = round_started.elapsed();
        let loaded =
            records_until(metrics, "to hold every Gateway's", |n| n >= began + RECORDS_PER_GATEWAY * count).await;
        let written = round_started.elapsed();
        let loaded_rss = op.rss_kib();
        futures_util::stream::iter(0..count)
            .map(|i| {
                let gateways = gateways.clone();
                async move { gateways.delete(&format!("gw-{i}"), &DeleteParams::default()).await.map(|_| ()) }
            })
            .buffer_unordered(CLIENTS)
            .try_collect::<()>()
            .await
            .unwrap_or_else(|e| panic!("round {round}: delete: {e}"));
        let left = records_until(metrics, "to come back to where they began", |n| n <= began).await;
        let deleted_rss = op.rss_kib();
        eprintln!(
            "round {round}: created in {created:?}, written by {written:?}, all gone by {:?}; records {began} -> {loaded} -> {left}; RSS {fresh} KiB fresh, {loaded_rss} KiB loaded, {deleted_rss} KiB after the deletion",
            round_started.elapsed()
        );
        assert_eq!(left, began, "round {round}");
        figures.push((loaded_rss, deleted_rss));
    }
    eprintln!("{ROUNDS} rounds of {count} Gateways in {:?}", started.elapsed());
    // Resident memory is noisy (the allocator keeps some of what was freed): only a loose
    // bound, that the last round did not grow past the first by half.
    let (first, last) = (figures[0], figures[ROUNDS - 1]);
    assert!(last.1 * 2 <= first.1 * 3, "RSS after the deletions: {figures:?} KiB");
    op.assert_no_rbac_denials();
}
