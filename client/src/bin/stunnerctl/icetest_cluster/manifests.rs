//! What cluster mode of `stunnerctl icetest` puts into the cluster, named and shaped as
//! upstream's icetest makes it (github.com/l7mp/stunner `internal/icetester/artifacts.go`): a
//! namespace, a Dataplane copied from `default`, a GatewayClass and its GatewayConfig
//! (ephemeral auth), a TURN-UDP and a TURN-TCP Gateway, a UDPRoute from both to the tester,
//! and the tester pod with its Service.

use crate::icetest_cmd::TurnTransport;
use serde_json::{Value, json};

/// Our icetester image's repository; the tag is this crate's version (tests/images/build.sh
/// reads both from here and from the workspace's Cargo.toml, and builds that image).
pub const DEFAULT_ICE_TESTER_REPOSITORY: &str = "ghcr.io/l7mp/stunner-icetester-rs";

/// `--ice-tester-image`'s default: our icetester at this stunnerctl's version.
pub fn default_ice_tester_image() -> String {
    format!("{DEFAULT_ICE_TESTER_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// The namespace upstream tests in when `-n` is not given.
pub const DEFAULT_NAMESPACE: &str = "icetest";
pub const DATAPLANE: &str = "icetester-dataplane";
pub const GATEWAY_CLASS: &str = "icetest-gatewayclass";
pub const GATEWAY_CONFIG: &str = "icetest-gatewayconfig";
pub const ROUTE: &str = "icetest-route";
/// The tester pod and its Service.
pub const BACKEND: &str = "icetest-backend";
/// The tester's WHIP port (`DefaultICETesterPort`).
pub const TESTER_PORT: u16 = 8089;
/// The Gateways' TURN port: upstream's check for a public address wants this one.
pub const TURN_PORT: u16 = 3478;

/// The Gateway upstream's icetest makes for a transport.
pub fn gateway_name(transport: TurnTransport) -> &'static str {
    match transport {
        TurnTransport::Udp => "icetest-udp-gateway",
        TurnTransport::Tcp => "icetest-tcp-gateway",
    }
}

/// Where a pod reaches a transport's Gateway: its Service (named as the Gateway) by its cluster
/// DNS name, as upstream hands its tester for the symmetric test.
pub fn service_host(transport: TurnTransport, ns: &str) -> String {
    format!("{}.{ns}.svc.cluster.local", gateway_name(transport))
}

/// A kind this test makes, as the API server serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

pub const NAMESPACE: Kind =
    Kind { group: "", version: "v1", kind: "Namespace", plural: "namespaces", namespaced: false };
pub const DATAPLANE_KIND: Kind =
    Kind { group: "stunner.l7mp.io", version: "v1", kind: "Dataplane", plural: "dataplanes", namespaced: false };
pub const GATEWAY_CLASS_KIND: Kind = Kind {
    group: "gateway.networking.k8s.io",
    version: "v1",
    kind: "GatewayClass",
    plural: "gatewayclasses",
    namespaced: false,
};
pub const GATEWAY_CONFIG_KIND: Kind =
    Kind { group: "stunner.l7mp.io", version: "v1", kind: "GatewayConfig", plural: "gatewayconfigs", namespaced: true };
pub const GATEWAY_KIND: Kind =
    Kind { group: "gateway.networking.k8s.io", version: "v1", kind: "Gateway", plural: "gateways", namespaced: true };
pub const ROUTE_KIND: Kind =
    Kind { group: "stunner.l7mp.io", version: "v1", kind: "UDPRoute", plural: "udproutes", namespaced: true };
pub const POD: Kind = Kind { group: "", version: "v1", kind: "Pod", plural: "pods", namespaced: true };
pub const SERVICE: Kind = Kind { group: "", version: "v1", kind: "Service", plural: "services", namespaced: true };

/// The CRDs the test's objects need (upstream also checks for TCPRoute and StaticService,
/// which it does not use; docs/compatibility.md).
pub const CRDS: [&str; 5] = [
    "gatewayclasses.gateway.networking.k8s.io",
    "gateways.gateway.networking.k8s.io",
    "dataplanes.stunner.l7mp.io",
    "gatewayconfigs.stunner.l7mp.io",
    "udproutes.stunner.l7mp.io",
];

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// The cluster's `default` Dataplane renamed, with no termination grace period, so that the
/// test's dataplanes go at once when it cleans up (upstream also sets its own resources; this
/// keeps the installation's, which fit the cluster).
pub fn dataplane(default: &Value) -> Value {
    json!({
        "apiVersion": "stunner.l7mp.io/v1",
        "kind": "Dataplane",
        "metadata": {"name": DATAPLANE},
        "spec": merged(default.get("spec").cloned().unwrap_or_else(|| json!({})), json!({"terminationGracePeriodSeconds": 0})),
    })
}

fn merged(mut base: Value, over: Value) -> Value {
    if let (Some(b), Value::Object(o)) = (base.as_object_mut(), over) {
        b.extend(o);
    }
    base
}

/// Everything in (and for) the namespace, in the order it is created.
pub fn resources(ns: &str, image: &str, transports: &[TurnTransport]) -> Vec<(Kind, Value)> {
    let mut objects = vec![
        (
            GATEWAY_CLASS_KIND,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass",
                "metadata": {"name": GATEWAY_CLASS},
                "spec": {
                    "controllerName": "stunner.l7mp.io/gateway-operator",
                    "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": GATEWAY_CONFIG, "namespace": ns},
                    "description": "STUNner is a WebRTC ingress gateway for Kubernetes",
                },
            }),
        ),
        (
            GATEWAY_CONFIG_KIND,
            json!({
                "apiVersion": "stunner.l7mp.io/v1",
                "kind": "GatewayConfig",
                "metadata": {"name": GATEWAY_CONFIG, "namespace": ns},
                "spec": {
                    "realm": "icetest.l7mp.io",
                    "authType": "ephemeral",
                    "sharedSecret": "icetest-secret",
                    "dataplane": DATAPLANE,
                    "logLevel": "all:INFO",
                },
            }),
        ),
    ];
    for t in transports {
        let (listener, protocol) = match t {
            TurnTransport::Udp => ("icetest-udp-listener", "TURN-UDP"),
            TurnTransport::Tcp => ("icetest-tcp-listener", "TURN-TCP"),
        };
        objects.push((
            GATEWAY_KIND,
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway",
                "metadata": {"name": gateway_name(*t), "namespace": ns},
                "spec": {
                    "gatewayClassName": GATEWAY_CLASS,
                    "listeners": [{"name": listener, "port": TURN_PORT, "protocol": protocol}],
                },
            }),
        ));
    }
    // The Gateways' own Services are backends too, as upstream's: a symmetric test's tester
    // relays through a Gateway, and its relay address is reached through that Service.
    let gateways: Vec<&str> = transports.iter().map(|t| gateway_name(*t)).collect();
    let mut backends = vec![json!({"name": BACKEND})];
    backends.extend(gateways.iter().map(|gw| json!({"name": gw})));
    objects.push((
        ROUTE_KIND,
        json!({
            "apiVersion": "stunner.l7mp.io/v1",
            "kind": "UDPRoute",
            "metadata": {"name": ROUTE, "namespace": ns},
            "spec": {
                "parentRefs": gateways.iter().map(|gw| json!({"name": gw})).collect::<Vec<_>>(),
                "rules": [{"backendRefs": backends}],
            },
        }),
    ));
    objects.push((
        POD,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": BACKEND, "namespace": ns, "labels": {"app": "icetester"}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{
                    "name": "icetester",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["icetester"],
                    "ports": [{"name": "whip-port", "containerPort": TESTER_PORT, "protocol": "TCP"}],
                }],
            },
        }),
    ));
    objects.push((
        SERVICE,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": BACKEND, "namespace": ns, "labels": {"app": "icetester"}},
            "spec": {
                "ports": [{"name": "whip-port", "port": TESTER_PORT, "protocol": "TCP"}],
                "selector": {"app": "icetester"},
            },
        }),
    ));
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_from_each_gateway_asked_for_to_the_tester() {
        let objects = resources("ns", "img", &[TurnTransport::Tcp]);
        let kinds: Vec<&str> = objects.iter().map(|(k, _)| k.kind).collect();
        assert_eq!(kinds, ["GatewayClass", "GatewayConfig", "Gateway", "UDPRoute", "Pod", "Service"]);
        let route = &objects[3].1;
        assert_eq!(route["spec"]["parentRefs"], json!([{"name": "icetest-tcp-gateway"}]));
        assert_eq!(
            route["spec"]["rules"][0]["backendRefs"],
            json!([{"name": BACKEND}, {"name": "icetest-tcp-gateway"}])
        );
        assert_eq!(objects[4].1["spec"]["containers"][0]["image"], "img");
    }

    #[test]
    fn the_dataplane_is_the_default_one_without_a_grace_period() {
        let d = dataplane(
            &json!({"metadata": {"name": "default", "resourceVersion": "7"}, "spec": {"image": "x", "terminationGracePeriodSeconds": 30}}),
        );
        assert_eq!(d["metadata"], json!({"name": DATAPLANE}));
        assert_eq!(d["spec"], json!({"image": "x", "terminationGracePeriodSeconds": 0}));
    }

    /// tests/images/build.sh builds the image this stunnerctl deploys by default.
    #[test]
    fn the_default_image_is_the_one_the_image_build_names() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/images/build.sh");
        let out =
            std::process::Command::new("bash").args([script, "--ref", "icetester-rs"]).output().expect("run build.sh");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), default_ice_tester_image());
    }
}
