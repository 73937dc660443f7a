//! A dual-stack Gateway on the real single-node cluster (issue #60, docs/deploy.md §12): the
//! node has pod and Service ranges of both families (IPv4 primary; tests/apiserver
//! node_network.go), a Gateway with `stunner.l7mp.io/ip-families: IPv4,IPv6` gets a
//! dual-stack Service, an address of each family in its status and in the credential API's
//! `/ice` answer, and stunnerd v1.2.1 relays TURN for a client over IPv4 and one over IPv6,
//! with the credentials `/ice` gives, to an echo pod that has an address of each family.
//!
//! The node has no cloud: the test stands in for the load balancer controller, and gives the
//! Service the node's own two addresses as its ingress, as k3s's ServiceLB does; kube-proxy
//! (in both families' tables) forwards each to the dataplane pods. So the URIs of `/ice` are
//! the very ones the clients use. The operator is this build's binary on the host, as in
//! [`crate::networks`], whose helpers this uses; it runs on the smoke test's node after that
//! scenario. Skipped with a notice without turnprobe (tests/interop/build.sh).

use crate::e2e::{self, apply_yaml, http_get, namespace_yaml, wait_for, wait_object};
use crate::networks::{
    dataplane_yaml, echo_route_and_deployment, load_balancer_ingress, start_operator, turn_once, turn_relays, turnprobe,
};
use crate::node::{Node, ready_pod_ips};
use k8s_openapi::api::core::v1::Service;
use kube::api::Api;
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

const NS: &str = "dual-stack";
const GW: &str = "gateway.networking.k8s.io/v1";
/// The TURN credentials of the GatewayConfig, which `/ice` must hand out.
const USER: &str = "dual-user";
const PASSWORD: &str = "dual-pass";

fn manifests() -> String {
    let echo = echo_route_and_deployment(NS);
    format!(
        r#"apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata: {{name: dual-stack, namespace: {NS}}}
spec:
  realm: stunner.l7mp.io
  authType: static
  userName: {USER}
  password: {PASSWORD}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: dual-stack}}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef: {{group: stunner.l7mp.io, kind: GatewayConfig, name: dual-stack, namespace: {NS}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: webrtc
  namespace: {NS}
  annotations:
    stunner.l7mp.io/ip-families: "IPv4,IPv6"
spec:
  gatewayClassName: dual-stack
  listeners:
  - {{name: udp, protocol: TURN-UDP, port: 3478}}
---
{echo}---
# Dual-stack, so that its EndpointSlices (one per family) put both of the pod's addresses
# into the route's cluster: stunnerd permits only peers in it.
apiVersion: v1
kind: Service
metadata: {{name: udp-echo, namespace: {NS}}}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  selector: {{app: udp-echo}}
  ports: [{{port: 9001, protocol: UDP}}]
"#
    )
}

/// A Gateway with `ip-families: IPv4,IPv6` relays TURN over IPv4 and IPv6 with the
/// credentials of `/ice`, which lists a URI of each family, on `node`.
pub async fn a_dual_stack_gateway_relays_turn_over_ipv4_and_ipv6_with_credentials_from_the_credential_api(node: &Node) {
    let Some(turnprobe) = turnprobe() else { return };
    let admin = node.admin.clone();
    let auth = SocketAddr::new(Ipv4Addr::LOCALHOST.into(), e2e::free_port());
    let op = start_operator(node, "op-dual-stack", &["--auth-bind-address", &auth.to_string()]).await;
    apply_yaml(&admin, &namespace_yaml(NS)).await;
    apply_yaml(&admin, &dataplane_yaml()).await;
    apply_yaml(&admin, &manifests()).await;

    // The annotation makes the Service dual-stack (two families mean RequireDualStack): a
    // ClusterIP of each family, IPv4 first.
    let services: Api<Service> = Api::namespaced(admin.clone(), NS);
    let spec = wait_for("the Gateway's Service", || async { services.get_opt("webrtc").await.ok()??.spec }).await;
    assert_eq!(spec.ip_families.as_deref(), Some(&["IPv4".to_string(), "IPv6".to_string()][..]));
    assert_eq!(spec.ip_family_policy.as_deref(), Some("RequireDualStack"));
    let cluster_ips: Vec<IpAddr> = spec.cluster_ips.iter().flatten().map(|ip| ip.parse().unwrap()).collect();
    assert!(matches!(cluster_ips[..], [IpAddr::V4(_), IpAddr::V6(_)]), "a ClusterIP of each family: {cluster_ips:?}");

    // The stand-in load balancer: the node's two addresses, in the status of the Gateway.
    let (v4, v6) = (node.node_ip.to_string(), node.facts.node_ip_v6.to_string());
    load_balancer_ingress(&admin, NS, "webrtc", &[&v4, &v6]).await;
    let want = json!([{"type": "IPAddress", "value": v4}, {"type": "IPAddress", "value": v6}]);
    wait_object(&admin, GW, "Gateway", Some(NS), "webrtc", "an address of each family", |o| {
        o.data["status"]["addresses"] == want
    })
    .await;

    // /ice: a URI per family, IPv4 first, IPv6 bracketed, with the GatewayConfig's credentials.
    let want_urls = [format!("turn:{v4}:3478?transport=udp"), format!("turn:[{v6}]:3478?transport=udp")];
    let query = format!("/ice?service=turn&namespace={NS}&gateway=webrtc");
    let server = wait_for("/ice with a URI of each family", || async {
        let (status, body) = http_get(auth, &query).await?;
        let ice: Value = serde_json::from_str(&body).ok().filter(|_| status == 200)?;
        let server = ice["iceServers"].as_array()?.first()?.clone();
        (server["urls"] == json!(want_urls)).then_some(server)
    })
    .await;
    let (user, credential) = (server["username"].as_str().unwrap(), server["credential"].as_str().unwrap());
    assert_eq!((user, credential), (USER, PASSWORD), "{server}");

    // TURN over each URI, to the echo pod's address of the client's family: pion's client asks
    // for a relay of its socket's family (RFC 6156), so an IPv6 client's allocation is IPv6,
    // and stunnerd refuses it a peer of the other family. Over either family stunnerd v1.2.1
    // reports its one relay address, STUNNER_ADDR: the dataplane pod's IPv4 address.
    let (echo_v4, echo_v6) = ready_pod_ips(&admin, NS, "app=udp-echo").await;
    let (dataplane_v4, _) = ready_pod_ips(&admin, NS, "stunner.l7mp.io/related-gateway-name=webrtc").await;
    for (url, peer, other_family) in [
        (&want_urls[0], IpAddr::V4(echo_v4), IpAddr::V6(echo_v6)),
        (&want_urls[1], IpAddr::V6(echo_v6), IpAddr::V4(echo_v4)),
    ] {
        let host_port = url.trim_start_matches("turn:").trim_end_matches("?transport=udp");
        let server: SocketAddr = host_port.parse().unwrap();
        let peer = SocketAddr::new(peer, 9001);
        let verdict = turn_relays(node, &turnprobe, server, "udp", (user, credential), peer).await;
        let relay = verdict["relay"].as_str().unwrap_or_default();
        assert!(relay.starts_with(&format!("{dataplane_v4}:")), "relayed address over {url}: {verdict}");
        let (refused, _) =
            turn_once(&turnprobe, server, "udp", (user, credential), SocketAddr::new(other_family, 9001));
        assert_eq!((&refused["ok"], &refused["stage"]), (&json!(false), &json!("permission")), "over {url}: {refused}");
    }
    op.stop().await;
}
