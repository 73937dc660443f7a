//! The client table: every watch client connected to this server, over either transport,
//! with what it asked for and, per config id, which version it was sent and which it applied.
//!
//! A client is registered when its watch starts and removed when it ends (the [`Registration`]
//! guard's drop). Each client has its own lock: recording a sent frame or an acknowledgement
//! touches only that client's entry, never a lock shared by all watchers; the table-wide
//! lock is taken for writing only on connect and disconnect, and for reading by listings.
//!
//! Served over gRPC (`ListClients`), as JSON on `GET /api/v1/clients` (converted to
//! [`stunner_gateway::cds::ClientList`]) and as the `clients` gauge.

use super::metrics::{AckLabel, AckResult, CdsMetrics, Transport, TransportLabel};
use super::store::{ConfigStore, Scope, Snapshot};
use super::version::Version;
use jiff::Timestamp;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use stunner_gateway::cds::ConfigId;
use stunner_gateway::proto;
use tokio_util::sync::CancellationToken;

/// Longest client-chosen text kept (client names, rejection errors): the table must not grow
/// with what a client sends.
const MAX_TEXT: usize = 1024;

/// Who a client is, fixed at registration. Its texts are boxed, not `String`s: they never
/// grow, and the 24 bytes a client saves keep it in jemalloc's 320-byte size class.
#[derive(Debug, Clone)]
pub(crate) struct ClientInfo {
    pub(crate) transport: Transport,
    pub(crate) remote_address: Option<SocketAddr>,
    /// Empty when the client gave none.
    pub(crate) node: Box<str>,
    pub(crate) scope: Scope,
    /// Free-form (gRPC `client_name`, the WebSocket User-Agent); empty when none.
    pub(crate) client_name: Box<str>,
    /// Whom the client was authorized as ([`super::authz::Identity`]).
    pub(crate) identity: Box<str>,
}

/// The versions of one config id a client was sent and what it said about them, each with
/// when.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct ConfigState {
    sent: Option<Stamped>,
    acked: Option<Stamped>,
    rejected: Option<Stamped>,
    /// Why the version rejected was (boxed as [`ClientInfo`]'s texts are).
    error: Box<str>,
    /// When the version last sent was stored, if that was while the client watched: only
    /// such versions are timed (a client that connects is sent what may have been stored
    /// hours ago).
    sent_stored_at: Option<Instant>,
}

/// A version and when the client was sent it or answered about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamped {
    version: Version,
    at: Timestamp,
}

impl Stamped {
    fn now(version: Version) -> Self {
        Stamped { version, at: Timestamp::now() }
    }
}

/// One connected client.
pub(crate) struct Client {
    info: ClientInfo,
    since: Timestamp,
    /// `since` on the monotonic clock, to compare with when a version was stored.
    registered: Instant,
    configs: Configs,
    /// The table's, shared: a copy of each family's handle in every client would cost a
    /// hundred bytes per watcher.
    metrics: Arc<CdsMetrics>,
}

/// A client's per-config states.
enum Configs {
    /// A client of one config id, as every stunnerd is: it is only ever sent that id, so its
    /// state is reached on each push without looking the id up (a measurable share of the
    /// push path at 10,000 watchers). Its id is its scope's ([`ClientInfo::scope`]), not
    /// kept twice: every byte of a client is one per watcher.
    One(Mutex<ConfigState>),
    Many(Mutex<BTreeMap<ConfigId, ConfigState>>),
}

impl Configs {
    fn for_scope(scope: &Scope) -> Self {
        match scope {
            Scope::Config(_) => Configs::One(Mutex::default()),
            _ => Configs::Many(Mutex::default()),
        }
    }

    /// Runs `f` on the state of `id`, if the client was sent `id` (or, with `insert`, anyway).
    fn update<T>(
        &self,
        scope: &Scope,
        id: &ConfigId,
        insert: bool,
        f: impl FnOnce(&mut ConfigState) -> T,
    ) -> Option<T> {
        match self {
            Configs::One(state) => {
                let own = own_id(scope);
                debug_assert!(!insert || own == id, "a single-id client is sent only its id");
                let mut state = state.lock().expect("client lock");
                (insert || (own == id && state.sent.is_some())).then(|| f(&mut state))
            }
            Configs::Many(configs) => {
                let mut configs = configs.lock().expect("client lock");
                match configs.get_mut(id) {
                    Some(state) => Some(f(state)),
                    None if insert => Some(f(configs.entry(id.clone()).or_default())),
                    None => None,
                }
            }
        }
    }

    /// Feeds every id's state to `h`, without copying any.
    fn hash_into(&self, scope: &Scope, h: &mut impl Hasher) {
        match self {
            Configs::One(state) => (own_id(scope), &*state.lock().expect("client lock")).hash(h),
            Configs::Many(configs) => configs.lock().expect("client lock").hash(h),
        }
    }

    /// Every id the client was sent, with its state, sorted by id.
    fn sent(&self, scope: &Scope) -> Vec<(ConfigId, ConfigState)> {
        match self {
            Configs::One(state) => {
                let state = state.lock().expect("client lock");
                state.sent.is_some().then(|| (own_id(scope).clone(), state.clone())).into_iter().collect()
            }
            Configs::Many(configs) => {
                configs.lock().expect("client lock").iter().map(|(id, s)| (id.clone(), s.clone())).collect()
            }
        }
    }
}

/// The id of a single-id client's scope ([`Configs::One`]).
fn own_id(scope: &Scope) -> &ConfigId {
    match scope {
        Scope::Config(id) => id,
        _ => unreachable!("a client of one config id has that id as its scope"),
    }
}

impl Client {
    /// Records that `snapshot` went out to this client, and how long after its store if it
    /// was stored while the client watched. A version sent again (patched anew for a node
    /// whose address changed) keeps its first send's time and is not timed twice.
    pub(crate) fn sent(&self, snapshot: &Snapshot) {
        let stored_while_watching = (snapshot.stored_at >= self.registered).then_some(snapshot.stored_at);
        let first = self.configs.update(&self.info.scope, &snapshot.id, true, |state| {
            let first = state.sent.is_none_or(|s| s.version != snapshot.version);
            if first {
                state.sent = Some(Stamped::now(snapshot.version));
                state.sent_stored_at = stored_while_watching;
            }
            first
        });
        if let (Some(true), Some(stored_at)) = (first, stored_while_watching) {
            self.metrics.push_time.observe(stored_at.elapsed());
        }
    }

    /// Records an acknowledgement: `error` empty means applied, else rejected with that error.
    /// Only ids this client was sent are recorded; returns whether it was. An applied version
    /// clears an earlier rejection; a rejection keeps the version last applied (it still runs).
    pub(crate) fn ack(&self, id: &ConfigId, version: Version, error: &str) -> bool {
        let result = self.configs.update(&self.info.scope, id, false, |state| {
            let stamped = Some(Stamped::now(version));
            if error.is_empty() {
                if state.sent.is_some_and(|s| s.version == version)
                    && let Some(stored_at) = state.sent_stored_at.take()
                {
                    self.metrics.ack_time.observe(stored_at.elapsed());
                }
                state.acked = stamped;
                state.rejected = None;
                state.error = Box::default();
                AckResult::Applied
            } else {
                state.rejected = stamped;
                state.error = truncate(error).into();
                AckResult::Rejected
            }
        });
        let Some(result) = result else { return false };
        self.metrics.client_acks.get_or_create(&AckLabel { result }).inc();
        true
    }

    fn to_proto(&self) -> proto::Client {
        let version = |s: Option<Stamped>| s.map(|s| s.version.to_string()).unwrap_or_default();
        let at = |s: Option<Stamped>| s.map(|s| rfc3339(s.at)).unwrap_or_default();
        let configs = self.configs.sent(&self.info.scope);
        proto::Client {
            transport: self.info.transport.as_str().into(),
            remote_address: self.info.remote_address.map(|a| a.to_string()).unwrap_or_default(),
            node: self.info.node.to_string(),
            scope: scope_string(&self.info.scope),
            client_name: self.info.client_name.to_string(),
            identity: self.info.identity.to_string(),
            connected_since: rfc3339(self.since),
            configs: configs
                .into_iter()
                .map(|(id, s)| proto::ClientConfig {
                    id: Some(proto::ConfigId { namespace: id.namespace.clone(), name: id.name.clone() }),
                    version_sent: version(s.sent),
                    version_acked: version(s.acked),
                    version_rejected: version(s.rejected),
                    error: s.error.to_string(),
                    sent_at: at(s.sent),
                    acked_at: at(s.acked),
                    rejected_at: at(s.rejected),
                })
                .collect(),
        }
    }
}

/// The client table's times: RFC 3339, UTC, whole seconds.
fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `*`, `<namespace>` or `<namespace>/<name>`.
pub(crate) fn scope_string(scope: &Scope) -> String {
    match scope {
        Scope::All => "*".into(),
        Scope::Namespace(ns) => ns.clone(),
        Scope::Config(id) => id.to_string(),
    }
}

/// At most [`MAX_TEXT`] bytes of `s`, cut at a character boundary.
pub(crate) fn truncate(s: &str) -> &str {
    if s.len() <= MAX_TEXT {
        return s;
    }
    let mut end = MAX_TEXT;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Every connected watch client. Share it with an `Arc`.
#[derive(Default)]
pub struct ClientTable {
    clients: RwLock<HashMap<u64, Arc<Client>>>,
    next_id: AtomicU64,
    metrics: Arc<CdsMetrics>,
}

impl ClientTable {
    pub fn new(metrics: CdsMetrics) -> Self {
        ClientTable { clients: RwLock::default(), next_id: AtomicU64::new(0), metrics: Arc::new(metrics) }
    }

    /// Adds a client; it stays in the table (and in the `clients` gauge) until the returned
    /// registration is dropped.
    pub(crate) fn register(self: &Arc<Self>, mut info: ClientInfo) -> Registration {
        info.client_name = truncate(&info.client_name).into();
        info.node = truncate(&info.node).into();
        let label = TransportLabel { transport: info.transport };
        let client = Arc::new(Client {
            configs: Configs::for_scope(&info.scope),
            info,
            since: Timestamp::now(),
            registered: Instant::now(),
            metrics: self.metrics.clone(),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.clients.write().expect("client table lock").insert(id, client.clone());
        self.metrics.clients.get_or_create(&label).inc();
        Registration { table: self.clone(), id, client, label }
    }

    /// Every client, sorted by connection time, then remote address.
    pub fn list(&self) -> proto::ListClientsResponse {
        let mut clients: Vec<(u64, Arc<Client>)> =
            self.clients.read().expect("client table lock").iter().map(|(id, c)| (*id, c.clone())).collect();
        // By the time shown (whole seconds), then remote address, then registration order.
        clients.sort_by_key(|(id, c)| (c.since.as_second(), c.info.remote_address, *id));
        proto::ListClientsResponse { clients: clients.iter().map(|(_, c)| c.to_proto()).collect() }
    }

    /// How many clients of each transport hold a config in a version other than the store's
    /// current one: a WebSocket client by what it was last sent (it never acknowledges), a
    /// gRPC client by what it last applied. Deleted configs count for no one.
    pub(crate) fn stale(&self, store: &ConfigStore) -> BTreeMap<Transport, usize> {
        let clients: Vec<Arc<Client>> = self.clients.read().expect("client table lock").values().cloned().collect();
        let mut stale = BTreeMap::new();
        for client in clients {
            let behind = client.configs.sent(&client.info.scope).into_iter().any(|(id, state)| {
                let held = match client.info.transport {
                    Transport::Websocket => state.sent,
                    Transport::Grpc => state.acked,
                }
                .map(|s| s.version);
                store.get(&id).is_some_and(|current| held != Some(current.version))
            });
            *stale.entry(client.info.transport).or_insert(0) += usize::from(behind);
        }
        stale
    }

    /// Sets the `stale_clients` gauge from [`Self::stale`] every `every` until `shutdown`.
    pub(crate) async fn sample_stale(
        self: Arc<Self>,
        store: Arc<ConfigStore>,
        every: Duration,
        shutdown: CancellationToken,
    ) {
        loop {
            let stale = self.stale(&store);
            for transport in [Transport::Websocket, Transport::Grpc] {
                let count = stale.get(&transport).copied().unwrap_or(0);
                self.metrics.stale_clients.get_or_create(&TransportLabel { transport }).set(count as i64);
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// A digest of the table: who is connected and what each was sent, applied and rejected.
    /// Equal tables, equal digests; cheaper than [`Self::list`] (no copy of any client), for
    /// those who poll for changes (the console's event streams).
    pub fn digest(&self) -> u64 {
        let clients = self.clients.read().expect("client table lock");
        // The table's order is a hash map's: add the clients' digests, in any order.
        clients.iter().fold(0u64, |sum, (id, client)| {
            let mut h = DefaultHasher::new();
            id.hash(&mut h);
            client.configs.hash_into(&client.info.scope, &mut h);
            sum.wrapping_add(h.finish())
        })
    }
}

/// A client's place in the table; dropping it removes the client.
pub(crate) struct Registration {
    table: Arc<ClientTable>,
    id: u64,
    client: Arc<Client>,
    label: TransportLabel,
}

impl Registration {
    /// The client itself, for recording acks elsewhere; it leaves the table only with this.
    pub(crate) fn client(&self) -> Arc<Client> {
        self.client.clone()
    }
}

impl std::ops::Deref for Registration {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table.clients.write().expect("client table lock").remove(&self.id);
        self.table.metrics.clients.get_or_create(&self.label).dec();
    }
}

#[cfg(test)]
impl ClientTable {
    /// Clients of `transport` connected now.
    pub(crate) fn count(&self, transport: Transport) -> usize {
        self.clients.read().expect("client table lock").values().filter(|c| c.info.transport == transport).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(transport: Transport, port: u16) -> ClientInfo {
        ClientInfo {
            transport,
            remote_address: Some(SocketAddr::from(([127, 0, 0, 1], port))),
            node: Box::default(),
            scope: Scope::Namespace("ns".into()),
            client_name: "é".repeat(MAX_TEXT).into(),
            identity: "loopback".into(),
        }
    }

    #[test]
    fn registrations_come_and_go_with_their_guard() {
        let metrics = CdsMetrics::default();
        let table = Arc::new(ClientTable::new(metrics.clone()));
        let a = table.register(info(Transport::Grpc, 2));
        let b = table.register(info(Transport::Websocket, 1));
        assert_eq!(table.count(Transport::Grpc), 1);
        assert_eq!(metrics.clients.get_or_create(&super::super::metrics::GRPC).get(), 1);
        let list = table.list();
        assert_eq!(list.clients.len(), 2);
        assert!(list.clients[0].client_name.len() <= MAX_TEXT, "client-chosen text is bounded");
        assert_eq!(list.clients[0].scope, "ns");
        assert_eq!(list.clients[0].identity, "loopback", "the identity it was authorized as");
        drop(a);
        assert_eq!(table.count(Transport::Grpc), 0);
        assert_eq!(metrics.clients.get_or_create(&super::super::metrics::GRPC).get(), 0);
        drop(b);
        assert!(table.list().clients.is_empty());
    }

    #[test]
    fn stale_clients_are_those_behind_the_store() {
        let store = ConfigStore::new(CdsMetrics::default());
        let mut config = stunner_gateway::config::StunnerConfig::zero("ns/a");
        store.upsert(config.clone()).unwrap();
        let id = ConfigId::new("ns", "a");
        let v1 = store.get(&id).unwrap();
        let table = Arc::new(ClientTable::new(CdsMetrics::default()));
        let scope = Scope::Config(id.clone());
        let ws = table.register(ClientInfo { scope: scope.clone(), ..info(Transport::Websocket, 1) });
        let grpc = table.register(ClientInfo { scope, ..info(Transport::Grpc, 2) });
        ws.sent(&v1);
        grpc.sent(&v1);
        let count = |t| table.stale(&store).get(&t).copied().unwrap_or(0);
        let before = table.digest();
        assert_eq!((count(Transport::Websocket), count(Transport::Grpc)), (0, 1), "gRPC: sent, not yet applied");
        grpc.ack(&id, v1.version, "");
        assert_eq!(count(Transport::Grpc), 0);
        assert_ne!(table.digest(), before, "an acknowledgement changes the digest");
        assert_eq!(table.digest(), table.digest());
        config.auth.realm = "changed".into();
        store.upsert(config).unwrap();
        let v2 = store.get(&id).unwrap();
        assert_eq!((count(Transport::Websocket), count(Transport::Grpc)), (1, 1), "both behind");
        ws.sent(&v2);
        grpc.sent(&v2);
        grpc.ack(&id, v2.version, "listener udp: port in use");
        assert_eq!((count(Transport::Websocket), count(Transport::Grpc)), (0, 1), "a rejection keeps it behind");
        store.delete(&id);
        assert_eq!(count(Transport::Grpc), 0, "a deleted config counts for no one");
    }

    /// Three versions of `ns/a`: the first stored now, the others by `later`.
    fn versions(store: &ConfigStore) -> (Arc<Snapshot>, impl Fn(&str) -> Arc<Snapshot>) {
        let id = ConfigId::new("ns", "a");
        store.upsert(stunner_gateway::config::StunnerConfig::zero("ns/a")).unwrap();
        let first = store.get(&id).unwrap();
        let later = move |realm: &str| {
            let mut config = stunner_gateway::config::StunnerConfig::zero("ns/a");
            config.auth.realm = realm.into();
            store.upsert(config).unwrap();
            store.get(&id).unwrap()
        };
        (first, later)
    }

    #[test]
    fn acks_update_only_configs_that_were_sent() {
        let id = ConfigId::new("ns", "a");
        for scope in [Scope::Namespace("ns".into()), Scope::Config(id.clone())] {
            let metrics = CdsMetrics::default();
            let table = Arc::new(ClientTable::new(metrics.clone()));
            let store = ConfigStore::new(CdsMetrics::default());
            let (v1, later) = versions(&store);
            let c = table.register(ClientInfo { scope: scope.clone(), ..info(Transport::Grpc, 1) });
            assert!(!c.ack(&id, v1.version, ""), "never sent ({scope:?})");
            assert!(table.list().clients[0].configs.is_empty(), "nothing sent, no row ({scope:?})");
            c.sent(&v1);
            assert!(c.ack(&id, v1.version, ""));
            assert!(!c.ack(&ConfigId::new("ns", "b"), v1.version, ""), "another id was never sent ({scope:?})");
            let v2 = later("v2");
            c.sent(&v2);
            assert!(c.ack(&id, v2.version, "bad listener"));
            let rows = &table.list().clients[0].configs;
            assert_eq!(rows.len(), 1, "{scope:?}");
            let row = &rows[0];
            let (v1, v2) = (v1.version.to_string(), v2.version.to_string());
            assert_eq!(
                (
                    row.version_sent.as_str(),
                    row.version_acked.as_str(),
                    row.version_rejected.as_str(),
                    row.error.as_str()
                ),
                (v2.as_str(), v1.as_str(), v2.as_str(), "bad listener"),
                "{scope:?}"
            );
            for at in [&row.sent_at, &row.acked_at, &row.rejected_at] {
                assert!(at.parse::<Timestamp>().is_ok(), "when, in RFC 3339: {at:?} ({scope:?})");
            }
            let applied = metrics.client_acks.get_or_create(&AckLabel { result: AckResult::Applied }).get();
            let rejected = metrics.client_acks.get_or_create(&AckLabel { result: AckResult::Rejected }).get();
            assert_eq!((applied, rejected), (1, 1));
        }
    }

    #[test]
    fn versions_stored_while_a_client_watches_are_timed_to_send_and_ack() {
        let metrics = CdsMetrics::default();
        let table = Arc::new(ClientTable::new(metrics.clone()));
        let store = ConfigStore::new(CdsMetrics::default());
        let id = ConfigId::new("ns", "a");
        let (before, later) = versions(&store);
        let c = table.register(ClientInfo { scope: Scope::Config(id.clone()), ..info(Transport::Grpc, 1) });
        c.sent(&before);
        c.ack(&id, before.version, "");
        assert_eq!(
            (metrics.push_time.snapshot().count, metrics.ack_time.snapshot().count),
            (0, 0),
            "stored before it connected"
        );
        let v2 = later("v2");
        c.sent(&v2);
        c.ack(&id, v2.version, "rejected");
        assert_eq!((metrics.push_time.snapshot().count, metrics.ack_time.snapshot().count), (1, 0), "sent, rejected");
        let v3 = later("v3");
        c.sent(&v3);
        c.sent(&v3);
        c.ack(&id, v2.version, "");
        assert_eq!(metrics.ack_time.snapshot().count, 0, "an ack of an older version is not this one's");
        c.ack(&id, v3.version, "");
        c.ack(&id, v3.version, "");
        assert_eq!(
            (metrics.push_time.snapshot().count, metrics.ack_time.snapshot().count),
            (2, 1),
            "timed once per version"
        );
    }
}
