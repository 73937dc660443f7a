//! The CDS store: per config id, the latest published config as an immutable snapshot.
//!
//! A snapshot carries its JSON encoded once; every client of that version shares the bytes.
//! Clients never receive from the store directly: each reads the latest value of a
//! latest-value channel (one per config id, one for the store as a whole), so a slow client
//! skips versions instead of queueing them, and publishing never waits for anyone.
//!
//! The fan-out's shards, which serve many watches each, read no channel per scope: each
//! registers a [`ChangedIds`] sink, told the id of every change, so a storm of changes wakes
//! a shard once, not once per config it serves.
//!
//! The store knows no transport: each transport says how it puts a config on the wire by an
//! [`Encoding`] of its own, and the snapshot keeps what it made.

use super::metrics::CdsMetrics;
use super::nodes::{self, NodeAddresses};
use super::version::Version;
use bytes::Bytes;
use std::any::TypeId;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Instant;
use stunner_gateway::cds::{ConfigId, LicenseStatus};
use stunner_gateway::config::StunnerConfig;
use tokio::sync::{Notify, watch};

/// One config's JSON (UTF-8, encoded once), ready to be a message or an HTTP body without
/// copying.
pub(crate) type Frame = Bytes;

/// One version of one config id, shared by every client that is sent it.
#[derive(Debug)]
pub struct Snapshot {
    pub id: ConfigId,
    /// A digest of the content: equal on every replica that publishes the same config.
    pub version: Version,
    /// What was published, served verbatim (listeners unvalidated, `$STUNNER_ADDR` literal).
    pub config: StunnerConfig,
    /// The wire form of `config`, encoded once.
    pub json: Frame,
    /// This is the zero config pushed once when the id was deleted.
    pub(crate) deleted: bool,
    /// When the store took this version: the start of its push and ack times.
    pub(crate) stored_at: Instant,
    /// Clients on a node get a copy patched with its address: a config with the node-address
    /// placeholder, never a deletion (as upstream).
    per_node: bool,
    /// Per-node variants of `json`, keyed by the node address they carry; only for configs
    /// with a node-address placeholder.
    patched: Mutex<HashMap<Option<IpAddr>, Frame>>,
    /// The wire encodings of `json`, each made on first use and then shared by every client
    /// of this version; read without a lock, as every push of every watcher does.
    encoded: [OnceLock<(TypeId, Bytes)>; ENCODING_SLOTS],
    /// The same for each per-node variant.
    encoded_patched: Mutex<HashMap<(TypeId, Patch), Bytes>>,
}

/// How a transport puts a config on the wire beyond the JSON itself (a WebSocket frame, a
/// protobuf message): implemented by each transport, for its own unit type.
pub(crate) trait Encoding: 'static {
    /// The wire form of `json`, one variant of `snapshot`.
    fn encode(snapshot: &Snapshot, json: &Frame) -> Bytes;
}

/// Encodings of a snapshot kept without a lock: one per transport the server speaks (two); a
/// further one is still cached, with the per-node variants' under their lock.
const ENCODING_SLOTS: usize = 2;

/// One wire form of a snapshot: the config as published, or patched for a node.
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub(crate) frame: Frame,
    patch: Patch,
}

/// What a variant was patched with. `None`: nothing, as published; `Some(addr)`: the node
/// address `addr` (`None` inside: `$STUNNER_ADDR`, the node had none).
type Patch = Option<Option<IpAddr>>;

impl Snapshot {
    /// `version` is `Version::of(&config)`, which the caller has at hand.
    fn new(id: ConfigId, version: Version, config: StunnerConfig, deleted: bool) -> Self {
        let json = Frame::from(config.to_json());
        let per_node = !deleted && config.has_node_placeholder();
        Snapshot {
            id,
            version,
            config,
            json,
            deleted,
            stored_at: Instant::now(),
            per_node,
            patched: Mutex::default(),
            encoded: Default::default(),
            encoded_patched: Mutex::default(),
        }
    }

    /// The zero config of `id`: what clients are sent when the id is deleted.
    pub(crate) fn zero(id: &ConfigId) -> Arc<Self> {
        let config = StunnerConfig::zero(&id.to_string());
        Arc::new(Snapshot::new(id.clone(), Version::of(&config), config, true))
    }

    /// The bytes for a client on `node`: the node-address placeholder replaced by the node's
    /// external address, or by `$STUNNER_ADDR` when the node has none (cds-protocol.md §7).
    /// Deletions are never patched, as upstream.
    pub(crate) fn frame_for(&self, node: Option<&str>, nodes: &NodeAddresses) -> Frame {
        self.variant_for(node, nodes).frame
    }

    /// The config as published, unpatched.
    pub(crate) fn plain(&self) -> Variant {
        Variant { frame: self.json.clone(), patch: None }
    }

    /// Whether clients on a node get this snapshot patched for it (else the node table is
    /// never read for it).
    pub(crate) fn is_per_node(&self) -> bool {
        self.per_node
    }

    /// [`Self::frame_for`], with what the frame was patched with, for [`Self::encoded`].
    pub(crate) fn variant_for(&self, node: Option<&str>, nodes: &NodeAddresses) -> Variant {
        let Some(node) = node.filter(|_| self.per_node) else { return self.plain() };
        let addr = nodes.get(node);
        let mut cache = self.patched.lock().expect("patch cache lock");
        let frame =
            cache.entry(addr).or_insert_with(|| Frame::from(nodes::patch(self.config.clone(), addr).to_json())).clone();
        Variant { frame, patch: Some(addr) }
    }

    /// `variant` (one of this snapshot's) in encoding `E`, made on first use and shared by
    /// every client sent the same variant afterwards.
    pub(crate) fn encoded<E: Encoding>(&self, variant: &Variant) -> Bytes {
        let kind = TypeId::of::<E>();
        let encode = || E::encode(self, &variant.frame);
        if variant.patch.is_none() {
            // The first slot that is free or holds `E`; each slot is claimed once, for good.
            for slot in &self.encoded {
                let (held, bytes) = slot.get_or_init(|| (kind, encode()));
                if *held == kind {
                    return bytes.clone();
                }
            }
        }
        let mut cache = self.encoded_patched.lock().expect("encode cache lock");
        cache.entry((kind, variant.patch)).or_insert_with(encode).clone()
    }
}

/// Which configs a client asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    All,
    Namespace(String),
    Config(ConfigId),
}

impl Scope {
    pub(crate) fn matches(&self, id: &ConfigId) -> bool {
        match self {
            Scope::All => true,
            Scope::Namespace(ns) => id.namespace == *ns,
            Scope::Config(want) => want == id,
        }
    }
}

/// Where the store tells one reader (a fan-out shard) which configs changed: the ids changed
/// since it last looked, each once however often it changed, and one wake for them all.
#[derive(Default)]
pub(crate) struct ChangedIds {
    /// The ids changed since the reader last looked, each once: at most the ids stored and
    /// those deleted meanwhile, however many changes there were.
    ids: Mutex<HashSet<ConfigId>>,
    /// Holds one permit: the changes before a wait make it return at once, all of them once.
    wake: Notify,
}

impl ChangedIds {
    /// Records that `id` changed (its new snapshot is stored already) and wakes the reader.
    fn add(&self, id: &ConfigId) {
        let mut ids = self.ids.lock().expect("changed ids lock");
        if !ids.contains(id) {
            ids.insert(id.clone());
        }
        drop(ids);
        self.wake.notify_one();
    }

    /// Waits until an id was added since the last wait returned (at once if one was).
    pub(crate) async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Swaps the ids changed so far for `empty` (the reader's drained buffer, which the next
    /// changes then fill: no allocation once both have grown).
    pub(crate) fn take(&self, empty: &mut HashSet<ConfigId>) {
        debug_assert!(empty.is_empty(), "ids taken before were all read");
        std::mem::swap(&mut *self.ids.lock().expect("changed ids lock"), empty);
    }
}

#[derive(Default)]
struct Inner {
    configs: BTreeMap<ConfigId, Arc<Snapshot>>,
    /// Latest value per id that has single-id clients.
    topics: HashMap<ConfigId, watch::Sender<Option<Arc<Snapshot>>>>,
}

/// The store every transport serves from. Cheap to share: wrap it in an `Arc`.
pub struct ConfigStore {
    inner: RwLock<Inner>,
    /// Signalled on every change; list clients diff the store when it fires.
    changes: watch::Sender<()>,
    /// Told the id of every change; a sink whose reader has gone is dropped at the next one.
    sinks: Mutex<Vec<Weak<ChangedIds>>>,
    license: RwLock<LicenseStatus>,
    pub(super) nodes: Arc<NodeAddresses>,
    pub(super) metrics: CdsMetrics,
}

impl ConfigStore {
    pub fn new(metrics: CdsMetrics) -> Self {
        ConfigStore {
            inner: RwLock::default(),
            changes: watch::Sender::new(()),
            sinks: Mutex::default(),
            license: RwLock::default(),
            nodes: Arc::default(),
            metrics,
        }
    }

    /// The node address table the per-node patcher reads; the Node feed fills it.
    pub fn nodes(&self) -> &Arc<NodeAddresses> {
        &self.nodes
    }

    /// Stores `config` under the id in its `admin.name`. Returns the new version, or `None`
    /// when nothing changed (equal after normalisation) or the name is not a `namespace/name`.
    pub fn upsert(&self, config: StunnerConfig) -> Option<Version> {
        let id = ConfigId::parse(&config.admin.name)?;
        // The version is the digest of what the dataplane runs (the config after its
        // normalisation): equal versions, nothing to change. Compared by digest, the store
        // keeps no normalised copy of each config beside the published one.
        let version = Version::of(&config);
        let mut inner = self.inner.write().expect("store lock");
        if inner.configs.get(&id).is_some_and(|s| s.version == version) {
            return None;
        }
        let snapshot = Arc::new(Snapshot::new(id.clone(), version, config, false));
        inner.configs.insert(id.clone(), snapshot.clone());
        Self::notify_topic(&mut inner, &id, snapshot);
        drop(inner);
        self.announce(&id);
        Some(version)
    }

    /// Removes `id`; its single-id clients get the zero config once. Returns whether it existed.
    pub fn delete(&self, id: &ConfigId) -> bool {
        let mut inner = self.inner.write().expect("store lock");
        if inner.configs.remove(id).is_none() {
            return false;
        }
        Self::notify_topic(&mut inner, id, Snapshot::zero(id));
        drop(inner);
        self.announce(id);
        true
    }

    /// Tells every list client and sink that `id` changed, once its new snapshot is stored
    /// and its single-id clients told: whoever wakes for it reads the new version.
    fn announce(&self, id: &ConfigId) {
        self.changes.send_replace(());
        self.sinks.lock().expect("sinks lock").retain(|sink| match sink.upgrade() {
            Some(sink) => {
                sink.add(id);
                true
            }
            None => false,
        });
    }

    /// A new sink, told of every change from now on for as long as the caller holds it.
    pub(crate) fn register_sink(&self) -> Arc<ChangedIds> {
        let sink = Arc::new(ChangedIds::default());
        self.sinks.lock().expect("sinks lock").push(Arc::downgrade(&sink));
        sink
    }

    /// Hands `snapshot` to the single-id clients of its id, if there are any.
    fn notify_topic(inner: &mut Inner, id: &ConfigId, snapshot: Arc<Snapshot>) {
        if let Some(tx) = inner.topics.get(id) {
            tx.send_replace(Some(snapshot));
        }
    }

    pub fn get(&self, id: &ConfigId) -> Option<Arc<Snapshot>> {
        self.inner.read().expect("store lock").configs.get(id).cloned()
    }

    /// Every stored snapshot in `scope`, sorted by id.
    pub fn list(&self, scope: &Scope) -> Vec<Arc<Snapshot>> {
        let inner = self.inner.read().expect("store lock");
        match scope {
            Scope::All => inner.configs.values().cloned().collect(),
            Scope::Namespace(ns) => inner
                .configs
                .range(ConfigId::new(ns.clone(), String::new())..)
                .take_while(|(id, _)| id.namespace == *ns)
                .map(|(_, s)| s.clone())
                .collect(),
            Scope::Config(id) => inner.configs.get(id).cloned().into_iter().collect(),
        }
    }

    /// A receiver of the latest snapshot of `id`, marked as seen, plus the current snapshot.
    pub(super) fn subscribe_id(
        &self,
        id: &ConfigId,
    ) -> (watch::Receiver<Option<Arc<Snapshot>>>, Option<Arc<Snapshot>>) {
        let mut inner = self.inner.write().expect("store lock");
        let current = inner.configs.get(id).cloned();
        let rx = match inner.topics.get(id) {
            Some(tx) => tx.subscribe(),
            None => {
                let tx = watch::Sender::new(current.clone());
                let rx = tx.subscribe();
                inner.topics.insert(id.clone(), tx);
                rx
            }
        };
        (rx, current)
    }

    /// Forgets the topic of `id` once its last client has gone.
    pub(super) fn release_id(&self, id: &ConfigId) {
        let mut inner = self.inner.write().expect("store lock");
        if inner.topics.get(id).is_some_and(|tx| tx.receiver_count() == 0) {
            inner.topics.remove(id);
        }
    }

    /// A receiver that changes whenever any config changes.
    pub fn subscribe_changes(&self) -> watch::Receiver<()> {
        self.changes.subscribe()
    }

    pub(crate) fn license(&self) -> LicenseStatus {
        self.license.read().expect("license lock").clone()
    }

    pub fn set_license(&self, status: LicenseStatus) {
        *self.license.write().expect("license lock") = status;
    }

    /// Number of single-id topics held, for tests of subscription cleanup.
    #[cfg(test)]
    pub(super) fn topic_count(&self) -> usize {
        self.inner.read().expect("store lock").topics.len()
    }
}
