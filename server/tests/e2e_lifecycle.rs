//! Operator replicas come and go and no dataplane notices (issue #9), against a real
//! kube-apiserver: dataplane Deployments keep their pod template while operator processes
//! with other addresses start, stop gracefully and crash; replicas serve the same configs
//! under the same versions; watchers behind a "Service" (any live replica) reconnect and miss
//! nothing, and never see a zero config.

mod e2e;

mod pb {
    include!(concat!(env!("OUT_DIR"), "/test_client/stunner.cds.v1.rs"));
}

use e2e::*;
use pb::config_discovery_client::ConfigDiscoveryClient;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::proto::{ConfigId, GetRequest};
use tokio_tungstenite::tungstenite::Message;

const GW: &str = "gateway.networking.k8s.io/v1";
const NS: &str = "stunner";
/// What every dataplane is told, whichever operator process renders it.
const ORIGIN: &str = "http://stunner-config-discovery.stunner-system.svc:13478";
const WATCHERS: usize = 12;

/// The live replicas behind the CDS Service; the test takes a replica out before stopping it,
/// as the endpoints controller does once its readiness fails.
type Pool = Arc<Mutex<Vec<SocketAddr>>>;

/// Every config one watcher received, in order.
type Seen = Arc<Mutex<Vec<StunnerConfig>>>;

/// A dataplane-like watcher of the quickstart Gateway's config on any live replica: after a
/// Close or a broken connection it reconnects to another, as stunnerd does through the
/// Service. Bounded: it gives up after 300 connection attempts.
fn watcher(pool: Pool, i: usize) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let task = tokio::spawn(async move {
        for _ in 0..300 {
            let addr = {
                let live = pool.lock().unwrap();
                (!live.is_empty()).then(|| live[i % live.len()])
            };
            let url = addr.map(|a| format!("ws://{a}/api/v1/configs/{NS}/udp-gateway?watch=true"));
            let Some(Ok((mut ws, _))) = (match url {
                Some(url) => Some(tokio_tungstenite::connect_async(url).await),
                None => None,
            }) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            while let Some(Ok(msg)) = futures_util::StreamExt::next(&mut ws).await {
                match msg {
                    Message::Text(t) => record.lock().unwrap().push(serde_json::from_str(&t).unwrap()),
                    Message::Close(_) => break,
                    _ => {}
                }
            }
        }
    });
    (seen, task)
}

/// Waits until every watcher's latest config is `want`.
async fn all_hold(seen: &[Seen], want: &StunnerConfig, what: &str) {
    wait_for(what, || async { seen.iter().all(|s| s.lock().unwrap().last() == Some(want)).then_some(()) }).await;
}

/// The version a replica serves for the quickstart Gateway, over gRPC.
async fn version(cds: SocketAddr) -> Option<String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{cds}")).ok()?.connect().await.ok()?;
    let mut client = ConfigDiscoveryClient::new(channel);
    let id = Some(ConfigId { namespace: NS.into(), name: "udp-gateway".into() });
    let update = client.get(GetRequest { id, node: String::new() }).await.ok()?.into_inner();
    Some(update.version)
}

/// The dataplane Deployment's generation (bumped by every spec change, so by every pod
/// template change that would restart the pods) and its config origin.
async fn dataplane(c: &kube::Client) -> (i64, String) {
    let d = get(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await.expect("the dataplane Deployment");
    let env = &d.data["spec"]["template"]["spec"]["containers"][0]["env"];
    let origin = env.as_array().unwrap().iter().find(|e| e["name"] == "STUNNER_CONFIG_ORIGIN").unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();
    (d.metadata.generation.unwrap(), origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_roll_restart_and_crash_and_no_dataplane_notices() {
    let Some(cluster) = Cluster::start("lifecycle").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;

    // One replica, on a port of its own choosing (no replica shares an address with another).
    let first = cluster.operator("op-1", &["--leader-elect"]).await;
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "Programmed", |o| {
        has_condition(&o.data["status"], "Programmed", "True", "Programmed")
    })
    .await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    let (generation, origin) = dataplane(c).await;
    assert_eq!(origin, ORIGIN, "dataplanes are told the CDS Service, not an operator pod");

    let pool: Pool = Arc::new(Mutex::new(vec![first.cds]));
    let (seen, tasks): (Vec<Seen>, Vec<_>) = (0..WATCHERS).map(|i| watcher(pool.clone(), i)).unzip();
    let initial = wait_for("a complete config", || async {
        first.config(NS, "udp-gateway").await.filter(|c| c.listeners.len() == 2)
    })
    .await;
    all_hold(&seen, &initial, "every watcher holding the config").await;

    // Scale to three: the newcomers serve the same config under the same version.
    let second = cluster.operator("op-2", &["--leader-elect"]).await;
    let third = cluster.operator("op-3", &["--leader-elect"]).await;
    pool.lock().unwrap().extend([second.cds, third.cds]);
    let versions = wait_for("all three replicas serving a version", || async {
        let v = [version(first.cds).await?, version(second.cds).await?, version(third.cds).await?];
        Some(v)
    })
    .await;
    assert!(versions.iter().all(|v| *v == versions[0]), "one version on every replica: {versions:?}");

    // Roll the first replica (the leader) out gracefully: its watchers get a Close frame and
    // reconnect to the others, which send them what they already hold.
    assert_eq!(lease_holder(c).await.as_deref(), Some("op-1"));
    pool.lock().unwrap().retain(|a| *a != first.cds);
    first.stop().await;
    let handed_over =
        wait_for("another replica leading", || async { lease_holder(c).await.filter(|h| h == "op-2" || h == "op-3") })
            .await;

    // A change while the replicas change hands reaches every watcher.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    apply_yaml(
        c,
        &gateway.replace("  listeners:\n", "  listeners:\n    - name: extra\n      port: 3480\n      protocol: UDP\n"),
    )
    .await;
    let changed = wait_for("the changed config on both replicas", || async {
        let a = second.config(NS, "udp-gateway").await.filter(|c| c.listeners.len() == 3)?;
        let b = third.config(NS, "udp-gateway").await?;
        (a == b).then_some(a)
    })
    .await;
    all_hold(&seen, &changed, "every watcher holding the changed config").await;
    let (v2, v3) = (version(second.cds).await.unwrap(), version(third.cds).await.unwrap());
    assert_eq!(v2, v3, "the same version for the same content on both replicas");
    assert_ne!(v2, versions[0]);

    // Back to one: the leader among the two crashes (no Close frame, no lease release); its
    // watchers reconnect to the survivor and get the same config.
    let (crashed, survivor) = if handed_over == "op-2" { (second, third) } else { (third, second) };
    pool.lock().unwrap().retain(|a| *a != crashed.cds);
    crashed.kill().await;
    wait_for("the survivor leading", || async {
        (lease_holder(c).await.as_deref() == Some(survivor.name.as_str())).then_some(())
    })
    .await;
    assert_eq!(version(survivor.cds).await.as_deref(), Some(v2.as_str()));
    all_hold(&seen, &changed, "every watcher on the survivor").await;

    // Nothing a dataplane would notice: never a zero config, never a step back to the old
    // config once the change arrived (the change itself may come in steps, as the cluster
    // made it: the new listener first, its public address once the Service has it), and the
    // Deployment's pod template never rewritten.
    for (i, s) in seen.iter().enumerate() {
        let s = s.lock().unwrap();
        assert!(s.iter().all(|c| !is_zero(c)), "watcher {i} saw a zero config");
        let first_change = s.iter().position(|c| c.listeners.len() == 3).unwrap();
        assert!(s[..first_change].iter().all(|c| *c == initial), "watcher {i}: {s:?}");
        assert!(s[first_change..].iter().all(|c| c.listeners.len() == 3), "watcher {i} went back: {s:?}");
    }
    assert_eq!(dataplane(c).await, (generation, ORIGIN.to_string()), "the dataplane Deployment was not rolled");
    for t in tasks {
        t.abort();
    }
    survivor.assert_no_rbac_denials();
}

/// `--enable-finalizer`: on exit the (leading) operator invalidates its Gateways and removes
/// their dataplanes, and leaves routes accepted (operator-behavior.md §4.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_invalidates_gateways_and_removes_dataplanes_on_exit() {
    let Some(cluster) = Cluster::start("finalizer").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    let op = cluster.operator("op", &["--enable-finalizer"]).await;
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "Programmed", |o| {
        has_condition(&o.data["status"], "Programmed", "True", "Programmed")
    })
    .await;
    wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "exists", |_| true).await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    op.stop().await;

    let unavailable = |status: &serde_json::Value| {
        condition(status, "Accepted").is_some_and(|c| {
            c["status"] == "False"
                && c["message"].as_str().is_some_and(|m| m.contains("Operator unavailable after graceful shutdown"))
        })
    };
    let gateway = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap();
    assert!(unavailable(&gateway.data["status"]), "{}", gateway.data["status"]);
    let class = get(c, GW, "GatewayClass", None, "stunner-gatewayclass").await.unwrap();
    assert!(unavailable(&class.data["status"]), "{}", class.data["status"]);
    assert!(get(c, "v1", "Service", Some(NS), "udp-gateway").await.is_none(), "the Service is deleted");
    assert!(get(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await.is_none(), "the Deployment is deleted");
    let route = get(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane").await.unwrap();
    let parent = &route.data["status"]["parents"][0];
    assert!(has_condition(parent, "Accepted", "True", "Accepted"), "{parent}");
}
