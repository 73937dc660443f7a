//! External addresses of cluster nodes, for the per-node patcher (cds-protocol.md §7).
//!
//! The Node source resolves each node's first ExternalIP (else ExternalDNS) and records it
//! here; DNS never runs on the serving path. Clients watching with a `node` follow their
//! node's entry, so an address change reaches exactly the clients on that node, and only
//! when their patched config actually changes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::RwLock;
use tokio::sync::watch;

#[derive(Default)]
pub struct NodeAddresses {
    nodes: RwLock<HashMap<String, watch::Sender<Option<IpAddr>>>>,
}

impl NodeAddresses {
    /// Records the external address of `node` (`None`: unknown or without one).
    pub fn set(&self, node: &str, addr: Option<IpAddr>) {
        let mut nodes = self.nodes.write().expect("node table lock");
        match nodes.get(node) {
            Some(tx) => {
                tx.send_if_modified(|cur| std::mem::replace(cur, addr) != addr);
                if addr.is_none() && tx.receiver_count() == 0 {
                    nodes.remove(node);
                }
            }
            None if addr.is_some() => {
                nodes.insert(node.to_string(), watch::Sender::new(addr));
            }
            None => {}
        }
    }

    /// The recorded external address of `node`.
    pub fn get(&self, node: &str) -> Option<IpAddr> {
        self.nodes.read().expect("node table lock").get(node).and_then(|tx| *tx.borrow())
    }

    /// Follows the address of `node`, whether it is known yet or not.
    pub(super) fn subscribe(&self, node: &str) -> watch::Receiver<Option<IpAddr>> {
        let mut nodes = self.nodes.write().expect("node table lock");
        nodes.entry(node.to_string()).or_insert_with(|| watch::Sender::new(None)).subscribe()
    }

    /// Drops the entry of `node` once nobody follows it and it holds no address, so client-
    /// chosen node names cannot grow the table beyond the connections that name them.
    pub(super) fn release(&self, node: &str) {
        let mut nodes = self.nodes.write().expect("node table lock");
        if nodes.get(node).is_some_and(|tx| tx.receiver_count() == 0 && tx.borrow().is_none()) {
            nodes.remove(node);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.nodes.read().expect("node table lock").len()
    }
}
