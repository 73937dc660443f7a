//! Public address discovery: where clients reach each listener (spec §3.9), at every address
//! the listener has (dual stack: an address of each family; docs/deploy.md §12).

use super::listener::service_protocol;
use super::service::tcp_service_key;
use crate::index::{Index, Kind, ObjRefView, ObjectKey};
use crate::resources::IpFamily;
use gateway_api::gateways::Gateway;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service, ServicePort};
use std::net::IpAddr;

/// One address a listener is reachable at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Address {
    pub value: String,
    /// `IPAddress` or `Hostname`.
    pub address_type: String,
}

/// A listener's public addresses and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PublicAddress {
    /// Never empty; the first is the one the dataplane config carries (stunnerd takes one):
    /// of the Service's primary family (its first `ipFamilies` entry, IPv4 when unset).
    pub addresses: Vec<Address>,
    pub port: i32,
    /// The name of the Service whose port it is.
    pub service: String,
}

impl PublicAddress {
    /// The address the dataplane config carries.
    pub(crate) fn primary(&self) -> &Address {
        &self.addresses[0]
    }

    /// What clients are given (a URI each): the primary address and, where it is an IP
    /// address and the listener has one of the other family, the first such; a cloud's
    /// further ingress addresses of a family add nothing a client needs.
    pub(crate) fn per_family(&self) -> Vec<&str> {
        let family = |a: &Address| a.value.parse::<IpAddr>().ok().map(IpFamily::of);
        let primary = self.primary();
        let other = family(primary)
            .and_then(|f| self.addresses.iter().find(|a| family(a).is_some_and(|g| g != f)))
            .map(|a| a.value.as_str());
        std::iter::once(primary.value.as_str()).chain(other).collect()
    }
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
    let preferred = spec.ip_families.iter().flatten().find_map(|f| IpFamily::parse(f)).unwrap_or(IpFamily::IPv4);
    let public = |addresses: Vec<Address>, port| {
        (!addresses.is_empty()).then(|| PublicAddress {
            addresses: by_family(addresses, preferred),
            port,
            service: svc.metadata.name.clone().unwrap_or_default(),
        })
    };
    let requested = requested_addresses(gw);
    if !requested.is_empty() {
        return public(requested, sp.port);
    }
    if spec.type_.as_deref() == Some("LoadBalancer")
        && let Some(a) = public(load_balancer_addresses(svc, index_in_svc, sp), sp.port)
    {
        return Some(a);
    }
    let node_port = sp.node_port.filter(|p| *p > 0)?;
    // Typed `IPAddress` even for an ExternalDNS name, as upstream.
    let nodes =
        index.first_node_addresses().into_iter().map(|a| Address { value: a.into(), address_type: IP_ADDRESS.into() });
    public(nodes.collect(), node_port)
}

/// The Gateway's `spec.addresses` as the operator reads them: type (`IPAddress` when unset)
/// and value, entries without a value left out.
fn spec_addresses(gw: &Gateway) -> impl Iterator<Item = Address> + '_ {
    gw.spec.addresses.iter().flatten().filter_map(|a| {
        let address_type = a.r#type.clone().unwrap_or_else(|| IP_ADDRESS.into());
        Some(Address { value: a.value.clone().filter(|v| !v.is_empty())?, address_type })
    })
}

/// Whether the operator can use a `spec.addresses` entry: an `IPAddress` that is an IP
/// address, or a `Hostname`.
fn usable(a: &Address) -> bool {
    a.address_type == HOSTNAME || (a.address_type == IP_ADDRESS && a.value.parse::<IpAddr>().is_ok())
}

/// The Gateway's usable `spec.addresses`, in spec order.
fn requested_addresses(gw: &Gateway) -> Vec<Address> {
    spec_addresses(gw).filter(usable).collect()
}

/// Why the Gateway is not accepted as it stands, if for its addresses: the first
/// `spec.addresses` entry of a type other than `IPAddress` and `Hostname` (Gateway API reason
/// `UnsupportedAddress`).
pub(crate) fn unsupported_address(gw: &Gateway) -> Option<String> {
    let a = spec_addresses(gw).find(|a| a.address_type != IP_ADDRESS && a.address_type != HOSTNAME)?;
    Some(format!("address {} of unsupported type {}", a.value, a.address_type))
}

/// The first `IPAddress` entry of `spec.addresses` that is no IP address (Gateway API reason
/// `AddressNotUsable`), if any.
pub(crate) fn unusable_address(gw: &Gateway) -> Option<String> {
    let a = spec_addresses(gw).find(|a| a.address_type == IP_ADDRESS && !usable(a))?;
    Some(format!("address {} is not an IP address", a.value))
}

/// `addresses` with those of the other IP family than `preferred` moved last (stably);
/// hostnames stay where they are among the preferred ones.
fn by_family(mut addresses: Vec<Address>, preferred: IpFamily) -> Vec<Address> {
    let other = |a: &Address| a.value.parse::<IpAddr>().is_ok_and(|ip| IpFamily::of(ip) != preferred);
    addresses.sort_by_key(other);
    addresses
}

/// Every load balancer ingress address (its IP, else its hostname): those whose port status
/// matches the Service port first, each once.
fn load_balancer_addresses(svc: &Service, i: usize, sp: &ServicePort) -> Vec<Address> {
    let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref()?.ingress.as_deref()).unwrap_or_default();
    let address = |ing: &LoadBalancerIngress| match (
        ing.ip.as_deref().filter(|s| !s.is_empty()),
        ing.hostname.as_deref().filter(|s| !s.is_empty()),
    ) {
        (Some(ip), _) => Some(Address { value: ip.into(), address_type: IP_ADDRESS.into() }),
        (None, Some(h)) => Some(Address { value: h.into(), address_type: HOSTNAME.into() }),
        (None, None) => None,
    };
    let sp_protocol = sp.protocol.as_deref().unwrap_or("TCP");
    let port_matches = |ing: &LoadBalancerIngress| {
        ing.ports.as_deref().and_then(|ps| ps.get(i)).is_some_and(|ps| ps.port == sp.port && ps.protocol == sp_protocol)
    };
    let (matching, rest): (Vec<&LoadBalancerIngress>, Vec<_>) = ingress.iter().partition(|ing| port_matches(ing));
    let mut addresses: Vec<Address> = Vec::new();
    for a in matching.into_iter().chain(rest).filter_map(address) {
        if !addresses.contains(&a) {
            addresses.push(a);
        }
    }
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(values: &[&str]) -> Vec<Address> {
        values.iter().map(|v| Address { value: v.to_string(), address_type: IP_ADDRESS.into() }).collect()
    }

    #[test]
    fn clients_get_one_address_per_family() {
        let public = |values: &[&str]| PublicAddress { addresses: addresses(values), port: 1, service: "s".into() };
        assert_eq!(
            public(&["192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"]).per_family(),
            ["192.0.2.1", "2001:db8::1"]
        );
        assert_eq!(public(&["2001:db8::1", "192.0.2.1"]).per_family(), ["2001:db8::1", "192.0.2.1"]);
        assert_eq!(public(&["192.0.2.1", "192.0.2.2"]).per_family(), ["192.0.2.1"]);
        assert_eq!(public(&["lb.example.com", "192.0.2.1"]).per_family(), ["lb.example.com"]);
    }

    #[test]
    fn the_preferred_family_goes_first_and_the_rest_keeps_its_order() {
        let mixed = ["2001:db8::1", "lb.example.com", "192.0.2.1", "2001:db8::2", "192.0.2.2"];
        let values = |a: Vec<Address>| a.into_iter().map(|a| a.value).collect::<Vec<_>>();
        assert_eq!(
            values(by_family(addresses(&mixed), IpFamily::IPv4)),
            ["lb.example.com", "192.0.2.1", "192.0.2.2", "2001:db8::1", "2001:db8::2"]
        );
        assert_eq!(
            values(by_family(addresses(&mixed), IpFamily::IPv6)),
            ["2001:db8::1", "lb.example.com", "2001:db8::2", "192.0.2.1", "192.0.2.2"]
        );
    }
}
