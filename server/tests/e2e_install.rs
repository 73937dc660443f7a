//! The real-node suite (design.md §6, layer 5): our operator installed as users install it,
//! on a single-node cluster that runs pods (`node::Node`: etcd, kube-apiserver,
//! controller-manager, scheduler, kubelet, kube-proxy, containerd, runc, CNI, CoreDNS), with
//! the images built here (`tests/images`). The scenario is upstream STUNner's own e2e test
//! (Helm install, the `simple-tunnel` example, TURN through the Gateway's Service to a
//! backend), plus what a user of a drop-in replacement counts on: live changes reach running
//! dataplanes without restarts, operator restarts and upgrades never restart a dataplane, and
//! uninstalling leaves nothing behind.
//!
//! One node runs at a time ([`Node::start`] waits for another test's node to go). A failing
//! step panics with the tail of every component's log attached.

mod e2e;
mod node;
#[path = "../../tests/support/registry.rs"]
mod registry;

#[path = "e2e_install/faults.rs"]
mod faults;
#[path = "e2e_install/icetest.rs"]
mod icetest;
#[path = "e2e_install/upstream_icetest.rs"]
mod upstream_icetest;

use e2e::{TIMEOUT, apply_yaml, get, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use node::{Node, ready_pod_ip, ready_pods};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;

/// The namespace of the Gateway, as in upstream's `simple-tunnel` example.
const GATEWAY_NS: &str = "stunner";
/// The operator's namespace (the chart's and the manifests' default).
const OPERATOR_NS: &str = "stunner-system";
/// The leader election Lease of the operator (upstream's name).
const LEASE: &str = "92062b70.l7mp.io";
/// The static TURN username of the Gateway.
const USER: &str = "user-1";
/// The UDP port of the echo backend (tests/images udp-echo's default).
const ECHO_PORT: u16 = 9001;

/// Chart values the node needs: 2 cores must fit two operators, CoreDNS, stunnerd and the
/// backends (upstream's e2e lowers the CPU requests the same way). The default Dataplane's
/// pinned stunnerd (`IfNotPresent`) is the image the node imports.
const CHART_VALUES: &[&str] = &[
    "defaultDataplane.spec.resources.requests.cpu=50m",
    "defaultDataplane.spec.resources.limits.cpu=500m",
    "resources.requests.cpu=50m",
];

/// Which UDPRoute kind a manifest routes the Gateway with.
#[derive(Clone, Copy)]
enum RouteApi {
    /// `stunner.l7mp.io/v1` (upstream's examples).
    Stunner,
    /// `gateway.networking.k8s.io/v1`, what Gateway API v1.7's standard channel serves.
    GatewayApiV1,
}

/// Upstream's `docs/examples/simple-tunnel/iperf-stunner.yaml`, with our echo backend and the
/// Service type annotation that makes the Gateway's Service a NodePort (no load balancer
/// here); `password` is the static TURN password.
fn simple_tunnel(password: &str) -> String {
    simple_tunnel_with(password, RouteApi::Stunner)
}

/// [`simple_tunnel`] with its UDPRoute of `api`: Gateway API's requires the Service's `port`.
fn simple_tunnel_with(password: &str, api: RouteApi) -> String {
    let (route_api, backend_port) = match api {
        RouteApi::Stunner => ("stunner.l7mp.io/v1", String::new()),
        RouteApi::GatewayApiV1 => ("gateway.networking.k8s.io/v1", format!("\n          port: {ECHO_PORT}")),
    };
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {GATEWAY_NS}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: stunner-gatewayclass
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef:
    group: stunner.l7mp.io
    kind: GatewayConfig
    name: stunner-gatewayconfig
    namespace: {GATEWAY_NS}
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata:
  name: stunner-gatewayconfig
  namespace: {GATEWAY_NS}
spec:
  realm: stunner.l7mp.io
  authType: plaintext
  userName: {USER}
  password: {password}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: udp-gateway
  namespace: {GATEWAY_NS}
  annotations:
    stunner.l7mp.io/service-type: NodePort
spec:
  gatewayClassName: stunner-gatewayclass
  listeners:
    - name: udp-listener
      port: 3478
      protocol: TURN-UDP
---
apiVersion: {route_api}
kind: UDPRoute
metadata:
  name: echo-server
  namespace: {GATEWAY_NS}
spec:
  parentRefs:
    - name: udp-gateway
  rules:
    - backendRefs:
        - name: echo-server
          namespace: default{backend_port}
"#
    )
}

/// The backend: udp-echo pods behind a ClusterIP Service in `default`.
fn echo_backend(replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: echo-server
  namespace: default
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: echo-server
  template:
    metadata:
      labels:
        app: echo-server
    spec:
      containers:
        - name: echo
          image: localhost/stunner-test/udp-echo:latest
          imagePullPolicy: Never
          args: ["-port", "{ECHO_PORT}"]
          ports:
            - containerPort: {ECHO_PORT}
              protocol: UDP
          resources:
            requests:
              cpu: 10m
---
apiVersion: v1
kind: Service
metadata:
  name: echo-server
  namespace: default
spec:
  selector:
    app: echo-server
  ports:
    - name: echo
      port: {ECHO_PORT}
      protocol: UDP
"#
    )
}

fn repo_file(path: &str) -> PathBuf {
    e2e::repo_root().join(path)
}

/// The Go tools of `scripts/test` these tests run besides the node: whether all are built (if
/// not, the test is skipped, see tests/support/external.rs).
fn tools_built() -> bool {
    let how = "run scripts/test (it builds the test tools)";
    ["tests/deploytool/bin/deploytool", "tests/interop/bin/turnprobe"]
        .into_iter()
        .all(|path| e2e::external::built(repo_file(path), how).is_some())
}

/// A node for `test` with the Gateway API CRDs installed (v1.4.0's standard channel and the
/// experimental UDPRoute), and its admin client; None (after a notice) when the node or the
/// test tools are not built.
async fn node_with_gateway_api(test: &str) -> Option<(Node, Client)> {
    node_with(test, e2e::GatewayApi::V14StandardWithUdpRoute).await
}

/// [`node_with_gateway_api`] with the Gateway API `bundle` of choice.
async fn node_with(test: &str, bundle: e2e::GatewayApi) -> Option<(Node, Client)> {
    if !tools_built() {
        return None;
    }
    let node = Node::start(test).await?;
    let client = node.admin.clone();
    e2e::install_gateway_api(&client, bundle).await;
    Some((node, client))
}

fn tool(path: &str) -> PathBuf {
    let bin = repo_file(path);
    assert!(bin.exists(), "{} is missing: run scripts/test (it builds the test tools)", bin.display());
    bin
}

/// Real Helm (tests/deploytool) against the node; panics with its output on failure. Returns
/// what it printed (after an install or upgrade, the chart's notes).
fn helm(node: &Node, verb: &str, extra: &[&str]) -> String {
    helm_chart(node, verb, &repo_file("deploy/helm/stunner-gateway-operator"), extra)
}

/// [`helm`] with the chart in `chart`.
fn helm_chart(node: &Node, verb: &str, chart: &std::path::Path, extra: &[&str]) -> String {
    let mut cmd = Command::new(tool("tests/deploytool/bin/deploytool"));
    cmd.arg(format!("helm-{verb}"));
    if verb != "uninstall" {
        cmd.arg(chart);
        for v in CHART_VALUES {
            cmd.args(["--set", v]);
        }
    }
    cmd.args(["--kubeconfig", node.kubeconfig.to_str().unwrap(), "-n", OPERATOR_NS, "--wait", "--timeout", "5m"]);
    cmd.args(extra);
    let out = cmd.output().expect("run deploytool");
    assert!(
        out.status.success(),
        "helm {verb} failed:\n{}{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        node.log_tails()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `stunnerctl` that `cargo test --workspace` built beside this test binary (which lives in
/// `<target>/<profile>/deps/`), so a `CARGO_TARGET_DIR` elsewhere is followed.
fn stunnerctl_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().and_then(|deps| deps.parent()).expect("<target>/<profile>/deps").join("stunnerctl")
}

/// `stunnerctl` (client crate, built by `cargo test --workspace`) as a user with only the
/// node's kubeconfig: it finds the CDS and the dataplane pods and port-forwards through the
/// API server and the kubelet. Panics with its output on failure.
fn stunnerctl(node: &Node, args: &[&str]) -> String {
    let bin = stunnerctl_bin();
    assert!(bin.exists(), "{} is missing: cargo build -p stunner-gateway-client", bin.display());
    let out = Command::new(bin)
        .args(["--kubeconfig", node.kubeconfig.to_str().unwrap()])
        .args(args)
        .output()
        .expect("run stunnerctl");
    assert!(
        out.status.success(),
        "stunnerctl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The verdict of one TURN allocation through `server` relaying to `peer` (turnprobe, the
/// pion/turn client upstream's turncat uses).
fn turn_probe(server: SocketAddr, user: &str, password: &str, peer: SocketAddr) -> Value {
    let out = Command::new(tool("tests/interop/bin/turnprobe"))
        .args(["--server", &server.to_string(), "--user", user, "--password", password])
        .args(["--peer", &peer.to_string(), "--count", "3", "--timeout", "10s"])
        // From the node's own network: the default is a loopback socket.
        .args(["--local", &SocketAddr::new(server.ip(), 0).to_string()])
        .output()
        .expect("run turnprobe");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "turnprobe output: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Retries the probe (bounded) until it succeeds: a change takes a moment to reach stunnerd.
async fn turn_relays(node: &Node, server: SocketAddr, user: &str, password: &str, peer: SocketAddr) -> Value {
    turn_relays_within(node, server, user, password, peer, TIMEOUT).await
}

/// [`turn_relays`], retried for up to `bound`.
async fn turn_relays_within(
    node: &Node,
    server: SocketAddr,
    user: &str,
    password: &str,
    peer: SocketAddr,
    bound: Duration,
) -> Value {
    let deadline = Instant::now() + bound;
    loop {
        let v = tokio::task::block_in_place(|| turn_probe(server, user, password, peer));
        if v["ok"] == true {
            return v;
        }
        if Instant::now() > deadline {
            panic!("no TURN relay through {server} to {peer} as {user}/{password}: {v}\n{}", node.log_tails());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until a Deployment reports `Available=True` for its current generation.
async fn wait_available(client: &Client, ns: &str, name: &str) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    wait_for(&format!("Deployment {ns}/{name} Available"), || {
        let api = api.clone();
        async move {
            let d = api.get(name).await.ok()?;
            let status = d.status.as_ref()?;
            let fresh = status.observed_generation >= d.metadata.generation;
            let available = status.conditions.as_ref()?.iter().any(|c| c.type_ == "Available" && c.status == "True");
            let updated = status.updated_replicas.unwrap_or(0) == d.spec.as_ref()?.replicas.unwrap_or(1);
            (fresh && available && updated).then_some(d)
        }
    })
    .await
}

/// What identifies a running dataplane pod: its UID and its containers' restart counts. Equal
/// before and after a step means the step restarted nothing.
async fn dataplane_identity(client: &Client) -> BTreeSet<(String, i32)> {
    let pods = ready_pods(client, GATEWAY_NS, "app=stunner").await;
    pods.iter()
        .map(|p| {
            let restarts = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum());
            (p.metadata.uid.clone().unwrap_or_default(), restarts)
        })
        .collect()
}

/// The Gateway's NodePort for its TURN listener.
async fn node_port(client: &Client) -> u16 {
    let api: Api<Service> = Api::namespaced(client.clone(), GATEWAY_NS);
    wait_for("the udp-gateway Service's NodePort", || {
        let api = api.clone();
        async move {
            let svc = api.get("udp-gateway").await.ok()?;
            let spec = svc.spec?;
            if spec.type_.as_deref() != Some("NodePort") {
                return None;
            }
            spec.ports?.iter().find_map(|p| p.node_port).map(|p| p as u16)
        }
    })
    .await
}

async fn cluster_ip(client: &Client, ns: &str, name: &str) -> std::net::IpAddr {
    let api: Api<Service> = Api::namespaced(client.clone(), ns);
    let svc = api.get(name).await.unwrap_or_else(|e| panic!("Service {ns}/{name}: {e}"));
    svc.spec.and_then(|s| s.cluster_ip).and_then(|ip| ip.parse().ok()).expect("a ClusterIP")
}

/// The config the operator's CDS serves for the Gateway, read through the CDS Service as a
/// dataplane reads it (the host reaches ClusterIPs through kube-proxy).
async fn served_config(client: &Client) -> Option<StunnerConfig> {
    let cds = SocketAddr::new(cluster_ip(client, OPERATOR_NS, "stunner-config-discovery").await, 13478);
    e2e::cds_config(cds, GATEWAY_NS, "udp-gateway").await
}

/// The endpoint addresses of the route's cluster in the served config.
async fn served_endpoints(client: &Client) -> Option<BTreeSet<String>> {
    let config = served_config(client).await?;
    let cluster = config.clusters.iter().find(|c| c.name.ends_with("echo-server"))?;
    Some(cluster.endpoints.iter().cloned().collect())
}

/// Deletes the operator pod that holds the Lease and waits for another holder.
async fn kill_leader(client: &Client) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), OPERATOR_NS);
    let holder = || {
        let leases = leases.clone();
        async move { leases.get(LEASE).await.ok()?.spec?.holder_identity.filter(|h| !h.is_empty()) }
    };
    let old = wait_for("a leader", holder).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NS);
    // The holder identity is the pod name (POD_NAME, k8s/src/lease.rs).
    pods.delete(&old, &DeleteParams::default()).await.unwrap_or_else(|e| panic!("delete the leader {old}: {e}"));
    wait_for("a new leader", || {
        let old = old.clone();
        let holder = holder();
        async move { holder.await.filter(|h| *h != old) }
    })
    .await
}

/// The namespace of the application pods that ask the credential API: not the Gateway's, not
/// the operator's.
const APP_NS: &str = "webrtc-app";

/// The operator's pods (the label its CDS Service selects on).
const OPERATOR_PODS: &str = "stunner.l7mp.io/config-discovery-service=enabled";

/// Waits until every Ready operator replica serves a config for the Gateway that satisfies
/// `pred`, read from each pod's own address: the credential API of each replica answers from
/// what that replica serves, and the auth Service may send a request to any of them.
async fn every_replica_serves(client: &Client, what: &str, pred: impl Fn(&StunnerConfig) -> bool) {
    wait_for(&format!("every operator replica to serve {what}"), || {
        let (client, pred) = (client.clone(), &pred);
        async move {
            let pods = ready_pods(&client, OPERATOR_NS, OPERATOR_PODS).await;
            if pods.is_empty() {
                return None;
            }
            for pod in pods {
                let ip = pod.status?.pod_ip?.parse().ok()?;
                let config = e2e::cds_config(SocketAddr::new(ip, 13478), GATEWAY_NS, "udp-gateway").await?;
                if !pred(&config) {
                    return None;
                }
            }
            Some(())
        }
    })
    .await
}

/// An application pod in [`APP_NS`] that GETs `url` once (udp-echo's `-http-get` mode: the
/// pod's own resolver, so the name goes through the cluster's CoreDNS) and prints the body.
fn http_get_pod(name: &str, url: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {APP_NS}
spec:
  restartPolicy: Never
  containers:
    - name: get
      image: {image}
      imagePullPolicy: Never
      args: ["-http-get", "{url}"]
      resources:
        requests:
          cpu: 10m
"#,
        image = node::UDP_ECHO_IMAGE
    )
}

/// What an application pod named `name` got from a GET of `url`: runs the pod to its end and
/// parses its log as JSON; panics with the log if the GET failed.
async fn get_from_app_pod(client: &Client, name: &str, url: &str) -> Value {
    apply_yaml(client, &http_get_pod(name, url)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), APP_NS);
    let phase = wait_for(&format!("pod {APP_NS}/{name} to finish"), || {
        let pods = pods.clone();
        async move {
            let phase = pods.get(name).await.ok()?.status?.phase?;
            matches!(phase.as_str(), "Succeeded" | "Failed").then_some(phase)
        }
    })
    .await;
    let log = pods.logs(name, &Default::default()).await.unwrap_or_else(|e| panic!("pod {name}'s log: {e}"));
    assert_eq!(phase, "Succeeded", "GET {url} from pod {APP_NS}/{name}: {log}");
    serde_json::from_str(&log).unwrap_or_else(|e| panic!("GET {url} from pod {APP_NS}/{name}: {e}: {log}"))
}

/// The one ICE server of an `/ice` answer for the single Gateway, checked for its shape: the
/// Gateway's TURN-UDP listener (no public address on this node, so its own port, as the
/// `stunnerctl auth` check above) and the default transport policy. Returns its username and
/// credential.
fn ice_credential(ice: &Value) -> (String, String) {
    assert_eq!(ice["iceTransportPolicy"], "all", "{ice}");
    let servers = ice["iceServers"].as_array().unwrap_or_else(|| panic!("no iceServers: {ice}"));
    assert_eq!(servers.len(), 1, "one Gateway, one ICE server: {ice}");
    let urls = servers[0]["urls"].as_array().map(Vec::as_slice).unwrap_or_default();
    let url = urls.first().and_then(Value::as_str).unwrap_or_default();
    assert!(urls.len() == 1 && url.starts_with("turn:") && url.ends_with(":3478?transport=udp"), "{ice}");
    let field = |k: &str| servers[0][k].as_str().unwrap_or_else(|| panic!("no {k}: {ice}")).to_string();
    (field("username"), field("credential"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_relays_turn_and_survives_operator_changes() {
    let Some((node, client)) = node_with_gateway_api("install-helm").await else { return };
    apply_yaml(&client, &echo_backend(1)).await;

    // From `helm install` to the first packet relayed to a backend pod.
    let installed = Instant::now();
    helm(&node, "install", &["--create-namespace"]);
    let operator = wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    assert_eq!(operator.spec.unwrap().replicas, Some(2), "two replicas, with leader election");
    apply_yaml(&client, &simple_tunnel("pass-1")).await;
    wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    wait_available(&client, "default", "echo-server").await;
    let turn = SocketAddr::new(node.node_ip.into(), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    let first = turn_relays(&node, turn, USER, "pass-1", echo).await;
    eprintln!("node e2e: helm install to first relayed packet: {:.1?} ({first})", installed.elapsed());

    // The dataplane got its config through the CDS Service name, with the rendered auth.
    let config = served_config(&client).await.expect("a served config");
    assert_eq!(config.auth.credentials.get("password").map(String::as_str), Some("pass-1"));
    let dataplane: Api<Deployment> = Api::namespaced(client.clone(), GATEWAY_NS);
    let dp = dataplane.get("udp-gateway").await.unwrap();
    let args = serde_json::to_string(&dp.spec.unwrap().template.spec.unwrap().containers[0]).unwrap();
    assert!(
        args.contains("stunner-config-discovery.stunner-system.svc:13478"),
        "stunnerd is told the CDS Service: {args}"
    );

    // stunnerctl with a kubeconfig only: the served config through a port-forward to the
    // operator, the stunnerd pod's own status, and credentials a TURN client then uses.
    let shown: Value =
        serde_json::from_str(&stunnerctl(&node, &["-n", GATEWAY_NS, "config", "udp-gateway", "-o", "json"]))
            .expect("stunnerctl config -o json");
    assert_eq!(shown["auth"]["credentials"]["password"], "pass-1", "{shown}");
    let names = stunnerctl(&node, &["config", "-A", "-o", "jsonpath={.admin.name}"]);
    assert!(names.contains("stunner/udp-gateway"), "{names}");
    let state = stunnerctl(&node, &["-n", GATEWAY_NS, "status", "udp-gateway", "-o", "jsonpath={.status}"]);
    assert!(state.contains("READY"), "the stunnerd pod's status: {state}");
    let credential: Value =
        serde_json::from_str(&stunnerctl(&node, &["-n", GATEWAY_NS, "auth", "udp-gateway", "--auth-turn-credential"]))
            .expect("stunnerctl auth JSON");
    // The node has no ExternalIP, so (as upstream) the listener has no public address and the
    // URI carries the listener's own port; the credentials are what a client needs.
    let uri = credential["uris"][0].as_str().unwrap_or_default();
    assert!(uri.starts_with("turn:") && uri.ends_with(":3478?transport=udp"), "{credential}");
    let password = credential["password"].as_str().unwrap();
    assert_eq!(credential["username"], USER);
    turn_relays(&node, turn, USER, password, echo).await;

    // A peer the route does not allow (CoreDNS) is refused at CreatePermission.
    let dns = SocketAddr::new(node.facts.cluster_dns.into(), 53);
    let refused = tokio::task::block_in_place(|| turn_probe(turn, USER, "pass-1", dns));
    assert_eq!((refused["ok"].as_bool(), refused["stage"].as_str()), (Some(false), Some("permission")), "{refused}");

    // A new password reaches the running pod: no restart, the old password stops working.
    let before = dataplane_identity(&client).await;
    assert_eq!(before.len(), 1, "one stunnerd pod: {before:?}");
    let configs = e2e::api_for(&client, "stunner.l7mp.io/v1", "GatewayConfig", Some(GATEWAY_NS)).await;
    configs
        .patch("stunner-gatewayconfig", &PatchParams::default(), &Patch::Merge(json!({"spec": {"password": "pass-2"}})))
        .await
        .unwrap();
    turn_relays(&node, turn, USER, "pass-2", echo).await;
    let old = tokio::task::block_in_place(|| turn_probe(turn, USER, "pass-1", echo));
    assert_eq!((old["ok"].as_bool(), old["stage"].as_str()), (Some(false), Some("allocate")), "{old}");
    assert_eq!(dataplane_identity(&client).await, before, "the password change restarted no dataplane");

    // Scaling the backend changes the endpoints served.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .patch("echo-server", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}})))
        .await
        .unwrap();
    let three = wait_for("three backend endpoints served", || {
        let client = client.clone();
        async move {
            let pods = ready_pods(&client, "default", "app=echo-server").await;
            let ips: BTreeSet<String> = pods.iter().filter_map(|p| p.status.as_ref()?.pod_ip.clone()).collect();
            let served = served_endpoints(&client).await?;
            (ips.len() == 3 && ips.iter().all(|ip| served.iter().any(|e| e.starts_with(ip.as_str())))).then_some(served)
        }
    })
    .await;
    eprintln!("node e2e: endpoints after scaling to 3: {three:?}");

    // The leader deleted: another replica takes over, no dataplane restarts, traffic flows.
    let leader = kill_leader(&client).await;
    eprintln!("node e2e: new leader {leader}");
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    turn_relays(&node, turn, USER, "pass-2", echo).await;
    assert_eq!(dataplane_identity(&client).await, before, "an operator pod deletion restarted a dataplane");

    // A `helm upgrade` that rolls every operator pod: the same.
    helm(&node, "upgrade", &["--set", "podAnnotations.rolled=yes"]);
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    turn_relays(&node, turn, USER, "pass-2", echo).await;
    assert_eq!(dataplane_identity(&client).await, before, "helm upgrade restarted a dataplane");

    // The chart's credential API (issue #49): an application pod in its own namespace asks
    // `stunner-auth.stunner-system:8088/ice` by name, and a TURN client allocates and relays
    // through the NodePort with what it got: the static credentials first, then, with the
    // GatewayConfig switched to ephemeral auth, fresh time-windowed ones.
    apply_yaml(&client, &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {APP_NS}\n")).await;
    let auth_url = format!("http://stunner-auth.{OPERATOR_NS}:8088/ice?service=turn");
    every_replica_serves(&client, "password pass-2", |c| {
        c.auth.credentials.get("password").is_some_and(|p| p == "pass-2")
    })
    .await;
    let ice = get_from_app_pod(&client, "ice-static", &auth_url).await;
    eprintln!("node e2e: /ice, static auth: {ice}");
    assert_eq!(ice_credential(&ice), (USER.to_string(), "pass-2".to_string()), "{ice}");
    turn_relays(&node, turn, USER, "pass-2", echo).await;

    const SECRET: &str = "node-e2e-shared-secret";
    configs
        .patch(
            "stunner-gatewayconfig",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"authType": "ephemeral", "sharedSecret": SECRET, "userName": null, "password": null}}),
            ),
        )
        .await
        .unwrap();
    every_replica_serves(&client, "the shared secret", |c| {
        c.auth.credentials.get("secret").is_some_and(|s| s == SECRET)
    })
    .await;
    let asked = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let ice = get_from_app_pod(&client, "ice-ephemeral", &format!("{auth_url}&username=app&ttl=3600")).await;
    eprintln!("node e2e: /ice, ephemeral auth: {ice}");
    let (user, password) = ice_credential(&ice);
    // `<expiry>:<username>`, the expiry `ttl` seconds after the request.
    let expiry: u64 = user.strip_suffix(":app").and_then(|e| e.parse().ok()).unwrap_or_else(|| panic!("{ice}"));
    assert!((asked + 3600..asked + 3600 + TIMEOUT.as_secs()).contains(&expiry), "expiry {expiry}, asked at {asked}");
    let relayed = turn_relays(&node, turn, &user, &password, echo).await;
    eprintln!("node e2e: relayed with the ephemeral credential from /ice: {relayed}");
    // The same username signed with another secret, and the static credential the secret
    // replaced, are refused.
    let forged = stunner_gateway::turn_auth::timewindowed_password(&user, "not-the-shared-secret");
    for (user, password) in [(user.as_str(), forged.as_str()), (USER, "pass-2")] {
        let refused = tokio::task::block_in_place(|| turn_probe(turn, user, password, echo));
        assert_eq!(
            (refused["ok"].as_bool(), refused["stage"].as_str()),
            (Some(false), Some("allocate")),
            "{user}/{password}: {refused}"
        );
    }

    upstream_icetest::upstream_icetest_relays_and_names_broken_stages(&node, &client).await;
    icetest::our_icetest_relays_and_names_broken_stages(&node, &client).await;

    // `helm uninstall` removes what the chart made; the dataplane goes with its Gateway.
    helm(&node, "uninstall", &[]);
    for (kind, api_version, ns, name) in [
        ("Deployment", "apps/v1", Some(OPERATOR_NS), "stunner-gateway-operator"),
        ("Service", "v1", Some(OPERATOR_NS), "stunner-config-discovery"),
        ("Service", "v1", Some(OPERATOR_NS), "stunner-auth"),
        ("ClusterRole", "rbac.authorization.k8s.io/v1", None, "stunner-gateway-operator"),
        ("Dataplane", "stunner.l7mp.io/v1", None, "default"),
    ] {
        e2e::wait_gone(&client, api_version, kind, ns, name).await;
    }
    e2e::delete(&client, "gateway.networking.k8s.io/v1", "Gateway", Some(GATEWAY_NS), "udp-gateway").await;
    e2e::wait_gone(&client, "apps/v1", "Deployment", Some(GATEWAY_NS), "udp-gateway").await;
    e2e::wait_gone(&client, "v1", "Service", Some(GATEWAY_NS), "udp-gateway").await;
    assert!(get(&client, "v1", "Service", Some(GATEWAY_NS), "udp-gateway").await.is_none());
}

/// The kustomize install on today's Gateway API: v1.7.0's standard channel with its
/// safe-upgrades policy, as README installs it, where UDPRoute is served as
/// `gateway.networking.k8s.io/v1` only. A `v1` UDPRoute gets its statuses from us and TURN
/// relays through it to the backend pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_install_on_gateway_api_v1_7_standard_relays_through_a_v1_udproute() {
    let Some((node, client)) = node_with("install-kustomize", e2e::GatewayApi::V17Standard).await else { return };
    e2e::install_stunner_crds(&client).await;
    let out = Command::new(tool("tests/deploytool/bin/deploytool"))
        .args(["kustomize", repo_file("deploy/manifests").to_str().unwrap()])
        .output()
        .expect("run deploytool kustomize");
    assert!(out.status.success(), "kustomize: {}", String::from_utf8_lossy(&out.stderr));
    let manifests = String::from_utf8(out.stdout).unwrap();
    apply_yaml(&client, &manifests).await;
    // The manifests' default Dataplane, made pull-free and small for this node.
    let dataplanes = e2e::api_for(&client, "stunner.l7mp.io/v1", "Dataplane", None).await;
    dataplanes
        .patch(
            "default",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"imagePullPolicy": "IfNotPresent", "resources": {"requests": {"cpu": "50m"}}}}),
            ),
        )
        .await
        .unwrap();
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    apply_yaml(&client, &echo_backend(1)).await;
    apply_yaml(&client, &simple_tunnel_with("pass-1", RouteApi::GatewayApiV1)).await;
    wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    wait_available(&client, "default", "echo-server").await;
    let turn = SocketAddr::new(node.node_ip.into(), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    let relayed = turn_relays(&node, turn, USER, "pass-1", echo).await;
    eprintln!("node e2e: v1.7 standard, v1 UDPRoute: relayed {relayed}");

    // The route's statuses, written by us through the served version.
    for (condition, reason) in [("Accepted", "Accepted"), ("ResolvedRefs", "ResolvedRefs")] {
        wait_for(&format!("v1 UDPRoute echo-server {condition}=True"), || {
            let client = client.clone();
            async move {
                let route =
                    get(&client, "gateway.networking.k8s.io/v1", "UDPRoute", Some(GATEWAY_NS), "echo-server").await?;
                let parents = route.data.get("status")?.get("parents")?.as_array()?.clone();
                parents
                    .iter()
                    .any(|p| {
                        p["controllerName"] == "stunner.l7mp.io/gateway-operator"
                            && e2e::has_condition(p, condition, "True", reason)
                    })
                    .then_some(())
            }
        })
        .await;
    }
    // The rendered cluster is the route's, with the backend pod behind it.
    let config = served_config(&client).await.expect("a served config");
    assert!(config.clusters.iter().any(|c| c.name == "stunner/echo-server"), "{config:?}");
    let logs = operator_logs(&client).await;
    assert!(!logs.is_empty() && !logs.contains(" ERROR "), "an error-level log line or no log:\n{logs}");
}

/// `stunnerctl` run inside a pod's network namespace, straight at the CDS Service (no
/// port-forward): the request comes from that pod's address, as a process in the pod would
/// send it. Returns the exit status's success and everything printed.
fn stunnerctl_from_pod(node: &Node, pod_ip: std::net::Ipv4Addr, cds: SocketAddr, args: &[&str]) -> (bool, String) {
    let netns = node.pod_netns(pod_ip);
    let out = Command::new("nsenter")
        .arg(format!("--net={}", netns.display()))
        .arg(stunnerctl_bin())
        .args(["--cds-server-address", &format!("http://{cds}")])
        .args(args)
        .output()
        .expect("run stunnerctl in the pod's network namespace");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A pod that claims to be Gateway stunner/udp-gateway's dataplane by its labels, from
/// another namespace: what a tenant who can create pods, but not in the Gateway's namespace,
/// can do.
fn impostor_pod(namespace: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: v1
kind: Pod
metadata:
  name: impostor
  namespace: {namespace}
  labels:
    app: stunner
    stunner.l7mp.io/related-gateway-name: udp-gateway
    stunner.l7mp.io/related-gateway-namespace: {GATEWAY_NS}
spec:
  containers:
    - name: echo
      image: localhost/stunner-test/udp-echo:latest
      imagePullPolicy: Never
      args: ["-port", "{ECHO_PORT}"]
      resources:
        requests:
          cpu: 10m
"#
    )
}

/// The grant that lets routes in the Gateway's namespace reach Services in `default`.
fn echo_reference_grant() -> String {
    format!(
        r#"apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata:
  name: stunner-routes-to-echo
  namespace: default
spec:
  from:
    - group: stunner.l7mp.io
      kind: UDPRoute
      namespace: {GATEWAY_NS}
  to:
    - group: ""
      kind: Service
"#
    )
}

/// Waits until the route's ResolvedRefs condition is `status` with `reason`.
async fn wait_route_resolved(client: &Client, status: &str, reason: &str) {
    wait_for(&format!("UDPRoute echo-server ResolvedRefs={status} ({reason})"), || {
        let client = client.clone();
        async move {
            let route = get(&client, "stunner.l7mp.io/v1", "UDPRoute", Some(GATEWAY_NS), "echo-server").await?;
            let parents = route.data.get("status")?.get("parents")?.as_array()?.clone();
            parents.iter().any(|p| e2e::has_condition(p, "ResolvedRefs", status, reason)).then_some(())
        }
    })
    .await
}

/// Every operator pod's log, through the API server (the kubelet serves it).
async fn operator_logs(client: &Client) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), OPERATOR_NS);
    let list = pods.list(&ListParams::default().labels(OPERATOR_PODS)).await;
    let mut logs = String::new();
    for pod in list.map(|l| l.items).unwrap_or_default() {
        let name = pod.metadata.name.unwrap_or_default();
        logs.push_str(&pods.logs(&name, &Default::default()).await.unwrap_or_default());
    }
    logs
}

/// Issue #17 on the node: the chart's hardened modes. With `cdsAuthorization=pod` the
/// Gateway's own stunnerd pod gets its config and relays, a pod that carries the dataplane
/// labels in another namespace is refused the config and the list (403, logged without a
/// secret), and `stunnerctl` through a port-forward still lists everything; with
/// `enforceReferenceGrants` the route's backend in another namespace is left out until a
/// ReferenceGrant there allows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardened_install_serves_each_dataplane_its_own_gateway_only() {
    let Some((node, client)) = node_with_gateway_api("install-hardened").await else { return };
    apply_yaml(&client, &echo_backend(1)).await;
    helm(
        &node,
        "install",
        &["--create-namespace", "--set", "cdsAuthorization=pod", "--set", "enforceReferenceGrants=true"],
    );
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    apply_yaml(&client, &simple_tunnel("pass-1")).await;
    wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    wait_available(&client, "default", "echo-server").await;
    let turn = SocketAddr::new(node.node_ip.into(), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    let cds = SocketAddr::new(cluster_ip(&client, OPERATOR_NS, "stunner-config-discovery").await, 13478);

    // No grant in `default`: the backend is refused and left out, so nothing is relayed to it.
    wait_route_resolved(&client, "False", "RefNotPermitted").await;
    let dataplane_ip = ready_pod_ip(&client, GATEWAY_NS, "app=stunner").await;
    let (ok, shown) =
        stunnerctl_from_pod(&node, dataplane_ip, cds, &["-n", GATEWAY_NS, "config", "udp-gateway", "-o", "json"]);
    assert!(ok, "the Gateway's own dataplane pod reads its config: {shown}");
    let config: StunnerConfig = serde_json::from_str(&shown).expect("a config");
    let cluster = config.clusters.iter().find(|c| c.name.ends_with("echo-server")).expect("the route's cluster");
    assert!(cluster.endpoints.is_empty(), "a refused backend has no endpoints: {cluster:?}");
    let refused = tokio::task::block_in_place(|| turn_probe(turn, USER, "pass-1", echo));
    assert_eq!((refused["ok"].as_bool(), refused["stage"].as_str()), (Some(false), Some("permission")), "{refused}");

    // The grant: the backend is served and the running stunnerd relays to it.
    apply_yaml(&client, &echo_reference_grant()).await;
    wait_route_resolved(&client, "True", "ResolvedRefs").await;
    turn_relays(&node, turn, USER, "pass-1", echo).await;

    // The impostor: right labels, wrong namespace. Refused the Gateway's config and the list.
    apply_yaml(&client, &impostor_pod("tenant-b")).await;
    let impostor_ip = ready_pod_ip(&client, "tenant-b", "app=stunner").await;
    let (ok, said) = stunnerctl_from_pod(&node, impostor_ip, cds, &["-n", GATEWAY_NS, "config", "udp-gateway"]);
    assert!(!ok && said.contains("403"), "the impostor is refused the config: {said}");
    assert!(said.contains(&impostor_ip.to_string()), "the refusal says who was refused: {said}");
    assert!(!said.contains("pass-1"), "{said}");
    let (ok, said) = stunnerctl_from_pod(&node, impostor_ip, cds, &["config", "-A"]);
    assert!(!ok && said.contains("403"), "the impostor is refused the list: {said}");
    let logs = operator_logs(&client).await;
    let refusals: Vec<&str> = logs.lines().filter(|l| l.contains("CDS request refused")).collect();
    assert!(refusals.iter().any(|l| l.contains(&impostor_ip.to_string())), "the refusal is logged:\n{logs}");
    assert!(!logs.contains("pass-1"), "no secret in the operator's log:\n{logs}");

    // The operator's own tools still see everything through a port-forward (loopback).
    let names = stunnerctl(&node, &["config", "-A", "-o", "jsonpath={.admin.name}"]);
    assert!(names.contains("stunner/udp-gateway"), "{names}");
}

/// Waits until the Gateway's DaemonSet has an available pod on the node.
async fn wait_daemon_set_available(client: &Client, name: &str) -> k8s_openapi::api::apps::v1::DaemonSet {
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client.clone(), GATEWAY_NS);
    wait_for(&format!("DaemonSet {GATEWAY_NS}/{name} available"), || {
        let api = api.clone();
        async move {
            let d = api.get(name).await.ok()?;
            let status = d.status.as_ref()?;
            let fresh = status.observed_generation >= d.metadata.generation;
            (fresh && status.number_available.unwrap_or(0) >= 1).then_some(d)
        }
    })
    .await
}

/// A public TURN service per node (issue #45): the chart's default Dataplane switched to a
/// host-network DaemonSet, a Gateway with relay address discovery. stunnerd runs in the host's
/// network (it resolves the CDS Service name: `ClusterFirstWithHostNet`), a TURN client reaches
/// it at `<node IP>:3478` directly (no Service in the path) and is relayed from the node's
/// address, to a backend pod. The node has no ExternalIP (kubelet, with no cloud provider,
/// rewrites a node's addresses to its own within seconds, so a test cannot give it one), so
/// discovery falls back to the pod address, here the node's, and the Gateway's
/// `RelayAddressDiscovered` condition names the node. Switching the Dataplane back to a
/// (host-network) Deployment keeps TURN working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_network_daemon_set_serves_turn_from_the_node() {
    let Some((node, client)) = node_with_gateway_api("public-turn").await else { return };
    apply_yaml(&client, &echo_backend(1)).await;
    helm(&node, "install", &["--create-namespace"]);
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    let dataplanes = e2e::api_for(&client, "stunner.l7mp.io/v1", "Dataplane", None).await;
    let set_kind = |kind: &'static str| {
        let dataplanes = dataplanes.clone();
        async move {
            // No metrics port on the host; a short grace period: a pod that goes waits out
            // open allocations that long, and the next host-network pod waits for it.
            let spec = json!({"spec": {
                "dataplaneResource": kind, "hostNetwork": true,
                "enableMetricsEndpoint": false, "terminationGracePeriodSeconds": 5,
            }});
            dataplanes.patch("default", &PatchParams::default(), &Patch::Merge(spec)).await.unwrap();
        }
    };
    set_kind("DaemonSet").await;
    let discovering = simple_tunnel("pass-1").replace(
        "    stunner.l7mp.io/service-type: NodePort\n",
        "    stunner.l7mp.io/service-type: NodePort\n    stunner.l7mp.io/enable-relay-address-discovery: \"true\"\n",
    );
    apply_yaml(&client, &discovering).await;
    wait_available(&client, "default", "echo-server").await;
    let daemon_set = wait_daemon_set_available(&client, "udp-gateway").await;
    let pod = daemon_set.spec.unwrap().template.spec.unwrap();
    assert_eq!((pod.host_network, pod.dns_policy.as_deref()), (Some(true), Some("ClusterFirstWithHostNet")));
    assert!(get(&client, "apps/v1", "Deployment", Some(GATEWAY_NS), "udp-gateway").await.is_none());

    let turn = SocketAddr::new(node.node_ip.into(), 3478);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    let v = turn_relays(&node, turn, USER, "pass-1", echo).await;
    assert!(v["relay"].as_str().unwrap_or_default().starts_with(&format!("{}:", node.node_ip)), "{v}");

    // The served config, as the node's stunnerd asks for it (`?node=`): no external address,
    // so the placeholder became `$STUNNER_ADDR`; and the Gateway says why.
    let cds = SocketAddr::new(cluster_ip(&client, OPERATOR_NS, "stunner-config-discovery").await, 13478);
    let config = e2e::cds_node_config(cds, GATEWAY_NS, "udp-gateway", &node.facts.node_name).await.unwrap();
    assert_eq!(config.listeners[0].addr, "$STUNNER_ADDR");
    let gw = get(&client, "gateway.networking.k8s.io/v1", "Gateway", Some(GATEWAY_NS), "udp-gateway").await.unwrap();
    let condition = e2e::condition(&gw.data["status"], "RelayAddressDiscovered").cloned().unwrap_or_default();
    assert_eq!(
        (condition["status"].as_str(), condition["reason"].as_str()),
        (Some("False"), Some("NoExternalAddress"))
    );
    assert!(condition["message"].as_str().unwrap_or_default().contains(&node.facts.node_name), "{condition}");

    // Back to a Deployment: the DaemonSet goes first (its pod holds the node's ports), then
    // the Deployment's pod serves on the same address.
    set_kind("Deployment").await;
    wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    e2e::wait_gone(&client, "apps/v1", "DaemonSet", Some(GATEWAY_NS), "udp-gateway").await;
    turn_relays(&node, turn, USER, "pass-1", echo).await;
}

/// The Gateway API CRDs of the cluster (both API groups of a bundle), by name, with their
/// metadata.
async fn gateway_api_crds(client: &Client) -> std::collections::BTreeMap<String, Value> {
    let crds = e2e::api_for(client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None).await;
    let list = crds.list(&ListParams::default()).await.expect("list CRDs");
    list.items
        .into_iter()
        .filter(|crd| crd.data["spec"]["group"].as_str().is_some_and(|g| g.starts_with("gateway.networking.")))
        .map(|crd| (crd.metadata.name.clone().unwrap(), serde_json::to_value(&crd.metadata).unwrap()))
        .collect()
}

/// A GatewayClass of ours and its GatewayConfig, for the operator to accept.
const GATEWAY_CLASS: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: stunner
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata:
  name: stunner-gatewayconfig
  namespace: stunner
spec:
  realm: stunner.l7mp.io
  authType: plaintext
  userName: user-1
  password: pass-1
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: stunner-gatewayclass
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef:
    group: stunner.l7mp.io
    kind: GatewayConfig
    name: stunner-gatewayconfig
    namespace: stunner
"#;

/// The stunner chart's CRD switches and its release packaging on a real cluster (issue #57),
/// three clusters in turn on one node: with both switches off no Gateway API CRD is installed;
/// a cluster that has v1.7.0 already (applied as `kubectl apply` does, no Helm owner) keeps it
/// untouched, the notes say so, and the operator accepts a GatewayClass; a fresh cluster gets,
/// from `helm install oci://` of the chart `scripts/release-artifacts` pushed to a registry on
/// loopback, with the default switch, v1.7.0's standard channel and its safe-upgrades policy,
/// kept after `helm uninstall`, and TURN relays through a `v1` UDPRoute on the default
/// Dataplane, whose pinned stunnerd is the image the node imports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_the_gateway_api_crds_unless_the_cluster_has_them() {
    let how = "run tests/deploytool/build.sh and tests/registry/build.sh (scripts/test does)";
    let built = |path| e2e::external::built(repo_file(path), how);
    let (Some(helm_bin), Some(registry_bin)) =
        (built("tests/deploytool/bin/helm"), built("tests/registry/bin/registry"))
    else {
        return;
    };
    if !tools_built() {
        return;
    }
    let Some(node) = Node::start("install-gateway-api").await else { return };
    let client = node.admin.clone();

    // Both switches off: nothing of the Gateway API.
    let notes = helm(&node, "install", &["--create-namespace", "--set", "standardCrds.enabled=false"]);
    assert!(notes.contains("Gateway API CRDs: not installed by this release"), "{notes}");
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    assert_eq!(gateway_api_crds(&client).await, Default::default(), "the switches are off");
    helm(&node, "uninstall", &[]);

    // v1.7.0 there already, not Helm's: left alone, and the operator serves on it.
    e2e::install_gateway_api(&client, e2e::GatewayApi::V17Standard).await;
    let before = gateway_api_crds(&client).await;
    let notes = helm(&node, "install", &[]);
    assert!(notes.contains("the cluster has v1.7.0 standard channel") && notes.contains("left alone"), "{notes}");
    assert!(!notes.contains("older than"), "{notes}");
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    assert_eq!(gateway_api_crds(&client).await, before, "the chart changed the cluster's Gateway API CRDs");
    apply_yaml(&client, GATEWAY_CLASS).await;
    e2e::wait_object(
        &client,
        "gateway.networking.k8s.io/v1",
        "GatewayClass",
        None,
        "stunner-gatewayclass",
        "Accepted=True",
        |gc| e2e::has_condition(&gc.data["status"], "Accepted", "True", "Accepted"),
    )
    .await;
    e2e::delete(&client, "gateway.networking.k8s.io/v1", "GatewayClass", None, "stunner-gatewayclass").await;
    helm(&node, "uninstall", &[]);
    assert_eq!(gateway_api_crds(&client).await.len(), before.len(), "uninstall took CRDs it did not own");
    // Back to a cluster without the Gateway API.
    for name in before.keys() {
        e2e::delete(&client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, name).await;
    }
    for kind in ["ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicy"] {
        let (api_version, name) = ("admissionregistration.k8s.io/v1", "safe-upgrades.gateway.networking.k8s.io");
        e2e::delete(&client, api_version, kind, None, name).await;
    }
    for name in before.keys() {
        e2e::wait_gone(&client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, name).await;
    }

    // A fresh cluster, the chart from the registry with the default switch: the chart's
    // bundle, owned by the release.
    let registry = registry::Registry::start(&registry_bin);
    let home = node.dir.join("helm");
    registry::push_chart(&e2e::repo_root(), &helm_bin, &home, &node.dir.join("release"), &registry);
    let mut install = registry::helm_command(&helm_bin, &home);
    install.args(["install", "stunner-gateway-operator", &registry.chart_ref(), "--plain-http"]);
    install.args(["--version", &registry::chart_version(&e2e::repo_root())]);
    install.args(["--kubeconfig", node.kubeconfig.to_str().unwrap(), "-n", OPERATOR_NS, "--wait", "--timeout", "5m"]);
    for v in CHART_VALUES {
        install.args(["--set", v]);
    }
    let notes = tokio::task::block_in_place(|| registry::run(&mut install));
    assert!(notes.contains("Gateway API CRDs: v1.7.0 standard channel with its safe-upgrades"), "{notes}");
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    let installed = gateway_api_crds(&client).await;
    assert_eq!(installed.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>(), "v1.7.0's standard CRDs");
    for (name, meta) in &installed {
        let annotations = &meta["annotations"];
        assert_eq!(annotations["meta.helm.sh/release-name"], "stunner-gateway-operator", "{name}");
        assert_eq!(annotations["helm.sh/resource-policy"], "keep", "{name}");
        assert_eq!(annotations["gateway.networking.k8s.io/bundle-version"], "v1.7.0", "{name}");
    }
    let policy = "safe-upgrades.gateway.networking.k8s.io";
    assert!(get(&client, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", None, policy).await.is_some());
    apply_yaml(&client, &echo_backend(1)).await;
    apply_yaml(&client, &simple_tunnel_with("pass-1", RouteApi::GatewayApiV1)).await;
    let dataplane = wait_available(&client, GATEWAY_NS, "udp-gateway").await;
    let pod = dataplane.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some(node::STUNNERD_IMAGE), "the default Dataplane's stunnerd");
    assert_eq!(pod.termination_grace_period_seconds, Some(3600), "the default Dataplane's grace period");
    wait_available(&client, "default", "echo-server").await;
    let turn = SocketAddr::new(node.node_ip.into(), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    let relayed = turn_relays(&node, turn, USER, "pass-1", echo).await;
    eprintln!("node e2e: the chart's Gateway API v1.7.0, v1 UDPRoute: relayed {relayed}");
    helm(&node, "uninstall", &[]);
    assert_eq!(gateway_api_crds(&client).await.len(), installed.len(), "helm.sh/resource-policy: keep");
}

/// `dir` copied into `to`, symlinks followed (the chart's `crds/` is one). Bounded: a chart is
/// a few dozen files.
fn copy_dir(dir: &std::path::Path, to: &std::path::Path) {
    let mut todo = vec![(dir.to_path_buf(), to.to_path_buf())];
    for _ in 0..1000 {
        let Some((from, to)) = todo.pop() else { return };
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let path = entry.unwrap().path();
            let target = to.join(path.file_name().unwrap());
            if path.is_dir() {
                todo.push((path, target));
            } else {
                std::fs::copy(&path, &target).unwrap_or_else(|e| panic!("copy {}: {e}", path.display()));
            }
        }
    }
    panic!("{} has too many directories", dir.display());
}

/// The field chart N+1 adds to the Dataplane CRD's `v1` spec, and the bundle version it says.
const NEXT_FIELD: &str = "upgradeProbe";
const NEXT_BUNDLE: &str = "99.0.0";

/// Chart N+1, in `dir`: this chart with one more field in the Dataplane CRD, a higher bundle
/// version on it and a higher chart version; the operator image stays the same.
fn next_chart(dir: &std::path::Path) -> PathBuf {
    let chart = dir.join("stunner-gateway-operator");
    copy_dir(&repo_file("deploy/helm/stunner-gateway-operator"), &chart);
    let crd_file = chart.join("crds/stunner.l7mp.io_dataplanes.yaml");
    let mut crd: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&crd_file).unwrap()).unwrap();
    crd["metadata"]["annotations"]["stunner.l7mp.io/bundle-version"] = NEXT_BUNDLE.into();
    let versions = crd["spec"]["versions"].as_array_mut().unwrap();
    let v1 = versions.iter_mut().find(|v| v["name"] == "v1").unwrap();
    v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][NEXT_FIELD] = json!({"type": "string"});
    std::fs::write(&crd_file, serde_yaml_ng::to_string(&crd).unwrap()).unwrap();
    let chart_yaml = chart.join("Chart.yaml");
    let text = std::fs::read_to_string(&chart_yaml).unwrap();
    let version = text.lines().find(|l| l.starts_with("version:")).expect("a chart version").to_string();
    std::fs::write(&chart_yaml, text.replace(&version, "version: 99.0.0")).unwrap();
    chart
}

/// What the API server keeps of [`NEXT_FIELD`] in a Dataplane applied with it (a server-side
/// apply of a field the schema lacks is refused: "field not declared in schema").
async fn next_field_kept(client: &Client) -> Option<String> {
    let probe = json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane",
        "metadata": {"name": "upgrade-probe"}, "spec": {"image": "unused", NEXT_FIELD: "n+1"}});
    match e2e::apply(client, probe).await {
        Ok(applied) => applied.data["spec"][NEXT_FIELD].as_str().map(String::from),
        Err(e) if e.to_string().contains("field not declared in schema") => None,
        Err(e) => panic!("apply the probe Dataplane: {e}"),
    }
}

/// A TURN allocation held open through the NodePort by `turnprobe --hold`, relaying a datagram
/// every `interval` until [`HeldAllocation::end`].
struct HeldAllocation {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl HeldAllocation {
    fn start(server: SocketAddr, password: &str, peer: SocketAddr, interval: Duration) -> HeldAllocation {
        let mut child = Command::new(tool("tests/interop/bin/turnprobe"))
            .args(["--server", &server.to_string(), "--user", USER, "--password", password])
            .args(["--peer", &peer.to_string(), "--hold", "--interval", &format!("{}ms", interval.as_millis())])
            .args(["--timeout", "15m"])
            .args(["--local", &SocketAddr::new(server.ip(), 0).to_string()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("run turnprobe --hold");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        HeldAllocation { child, lines }
    }

    /// The next line turnprobe prints, as JSON (bounded wait).
    fn next(&self, what: &str) -> Value {
        let line = self.lines.recv_timeout(TIMEOUT).unwrap_or_else(|e| panic!("turnprobe --hold: no {what}: {e}"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("turnprobe --hold: {e}: {line}"))
    }

    /// Ends the allocation (turnprobe closes it when its stdin ends) and returns the verdict.
    fn end(mut self) -> Value {
        drop(self.child.stdin.take());
        let verdict = self.next("verdict");
        let _ = self.child.wait();
        verdict
    }
}

impl Drop for HeldAllocation {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Ready pod of the Gateway's dataplane whose IP is `ip`.
fn pod_with_ip<'a>(pods: &'a [Pod], ip: &str) -> Option<&'a Pod> {
    pods.iter().find(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_deref()) == Some(ip))
}

/// Issue #57 on the node, one node start for two lifecycle steps.
///
/// STUNner CRDs follow `helm upgrade`: chart N installed, then chart N+1 (one more field in the
/// Dataplane CRD, same operator image, [`next_chart`]): the operator rolls (the CRD ConfigMap's
/// checksum) and applies the new schema, so the field, pruned before, is served after.
///
/// A scale-down drains: a Gateway with two stunnerd replicas and a 120 s grace period, a TURN
/// allocation relaying every 200 ms through one of them (pod A); the Dataplane is scaled to one
/// replica and pod A (the cheapest to delete, by its `pod-deletion-cost`) terminates. It keeps
/// relaying past 60 s, with no gap over 2 s, while new allocations go to pod B; when the client
/// ends its allocation, pod A exits, before its grace period is out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_brings_changed_crds_and_a_scaled_down_dataplane_drains() {
    let Some((node, client)) = node_with_gateway_api("upgrade-drain").await else { return };
    apply_yaml(&client, &echo_backend(1)).await;

    // Chart N, then N+1.
    helm(&node, "install", &["--create-namespace"]);
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    assert_eq!(next_field_kept(&client).await, None, "chart N's schema has no {NEXT_FIELD}");
    let scratch = e2e::TestDir::new("chart-next");
    let next = next_chart(&scratch.0);
    helm_chart(&node, "upgrade", &next, &[]);
    wait_available(&client, OPERATOR_NS, "stunner-gateway-operator").await;
    let kept = wait_for(&format!("{NEXT_FIELD} served after the upgrade"), || {
        let client = client.clone();
        async move { next_field_kept(&client).await }
    })
    .await;
    assert_eq!(kept, "n+1");
    let crd = get(&client, "apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "dataplanes.stunner.l7mp.io")
        .await
        .unwrap();
    assert_eq!(crd.metadata.annotations.unwrap()["stunner.l7mp.io/bundle-version"], NEXT_BUNDLE);
    e2e::delete(&client, "stunner.l7mp.io/v1", "Dataplane", None, "upgrade-probe").await;
    let logs = operator_logs(&client).await;
    assert!(logs.contains("upgraded CRD") && logs.contains(NEXT_BUNDLE), "{logs}");

    // Two stunnerd replicas with a long grace period.
    let dataplanes = e2e::api_for(&client, "stunner.l7mp.io/v1", "Dataplane", None).await;
    let scale = |replicas: u32| {
        let dataplanes = dataplanes.clone();
        async move {
            let spec = json!({"spec": {"replicas": replicas, "terminationGracePeriodSeconds": 120}});
            dataplanes.patch("default", &PatchParams::default(), &Patch::Merge(spec)).await.unwrap();
        }
    };
    scale(2).await;
    apply_yaml(&client, &simple_tunnel("pass-1")).await;
    wait_available(&client, "default", "echo-server").await;
    let pods = wait_for("two Ready stunnerd pods", || {
        let client = client.clone();
        async move { Some(ready_pods(&client, GATEWAY_NS, "app=stunner").await).filter(|p| p.len() == 2) }
    })
    .await;
    let turn = SocketAddr::new(node.node_ip.into(), node_port(&client).await);
    let echo = SocketAddr::new(cluster_ip(&client, "default", "echo-server").await, ECHO_PORT);
    turn_relays(&node, turn, USER, "pass-1", echo).await;

    // The call: relayed through pod A (whichever the Service picked).
    let held = HeldAllocation::start(turn, "pass-1", echo, Duration::from_millis(200));
    let relay = held.next("relay address");
    let relay_ip = relay["relay"].as_str().and_then(|r| r.rsplit_once(':')).map(|(ip, _)| ip.to_string());
    let relay_ip = relay_ip.unwrap_or_else(|| panic!("a relay address: {relay}"));
    let pod_a = pod_with_ip(&pods, &relay_ip).unwrap_or_else(|| panic!("no stunnerd pod has {relay_ip}")).clone();
    let name_a = pod_a.metadata.name.clone().unwrap();
    let pod_b = pods.iter().find(|p| p.metadata.name != pod_a.metadata.name).unwrap();
    let ip_b = pod_b.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    assert_eq!(held.next("first echo")["echoed"], true);
    eprintln!("node e2e: the call relays through {name_a} ({relay_ip}); the other pod is {ip_b}");

    // Scale down, pod A first.
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), GATEWAY_NS);
    let cost = json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "-1000"}}});
    pod_api.patch(&name_a, &PatchParams::default(), &Patch::Merge(cost)).await.unwrap();
    scale(1).await;
    let scaled = Instant::now();
    let terminating = wait_for(&format!("{name_a} terminating"), || {
        let pod_api = pod_api.clone();
        let name_a = name_a.clone();
        async move { pod_api.get(&name_a).await.ok().filter(|p| p.metadata.deletion_timestamp.is_some()) }
    })
    .await;
    let deadline = terminating.metadata.deletion_timestamp.clone().unwrap().0;

    // New allocations go to pod B: once kube-proxy has taken pod A's endpoint out of the
    // Service (it is terminating, so never ready again), every one.
    let on_b = |v: &Value| v["relay"].as_str().unwrap_or_default().starts_with(&format!("{ip_b}:"));
    wait_for("a new allocation relayed by the remaining pod", || {
        let node = &node;
        async move { Some(turn_relays(node, turn, USER, "pass-1", echo).await).filter(on_b) }
    })
    .await;
    for _ in 0..3 {
        let v = turn_relays(&node, turn, USER, "pass-1", echo).await;
        assert!(on_b(&v), "a new allocation while {name_a} drains: {v}");
    }

    // The call goes on past 60 s; pod A waits for it.
    const HELD: Duration = Duration::from_secs(70);
    for _ in 0..100 {
        let left = HELD.saturating_sub(scaled.elapsed());
        if left.is_zero() {
            break;
        }
        let a = pod_api.get_opt(&name_a).await.unwrap();
        assert!(
            a.is_some(),
            "{name_a} exited while a call was still on it ({:.0?} after the scale-down)",
            scaled.elapsed()
        );
        tokio::time::sleep(left.min(Duration::from_secs(5))).await;
    }
    let verdict = tokio::task::block_in_place(|| held.end());
    let ended = Instant::now();
    eprintln!("node e2e: the call through the draining pod, {:.0?} after the scale-down: {verdict}", scaled.elapsed());
    assert_eq!(verdict["ok"], true, "{verdict}");
    let (sent, received) = (verdict["sent"].as_i64().unwrap(), verdict["received"].as_i64().unwrap());
    assert!(sent >= 350 && received * 10 >= sent * 9, "relayed all along: {verdict}");
    let max_gap = verdict["max_gap_ms"].as_i64().unwrap();
    assert!(max_gap < 2000, "a gap of {max_gap} ms in the call: {verdict}");

    // The last allocation gone, stunnerd exits at once, well before the grace period ends.
    e2e::wait_gone(&client, "v1", "Pod", Some(GATEWAY_NS), &name_a).await;
    let gone_at = k8s_openapi::jiff::Timestamp::now();
    eprintln!("node e2e: {name_a} gone {:.1?} after the call ended", ended.elapsed());
    assert!(gone_at < deadline, "{name_a} outlived its grace period: gone {gone_at}, deadline {deadline}");
    assert!(ended.elapsed() < Duration::from_secs(30), "{name_a} took {:.0?} to exit", ended.elapsed());
}
