//! ListenerSets (GEP-1713, issue #58) against a real kube-apiserver with the Gateway API v1.7.0
//! standard CRDs and the RBAC of deploy/manifests/rbac.yaml: a shared TURN Gateway admits the
//! ListenerSets of namespaces labelled as tenants; a tenant's ListenerSet adds a TURN-TLS
//! listener with the tenant's certificate, which reaches the Gateway's config and Service
//! under its rendered name, with the ListenerSet's, the Gateway's and the tenant's route's
//! statuses written through the API server. Taking the label off the tenant's namespace takes
//! the listener out again and the ListenerSet is `NotAllowed`.

mod e2e;

use e2e::*;
use stunner_gateway::config::StunnerConfig;

const NS: &str = "stunner";
const TENANT: &str = "tenant-a";
const GW: &str = "shared";
const GROUP_VERSION: &str = "gateway.networking.k8s.io/v1";

/// The quickstart's class, config and dataplane, and a Gateway that takes ListenerSets from
/// namespaces labelled as tenants.
fn platform_yaml() -> String {
    let class = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    let gateway = format!(
        "apiVersion: {GROUP_VERSION}\nkind: Gateway\nmetadata:\n  name: {GW}\n  namespace: {NS}\n  \
         annotations: {{stunner.l7mp.io/enable-mixed-protocol-lb: \"true\"}}\nspec:\n  \
         gatewayClassName: stunner-gatewayclass\n  allowedListeners:\n    namespaces:\n      from: Selector\n      \
         selector: {{matchLabels: {{stunner.l7mp.io/tenant: \"true\"}}}}\n  \
         listeners: [{{name: udp, protocol: TURN-UDP, port: 3478}}]\n"
    );
    format!("{class}\n---\n{gateway}")
}

/// The tenant's namespace (`tenant` its label's value), certificate, ListenerSet, backend and
/// route through the ListenerSet's TLS listener.
fn tenant_yaml(tenant: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {TENANT}, labels: {{stunner.l7mp.io/tenant: \"{tenant}\"}}}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {{name: tenant-cert, namespace: {TENANT}}}\ntype: kubernetes.io/tls\n\
         data: {{tls.crt: dGVuYW50LWNlcnQ=, tls.key: dGVuYW50LWtleQ==}}\n---\n\
         apiVersion: {GROUP_VERSION}\nkind: ListenerSet\nmetadata: {{name: tls, namespace: {TENANT}}}\nspec:\n  \
         parentRef: {{name: {GW}, namespace: {NS}}}\n  listeners:\n  \
         - {{name: turn-tls, protocol: TURN-TLS, port: 443, tls: {{certificateRefs: [{{name: tenant-cert}}]}}}}\n---\n\
         apiVersion: stunner.l7mp.io/v1\nkind: StaticService\nmetadata: {{name: media, namespace: {TENANT}}}\n\
         spec: {{prefixes: [10.0.0.0/8]}}\n---\n\
         apiVersion: {GROUP_VERSION}\nkind: UDPRoute\nmetadata: {{name: media, namespace: {TENANT}}}\nspec:\n  \
         parentRefs: [{{kind: ListenerSet, name: tls, sectionName: turn-tls}}]\n  \
         rules: [{{backendRefs: [{{group: stunner.l7mp.io, kind: StaticService, name: media}}]}}]\n"
    )
}

/// The config's listener the tenant's ListenerSet added, if there is one.
fn tenant_listener(config: &StunnerConfig) -> Option<&stunner_gateway::config::ListenerConfig> {
    config.listeners.iter().find(|l| l.name.starts_with(&format!("{NS}/{GW}/turn-tls-")))
}

/// Whether `o`'s status has condition `type_` with `status` and `reason` for its generation.
fn has_condition(o: &kube::core::DynamicObject, type_: &str, status: &str, reason: &str) -> bool {
    let generation = o.metadata.generation;
    o.data["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
        c["type"] == type_
            && c["status"] == status
            && c["reason"] == reason
            && c["observedGeneration"].as_i64() == generation
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_listener_set_adds_a_turn_tls_listener_to_the_shared_gateway() {
    let Some(cluster) = Cluster::start_with("listenerset", GatewayApi::V17Standard).await else { return };
    let op = cluster.operator("op", &[]).await;
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &platform_yaml()).await;
    apply_yaml(&cluster.admin, &tenant_yaml("true")).await;

    let config = wait_for("the tenant's TLS listener with its routes in the shared config", || async {
        op.config(NS, GW).await.filter(|c| tenant_listener(c).is_some_and(|l| !l.routes.is_empty()))
    })
    .await;
    let listener = tenant_listener(&config).unwrap();
    assert_eq!((listener.protocol.as_str(), listener.port), ("TURN-TLS", 443));
    assert_eq!((listener.cert.as_str(), listener.key.as_str()), ("dGVuYW50LWNlcnQ=", "dGVuYW50LWtleQ=="));
    assert_eq!(listener.routes, [format!("{TENANT}/media")]);
    let port_name = listener.name.rsplit('/').next().unwrap().to_string();
    assert!(config.clusters.iter().any(|c| c.name == format!("{TENANT}/media")), "{config:?}");

    wait_object(&cluster.admin, "v1", "Service", Some(NS), GW, "the tenant's port on the shared Service", |s| {
        s.data["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|p| p["name"] == port_name.as_str() && p["port"] == 443)
    })
    .await;
    wait_object(&cluster.admin, GROUP_VERSION, "ListenerSet", Some(TENANT), "tls", "Accepted and Programmed", |o| {
        let listener = &o.data["status"]["listeners"][0];
        has_condition(o, "Accepted", "True", "Accepted")
            && has_condition(o, "Programmed", "True", "Programmed")
            && listener["name"] == "turn-tls"
            && listener["attachedRoutes"] == 1
    })
    .await;
    wait_object(&cluster.admin, GROUP_VERSION, "Gateway", Some(NS), GW, "one attached ListenerSet", |o| {
        o.data["status"]["attachedListenerSets"] == 1
    })
    .await;
    wait_object(&cluster.admin, GROUP_VERSION, "UDPRoute", Some(TENANT), "media", "accepted by the ListenerSet", |o| {
        o.data["status"]["parents"].as_array().into_iter().flatten().any(|p| {
            p["parentRef"]["kind"] == "ListenerSet"
                && p["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Accepted" && c["status"] == "True")
        })
    })
    .await;

    // The namespace no longer selected: the listener leaves the config, the ListenerSet is refused.
    apply_yaml(&cluster.admin, &tenant_yaml("false")).await;
    wait_for("the tenant's listener out of the config", || async {
        op.config(NS, GW).await.filter(|c| tenant_listener(c).is_none())
    })
    .await;
    wait_object(&cluster.admin, GROUP_VERSION, "ListenerSet", Some(TENANT), "tls", "NotAllowed", |o| {
        has_condition(o, "Accepted", "False", "NotAllowed")
    })
    .await;
    wait_object(&cluster.admin, GROUP_VERSION, "Gateway", Some(NS), GW, "no attached ListenerSet", |o| {
        o.data["status"]["attachedListenerSets"] == 0
    })
    .await;
    assert!(!op.log_contains(" ERROR "), "an error-level log line:\n{}", op.log_tail(80));
    op.assert_no_rbac_denials();
    op.stop().await;
}
