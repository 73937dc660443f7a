//! The operator binary against a real kube-apiserver in legacy dataplane mode
//! (`--dataplane-mode legacy`): one `stunnerd-config` ConfigMap per GatewayConfig, no
//! dataplane Deployment (issue #6).

mod e2e;

use e2e::*;
use stunner_gateway::config::StunnerConfig;

const GW: &str = "gateway.networking.k8s.io/v1";
const NS: &str = "stunner";

fn stunnerd_conf(cm: &kube::api::DynamicObject) -> Option<StunnerConfig> {
    let text = cm.data["data"]["stunnerd.conf"].as_str()?;
    serde_json::from_str(text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_mode_publishes_the_config_in_a_config_map() {
    let Some(cluster) = Cluster::start("legacy").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    let op = cluster.operator("legacy", &["--dataplane-mode", "legacy"]).await;

    let gw = wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "Accepted", |o| {
        has_condition(&o.data["status"], "Accepted", "True", "Accepted")
    })
    .await;
    assert_eq!(gw.data["status"]["listeners"].as_array().map(Vec::len), Some(2));
    let cm = wait_object(c, "v1", "ConfigMap", Some(NS), "stunnerd-config", "two listeners", |o| {
        stunnerd_conf(o).is_some_and(|s| s.listeners.len() == 2)
    })
    .await;
    assert_eq!(label(&cm, "stunner.l7mp.io/owned-by"), Some("stunner"));
    let config_uid = get(c, "stunner.l7mp.io/v1", "GatewayConfig", Some(NS), "stunner-gatewayconfig")
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    assert_eq!(owner(&cm, "GatewayConfig", "stunner-gatewayconfig").map(|o| o.uid.clone()), Some(config_uid));
    assert_eq!(managers(&cm), [("stunner-gateway-operator".to_string(), String::new())]);
    let conf = stunnerd_conf(&cm).unwrap();
    assert_eq!(conf.admin.name, "stunner-daemon");
    assert_eq!(conf.auth.credentials["password"], "pass-1");
    let names: Vec<_> = conf.listeners.iter().map(|l| (l.name.as_str(), l.protocol.as_str())).collect();
    assert_eq!(
        names,
        [("stunner/udp-gateway/udp-listener", "TURN-UDP"), ("stunner/udp-gateway/tcp-listener", "TURN-TCP")]
    );
    assert_eq!(conf.clusters.len(), 1);
    assert_eq!(conf.clusters[0].endpoints, ["10.0.0.0/8", "127.0.0.1/32"]);
    // Legacy mode has no managed dataplane; the LoadBalancer Service is still there.
    wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "exists", |_| true).await;
    assert!(get(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await.is_none());

    // A credential change reaches the ConfigMap.
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    apply_yaml(c, &class.replace("pass-1", "pass-2")).await;
    wait_object(c, "v1", "ConfigMap", Some(NS), "stunnerd-config", "the new password", |o| {
        stunnerd_conf(o).is_some_and(|s| s.auth.credentials["password"] == "pass-2")
    })
    .await;

    // The Gateway goes: the class's config keeps its header but has no listeners left.
    delete(c, GW, "Gateway", Some(NS), "udp-gateway").await;
    let cm = wait_object(c, "v1", "ConfigMap", Some(NS), "stunnerd-config", "no listeners", |o| {
        stunnerd_conf(o).is_some_and(|s| s.listeners.is_empty())
    })
    .await;
    assert_eq!(stunnerd_conf(&cm).unwrap().auth.credentials["password"], "pass-2");
    op.assert_no_rbac_denials();
}

/// Statuses lead the ConfigMap of the same render (as upstream's updater writes them): once
/// the ConfigMap shows a route's change, the route's status already shows it. The revisions
/// of this harness's one etcd order every write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_are_written_before_the_config_map_of_their_render() {
    let Some(cluster) = Cluster::start("legacy-status-order").await else { return };
    let c = &cluster.admin;
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    let op = cluster.operator("legacy", &["--dataplane-mode", "legacy"]).await;
    let mut conf = stunnerd_conf(
        &wait_object(c, "v1", "ConfigMap", Some(NS), "stunnerd-config", "two listeners", |o| {
            stunnerd_conf(o).is_some_and(|s| s.listeners.len() == 2)
        })
        .await,
    );
    let route_yaml = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/route.yaml")).unwrap();
    for step in 1..=4 {
        let route = route_yaml.replace(
            "          name: media-servers\n",
            &format!("          name: media-servers\n          port: {}\n", 9000 + step),
        );
        let generation = apply_yaml(c, &route).await[0].metadata.generation.unwrap();
        let before = conf.clone();
        let cm = wait_object(c, "v1", "ConfigMap", Some(NS), "stunnerd-config", "the route's change", |o| {
            stunnerd_conf(o) != before
        })
        .await;
        conf = stunnerd_conf(&cm);
        wait_object(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane", "the step's generation", |o| {
            condition(&o.data["status"]["parents"][0], "Accepted")
                .is_some_and(|a| a["observedGeneration"] == generation)
        })
        .await;
        let config_map = revision(c, "v1", "ConfigMap", Some(NS), "stunnerd-config").await;
        let route = revision(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane").await;
        assert!(route < config_map, "step {step}: the route's status ({route}) after the ConfigMap ({config_map})");
    }
    op.assert_no_rbac_denials();
}
