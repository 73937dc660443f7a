//! The networks users run, on the real single-node cluster (issue #60): a Gateway with a
//! TURN-UDP and a TURN-TLS listener and `stunner.l7mp.io/service-per-protocol` relays TURN
//! through two single-protocol Services to one stunnerd Deployment (docs/deploy.md §11).
//!
//! The operator is this build's binary, run on the host against the node's API server (the
//! operator image of tests/images is a release build of whatever was built last), with its CDS
//! on the node address, which the dataplane pods reach. The node has no cloud: the test stands
//! in for the load balancer controller, giving each Service an ingress address, and sends TURN
//! where a cloud load balancer would: to each Service's node port on the node address. Needs
//! root, the node (tests/apiserver/build.sh), its images (tests/images/build.sh) and turnprobe
//! (tests/interop/build.sh); skipped with a notice without turnprobe. It runs on the smoke
//! test's node, before that node's teardown is checked for leftovers. The helpers here serve
//! the dual-stack scenario ([`crate::dual_stack`]) too.

use crate::e2e::{
    self, Operator, apply_yaml, get, install_gateway_api, install_stunner_crds, namespace_yaml, wait_for, wait_object,
};
use crate::node::{Node, STUNNERD_IMAGE, UDP_ECHO_IMAGE, ready_pod_ip};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use stunner_gateway::config::StunnerConfig;

const NS: &str = "networks";
const GW: &str = "gateway.networking.k8s.io/v1";
/// The addresses the stand-in load balancer controller gives the two Services (RFC 5737
/// documentation addresses: nothing is sent to them).
const UDP_LB_ADDRESS: &str = "203.0.113.10";
const TCP_LB_ADDRESS: &str = "203.0.113.20";

pub fn turnprobe() -> Option<PathBuf> {
    e2e::external::built(e2e::repo_root().join("tests/interop/bin/turnprobe"), "run tests/interop/build.sh")
}

/// A fresh self-signed certificate and key (PEM) from turnprobe.
fn self_signed(turnprobe: &PathBuf) -> (String, String) {
    let out = Command::new(turnprobe).arg("selfsigned").output().expect("run turnprobe selfsigned");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (v["cert"].as_str().unwrap().to_string(), v["key"].as_str().unwrap().to_string())
}

/// The Dataplane every Gateway here runs: stunnerd v1.2.1 from the imported image.
pub fn dataplane_yaml() -> String {
    format!(
        r#"apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata: {{name: default}}
spec:
  image: {STUNNERD_IMAGE}
  imagePullPolicy: Never
  args: ["-w"]
"#
    )
}

/// The `webrtc` Gateway's UDPRoute to the UDP echo backend, and the backend's Deployment, in
/// namespace `ns` (each scenario adds the backend's Service, of its own families).
pub fn echo_route_and_deployment(ns: &str) -> String {
    format!(
        r#"apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {{name: echo, namespace: {ns}}}
spec:
  parentRefs: [{{name: webrtc}}]
  rules: [{{backendRefs: [{{name: udp-echo}}]}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: udp-echo, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: udp-echo}}}}
  template:
    metadata: {{labels: {{app: udp-echo}}}}
    spec:
      enableServiceLinks: false
      containers:
      - name: echo
        image: {UDP_ECHO_IMAGE}
        imagePullPolicy: Never
        ports: [{{containerPort: 9001, protocol: UDP}}]
"#
    )
}

fn manifests(cert: &str, key: &str) -> String {
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    let echo = echo_route_and_deployment(NS);
    format!(
        r#"apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata: {{name: networks, namespace: {NS}}}
spec:
  realm: stunner.l7mp.io
  authType: static
  userName: user-1
  password: pass-1
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: networks}}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef: {{group: stunner.l7mp.io, kind: GatewayConfig, name: networks, namespace: {NS}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: turn-cert, namespace: {NS}}}
type: kubernetes.io/tls
data:
  tls.crt: {cert}
  tls.key: {key}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: webrtc
  namespace: {NS}
  annotations:
    stunner.l7mp.io/service-per-protocol: "true"
spec:
  gatewayClassName: networks
  listeners:
  - {{name: udp, protocol: TURN-UDP, port: 3478}}
  - name: tls
    protocol: TURN-TLS
    port: 5349
    tls: {{certificateRefs: [{{name: turn-cert}}]}}
---
{echo}---
apiVersion: v1
kind: Service
metadata: {{name: udp-echo, namespace: {NS}}}
spec:
  selector: {{app: udp-echo}}
  ports: [{{port: 9001, protocol: UDP}}]
"#,
        cert = b64(cert),
        key = b64(key),
    )
}

/// Waits for Service `name` to have one node port; returns it.
async fn node_port(client: &kube::Client, name: &str) -> u16 {
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    wait_for(&format!("Service {name} with a node port"), || async {
        let ports = services.get_opt(name).await.ok()??.spec?.ports?;
        let [port] = ports.as_slice() else { return None };
        u16::try_from(port.node_port?).ok()
    })
    .await
}

/// Stands in for a cloud's load balancer controller: gives Service `ns/name` the ingress
/// addresses `ips`.
pub async fn load_balancer_ingress(client: &kube::Client, ns: &str, name: &str, ips: &[&str]) {
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let ingress: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
    let status = json!({"status": {"loadBalancer": {"ingress": ingress}}});
    services.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// Installs the CRDs the operator needs and starts this build's operator against `node`, its
/// CDS on the node address (which the dataplane pods reach and are told), with `args` more.
pub async fn start_operator(node: &Node, name: &str, args: &[&str]) -> Operator {
    let admin = &node.admin;
    install_stunner_crds(admin).await;
    install_gateway_api(admin, e2e::GatewayApi::V14StandardWithUdpRoute).await;
    apply_yaml(admin, &namespace_yaml(e2e::OPERATOR_NAMESPACE)).await;
    let cds = SocketAddr::new(node.node_ip.into(), e2e::free_port()).to_string();
    let node_ip = node.node_ip.to_string();
    let mut all = vec!["--config-discovery-address", &cds, "--config-discovery-advertised-host", &node_ip];
    all.extend_from_slice(args);
    Operator::start_with(&node.kubeconfig, &node.dir, name, &all).await
}

/// One TURN allocation through `server` (`transport` udp or tls) as `user`/`password`,
/// relaying to `peer`, from the server's own address (the node's, of its family): turnprobe's
/// verdict and its stderr.
pub fn turn_once(
    turnprobe: &PathBuf,
    server: SocketAddr,
    transport: &str,
    (user, password): (&str, &str),
    peer: SocketAddr,
) -> (Value, String) {
    let out = Command::new(turnprobe)
        .args(["--server", &server.to_string(), "--transport", transport, "--insecure"])
        .args(["--user", user, "--password", password, "--peer", &peer.to_string()])
        .args(["--count", "3", "--timeout", "10s", "--local", &SocketAddr::new(server.ip(), 0).to_string()])
        .output()
        .expect("run turnprobe");
    let verdict = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (verdict, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// TURN through `server` (`transport` udp or tls) as `user`/`password`, relaying to `peer`,
/// retried (bounded) until it succeeds: the dataplane takes a moment to get its config and
/// the node's rules to settle. Returns turnprobe's verdict.
pub async fn turn_relays(
    node: &Node,
    turnprobe: &PathBuf,
    server: SocketAddr,
    transport: &str,
    (user, password): (&str, &str),
    peer: SocketAddr,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (verdict, stderr) = turn_once(turnprobe, server, transport, (user, password), peer);
        if verdict["ok"] == true {
            return verdict;
        }
        assert!(
            Instant::now() < deadline,
            "no TURN relay over {transport} through {server} to {peer}: {verdict} {stderr}\n{}",
            node.log_tails()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A Gateway with `service-per-protocol` relays TURN-UDP and TURN-TLS through two
/// single-protocol Services to one dataplane, on `node`.
pub async fn a_service_per_protocol_relays_turn_udp_and_tls_through_two_services_to_one_dataplane(node: &Node) {
    let Some(turnprobe) = turnprobe() else { return };
    let admin = node.admin.clone();
    let op = start_operator(node, "op", &[]).await;
    apply_yaml(&admin, &namespace_yaml(NS)).await;
    let (cert, key) = self_signed(&turnprobe);
    apply_yaml(&admin, &dataplane_yaml()).await;
    apply_yaml(&admin, &manifests(&cert, &key)).await;

    let udp_port = node_port(&admin, "webrtc").await;
    let tls_port = node_port(&admin, "webrtc-tcp").await;
    let services: Api<Service> = Api::namespaced(admin.clone(), NS);
    let protocol = |s: Service| s.spec.unwrap().ports.unwrap()[0].protocol.clone().unwrap();
    assert_eq!(protocol(services.get("webrtc").await.unwrap()), "UDP");
    assert_eq!(protocol(services.get("webrtc-tcp").await.unwrap()), "TCP");
    load_balancer_ingress(&admin, NS, "webrtc", &[UDP_LB_ADDRESS]).await;
    load_balancer_ingress(&admin, NS, "webrtc-tcp", &[TCP_LB_ADDRESS]).await;

    // Each listener's public address from its own Service, in the config and the status.
    let config = wait_for("each listener's public address from its own Service", || async {
        let c: StunnerConfig = op.config(NS, "webrtc").await?;
        let public: Vec<_> = c.listeners.iter().map(|l| (l.public_addr.as_str(), l.public_port)).collect();
        (public == [(UDP_LB_ADDRESS, 3478), (TCP_LB_ADDRESS, 5349)]).then_some(c)
    })
    .await;
    assert_eq!(config.listeners[1].protocol, "TURN-TLS");
    let want = json!([{"type": "IPAddress", "value": UDP_LB_ADDRESS}, {"type": "IPAddress", "value": TCP_LB_ADDRESS}]);
    wait_object(&admin, GW, "Gateway", Some(NS), "webrtc", "both addresses", |o| o.data["status"]["addresses"] == want)
        .await;

    // TURN through both Services, to the one dataplane, relayed to the echo pod.
    let peer = SocketAddr::new(ready_pod_ip(&admin, NS, "app=udp-echo").await.into(), 9001);
    let user = ("user-1", "pass-1");
    turn_relays(node, &turnprobe, SocketAddr::new(node.node_ip.into(), udp_port), "udp", user, peer).await;
    turn_relays(node, &turnprobe, SocketAddr::new(node.node_ip.into(), tls_port), "tls", user, peer).await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), NS);
    let dataplanes = deployments.list(&ListParams::default().labels("stunner.l7mp.io/owned-by=stunner")).await.unwrap();
    let names: Vec<_> = dataplanes.items.iter().filter_map(|d| d.metadata.name.as_deref()).collect();
    assert_eq!(names, ["webrtc"], "one stunnerd Deployment serves both Services");
    assert!(get(&admin, "v1", "Service", Some(NS), "webrtc-tcp").await.is_some());
    op.stop().await;
}
