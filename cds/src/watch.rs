//! One client's view of the store: what to send it first and what to send it next.
//!
//! A `Watch` remembers what its client already holds, so it sends each change once and
//! skips any version that was superseded before the client was ready for it.

use super::store::{ConfigStore, Frame, Scope, Snapshot, Variant};
use super::version::Version;
use std::collections::BTreeMap;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use tokio::sync::watch;

/// One config to send a client: a version of a config id, in the form this client gets it
/// (patched for its node where that applies).
#[derive(Debug, Clone)]
pub struct Update {
    pub snapshot: Arc<Snapshot>,
    pub variant: Variant,
}

impl Update {
    fn plain(snapshot: Arc<Snapshot>) -> Self {
        Update { variant: snapshot.plain(), snapshot }
    }

    /// The config JSON, as sent on the WebSocket API.
    pub fn frame(&self) -> &Frame {
        &self.variant.frame
    }
}

/// What a client already holds: configs at these versions are not sent to it again.
pub type Held = BTreeMap<ConfigId, Version>;

/// The store went away (the server is shutting down).
#[derive(Debug)]
pub struct StoreClosed;

pub struct Watch {
    store: Arc<ConfigStore>,
    feed: Feed,
}

enum Feed {
    /// One config id, optionally patched for the client's node.
    One {
        id: ConfigId,
        node: Option<String>,
        rx: watch::Receiver<Option<Arc<Snapshot>>>,
        /// Node address changes, followed only while the client's config is patched for its
        /// node: a watch of any other config costs the node table nothing.
        node_rx: Option<watch::Receiver<()>>,
        last_sent: Option<Sent>,
    },
    /// Every config in a namespace, or all of them; never patched.
    Many { scope: Scope, rx: watch::Receiver<()>, sent: Held },
}

impl Watch {
    /// Subscribes to `scope` and returns the watch with the initial snapshot to send first:
    /// one frame per stored config in scope (none if a single id does not exist yet).
    pub fn new(store: Arc<ConfigStore>, scope: Scope, node: Option<String>) -> (Self, Vec<Frame>) {
        let (watch, initial) = Self::resume(store, scope, node, &Held::new());
        (watch, initial.into_iter().map(|u| u.variant.frame).collect())
    }

    /// [`Self::new`] for a client that already holds some configs: a config in scope at the
    /// version the client holds is not sent; one it holds that is no longer stored is sent as
    /// a deletion (the zero config), unless what it holds is that zero config.
    pub fn resume(store: Arc<ConfigStore>, scope: Scope, node: Option<String>, held: &Held) -> (Self, Vec<Update>) {
        let wanted = |s: &Snapshot| held.get(&s.id) != Some(&s.version);
        let gone = |id: &ConfigId| {
            let held = held.get(id)?;
            let zero = Snapshot::zero(id);
            (*held != zero.version).then(|| Update::plain(zero))
        };
        let (feed, initial) = match scope {
            Scope::Config(id) => {
                let mut node_rx = None;
                let (rx, current) = store.subscribe_id(&id);
                let (last_sent, initial) = match current {
                    Some(s) => {
                        let update = for_node(&store, s, node.as_deref(), &mut node_rx);
                        let sent = Sent::of(&update);
                        (Some(sent), wanted(&update.snapshot).then_some(update))
                    }
                    None => {
                        let deletion = gone(&id);
                        (deletion.as_ref().map(Sent::of), deletion)
                    }
                };
                (Feed::One { id, node, rx, node_rx, last_sent }, initial.into_iter().collect())
            }
            scope => {
                let mut rx = store.subscribe_changes();
                rx.borrow_and_update();
                let current = store.list(&scope);
                let sent = current.iter().map(|s| (s.id.clone(), s.version)).collect::<Held>();
                let mut initial: Vec<Update> = current.into_iter().filter(|s| wanted(s)).map(Update::plain).collect();
                initial.extend(held.keys().filter(|id| scope.matches(id) && !sent.contains_key(*id)).filter_map(gone));
                (Feed::Many { scope, rx, sent }, initial)
            }
        };
        (Watch { store, feed }, initial)
    }

    /// Waits for the next change in scope and returns the frames to send for it.
    pub async fn next(&mut self) -> Result<Vec<Frame>, StoreClosed> {
        let mut updates = Vec::new();
        self.next_updates(&mut updates).await?;
        Ok(updates.into_iter().map(|u| u.variant.frame).collect())
    }

    /// [`Self::next`] with the version of each frame, added to `out` (a session's reused
    /// queue: a push allocates nothing). Cancel-safe: `out` changes only when it returns.
    pub async fn next_updates(&mut self, out: &mut impl Extend<Update>) -> Result<(), StoreClosed> {
        loop {
            match &mut self.feed {
                Feed::One { rx, node_rx, .. } => match node_rx {
                    Some(node_rx) => tokio::select! {
                        r = rx.changed() => r.map_err(|_| StoreClosed)?,
                        r = node_rx.changed() => r.map_err(|_| StoreClosed)?,
                    },
                    None => rx.changed().await.map_err(|_| StoreClosed)?,
                },
                Feed::Many { rx, .. } => rx.changed().await.map_err(|_| StoreClosed)?,
            }
            if self.take_due(out) {
                return Ok(());
            }
        }
    }

    /// [`Self::next_updates`] without waiting, for a fan-out loop that was told this watch's
    /// scope changed: adds what is due now to `out` and says whether there was anything.
    pub fn poll_updates(&mut self, out: &mut impl Extend<Update>) -> Result<bool, StoreClosed> {
        let changed = match &self.feed {
            Feed::One { rx, node_rx, .. } => {
                rx.has_changed().map_err(|_| StoreClosed)?
                    || node_rx.as_ref().map(|n| n.has_changed()).transpose().map_err(|_| StoreClosed)? == Some(true)
            }
            Feed::Many { rx, .. } => rx.has_changed().map_err(|_| StoreClosed)?,
        };
        Ok(changed && self.take_due(out))
    }

    /// After a change was seen: marks it seen and adds what the client must be sent for it to
    /// `out`, if anything.
    fn take_due(&mut self, out: &mut impl Extend<Update>) -> bool {
        match &mut self.feed {
            Feed::One { node, rx, node_rx, last_sent, .. } => {
                let Some(snapshot) = rx.borrow_and_update().clone() else { return false };
                let update = for_node(&self.store, snapshot, node.as_deref(), node_rx);
                if last_sent.as_ref().is_some_and(|sent| sent.is_same(&update)) {
                    return false;
                }
                *last_sent = Some(Sent::of(&update));
                out.extend(Some(update));
                true
            }
            Feed::Many { scope, rx, sent } => {
                rx.borrow_and_update();
                let updates = diff(&self.store.list(scope), sent);
                let due = !updates.is_empty();
                out.extend(updates);
                due
            }
        }
    }

    /// The scope this watch follows.
    pub fn scope(&self) -> Scope {
        match &self.feed {
            Feed::One { id, .. } => Scope::Config(id.clone()),
            Feed::Many { scope, .. } => scope.clone(),
        }
    }

    /// Whether this watch follows the node table (its client's config is patched for its node).
    pub fn has_node(&self) -> bool {
        matches!(&self.feed, Feed::One { node: Some(_), .. })
    }
}

/// `snapshot` as a client on `node` gets it, following the node table in `node_rx` exactly
/// while that client's config is patched for its node.
fn for_node(
    store: &ConfigStore,
    snapshot: Arc<Snapshot>,
    node: Option<&str>,
    node_rx: &mut Option<watch::Receiver<()>>,
) -> Update {
    if node.is_some() && snapshot.is_per_node() {
        // Subscribed (or marked seen) before the table is read: no change is missed.
        node_rx.get_or_insert_with(|| store.nodes.subscribe()).borrow_and_update();
    } else {
        *node_rx = None;
    }
    Update { variant: snapshot.variant_for(node, &store.nodes), snapshot }
}

/// What a single-id client was sent last: a node-address change that leaves its frame as it
/// was is not sent again.
struct Sent {
    version: Version,
    frame: Frame,
}

impl Sent {
    fn of(update: &Update) -> Self {
        Sent { version: update.snapshot.version, frame: update.frame().clone() }
    }

    /// Versions are content digests: a new version always has new bytes, so only the frames
    /// of the same version (patched for another node address) need comparing.
    fn is_same(&self, update: &Update) -> bool {
        self.version == update.snapshot.version && self.frame == *update.frame()
    }
}

/// Updates that bring a list client from `sent` to `current`, updating `sent`: changed and new
/// configs, then the zero config of each id that disappeared.
fn diff(current: &[Arc<Snapshot>], sent: &mut Held) -> Vec<Update> {
    let mut updates: Vec<Update> = current
        .iter()
        .filter(|s| sent.insert(s.id.clone(), s.version) != Some(s.version))
        .map(|s| Update::plain(s.clone()))
        .collect();
    if sent.len() > current.len() {
        let mut live = current.iter().map(|s| &s.id).peekable();
        sent.retain(|id, _| {
            // Both sides are sorted by id: walk them together.
            while live.peek().is_some_and(|l| *l < id) {
                live.next();
            }
            let keep = live.peek() == Some(&id);
            if !keep {
                updates.push(Update::plain(Snapshot::zero(id)));
            }
            keep
        });
    }
    updates
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Feed::One { id, rx, .. } = &mut self.feed {
            // Drop our receiver before asking the store to clean up after the last one.
            *rx = watch::channel(None).1;
            self.store.release_id(id);
        }
    }
}
