//! Issue #61: the control plane breaks in the ways a cluster breaks it, and a call never
//! notices. One node start and one Helm install for every fault (the node is locked
//! machine-wide, and CI time counts): each step holds a TURN allocation through the NodePort
//! relaying an echo every 100 ms for its whole length, records every config the CDS sends
//! (through its Service, reconnecting as a dataplane does), and compares the stunnerd pods'
//! UIDs and restart counts before and after.
//!
//! The outages are the issue's own: 60 s with no operator, 45 s without the API server, 45 s
//! with the operator cut off from it. They are a quarter of the test's time (the node's start
//! and the install are the rest), and shorter ones would not outlast the operator's lease
//! (15 s), the kubelet's node status grace, or a CDS client's reconnect backoff.

use super::*;
use crate::node::faults::Component;
use futures_util::{SinkExt, StreamExt};
use k8s_openapi::api::core::v1::Node as KubeNode;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use tokio_tungstenite::tungstenite::Message;

/// What the issue asks of the echo through the call: a datagram every 100 ms.
const ECHO_INTERVAL: Duration = Duration::from_millis(100);
/// Relaying "never stops": no gap without an echo longer than this, and at most this share of
/// the datagrams lost (a busy 2-core machine drops a few).
const MAX_GAP_MS: i64 = 2000;
const MAX_LOSS: f64 = 0.02;
/// How soon a change must be served once the operator runs again ("within seconds"): its
/// pods are Ready when they serve, and stunnerd reconnects to the CDS with its own backoff
/// (16 s measured here after 60 s without an operator).
const SERVED_WITHIN: Duration = Duration::from_secs(30);
/// How soon a change must be served after the API server was away from the operator (down, or
/// cut off): the operator's watches retry with kube-runtime's default backoff (up to 30 s
/// between tries once they failed for a while), and a restarted API server refuses requests
/// until its RBAC caches are filled (78 s and 118 s measured here after 45 s down).
const RECOVERED_WITHIN: Duration = Duration::from_secs(180);
/// The operator's metrics and health ports (the chart's defaults).
const METRICS_PORT: u16 = 8080;
const HEALTH_PORT: u16 = 8081;

/// The node with the chart installed and the simple tunnel relaying to the echo backend.
struct Setup {
    node: Node,
    client: Client,
    turn: SocketAddr,
    echo: SocketAddr,
    /// The Gateway's static password now.
    password: String,
}

impl Setup {
    /// Sets the static password (retried while the API server warms up after a restart:
    /// its first answers may be 403 or 503) and waits until a new allocation relays with it,
    /// for up to `bound`; returns how long that took.
    async fn rotate_password(&mut self, password: &str, bound: Duration) -> Duration {
        let configs = e2e::api_for(&self.client, "stunner.l7mp.io/v1", "GatewayConfig", Some(GATEWAY_NS)).await;
        let patch = Patch::Merge(json!({"spec": {"password": password}}));
        wait_for(&format!("the password {password} written"), || {
            let (configs, patch) = (configs.clone(), &patch);
            async move { configs.patch("stunner-gatewayconfig", &PatchParams::default(), patch).await.ok() }
        })
        .await;
        let changed = Instant::now();
        turn_relays_within(&self.node, self.turn, USER, password, self.echo, bound).await;
        self.password = password.to_string();
        changed.elapsed()
    }

    /// Whether an allocation with `password` is refused at the Allocate.
    fn refused(&self, password: &str) -> Value {
        tokio::task::block_in_place(|| turn_probe(self.turn, USER, password, self.echo))
    }
}

/// What a step watches while its fault runs.
struct Watched {
    held: HeldAllocation,
    configs: Arc<Mutex<Vec<Result<StunnerConfig, String>>>>,
    recorder: tokio::task::JoinHandle<()>,
    before: BTreeSet<(String, i32)>,
}

impl Watched {
    async fn start(s: &Setup) -> Watched {
        let before = settled_dataplane(&s.client).await;
        let held = HeldAllocation::start(s.turn, &s.password, s.echo, ECHO_INTERVAL);
        held.next("relay address");
        assert_eq!(held.next("first echo")["echoed"], true);
        let cds = SocketAddr::new(cluster_ip(&s.client, OPERATOR_NS, "stunner-config-discovery").await, 13478);
        let configs = Arc::new(Mutex::new(Vec::new()));
        let recorder = tokio::spawn(record_configs(cds, configs.clone()));
        // The recorder's first config: the one served now.
        wait_for("the recorder's first config", || {
            let configs = configs.clone();
            async move { (!configs.lock().unwrap().is_empty()).then_some(()) }
        })
        .await;
        Watched { held, configs, recorder, before }
    }

    /// Ends the call and checks the step: relaying never stopped, every config sent was whole,
    /// the same stunnerd pods run with the same restart counts, and the fault left nothing.
    async fn end(self, s: &Setup, step: &str) {
        let Watched { held, configs, recorder, before } = self;
        let verdict = tokio::task::block_in_place(|| held.end());
        recorder.abort();
        let configs = std::mem::take(&mut *configs.lock().unwrap());
        let (sent, received) = (verdict["sent"].as_i64().unwrap_or(0), verdict["received"].as_i64().unwrap_or(0));
        let loss = if sent > 0 { (sent - received) as f64 / sent as f64 } else { 1.0 };
        let gap = verdict["max_gap_ms"].as_i64().unwrap_or(i64::MAX);
        eprintln!(
            "node faults: {step}: {sent} sent, {} lost ({:.2} %), longest gap {gap} ms; {} configs sent",
            sent - received,
            loss * 100.0,
            configs.len()
        );
        for (i, c) in configs.iter().enumerate() {
            let c = c.as_ref().unwrap_or_else(|e| panic!("{step}: config {i} unreadable: {e}"));
            assert!(!e2e::is_zero(c), "{step}: config {i} sent is the zero config: {c:?}");
            assert_eq!(c.listeners.len(), 1, "{step}: config {i} sent misses the listener: {c:?}");
            assert_eq!(c.clusters.len(), 1, "{step}: config {i} sent misses the route's cluster: {c:?}");
        }
        assert_eq!(verdict["ok"], true, "{step}: the call failed: {verdict}");
        assert!(gap < MAX_GAP_MS, "{step}: relaying stopped for {gap} ms: {verdict}");
        assert!(loss <= MAX_LOSS, "{step}: {:.2} % of the echoes lost: {verdict}", loss * 100.0);
        assert_eq!(settled_dataplane(&s.client).await, before, "{step}: a stunnerd pod was replaced or restarted");
        s.node.assert_no_fault_left();
    }
}

/// The stunnerd pods' identities once every one is Ready. After the API server was away
/// longer than the node monitor's grace period, the controller manager marks the node's pods
/// not Ready until the kubelet reports again: the pods run on, but only Ready ones count.
async fn settled_dataplane(client: &Client) -> BTreeSet<(String, i32)> {
    let deployment = wait_available(client, GATEWAY_NS, "udp-gateway").await;
    let replicas = deployment.spec.and_then(|s| s.replicas).unwrap_or(1) as usize;
    wait_for("every stunnerd pod Ready", || async move {
        let ids = dataplane_identity(client).await;
        (ids.len() == replicas).then_some(ids)
    })
    .await
}

/// Watches the Gateway's config through the CDS Service as a dataplane does, reconnecting
/// every 200 ms while the CDS is away, and records every config (or what was unreadable). A
/// connection silent for two pings in a row is taken as dead (a pod deleted under it). Runs
/// until aborted, at most about an hour.
async fn record_configs(cds: SocketAddr, configs: Arc<Mutex<Vec<Result<StunnerConfig, String>>>>) {
    const PING: Duration = Duration::from_secs(5);
    let url = format!("ws://{cds}/api/v1/configs/{GATEWAY_NS}/udp-gateway?watch=true");
    for _ in 0..18_000 {
        if let Ok(Ok((mut ws, _))) = tokio::time::timeout(PING, tokio_tungstenite::connect_async(&url)).await {
            let mut silent = 0;
            while silent < 2 {
                match tokio::time::timeout(PING, ws.next()).await {
                    Ok(Some(Ok(Message::Text(t)))) => {
                        silent = 0;
                        configs.lock().unwrap().push(serde_json::from_str(&t).map_err(|e| format!("{e}: {t}")));
                    }
                    Ok(Some(Ok(_))) => silent = 0,
                    Ok(_) => break,
                    Err(_) => {
                        silent += 1;
                        if ws.send(Message::Ping(Vec::new().into())).await.is_err() {
                            break;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The addresses of the operator's pods that run (Ready or not: after an API server restart a
/// pod's Ready condition may lag behind).
async fn operator_ips(client: &Client) -> Vec<Ipv4Addr> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NS);
    let pods = pods.list(&ListParams::default().labels(OPERATOR_PODS)).await.map(|l| l.items).unwrap_or_default();
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.status.as_ref()?.pod_ip.as_deref()?.parse().ok())
        .collect()
}

async fn scale_operator(client: &Client, replicas: i32) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), OPERATOR_NS);
    let spec = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    deployments.patch("stunner-gateway-operator", &PatchParams::default(), &spec).await.unwrap();
}

/// The host process of the operator container in `pod` (found by the pod's UID in its
/// cgroup, as kubelet's cgroupfs driver names it, and the binary in its command line).
fn operator_process(pod: &Pod) -> i32 {
    let uid = pod.metadata.uid.clone().unwrap();
    let cgroup_uids = [uid.clone(), uid.replace('-', "_")];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let ours = String::from_utf8_lossy(&cmdline).starts_with("/stunner-gateway-operator");
        if ours && cgroup_uids.iter().any(|u| cgroup.contains(&format!("pod{u}"))) {
            return pid;
        }
    }
    panic!("no process of the operator container in pod {uid}")
}

/// Each replica's `leader_election_master_status` and `/readyz` status code.
async fn operator_states(client: &Client) -> Vec<(Ipv4Addr, f64, Option<u16>)> {
    let mut out = Vec::new();
    for ip in operator_ips(client).await {
        let leader =
            e2e::metric_sum(SocketAddr::new(ip.into(), METRICS_PORT), "leader_election_master_status", "").await;
        let ready = e2e::http_get(SocketAddr::new(ip.into(), HEALTH_PORT), "/readyz").await.map(|(code, _)| code);
        out.push((ip, leader, ready));
    }
    out
}

/// The operator scaled to 0 for 60 s and the password changed meanwhile: the call goes on,
/// the new password works within seconds of the operator's return, the old one is refused.
async fn operator_gone(s: &mut Setup) {
    let w = Watched::start(s).await;
    let old = s.password.clone();
    let replicas = operator_ips(&s.client).await.len() as i32;
    scale_operator(&s.client, 0).await;
    let gone = Instant::now();
    wait_for("no operator pod", || {
        let client = s.client.clone();
        async move {
            let pods: Api<Pod> = Api::namespaced(client, OPERATOR_NS);
            let left = pods.list(&ListParams::default().labels(OPERATOR_PODS)).await.ok()?;
            left.items.is_empty().then_some(())
        }
    })
    .await;
    let configs = e2e::api_for(&s.client, "stunner.l7mp.io/v1", "GatewayConfig", Some(GATEWAY_NS)).await;
    let patch = Patch::Merge(json!({"spec": {"password": "rotated-while-away"}}));
    configs.patch("stunner-gatewayconfig", &PatchParams::default(), &patch).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60).saturating_sub(gone.elapsed())).await;
    scale_operator(&s.client, replicas).await;
    wait_available(&s.client, OPERATOR_NS, "stunner-gateway-operator").await;
    let back = Instant::now();
    turn_relays(&s.node, s.turn, USER, "rotated-while-away", s.echo).await;
    let served = back.elapsed();
    eprintln!(
        "node faults: operator gone {:.0?}; the new password relayed {served:.1?} after its return",
        gone.elapsed()
    );
    assert!(served < SERVED_WITHIN, "the password changed while the operator was away took {served:.1?}");
    s.password = "rotated-while-away".into();
    let refused = s.refused(&old);
    assert_eq!((refused["ok"].as_bool(), refused["stage"].as_str()), (Some(false), Some("allocate")), "{refused}");
    w.end(s, "operator scaled to 0 for 60 s").await;
}

/// The leader SIGKILLed in the middle of 50 edits 300 ms apart: the last edit is served within
/// seconds, and no config sent in between is zero or misses the listener.
async fn leader_killed_mid_burst(s: &mut Setup) {
    let w = Watched::start(s).await;
    let leader = wait_for("a leader", || e2e::lease_holder(&s.client)).await;
    let pods: Api<Pod> = Api::namespaced(s.client.clone(), OPERATOR_NS);
    let leader_pod = pods.get(&leader).await.unwrap();
    let configs = e2e::api_for(&s.client, "stunner.l7mp.io/v1", "GatewayConfig", Some(GATEWAY_NS)).await;
    for i in 0..50 {
        if i == 25 {
            let pid = operator_process(&leader_pod);
            // SAFETY: kill(2) on a pid we just found; no memory is involved.
            #[allow(unsafe_code)] // kill(2): std has no safe wrapper for a pid that is not our child
            let killed = unsafe { libc::kill(pid, libc::SIGKILL) };
            assert_eq!(killed, 0, "SIGKILL the leader {leader} (pid {pid})");
            eprintln!("node faults: SIGKILLed the leader {leader} (pid {pid}) at edit {i}");
        }
        let patch = Patch::Merge(json!({"spec": {"password": format!("burst-{i}")}}));
        configs.patch("stunner-gatewayconfig", &PatchParams::default(), &patch).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let last_edit = Instant::now();
    every_replica_serves(&s.client, "the last edit", |c| {
        c.auth.credentials.get("password").is_some_and(|p| p == "burst-49")
    })
    .await;
    let served = last_edit.elapsed();
    eprintln!("node faults: the last of 50 edits served by every replica {served:.1?} after it was made");
    assert!(served < SERVED_WITHIN, "the last edit took {served:.1?}");
    turn_relays(&s.node, s.turn, USER, "burst-49", s.echo).await;
    s.password = "burst-49".into();
    // The SIGKILL was real: the leader's container restarted (in the same pod).
    wait_for("the SIGKILLed leader's container restarted", || {
        let (pods, leader) = (pods.clone(), leader.clone());
        async move {
            let statuses = pods.get(&leader).await.ok()?.status?.container_statuses?;
            statuses.iter().any(|c| c.restart_count >= 1).then_some(())
        }
    })
    .await;
    w.end(s, "leader SIGKILLed in a burst of 50 edits").await;
}

/// The API server stopped for 45 s (etcd's data kept), then back, with a change made right
/// after: the call goes on and the change is served.
async fn apiserver_down(s: &mut Setup) {
    let w = Watched::start(s).await;
    const DOWN: Duration = Duration::from_secs(45);
    tokio::task::block_in_place(|| s.node.stop_for(Component::ApiServer, DOWN + Duration::from_secs(120)));
    let stopped = Instant::now();
    tokio::time::sleep(DOWN).await;
    tokio::task::block_in_place(|| s.node.start_again(Component::ApiServer));
    eprintln!("node faults: the API server was down {:.1?}", stopped.elapsed());
    let served = s.rotate_password("after-apiserver", RECOVERED_WITHIN).await;
    eprintln!("node faults: a change after the API server's return relayed {served:.1?} after it was made");
    w.end(s, "API server down 45 s").await;
}

/// Waits until the Node is Ready (after kubelet is back).
async fn node_ready(client: &Client) {
    let nodes: Api<KubeNode> = Api::all(client.clone());
    wait_for("the Node Ready", || {
        let nodes = nodes.clone();
        async move {
            let list = nodes.list(&ListParams::default()).await.ok()?;
            let node = list.items.into_iter().next()?;
            let conditions = node.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())
        }
    })
    .await;
}

/// Waits until the kubelet renewed its node Lease after `since`: it runs, and its sync with
/// the container runtime went on (it renews every 10 s; meanwhile its PLEG relisted every
/// container, which is when a restart would be decided).
async fn kubelet_renewed_after(client: &Client, since: k8s_openapi::jiff::Timestamp) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    wait_for("the kubelet's node Lease renewed", || {
        let leases = leases.clone();
        async move {
            let lease = leases.list(&ListParams::default()).await.ok()?.items.into_iter().next()?;
            (lease.spec?.renew_time?.0 > since).then_some(())
        }
    })
    .await;
}

/// kubelet restarted, then containerd: the call goes on, the same stunnerd pods run with the
/// same restart counts.
async fn kubelet_and_containerd_restart(s: &mut Setup) {
    let w = Watched::start(s).await;
    tokio::task::block_in_place(|| s.node.restart(Component::Kubelet));
    kubelet_renewed_after(&s.client, k8s_openapi::jiff::Timestamp::now()).await;
    node_ready(&s.client).await;
    tokio::task::block_in_place(|| s.node.restart(Component::Containerd));
    kubelet_renewed_after(&s.client, k8s_openapi::jiff::Timestamp::now()).await;
    node_ready(&s.client).await;
    // A new call still gets through, and the running one went on (checked at the end).
    turn_relays(&s.node, s.turn, USER, &s.password, s.echo).await;
    w.end(s, "kubelet and containerd restarted").await;
}

/// The API server unreachable from the operator's pods only, for 45 s: no zero config, the
/// replicas stop leading (what the metric and the NoLeader alert show) while the CDS goes on
/// serving, and it recovers by itself.
async fn operator_cut_off(s: &mut Setup) {
    let w = Watched::start(s).await;
    const CUT: Duration = Duration::from_secs(45);
    let ips = operator_ips(&s.client).await;
    tokio::task::block_in_place(|| s.node.block_apiserver(&ips, CUT + Duration::from_secs(60)));
    let cut = Instant::now();
    // The leader cannot renew its lease: after its renew deadline (10 s) no replica leads,
    // which is what `StunnerGatewayOperatorNoLeader` (max by lease of
    // leader_election_master_status < 1) sees.
    let during = wait_for("no replica leading", || {
        let client = s.client.clone();
        async move {
            let states = operator_states(&client).await;
            (!states.is_empty() && states.iter().all(|(_, leader, _)| *leader < 1.0)).then_some(states)
        }
    })
    .await;
    eprintln!("node faults: {:.1?} into the cut, (pod, leader, /readyz): {during:?}", cut.elapsed());
    // The CDS goes on serving the last config; /readyz stays 200, so the CDS Service keeps
    // its endpoints for the dataplanes.
    assert!(during.iter().all(|(_, _, ready)| *ready == Some(200)), "{during:?}");
    let config = served_config(&s.client).await.expect("the CDS serves while cut off");
    assert_eq!(config.auth.credentials.get("password"), Some(&s.password));
    tokio::time::sleep(CUT.saturating_sub(cut.elapsed())).await;
    tokio::task::block_in_place(|| s.node.unblock_apiserver());
    let lifted = Instant::now();
    let after = wait_for("a replica leading again", || {
        let client = s.client.clone();
        async move {
            let states = operator_states(&client).await;
            states.iter().any(|(_, leader, _)| *leader >= 1.0).then_some(states)
        }
    })
    .await;
    eprintln!("node faults: a leader again {:.1?} after the cut ended: {after:?}", lifted.elapsed());
    let served = s.rotate_password("after-cut", RECOVERED_WITHIN).await;
    eprintln!("node faults: a change after the cut relayed {served:.1?} after it was made");
    w.end(s, "API server unreachable from the operator for 45 s").await;
}

/// The chart installed on a fresh node, the simple tunnel relaying to the echo backend.
async fn install(test: &str) -> Option<Setup> {
    let (node, client) = node_with_gateway_api(test).await?;
    apply_yaml(&client, &echo_backend(1)).await;
    helm(&node, "install", &["--create-namespace"]);
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    apply_yaml(&client, &simple_tunnel("pass-1")).await;
    wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    wait_available(&client, "default", "echo-server").await;
    let turn = SocketAddr::new(IpAddr::V4(node.node_ip), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    turn_relays(&node, turn, USER, "pass-1", echo).await;
    Some(Setup { node, client, turn, echo, password: "pass-1".into() })
}

/// Stops the node and checks it left nothing behind.
fn stop_clean(mut s: Setup) {
    assert!(s.node.stop(), "the node exited cleanly\n{}", s.node.log_tails());
    crate::node::assert_machine_clean();
}

/// Issue #61 on the node: the faults one after another, on one node and one install.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_faults_never_interrupt_a_call() {
    let Some(mut s) = install("faults").await else { return };
    kubelet_and_containerd_restart(&mut s).await;
    leader_killed_mid_burst(&mut s).await;
    operator_gone(&mut s).await;
    operator_cut_off(&mut s).await;
    apiserver_down(&mut s).await;
    stop_clean(s);
}
