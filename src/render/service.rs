//! The per-Gateway LoadBalancer Service (spec §3.10), and with `service-per-protocol` a second
//! one for the TCP-like listeners (docs/deploy.md).
//!
//! The result is the desired state only (what the operator owns), meant for server-side apply:
//! fields other managers or the API server set (clusterIP, allocated node ports, foreign
//! labels and annotations) are left out and so left alone, and a `stunner.l7mp.io/*`
//! annotation the operator stops requesting is removed by the apply itself.
//!
//! Many cloud load balancers take one protocol each (AWS NLB before mixed protocols, AKS,
//! GKE): a Gateway with TURN-UDP and TURN-TLS listeners then needs two Services to have both
//! reachable. `service-per-protocol` splits them over two Services selecting the same
//! dataplane pods, so one dataplane serves both.

use super::infrastructure::{self, owned_key};
use super::listener::service_protocol;
use super::owner::gateway_owner;
use super::settings::{DataplaneMode, RenderSettings};
use crate::index::{Index, ObjectKey};
use crate::keys::*;
use crate::resources::{GatewayConfig, IpFamily, IpFamilyPolicy};
use gateway_api::gateways::Gateway;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

const HEALTH_CHECK_PORT_NAME: &str = "gateway-health-check";
const SERVICE_TYPES: [&str; 4] = ["ClusterIP", "NodePort", "ExternalName", "LoadBalancer"];

/// The suffix of the name of a Gateway's second Service, with `service-per-protocol`.
const TCP_SERVICE_SUFFIX: &str = "-tcp";

/// A Gateway's Services and the listener target ports they ask the dataplane to listen on.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct GatewayServices {
    /// The Gateway's own Service; `None` when it would have no ports.
    pub service: Option<Service>,
    /// With `service-per-protocol`: the Service of the TCP-like listeners (TURN-TCP, TURN-TLS),
    /// named by [`tcp_service_key`]; `None` without the annotation or such listeners.
    pub tcp_service: Option<Service>,
    pub target_ports: BTreeMap<String, i32>,
}

/// Where the Gateway `gateway`'s second Service lives with `service-per-protocol`:
/// `<gateway>-tcp` in its namespace.
pub fn tcp_service_key(gateway: &ObjectKey) -> ObjectKey {
    let name = format!("{}{TCP_SERVICE_SUFFIX}", gateway.name);
    // A Service name is a DNS label: shortened past 63 characters as the Gateway's own objects are.
    let name = infrastructure::label_value(&name).into_owned();
    ObjectKey::new(gateway.namespace.clone(), name)
}

/// Whether a Gateway asks for a Service per protocol: its annotation, else its GatewayConfig's
/// `loadBalancerServiceAnnotations`, as for the other Service settings.
pub(crate) fn per_protocol(gw: &Gateway, config: &GatewayConfig) -> bool {
    let gw_value = gw.metadata.annotations.as_ref().and_then(|a| a.get(SERVICE_PER_PROTOCOL));
    let value = gw_value.or(config.spec.load_balancer_service_annotations.get(SERVICE_PER_PROTOCOL));
    value.is_some_and(|v| v.eq_ignore_ascii_case("true"))
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

/// The ports of a live Service.
fn stored_ports(s: Option<&Service>) -> &[ServicePort] {
    s.and_then(|s| s.spec.as_ref()?.ports.as_deref()).unwrap_or_default()
}

/// The IP families a Gateway's Services ask for (`ipFamilyPolicy`, `ipFamilies`): each from
/// the Gateway's annotation, else its GatewayConfig; a policy left unset follows the
/// families (two: `RequireDualStack`, one: `SingleStack`, none: the cluster's default). An
/// annotation that does not parse is ignored, as an invalid `service-type` is.
fn ip_families(gw: &Gateway, config: &GatewayConfig) -> (Option<String>, Option<Vec<String>>) {
    let annotation = |key: &str| gw.metadata.annotations.as_ref().and_then(|a| a.get(key));
    let policy =
        annotation(IP_FAMILY_POLICY).and_then(|v| IpFamilyPolicy::parse(v.trim())).or(config.spec.ip_family_policy);
    let annotated: Option<Vec<IpFamily>> = annotation(IP_FAMILIES)
        .and_then(|v| v.split(',').map(|f| IpFamily::parse(f.trim())).collect::<Option<Vec<_>>>())
        .filter(|f| (1..=2).contains(&f.len()) && f.first() != f.get(1));
    let families = annotated.unwrap_or_else(|| config.spec.ip_families.clone());
    let policy = policy.or(match families.len() {
        0 => None,
        1 => Some(IpFamilyPolicy::SingleStack),
        _ => Some(IpFamilyPolicy::RequireDualStack),
    });
    let families: Vec<String> = families.iter().map(|f| f.name().to_owned()).collect();
    (policy.map(|p| p.name().to_owned()), (!families.is_empty()).then_some(families))
}

/// Builds the Gateway's Services.
pub(crate) fn render(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    config: &GatewayConfig,
    settings: &RenderSettings,
) -> GatewayServices {
    if gw.spec.listeners.is_empty() {
        return GatewayServices::default();
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
    // A Gateway named `<gateway>-tcp` has a Service of that name already: none is made over it.
    let tcp_key = tcp_service_key(key);
    let split = per_protocol(gw, config) && index.gateways().get(&tcp_key).is_none();
    let stored_tcp = index.services().get(&tcp_key);

    let mut ports = Vec::new();
    let mut tcp_ports = Vec::new();
    let mut first_protocol = None;
    for l in &gw.spec.listeners {
        let Some(proto) = service_protocol(&l.protocol) else { continue };
        let to_tcp = split && proto == "TCP";
        if !split && *first_protocol.get_or_insert(proto) != proto && !mixed {
            continue;
        }
        // Keep what the API server allocated for an existing port of this name.
        let old = stored_ports(if to_tcp { stored_tcp } else { stored })
            .iter()
            .find(|p| p.name.as_deref() == Some(l.name.as_str()));
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
        if to_tcp { &mut tcp_ports } else { &mut ports }.push(port);
    }

    // Each load balancer checks its own health.
    if service_type == "LoadBalancer"
        && !is_true(merged.get(DISABLE_HEALTH_CHECK_EXPOSE), "true")
        && let Some(hc) = health_check_port(&merged)
    {
        let has_port = |ports: &[ServicePort]| ports.iter().any(|p| p.name == hc.name);
        if !tcp_ports.is_empty() && !has_port(&tcp_ports) {
            tcp_ports.push(hc.clone());
        }
        if !has_port(&ports) {
            ports.push(hc);
        }
    }

    let affinity_off = is_true(merged.get(DISABLE_SESSION_AFFINITY), "true");
    let local =
        is_true(merged.get(EXTERNAL_TRAFFIC_POLICY), "local") && matches!(service_type, "NodePort" | "LoadBalancer");
    // The first `IPAddress` that is one: the API server refuses a Service with anything else.
    let lb_ip = gw.spec.addresses.iter().flatten().find_map(|a| {
        let ip = a.r#type.as_deref().is_none_or(|t| t == "IPAddress").then_some(a.value.as_ref()?)?;
        ip.parse::<std::net::IpAddr>().is_ok().then(|| ip.clone())
    });
    let (ip_family_policy, ip_families) = ip_families(gw, config);
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
    // Both Services are alike but for their name and ports: the same selector, labels and
    // annotations (the load balancer's settings hold for each).
    let service = |name: &str, ports: Vec<ServicePort>| {
        (!ports.is_empty()).then(|| Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(key.namespace.to_string()),
                labels: Some(labels.clone()),
                annotations: Some(requested.clone()),
                owner_references: Some(vec![gateway_owner(gw)]),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(service_type.into()),
                selector: Some(selector.clone()),
                ports: Some(ports),
                external_traffic_policy: local.then(|| "Local".into()),
                session_affinity: Some(if affinity_off { "None" } else { "ClientIP" }.into()),
                load_balancer_ip: lb_ip.clone(),
                ip_family_policy: ip_family_policy.clone(),
                ip_families: ip_families.clone(),
                ..Default::default()
            }),
            status: None,
        })
    };
    GatewayServices {
        service: service(&owned.name, ports),
        tcp_service: service(&tcp_key.name, tcp_ports),
        target_ports,
    }
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
    fn ip_families_from_the_annotation_else_the_config() {
        let gw = |annotations: &[(&str, &str)]| {
            let mut gw = Gateway::default();
            let map = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            gw.metadata.annotations = Some(map);
            gw
        };
        let config = |policy, families: &[IpFamily]| {
            let mut c = GatewayConfig::default();
            c.spec.ip_family_policy = policy;
            c.spec.ip_families = families.to_vec();
            c
        };
        let owned = |p: Option<&str>, f: &[&str]| {
            (p.map(str::to_owned), (!f.is_empty()).then(|| f.iter().map(|s| s.to_string()).collect()))
        };
        let none = config(None, &[]);
        assert_eq!(ip_families(&gw(&[]), &none), owned(None, &[]), "the cluster's default");
        assert_eq!(ip_families(&gw(&[(IP_FAMILIES, "IPv6")]), &none), owned(Some("SingleStack"), &["IPv6"]));
        assert_eq!(
            ip_families(&gw(&[(IP_FAMILIES, " IPv6, IPv4 ")]), &none),
            owned(Some("RequireDualStack"), &["IPv6", "IPv4"])
        );
        let dual = config(Some(IpFamilyPolicy::PreferDualStack), &[IpFamily::IPv4, IpFamily::IPv6]);
        assert_eq!(ip_families(&gw(&[]), &dual), owned(Some("PreferDualStack"), &["IPv4", "IPv6"]));
        assert_eq!(
            ip_families(&gw(&[(IP_FAMILIES, "IPv6"), (IP_FAMILY_POLICY, "SingleStack")]), &dual),
            owned(Some("SingleStack"), &["IPv6"]),
            "the annotations win"
        );
        for bad in ["IPv5", "IPv4,IPv4", "IPv4,IPv6,IPv4", ""] {
            assert_eq!(ip_families(&gw(&[(IP_FAMILIES, bad)]), &dual).1, owned(None, &["IPv4", "IPv6"]).1, "{bad}");
        }
        assert_eq!(ip_families(&gw(&[(IP_FAMILY_POLICY, "Dual")]), &dual).0.as_deref(), Some("PreferDualStack"));
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
