//! Relay address discovery (Gateway annotation `stunner.l7mp.io/enable-relay-address-discovery:
//! "true"`): each listener's relay `address` is the placeholder the CDS replaces, for a
//! dataplane that names its node (`?node=`), with that node's external address (first
//! ExternalIP, else ExternalDNS resolved; cds-protocol.md §7), so a host-network stunnerd hands
//! out its node's public address. A node without one gets `$STUNNER_ADDR` (the pod address)
//! instead, and the Gateway's `RelayAddressDiscovered` condition names such nodes. Only the
//! nodes the Gateway's Dataplane's pods can be scheduled on count (`index::schedulable`): a
//! tainted control-plane node without an external address runs none of them.

use super::conditions::{build, prune, set};
use crate::config::{NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR};
use crate::index::{Index, Unschedulable, node_external_address, relay_discovery_enabled, schedulable};
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

/// The Gateway's `RelayAddressDiscovered` condition: True when every Node its dataplane pods
/// can be scheduled on has an external address, False naming those that have none (their
/// dataplane pods relay from the pod address, which peers outside the cluster cannot reach),
/// or, when there are Nodes but the pods can be scheduled on none of them, saying why.
fn condition(index: &Index, gw: &Gateway, now: &Time) -> Condition {
    let dataplane = index.gateway_dataplane(gw);
    let mut eligible = 0;
    let mut without = Vec::new();
    let mut refused: Vec<(&str, Unschedulable)> = Vec::new();
    for node in index.nodes().values() {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match schedulable(node, dataplane) {
            Ok(()) => {
                eligible += 1;
                if node_external_address(node).is_none() {
                    without.push(name.to_owned());
                }
            }
            Err(why) => refused.push((name, why)),
        }
    }
    let g = gw.metadata.generation;
    if eligible == 0 && !refused.is_empty() {
        let dp = dataplane.and_then(|d| d.metadata.name.as_deref()).unwrap_or_default();
        let reasons = refused.iter().map(|(name, why)| format!("{name}: {why}")).collect::<Vec<_>>();
        let message = format!("the pods of Dataplane {dp} can be scheduled on no node ({})", named(&reasons, "; "));
        return build(CONDITION, "False", "NoSchedulableNode", message, g, now);
    }
    if without.is_empty() {
        let message = "relay addresses are the external addresses of the dataplane pods' nodes";
        return build(CONDITION, "True", "Discovered", message, g, now);
    }
    let message = format!(
        "nodes without an external address (ExternalIP or ExternalDNS): {}; dataplane pods there relay from their pod address",
        named(&without, ", ")
    );
    build(CONDITION, "False", "NoExternalAddress", message, g, now)
}

/// The first [`NAMED_NODES`] entries joined by `separator`, and how many more there are.
fn named(entries: &[String], separator: &str) -> String {
    let mut text = entries.iter().take(NAMED_NODES).map(String::as_str).collect::<Vec<_>>().join(separator);
    if entries.len() > NAMED_NODES {
        text += &format!(" and {} more", entries.len() - NAMED_NODES);
    }
    text
}
