//! The real single-node cluster (issue #14, item 2) works as the STUNner tests need it: the
//! node is Ready and CoreDNS is, a pod from an imported image runs, its Service's name
//! resolves through the cluster DNS, a NodePort on the node address reaches it from the host,
//! and the teardown leaves no bridge, chain, mount or process of the node behind. Needs root
//! and the images of tests/images/build.sh (scripts/test builds both binaries and images).
//! The networks users run (issue #60: [`networks`], [`dual_stack`]) are tried on the same node
//! before its teardown, which spares a node start.

#[path = "e2e_node/dual_stack.rs"]
mod dual_stack;
mod e2e;
#[path = "e2e_node/networks.rs"]
mod networks;
mod node;

use e2e::{apply_yaml, namespace_yaml, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod, Service};
use kube::api::{Api, ListParams};
use node::{Node, UDP_ECHO_IMAGE, resolve_a};
use std::net::Ipv4Addr;
use std::time::Duration;

const NS: &str = "node-smoke";

fn echo_yaml() -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: udp-echo, namespace: {NS}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: udp-echo}}}}
  template:
    metadata: {{labels: {{app: udp-echo}}}}
    spec:
      # Else kubelet sets UDP_ECHO_PORT=udp://<ClusterIP>:9001 for the Service named udp-echo,
      # which is udp-echo's own port variable.
      enableServiceLinks: false
      containers:
      - name: echo
        image: {UDP_ECHO_IMAGE}
        imagePullPolicy: Never
        args: [-prefix-hostname]
        ports: [{{containerPort: 9001, protocol: UDP}}]
---
apiVersion: v1
kind: Service
metadata: {{name: udp-echo, namespace: {NS}}}
spec:
  type: NodePort
  selector: {{app: udp-echo}}
  ports: [{{port: 9001, targetPort: 9001, protocol: UDP}}]
"#
    )
}

/// Sends `msg` over UDP to `to` until an answer comes (the first datagrams may race the
/// iptables rules); returns the answer.
async fn udp_echo(to: (Ipv4Addr, u16), msg: &[u8]) -> Option<String> {
    let sock = tokio::net::UdpSocket::bind("0.0.0.0:0").await.unwrap();
    let mut buf = [0u8; 2048];
    sock.send_to(msg, to).await.ok()?;
    let n = tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf)).await.ok()?.ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_runs_pods_with_cluster_dns_and_node_ports_and_leaves_nothing_behind() {
    let Some(mut node) = Node::start("smoke").await else { return };
    let admin = node.admin.clone();

    let kube_node = Api::<KubeNode>::all(admin.clone()).get(&node.facts.node_name).await.unwrap();
    let ready = kube_node.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.status, "True", "node Ready: {ready:?}");
    let coredns = Api::<Deployment>::namespaced(admin.clone(), "kube-system").get("coredns").await.unwrap();
    assert!(coredns.status.unwrap().available_replicas.unwrap_or(0) >= 1, "CoreDNS available");

    apply_yaml(&admin, &namespace_yaml(NS)).await;
    apply_yaml(&admin, &echo_yaml()).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NS);
    let pod = wait_for("the udp-echo pod Running and Ready", || async {
        let list = pods.list(&ListParams::default().labels("app=udp-echo")).await.ok()?;
        list.items.into_iter().find(|p| {
            let status = p.status.as_ref();
            status.and_then(|s| s.phase.as_deref()) == Some("Running")
                && status
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    let pod_name = pod.metadata.name.clone().unwrap();
    let pod_ip: Ipv4Addr = pod.status.unwrap().pod_ip.unwrap().parse().unwrap();
    assert!(pod_ip.octets()[..2] == [198, 18], "pod IP {pod_ip} in the node's pod range");

    let svc = Api::<Service>::namespaced(admin.clone(), NS).get("udp-echo").await.unwrap();
    let spec = svc.spec.unwrap();
    let cluster_ip: Ipv4Addr = spec.cluster_ip.unwrap().parse().unwrap();
    let node_port = spec.ports.unwrap()[0].node_port.expect("a nodePort") as u16;

    // The Service's name through the cluster DNS, asked at its ClusterIP (kube-proxy's DNAT
    // to the CoreDNS pod), as a pod's resolver asks it.
    let name = format!("udp-echo.{NS}.svc.{}", node.facts.cluster_domain);
    let dns = node.facts.cluster_dns;
    let answer = wait_for("the Service name resolved by the cluster DNS", || async {
        resolve_a(dns, &name).await.ok().filter(|a| !a.is_empty())
    })
    .await;
    assert_eq!(answer, vec![cluster_ip], "{name}");

    // The pod answers with its hostname: on the pod network, through its ClusterIP, and
    // through the NodePort on the node address.
    let want = format!("{pod_name}: ping");
    for (what, to) in [
        ("the pod IP", (pod_ip, 9001)),
        ("the ClusterIP", (cluster_ip, 9001)),
        ("the NodePort", (node.node_ip, node_port)),
    ] {
        let reply = wait_for(&format!("an echo through {what}"), || udp_echo(to, b"ping")).await;
        assert_eq!(reply, want, "{what}");
    }

    // The apiserver reaches kubelet (client cert, webhook authorization): container logs, the
    // path that exec and port-forward take too.
    let log = pods.logs(&pod_name, &Default::default()).await.unwrap();
    assert!(log.contains("udp-echo: listening"), "the pod's log through kubelet: {log}");

    networks::a_service_per_protocol_relays_turn_udp_and_tls_through_two_services_to_one_dataplane(&node).await;
    dual_stack::a_dual_stack_gateway_relays_turn_over_ipv4_and_ipv6_with_credentials_from_the_credential_api(&node)
        .await;

    assert!(node.stop(), "the node exited cleanly\n{}", node.log_tails());
    node::assert_machine_clean();
}
