//! Relay address discovery (Gateway annotation `stunner.l7mp.io/enable-relay-address-discovery:
//! "true"`): each listener's relay `address` is the placeholder the CDS replaces, for a
//! dataplane that names its node (`?node=`), with that node's external address (first
//! ExternalIP, else ExternalDNS resolved; cds-protocol.md §7), so a host-network stunnerd hands
//! out its node's public address. A node without one gets `$STUNNER_ADDR` (the pod address)
//! instead, and the Gateway's `RelayAddressDiscovered` condition names such nodes.

use super::conditions::{build, prune, set};
use crate::config::{NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR};
use crate::index::{Index, node_external_address, relay_discovery_enabled};
use gateway_api::gateways::{Gateway, GatewayStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition's type.
pub(crate) const CONDITION: &str = "RelayAddressDiscovered";
/// How many nodes without an address the condition names (a large cluster's list is cut).
const NAMED_NODES: usize = 5;

/// The listeners' relay address in the rendered config.
pub(crate) fn listener_address(gw: &Gateway) -> &'static str {
    if relay_discovery_enabled(gw) { NODE_ADDRESS_PLACEHOLDER } else { STUNNER_ADDR_VAR }
}

/// Sets the condition in a rendered Gateway's `status` where discovery is on, and removes it
/// where it is off.
pub(crate) fn set_condition(index: &Index, gw: &Gateway, now: &Time, status: &mut GatewayStatus) {
    let conditions = status.conditions.get_or_insert_default();
    if relay_discovery_enabled(gw) {
        set(conditions, condition(index, gw, now));
        prune(conditions);
    } else {
        conditions.retain(|c| c.type_ != CONDITION);
    }
}

/// The Gateway's `RelayAddressDiscovered` condition: True when every Node has an external
/// address, False naming those that have none (their dataplane pods relay from the pod
/// address, which peers outside the cluster cannot reach).
fn condition(index: &Index, gw: &Gateway, now: &Time) -> Condition {
    let without: Vec<&str> = index
        .nodes()
        .values()
        .filter(|n| node_external_address(n).is_none())
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let g = gw.metadata.generation;
    if without.is_empty() {
        let message = "relay addresses are the external addresses of the dataplane pods' nodes";
        return build(CONDITION, "True", "Discovered", message, g, now);
    }
    let mut names = without.iter().take(NAMED_NODES).copied().collect::<Vec<_>>().join(", ");
    if without.len() > NAMED_NODES {
        names += &format!(" and {} more", without.len() - NAMED_NODES);
    }
    let message = format!(
        "nodes without an external address (ExternalIP or ExternalDNS): {names}; dataplane pods there relay from their pod address"
    );
    build(CONDITION, "False", "NoExternalAddress", message, g, now)
}
