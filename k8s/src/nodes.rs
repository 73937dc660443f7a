//! The Node feed: keeps the CDS node address table ([`NodeAddresses`]) in step with the
//! Node objects the render loop takes in (watched in cluster mode, read from manifests in
//! standalone mode), for the per-node patcher (cds-protocol.md §7).
//!
//! Each Node's address is its first ExternalIP, else its first ExternalDNS name resolved to
//! its first IP. Resolution runs on blocking threads, a few at a time, and never on a
//! client's request: until a name resolves (and while it fails, retried with backoff) the
//! table keeps what it had, and a failure records no address, so the node's clients are
//! sent `$STUNNER_ADDR`. A Node update that leaves its address as it was costs nothing.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use stunner_gateway::index::{Kind, ObjRef, Resource, node_external_address};
use stunner_gateway_cds::nodes::NodeAddresses;
use tokio::sync::Semaphore;

/// Names resolved at once: resolution blocks a thread each.
const PARALLEL_LOOKUPS: usize = 4;
/// The longest a lookup may take before it counts as failed.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The first and the longest wait before a failed lookup is tried again.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// Resolves a host name to its first address (`Ok(None)`: the name has none).
pub(crate) type Resolver = fn(&str) -> std::io::Result<Option<IpAddr>>;

/// The system resolver (`getaddrinfo`), first address in its order.
fn system_resolver(host: &str) -> std::io::Result<Option<IpAddr>> {
    Ok((host, 0).to_socket_addrs()?.next().map(|a| a.ip()))
}

/// Feeds the table from Node changes. Dropping it ends its pending lookups.
pub struct NodeFeed {
    shared: Arc<Shared>,
}

struct Shared {
    table: Arc<NodeAddresses>,
    known: Mutex<Known>,
    lookups: Arc<Semaphore>,
    resolve: Resolver,
}

/// Per Node with an external address: the address as the Node states it and the generation
/// it was stated in (a lookup records its result only while its generation is current).
#[derive(Default)]
struct Known {
    nodes: HashMap<String, (String, u64)>,
    /// The last generation handed out, over all Nodes (a Node deleted and added again does
    /// not repeat one).
    generation: u64,
}

impl NodeFeed {
    pub fn new(table: Arc<NodeAddresses>) -> Self {
        Self::with_resolver(table, system_resolver)
    }

    /// A feed whose ExternalDNS names are resolved by `resolve` (tests of failing lookups,
    /// which the system resolver cannot fail without asking a DNS server).
    pub(crate) fn with_resolver(table: Arc<NodeAddresses>, resolve: Resolver) -> Self {
        let lookups = Arc::new(Semaphore::new(PARALLEL_LOOKUPS));
        NodeFeed { shared: Arc::new(Shared { table, known: Mutex::default(), lookups, resolve }) }
    }

    /// Takes in one change for the index (`object` and what it is now, `None`: deleted); any
    /// but a Node's is ignored. Needs a tokio runtime when the Node names an ExternalDNS
    /// address (its lookup is spawned).
    pub fn observe(&self, object: &ObjRef, now: Option<&Resource>) {
        match now {
            Some(Resource::Node(node)) => {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                self.set(name, node_external_address(node));
            }
            None if object.kind == Kind::Node => self.set(&object.key.name, None),
            _ => {}
        }
    }

    fn set(&self, node: &str, address: Option<&str>) {
        let shared = &self.shared;
        let mut known = shared.lock();
        let Some(address) = address else {
            if known.nodes.remove(node).is_some() {
                shared.table.set(node, None);
            }
            return;
        };
        if known.nodes.get(node).is_some_and(|(was, _)| was == address) {
            return;
        }
        known.generation += 1;
        let generation = known.generation;
        known.nodes.insert(node.to_string(), (address.to_string(), generation));
        match address.parse::<IpAddr>() {
            Ok(ip) => shared.table.set(node, Some(ip)),
            Err(_) => {
                let lookup = Lookup { node: node.to_string(), host: address.to_string(), generation };
                tokio::spawn(lookup.run(Arc::downgrade(&self.shared)));
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `addr` for `lookup`'s node if the Node still names what it looked up; returns
    /// whether it did.
    fn record(&self, lookup: &Lookup, addr: Option<IpAddr>) -> bool {
        let known = self.lock();
        let current = known.nodes.get(&lookup.node).is_some_and(|(_, g)| *g == lookup.generation);
        if current {
            self.table.set(&lookup.node, addr);
        }
        current
    }
}

/// The resolution of one Node's ExternalDNS name.
struct Lookup {
    node: String,
    host: String,
    generation: u64,
}

impl Lookup {
    /// Resolves until it succeeds, the Node names another address, or the feed is gone.
    async fn run(self, feed: Weak<Shared>) {
        let mut retry = RETRY_FIRST;
        loop {
            let Some((lookups, resolve)) = feed.upgrade().map(|f| (f.lookups.clone(), f.resolve)) else { return };
            let result = lookup(lookups, resolve, self.host.clone()).await;
            let Some(shared) = feed.upgrade() else { return };
            match result {
                Ok(addr) => {
                    shared.record(&self, Some(addr));
                    return;
                }
                Err(error) => {
                    if !shared.record(&self, None) {
                        return;
                    }
                    tracing::warn!(node = %self.node, host = %self.host, %error, ?retry, "cannot resolve the node's ExternalDNS address; its dataplanes get $STUNNER_ADDR meanwhile");
                }
            }
            drop(shared);
            tokio::time::sleep(retry).await;
            retry = (retry * 2).min(RETRY_MAX);
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error(transparent)]
    Resolver(#[from] std::io::Error),
    #[error("the name has no address")]
    NoAddress,
    #[error("no answer within {LOOKUP_TIMEOUT:?}")]
    TimedOut,
}

/// One bounded lookup: it holds a permit until its blocking thread returns (also after the
/// timeout), so no more than [`PARALLEL_LOOKUPS`] threads ever block in the resolver.
async fn lookup(lookups: Arc<Semaphore>, resolve: Resolver, host: String) -> Result<IpAddr, LookupError> {
    let permit = lookups.acquire_owned().await.expect("the lookup semaphore is never closed");
    let blocking = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        resolve(&host)
    });
    match tokio::time::timeout(LOOKUP_TIMEOUT, blocking).await {
        Ok(Ok(result)) => result?.ok_or(LookupError::NoAddress),
        Ok(Err(join)) => Err(LookupError::Resolver(std::io::Error::other(join))),
        Err(_) => Err(LookupError::TimedOut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use stunner_gateway::index::Change;

    /// What the render loop does with each change.
    fn see(feed: &NodeFeed, change: &Change) {
        let (object, now) = change.seen();
        feed.observe(&object, now);
    }
    use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use stunner_gateway::index::ObjectKey;

    fn node(name: &str, addresses: &[(&str, &str)]) -> Change {
        let addresses = addresses.iter().map(|(t, a)| NodeAddress { type_: t.to_string(), address: a.to_string() });
        Change::Apply(Resource::from(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            status: Some(NodeStatus { addresses: Some(addresses.collect()), ..Default::default() }),
            ..Default::default()
        }))
    }

    fn deleted(name: &str) -> Change {
        Change::Delete(ObjRef::new(Kind::Node, ObjectKey::cluster(name)))
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    /// Waits (bounded, in steps of the runtime's clock) until `table` holds `want` for `node`.
    async fn settles(table: &NodeAddresses, node: &str, want: Option<IpAddr>) {
        for _ in 0..500 {
            if table.get(node) == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{node}: {:?}, not {want:?}", table.get(node));
    }

    #[tokio::test]
    async fn the_first_external_ip_wins_and_deletion_forgets_it() {
        let table = Arc::new(NodeAddresses::default());
        let feed = NodeFeed::new(table.clone());
        see(
            &feed,
            &node(
                "n1",
                &[
                    ("InternalIP", "10.0.0.1"),
                    ("ExternalDNS", "localhost"),
                    ("ExternalIP", "203.0.113.7"),
                    ("ExternalIP", "203.0.113.8"),
                ],
            ),
        );
        assert_eq!(table.get("n1"), ip("203.0.113.7"), "an ExternalIP is recorded at once");
        see(&feed, &node("n1", &[("ExternalIP", "2001:db8::1")]));
        assert_eq!(table.get("n1"), ip("2001:db8::1"));
        see(&feed, &node("n1", &[("InternalIP", "10.0.0.1")]));
        assert_eq!(table.get("n1"), None, "no external address: none recorded");
        see(&feed, &node("n1", &[("ExternalIP", "203.0.113.7")]));
        see(&feed, &deleted("n1"));
        assert!(table.is_empty(), "a deleted Node leaves nothing behind");
    }

    #[tokio::test]
    async fn other_kinds_are_ignored() {
        let table = Arc::new(NodeAddresses::default());
        let feed = NodeFeed::new(table.clone());
        see(&feed, &Change::Apply(Resource::Namespace(Default::default())));
        see(&feed, &Change::Delete(ObjRef::new(Kind::Namespace, ObjectKey::cluster("n1"))));
        assert!(table.is_empty());
    }

    #[tokio::test]
    async fn an_external_dns_name_is_resolved_off_the_caller() {
        let table = Arc::new(NodeAddresses::default());
        let feed = NodeFeed::new(table.clone());
        // `localhost` resolves from the hosts file: the system resolver, no DNS server.
        see(&feed, &node("n1", &[("InternalIP", "10.0.0.1"), ("ExternalDNS", "localhost")]));
        let mut found = None;
        for _ in 0..500 {
            found = table.get("n1");
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(found.is_some_and(|a| a.is_loopback()), "localhost resolved to {found:?}");
    }

    /// Lookups of `bad.example` so far (the resolver is a plain function: no state of its own).
    static BAD_LOOKUPS: AtomicUsize = AtomicUsize::new(0);

    fn failing(host: &str) -> std::io::Result<Option<IpAddr>> {
        match host {
            "good.example" => Ok(ip("192.0.2.10")),
            _ => {
                BAD_LOOKUPS.fetch_add(1, Ordering::Relaxed);
                Err(std::io::Error::other("no such host"))
            }
        }
    }

    /// The clock is paused: the retry's wait passes at once whenever the runtime is idle (it
    /// is not while a lookup's blocking thread runs), so the test waits on the lookups having
    /// ended, not on a second of real time.
    #[tokio::test(start_paused = true)]
    async fn a_failed_lookup_records_no_address_and_a_stale_one_is_dropped() {
        let table = Arc::new(NodeAddresses::default());
        let feed = NodeFeed::with_resolver(table.clone(), failing);
        see(&feed, &node("n1", &[("ExternalIP", "203.0.113.7")]));
        see(&feed, &node("n1", &[("ExternalDNS", "bad.example")]));
        settles(&table, "n1", None).await;
        // The Node now names a name that resolves: the retrying lookup of the old one must
        // not overwrite it.
        see(&feed, &node("n1", &[("ExternalDNS", "good.example")]));
        let before_retry = BAD_LOOKUPS.load(Ordering::Relaxed);
        settles(&table, "n1", ip("192.0.2.10")).await;
        // Every lookup task has ended: the stale one after its retry, the new one after its
        // answer. Then the retry has run, and what it did (nothing) is in the table.
        let runtime = tokio::runtime::Handle::current().metrics();
        for _ in 0..500 {
            if runtime.num_alive_tasks() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(runtime.num_alive_tasks(), 0, "the lookups end");
        assert_eq!(BAD_LOOKUPS.load(Ordering::Relaxed), before_retry + 1, "the stale name was retried once");
        assert_eq!(table.get("n1"), ip("192.0.2.10"));
    }
}
