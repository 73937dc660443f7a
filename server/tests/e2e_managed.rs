//! The operator binary against a real kube-apiserver, in managed dataplane mode: the
//! quickstart, live updates, Gateway deletion and a restart (issue #6). The operator runs
//! as the ServiceAccount of deploy/manifests/rbac.yaml.

mod e2e;

use e2e::*;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;

const GW: &str = "gateway.networking.k8s.io/v1";
const NS: &str = "stunner";

async fn quickstart(cluster: &Cluster) {
    apply_yaml(&cluster.admin, &namespace_yaml(NS)).await;
    apply_yaml(&cluster.admin, &quickstart_yaml()).await;
}

/// Waits for the statuses the quickstart ends with: every object accepted, the Gateway programmed.
async fn wait_quickstart_statuses(cluster: &Cluster) -> (Value, Value, Value) {
    let c = &cluster.admin;
    let class = wait_object(c, GW, "GatewayClass", None, "stunner-gatewayclass", "Accepted", |o| {
        has_condition(&o.data["status"], "Accepted", "True", "Accepted")
    })
    .await;
    let gw = wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "Accepted and Programmed", |o| {
        let s = &o.data["status"];
        has_condition(s, "Accepted", "True", "Accepted") && has_condition(s, "Programmed", "True", "Programmed")
    })
    .await;
    let route = wait_object(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane", "Accepted", |o| {
        let p = &o.data["status"]["parents"][0];
        has_condition(p, "Accepted", "True", "Accepted") && has_condition(p, "ResolvedRefs", "True", "ResolvedRefs")
    })
    .await;
    (class.data["status"].clone(), gw.data["status"].clone(), route.data["status"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_statuses_owned_objects_and_config() {
    let Some(cluster) = Cluster::start("quickstart").await else { return };
    quickstart(&cluster).await;
    let op = cluster.operator("op", &[]).await;
    let c = &cluster.admin;

    let (class, gw_status, route) = wait_quickstart_statuses(&cluster).await;
    let gateway = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap();
    let generation = gateway.metadata.generation.unwrap();
    assert_eq!(condition(&class, "Accepted").unwrap()["observedGeneration"], 1);
    assert_eq!(condition(&gw_status, "Programmed").unwrap()["observedGeneration"], generation);
    let listeners = gw_status["listeners"].as_array().unwrap();
    let names: Vec<_> = listeners.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["udp-listener", "tcp-listener"]);
    for l in listeners {
        assert_eq!(l["attachedRoutes"], 1, "{l}");
        assert!(has_condition(l, "Accepted", "True", "Accepted"), "{l}");
        assert!(has_condition(l, "ResolvedRefs", "True", "ResolvedRefs"), "{l}");
        assert!(has_condition(l, "Conflicted", "False", "NoConflicts"), "{l}");
    }
    assert_eq!(gw_status["addresses"][0]["value"], "127.0.0.1");
    let parent = &route["parents"][0];
    assert_eq!(parent["controllerName"], "stunner.l7mp.io/gateway-operator");
    assert_eq!(parent["parentRef"]["name"], "udp-gateway");

    // Statuses are the operator's, written to the status subresource.
    for (av, kind, ns, name) in &QUICKSTART_WRITTEN[..3] {
        let o = get(c, av, kind, *ns, name).await.unwrap();
        assert!(
            managers(&o).contains(&("stunner-gateway-operator".into(), "status".into())),
            "{kind}: {:?}",
            managers(&o)
        );
    }

    // The LoadBalancer Service and the dataplane Deployment: owned by the Gateway, labelled.
    let uid = gateway.metadata.uid.clone().unwrap();
    let svc = wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "exists", |_| true).await;
    let dp = wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    for o in [&svc, &dp] {
        let kind = &o.types.as_ref().unwrap().kind;
        let owner = owner(o, "Gateway", "udp-gateway").unwrap_or_else(|| panic!("{kind} not owned by the Gateway"));
        assert_eq!(owner.uid, uid, "{kind}");
        assert_eq!(owner.api_version, GW, "{kind}");
        assert_eq!(label(o, "stunner.l7mp.io/owned-by"), Some("stunner"), "{kind}");
        assert_eq!(label(o, "stunner.l7mp.io/related-gateway-name"), Some("udp-gateway"), "{kind}");
        assert_eq!(label(o, "stunner.l7mp.io/related-gateway-namespace"), Some(NS), "{kind}");
        assert_eq!(managers(o), [("stunner-gateway-operator".to_string(), String::new())], "{kind}");
    }
    assert_eq!(svc.data["spec"]["type"], "LoadBalancer");
    let ports: Vec<_> = svc.data["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["protocol"].clone(), p["port"].clone()))
        .collect();
    assert_eq!(ports, [(json!("UDP"), json!(3478)), (json!("TCP"), json!(3478))]);
    let selector = &svc.data["spec"]["selector"];
    let pod_labels = &dp.data["spec"]["template"]["metadata"]["labels"];
    assert_eq!(selector["app"], "stunner");
    for (k, v) in selector.as_object().unwrap() {
        assert_eq!(&pod_labels[k], v, "the Service selects the dataplane pods ({k})");
    }
    let container = &dp.data["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"], "docker.io/l7mp/stunnerd:1.2.1",
        "the quickstart Dataplane pins the release the interop tests run"
    );
    let origin = container["env"].as_array().unwrap().iter().find(|e| e["name"] == "STUNNER_CONFIG_ORIGIN").cloned();
    assert!(origin.is_some(), "the dataplane is told where the CDS is: {container}");

    // The CDS serves the Gateway's config to a dataplane watching it.
    let mut ws = op.watch(NS, "udp-gateway").await;
    let config = config_until(&mut ws, "both listeners and the public address", |c| {
        c.listeners.len() == 2 && c.listeners.iter().all(|l| l.public_addr == "127.0.0.1")
    })
    .await;
    assert_eq!(config.admin.name, "stunner/udp-gateway");
    assert_eq!(config.auth.realm, "stunner.l7mp.io");
    assert_eq!(config.auth.credentials["username"], "user-1");
    assert_eq!(config.auth.credentials["password"], "pass-1");
    let listeners: Vec<_> = config.listeners.iter().map(|l| (l.name.as_str(), l.protocol.as_str(), l.port)).collect();
    assert_eq!(
        listeners,
        [
            ("stunner/udp-gateway/udp-listener", "TURN-UDP", 3478),
            ("stunner/udp-gateway/tcp-listener", "TURN-TCP", 3478)
        ]
    );
    assert!(config.listeners.iter().all(|l| l.routes == ["stunner/media-plane"]));
    assert_eq!(config.clusters.len(), 1);
    assert_eq!(config.clusters[0].name, "stunner/media-plane");
    assert_eq!(config.clusters[0].cluster_type, "STATIC");
    assert_eq!(config.clusters[0].endpoints, ["10.0.0.0/8", "127.0.0.1/32"]);
    assert_eq!(op.config(NS, "udp-gateway").await.as_ref(), Some(&config), "GET serves what the watch has");

    // A Gateway of the longest name the API allows (conformance `GatewayNameMaximumLength`):
    // its status is written and its Service and Deployment, which may not carry that name
    // (nor labels of that value), exist under the shortened one.
    let long = format!("long-{}", "a".repeat(248));
    let gateway = format!(
        "apiVersion: {GW}\nkind: Gateway\nmetadata: {{name: {long}, namespace: {NS}}}\n\
         spec:\n  gatewayClassName: stunner-gatewayclass\n  listeners: [{{name: udp, port: 3479, protocol: UDP}}]\n"
    );
    apply_yaml(c, &gateway).await;
    wait_object(c, GW, "Gateway", Some(NS), &long, "Accepted", |o| {
        let accepted = condition(&o.data["status"], "Accepted");
        accepted.is_some_and(|a| a["status"] == "True" && a["observedGeneration"] == o.metadata.generation.unwrap())
    })
    .await;
    let owned = stunner_gateway::render::owned_key(&stunner_gateway::index::ObjectKey::new(NS, &long)).name;
    assert!(owned.len() <= 63 && owned.starts_with("long-aaaa"), "{owned}");
    let service = wait_object(c, "v1", "Service", Some(NS), &owned, "created", |_| true).await;
    assert_eq!(label(&service, "gateway.networking.k8s.io/gateway-name"), Some(owned.as_str()));
    wait_object(c, "apps/v1", "Deployment", Some(NS), &owned, "created", |_| true).await;
    op.assert_no_rbac_denials();
}

const BACKEND: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: media-server
  namespace: stunner
spec:
  selector: {app: media-server}
  ports:
    - name: rtp
      port: 10000
      protocol: UDP
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata:
  name: media-route
  namespace: stunner
spec:
  parentRefs:
    - name: udp-gateway
      sectionName: udp-listener
  rules:
    - backendRefs:
        - name: media-server
"#;

const SLICE: &str = r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: media-server-abcde
  namespace: stunner
  labels:
    kubernetes.io/service-name: media-server
addressType: IPv4
endpoints:
  - addresses: ["10.244.1.7"]
    conditions: {ready: true}
  - addresses: ["10.244.2.9"]
    conditions: {ready: true}
ports:
  - name: rtp
    port: 10000
    protocol: UDP
"#;

fn cluster_endpoints(c: &stunner_gateway::config::StunnerConfig, name: &str) -> Vec<String> {
    c.clusters.iter().find(|cl| cl.name == name).map(|cl| cl.endpoints.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_updates_reach_the_cds_and_invalidation_removes_the_dataplane() {
    let Some(cluster) = Cluster::start("live").await else { return };
    quickstart(&cluster).await;
    let op = cluster.operator("op", &[]).await;
    let c = &cluster.admin;
    wait_quickstart_statuses(&cluster).await;
    let mut ws = op.watch(NS, "udp-gateway").await;
    config_until(&mut ws, "the quickstart", |c| c.listeners.len() == 2 && c.clusters.len() == 1).await;

    // A route to a Kubernetes Service: with endpoint discovery its cluster lists the
    // Service's ClusterIP, then the pod IPs its EndpointSlice adds.
    apply_yaml(c, BACKEND).await;
    let svc = wait_object(c, "v1", "Service", Some(NS), "media-server", "ClusterIP", |o| {
        o.data["spec"]["clusterIP"].is_string()
    })
    .await;
    let cluster_ip = svc.data["spec"]["clusterIP"].as_str().unwrap().to_string();
    let config =
        config_until(&mut ws, "the route's cluster", |c| c.clusters.iter().any(|cl| cl.name == "stunner/media-route"))
            .await;
    assert!(!cluster_endpoints(&config, "stunner/media-route").iter().any(|e| e.starts_with("10.244.")));
    let udp = config.listeners.iter().find(|l| l.name.ends_with("/udp-listener")).unwrap();
    assert!(udp.routes.contains(&"stunner/media-route".to_string()), "{:?}", udp.routes);
    let tcp = config.listeners.iter().find(|l| l.name.ends_with("/tcp-listener")).unwrap();
    assert!(!tcp.routes.contains(&"stunner/media-route".to_string()), "sectionName limits the route: {:?}", tcp.routes);

    apply_yaml(c, SLICE).await;
    let config = config_until(&mut ws, "the EndpointSlice's addresses", |c| {
        let eps = cluster_endpoints(c, "stunner/media-route");
        eps.contains(&"10.244.1.7".to_string()) && eps.contains(&"10.244.2.9".to_string())
    })
    .await;
    let eps = cluster_endpoints(&config, "stunner/media-route");
    assert!(eps.contains(&cluster_ip), "the ClusterIP stays in the cluster: {eps:?}");
    // One endpoint goes away.
    apply_yaml(c, &SLICE.replace("  - addresses: [\"10.244.2.9\"]\n    conditions: {ready: true}\n", "")).await;
    config_until(&mut ws, "the removed endpoint gone", |c| {
        let eps = cluster_endpoints(c, "stunner/media-route");
        eps.contains(&"10.244.1.7".to_string()) && !eps.contains(&"10.244.2.9".to_string())
    })
    .await;
    // Statuses are written off the render path, so the route's refs may resolve a write later
    // than it is accepted: wait for both.
    wait_object(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-route", "Accepted and ResolvedRefs", |o| {
        let p = &o.data["status"]["parents"][0];
        has_condition(p, "Accepted", "True", "Accepted")
            && has_condition(p, "ResolvedRefs", "True", "ResolvedRefs")
            && p["parentRef"]["sectionName"] == "udp-listener"
    })
    .await;

    // Another tool owns fields of the Service (an annotation, a label, session affinity
    // timeouts): the operator's next apply of the Service leaves them alone.
    let foreign = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "udp-gateway", "namespace": NS,
                     "annotations": {"example.com/owner": "someone-else"}, "labels": {"example.com/team": "media"}},
    });
    let services = api_for(c, "v1", "Service", Some(NS)).await;
    services
        .patch("udp-gateway", &kube::api::PatchParams::apply("another-tool"), &kube::api::Patch::Apply(&foreign))
        .await
        .unwrap();

    // A listener changes port and a new one is added: the config, the Service and the
    // Gateway's listener statuses follow.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    let changed = gateway
        .replace("    - name: tcp-listener\n      port: 3478\n", "    - name: tcp-listener\n      port: 3479\n")
        .replace("  listeners:\n", "  listeners:\n    - name: extra-listener\n      port: 3480\n      protocol: UDP\n");
    assert_ne!(changed, gateway);
    apply_yaml(c, &changed).await;
    // Every version on the way has every listener's public address: the config waited for
    // the Service's new ports instead of being pushed without them first.
    let seen = std::sync::Mutex::new(Vec::new());
    let config = config_until(&mut ws, "three listeners, the TCP one on 3479", |c| {
        seen.lock().unwrap().push(c.clone());
        c.listeners.len() == 3 && c.listeners.iter().any(|l| l.name.ends_with("/tcp-listener") && l.port == 3479)
    })
    .await;
    let seen = seen.into_inner().unwrap();
    let unaddressed: Vec<_> = seen.iter().flat_map(|c| &c.listeners).filter(|l| l.public_addr.is_empty()).collect();
    assert!(unaddressed.is_empty(), "published without a public address: {unaddressed:?}");
    assert!(config.listeners.iter().any(|l| l.name == "stunner/udp-gateway/extra-listener" && l.port == 3480));
    wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "the new ports", |o| {
        let mut ports: Vec<_> =
            o.data["spec"]["ports"].as_array().unwrap().iter().map(|p| p["port"].as_i64().unwrap()).collect();
        ports.sort();
        ports == [3478, 3479, 3480]
    })
    .await;
    let service = get(c, "v1", "Service", Some(NS), "udp-gateway").await.unwrap();
    assert_eq!(
        service.metadata.annotations.as_ref().unwrap().get("example.com/owner").map(String::as_str),
        Some("someone-else")
    );
    assert_eq!(
        label(&service, "example.com/team"),
        Some("media"),
        "another manager's label survives the operator's apply"
    );
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "three listener statuses", |o| {
        o.data["status"]["listeners"].as_array().is_some_and(|l| l.len() == 3)
            && condition(&o.data["status"], "Programmed").is_some_and(|p| p["observedGeneration"] == 2)
    })
    .await;

    // The class's GatewayConfig goes: the Gateway is invalidated, its watchers get the zero
    // config and the operator deletes the Service and the Deployment.
    let class_yaml = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gatewayclass.yaml")).unwrap();
    delete(c, "stunner.l7mp.io/v1", "GatewayConfig", Some(NS), "stunner-gatewayconfig").await;
    let zero = config_until(&mut ws, "the zero config", is_zero).await;
    assert_eq!(zero.admin.name, "stunner/udp-gateway");
    wait_gone(c, "v1", "Service", Some(NS), "udp-gateway").await;
    wait_gone(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await;
    wait_object(c, GW, "GatewayClass", None, "stunner-gatewayclass", "InvalidParameters", |o| {
        has_condition(&o.data["status"], "Accepted", "False", "InvalidParameters")
    })
    .await;
    // It comes back: so do the config, the Service and the Deployment.
    apply_yaml(c, &class_yaml).await;
    config_until(&mut ws, "the config again", |c| c.listeners.len() == 3).await;
    let svc = wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "re-created", |_| true).await;
    let dp = wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "re-created", |_| true).await;

    // The Gateway goes: its watchers get the zero config, and the operator deletes the Service
    // and the Deployment itself (no garbage collector runs here; upstream leaves them to it).
    let uid = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap().metadata.uid.unwrap();
    for (o, kind) in [(&svc, "Service"), (&dp, "Deployment")] {
        assert_eq!(owner(o, "Gateway", "udp-gateway").map(|r| r.uid.clone()), Some(uid.clone()), "{kind}");
    }
    delete(c, GW, "Gateway", Some(NS), "udp-gateway").await;
    let zero = config_until(&mut ws, "the zero config", is_zero).await;
    assert_eq!(zero.admin.name, "stunner/udp-gateway");
    wait_gone(c, GW, "Gateway", Some(NS), "udp-gateway").await;
    wait_gone(c, "v1", "Service", Some(NS), "udp-gateway").await;
    wait_gone(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await;
    // (The route's status stays as it was: a route whose parents are all gone is no longer
    // the operator's to report on, as upstream does; spec operator-behavior.md §4.1 step 3.)
    assert!(op.config(NS, "udp-gateway").await.is_none_or(|c| is_zero(&c)));
    op.assert_no_rbac_denials();
}

const ENDPOINTS: &str = r#"
apiVersion: v1
kind: Endpoints
metadata:
  name: media-server
  namespace: stunner
subsets:
  - addresses: [{ip: 10.244.3.3}]
    notReadyAddresses: [{ip: 10.244.4.4}]
    ports: [{name: rtp, port: 10000, protocol: UDP}]
"#;

/// `--disable-endpontslice-controller`: endpoints come from Endpoints objects instead, ready
/// or not (as upstream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_mode_reads_endpoints_objects() {
    let Some(cluster) = Cluster::start("endpoints").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    apply_yaml(c, BACKEND).await;
    apply_yaml(c, SLICE).await; // ignored in this mode
    let op = cluster.operator("op", &["--disable-endpontslice-controller"]).await;
    let mut ws = op.watch(NS, "udp-gateway").await;
    config_until(&mut ws, "the route's cluster", |c| c.clusters.iter().any(|cl| cl.name == "stunner/media-route"))
        .await;
    apply_yaml(c, ENDPOINTS).await;
    let config = config_until(&mut ws, "the Endpoints' addresses", |c| {
        cluster_endpoints(c, "stunner/media-route").contains(&"10.244.3.3".to_string())
    })
    .await;
    let eps = cluster_endpoints(&config, "stunner/media-route");
    assert!(eps.contains(&"10.244.4.4".to_string()), "not-ready addresses count too: {eps:?}");
    assert!(!eps.iter().any(|e| e == "10.244.1.7"), "EndpointSlices are not read: {eps:?}");
    op.assert_no_rbac_denials();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_operator_writes_nothing_and_serves_the_same_config() {
    let Some(cluster) = Cluster::start("restart").await else { return };
    quickstart(&cluster).await;
    // The same CDS port for both runs: it is part of the Deployment (STUNNER_CONFIG_ORIGIN).
    let port = free_port();
    let cds = format!("127.0.0.1:{port}");
    let args = ["--config-discovery-address", cds.as_str()];
    let op = cluster.operator("first", &args).await;
    wait_quickstart_statuses(&cluster).await;
    wait_object(&cluster.admin, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    let mut ws = op.watch(NS, "udp-gateway").await;
    let before = config_until(&mut ws, "the converged config", |c| {
        c.listeners.len() == 2 && c.listeners.iter().all(|l| l.public_addr == "127.0.0.1")
    })
    .await;
    let versions_before = settle(&cluster.admin, &QUICKSTART_WRITTEN).await;
    assert!(versions_before.iter().all(|(_, v)| v.is_some()), "{versions_before:?}");
    op.stop().await;
    // A dataplane watching the stopping process sees its watch end, never a zero config
    // (which it would take as "delete everything").
    let last = drain(&mut ws, Duration::from_secs(2)).await;
    assert!(last.iter().all(|c| !is_zero(c)), "a stopping operator pushed a zero config: {last:?}");

    let metrics = format!("127.0.0.1:{}", free_port());
    let second: Vec<&str> = args.iter().copied().chain(["--metrics-bind-address", metrics.as_str()]).collect();
    let op = cluster.operator("second", &second).await;
    let mut ws = op.watch(NS, "udp-gateway").await;
    let first = next_config(&mut ws).await;
    assert_eq!(first, before, "the new process serves the same config from its first frame");
    // Nothing else arrives: no zero config, no intermediate version.
    let later = drain(&mut ws, Duration::from_secs(5)).await;
    assert!(later.is_empty(), "unexpected configs after a restart: {later:?}");
    let versions_after = settle(&cluster.admin, &QUICKSTART_WRITTEN).await;
    assert_eq!(versions_after, versions_before, "a restart with nothing changed writes nothing");
    // Not even a write the API server would have found to change nothing: what our field
    // manager owns in each object is what the new process would apply.
    let metrics = metrics.parse().unwrap();
    let suppressed =
        metric_sum(metrics, "stunner_gateway_operator_resource_operations_total{", "operation=\"suppressed\"");
    assert!(suppressed.await >= QUICKSTART_WRITTEN.len() as f64, "every write was considered and skipped");
    assert_eq!(write_attempts(metrics).await, 0.0, "no write was sent");
    assert!(op.log_contains("initial sync of every watched kind complete"));
    op.assert_no_rbac_denials();
}

const OTHER_OPERATOR: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: other-class
spec:
  controllerName: example.com/other-operator
  parametersRef:
    group: stunner.l7mp.io
    kind: GatewayConfig
    name: stunner-gatewayconfig
    namespace: stunner
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: other-gateway
  namespace: stunner
spec:
  gatewayClassName: other-class
  listeners:
    - name: udp-listener
      port: 3478
      protocol: UDP
"#;

/// The ports of a Service, sorted.
/// A Gateway's Service is written once (issue #62): the render its creation's watch event
/// sets off carries over the node ports the API server allocated, which an apply would only
/// take ownership of, so nothing is written. Then a listener's port changes: the Service keeps
/// the node port allocated for the listener (upstream merges ports by name and keeps it), also
/// after the renders the change's one write sets off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_service_is_written_once_and_keeps_its_node_port() {
    let Some(cluster) = Cluster::start("managed-service-once").await else { return };
    quickstart(&cluster).await;
    let metrics = format!("127.0.0.1:{}", free_port());
    let op = cluster.operator("service-once", &["--metrics-bind-address", &metrics]).await;
    let metrics = metrics.parse().unwrap();
    wait_quickstart_statuses(&cluster).await;
    let udp_node_port = |o: &kube::api::DynamicObject, port: i64| {
        let ports = o.data["spec"]["ports"].as_array().cloned().unwrap_or_default();
        ports.iter().find(|p| p["name"] == "udp-listener" && p["port"] == port).and_then(|p| p["nodePort"].as_i64())
    };
    let service = wait_object(&cluster.admin, "v1", "Service", Some(NS), "udp-gateway", "node ports", |o| {
        udp_node_port(o, 3478).is_some()
    })
    .await;
    let node_port = udp_node_port(&service, 3478).unwrap();
    // Whatever the Service's watch event made the operator render is written by now.
    settle(&cluster.admin, &QUICKSTART_WRITTEN).await;
    let service_writes = async || {
        let filter = "kind=\"Service\",operation=\"attempt\"";
        metric_sum(metrics, "stunner_gateway_operator_resource_operations_total{", filter).await
    };
    assert_eq!(service_writes().await, 1.0, "the Service is written once");

    let gateways = api_for(&cluster.admin, GW, "Gateway", Some(NS)).await;
    let listeners = json!({"spec": {"listeners": [
        {"name": "udp-listener", "port": 3479, "protocol": "UDP"},
        {"name": "tcp-listener", "port": 3478, "protocol": "TCP"},
    ]}});
    gateways.patch("udp-gateway", &PatchParams::default(), &Patch::Merge(&listeners)).await.unwrap();
    let service = wait_object(&cluster.admin, "v1", "Service", Some(NS), "udp-gateway", "the new port", |o| {
        udp_node_port(o, 3479).is_some()
    })
    .await;
    assert_eq!(udp_node_port(&service, 3479), Some(node_port), "the node port is kept over the port change");
    settle(&cluster.admin, &QUICKSTART_WRITTEN).await;
    let service = get(&cluster.admin, "v1", "Service", Some(NS), "udp-gateway").await.unwrap();
    assert_eq!(udp_node_port(&service, 3479), Some(node_port), "and after the renders that follow it");
    assert_eq!(service_writes().await, 2.0, "the change is written once");
    op.assert_no_rbac_denials();
}

async fn service_ports(c: &kube::Client, name: &str, ports: &[i64]) -> kube::api::DynamicObject {
    wait_object(c, "v1", "Service", Some(NS), name, "its ports", |o| {
        let mut have: Vec<i64> =
            o.data["spec"]["ports"].as_array().into_iter().flatten().filter_map(|p| p["port"].as_i64()).collect();
        have.sort();
        have == ports
    })
    .await
}

/// Two STUNner operators with different `--controller-name` in one cluster (both label their
/// dataplanes `stunner.l7mp.io/owned-by: stunner`): neither deletes the other's Service or
/// Deployment. Each is known to have rendered the other's objects once a later change of its
/// own Gateway is written; the objects then still have their first uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_leave_each_others_dataplanes_alone() {
    let Some(cluster) = Cluster::start("two-operators").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    let ours = cluster.operator("ours", &[]).await;
    wait_quickstart_statuses(&cluster).await;
    apply_yaml(c, OTHER_OPERATOR).await;
    let other = cluster.operator("other", &["--controller-name=example.com/other-operator"]).await;
    let first = |o: &kube::api::DynamicObject| o.metadata.uid.clone().unwrap();
    let our_svc = first(&service_ports(c, "udp-gateway", &[3478, 3478]).await);
    let other_svc = first(&service_ports(c, "other-gateway", &[3478]).await);
    let our_dp = first(&wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "made", |_| true).await);
    let other_dp = first(&wait_object(c, "apps/v1", "Deployment", Some(NS), "other-gateway", "made", |_| true).await);

    // A new listener on each Gateway: once each operator has written its Service's new port,
    // it has also rendered (and so decided about) the other's Gateway before.
    let gateway = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    let extra = "  listeners:\n    - name: extra-listener\n      port: 3480\n      protocol: UDP\n";
    apply_yaml(c, &gateway.replace("  listeners:\n", extra)).await;
    apply_yaml(c, &OTHER_OPERATOR.replace("  listeners:\n", extra)).await;
    let our_now = service_ports(c, "udp-gateway", &[3478, 3478, 3480]).await;
    let other_now = service_ports(c, "other-gateway", &[3478, 3480]).await;
    assert_eq!((first(&our_now), first(&other_now)), (our_svc, other_svc), "no Service was deleted");
    for (name, uid) in [("udp-gateway", our_dp), ("other-gateway", other_dp)] {
        let dp = get(c, "apps/v1", "Deployment", Some(NS), name).await.expect("still there");
        assert_eq!(first(&dp), uid, "the Deployment of {name} was not deleted");
    }
    let made_by = |o: &kube::api::DynamicObject| {
        o.metadata.annotations.as_ref().unwrap()["stunner.l7mp.io/controller-name"].clone()
    };
    assert_eq!(made_by(&our_now), "stunner.l7mp.io/gateway-operator");
    assert_eq!(made_by(&other_now), "example.com/other-operator");
    ours.assert_no_rbac_denials();
    other.assert_no_rbac_denials();
}

/// A DaemonSet dataplane of ours lingering under a Gateway's name (labelled as ours, say from
/// an operator that ran DaemonSets).
const LINGERING_DAEMON_SET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: udp-gateway
  namespace: stunner
  labels: {stunner.l7mp.io/owned-by: stunner}
spec:
  selector: {matchLabels: {app: stunner}}
  template:
    metadata: {labels: {app: stunner}}
    spec:
      containers: [{name: stunnerd, image: docker.io/l7mp/stunnerd:latest}]
"#;

/// DaemonSets are watched: no DELETE is sent for a DaemonSet that is not there (upstream sends
/// one per Gateway), and one that appears under a Gateway's name, after its Deployment, is
/// deleted once the Deployment has an available pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_daemon_set_is_deleted() {
    let Some(cluster) = Cluster::start("daemon-set").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    let metrics = format!("127.0.0.1:{}", free_port());
    let op = cluster.operator("op", &["--metrics-bind-address", &metrics]).await;
    let metrics = metrics.parse().unwrap();
    wait_quickstart_statuses(&cluster).await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "exists", |_| true).await;
    let daemon_set_writes = || {
        metric_sum(
            metrics,
            "stunner_gateway_operator_resource_operations_total{",
            "kind=\"DaemonSet\",operation=\"attempt\"",
        )
    };
    assert_eq!(daemon_set_writes().await, 0.0, "no DaemonSet, no DELETE");

    apply_yaml(c, LINGERING_DAEMON_SET).await;
    // It goes once the Deployment serves: no controller runs here to say so, so the test does.
    let deployments = api_for(c, "apps/v1", "Deployment", Some(NS)).await;
    let available = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}});
    let params = kube::api::PatchParams::default();
    deployments.patch_status("udp-gateway", &params, &kube::api::Patch::Merge(&available)).await.unwrap();
    wait_gone(c, "apps/v1", "DaemonSet", Some(NS), "udp-gateway").await;
    let deleted = "kind=\"DaemonSet\",operation=\"deleted\"";
    wait_for("the DELETE counted", || async {
        (metric_sum(metrics, "stunner_gateway_operator_resource_operations_total{", deleted).await == 1.0).then_some(())
    })
    .await;
    assert_eq!(daemon_set_writes().await, 1.0, "one DELETE, for the DaemonSet that was there");
    op.assert_no_rbac_denials();
}

/// The quickstart's Dataplane with more of everything, each item a thing a user may remove:
/// pod labels and annotations, an env var, a toleration.
const RICH_DATAPLANE: &str = r#"
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata:
  name: default
spec:
  replicas: 1
  image: docker.io/l7mp/stunnerd:latest
  command: ["stunnerd"]
  args: ["-w"]
  labels: {dummy-label-key: dummy, kept-label: kept}
  annotations: {sidecar.example.com/inject: "true", kept-annotation: kept}
  env:
    - {name: EXTRA_A, value: "a"}
    - {name: EXTRA_B, value: "b"}
  tolerations:
    - {key: node.example.com/a, operator: Exists}
    - {key: node.example.com/b, operator: Exists}
"#;

/// A line taken out of the Dataplane, what it is, and how its absence shows in the pod template.
type Removal = (&'static str, &'static str, fn(&Value) -> bool);

/// The pod template of the Gateway's Deployment.
fn pod_template(deployment: &kube::api::DynamicObject) -> &Value {
    &deployment.data["spec"]["template"]
}

fn keys(map: &Value) -> Vec<String> {
    map.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array().into_iter().flatten().filter_map(|e| e[field].as_str().map(String::from)).collect()
}

/// Every removal reaches the live objects, although they still hold every value the smaller
/// render asks for: a server-side apply removes a field our manager set only when it is
/// sent. Fields another manager set (on the Service and in the pod template) stay. The
/// Gateway's `spec.infrastructure` labels and annotations reach the Service, the Deployment
/// and its pod template beside the Gateway API's name labels, and leave them when the Gateway
/// drops them, while the name labels stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_removal_reaches_the_live_objects_and_foreign_fields_stay() {
    let Some(cluster) = Cluster::start("removals").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    apply_yaml(c, RICH_DATAPLANE).await;
    let gateway_yaml = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    let labelled = gateway_yaml.replace("  annotations:\n", "  labels: {gateway-label: x}\n  annotations:\n").replace(
        "spec:\n",
        "spec:\n  infrastructure: {labels: {infra-label: y}, annotations: {infra-annotation: z}}\n",
    );
    assert!(labelled.contains("infra-label"));
    apply_yaml(c, &labelled).await;
    let op = cluster.operator("op", &[]).await;
    let full = wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "every item", |o| {
        let pod = pod_template(o);
        keys(&pod["metadata"]["labels"]).contains(&"dummy-label-key".to_string())
            && names(&pod["spec"]["tolerations"], "key").len() == 2
    })
    .await;
    let pod_metadata = &pod_template(&full)["metadata"];
    for (what, labels, annotations) in [
        ("the Deployment", json!(full.metadata.labels), json!(full.metadata.annotations)),
        ("the pod template", pod_metadata["labels"].clone(), pod_metadata["annotations"].clone()),
    ] {
        assert_eq!(labels["infra-label"], "y", "{what}: {labels}");
        assert_eq!(labels["gateway.networking.k8s.io/gateway-name"], "udp-gateway", "{what}: {labels}");
        assert_eq!(labels["gateway.networking.k8s.io/gateway-class-name"], "stunner-gatewayclass", "{what}");
        assert_eq!(annotations["infra-annotation"], "z", "{what}: {annotations}");
    }
    let infra_gone = |o: &kube::api::DynamicObject| {
        let annotations = o.metadata.annotations.as_ref();
        label(o, "infra-label").is_none()
            && annotations.is_some_and(|a| !a.contains_key("infra-annotation"))
            && label(o, "gateway.networking.k8s.io/gateway-name") == Some("udp-gateway")
    };
    let env = &pod_template(&full)["spec"]["containers"][0]["env"];
    assert!(names(env, "name").contains(&"EXTRA_B".to_string()), "{env}");
    let svc = service_ports(c, "udp-gateway", &[3478, 3478]).await;
    assert_eq!(label(&svc, "infra-label"), Some("y"));
    assert_eq!(label(&svc, "gateway.networking.k8s.io/gateway-class-name"), Some("stunner-gatewayclass"));
    assert_eq!(svc.metadata.annotations.as_ref().unwrap()["infra-annotation"], "z");

    // Another manager adds a label and an annotation to the pod template and to the Service.
    for (api_version, kind, body) in [
        (
            "apps/v1",
            "Deployment",
            json!({"spec": {"template": {"metadata": {
            "labels": {"example.com/foreign": "x"}, "annotations": {"example.com/foreign": "x"}}}}}),
        ),
        (
            "v1",
            "Service",
            json!({"metadata": {"labels": {"example.com/foreign": "x"}, "annotations": {"example.com/foreign": "x"}}}),
        ),
    ] {
        let mut body = body;
        body["apiVersion"] = api_version.into();
        body["kind"] = kind.into();
        body["metadata"]["name"] = "udp-gateway".into();
        let api = api_for(c, api_version, kind, Some(NS)).await;
        api.patch("udp-gateway", &kube::api::PatchParams::apply("another-tool"), &kube::api::Patch::Apply(&body))
            .await
            .unwrap();
    }

    // The user takes things away one at a time, each a render of its own: a pod label, a pod
    // annotation, an env var and a toleration from the Dataplane, the Gateway's label, and
    // the TCP listener (the Service's TCP port). After each, the live objects still hold every
    // value the smaller render asks for; only the apply removes what it no longer sets.
    let mut dataplane = RICH_DATAPLANE.to_string();
    let removals: [Removal; 4] = [
        ("dummy-label-key: dummy, ", "the pod label", |pod| {
            !keys(&pod["metadata"]["labels"]).contains(&"dummy-label-key".to_string())
        }),
        ("sidecar.example.com/inject: \"true\", ", "the pod annotation", |pod| {
            !keys(&pod["metadata"]["annotations"]).contains(&"sidecar.example.com/inject".to_string())
        }),
        ("    - {name: EXTRA_B, value: \"b\"}\n", "the env var", |pod| {
            !names(&pod["spec"]["containers"][0]["env"], "name").contains(&"EXTRA_B".to_string())
        }),
        ("    - {key: node.example.com/b, operator: Exists}\n", "the toleration", |pod| {
            names(&pod["spec"]["tolerations"], "key") == ["node.example.com/a"]
        }),
    ];
    for (item, what, gone) in removals {
        let smaller = dataplane.replace(item, "");
        assert_ne!(smaller, dataplane, "{what}");
        dataplane = smaller;
        apply_yaml(c, &dataplane).await;
        wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", &format!("{what} removed"), |o| {
            gone(pod_template(o))
        })
        .await;
    }
    apply_yaml(c, &gateway_yaml).await;
    wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "the Gateway's label removed", |o| {
        label(o, "gateway-label").is_none()
    })
    .await;
    wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "the Gateway's label removed", |o| {
        label(o, "gateway-label").is_none()
    })
    .await;
    wait_object(c, "v1", "Service", Some(NS), "udp-gateway", "the infrastructure metadata removed", infra_gone).await;
    let deployment =
        wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "the infrastructure metadata removed", |o| {
            let pod = &pod_template(o)["metadata"];
            infra_gone(o)
                && pod["labels"].get("infra-label").is_none()
                && pod["annotations"].get("infra-annotation").is_none()
        })
        .await;
    assert_eq!(
        pod_template(&deployment)["metadata"]["labels"]["gateway.networking.k8s.io/gateway-name"],
        "udp-gateway"
    );
    let one_listener = gateway_yaml.replace("    - name: tcp-listener\n      port: 3478\n      protocol: TCP\n", "");
    assert_ne!(one_listener, gateway_yaml);
    apply_yaml(c, &one_listener).await;
    let service = service_ports(c, "udp-gateway", &[3478]).await;
    assert_eq!(service.data["spec"]["ports"][0]["protocol"], "UDP", "the TCP port is gone");

    let deployment = get(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await.unwrap();
    let pod = pod_template(&deployment);
    assert!(names(&pod["spec"]["containers"][0]["env"], "name").contains(&"EXTRA_A".to_string()));
    assert_eq!(pod["metadata"]["labels"]["kept-label"], "kept");
    assert_eq!(pod["metadata"]["annotations"]["kept-annotation"], "kept");
    assert_eq!(pod["metadata"]["labels"]["example.com/foreign"], "x", "another manager's pod label stays");
    assert_eq!(pod["metadata"]["annotations"]["example.com/foreign"], "x", "another manager's pod annotation stays");
    assert_eq!(label(&service, "example.com/foreign"), Some("x"));
    assert_eq!(service.metadata.annotations.as_ref().unwrap()["example.com/foreign"], "x");
    op.assert_no_rbac_denials();
}

/// Statuses lead the objects of the same render (as upstream's updater writes them): once
/// the Deployment shows a change, the Gateway's and the route's statuses already show it
/// (they were written before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_are_written_before_the_objects_of_their_render() {
    let Some(cluster) = Cluster::start("status-order").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    let op = cluster.operator("op", &[]).await;
    wait_quickstart_statuses(&cluster).await;
    let gateway_yaml = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/gateway.yaml")).unwrap();
    let route_yaml = std::fs::read_to_string(repo_root().join("deploy/examples/quickstart/route.yaml")).unwrap();
    for step in 1..=4 {
        // The route changes (a new generation), then the Gateway: a label the Deployment
        // carries and a listener change that leaves the Service as it is.
        let from = if step % 2 == 0 { "Same" } else { "All" };
        let route = route_yaml.replace(
            "          name: media-servers\n",
            &format!("          name: media-servers\n          port: {}\n", 9000 + step),
        );
        assert_ne!(route, route_yaml);
        let route_generation = apply_yaml(c, &route).await[0].metadata.generation.unwrap();
        let gateway = gateway_yaml
            .replace("  annotations:\n", &format!("  labels: {{step: \"{step}\"}}\n  annotations:\n"))
            .replace(
                "      protocol: UDP\n",
                &format!("      protocol: UDP\n      allowedRoutes: {{namespaces: {{from: {from}}}}}\n"),
            );
        let gateway_generation = apply_yaml(c, &gateway).await[0].metadata.generation.unwrap();
        let step_label = step.to_string();
        wait_object(c, "apps/v1", "Deployment", Some(NS), "udp-gateway", "the step's label", |o| {
            label(o, "step") == Some(step_label.as_str())
        })
        .await;
        wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "the step's generation", |o| {
            condition(&o.data["status"], "Programmed").is_some_and(|p| p["observedGeneration"] == gateway_generation)
        })
        .await;
        wait_object(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane", "the step's generation", |o| {
            condition(&o.data["status"]["parents"][0], "Accepted")
                .is_some_and(|a| a["observedGeneration"] == route_generation)
        })
        .await;
        // Each was written once in this step: the order of their revisions is the order of
        // the writes.
        let deployment = revision(c, "apps/v1", "Deployment", Some(NS), "udp-gateway").await;
        let gateway = revision(c, GW, "Gateway", Some(NS), "udp-gateway").await;
        let route = revision(c, "stunner.l7mp.io/v1", "UDPRoute", Some(NS), "media-plane").await;
        assert!(
            gateway < deployment,
            "step {step}: the Gateway's status ({gateway}) after the Deployment ({deployment})"
        );
        assert!(route < deployment, "step {step}: the route's status ({route}) after the Deployment ({deployment})");
    }
    op.assert_no_rbac_denials();
}

/// The served config's listener of that name, if any.
fn served_listener<'a>(
    config: &'a stunner_gateway::config::StunnerConfig,
    name: &str,
) -> Option<&'a stunner_gateway::config::ListenerConfig> {
    config.listeners.iter().find(|l| l.name == name)
}

/// Whether the Gateway's status shows listener `name` with a `ResolvedRefs` of that status
/// and reason.
fn listener_resolved(gateway: &kube::api::DynamicObject, name: &str, status: &str, reason: &str) -> bool {
    let listeners = gateway.data["status"]["listeners"].as_array();
    listeners
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .is_some_and(|l| has_condition(l, "ResolvedRefs", status, reason))
}

/// Issue #56 on a real API server: a TURN-TLS listener whose certificate Secret is in another
/// namespace gets no key in the served config (and `ResolvedRefs=False RefNotPermitted`) until
/// a ReferenceGrant there allows it, then the key, then none again once the grant is deleted.
async fn a_foreign_certificate_is_served_only_under_a_reference_grant(cluster: &Cluster, op: &Operator, key: &str) {
    use base64::Engine;
    let c = &cluster.admin;
    let b64_key = base64::engine::general_purpose::STANDARD.encode(key);
    apply_yaml(c, &namespace_yaml("victim")).await;
    apply_yaml(
        c,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: victim-tls, namespace: victim}}\ntype: kubernetes.io/tls\n\
             stringData: {{tls.crt: victim-cert, tls.key: {key:?}}}\n"
        ),
    )
    .await;
    let foreign = json!({"name": "foreign-tls", "port": 5349, "protocol": "TURN-TLS",
        "tls": {"mode": "Terminate", "certificateRefs": [{"name": "victim-tls", "namespace": "victim"}]}});
    let mut gateway = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap();
    gateway.data["spec"]["listeners"].as_array_mut().unwrap().push(foreign);
    gateway.metadata.managed_fields = None;
    gateway.metadata.resource_version = None;
    apply(c, serde_json::to_value(&gateway).unwrap()).await.unwrap();
    let refused = wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "the foreign certificate refused", |o| {
        listener_resolved(o, "foreign-tls", "False", "RefNotPermitted")
    })
    .await;
    let programmed = condition(&refused.data["status"], "Programmed").unwrap();
    assert_eq!((&programmed["status"], &programmed["reason"]), (&json!("False"), &json!("Invalid")), "{programmed}");
    assert!(programmed["message"].as_str().unwrap().contains("victim/victim-tls"), "{programmed}");
    let listener = |name: &str| format!("{NS}/udp-gateway/{name}");
    let config = op.config(NS, "udp-gateway").await.unwrap();
    assert!(served_listener(&config, &listener("tls-listener")).is_some(), "the same-namespace TLS listener stays");
    assert!(served_listener(&config, &listener("foreign-tls")).is_none(), "{:?}", config.listeners);
    assert!(config.listeners.iter().all(|l| l.key != b64_key), "no foreign key served");

    let grant = "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
                 metadata: {name: turn-certificates, namespace: victim}\n\
                 spec: {from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: stunner}], \
                 to: [{group: '', kind: Secret, name: victim-tls}]}\n";
    apply_yaml(c, grant).await;
    let granted = wait_for("the foreign key served under the grant", || async {
        op.config(NS, "udp-gateway").await.filter(|s| served_listener(s, &listener("foreign-tls")).is_some())
    })
    .await;
    assert_eq!(served_listener(&granted, &listener("foreign-tls")).unwrap().key, b64_key);
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "the foreign certificate resolved", |o| {
        listener_resolved(o, "foreign-tls", "True", "ResolvedRefs")
    })
    .await;

    delete(c, "gateway.networking.k8s.io/v1beta1", "ReferenceGrant", Some("victim"), "turn-certificates").await;
    let revoked = wait_for("the foreign key withdrawn with the grant", || async {
        op.config(NS, "udp-gateway").await.filter(|s| served_listener(s, &listener("foreign-tls")).is_none())
    })
    .await;
    assert!(revoked.listeners.iter().all(|l| l.key != b64_key), "no foreign key served");
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "the foreign certificate refused again", |o| {
        listener_resolved(o, "foreign-tls", "False", "RefNotPermitted")
    })
    .await;
}

/// Issue #43 in cluster mode: credentials the API server accepts (an `authRef` Secret with a
/// space in its password, a TLS Secret whose key is no PEM, one with a credential missing)
/// reach neither the operator's log, at its most verbose and in JSON, nor any status, nor the
/// CDS's status and client lists: in plain text or base64. On the way, issue #56: a TLS key of
/// another namespace is served only under a ReferenceGrant (and it too never reaches the log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_value_appears_in_the_log_or_any_status() {
    use base64::Engine;
    let Some(cluster) = Cluster::start("secrets").await else { return };
    quickstart(&cluster).await;
    let c = &cluster.admin;
    let foreign_key = "victim-key-8802";
    let secrets = [
        "pass-1",
        "user name 77",
        "Hunter2 Secret",
        "not-a-cert-5521",
        "tls-key-value!!",
        "lone-user-4411",
        foreign_key,
    ];
    apply_yaml(
        c,
        r#"
apiVersion: v1
kind: Secret
metadata: {name: auth, namespace: stunner}
stringData: {type: static, username: "user name 77", password: "Hunter2 Secret"}
---
apiVersion: v1
kind: Secret
metadata: {name: auth-incomplete, namespace: stunner}
stringData: {type: static, username: "lone-user-4411"}
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: stunner}
type: kubernetes.io/tls
stringData: {tls.crt: "not-a-cert-5521", tls.key: "tls-key-value!!"}
"#,
    )
    .await;
    let op = cluster.operator("op", &["--zap-encoder", "json", "--zap-log-level", "5"]).await;
    wait_quickstart_statuses(&cluster).await;
    // The class's credentials from the Secret, then from the incomplete one; a TLS listener
    // with the bad key.
    let config = |secret: &str| {
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig",
               "metadata": {"name": "stunner-gatewayconfig", "namespace": NS},
               "spec": {"realm": "stunner.l7mp.io", "authRef": {"name": secret}}})
    };
    apply(c, config("auth")).await.unwrap();
    let served = wait_for("the Secret's credentials served", || async {
        op.config(NS, "udp-gateway")
            .await
            .filter(|s| s.auth.credentials.get("username").map(String::as_str) == Some("user name 77"))
    })
    .await;
    assert_eq!(served.auth.credentials["password"], "Hunter2 Secret");
    let tls = json!({"name": "tls-listener", "port": 443, "protocol": "TURN-TLS",
                     "tls": {"mode": "Terminate", "certificateRefs": [{"name": "tls"}]}});
    let mut gateway = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap();
    gateway.data["spec"]["listeners"].as_array_mut().unwrap().push(tls);
    gateway.metadata.managed_fields = None;
    gateway.metadata.resource_version = None;
    apply(c, serde_json::to_value(&gateway).unwrap()).await.unwrap();
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "three listener statuses", |o| {
        o.data["status"]["listeners"].as_array().is_some_and(|l| l.len() == 3)
    })
    .await;
    a_foreign_certificate_is_served_only_under_a_reference_grant(&cluster, &op, foreign_key).await;
    apply(c, config("auth-incomplete")).await.unwrap();
    wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "the incomplete Secret refused", |o| {
        let programmed = condition(&o.data["status"], "Programmed");
        programmed.is_some_and(|p| p["reason"] == "Invalid" && p["message"].as_str().unwrap_or("").contains("password"))
    })
    .await;
    let mut seen = Vec::new();
    for (kind, ns, name) in [("GatewayClass", None, "stunner-gatewayclass"), ("Gateway", Some(NS), "udp-gateway")] {
        let o = get(c, GW, kind, ns, name).await.unwrap();
        seen.push((format!("{kind} status"), o.data["status"].to_string()));
    }
    for path in ["/api/v1/statuses", "/api/v1/clients"] {
        let (status, body) = http_get(op.cds, path).await.unwrap();
        assert_eq!(status, 200, "{path}: {body}");
        seen.push((path.to_string(), body));
    }
    // The whole log, to the operator's exit: whatever it logs about the last change, however
    // late, is in it.
    let log = op.stop_and_read_log().await;
    assert!(log.contains("shutting down"), "the log to the operator's exit: {log}");
    seen.push(("the log".to_string(), log.clone()));
    let b64 = base64::engine::general_purpose::STANDARD;
    for (place, text) in &seen {
        for value in secrets {
            assert!(!text.contains(value), "{value:?} in {place}:\n{text}");
            assert!(!text.contains(&b64.encode(value)), "{value:?} in base64 in {place}:\n{text}");
        }
    }
    // The log was at its most verbose, in JSON, and the operator did read the Secrets.
    assert!(log.lines().all(|l| l.starts_with('{')), "JSON lines: {log}");
    assert!(log.contains("\"level\":\"debug\"") || log.contains("\"level\":\"Level(-"), "verbose: {log}");
}

/// Stands in for a cloud's load balancer controller: gives Service `name` the ingress `ip`.
async fn load_balancer_ingress(c: &kube::Client, name: &str, ip: &str) {
    let services: kube::Api<k8s_openapi::api::core::v1::Service> = kube::Api::namespaced(c.clone(), NS);
    let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
    let params = kube::api::PatchParams::default();
    services.patch_status(name, &params, &kube::api::Patch::Merge(&status)).await.unwrap();
}

/// `stunner.l7mp.io/service-per-protocol` (docs/deploy.md §11): the quickstart Gateway's UDP
/// and TCP listeners go to two Services, each listener gets its address from its own, the
/// status lists both, and removing the annotation deletes the second Service again (the
/// writer's delete through the API server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_per_protocol_publishes_each_listener_through_its_own() {
    let Some(cluster) = Cluster::start("service-per-protocol").await else { return };
    quickstart(&cluster).await;
    let op = cluster.operator("op", &[]).await;
    let c = &cluster.admin;
    wait_quickstart_statuses(&cluster).await;
    let gateways = api_for(c, GW, "Gateway", Some(NS)).await;
    let per_protocol = json!({
        "metadata": {"annotations": {"stunner.l7mp.io/service-per-protocol": "true"}},
        "spec": {"addresses": null},
    });
    let params = kube::api::PatchParams::default();
    gateways.patch("udp-gateway", &params, &kube::api::Patch::Merge(&per_protocol)).await.unwrap();

    let udp = service_ports(c, "udp-gateway", &[3478]).await;
    let tcp = service_ports(c, "udp-gateway-tcp", &[3478]).await;
    assert_eq!(udp.data["spec"]["ports"][0]["protocol"], "UDP");
    assert_eq!(tcp.data["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(udp.data["spec"]["selector"], tcp.data["spec"]["selector"], "both select the same dataplane pods");
    let gateway = get(c, GW, "Gateway", Some(NS), "udp-gateway").await.unwrap();
    assert_eq!(owner(&tcp, "Gateway", "udp-gateway").unwrap().uid, gateway.metadata.uid.unwrap());
    assert_eq!(managers(&tcp), [("stunner-gateway-operator".to_string(), String::new())]);

    load_balancer_ingress(c, "udp-gateway", "127.0.0.2").await;
    load_balancer_ingress(c, "udp-gateway-tcp", "127.0.0.3").await;
    let mut ws = op.watch(NS, "udp-gateway").await;
    let config = config_until(&mut ws, "each listener's address from its own Service", |c| {
        let public: Vec<_> = c.listeners.iter().map(|l| (l.name.as_str(), l.public_addr.as_str())).collect();
        public == [("stunner/udp-gateway/udp-listener", "127.0.0.2"), ("stunner/udp-gateway/tcp-listener", "127.0.0.3")]
    })
    .await;
    assert!(config.listeners.iter().all(|l| l.public_port == 3478), "{config:?}");
    let status = wait_object(c, GW, "Gateway", Some(NS), "udp-gateway", "both addresses", |o| {
        o.data["status"]["addresses"]
            == json!([{"type": "IPAddress", "value": "127.0.0.2"}, {"type": "IPAddress", "value": "127.0.0.3"}])
    })
    .await;
    let tcp_listener = &status.data["status"]["listeners"][1];
    let accepted = condition(tcp_listener, "Accepted").unwrap();
    assert!(accepted["message"].as_str().unwrap().ends_with("from Service stunner/udp-gateway-tcp"), "{accepted}");

    let plain = json!({"metadata": {"annotations": {"stunner.l7mp.io/service-per-protocol": null}}});
    gateways.patch("udp-gateway", &params, &kube::api::Patch::Merge(&plain)).await.unwrap();
    wait_gone(c, "v1", "Service", Some(NS), "udp-gateway-tcp").await;
    service_ports(c, "udp-gateway", &[3478, 3478]).await;
    op.assert_no_rbac_denials();
}
