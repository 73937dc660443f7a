//! Two operator replicas with `--leader-elect` against a real kube-apiserver: only the
//! leader writes, both serve the same configs, and when the leader dies the other takes
//! over without rewriting what is unchanged (issue #6).

mod e2e;

use e2e::*;

const GW: &str = "gateway.networking.k8s.io/v1";
const NS: &str = "stunner";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_writes_and_the_other_replica_takes_over() {
    let Some(cluster) = Cluster::start("ha").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;

    // Both replicas use the same CDS port (on two loopback addresses) and advertise the same
    // host, as pods behind one Service do: their Deployments are identical.
    let port = free_port();
    let (cds_a, cds_b) = (format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}"));
    let (metrics_a, metrics_b) = (format!("127.0.0.1:{}", free_port()), format!("127.0.0.1:{}", free_port()));
    let common =
        ["--leader-elect", "--config-discovery-advertised-host", "stunner-config-discovery.stunner-system.svc"];
    let args = |cds: &str, metrics: &str| -> Vec<String> {
        let mut a: Vec<String> = common.iter().map(|s| s.to_string()).collect();
        a.extend(["--config-discovery-address".into(), cds.into(), "--metrics-bind-address".into(), metrics.into()]);
        a
    };
    let (args_a, args_b) = (args(&cds_a, &metrics_a), args(&cds_b, &metrics_b));
    let a = cluster.operator("replica-a", &args_a.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let b = cluster.operator("replica-b", &args_b.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let mut replicas = vec![(a, metrics_a.parse().unwrap()), (b, metrics_b.parse().unwrap())];

    let leader = wait_for("a Lease holder", || async { lease_holder(c).await }).await;
    assert!(leader == "replica-a" || leader == "replica-b", "{leader}");
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "Programmed", |o| {
        has_condition(&o.data["status"], "Programmed", "True", "Programmed")
    })
    .await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    let before = settle(c, &QUICKSTART_WRITTEN).await;
    assert_eq!(lease_holder(c).await.as_deref(), Some(leader.as_str()), "no leader change while settling");

    // Both replicas serve the same config.
    let config = wait_for("both replicas serving the same complete config", || async {
        let ca = replicas[0].0.config(NS, "udp-gateway").await?;
        let cb = replicas[1].0.config(NS, "udp-gateway").await?;
        (ca == cb && ca.listeners.len() == 2 && ca.listeners.iter().all(|l| l.public_addr == "127.0.0.1")).then_some(ca)
    })
    .await;
    assert_eq!(config.clusters[0].endpoints, ["10.0.0.0/8", "127.0.0.1/32"]);

    // Only the leader has written.
    let (li, fi) = if replicas[0].0.name == leader { (0, 1) } else { (1, 0) };
    assert!(write_attempts(replicas[li].1).await > 0.0, "the leader wrote the statuses and owned objects");
    assert_eq!(write_attempts(replicas[fi].1).await, 0.0, "the follower wrote nothing");
    assert!(replicas[li].0.log_contains("became the leader"));
    assert!(!replicas[fi].0.log_contains("became the leader"));
    let leading = |metrics| metric_sum(metrics, "leader_election_master_status{", "name=\"92062b70.l7mp.io\"");
    assert_eq!(leading(replicas[li].1).await, 1.0, "the leader says so (the no-leader alert's metric)");
    assert_eq!(leading(replicas[fi].1).await, 0.0, "the follower says it waits");

    // The leader crashes (no chance to release the Lease): the follower takes over once the
    // Lease expires, and finds nothing to change.
    let mut ws = replicas[fi].0.watch(NS, "udp-gateway").await;
    assert_eq!(next_config(&mut ws).await, config);
    let (dead, _) = replicas.remove(li);
    dead.kill().await;
    let (follower, follower_metrics) = replicas.remove(0);
    let new_leader = follower.name.clone();
    wait_for("the follower to take the Lease", || async {
        (lease_holder(c).await.as_deref() == Some(new_leader.as_str())).then_some(())
    })
    .await;
    wait_for("the new leader's log", || async { follower.log_contains("became the leader").then_some(()) }).await;
    wait_for("the new leader's metric", || async { (leading(follower_metrics).await == 1.0).then_some(()) }).await;
    let after = settle(c, &QUICKSTART_WRITTEN).await;
    assert_eq!(after, before, "a new leader rewrites nothing that is unchanged");
    let later = drain(&mut ws, std::time::Duration::from_secs(2)).await;
    assert!(later.iter().all(|c| *c == config), "no other config during the takeover: {later:?}");

    // The new leader writes what changes from now on.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    apply_yaml(
        c,
        &gateway.replace("  listeners:\n", "  listeners:\n    - name: extra\n      port: 3480\n      protocol: UDP\n"),
    )
    .await;
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "three listener statuses", |o| {
        o.data["status"]["listeners"].as_array().is_some_and(|l| l.len() == 3)
    })
    .await;
    config_until(&mut ws, "three listeners", |c| c.listeners.len() == 3).await;
    assert!(write_attempts(follower_metrics).await > 0.0);
    follower.assert_no_rbac_denials();
}
