//! The Gateway API bundles STUNner users run, against a real kube-apiserver (issue #44): v1.7
//! standard (UDPRoute and TCPRoute `v1` only, with the safe-upgrades policy), v1.7
//! experimental (`v1` and `v1alpha2`), v1.4 experimental (`v1alpha2` only) and none at all. In
//! each the operator renders what the served kinds allow — a Gateway API UDPRoute as a UDP
//! cluster, a TCPRoute as a `protocol: TCP` cluster on the TCP listener only — writes the
//! routes' statuses through the served version, and logs nothing at error level. An upgrade
//! of the CRDs under a running operator, and a kind that stops being served, are followed
//! without a restart.

mod e2e;

use e2e::*;
use serde_json::Value;
use stunner_gateway::config::StunnerConfig;

const NS: &str = "stunner";
const GW: &str = "udp-gateway";
const GROUP: &str = "gateway.networking.k8s.io";

/// The quickstart's class, config, dataplane and Gateway (a UDP and a TCP listener), and the
/// StaticService the routes name.
fn base_yaml() -> String {
    let dir = repo_root().join("deploy/examples/quickstart");
    let quickstart = ["gatewayclass.yaml", "gateway.yaml"].map(|f| std::fs::read_to_string(dir.join(f)).unwrap());
    let backend = "apiVersion: stunner.l7mp.io/v1\nkind: StaticService\n\
                   metadata: {name: media-servers, namespace: stunner}\nspec: {prefixes: [10.0.0.0/8]}\n";
    format!("{}\n---\n{backend}", quickstart.join("\n---\n"))
}

/// A Gateway API route of `kind` at `version` to the StaticService, attached to the Gateway.
fn route_yaml(kind: &str, version: &str, name: &str) -> String {
    format!(
        "apiVersion: {GROUP}/{version}\nkind: {kind}\nmetadata: {{name: {name}, namespace: {NS}}}\n\
         spec:\n  parentRefs: [{{name: {GW}}}]\n  rules: [{{backendRefs: [{{group: stunner.l7mp.io, kind: StaticService, name: media-servers}}]}}]\n"
    )
}

/// The cluster named `stunner/<route>` and the listeners whose routes name it.
fn route_cluster<'a>(config: &'a StunnerConfig, route: &str) -> Option<(&'a str, Vec<&'a str>)> {
    let name = format!("{NS}/{route}");
    let c = config.clusters.iter().find(|c| c.name == name)?;
    let listeners = config.listeners.iter().filter(|l| l.routes.contains(&name)).map(|l| l.name.as_str()).collect();
    Some((c.protocol.as_str(), listeners))
}

async fn wait_config(op: &Operator, what: &str, pred: impl Fn(&StunnerConfig) -> bool) -> StunnerConfig {
    wait_for(what, || async { op.config(NS, GW).await.filter(|c| pred(c)) }).await
}

/// Waits for our controller's `Accepted=True` on the route, read through `version`, for the
/// route's current generation.
async fn wait_accepted(cluster: &Cluster, kind: &str, version: &str, name: &str) {
    let api_version = format!("{GROUP}/{version}");
    wait_object(&cluster.admin, &api_version, kind, Some(NS), name, "Accepted by our controller", |o| {
        let generation = o.metadata.generation;
        o.data["status"]["parents"].as_array().into_iter().flatten().any(|p| {
            p["controllerName"] == "stunner.l7mp.io/gateway-operator"
                && p["conditions"].as_array().into_iter().flatten().any(|c| {
                    c["type"] == "Accepted" && c["status"] == "True" && c["observedGeneration"].as_i64() == generation
                })
        })
    })
    .await;
}

fn assert_no_errors(op: &Operator) {
    assert!(!op.log_contains(" ERROR "), "an error-level log line:\n{}", op.log_tail(80));
    op.assert_no_rbac_denials();
}

/// One bundle: the routes of the versions it serves (`None`: the kind is not served) are
/// rendered and accepted.
async fn renders_what_is_served(
    test: &str,
    bundle: GatewayApi,
    udp: Option<&str>,
    tcp: Option<&str>,
) -> Option<Cluster> {
    let cluster = Cluster::start_with(test, bundle).await?;
    let op = cluster.operator("op", &[]).await;
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &base_yaml()).await;
    if let Some(v) = udp {
        apply_yaml(&cluster.admin, &route_yaml("UDPRoute", v, "udp-media")).await;
    }
    if let Some(v) = tcp {
        apply_yaml(&cluster.admin, &route_yaml("TCPRoute", v, "tcp-media")).await;
    }
    let udp_listener = format!("{NS}/{GW}/udp-listener");
    let tcp_listener = format!("{NS}/{GW}/tcp-listener");
    let config = wait_config(&op, "every served route's cluster", |c| {
        udp.is_none_or(|_| route_cluster(c, "udp-media").is_some())
            && tcp.is_none_or(|_| route_cluster(c, "tcp-media").is_some())
    })
    .await;
    if let Some(version) = udp {
        let want = ("UDP", vec![udp_listener.as_str(), tcp_listener.as_str()]);
        assert_eq!(route_cluster(&config, "udp-media"), Some(want));
        wait_accepted(&cluster, "UDPRoute", version, "udp-media").await;
    }
    if let Some(version) = tcp {
        assert_eq!(
            route_cluster(&config, "tcp-media"),
            Some(("TCP", vec![tcp_listener.as_str()])),
            "TCP listener only"
        );
        wait_accepted(&cluster, "TCPRoute", version, "tcp-media").await;
    }
    assert_no_errors(&op);
    op.stop().await;
    Some(cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_7_standard_renders_v1_routes_and_its_policy_refuses_a_downgrade() {
    let cluster = renders_what_is_served("gwapi-v17-standard", GatewayApi::V17Standard, Some("v1"), Some("v1")).await;
    let Some(cluster) = cluster else { return };
    // The README's old install command (v1.4.0's experimental channel) is refused here.
    let old = gateway_api_dir("v1.4.0").join("config/crd/experimental/gateway.networking.k8s.io_gateways.yaml");
    let value: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(old).unwrap()).unwrap();
    let refused = wait_for("the safe-upgrades policy in force", || {
        let value = value.clone();
        let admin = cluster.admin.clone();
        async move { apply(&admin, value).await.err() }
    })
    .await;
    assert!(refused.to_string().contains("prohibited"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_7_experimental_renders_routes_written_as_v1alpha2_through_v1() {
    // Written as v1alpha2; the operator watches v1 (the same objects) and writes statuses there.
    renders_what_is_served("gwapi-v17-experimental", GatewayApi::V17Experimental, Some("v1alpha2"), Some("v1alpha2"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_4_experimental_renders_v1alpha2_routes() {
    renders_what_is_served("gwapi-v14-experimental", GatewayApi::V14Experimental, Some("v1alpha2"), Some("v1alpha2"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stunner_crds_alone_sync_and_log_no_error() {
    let Some(cluster) = Cluster::start_with("gwapi-none", GatewayApi::None).await else { return };
    // The CDS is served only after every watched kind synced: the Gateway API kinds count as
    // empty.
    let op = cluster.operator("op", &[]).await;
    assert!(op.config(NS, GW).await.is_none());
    assert!(op.log_contains("does not serve this kind"), "{}", op.log_tail(40));
    assert_no_errors(&op);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_v1_7_under_a_running_operator_is_followed_and_a_removed_kind_dropped() {
    let Some(cluster) = Cluster::start_with("gwapi-upgrade", GatewayApi::V14Experimental).await else { return };
    let mut op = cluster.operator("op", &[]).await;
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &base_yaml()).await;
    apply_yaml(&cluster.admin, &route_yaml("UDPRoute", "v1alpha2", "udp-media")).await;
    apply_yaml(&cluster.admin, &route_yaml("TCPRoute", "v1alpha2", "tcp-media")).await;
    wait_config(&op, "both clusters", |c| {
        route_cluster(c, "udp-media").is_some() && route_cluster(c, "tcp-media").is_some()
    })
    .await;

    install_gateway_api(&cluster.admin, GatewayApi::V17Standard).await;
    wait_for("the switch to v1 logged", || async {
        op.log_contains("TCPRoute: gateway.networking.k8s.io/v1").then_some(())
    })
    .await;
    // The same objects, now through v1: a change there is rendered and its status written.
    let mut route: Value = serde_yaml_ng::from_str(&route_yaml("UDPRoute", "v1", "udp-media")).unwrap();
    route["spec"]["parentRefs"][0]["sectionName"] = "udp-listener".into();
    apply(&cluster.admin, route).await.unwrap();
    let udp_listener = format!("{NS}/{GW}/udp-listener");
    wait_config(&op, "the v1 change rendered", |c| {
        route_cluster(c, "udp-media") == Some(("UDP", vec![udp_listener.as_str()]))
    })
    .await;
    wait_accepted(&cluster, "UDPRoute", "v1", "udp-media").await;
    assert!(cluster_has(&op, "tcp-media").await, "the TCPRoute stayed through the switch");

    // TCPRoutes stop being served: their cluster goes, the operator carries on.
    delete(
        &cluster.admin,
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
        "tcproutes.gateway.networking.k8s.io",
    )
    .await;
    wait_config(&op, "the TCP cluster dropped", |c| {
        route_cluster(c, "tcp-media").is_none() && route_cluster(c, "udp-media").is_some()
    })
    .await;
    wait_for("the TCPRoute removal logged", || async { op.log_contains("TCPRoute: not served").then_some(()) }).await;
    assert!(op.running());
    assert_no_errors(&op);
}

async fn cluster_has(op: &Operator, route: &str) -> bool {
    op.config(NS, GW).await.is_some_and(|c| route_cluster(&c, route).is_some())
}
