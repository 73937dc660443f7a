//! External addresses of cluster nodes, for the per-node patcher (cds-protocol.md §7).
//!
//! The Node feed (`nodes.rs` of the adapters crate, `stunner_gateway_k8s`) resolves each
//! Node's first ExternalIP (else ExternalDNS) off the serving path and records it here;
//! serving only reads the table. It holds the cluster's Nodes that have an address, never
//! names chosen by clients: a client naming an unknown node is patched with `$STUNNER_ADDR`
//! and adds nothing.
//!
//! Watches of a config with the placeholder follow one signal that fires when any address
//! changes, and re-send only when their patched frame changed, so an address change reaches
//! exactly the clients on that node. Watches of other configs never look at the table.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::RwLock;
use stunner_gateway::config::{NODE_ADDRESS_PLACEHOLDER, STUNNER_ADDR_VAR, StunnerConfig};
use tokio::sync::watch;

pub struct NodeAddresses {
    nodes: RwLock<HashMap<String, IpAddr>>,
    /// Fires whenever an address is added, changed or removed.
    changed: watch::Sender<()>,
}

impl Default for NodeAddresses {
    fn default() -> Self {
        NodeAddresses { nodes: RwLock::default(), changed: watch::Sender::new(()) }
    }
}

impl NodeAddresses {
    /// Records the external address of `node` (`None`: the node is gone, or has no address
    /// that resolved: its clients get `$STUNNER_ADDR`).
    pub fn set(&self, node: &str, addr: Option<IpAddr>) {
        let mut nodes = self.nodes.write().expect("node table lock");
        let before = match addr {
            Some(addr) => nodes.insert(node.to_string(), addr),
            None => nodes.remove(node),
        };
        drop(nodes);
        if before != addr {
            self.changed.send_replace(());
        }
    }

    /// The recorded external address of `node`.
    pub fn get(&self, node: &str) -> Option<IpAddr> {
        self.nodes.read().expect("node table lock").get(node).copied()
    }

    /// A receiver that changes whenever any node's address does, marked as seen: subscribe
    /// before reading the table, so no change between the two is missed.
    pub(super) fn subscribe(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    /// Whether no node has an address recorded.
    pub fn is_empty(&self) -> bool {
        self.nodes.read().expect("node table lock").is_empty()
    }

    /// How many watches follow the table, for tests that unpatched watches never do.
    #[cfg(test)]
    pub(super) fn followers(&self) -> usize {
        self.changed.receiver_count()
    }
}

/// `config` for a client on a node with external address `addr` (cds-protocol.md §7): each
/// listener whose `address` is the placeholder gets `addr`, or `$STUNNER_ADDR` when the node
/// has none; every other field and listener is left as it is.
pub(crate) fn patch(mut config: StunnerConfig, addr: Option<IpAddr>) -> StunnerConfig {
    let value = addr.map_or_else(|| STUNNER_ADDR_VAR.to_string(), |a| a.to_string());
    for l in config.listeners.iter_mut().filter(|l| l.addr == NODE_ADDRESS_PLACEHOLDER) {
        l.addr.clone_from(&value);
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;
    use stunner_gateway::config::ListenerConfig;

    fn listener(name: &str, addr: &str) -> ListenerConfig {
        ListenerConfig { name: name.into(), addr: addr.into(), ..Default::default() }
    }

    fn config(addrs: &[&str]) -> StunnerConfig {
        let mut c = StunnerConfig::zero("ns/gw");
        c.listeners = addrs.iter().enumerate().map(|(i, a)| listener(&format!("ns/gw/l{i}"), a)).collect();
        c
    }

    fn addrs(c: &StunnerConfig) -> Vec<&str> {
        c.listeners.iter().map(|l| l.addr.as_str()).collect()
    }

    #[test]
    fn placeholder_listeners_get_the_node_address_and_only_they() {
        let c = config(&[NODE_ADDRESS_PLACEHOLDER, "$STUNNER_ADDR", "10.0.0.1", NODE_ADDRESS_PLACEHOLDER]);
        let patched = patch(c.clone(), Some("203.0.113.7".parse().unwrap()));
        assert_eq!(addrs(&patched), ["203.0.113.7", "$STUNNER_ADDR", "10.0.0.1", "203.0.113.7"]);
        let unpatched_rest = |mut c: StunnerConfig| {
            c.listeners.iter_mut().for_each(|l| l.addr.clear());
            c
        };
        assert_eq!(unpatched_rest(patched), unpatched_rest(c), "nothing but listener addresses changes");
    }

    #[test]
    fn ipv6_addresses_are_written_bare() {
        let patched = patch(config(&[NODE_ADDRESS_PLACEHOLDER]), Some("2001:db8::1".parse().unwrap()));
        assert_eq!(addrs(&patched), ["2001:db8::1"]);
    }

    #[test]
    fn a_node_without_an_address_falls_back_to_stunner_addr() {
        assert_eq!(addrs(&patch(config(&[NODE_ADDRESS_PLACEHOLDER]), None)), ["$STUNNER_ADDR"]);
    }

    #[test]
    fn configs_without_the_placeholder_come_back_unchanged() {
        let c = config(&["$STUNNER_ADDR", "1.2.3.4"]);
        assert_eq!(patch(c.clone(), Some("203.0.113.7".parse().unwrap())), c);
        let empty = config(&[]);
        assert_eq!(patch(empty.clone(), None), empty);
    }

    #[test]
    fn the_table_holds_nodes_with_an_address_and_signals_only_changes() {
        let table = NodeAddresses::default();
        let mut rx = table.subscribe();
        table.set("n1", None);
        assert!(!rx.has_changed().unwrap(), "removing what is not there changes nothing");
        table.set("n1", Some("192.0.2.1".parse().unwrap()));
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        table.set("n1", Some("192.0.2.1".parse().unwrap()));
        assert!(!rx.has_changed().unwrap(), "the same address again is no change");
        assert_eq!(table.get("n1"), Some("192.0.2.1".parse().unwrap()));
        table.set("n1", None);
        assert!(rx.has_changed().unwrap());
        assert!(table.is_empty());
    }
}
