//! Public address discovery: where clients reach each listener (spec §3.9).

use super::listener::service_protocol;
use super::service::tcp_service_key;
use crate::index::{Index, Kind, ObjRefView, ObjectKey};
use gateway_api::gateways::Gateway;
use k8s_openapi::api::core::v1::{Service, ServicePort};

/// A listener's public address and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicAddress {
    pub address: String,
    pub port: i32,
    /// `IPAddress` or `Hostname`.
    pub address_type: String,
    /// The name of the Service whose port it is.
    pub service: String,
}

const IP_ADDRESS: &str = "IPAddress";
const HOSTNAME: &str = "Hostname";

/// Whether the Gateway `gw` owns `s` (an owner reference to it, by name and uid).
fn owned_by(s: &Service, gw: &Gateway) -> bool {
    let (name, uid) = (gw.metadata.name.as_deref(), gw.metadata.uid.as_deref().unwrap_or_default());
    s.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Gateway" && Some(o.name.as_str()) == name && o.uid == uid)
}

/// The live Service that publishes a Gateway: annotated for it and owned by it, LoadBalancer
/// preferred over ExternalName, NodePort, ClusterIP; the first by name among equals. Its
/// `service-per-protocol` Service ([`tcp_service_key`]) is not one: that publishes the
/// TCP-like listeners alone, and only while asked for.
pub(crate) fn gateway_service<'a>(index: &'a Index, key: &ObjectKey, gw: &Gateway) -> Option<&'a Service> {
    let rank = |s: &Service| match s.spec.as_ref().and_then(|s| s.type_.as_deref()) {
        Some("LoadBalancer") => 3,
        Some("ExternalName") => 2,
        Some("NodePort") => 1,
        Some("ClusterIP") => 0,
        _ => -1,
    };
    let tcp_key = tcp_service_key(key);
    let candidates = index.referrers(ObjRefView::new(Kind::Gateway, key), Kind::Service).filter(|k| **k != tcp_key);
    let mut best: Option<&Service> = None;
    for s in candidates.filter_map(|k| index.services().get(k)).filter(|s| owned_by(s, gw)) {
        if best.is_none_or(|b| rank(s) > rank(b)) {
            best = Some(s);
        }
    }
    best
}

/// The public address of each listener, in spec order (`None` where unknown). With
/// `per_protocol` (`service-per-protocol`), the TCP-like listeners take theirs from the
/// Gateway's second Service.
pub(crate) fn public_addresses(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    per_protocol: bool,
) -> Vec<Option<PublicAddress>> {
    let svc = gateway_service(index, key, gw);
    let tcp_svc =
        per_protocol.then(|| index.services().get(&tcp_service_key(key))).flatten().filter(|s| owned_by(s, gw));
    let service_of = |protocol: &str| match service_protocol(protocol) {
        Some("TCP") if per_protocol => tcp_svc,
        _ => svc,
    };
    gw.spec
        .listeners
        .iter()
        .map(|l| service_of(&l.protocol).and_then(|s| listener_address(index, gw, s, l.port, &l.protocol)))
        .collect()
}

fn listener_address(index: &Index, gw: &Gateway, svc: &Service, port: i32, protocol: &str) -> Option<PublicAddress> {
    let proto = service_protocol(protocol)?;
    let spec = svc.spec.as_ref()?;
    let ports = spec.ports.as_deref().unwrap_or_default();
    let matches =
        |sp: &ServicePort| sp.port == port && sp.protocol.as_deref().unwrap_or("TCP").eq_ignore_ascii_case(proto);
    let index_in_svc = ports.iter().position(matches)?;
    let sp = &ports[index_in_svc];
    let service = svc.metadata.name.clone().unwrap_or_default();
    if let Some(a) = gw.spec.addresses.as_ref().and_then(|a| a.first())
        && let Some(value) = a.value.as_deref().filter(|v| !v.is_empty())
    {
        let address_type = a.r#type.clone().unwrap_or_else(|| IP_ADDRESS.into());
        return Some(PublicAddress { address: value.into(), port: sp.port, address_type, service });
    }
    if spec.type_.as_deref() == Some("LoadBalancer")
        && let Some(a) = load_balancer_address(svc, index_in_svc, sp, &service)
    {
        return Some(a);
    }
    let node = index.first_node_address()?;
    let node_port = sp.node_port.filter(|p| *p > 0)?;
    Some(PublicAddress { address: node.into(), port: node_port, address_type: IP_ADDRESS.into(), service })
}

/// The first ingress whose port status matches the Service port, else the first ingress.
fn load_balancer_address(svc: &Service, i: usize, sp: &ServicePort, service: &str) -> Option<PublicAddress> {
    let ingress = svc.status.as_ref()?.load_balancer.as_ref()?.ingress.as_deref().unwrap_or_default();
    let public = |address: &str, port, address_type: &str| PublicAddress {
        address: address.into(),
        port,
        address_type: address_type.into(),
        service: service.into(),
    };
    let address = |ing: &k8s_openapi::api::core::v1::LoadBalancerIngress, port: i32| match (
        ing.ip.as_deref().filter(|s| !s.is_empty()),
        ing.hostname.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(ip), _) => Some(public(ip, port, IP_ADDRESS)),
        (None, Some(h)) => Some(public(h, port, HOSTNAME)),
        (None, None) => None,
    };
    let sp_protocol = sp.protocol.as_deref().unwrap_or("TCP");
    let matching = ingress.iter().find_map(|ing| {
        let ps = ing.ports.as_deref()?.get(i)?;
        (ps.port == sp.port && ps.protocol == sp_protocol).then(|| address(ing, ps.port)).flatten()
    });
    matching.or_else(|| address(ingress.first()?, sp.port))
}
