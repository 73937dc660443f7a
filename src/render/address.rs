//! Public address discovery: where clients reach each listener (spec §3.9).

use super::listener::service_protocol;
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
}

const IP_ADDRESS: &str = "IPAddress";
const HOSTNAME: &str = "Hostname";

/// The live Service that publishes a Gateway: annotated for it and owned by it, LoadBalancer
/// preferred over ExternalName, NodePort, ClusterIP; the first by name among equals.
pub(crate) fn gateway_service<'a>(index: &'a Index, key: &ObjectKey, gw: &Gateway) -> Option<&'a Service> {
    let rank = |s: &Service| match s.spec.as_ref().and_then(|s| s.type_.as_deref()) {
        Some("LoadBalancer") => 3,
        Some("ExternalName") => 2,
        Some("NodePort") => 1,
        Some("ClusterIP") => 0,
        _ => -1,
    };
    let (name, uid) = (gw.metadata.name.as_deref(), gw.metadata.uid.as_deref().unwrap_or_default());
    let owned = |s: &&Service| {
        s.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "Gateway" && Some(o.name.as_str()) == name && o.uid == uid)
    };
    let candidates = index.referrers(ObjRefView::new(Kind::Gateway, key), Kind::Service);
    let mut best: Option<&Service> = None;
    for s in candidates.filter_map(|k| index.services().get(k)).filter(owned) {
        if best.is_none_or(|b| rank(s) > rank(b)) {
            best = Some(s);
        }
    }
    best
}

/// The public address of each listener, in spec order (`None` where unknown).
pub(crate) fn public_addresses(index: &Index, key: &ObjectKey, gw: &Gateway) -> Vec<Option<PublicAddress>> {
    let svc = gateway_service(index, key, gw);
    gw.spec.listeners.iter().map(|l| svc.and_then(|s| listener_address(index, gw, s, l.port, &l.protocol))).collect()
}

fn listener_address(index: &Index, gw: &Gateway, svc: &Service, port: i32, protocol: &str) -> Option<PublicAddress> {
    let proto = service_protocol(protocol)?;
    let spec = svc.spec.as_ref()?;
    let ports = spec.ports.as_deref().unwrap_or_default();
    let matches =
        |sp: &ServicePort| sp.port == port && sp.protocol.as_deref().unwrap_or("TCP").eq_ignore_ascii_case(proto);
    let index_in_svc = ports.iter().position(matches)?;
    let sp = &ports[index_in_svc];
    if let Some(a) = gw.spec.addresses.as_ref().and_then(|a| a.first())
        && let Some(value) = a.value.as_deref().filter(|v| !v.is_empty())
    {
        let address_type = a.r#type.clone().unwrap_or_else(|| IP_ADDRESS.into());
        return Some(PublicAddress { address: value.into(), port: sp.port, address_type });
    }
    if spec.type_.as_deref() == Some("LoadBalancer")
        && let Some(a) = load_balancer_address(svc, index_in_svc, sp)
    {
        return Some(a);
    }
    let node = index.first_node_address()?;
    let node_port = sp.node_port.filter(|p| *p > 0)?;
    Some(PublicAddress { address: node.into(), port: node_port, address_type: IP_ADDRESS.into() })
}

/// The first ingress whose port status matches the Service port, else the first ingress.
fn load_balancer_address(svc: &Service, i: usize, sp: &ServicePort) -> Option<PublicAddress> {
    let ingress = svc.status.as_ref()?.load_balancer.as_ref()?.ingress.as_deref().unwrap_or_default();
    let address = |ing: &k8s_openapi::api::core::v1::LoadBalancerIngress, port: i32| match (
        ing.ip.as_deref().filter(|s| !s.is_empty()),
        ing.hostname.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(ip), _) => Some(PublicAddress { address: ip.into(), port, address_type: IP_ADDRESS.into() }),
        (None, Some(h)) => Some(PublicAddress { address: h.into(), port, address_type: HOSTNAME.into() }),
        (None, None) => None,
    };
    let sp_protocol = sp.protocol.as_deref().unwrap_or("TCP");
    let matching = ingress.iter().find_map(|ing| {
        let ps = ing.ports.as_deref()?.get(i)?;
        (ps.port == sp.port && ps.protocol == sp_protocol).then(|| address(ing, ps.port)).flatten()
    });
    matching.or_else(|| address(ingress.first()?, sp.port))
}
