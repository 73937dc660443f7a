//! The per-Gateway LoadBalancer Service (spec §3.10).
//!
//! The result is the desired state only (what the operator owns), meant for server-side apply:
//! fields other managers or the API server set (clusterIP, allocated node ports, foreign
//! labels and annotations) are left out and so left alone, and a `stunner.l7mp.io/*`
//! annotation the operator stops requesting is removed by the apply itself.

use super::infrastructure::{self, owned_key};
use super::listener::service_protocol;
use super::owner::gateway_owner;
use super::settings::{DataplaneMode, RenderSettings};
use crate::index::{Index, ObjectKey};
use crate::keys::*;
use crate::resources::GatewayConfig;
use gateway_api::gateways::Gateway;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

const HEALTH_CHECK_PORT_NAME: &str = "gateway-health-check";
const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "NodePort", "ExternalName", "LoadBalancer"];

/// The Service and the listener target ports it asks the dataplane to listen on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GatewayService {
    pub service: Service,
    pub target_ports: BTreeMap<String, i32>,
}

/// A `{"listener": port}` annotation. Braces are optional; anything else that does not parse
/// is ignored, as upstream (which logs it).
pub fn parse_port_map(v: &str) -> BTreeMap<String, i32> {
    let parse = |s: &str| serde_json::from_str::<BTreeMap<String, i64>>(s).ok();
    parse(v)
        .or_else(|| parse(&format!("{{{v}}}")))
        .unwrap_or_default()
        .into_iter()
        .map(|(k, p)| (k, p as i32))
        .collect()
}

/// Whether an annotation key is one of the operator's own (`stunner.l7mp.io...`, any case).
fn is_operator_key(key: &str) -> bool {
    let group = crate::resources::GROUP;
    key.get(..group.len()).is_some_and(|prefix| prefix.eq_ignore_ascii_case(group))
}

fn is_true(v: Option<&&str>, expected: &str) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case(expected))
}

/// Whether `key` matches `^service\.beta\.kubernetes\.io/.*health.*<suffix>$`.
fn is_health_key(key: &str, suffix: &str) -> bool {
    let Some(rest) = key.strip_prefix("service.beta.kubernetes.io/") else { return false };
    rest.find("health").is_some_and(|i| rest[i + "health".len()..].ends_with(suffix))
}

/// The cloud health-check port announced by `service.beta.kubernetes.io/*health*port` and
/// `*health*protocol` annotations, if both are present and valid. Keys are scanned in sorted
/// order, so with several matches the last by name wins.
fn health_check_port(annotations: &BTreeMap<&str, &str>) -> Option<ServicePort> {
    let matching = |suffix: &'static str| annotations.iter().filter(move |(k, _)| is_health_key(k, suffix));
    let mut port = 0;
    for (_, v) in matching("port") {
        port = v.parse::<i32>().ok()?;
    }
    let mut protocol = None;
    for (_, v) in matching("protocol") {
        protocol = matches!(v.to_ascii_uppercase().as_str(), "TCP" | "HTTP").then_some("TCP");
        protocol?;
    }
    let protocol = protocol.filter(|_| port > 0)?;
    Some(ServicePort {
        name: Some(HEALTH_CHECK_PORT_NAME.into()),
        protocol: Some(protocol.into()),
        port,
        ..Default::default()
    })
}

/// Builds the Service; `None` when it would have no ports.
pub(crate) fn render(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    config: &GatewayConfig,
    settings: &RenderSettings,
) -> Option<GatewayService> {
    if gw.spec.listeners.is_empty() {
        return None;
    }
    let owned = owned_key(key);
    let stored = index.services().get(&owned);
    let gw_annotations = gw.metadata.annotations.as_ref();
    let lb_annotations = &config.spec.load_balancer_service_annotations;
    let mut requested = lb_annotations.clone();
    requested.extend(gw_annotations.into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
    requested.extend(infrastructure::annotations(gw));
    requested.insert(RELATED_GATEWAY_NAME.into(), key.to_string());
    requested.insert(CONTROLLER_NAME.into(), settings.controller_name.clone());

    // Settings are read from what the live object will carry: its annotations, minus the
    // operator's own keys it no longer requests, plus the requested ones (borrowed: only read).
    let mut merged: BTreeMap<&str, &str> = stored
        .and_then(|s| s.metadata.annotations.as_ref())
        .into_iter()
        .flatten()
        .filter(|(k, _)| !is_operator_key(k) || requested.contains_key(*k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    merged.extend(requested.iter().map(|(k, v)| (k.as_str(), v.as_str())));

    let requested_type = gw_annotations.and_then(|a| a.get(SERVICE_TYPE)).or(lb_annotations.get(SERVICE_TYPE));
    let service_type =
        requested_type.map(String::as_str).filter(|t| SERVICE_TYPES.contains(t)).unwrap_or("LoadBalancer");
    let mixed = is_true(merged.get(ENABLE_MIXED_PROTOCOL_LB), "true");
    let node_ports = merged.get(NODE_PORT).map(|v| parse_port_map(v)).unwrap_or_default();
    let target_ports = merged.get(TARGET_PORT).map(|v| parse_port_map(v)).unwrap_or_default();
    let stored_ports = stored.and_then(|s| s.spec.as_ref()?.ports.as_deref()).unwrap_or_default();

    let mut ports = Vec::new();
    let mut first_protocol = None;
    for l in &gw.spec.listeners {
        let Some(proto) = service_protocol(&l.protocol) else { continue };
        if *first_protocol.get_or_insert(proto) != proto && !mixed {
            continue;
        }
        // Keep what the API server allocated for an existing port of this name.
        let old = stored_ports.iter().find(|p| p.name.as_deref() == Some(l.name.as_str()));
        let mut port = ServicePort {
            name: Some(l.name.clone()),
            protocol: Some(proto.into()),
            port: l.port,
            node_port: old.and_then(|p| p.node_port),
            target_port: old.and_then(|p| p.target_port.clone()),
            ..Default::default()
        };
        if let Some(p) = node_ports.get(&l.name) {
            port.node_port = Some(*p);
        }
        if let Some(p) = target_ports.get(&l.name) {
            port.target_port = Some(IntOrString::Int(*p));
        }
        ports.push(port);
    }

    let affinity_off = is_true(merged.get(DISABLE_SESSION_AFFINITY), "true");
    if service_type == "LoadBalancer"
        && !is_true(merged.get(DISABLE_HEALTH_CHECK_EXPOSE), "true")
        && let Some(hc) = health_check_port(&merged)
        && !ports.iter().any(|p| p.name == hc.name)
    {
        ports.push(hc);
    }
    if ports.is_empty() {
        return None;
    }

    let local =
        is_true(merged.get(EXTERNAL_TRAFFIC_POLICY), "local") && matches!(service_type, "NodePort" | "LoadBalancer");
    let address = gw.spec.addresses.as_ref().and_then(|a| a.first());
    let lb_ip = address.filter(|a| a.r#type.as_deref().is_none_or(|t| t == "IPAddress")).and_then(|a| a.value.clone());
    let mut selector = BTreeMap::from([(APP_LABEL.to_string(), APP_VALUE.to_string())]);
    if settings.dataplane_mode == DataplaneMode::Managed {
        selector.insert(RELATED_GATEWAY_NAMESPACE.into(), key.namespace.to_string());
        selector.insert(RELATED_GATEWAY_NAME.into(), owned.name.to_string());
    }
    let mut labels: BTreeMap<String, String> = infrastructure::labels(gw).collect();
    labels.extend([
        (OWNED_BY_LABEL.to_string(), OWNED_BY_VALUE.to_string()),
        (RELATED_GATEWAY_NAMESPACE.to_string(), key.namespace.to_string()),
        (RELATED_GATEWAY_NAME.to_string(), owned.name.to_string()),
    ]);
    let service = Service {
        metadata: ObjectMeta {
            name: Some(owned.name.to_string()),
            namespace: Some(key.namespace.to_string()),
            labels: Some(labels),
            annotations: Some(requested),
            owner_references: Some(vec![gateway_owner(gw)]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(service_type.into()),
            selector: Some(selector),
            ports: Some(ports),
            external_traffic_policy: local.then(|| "Local".into()),
            session_affinity: Some(if affinity_off { "None" } else { "ClientIP" }.into()),
            load_balancer_ip: lb_ip,
            ..Default::default()
        }),
        status: None,
    };
    Some(GatewayService { service, target_ports })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_maps_parse_like_upstream() {
        assert_eq!(parse_port_map(r#"{"a": 1, "b": 2}"#), BTreeMap::from([("a".into(), 1), ("b".into(), 2)]));
        assert_eq!(parse_port_map(r#""a": 1"#), BTreeMap::from([("a".into(), 1)]));
        assert!(parse_port_map("").is_empty());
        assert!(parse_port_map("{}").is_empty());
        assert!(parse_port_map(r#"["a", 1]"#).is_empty());
        assert!(parse_port_map(r#""a""#).is_empty());
        assert!(parse_port_map(r#"{"a": {"b": 1}}"#).is_empty());
    }

    #[test]
    fn health_check_needs_port_and_protocol() {
        let ann = |kv: &[(&'static str, &'static str)]| kv.iter().copied().collect::<BTreeMap<_, _>>();
        let aws = ann(&[
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-port", "8080"),
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol", "HTTP"),
        ]);
        assert_eq!(health_check_port(&aws).unwrap().port, 8080);
        let no_proto = ann(&[("service.beta.kubernetes.io/do-loadbalancer-healthcheck-port", "8080")]);
        assert!(health_check_port(&no_proto).is_none());
        let bad = ann(&[
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-port", "x"),
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol", "TCP"),
        ]);
        assert!(health_check_port(&bad).is_none());
        let udp = ann(&[
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-port", "1"),
            ("service.beta.kubernetes.io/aws-load-balancer-healthcheck-protocol", "UDP"),
        ]);
        assert!(health_check_port(&udp).is_none());
    }
}
